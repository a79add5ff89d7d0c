"""shard_map on 4 host CPU devices (a 2x2 data x model mesh and a 4-device ring), against the
single-device computation (NumPy) and, when jax is importable, JAX's shard_map on the same
inputs (``tests/sharding/shard_map_reference.json`` holds JAX's values for runs without it).

The device count is fixed when funcgrad makes its client, so this module runs in a subprocess
with FUNCGRAD_CPU_DEVICES=4 (``test_shard_map.py``); its name keeps the main run from
collecting it.
"""
import functools
import json
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.lowering.executable import compile_closed_jaxpr
from funcgrad.sharding import NamedSharding, P

N = 4
pytestmark = pytest.mark.skipif(funcgrad.local_device_count() != N,
                                reason="needs FUNCGRAD_CPU_DEVICES=4 (run by test_shard_map.py)")
HERE = os.path.dirname(os.path.abspath(__file__))
REF_PATH = os.path.join(HERE, "shard_map_reference.json")
REF = json.load(open(REF_PATH)) if os.path.exists(REF_PATH) else {}  # tools/shard_map_reference.py

MESH = funcgrad.make_mesh((2, 2), ("data", "model"))
RING = funcgrad.make_mesh((4,), ("i",))
smap = funcgrad.shard_map


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want, np.float32), rtol=tol,
                               atol=tol)


def blocks_of(x):
    """{device id: block} of a sharded Array."""
    return {s.device.id: np.asarray(s.data) for s in x.addressable_shards}


# --- the cases (shared with tools/shard_map_reference.py, which runs them in JAX) ------------
def matmul_case(mesh_axes=("data", "model")):
    x, w = rand(8, 6, seed=1), rand(6, 4, seed=2)
    return x, w


def blockwise_matmul(x, w):
    # x rows over data, its columns (the contraction) over model; w rows over model
    return lax.psum(x @ w, "model")


def test_blockwise_matmul_psum_over_model():
    x, w = matmul_case()
    f = smap(blockwise_matmul, mesh=MESH, in_specs=(P("data", "model"), P("model", None)),
             out_specs=P("data", None))
    out = f(x, w)
    close(out, x @ w)
    close(out, REF["blockwise_matmul"])
    assert out.shape == (8, 4) and out.sharding == NamedSharding(MESH, P("data", None))
    blocks = blocks_of(out)
    assert {b.shape for b in blocks.values()} == {(4, 4)}
    ids = MESH.device_ids
    for r in range(2):          # data row r holds rows 4r:4r+4 on both model devices
        for c in range(2):
            close(blocks[ids[r, c]], (x @ w)[4 * r:4 * r + 4])


def test_psum_groups_follow_the_mesh():
    # each device contributes its linear index: psum over model groups {0,1},{2,3},
    # over data {0,2},{1,3}, over both every device
    def body(_):
        me = lax.axis_index("data") * 2 + lax.axis_index("model")
        v = me.astype(jnp.float32).reshape(1, 1)
        return (lax.psum(v, "model"), lax.psum(v, "data"), lax.psum(v, ("data", "model")),
                v)
    f = smap(body, mesh=MESH, in_specs=P(), out_specs=P("data", "model"))
    by_model, by_data, both, me = f(np.zeros(1, np.float32))
    np.testing.assert_array_equal(np.asarray(me), [[0, 1], [2, 3]])
    np.testing.assert_array_equal(np.asarray(by_model), [[1, 1], [5, 5]])
    np.testing.assert_array_equal(np.asarray(by_data), [[2, 4], [2, 4]])
    np.testing.assert_array_equal(np.asarray(both), [[6, 6], [6, 6]])


def test_axis_size_and_index_per_mesh_axis():
    def body(x):
        return (x * 0 + lax.axis_size("data") * 10 + lax.axis_size("model"),
                (x * 0 + lax.axis_index("model")).astype(jnp.float32))
    sizes, idx = smap(body, mesh=MESH, in_specs=P("data", "model"),
                      out_specs=P("data", "model"))(np.zeros((2, 4), np.float32))
    np.testing.assert_array_equal(np.asarray(sizes), np.full((2, 4), 22))
    np.testing.assert_array_equal(np.asarray(idx), [[0, 0, 1, 1]] * 2)


def test_all_gather_over_model():
    x = rand(4, 8, seed=3)
    f = smap(lambda b: lax.all_gather(b, "model", axis=1, tiled=True), mesh=MESH,
             in_specs=P("data", "model"), out_specs=P("data", None))
    out = f(x)
    close(out, x)
    untiled = smap(lambda b: lax.all_gather(b, "model"), mesh=MESH,
                   in_specs=P("data", "model"), out_specs=P(None, "data"))(x)
    close(untiled, np.stack(np.split(x, 2, axis=1)))
    close(untiled, REF["all_gather_untiled"])


def test_ppermute_ring():
    x = np.arange(8.0, dtype=np.float32)
    shift = [(i, (i + 1) % N) for i in range(N)]
    out = smap(lambda b: lax.ppermute(b, "i", shift), mesh=RING, in_specs=P("i"),
               out_specs=P("i"))(x)
    close(out, np.roll(x, 2))
    # on the 2x2 mesh a permutation over "model" stays inside each data row
    y = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    swap = smap(lambda b: lax.ppermute(b, "model", [(0, 1), (1, 0)]), mesh=MESH,
                in_specs=P("data", "model"), out_specs=P("data", "model"))(y)
    close(swap, y[:, ::-1])
    close(swap, REF["ppermute_model"])


def test_psum_scatter():
    x = rand(4, 8, seed=4)     # each model device holds a (4, 4) block of columns
    out = smap(lambda b: lax.psum_scatter(b, "model", scatter_dimension=0, tiled=True),
               mesh=MESH, in_specs=P(None, "model"), out_specs=P(("data", "model")))(x)
    # device (d, m) gets rows 2m:2m+2 of the sum of the column blocks; out rows ordered by
    # (data, model), data blocks equal
    total = x[:, :4] + x[:, 4:]
    want = np.concatenate([total[0:2], total[2:4], total[0:2], total[2:4]])
    with pytest.raises(ValueError, match=r"along mesh axes \('model',\)"):
        smap(lambda b: lax.psum_scatter(b, "model", tiled=True), mesh=MESH,
             in_specs=P(None, "model"), out_specs=P())(x)
    # replicated over data: its blocks may also be stacked along model only
    close(smap(lambda b: lax.psum_scatter(b, "model", scatter_dimension=0, tiled=True),
               mesh=MESH, in_specs=P(None, "model"), out_specs=P("model"))(x), total)
    close(out, want)
    close(out, REF["psum_scatter"])


def test_all_to_all():
    x = rand(8, 4, seed=5)
    out = smap(lambda b: lax.all_to_all(b, "i", 1, 0, tiled=True), mesh=RING,
               in_specs=P("i", None), out_specs=P(None, "i"))(x)
    close(out, x)       # rows split -> columns split: the same global array


# --- training --------------------------------------------------------------------------------
def mlp_loss(params, x, y):
    w1, b1, w2 = params
    h = jnp.tanh(x @ w1 + b1)
    return jnp.mean((h @ w2 - y) ** 2)


def mlp_data():
    params = (rand(6, 8, seed=6) * 0.5, rand(8, seed=7) * 0.1, rand(8, 3, seed=8) * 0.5)
    return params, rand(16, 6, seed=9), rand(16, 3, seed=10)


def _np_grads(params, x, y, eps=1e-3):
    p64 = [np.asarray(p, np.float64) for p in params]

    def loss(ps):
        h = np.tanh(x @ ps[0] + ps[1])
        return np.mean((h @ ps[2] - y) ** 2)
    out = []
    for i, p in enumerate(p64):
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            up, dn = [q.copy() for q in p64], [q.copy() for q in p64]
            up[i][idx] += eps
            dn[i][idx] -= eps
            g[idx] = (loss(up) - loss(dn)) / (2 * eps)
        out.append(g)
    return loss(p64), out


def test_data_parallel_grad_outside_and_inside():
    params, x, y = mlp_data()
    ref_loss, ref_g = _np_grads(params, x.astype(np.float64), y.astype(np.float64))
    spec = (P(), P("data"), P("data"))
    ring = funcgrad.make_mesh((4,), ("data",))

    # outside: the gradient of a shard_map loss (pmean into a replicated output)
    loss = smap(lambda p, a, b: lax.pmean(mlp_loss(p, a, b), "data"), mesh=ring,
                in_specs=spec, out_specs=P())
    val, g = funcgrad.value_and_grad(loss)(params, x, y)
    close(val, ref_loss)
    for a, b in zip(g, ref_g):
        close(a, b, 2e-4)
    for a, b in zip(g, REF["dp_grads"]):
        close(a, b)

    # inside, typed (check_vma=True, as JAX 0.10): the gradient of the pmean'd loss is the
    # averaged gradient on every device; that of a device's own loss with respect to the
    # replicated parameters is already the sum of the devices' gradients (pvary's transpose)
    def step(p, a, b):
        lval, gr = funcgrad.value_and_grad(
            lambda q: lax.pmean(mlp_loss(q, a, b), "data"))(p)
        own = funcgrad.grad(mlp_loss)(p, a, b)
        return lval, tuple(q - 0.1 * d for q, d in zip(p, gr)), own
    new_loss, new_params, summed = funcgrad.jit(smap(step, mesh=ring, in_specs=spec,
                                                     out_specs=(P(), P(), P())))(params, x, y)
    close(new_loss, ref_loss)
    for q, p, d, s in zip(new_params, params, ref_g, summed):
        close(q, p - 0.1 * d, 2e-5)
        close(s, 4 * d, 1e-3)

    # unchecked (check_vma=False, JAX's values too): grad is per device, pmean the
    # devices' gradients of their own losses (the usual data-parallel step)
    def old_step(p, a, b):
        lval, gr = funcgrad.value_and_grad(mlp_loss)(p, a, b)
        gr = lax.pmean(gr, "data")
        return lax.pmean(lval, "data"), tuple(q - 0.1 * d for q, d in zip(p, gr))
    new_loss, new_params = funcgrad.jit(smap(old_step, mesh=ring, in_specs=spec,
                                             out_specs=(P(), P()), check_vma=False))(
        params, x, y)
    close(new_loss, ref_loss)
    for q, p, d in zip(new_params, params, ref_g):
        close(q, p - 0.1 * d, 2e-5)


def test_tensor_parallel_grad_on_2x2_mesh():
    # Megatron-style: w1 split by columns over model, w2 by rows; psum over model then mean
    # over data. grad of the whole thing equals the single-device gradient.
    params, x, y = mlp_data()
    w1, b1, w2 = params

    def body(w1b, b1b, w2b, xb, yb):
        h = jnp.tanh(xb @ w1b + b1b)
        pred = lax.psum(h @ w2b, "model")
        return lax.pmean(jnp.mean((pred - yb) ** 2), "data")
    f = smap(body, mesh=MESH, in_specs=(P(None, "model"), P("model"), P("model", None),
                                        P("data"), P("data")), out_specs=P())
    val, g = funcgrad.value_and_grad(lambda *ps: f(*ps, x, y), argnums=(0, 1, 2))(w1, b1, w2)
    ref_loss, ref_g = _np_grads(params, x.astype(np.float64), y.astype(np.float64))
    close(val, ref_loss)
    for a, b in zip(g, ref_g):
        close(a, b, 2e-4)
    for a, b in zip(g, REF["dp_grads"]):
        close(a, b)
    # the same gradient jitted with shardings: the forward and backward shard_maps are
    # manual regions of one program partitioned over the mesh
    shard = [NamedSharding(MESH, s) for s in (P(None, "model"), P("model"), P("model", None))]
    step = funcgrad.jit(funcgrad.grad(lambda *ps: f(*ps, x, y), argnums=(0, 1, 2)),
                        in_shardings=tuple(shard), out_shardings=tuple(shard))
    gj = step(w1, b1, w2)
    for a, b, s in zip(gj, REF["dp_grads"], shard):
        close(a, b)
        assert a.sharding == s
    assert {b.shape for b in blocks_of(gj[0]).values()} == {(6, 4)}
    # the transposed psum/pmean into the replicated loss need no communication (their
    # cotangents are replicated): as in JAX's program, only the forward all-reduces and the
    # gradients' sum over "data" remain (XLA combines those into two all-reduce ops)
    text = next(iter(step._caches.spmd.values())).program.as_text()
    assert text.count("all-reduce(") == 2, text.count("all-reduce(")


def test_psum_into_a_replicated_output_transposes_to_a_broadcast():
    c = rand(2, seed=15)
    f = smap(lambda a: lax.psum(a, "i"), mesh=RING, in_specs=P("i"), out_specs=P())
    g = funcgrad.grad(lambda x: (f(x) * c).sum())(rand(8, seed=16))
    close(g, np.tile(c, 4))
    close(g, REF["psum_transpose"])


# --- transformations -------------------------------------------------------------------------
def test_jit_of_shard_map_and_jit_with_shardings():
    x, w = matmul_case()
    f = smap(blockwise_matmul, mesh=MESH, in_specs=(P("data", "model"), P("model", None)),
             out_specs=P("data", None))
    close(funcgrad.jit(f)(x, w), x @ w)
    close(funcgrad.jit(lambda a, b: f(a, b) * 2 + 1)(x, w), x @ w * 2 + 1)
    # inside a program partitioned by XLA's SPMD partitioner, with other sharded work around
    s_x, s_w = NamedSharding(MESH, P("data", "model")), NamedSharding(MESH, P("model", None))
    g = funcgrad.jit(lambda a, b: jnp.tanh(f(a * 2, b)).sum(1), in_shardings=(s_x, s_w),
                     out_shardings=NamedSharding(MESH, P("data")))
    out = g(x, w)
    close(out, np.tanh((2 * x) @ w).sum(1))
    assert out.sharding.spec == P("data")
    text = next(iter(g._caches.spmd.values())).program.as_text()
    assert "all-reduce" in text and "f32[4,3]" in text    # the (4, 3) blocks of a * 2


def on_one_device(f, *args):
    """``f(*args)`` compiled into one single-device program, each shard_map lowered into it as
    its emulated region (the body batched over the mesh axes): how a jit that also holds a
    ``pmap`` (so runs in pieces) computes a shard_map inside a loop or branch body."""
    closed = funcgrad.make_jaxpr(f)(*args)
    exe = compile_closed_jaxpr(closed, funcgrad.local_devices()[0], "one_device")
    outs = exe(list(closed.consts) + list(args))
    return outs[0] if len(outs) == 1 else outs


def test_shard_map_inside_a_jitted_loop():
    # under plain jit the scan is one program over the mesh (the region inside the loop
    # body); lowered into a single-device program, the values of the emulated region
    x, w = matmul_case()
    f = smap(blockwise_matmul, mesh=MESH, in_specs=(P("data", "model"), P("model", None)),
             out_specs=P("data", None))

    def loop(a, b):
        return lax.scan(lambda c, _: (c + f(a, b), None), jnp.zeros((8, 4)), None, length=2)[0]
    out = funcgrad.jit(loop)(x, w)
    close(out, 2 * (x @ w))
    assert out.sharding == NamedSharding(MESH, P("data"))
    out = on_one_device(loop, x, w)
    close(out, 2 * (x @ w))
    assert len(out.sharding.device_set) == 1


def test_vmap_of_shard_map():
    x = rand(3, 8, 6, seed=11)
    w = rand(6, 4, seed=12)
    f = smap(blockwise_matmul, mesh=MESH, in_specs=(P("data", "model"), P("model", None)),
             out_specs=P("data", None))
    out = funcgrad.vmap(f, in_axes=(0, None))(x, w)
    close(out, x @ w)
    out = funcgrad.vmap(f, in_axes=(1, None), out_axes=1)(x.transpose(1, 0, 2), w)
    close(out, (x @ w).transpose(1, 0, 2))


def test_make_jaxpr_shows_one_equation():
    x, w = matmul_case()
    f = smap(blockwise_matmul, mesh=MESH, in_specs=(P("data", "model"), P("model", None)),
             out_specs=P("data", None))
    jaxpr = funcgrad.make_jaxpr(f)(x, w)
    assert [e.prim.name for e in jaxpr.jaxpr.eqns] == ["shard_map"]
    body = jaxpr.jaxpr.eqns[0].params["jaxpr"]
    assert [a.shape for a in body.in_avals] == [(4, 3), (3, 4)]


def test_closure_and_pytrees():
    bias = np.float32(3.0)
    x = {"a": rand(4, 2, seed=13), "b": rand(4, seed=14)}
    out = smap(lambda t: {"s": t["a"] * t["b"][:, None] + bias}, mesh=RING,
               in_specs=({"a": P("i"), "b": P("i")},), out_specs={"s": P("i")})(x)
    close(out["s"], x["a"] * x["b"][:, None] + 3)


def test_errors():
    x = np.zeros((6, 4), np.float32)
    with pytest.raises(ValueError, match=r"not divisible by 4.*Mesh\('i': 4\)"):
        smap(lambda b: b, mesh=RING, in_specs=P("i"), out_specs=P("i"))(x)
    with pytest.raises(ValueError, match="names axis 'j'"):
        smap(lambda b: b, mesh=RING, in_specs=P("j"), out_specs=P("i"))(np.zeros(4))
    with pytest.raises(ValueError, match="not a pytree prefix"):
        smap(lambda a, b: a, mesh=RING, in_specs=(P("i"),) * 3, out_specs=P("i"))(
            np.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="not a pytree prefix"):
        smap(lambda a: (a, a), mesh=RING, in_specs=P("i"), out_specs=(P("i"),) * 3)(
            np.zeros(4))
    with pytest.raises(ValueError, match=r"output\[1\] \(global shape \(2,\), block shape "
                                         r"\(2,\)\) the spec PartitionSpec\(\).*'i'"):
        smap(lambda a: (a, a * 2), mesh=RING, in_specs=P("i"), out_specs=(P("i"), P()))(
            np.zeros(8))
    with pytest.raises(ValueError, match="check_vma is JAX's newer name"):
        smap(lambda a: a, mesh=RING, in_specs=P(), out_specs=P(), check_rep=True,
             check_vma=False)
    # check_vma=False lets a non-replicated value out as replicated (device 0's block)
    out = smap(lambda a: a * (lax.axis_index("i") + 1), mesh=RING, in_specs=P(), out_specs=P(),
               check_vma=False)(np.ones(2, np.float32))
    assert out.shape == (2,)


def test_partial_manual_axes():
    x, w = matmul_case()
    # only "model" is manual; the data axis is left to the partitioner
    f = smap(lambda a, b: lax.psum(a @ b, "model"), mesh=MESH, axis_names={"model"},
             in_specs=(P(None, "model"), P("model", None)), out_specs=P())
    close(funcgrad.jit(f, in_shardings=(NamedSharding(MESH, P("data", "model")),
                                        NamedSharding(MESH, P("model", None))))(x, w), x @ w)
    close(f(x, w), x @ w)
    with pytest.raises(ValueError, match="not one of the manual axes"):
        smap(lambda a: a, mesh=MESH, axis_names={"model"}, in_specs=P("data"),
             out_specs=P())(x)


# --- the same cases in JAX (run by tools/shard_map_reference.py and live below) ---------------
def jax_values():
    """The reference values, computed with JAX's shard_map on 4 host devices."""
    import jax
    from jax.sharding import PartitionSpec as JP
    devs = np.array(jax.devices()[:4])
    mesh = jax.sharding.Mesh(devs.reshape(2, 2), ("data", "model"))
    ring = jax.sharding.Mesh(devs, ("data",))
    jsmap = functools.partial(jax.shard_map, check_vma=False)
    jl = jax.lax
    x, w = matmul_case()
    out = {"blockwise_matmul": jsmap(lambda a, b: jl.psum(a @ b, "model"), mesh=mesh,
                                     in_specs=(JP("data", "model"), JP("model", None)),
                                     out_specs=JP("data", None))(x, w)}
    xg = rand(4, 8, seed=3)
    out["all_gather_untiled"] = jsmap(lambda b: jl.all_gather(b, "model"), mesh=mesh,
                                      in_specs=JP("data", "model"),
                                      out_specs=JP(None, "data"))(xg)
    y = np.arange(4.0, dtype=np.float32).reshape(2, 2)
    out["ppermute_model"] = jsmap(lambda b: jl.ppermute(b, "model", [(0, 1), (1, 0)]),
                                  mesh=mesh, in_specs=JP("data", "model"),
                                  out_specs=JP("data", "model"))(y)
    out["psum_scatter"] = jsmap(
        lambda b: jl.psum_scatter(b, "model", scatter_dimension=0, tiled=True), mesh=mesh,
        in_specs=JP(None, "model"), out_specs=JP(("data", "model")))(rand(4, 8, seed=4))
    params, xd, yd = mlp_data()
    jnp_ = jax.numpy

    def loss(p, a, b):
        w1, b1, w2 = p
        return jl.pmean(jnp_.mean((jnp_.tanh(a @ w1 + b1) @ w2 - b) ** 2), "data")
    f = jax.shard_map(loss, mesh=ring, in_specs=(JP(), JP("data"), JP("data")), out_specs=JP())
    out["dp_grads"] = list(jax.grad(f)(params, xd, yd))
    ring_i = jax.sharding.Mesh(devs, ("i",))
    fs = jax.shard_map(lambda a: jl.psum(a, "i"), mesh=ring_i, in_specs=JP("i"), out_specs=JP())
    c = rand(2, seed=15)
    out["psum_transpose"] = jax.grad(lambda v: (fs(v) * c).sum())(rand(8, seed=16))
    both = ("data", "model")
    ring4 = [(i, (i + 1) % 4) for i in range(4)]
    two = jsmap(lambda b: (jl.all_gather(b, both, tiled=True),
                           b * 0 + jl.axis_index(both).astype(b.dtype),
                           jl.ppermute(b, both, ring4),
                           jl.psum_scatter(jnp_.tile(b, 4), both, tiled=True)),
                mesh=mesh, in_specs=JP(both), out_specs=(JP(), JP(both), JP(both), JP(both)))(
        np.arange(8.0, dtype=np.float32))
    out["two_axes"] = dict(zip(("all_gather", "axis_index", "ppermute", "psum_scatter"),
                               (np.asarray(t).tolist() for t in two)))
    import shard_map_vma_cases      # grad / jvp inside typed bodies
    out["vma"] = shard_map_vma_cases.jax_cases()

    def plain(v):
        if isinstance(v, dict):
            return v
        if isinstance(v, list):
            return [np.asarray(a).tolist() for a in v]
        return np.asarray(v).tolist()
    return {k: plain(v) for k, v in out.items()}


def test_live_jax_values_match_stored():
    pytest.importorskip("jax")
    live = jax_values()
    for k, v in REF.items():
        if isinstance(v, dict):
            for name in v:
                close(live[k][name], v[name])
        elif isinstance(v[0], list) and k == "dp_grads":
            for a, b in zip(live[k], v):
                close(a, b)
        else:
            close(live[k], v)


def _device_number(b):
    me = lax.axis_index("data") * 2 + lax.axis_index("model")
    return b * 0 + me.astype(b.dtype)


@pytest.mark.parametrize("where", ["eager", "jitted scan", "one device"])
def test_specs_over_two_axes_order_blocks_major_first(where):
    x = np.zeros(8, np.float32)
    want = {("data", "model"): [0, 0, 1, 1, 2, 2, 3, 3],
            ("model", "data"): [0, 0, 2, 2, 1, 1, 3, 3]}
    for axes, expected in want.items():
        f = smap(_device_number, mesh=MESH, in_specs=P(axes), out_specs=P(axes))

        def loop(v):
            return lax.scan(lambda c, _: (f(c), None), v, None, length=1)[0]
        if where == "eager":
            out = f(x)
            assert out.sharding.spec == P(axes)
        elif where == "jitted scan":    # one program over the mesh, the region in the body
            out = funcgrad.jit(loop)(x)
            assert out.sharding.spec == P(axes)
        else:       # lowered into a single-device program: the emulated region
            out = on_one_device(loop, x)
        np.testing.assert_array_equal(np.asarray(out), expected)


def test_no_operands():
    out = smap(lambda: lax.axis_index(("data", "model")).reshape(1), mesh=MESH, in_specs=(),
               out_specs=P(("data", "model")))()
    np.testing.assert_array_equal(np.asarray(out), [0, 1, 2, 3])


def test_axis_index_in_a_partial_manual_region():
    f = smap(lambda b: b * 0 + lax.axis_index("model").astype(b.dtype), mesh=MESH,
             axis_names={"model"}, in_specs=P(None, "model"), out_specs=P(None, "model"))
    x = np.zeros((4, 4), np.float32)
    sx = NamedSharding(MESH, P("data", "model"))
    out = funcgrad.jit(f, in_shardings=(sx,), out_shardings=sx)(x)
    np.testing.assert_array_equal(np.asarray(out), [[0, 0, 1, 1]] * 4)


def _two_axis_collectives(b):
    both = ("data", "model")
    ring = [(i, (i + 1) % 4) for i in range(4)]
    return (lax.all_gather(b, both, tiled=True),
            b * 0 + lax.axis_index(both).astype(b.dtype),
            lax.ppermute(b, both, ring),
            lax.psum_scatter(jnp.tile(b, 4), both, tiled=True))


def test_collectives_over_both_mesh_axes():
    x = np.arange(8.0, dtype=np.float32)
    spec = P(("data", "model"))
    gathered, idx, shifted, scattered = smap(
        _two_axis_collectives, mesh=MESH, in_specs=spec,
        out_specs=(P(), spec, spec, spec))(x)
    close(gathered, x)
    np.testing.assert_array_equal(np.asarray(idx), [0, 0, 1, 1, 2, 2, 3, 3])
    close(shifted, np.roll(x, 2))
    close(scattered, np.tile(x.reshape(4, 2).sum(0), 4))
    for got, name in zip((gathered, idx, shifted, scattered),
                         ("all_gather", "axis_index", "ppermute", "psum_scatter")):
        close(got, REF["two_axes"][name])
    # in a loop body under plain jit they run over the mesh; computed on one device (the
    # emulated region) they are refused
    f = smap(lambda b: lax.all_gather(b, ("data", "model"), tiled=True), mesh=MESH,
             in_specs=spec, out_specs=P())

    def loop(v):
        return lax.scan(lambda c, _: (c, f(c)), v, None, length=1)[1]
    close(funcgrad.jit(loop)(x), x[None])
    with pytest.raises(Exception, match="several axes at once"):
        on_one_device(loop, x)


def test_jvp_second_order_and_grad_in_a_jitted_loop():
    x, w = matmul_case()
    f = smap(blockwise_matmul, mesh=MESH, in_specs=(P("data", "model"), P("model", None)),
             out_specs=P("data", None))

    def loss(a, b):
        return jnp.sum(jnp.tanh(f(a, b)))

    def ref_loss(a, b):
        return jnp.sum(jnp.tanh(a @ b))
    close(funcgrad.jvp(loss, (x, w), (x, w))[1], funcgrad.jvp(ref_loss, (x, w), (x, w))[1],
          1e-4)

    def grad_norm(of):
        return lambda b: jnp.sum(funcgrad.grad(of, argnums=1)(x, b) ** 2)
    close(funcgrad.grad(grad_norm(loss))(w), funcgrad.grad(grad_norm(ref_loss))(w), 1e-4)

    def loop(a, b):     # the forward and backward regions in one program over the mesh
        step = funcgrad.grad(loss, argnums=1)
        return lax.scan(lambda c, _: (c + step(a, b), None), jnp.zeros_like(b), None,
                        length=2)[0]
    close(funcgrad.jit(loop)(x, w), 2 * np.asarray(funcgrad.grad(ref_loss, argnums=1)(x, w)))
