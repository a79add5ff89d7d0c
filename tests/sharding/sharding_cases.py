"""Meshes, NamedShardings and device_put on 4 host CPU devices (run by test_sharding.py in a
subprocess with FUNCGRAD_CPU_DEVICES=4)."""
import json
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.sharding import Mesh, NamedSharding, P, SingleDeviceSharding

H = np.arange(32, dtype=np.float32).reshape(4, 8)


@pytest.fixture(scope="module")
def mesh():
    assert funcgrad.local_device_count() == 4
    return funcgrad.make_mesh((2, 2), ("x", "y"))


# spec -> (device id -> (row slice, column slice)) of a (4, 8) array on the 2x2 mesh
CASES = {
    P("x", "y"): {0: ((0, 2), (0, 4)), 1: ((0, 2), (4, 8)), 2: ((2, 4), (0, 4)),
                  3: ((2, 4), (4, 8))},
    P("y", "x"): {0: ((0, 2), (0, 4)), 1: ((2, 4), (0, 4)), 2: ((0, 2), (4, 8)),
                  3: ((2, 4), (4, 8))},
    P("x"): {0: ((0, 2), (0, 8)), 1: ((0, 2), (0, 8)), 2: ((2, 4), (0, 8)),
             3: ((2, 4), (0, 8))},
    P(None, "y"): {0: ((0, 4), (0, 4)), 1: ((0, 4), (4, 8)), 2: ((0, 4), (0, 4)),
                   3: ((0, 4), (4, 8))},
    P(("x", "y")): {0: ((0, 1), (0, 8)), 1: ((1, 2), (0, 8)), 2: ((2, 3), (0, 8)),
                    3: ((3, 4), (0, 8))},
    P(("y", "x"), None): {0: ((0, 1), (0, 8)), 1: ((2, 3), (0, 8)), 2: ((1, 2), (0, 8)),
                          3: ((3, 4), (0, 8))},
    P(): {d: ((0, 4), (0, 8)) for d in range(4)},
}

HLO = {P("x", "y"): "{devices=[2,2]<=[4]}",
       P("x"): "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
       P(None, "y"): "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}",
       P(): "{replicated}"}


@pytest.mark.parametrize("spec", list(CASES), ids=str)
def test_device_put_places_each_block(mesh, spec):
    s = NamedSharding(mesh, spec)
    a = funcgrad.device_put(H, s)
    assert a.sharding == s and a.shape == (4, 8) and a.dtype == np.float32
    want = CASES[spec]
    shards = a.addressable_shards
    assert sorted(sh.device.id for sh in shards) == [0, 1, 2, 3]
    for sh in shards:
        (r0, r1), (c0, c1) = want[sh.device.id]
        assert sh.data.shape == (r1 - r0, c1 - c0) == s.shard_shape(H.shape)
        assert sh.data.device == sh.device
        np.testing.assert_array_equal(np.asarray(sh.data), H[r0:r1, c0:c1])
        assert tuple(ix.indices(n)[:2] for ix, n in zip(sh.index, H.shape)) == ((r0, r1),
                                                                                 (c0, c1))
    np.testing.assert_array_equal(np.asarray(a), H)
    assert a.is_fully_replicated == (spec == P())
    # operations on a sharded Array give the single-device computation's values
    np.testing.assert_allclose(np.asarray(jnp.tanh(a) @ a.T), np.tanh(H) @ H.T, rtol=1e-6)
    if spec in HLO:
        assert str(a.sharding._to_xla_hlo_sharding(2)) == str(a.sharding._hlo_sharding) == HLO[spec]


def test_layouts_equal_jax(mesh):
    # tests/sharding/jax_reference.json: JAX 0.10.2's HloSharding and blocks for these specs
    # (tools/gen_sharding_reference.py); funcgrad's must be the same
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "jax_reference.json")) as f:
        ref = json.load(f)
    shape = tuple(ref["shape"])
    assert len(ref["cases"]) == 9
    for case in ref["cases"]:
        spec = P(*[tuple(p) if isinstance(p, list) else p for p in case["spec"]])
        s = NamedSharding(mesh, spec)
        assert str(s._to_xla_hlo_sharding(len(shape))) == case["hlo"], spec
        got = {str(d.id): [list(ix.indices(n)[:2]) for ix, n in zip(index, shape)]
               for d, index in s.devices_indices_map(shape).items()}
        assert got == case["blocks"], spec
        a = funcgrad.device_put(np.arange(32.0).reshape(shape), s)
        for sh in a.addressable_shards:
            (r0, r1), (c0, c1) = case["blocks"][str(sh.device.id)]
            np.testing.assert_array_equal(np.asarray(sh.data),
                                          np.arange(32.0).reshape(shape)[r0:r1, c0:c1])


def test_reshard_and_round_trips(mesh):
    a = funcgrad.device_put(H, NamedSharding(mesh, P("x", "y")))
    assert funcgrad.device_put(a, NamedSharding(mesh, P("x", "y"))) is a
    b = funcgrad.device_put(a, NamedSharding(mesh, P(None, "x")))
    assert b.sharding.spec == P(None, "x")
    np.testing.assert_array_equal(np.asarray(b), H)
    c = funcgrad.device_put(b, SingleDeviceSharding(funcgrad.local_devices()[2]))
    assert c.device == funcgrad.local_devices()[2]
    np.testing.assert_array_equal(np.asarray(c), H)
    d = funcgrad.device_put(b, funcgrad.local_devices()[1])
    assert d.device.id == 1 and np.array_equal(np.asarray(d), H)


def test_pytrees_scalars_dtypes_and_mesh_context(mesh):
    tree = {"w": np.ones((4, 2), np.int32), "b": np.arange(4.0)}
    with mesh:
        out = funcgrad.device_put(tree, P("x"))
    assert out["w"].sharding.spec == P("x") and out["w"].dtype == np.int32
    assert out["b"].sharding.shard_shape((4,)) == (2,)
    np.testing.assert_array_equal(np.asarray(out["b"]), np.arange(4.0, dtype=np.float32))
    s = funcgrad.device_put(3.0, NamedSharding(mesh, P()))
    assert s.shape == () and s.weak_type and float(s) == 3.0
    # a spec shorter than the rank leaves the trailing dimensions whole
    x = funcgrad.device_put(np.zeros((2, 4, 3)), NamedSharding(mesh, P("y")))
    assert x.sharding.shard_shape(x.shape) == (1, 4, 3)


def test_visualize(mesh, capsys):
    funcgrad.debug.visualize_array_sharding(
        funcgrad.device_put(H, NamedSharding(mesh, P("y", "x"))))
    funcgrad.debug.visualize_array_sharding(
        funcgrad.device_put(np.arange(8.0), NamedSharding(mesh, P("y"))))
    assert capsys.readouterr().out == (
        "+-------+-------+\n| CPU 0 | CPU 2 |\n+-------+-------+\n"
        "| CPU 1 | CPU 3 |\n+-------+-------+\n"
        "+---------+---------+\n| CPU 0,2 | CPU 1,3 |\n+---------+---------+\n")


def test_errors(mesh):
    with pytest.raises(ValueError, match=r"names axis 'z', which Mesh\('x': 2, 'y': 2\)"):
        NamedSharding(mesh, P("x", "z"))
    with pytest.raises(ValueError, match="uses a mesh axis .* more than once"):
        NamedSharding(mesh, P("x", "x"))
    with pytest.raises(TypeError, match="expected a PartitionSpec"):
        NamedSharding(mesh, ("x",))
    with pytest.raises(ValueError, match=r"dimension 1 of shape \(4, 3\) \(size 3\) is not "
                                         r"divisible by 2.*PartitionSpec\(None, 'y'\)"):
        funcgrad.device_put(np.zeros((4, 3)), NamedSharding(mesh, P(None, "y")))
    with pytest.raises(ValueError, match=r"PartitionSpec\('x', 'y'\) \(over Mesh\('x': 2, "
                                         r"'y': 2\)\) has 2 entries, more than the 1 dimensions"):
        funcgrad.device_put(np.zeros(4), NamedSharding(mesh, P("x", "y")))
    with pytest.raises(ValueError, match="needs a mesh"):
        funcgrad.device_put(np.zeros(4), P("x"))
    with pytest.raises(ValueError, match=r"a mesh of shape \(3, 2\) needs 6 devices, but 4"):
        funcgrad.make_mesh((3, 2), ("a", "b"))
    with pytest.raises(ValueError, match=r"shape \(2, 2\) needs 2 axis names, got 1"):
        Mesh(mesh.devices, ("x",))
    with pytest.raises(ValueError, match="repeat a device"):
        Mesh(np.array([mesh.devices[0, 0]] * 2), ("x",))
    with pytest.raises(TypeError, match="expected a device, a list of devices or a sharding"):
        funcgrad.device_put(np.zeros(4), "cpu:0")


def test_mesh_properties(mesh):
    assert mesh.shape == {"x": 2, "y": 2} and mesh.size == 4 and mesh.axis_sizes == (2, 2)
    np.testing.assert_array_equal(mesh.device_ids, [[0, 1], [2, 3]])
    assert mesh == funcgrad.make_mesh((2, 2), ("x", "y")) != funcgrad.make_mesh((4,), ("x",))
    assert NamedSharding(mesh, P("x")) == NamedSharding(mesh, P("x", None))
    assert hash(NamedSharding(mesh, P("x"))) == hash(NamedSharding(mesh, P("x", None)))


def _program(jitted):
    """The partitioned program (``SpmdExecutable``) of a jit's first compiled call."""
    return next(iter(jitted._caches.spmd.values())).program


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def test_jit_with_shardings_matches_one_device(mesh):
    x, w = _rand(8, 6), _rand(6, 4, seed=1)
    f = lambda a, b: jnp.tanh(a @ b).sum(1) + 1.0           # noqa: E731
    g = funcgrad.jit(f, in_shardings=(NamedSharding(mesh, P("x")),
                                      NamedSharding(mesh, P(None, "y"))),
                     out_shardings=NamedSharding(mesh, P("x")))
    r = g(x, w)
    assert r.sharding == NamedSharding(mesh, P("x")) and r.shape == (8,)
    assert [s.data.shape for s in r.addressable_shards] == [(4,)] * 4
    np.testing.assert_allclose(np.asarray(r), np.asarray(funcgrad.jit(f)(x, w)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(r), np.tanh(x @ w).sum(1) + 1.0, rtol=1e-5)
    program = _program(g)
    assert g(x, w).sharding == r.sharding and len(g._caches.spmd) == 1
    # XLA partitioned the program: per-device blocks, the sum over "y" an all-reduce
    hlo = program.as_text()
    assert "f32[4,6]" in hlo and "f32[6,2]" in hlo and "all-reduce" in hlo, hlo


def test_jit_shardings_from_arguments_and_default_replication(mesh):
    x = funcgrad.device_put(_rand(4, 8), NamedSharding(mesh, P("x", "y")))
    g = funcgrad.jit(lambda a: (a * 2.0, a.sum()), out_shardings=(NamedSharding(mesh, P("y")),
                                                                  None))
    doubled, total = g(x)
    assert doubled.sharding.spec == P("y") and total.sharding.spec == P()
    assert total.is_fully_replicated
    np.testing.assert_allclose(np.asarray(doubled), 2 * np.asarray(x), rtol=1e-6)
    np.testing.assert_allclose(float(np.asarray(total)), np.asarray(x).sum(), rtol=1e-5)


def test_jit_with_shardings_errors(mesh):
    other = Mesh(mesh.devices.T, ("x", "y"))
    g = funcgrad.jit(lambda a, b: a + b, in_shardings=(NamedSharding(mesh, P("x")),
                                                       NamedSharding(other, P("x"))))
    with pytest.raises(ValueError, match="must lie on one mesh"):
        g(np.ones(4), np.ones(4))
    # arrays placed on different meshes: both named, with shapes, meshes and specs
    a = funcgrad.device_put(np.ones((4, 2)), NamedSharding(mesh, P("x")))
    b = funcgrad.device_put(np.ones(4), NamedSharding(funcgrad.make_mesh((4,), ("d",)), P("d")))
    with pytest.raises(ValueError, match=r"jit\(<lambda>\): the arguments and out_shardings must "
                       r"lie on one mesh \(a call runs on one mesh\), but argument u \(its own "
                       r"sharding\) of shape \(4, 2\) lies on Mesh\('x': 2, 'y': 2\) as "
                       r"PartitionSpec\('x'\) and argument v "
                       r"\(its own sharding\) of shape \(4,\) lies on Mesh\('d': 4\) as "
                       r"PartitionSpec\('d'\)"):
        funcgrad.jit(lambda u, v: u.sum() + v.sum(), in_shardings=(None, None))(a, b)
    # the argument's position and path, its shape, the mesh and the spec
    k = funcgrad.jit(lambda t: t["w"].sum(), in_shardings=({"w": NamedSharding(mesh, P(None, "y"))},))
    with pytest.raises(ValueError, match=r"jit\(<lambda>\): argument t\['w'\] of shape \(4, 3\) "
                       r"\(float32\): dimension 1 of shape \(4, 3\) \(size 3\) is not divisible "
                       r"by 2, the size of mesh axes \('y',\) of Mesh\('x': 2, 'y': 2\) that "
                       r"PartitionSpec\(None, 'y'\) splits it over"):
        k({"w": np.ones((4, 3), np.float32)})
    with pytest.raises(ValueError, match=r"jit\(<lambda>\): argument t\['w'\] of shape \(6,\) "
                       r"\(float32\): PartitionSpec\(None, 'y'\) \(over Mesh\('x': 2, 'y': 2\)\) "
                       r"has 2 entries, more than the 1 dimensions"):
        k({"w": np.ones(6, np.float32)})
    with pytest.raises(ValueError, match=r"names axis 'model', which Mesh\('x': 2, 'y': 2\) does "
                                         r"not have"):
        funcgrad.jit(lambda t: t, in_shardings=NamedSharding(mesh, P("model")))
    h = funcgrad.jit(lambda a: a, in_shardings=NamedSharding(mesh, P("x", "y")))
    with pytest.raises(ValueError, match=r"dimension 1 of shape \(4, 3\) .* not divisible"):
        h(np.ones((4, 3)))
    with pytest.raises(ValueError, match="one entry per non-static positional argument"):
        funcgrad.jit(lambda a: a, in_shardings=(None, None))(np.ones(4))
    # static/donated arguments and modules with shardings: test_sharded_training.py


def test_with_sharding_constraint_in_jit_eager_and_grad(mesh):
    from funcgrad import lax
    x, w = _rand(8, 4), _rand(4, 6, seed=2)
    row = NamedSharding(mesh, P(("x", "y")))
    col = NamedSharding(mesh, P(None, "y"))

    def f(a, b):
        h = lax.with_sharding_constraint(jnp.tanh(a @ b), col)
        return (h * h).sum()
    g = funcgrad.jit(f, in_shardings=(row, None))
    np.testing.assert_allclose(float(np.asarray(g(x, w))), (np.tanh(x @ w) ** 2).sum(),
                               rtol=1e-5)
    program = _program(g)
    assert "f32[8,3]" in program.as_text()      # h is split over "y" as constrained
    # grad through the constraint (its transpose constrains the cotangent) and vmap over it
    dg = funcgrad.jit(funcgrad.grad(f), in_shardings=(row, None))(x, w)
    np.testing.assert_allclose(np.asarray(dg), np.asarray(funcgrad.grad(f)(x, w)), rtol=1e-5)
    vm = funcgrad.jit(funcgrad.vmap(lambda a: lax.with_sharding_constraint(a * 2, NamedSharding(
        mesh, P("y")))), in_shardings=row)(x)
    np.testing.assert_allclose(np.asarray(vm), 2 * x, rtol=1e-6)
    # inside a single-device jit the constraint changes nothing
    one = funcgrad.jit(lambda a: lax.with_sharding_constraint(a * 2, col).sum())(x)
    np.testing.assert_allclose(float(one), 2 * x.sum(), rtol=1e-5)
    assert one.device == funcgrad.local_devices()[0]
    # eager: placed at once; bad input: a clear error
    e = lax.with_sharding_constraint(jnp.asarray(x), col)
    assert e.sharding.spec == P(None, "y") and np.array_equal(np.asarray(e), x)
    with pytest.raises(ValueError, match=r"with_sharding_constraint: dimension 1 of shape "
                                         r"\(8, 5\)"):
        lax.with_sharding_constraint(jnp.ones((8, 5)), col)


def test_jit_dispatch_fast_path_and_trace_counts(mesh):
    row, col = NamedSharding(mesh, P("x")), NamedSharding(mesh, P(None, "y"))
    params = {"w": funcgrad.device_put(_rand(6, 4), col), "b": funcgrad.device_put(
        np.zeros(4, np.float32), NamedSharding(mesh, P("y")))}
    x = funcgrad.device_put(_rand(8, 6, seed=3), row)

    def step(p, a):
        out = jnp.tanh(a @ p["w"] + p["b"])
        return {"w": p["w"] * 0.5, "b": p["b"] + 1.0}, out
    # pytree-prefix shardings: a dict of shardings for the parameters, one for the output tree
    g = funcgrad.jit(step, in_shardings=({"w": col, "b": NamedSharding(mesh, P("y"))}, row),
                     out_shardings=({"w": col, "b": NamedSharding(mesh, P("y"))}, row))
    p = params
    for i in range(4):
        p, out = g(p, x)
    assert g.trace_count == 1 and len(g._caches.spmd) == 1
    # the first call placed nothing (every leaf laid out as wanted) and filled the fast table;
    # the outputs carry the out_shardings objects (equal shardings, other objects): one more
    # entry, which the later calls hit
    assert len(g._caches.spmd_fast) == 2
    assert p["w"].sharding == col and p["b"].sharding.spec == P("y") and out.sharding == row
    np.testing.assert_allclose(np.asarray(p["w"]), np.asarray(params["w"]) / 16, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(p["b"]), np.full(4, 4.0), rtol=1e-6)
    want = np.tanh(np.asarray(x) @ (np.asarray(params["w"]) / 8) + 3.0)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    # host values and other layouts take the general path: placed, same program, no new trace
    p2, out2 = g(jax_tree_to_host(params), np.asarray(x))
    assert g.trace_count == 1 and out2.sharding == row
    np.testing.assert_allclose(np.asarray(p2["w"]), np.asarray(params["w"]) / 2, rtol=1e-6)
    # a new shape is a new trace
    g(params, funcgrad.device_put(_rand(4, 6), row))
    assert g.trace_count == 2


def jax_tree_to_host(tree):
    return funcgrad.tree_util.tree_map(np.asarray, tree)


def test_programs_without_collectives_run_unserialised(mesh):
    from funcgrad.lowering import spmd
    s = NamedSharding(mesh, P("x", "y"))
    local = funcgrad.jit(lambda a: a * 1.5 + 1.0, in_shardings=s, out_shardings=s)
    total = funcgrad.jit(lambda a: a.sum(), in_shardings=s)
    v = funcgrad.device_put(np.ones((4, 8), np.float32), s)
    local(v), total(v)
    assert not _program(local)._collective
    assert _program(total)._collective       # an all-reduce
    spmd.wait_for_previous_launch()
    for _ in range(3):
        v = local(v)
    assert spmd._last[0] is None      # no collective launch in flight: nothing to wait for
    sums = []
    for _ in range(20):               # many launches in flight, collective ones one at a time
        v = local(local(v) - 1.0) * 0.5
        sums.append(total(v))
    np.testing.assert_allclose([float(np.asarray(t)) for t in sums][-1], float(np.asarray(v).sum()),
                               rtol=1e-6)


def _check_blocks(a, value, sharding):
    assert a.sharding == sharding and a.shape == value.shape
    shards = a.addressable_shards
    assert sorted(s.device.id for s in shards) == sorted(d.id for d in sharding.mesh.local_devices)
    for s in shards:
        assert s.data.device == s.device and s.data.shape == sharding.shard_shape(value.shape)
        np.testing.assert_array_equal(np.asarray(s.data), value[s.index])


def test_device_put_reshards_on_devices(mesh, monkeypatch):
    from funcgrad.lowering import reshard, sharding as sharding_mod
    a = funcgrad.device_put(H, NamedSharding(mesh, P("x", "y")))
    single = funcgrad.device_put(H, funcgrad.local_devices()[3])
    pmapped = funcgrad.pmap(lambda v: v)(H)        # a MappedSharding over the 4 devices

    def no_host(*args, **kwargs):
        raise AssertionError("device_put went through the host")
    monkeypatch.setattr(sharding_mod, "host_value", no_host)
    transposed = Mesh(mesh.devices.T, ("a", "b"))          # the same devices, another order
    line = funcgrad.make_mesh((4,), ("d",))
    targets = [NamedSharding(mesh, P(None, "x")), NamedSharding(mesh, P()),
               NamedSharding(mesh, P(("y", "x"))), NamedSharding(transposed, P("a", "b")),
               NamedSharding(transposed, P(None, ("b", "a"))), NamedSharding(line, P("d"))]
    for target in targets:
        for source in (a, single, pmapped):
            b = funcgrad.device_put(source, target)
            _check_blocks(b, H, target)
            # and back, from the new layout to another one
            _check_blocks(funcgrad.device_put(b, NamedSharding(mesh, P("y"))), H,
                          NamedSharding(mesh, P("y")))
    n = len(reshard._programs)
    funcgrad.device_put(a, targets[0])
    assert len(reshard._programs) == n          # the same move again: no new program
    for d in funcgrad.local_devices():
        for target in (SingleDeviceSharding(d), d):
            for source in (a, funcgrad.device_put(a, NamedSharding(mesh, P())), single):
                c = funcgrad.device_put(source, target)
                assert type(c) is funcgrad.Array and c.device == d
                np.testing.assert_array_equal(np.asarray(c), H)
    # shape errors still name the argument
    with pytest.raises(ValueError, match=r"dimension 1 of shape \(4, 8\) \(size 8\) is not "
                                         r"divisible by 3"):
        funcgrad.device_put(a, NamedSharding(Mesh(np.array(mesh.devices.flat[:3]), ("t",)),
                                             P(None, "t")))


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_sharded_jit_under_grad_and_vmap_keeps_shardings(mesh):
    x, w = _rand(8, 4), _rand(4, 6, seed=4)
    rows, cols = NamedSharding(mesh, P("x")), NamedSharding(mesh, P(None, "y"))

    def f(a, b):
        return (jnp.tanh(a @ b) ** 2).sum()
    sf = funcgrad.jit(f, in_shardings=(rows, cols))
    xs, ws = funcgrad.device_put(x, rows), funcgrad.device_put(w, cols)
    for _ in range(2):
        gx, gw = funcgrad.grad(sf, (0, 1))(xs, ws)
    want = funcgrad.grad(f, (0, 1))(x, w)
    _close(gx, want[0]), _close(gw, want[1])
    # the gradient programs ran over the mesh: each gradient laid out as its argument
    assert gx.sharding == rows and gw.sharding == cols
    assert sf.trace_count == 1          # the second grad reused the constrained body
    v, t = funcgrad.jvp(sf, (xs, ws), (np.ones_like(x), np.zeros_like(w)))
    _close(v, f(x, w)), _close(t, funcgrad.jvp(f, (x, w), (np.ones_like(x), np.zeros_like(w)))[1])
    # vmap: the batch dimension stays whole, the spec moves past it
    g = funcgrad.jit(lambda a: jnp.tanh(a) * 2.0, in_shardings=rows, out_shardings=rows)
    batch = np.stack([x, x + 1.0, x - 1.0])
    out = funcgrad.vmap(g)(batch)
    assert out.sharding.spec == P(None, "x", None)
    _close(out, np.tanh(batch) * 2.0)
    # a single-device jit around it keeps the values (the constraints mean nothing there)
    _close(funcgrad.jit(funcgrad.grad(sf))(x, w), want[0])


def test_shardings_inside_scan_cond_remat_and_nested_jit(mesh):
    x, w = _rand(8, 4), _rand(4, 8, seed=5)
    S = lambda *spec: NamedSharding(mesh, P(*spec))           # noqa: E731
    inner = funcgrad.jit(lambda a: jnp.sin(a) * 2.0, in_shardings=S("x", "y"),
                         out_shardings=S(None, "y"))
    from funcgrad import lax

    def model(a, b, flag):
        # (a cond inside the scan body is left out: grad of such a scan fails without any
        # sharding too, "transpose of mul: both operands are linear")
        def body(c, k):
            c = inner(c) + k
            c = funcgrad.checkpoint(
                lambda v: lax.with_sharding_constraint(jnp.tanh(v), S("y")))(c)
            return c, c.sum()
        c = lax.cond(flag > 0, lambda v: inner(v) * 0.5, lambda v: jnp.cos(v), a @ b)
        c, ys = lax.scan(body, c, jnp.arange(3.0))
        return c, ys

    def loss(a, b, flag):
        c, ys = model(a, b, flag)
        return (c ** 2).sum() + ys.sum()
    step = funcgrad.jit(lambda a, b, flag: (model(a, b, flag), funcgrad.grad(loss, (0, 1))(
        a, b, flag)), in_shardings=(S("x"), S(None, "y"), S()),
        out_shardings=((S("x", "y"), None), (S("x"), S(None, "y"))))
    # the reference: the same computation compiled for one device (constraints mean nothing)
    reference = funcgrad.jit(lambda a, b, flag: (model(a, b, flag), funcgrad.grad(loss, (0, 1))(
        a, b, flag)))
    for flag in (1.0, -1.0):
        (c, ys), (ga, gb) = step(x, w, np.float32(flag))
        (c0, ys0), (ga0, gb0) = reference(x, w, np.float32(flag))
        assert c0.device == funcgrad.local_devices()[0]
        _close(c, c0), _close(ys, ys0), _close(ga, ga0), _close(gb, gb0)
        assert c.sharding.spec == P("x", "y") and ys.sharding.spec == P()
        assert ga.sharding.spec == P("x") and gb.sharding.spec == P(None, "y")
        assert [s.data.shape for s in c.addressable_shards] == [(4, 4)] * 4
    assert step.trace_count == 1
    # the constraint inside the scan body and the nested sharded jit reach XLA's partitioner
    program = _program(step).as_text()
    assert "f32[8,4]" in program, program       # c split over "y" inside the loop


def test_shardy_programs_and_constraints_over_other_meshes(mesh):
    from funcgrad import lax
    x = _rand(8, 4, seed=6)
    rows = NamedSharding(mesh, P("x"))
    transposed = NamedSharding(Mesh(mesh.devices.T, ("a", "b")), P(None, "a"))
    g = funcgrad.jit(lambda a: lax.with_sharding_constraint(jnp.sin(a), transposed) * 2.0,
                     in_shardings=rows, out_shardings=rows)
    out = g(x)
    _close(out, np.sin(x) * 2.0)
    program = _program(g)
    # partitioned by Shardy: one sdy.mesh per mesh named, the other in its device order
    assert 'sdy.mesh @mesh = <["x"=2, "y"=2]>' in program.text
    assert 'sdy.mesh @mesh_1 = <["a"=2, "b"=2], device_ids=[0, 2, 1, 3]>' in program.text
    assert "f32[8,2]" in program.as_text()        # the constrained value split by columns
    three = NamedSharding(Mesh(np.array(mesh.devices.flat[:2]), ("t",)), P("t"))
    with pytest.raises(ValueError, match=r"a sharding over Mesh\('t': 2\) \(devices \[0, 1\]\) "
                                         r"inside a program over devices \[0, 1, 2, 3\]"):
        funcgrad.jit(lambda a: lax.with_sharding_constraint(a, three), in_shardings=rows)(x)


def test_programs_with_gspmd_only_lowerings_fall_back_to_gspmd(mesh, monkeypatch):
    # a lowering that emits GSPMD's sharding custom call inside a Shardy program (as a
    # constraint lowered without knowing about Shardy would): the program goes to GSPMD
    from funcgrad import lax
    from funcgrad.lax import sharding as lax_sharding

    class NoShardy:
        def get(self):
            return None
    monkeypatch.setattr(lax_sharding, "shardy_meshes", NoShardy())
    x = _rand(8, 4, seed=7)
    g = funcgrad.jit(lambda a: lax.with_sharding_constraint(jnp.sin(a), NamedSharding(
        mesh, P(None, "y"))) * 2.0, in_shardings=NamedSharding(mesh, P("x")),
        out_shardings=NamedSharding(mesh, P("x")))
    out = g(x)
    _close(out, np.sin(x) * 2.0)
    program = _program(g)
    assert "sdy.mesh" not in program.text and "mhlo.sharding" in program.text
    assert "f32[8,2]" in program.as_text()
