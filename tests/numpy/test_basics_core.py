"""funcgrad.numpy basics against NumPy: creation, elementwise math with broadcasting, reductions
with axis/keepdims, reshape/transpose/concatenate/stack, matmul/dot, where, clip, indexing."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import funcgrad
import funcgrad.numpy as jnp


def close(got, want, rtol=1e-5):
    assert isinstance(got, funcgrad.Array)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=1e-6)


def test_creation():
    close(jnp.zeros((2, 3)), np.zeros((2, 3), np.float32))
    close(jnp.ones(4, "int32"), np.ones(4, np.int32))
    close(jnp.full((2,), 7.0), np.full(2, 7.0, np.float32))
    close(jnp.arange(5), np.arange(5, dtype=np.int32))
    close(jnp.arange(1.0, 2.0, 0.25), np.arange(1.0, 2.0, 0.25, dtype=np.float32))
    close(jnp.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32))
    close(jnp.eye(3, k=1), np.eye(3, k=1, dtype=np.float32))
    close(jnp.array([[1, 2], [3, 4]]), np.array([[1, 2], [3, 4]], np.int32))
    close(jnp.asarray([1.5, 2.5]), np.array([1.5, 2.5], np.float32))
    close(jnp.zeros_like(jnp.ones((2, 2), "int32")), np.zeros((2, 2), np.int32))
    close(jnp.full_like(np.ones(3, np.float32), 2), np.full(3, 2, np.float32))


# Random broadcastable shape pairs; a small pool keeps the number of compiled executables low.
_SHAPES = [(), (1,), (3,), (2, 1), (2, 3), (1, 3), (4, 1, 3)]


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(_SHAPES), st.sampled_from(_SHAPES),
       st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum", "divide"]),
       st.sampled_from(["float32", "int32"]))
def test_binary_broadcasting_hypothesis(s1, s2, name, dtype):
    rng = np.random.default_rng(abs(hash((s1, s2, name, dtype))) % 2**32)
    a = (rng.standard_normal(s1) * 5).astype(dtype)
    b = (np.abs(rng.standard_normal(s2) * 5) + 1).astype(dtype)
    want = getattr(np, name)(a, b)
    if want.dtype == np.float64:
        want = want.astype(np.float32)
    close(getattr(jnp, name)(jnp.asarray(a), jnp.asarray(b)), want)


@pytest.mark.parametrize("fn", ["sum", "prod", "max", "min", "mean", "var", "std", "all", "any",
                                "argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(fn, axis, keepdims, rng):
    x = (rng.standard_normal((2, 3, 4)) + 0.5).astype(np.float32)
    if fn in ("all", "any"):
        x = x > 0.5
    if fn in ("argmax", "argmin"):
        if isinstance(axis, tuple):
            return
        want = getattr(np, fn)(x, axis=axis, keepdims=keepdims).astype(np.int32)
    else:
        want = getattr(np, fn)(x, axis=axis, keepdims=keepdims)
    got = getattr(jnp, fn)(jnp.asarray(x), axis=axis, keepdims=keepdims)
    if want.dtype == np.float64:
        want = want.astype(np.float32)
    close(got, want, rtol=1e-4)


def test_integer_sum_and_mean_dtypes():
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    assert jnp.sum(jnp.asarray(x)).dtype == np.int32          # small ints accumulate as int32
    assert jnp.mean(jnp.asarray(x)).dtype == np.float32
    close(jnp.cumsum(jnp.asarray(x), axis=1), np.cumsum(x, axis=1).astype(np.int32))


def test_shape_ops(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    j = jnp.asarray(x)
    close(jnp.reshape(j, (6, -1)), x.reshape(6, -1))
    close(j.reshape(4, 6), x.reshape(4, 6))
    close(jnp.transpose(j, (2, 0, 1)), x.transpose(2, 0, 1))
    close(j.T, x.T)
    close(jnp.swapaxes(j, 0, 2), np.swapaxes(x, 0, 2))
    close(jnp.moveaxis(j, 0, -1), np.moveaxis(x, 0, -1))
    close(jnp.concatenate([j, j], axis=1), np.concatenate([x, x], axis=1))
    close(jnp.stack([j, j], axis=-1), np.stack([x, x], axis=-1))
    close(jnp.squeeze(jnp.asarray(x[:, :1])), np.squeeze(x[:, :1]))
    close(jnp.expand_dims(j, 1), np.expand_dims(x, 1))
    close(jnp.ravel(j), x.ravel())
    close(jnp.broadcast_to(jnp.asarray(x[0, 0]), (3, 4)), np.broadcast_to(x[0, 0], (3, 4)))
    close(jnp.flip(j, 1), np.flip(x, 1))


def test_products(rng):
    a = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    v = rng.standard_normal(3).astype(np.float32)
    close(jnp.matmul(jnp.asarray(a), jnp.asarray(b)), a @ b)
    close(jnp.dot(jnp.asarray(a), jnp.asarray(v)), a @ v)
    close(jnp.dot(jnp.asarray(v), jnp.asarray(v)), np.dot(v, v))
    bb = rng.standard_normal((2, 3, 4)).astype(np.float32)
    close(jnp.asarray(a) @ jnp.asarray(bb), a @ bb)
    close(jnp.einsum("ij,jk->ik", jnp.asarray(a), jnp.asarray(b)), a @ b)
    close(jnp.outer(jnp.asarray(v), jnp.asarray(v)), np.outer(v, v))


def test_where_clip_and_math(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    j = jnp.asarray(x)
    close(jnp.where(j > 0, j, 0.0), np.where(x > 0, x, 0.0).astype(np.float32))
    close(jnp.where(j > 0, 1, -1), np.where(x > 0, 1, -1).astype(np.int32))
    close(jnp.clip(j, -0.5, 0.5), np.clip(x, -0.5, 0.5))
    close(jnp.clip(j, max=0.1), np.minimum(x, np.float32(0.1)))
    close(jnp.exp(j), np.exp(x))
    close(jnp.tanh(j), np.tanh(x))
    close(jnp.sqrt(jnp.abs(j)), np.sqrt(np.abs(x)))
    close(jnp.floor_divide(jnp.arange(7), 2), np.arange(7, dtype=np.int32) // 2)
    close(jnp.remainder(jnp.asarray(np.array([-7, 7], np.int32)), 3), np.array([2, 1], np.int32))
    close(jnp.exp(jnp.arange(3)), np.exp(np.arange(3)).astype(np.float32))    # ints -> float


def test_basics_under_jit_match_eager(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)

    def f(a):
        b = jnp.concatenate([a, a[::-1]], 0).reshape(4, 6)
        return jnp.where(b > 0, b, 0.1 * b).sum(axis=0, keepdims=True) @ jnp.ones((6, 2))

    eager = f(jnp.asarray(x))
    jitted = funcgrad.jit(f)(x)
    np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-5)


def test_numpy_errors_name_function_and_shapes():
    with pytest.raises(ValueError, match=r"concatenate.*\(2, 3\).*\(2, 4\)|axis"):
        jnp.concatenate([jnp.ones((2, 3)), jnp.ones((2, 4))], axis=0)
    with pytest.raises(ValueError, match=r"sum.*axis 3.*rank 2|out of bounds"):
        jnp.sum(jnp.ones((2, 3)), axis=3)
    with pytest.raises((TypeError, ValueError), match=r"reshape.*\(2, 3\)|size 6"):
        jnp.reshape(jnp.ones((2, 3)), (4, 2))


@pytest.mark.parametrize("sa,sb", [((3, 4, 5), (5, 6)), ((2, 1, 3, 4), (4, 2)), ((3, 4), (2, 4, 6)),
                                   ((3, 4), (7, 2, 4, 6)), ((5,), (2, 5, 6)), ((2, 3, 4), (4,)),
                                   ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (2, 4, 5))])
def test_matmul_broadcast_shapes_values_and_grads(x64, sa, sb):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    np.testing.assert_allclose(np.asarray(jnp.matmul(a, b)), np.matmul(a, b), rtol=1e-12)
    # gradient of sum(w * (a @ b)) is (w @ b^T, a^T @ w) summed over broadcast axes
    w = rng.standard_normal(np.matmul(a, b).shape)
    ga, gb = funcgrad.grad(lambda p, q: jnp.sum(jnp.asarray(w) * jnp.matmul(p, q)),
                           argnums=(0, 1))(a, b)
    eps = 1e-6
    for g, x, k in ((ga, a, 0), (gb, b, 1)):
        flat = x.reshape(-1)
        for i in range(0, flat.size, max(1, flat.size // 5)):
            d = np.zeros_like(flat)
            d[i] = eps
            args = [a, b]
            args[k] = (flat + d).reshape(x.shape)
            hi = np.sum(w * np.matmul(*args))
            args[k] = (flat - d).reshape(x.shape)
            lo = np.sum(w * np.matmul(*args))
            np.testing.assert_allclose(np.asarray(g).reshape(-1)[i], (hi - lo) / (2 * eps),
                                       rtol=1e-6, atol=1e-8)


def test_matmul_with_a_matrix_does_not_broadcast_it():
    # (..., m, k) @ (k, n): the matrix is contracted as it is, so its gradient is one product
    # over all leading axes, not a batched product summed over a broadcast copy.
    x = jnp.ones((35, 32, 64))
    w = jnp.ones((64, 16))
    jaxpr = funcgrad.make_jaxpr(funcgrad.grad(lambda w: jnp.sum(jnp.matmul(x, w))))(w)
    names = [e.prim.name for e in jaxpr.jaxpr.eqns]
    assert "broadcast_in_dim" not in [e.prim.name for e in jaxpr.jaxpr.eqns
                                      if e.outvars[0].aval.shape == (35, 64, 16)], names
    dots = [e for e in jaxpr.jaxpr.eqns if e.prim.name == "dot_general"]
    assert dots and all(e.params["dimension_numbers"][1] == ((), ()) for e in dots), names
