"""pmap, the sharded Array and the collectives on 4 host CPU devices.

The device count is fixed when funcgrad makes its client, so this module runs in a subprocess
with FUNCGRAD_CPU_DEVICES=4 (``test_pmap.py``); its name keeps the main run from collecting it.
"""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.lowering.sharding import ShardedArray, shard_value

N = 4
pytestmark = pytest.mark.skipif(funcgrad.local_device_count() != N,
                                reason="needs FUNCGRAD_CPU_DEVICES=4 (run by test_pmap.py)")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_devices():
    assert funcgrad.local_device_count() == N
    assert funcgrad.process_index() == 0 and funcgrad.process_count() == 1
    assert len({d.id for d in funcgrad.local_devices()}) == N


@pytest.mark.parametrize("name,ref", [("psum", np.sum), ("pmean", np.mean), ("pmax", np.max),
                                      ("pmin", np.min)])
def test_allreduce_matches_numpy(name, ref):
    x = rand(N, 3, 2)
    out = funcgrad.pmap(lambda v: getattr(lax, name)(v, "i"), axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), np.broadcast_to(ref(x, 0), x.shape), rtol=1e-6)


def test_psum_int_and_pmax_bool():
    x = np.arange(N * 2, dtype=np.int32).reshape(N, 2)
    out = funcgrad.pmap(lambda v: lax.psum(v, "i"), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(x.sum(0), x.shape))
    b = np.array([False, True, False, False])
    out = funcgrad.pmap(lambda v: lax.pmax(v, "i"), axis_name="i")(b)
    np.testing.assert_array_equal(np.asarray(out), [True] * N)


@pytest.mark.parametrize("axis,tiled", [(0, False), (1, False), (0, True), (1, True)])
def test_all_gather(axis, tiled):
    x = rand(N, 3, 2)
    out = funcgrad.pmap(lambda v: lax.all_gather(v, "i", axis=axis, tiled=tiled), axis_name="i")(x)
    per = np.concatenate(list(x), axis) if tiled else np.stack(list(x), axis)
    np.testing.assert_allclose(np.asarray(out), np.stack([per] * N), rtol=0)


def test_axis_index_size_and_ppermute():
    x = np.arange(N, dtype=np.float32) + 10
    idx = funcgrad.pmap(lambda v: lax.axis_index("i") * lax.axis_size("i"), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(idx), np.arange(N) * N)
    perm = [(i, (i + 1) % N) for i in range(N)]
    out = funcgrad.pmap(lambda v: lax.ppermute(v, "i", perm), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(out), np.roll(x, 1))
    partial = funcgrad.pmap(lambda v: lax.ppermute(v, "i", [(0, 3)]), axis_name="i")(x)
    np.testing.assert_array_equal(np.asarray(partial), [0, 0, 0, 10])


def test_in_out_axes_and_pytrees():
    x, w = rand(3, N), rand(3)
    out = funcgrad.pmap(lambda d: {"y": d["x"] * d["w"], "s": jnp.sum(d["w"])},
                        in_axes=({"x": 1, "w": None},), out_axes={"y": 1, "s": None})(
        {"x": x, "w": w})
    np.testing.assert_allclose(np.asarray(out["y"]), x * w[:, None], rtol=1e-6)
    assert out["s"].shape == () and out["s"].is_fully_replicated
    np.testing.assert_allclose(float(out["s"]), w.sum(), rtol=1e-6)


def test_static_broadcasted_argnums_and_cache():
    calls = []

    def f(x, k):
        calls.append(k)
        return x * k
    g = funcgrad.pmap(f, static_broadcasted_argnums=1)
    x = rand(N, 2)
    np.testing.assert_allclose(np.asarray(g(x, 3)), x * 3, rtol=1e-6)
    g(x + 1, 3)
    np.testing.assert_allclose(np.asarray(g(x, 5)), x * 5, rtol=1e-6)
    assert calls == [3, 5]           # staged once per static value, not per call


def test_one_program_over_all_devices():
    g = funcgrad.pmap(lambda v: lax.psum(v, "i"), axis_name="i")
    g(rand(N))
    exe = next(iter(g._cache.values()))[0]
    assert len(exe.devices) == N and "all-reduce" in exe.as_text()
    assert "replica_count=4" in exe.as_text()


def test_sharded_array_shards_and_in_place_feed():
    x = rand(N, 3)
    y = funcgrad.pmap(lambda v: v * 2)(x)
    assert isinstance(y, funcgrad.Array) and isinstance(y, ShardedArray)
    assert y.shape == (N, 3) and not y.is_fully_replicated
    assert y.devices() == set(funcgrad.local_devices())
    shards = y.addressable_shards
    assert [s.device for s in shards] == funcgrad.local_devices()
    for i, s in enumerate(shards):
        assert s.index == (slice(i, i + 1), slice(None))
        np.testing.assert_allclose(np.asarray(s.data), 2 * x[i:i + 1], rtol=1e-6)
    # fed back into pmap over the same devices: the same buffers, no copy
    assert shard_value(y, tuple(funcgrad.local_devices()), 0)._buf is y._buf
    ptrs = [s.data._buf.unsafe_buffer_pointer() for s in shards]
    assert ptrs == [b.unsafe_buffer_pointer() for b in y._buf._arrays]
    z = funcgrad.pmap(lambda v: v + 1)(y)
    np.testing.assert_allclose(np.asarray(z), 2 * x + 1, rtol=1e-6)


def test_sharded_array_host_and_eager_use():
    x = rand(N, 3)
    y = funcgrad.pmap(lambda v: v * 2)(x)
    y.block_until_ready()
    np.testing.assert_allclose(np.asarray(y[1]), 2 * x[1], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(y + 1), 2 * x + 1, rtol=1e-6)
    np.testing.assert_allclose(float(jnp.sum(y)), 2 * x.sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(lambda a: a @ a.T)(y)),
                               4 * x @ x.T, rtol=1e-5)
    assert "Array(" in repr(y) and str(np.round(2 * x[0, 0], 2))[:3] in str(y)
    with pytest.raises(ValueError, match="devices"):
        y.device


def test_device_put_sharded_and_replicated():
    devs = funcgrad.local_devices()
    x = funcgrad.device_put_sharded([np.full(2, i, np.float32) for i in range(N)], devs)
    assert x.shape == (N, 2) and [s.device for s in x.addressable_shards] == devs
    np.testing.assert_array_equal(np.asarray(x), np.repeat(np.arange(N), 2).reshape(N, 2))
    on_dev = [funcgrad.device_put(np.full(2, i, np.float32), d) for i, d in enumerate(devs)]
    x2 = funcgrad.device_put_sharded(on_dev, devs)
    np.testing.assert_array_equal(np.asarray(x2), np.asarray(x))
    r = funcgrad.device_put_replicated({"w": np.arange(3.0)}, devs)
    assert r["w"].shape == (N, 3)
    np.testing.assert_array_equal(np.asarray(r["w"]), np.tile(np.arange(3.0), (N, 1)))
    rep = funcgrad.device_put(np.arange(2.0), devs)
    assert rep.is_fully_replicated and rep.devices() == set(devs)
    np.testing.assert_array_equal(np.asarray(rep), np.arange(2.0))
    out = funcgrad.pmap(lambda a, b: a + b, in_axes=(0, None))(x, rep)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + np.arange(2.0))


def _loss(w, x, t):
    return jnp.mean((jnp.tanh(x @ w) - t) ** 2)


def test_pmap_of_grad_equals_full_batch_grad():
    w, x, t = rand(3, 2, seed=1), rand(N * 5, 3, seed=2), rand(N * 5, 2, seed=3)
    step = funcgrad.pmap(lambda w, xb, tb: lax.pmean(funcgrad.grad(_loss)(w, xb, tb), "d"),
                         axis_name="d", in_axes=(None, 0, 0))
    g = step(w, x.reshape(N, 5, 3), t.reshape(N, 5, 2))
    full = funcgrad.grad(_loss)(jnp.asarray(w), jnp.asarray(x), jnp.asarray(t))
    for i in range(N):
        np.testing.assert_allclose(np.asarray(g)[i], np.asarray(full), rtol=1e-5, atol=1e-6)


def test_grad_of_pmap_and_jvp():
    x = rand(N, 3)

    def total(v):
        y = funcgrad.pmap(lambda a: a * lax.psum(a, "i"), axis_name="i")(v)
        return jnp.sum(y)
    g = funcgrad.grad(total)(jnp.asarray(x))
    # d/dx_k sum_i x_i * S = S + sum_i x_i  (S = sum over devices, per column)
    s = x.sum(0)
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(2 * s, x.shape), rtol=1e-5)
    _, t = funcgrad.jvp(funcgrad.pmap(lambda a: jnp.sin(a)), (jnp.asarray(x),),
                        (jnp.ones_like(jnp.asarray(x)),))
    np.testing.assert_allclose(np.asarray(t), np.cos(x), rtol=1e-5)


def test_pmap_of_vmap_equals_vmap_of_vmap():
    x = rand(N, 3, 2)

    def body(v):
        return lax.psum(v, ("i", "j")) + lax.pmax(v, "j") * lax.axis_index("i")
    inner = funcgrad.vmap(body, axis_name="j")
    got = funcgrad.pmap(inner, axis_name="i")(x)
    want = funcgrad.vmap(inner, axis_name="i")(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_vmap_of_pmap():
    x = rand(2, N, 3)
    got = funcgrad.vmap(funcgrad.pmap(lambda v: v - lax.pmean(v, "i"), axis_name="i"))(
        jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), x - x.mean(1, keepdims=True), rtol=1e-5,
                               atol=1e-6)


def test_jit_and_control_flow_inside():
    x = rand(N, 3)

    def body(v):
        v = funcgrad.jit(lambda a: a * 2)(v)
        v = lax.fori_loop(0, 3, lambda i, a: a + lax.psum(a, "i") * 0.1, v)
        c, ys = lax.scan(lambda c, a: (c + a, c * a), jnp.float32(0), v)
        return lax.cond(lax.axis_index("i") % 2 == 0, lambda: c + ys.sum(), lambda: -c)
    got = funcgrad.pmap(body, axis_name="i")(x)
    want = funcgrad.vmap(body, axis_name="i")(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_random_keys_split_per_device():
    keys = funcgrad.random.split(funcgrad.random.PRNGKey(0), N)
    got = funcgrad.pmap(lambda k: funcgrad.random.normal(k, (3,)))(keys)
    want = funcgrad.vmap(lambda k: funcgrad.random.normal(k, (3,)))(keys)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert len({tuple(r) for r in np.asarray(got)}) == N


def test_donate_argnums():
    f = funcgrad.pmap(lambda a: a + 1, donate_argnums=0)
    host = rand(N, 2)
    x = funcgrad.pmap(lambda a: a * 1)(host)
    y = f(x)
    np.testing.assert_allclose(np.asarray(y), host + 1, rtol=1e-6)
    exe = next(iter(f._cache.values()))[0]
    assert "jax.buffer_donor" in exe.text


def test_errors():
    f = funcgrad.pmap(lambda a, b: a + b)
    with pytest.raises(ValueError, match=r"same size.*\(3, 2\)"):
        f(rand(N, 2), rand(3, 2))
    with pytest.raises(ValueError, match="only 4 device"):
        funcgrad.pmap(lambda a: a)(rand(N + 1))
    with pytest.raises(NameError, match="unbound axis name:? 'j'"):
        funcgrad.pmap(lambda a: lax.psum(a, "j"), axis_name="i")(rand(N))
    with pytest.raises(TypeError, match="static_broadcasted_argnums"):
        funcgrad.pmap(lambda a, s: a)(rand(N), "text")
    with pytest.raises(ValueError, match="in_axes 2 is out of range"):
        funcgrad.pmap(lambda a: a, in_axes=2)(rand(N, 2))


def _ref_all_to_all(xs, split, concat, tiled):
    # xs: one array per member; member m gets piece m of every member's array
    n = len(xs)
    outs = []
    for m in range(n):
        pieces = [np.split(x, n, axis=split)[m] for x in xs]
        if tiled:
            outs.append(np.concatenate(pieces, concat))
        else:
            outs.append(np.stack([np.squeeze(p, split) for p in pieces], concat))
    return np.stack(outs)


@pytest.mark.parametrize("split,concat,tiled", [(0, 0, False), (0, 1, False), (1, 0, False),
                                                (0, 1, True), (1, 1, True), (1, 0, True)])
@pytest.mark.parametrize("how", ["pmap", "vmap"])
def test_all_to_all(split, concat, tiled, how):
    shape = [N, 3] if split == 0 else [3, N]
    if tiled:
        shape[split] *= 2
    x = rand(N, *shape)
    fn = (lambda v: lax.all_to_all(v, "i", split, concat, tiled=tiled))
    got = getattr(funcgrad, how)(fn, axis_name="i")(x if how == "pmap" else jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), _ref_all_to_all(list(x), split, concat, tiled),
                               rtol=0)


@pytest.mark.parametrize("dim,tiled", [(0, False), (1, False), (0, True), (1, True)])
@pytest.mark.parametrize("how", ["pmap", "vmap"])
def test_psum_scatter(dim, tiled, how):
    shape = [N, 3] if dim == 0 else [3, N]
    if tiled:
        shape[dim] *= 2
    x = rand(N, *shape)
    fn = (lambda v: lax.psum_scatter(v, "i", scatter_dimension=dim, tiled=tiled))
    got = getattr(funcgrad, how)(fn, axis_name="i")(x if how == "pmap" else jnp.asarray(x))
    total = x.sum(0)
    pieces = np.split(total, N, axis=dim)
    want = np.stack([p if tiled else np.squeeze(p, dim) for p in pieces])
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)


PERM = [(i, (i + 1) % N) for i in range(N)]


def _collective_chain(v, wv):
    a = lax.all_gather(v, "i", tiled=True)
    b = lax.psum_scatter(a * a, "i", tiled=True)
    c = lax.ppermute(b, "i", PERM)
    d = lax.all_to_all(c.reshape(N, 2), "i", 0, 0, tiled=True).reshape(-1)
    return jnp.sum(d * wv)


def test_transposes_of_collectives_under_pmap():
    # grad through all_gather <-> psum_scatter, ppermute <-> inverse permutation, all_to_all
    x = rand(N, 2 * N)
    w = rand(N, 2 * N, seed=5)
    loss = _collective_chain

    def per_member_grads(mapper):
        return mapper(funcgrad.grad(loss), axis_name="i")
    got = per_member_grads(funcgrad.pmap)(x, w)
    want = per_member_grads(funcgrad.vmap)(jnp.asarray(x), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    # and against finite differences of the summed loss in float64 (vmap, one device)
    total = lambda v: jnp.sum(funcgrad.vmap(loss, axis_name="i")(v, jnp.asarray(w)))
    g = funcgrad.grad(total)(jnp.asarray(x))
    eps, k = 1e-2, (1, 3)
    xp, xm = x.copy(), x.copy()
    xp[k] += eps
    xm[k] -= eps
    fd = (float(total(jnp.asarray(xp))) - float(total(jnp.asarray(xm)))) / (2 * eps)
    np.testing.assert_allclose(np.asarray(g)[k], fd, rtol=2e-2)


def test_collective_transposes_under_grad_of_pmap():
    # all_gather <-> psum_scatter, ppermute <-> inverse permutation, all_to_all (axes swapped)
    # (the grad is taken outside the pmap here: the backward pass is a pmap of the transposes)
    x, w = rand(N, 2 * N), rand(N, 2 * N, seed=5)

    def total(mapper, v):
        return jnp.sum(mapper(_collective_chain, axis_name="i")(v, jnp.asarray(w)))
    got = funcgrad.grad(lambda v: total(funcgrad.pmap, v))(jnp.asarray(x))
    want = funcgrad.grad(lambda v: total(funcgrad.vmap, v))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    # and one entry against a float64 central difference of the NumPy forward
    def np_total(v):
        gathered = v.reshape(-1)                               # all_gather, tiled
        scattered = (gathered * gathered * N).reshape(N, -1)   # psum_scatter of equal values
        shifted = np.roll(scattered, 1, axis=0)                # ppermute i -> i+1
        pieces = shifted.reshape(N, N, 2)                      # all_to_all, tiled, axis 0
        out = np.concatenate([pieces[:, m] for m in range(N)], 0).reshape(N, -1)
        return float((out * w.astype(np.float64)).sum())
    x64, eps, k = x.astype(np.float64), 1e-4, (2, 5)
    xp, xm = x64.copy(), x64.copy()
    xp[k] += eps
    xm[k] -= eps
    np.testing.assert_allclose(float(total(funcgrad.pmap, jnp.asarray(x))), np_total(x64),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got)[k], (np_total(xp) - np_total(xm)) / (2 * eps),
                               rtol=1e-3)


def test_module_argument_and_optimizer_step_equal_full_batch():
    from funcgrad import nn, optim
    from funcgrad.nn import functional as F
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    x, t = rand(N * 4, 3, seed=7), rand(N * 4, 2, seed=8)

    def loss_fn(m, xb, tb):
        return F.mse_loss(m(xb), tb)
    step = funcgrad.pmap(lambda m, xb, tb: lax.pmean(funcgrad.value_and_grad(loss_fn)(m, xb, tb),
                                                     "d"),
                         axis_name="d", in_axes=(None, 0, 0), out_axes=None)
    loss, grads = step(model, x.reshape(N, 4, 3), t.reshape(N, 4, 2))
    full_loss, full_grads = funcgrad.value_and_grad(loss_fn)(model, jnp.asarray(x),
                                                             jnp.asarray(t))
    np.testing.assert_allclose(float(loss), float(full_loss), rtol=1e-5)
    for g, fg in zip(funcgrad.tree_util.tree_leaves(grads),
                     funcgrad.tree_util.tree_leaves(full_grads)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(fg), rtol=1e-5, atol=1e-6)
    # the replicated gradients drive an ordinary optimizer step
    opt = optim.SGD(model.parameters(), lr=0.1)
    before = [np.asarray(p) for p in model.parameters()]
    opt.step(grads)
    after = [np.asarray(p) for p in model.parameters()]
    for b, a, g in zip(before, after, funcgrad.tree_util.tree_leaves(full_grads)):
        np.testing.assert_allclose(a, b - 0.1 * np.asarray(g), rtol=1e-5, atol=1e-6)


def test_fast_path_for_sharded_arguments():
    f = funcgrad.pmap(lambda a, b: {"s": a + b, "p": a * b}, in_axes=(0, None))
    x = funcgrad.pmap(lambda v: v)(rand(N, 3))
    r = funcgrad.device_put(np.arange(3.0, dtype=np.float32), funcgrad.local_devices())
    first = f(x, r)
    assert len(f._fast) == 1
    again = f(first["s"], r)        # served by the fast path: same layout, no tracing
    assert len(f._fast) == 1 and len(f._cache) == 1
    np.testing.assert_allclose(np.asarray(again["s"]), np.asarray(x) + 2 * np.arange(3.0),
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(again["p"]),
                               (np.asarray(x) + np.arange(3.0)) * np.arange(3.0), rtol=1e-6)
    # a replicated Array where a mapped one is expected goes through the general path (which
    # splits it over the devices) and is not added to the fast table
    rep = funcgrad.device_put(np.ones((N, 3), np.float32), funcgrad.local_devices())
    out = f(rep, r)
    np.testing.assert_allclose(np.asarray(out["s"]), 1 + np.arange(3.0)[None].repeat(N, 0))
    assert len(f._fast) == 1


def test_callbacks_inside_pmap():
    seen = []

    def body(v):
        funcgrad.debug.callback(lambda a: seen.append(np.asarray(a).tolist()), v)
        return funcgrad.pure_callback(lambda a: np.asarray(a) * 10,
                                      funcgrad.ShapeDtypeStruct((2,), np.float32), v)
    x = rand(N, 2)
    out = funcgrad.pmap(body)(x)
    np.testing.assert_allclose(np.asarray(out), x * 10, rtol=1e-6)
    assert sorted(seen) == sorted(x.tolist())      # each device called with its own slice
