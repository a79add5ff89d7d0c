"""Eager operations on mesh-placed arrays on 4 host CPU devices (run by
test_eager_sharded.py in a subprocess with FUNCGRAD_CPU_DEVICES=4): each runs as one program
over the mesh and returns an array laid out there, with NumPy's values."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.lowering import eager_partitioned
from funcgrad.sharding import NamedSharding, P

A = (np.arange(32, dtype=np.float32).reshape(4, 8) - 10.0) / 7.0
B = np.cos(np.arange(32, dtype=np.float32)).reshape(4, 8)


@pytest.fixture(scope="module")
def mesh():
    assert funcgrad.local_device_count() == 4
    return funcgrad.make_mesh((2, 2), ("x", "y"))


def _on_mesh(a, sharding):
    assert isinstance(a.sharding, NamedSharding) and a.sharding.mesh == sharding.mesh, \
        a.sharding
    assert len(a.addressable_shards) == 4


@pytest.mark.parametrize("spec", [P("x", "y"), P("y"), P(None, ("x", "y")), P()], ids=str)
def test_elementwise_keeps_the_layout(mesh, spec):
    s = NamedSharding(mesh, spec)
    x = funcgrad.device_put(A, s)
    for got, want in ((x * 2.0 + 1.0, A * 2 + 1), (jnp.sin(x) - x, np.sin(A) - A),
                      (jnp.maximum(x, 0.0), np.maximum(A, 0)), (-x, -A)):
        _on_mesh(got, s)
        assert got.sharding == s
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)
        for shard in got.addressable_shards:          # each device holds its own block
            np.testing.assert_allclose(np.asarray(shard.data), want[shard.index], rtol=1e-6,
                                       atol=1e-6)


def test_reductions_products_and_indexing(mesh):
    s = NamedSharding(mesh, P("x", "y"))
    x, y = funcgrad.device_put(A, s), funcgrad.device_put(B, s)
    cases = [(x.sum(), A.sum()), (jnp.max(x, axis=1), A.max(1)), (x.mean(0), A.mean(0)),
             (x @ y.T, A @ B.T), (x.T, A.T), (x[1:3, ::2], A[1:3, ::2]),
             (jnp.concatenate([x, y], 0), np.concatenate([A, B], 0)),
             (jnp.where(x > 0, x, y), np.where(A > 0, A, B)), (x.reshape(8, 4), A.reshape(8, 4))]
    for got, want in cases:
        _on_mesh(got, s)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    assert x.T.sharding.spec == P("y", "x") and x.sum().sharding.is_fully_replicated


def test_mixed_operands_layouts_scalars_and_host_values(mesh):
    row, col = NamedSharding(mesh, P("x")), NamedSharding(mesh, P(None, "y"))
    x, y = funcgrad.device_put(A, row), funcgrad.device_put(B, col)
    for got, want in ((x + y, A + B), (x * np.float32(3), A * 3), (x + B[0], A + B[0]),
                      (x - jnp.ones(8), A - 1), (lax.add(2.0, x), A + 2)):
        _on_mesh(got, row)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_eager_grad_and_vmap_of_mesh_arrays(mesh):
    s = NamedSharding(mesh, P("x", "y"))
    x = funcgrad.device_put(A, s)
    f = lambda v: (jnp.sin(v) ** 2 * 3.0).sum()
    g = funcgrad.grad(f)(x)
    _on_mesh(g, s)
    np.testing.assert_allclose(np.asarray(g), 6 * np.sin(A) * np.cos(A), rtol=1e-5, atol=1e-6)
    value, tangent = funcgrad.jvp(jnp.tanh, (x,), (funcgrad.device_put(B, s),))
    np.testing.assert_allclose(np.asarray(tangent), B / np.cosh(A) ** 2, rtol=1e-5, atol=1e-6)
    rows = funcgrad.vmap(lambda r: r / jnp.linalg.norm(r))(x)
    np.testing.assert_allclose(np.asarray(rows), A / np.linalg.norm(A, axis=1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_operations_reuse_their_programs(mesh):
    s = NamedSharding(mesh, P("x", "y"))
    x = funcgrad.device_put(A, s)
    _ = x * 2.0
    mul = [fn for (prim, _), fn in eager_partitioned._ops.items() if prim.name == "mul"]
    assert len(mul) == 1
    count = mul[0].trace_count
    for _ in range(3):
        x = x * 2.0
    assert mul[0].trace_count == count
    np.testing.assert_allclose(np.asarray(x), A * 8, rtol=1e-6)


def test_pmap_outputs_keep_their_behaviour(mesh):
    y = funcgrad.pmap(lambda v: v * 2.0)(A)
    z = y + 1.0                         # a pmap's output is not a mesh layout
    np.testing.assert_allclose(np.asarray(z), A * 2 + 1, rtol=1e-6)
