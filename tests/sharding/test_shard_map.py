"""Runs ``shard_map_cases.py`` on 4 host CPU devices in a subprocess (the device count is fixed
when funcgrad makes its client), and the checks of shard_map that one device allows here."""
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.sharding import P

HERE = os.path.dirname(os.path.abspath(__file__))


def test_shard_map_cases_on_four_host_devices(run_on_four_devices):
    # with them, a plain jit of functions holding shard_maps (one program over the mesh)
    proc = run_on_four_devices(os.path.join(HERE, "shard_map_cases.py"),
                               os.path.join(HERE, "jit_shard_map_cases.py"), allow_skips=True)
    tail = (proc.stdout + proc.stderr)[-4000:]
    # the only test that may skip is the live comparison with JAX (when jax is not installed)
    skipped = [ln for ln in proc.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert all("jax" in ln for ln in skipped), tail


def _mesh():
    return funcgrad.make_mesh((1,), ("x",), devices=funcgrad.local_devices()[:1])


def test_one_device_mesh_values_grad_vmap():
    mesh = _mesh()
    f = funcgrad.shard_map(lambda a, b: lax.psum(a * b, "x"), mesh=mesh,
                           in_specs=(P("x"), P()), out_specs=P())
    x = np.arange(4.0, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(f(x, 2.0)), 2 * x)
    g = funcgrad.grad(lambda a: f(a, 3.0).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.full(4, 3.0))
    v = funcgrad.vmap(f, in_axes=(0, None))(np.stack([x, x + 1]), 2.0)
    np.testing.assert_allclose(np.asarray(v), 2 * np.stack([x, x + 1]))
    np.testing.assert_allclose(np.asarray(funcgrad.jit(f)(x, 1.0)), x)
    # eager calls with the same signature reuse the staged body and its compiled program
    from funcgrad.lowering.shard_map_primitive import _programs
    f(x, 5.0)
    body = next(iter(f._traces.values()))[0]
    assert len(f._traces) == 1 and len(_programs[body]) == 1


def test_one_device_jaxpr_and_errors():
    mesh = _mesh()
    f = funcgrad.shard_map(lambda a: a * lax.axis_size("x"), mesh=mesh, in_specs=P("x"),
                           out_specs=P("x"))
    jaxpr = funcgrad.make_jaxpr(f)(jnp.ones(3))
    assert [e.prim.name for e in jaxpr.jaxpr.eqns] == ["shard_map"]
    assert "in_specs=(PartitionSpec('x'),)" in str(jaxpr)
    with pytest.raises(ValueError, match="names axis 'y'.*its axes: \\('x',\\)"):
        funcgrad.shard_map(lambda a: a, mesh=mesh, in_specs=P("y"), out_specs=P())(jnp.ones(2))
    with pytest.raises(ValueError, match="axis_names names \\['y'\\]"):
        funcgrad.shard_map(lambda a: a, mesh=mesh, in_specs=P(), out_specs=P(),
                           axis_names={"y"})
    with pytest.raises(ValueError, match="no mesh"):
        funcgrad.shard_map(lambda a: a, in_specs=P(), out_specs=P())
    with mesh:      # the mesh of `with mesh:` is the default
        out = funcgrad.shard_map(lambda a: a + 1, in_specs=P(), out_specs=P())(jnp.ones(2))
    np.testing.assert_allclose(np.asarray(out), [2.0, 2.0])
    with pytest.raises(ValueError, match="more than its 1 dimensions"):
        funcgrad.shard_map(lambda a: a, mesh=mesh, in_specs=P("x", None),
                           out_specs=P())(jnp.ones(2))
    with pytest.raises(NameError, match="'z'"):
        funcgrad.shard_map(lambda a: lax.psum(a, "z"), mesh=mesh, in_specs=P(),
                           out_specs=P())(jnp.ones(2))


def test_replication_check_through_loops_and_branches():
    mesh = _mesh()

    def check(body, out_specs=P()):
        return funcgrad.shard_map(body, mesh=mesh, in_specs=P("x"), out_specs=out_specs)(
            jnp.arange(4.0))

    def summed_in_scan(b):
        return lax.scan(lambda c, _: (c + lax.psum(b, "x"), None), jnp.zeros_like(b), None,
                        length=2)[0]
    np.testing.assert_allclose(np.asarray(check(summed_in_scan)), 2 * np.arange(4.0))

    def varied_in_scan(b):      # replicated at first, varying after one iteration
        return lax.scan(lambda c, _: (c + lax.axis_index("x"), None), 0, None, length=2)[0]
    with pytest.raises(ValueError, match=r"output \(global shape \(\), block shape \(\)\)"):
        check(varied_in_scan)

    def varying_trip_count(b):
        return lax.while_loop(lambda c: c[0] < b[0], lambda c: (c[0] + 1, c[1]),
                              (0.0, lax.psum(b, "x")))[1]
    with pytest.raises(ValueError, match="varies over them"):
        check(varying_trip_count)

    def replicated_branch(b):
        total = lax.psum(b, "x")
        return lax.cond(total.sum() > 0, lambda v: v * 2, lambda v: v, total)
    np.testing.assert_allclose(np.asarray(check(replicated_branch)), 2 * np.arange(4.0))
    with pytest.raises(ValueError, match="varies over them"):
        check(lambda b: lax.cond(b.sum() > 0, lambda v: lax.psum(v, "x"), lambda v: v, b))
    # check_rep=False lets it through
    out = funcgrad.shard_map(varied_in_scan, mesh=mesh, in_specs=P("x"), out_specs=P(),
                             check_rep=False)(jnp.arange(4.0))
    assert int(out) == 0


def test_typed_bodies_on_four_host_devices(run_on_four_devices):
    # grad / jvp inside shard_map bodies typed by their varying manual axes (check_vma)
    proc = run_on_four_devices(os.path.join(HERE, "shard_map_vma_cases.py"), allow_skips=True)
    tail = (proc.stdout + proc.stderr)[-4000:]
    skipped = [ln for ln in proc.stdout.splitlines() if ln.startswith("SKIPPED")]
    assert all("jax" in ln for ln in skipped), tail
