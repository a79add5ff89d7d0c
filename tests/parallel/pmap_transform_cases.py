"""Transformations of pmap (grad, jvp, linearize, vmap, jit) on 4 host CPU devices: the
``pmap`` primitive keeps them programs over the devices. Run by ``test_pmap.py`` in a
subprocess with FUNCGRAD_CPU_DEVICES=4; its name keeps the main run from collecting it."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.lowering import pmap_primitive
from funcgrad.lowering.sharding import ShardedArray

N = 4
pytestmark = pytest.mark.skipif(funcgrad.local_device_count() != N,
                                reason="needs FUNCGRAD_CPU_DEVICES=4 (run by test_pmap.py)")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _programs_named(word):
    """The multi-device programs compiled so far whose name contains ``word``."""
    found = []
    for per_body in list(pmap_primitive._executables.values()):
        for exe, _ in per_body.values():
            if word in exe.text.split("\n", 1)[0] and len(exe.devices) == N:
                found.append(exe)
    return found


def test_grad_of_pmap_runs_the_backward_pass_on_the_devices():
    x, w = rand(N, 3), rand(3, seed=1)

    def body_transposed_here(a, wv):
        return jnp.sin(a) * lax.psum(a * wv, "i")

    def total(v, wv):
        y = funcgrad.pmap(body_transposed_here, axis_name="i", in_axes=(0, None))(v, wv)
        return jnp.sum(y * y)
    gx, gw = funcgrad.grad(total, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    # the same function on one device, as vmap
    ref = funcgrad.grad(lambda v, wv: jnp.sum(funcgrad.vmap(
        body_transposed_here, axis_name="i", in_axes=(0, None))(v, wv) ** 2), argnums=(0, 1))
    rx, rw = ref(jnp.asarray(x), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(gx), np.asarray(rx), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(gw), np.asarray(rw), rtol=1e-5, atol=1e-6)
    # the cotangents came from programs over the 4 devices
    assert isinstance(gx, ShardedArray) and gx.sharding.axis == 0
    assert isinstance(gw, ShardedArray) and gw.is_fully_replicated   # psum of per-device cts
    (exe, *_) = _programs_named("transpose")
    assert "replica_count=4" in exe.as_text() and "all-reduce" in exe.as_text()


def test_grad_of_pmap_against_numpy():
    # f(x) = sum_i sum_j (x_i * S_j)^2 / 2 with S = psum(x): closed form in NumPy
    x = rand(N, 2, seed=3)

    def total(v):
        y = funcgrad.pmap(lambda a: a * lax.psum(a, "i"), axis_name="i")(v)
        return 0.5 * jnp.sum(y * y)
    g = np.asarray(funcgrad.grad(total)(jnp.asarray(x)))
    s = x.sum(0)
    want = x * s * s + (x * x).sum(0) * s
    np.testing.assert_allclose(g, want, rtol=1e-5)


def test_replicated_output_transposes_psum_to_a_broadcast():
    # out_axes=None: psum(x) is one value; d sum(psum(x) * c) / dx_i = c on every device
    x, c = rand(N, 3), rand(3, seed=2)
    f = funcgrad.pmap(lambda a: lax.psum(a, "i"), axis_name="i", out_axes=None)
    g = funcgrad.grad(lambda v: jnp.sum(f(v) * jnp.asarray(c)))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(c, x.shape), rtol=1e-6)
    mean = funcgrad.pmap(lambda a: lax.pmean(a * a, "i"), axis_name="i", out_axes=None)
    g = funcgrad.grad(lambda v: jnp.sum(mean(v)))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(g), 2 * x / N, rtol=1e-5)


def test_jvp_and_linearize_of_pmap():
    x, t = rand(N, 3), rand(N, 3, seed=4)
    f = funcgrad.pmap(lambda a: jnp.tanh(a) * lax.pmax(a, "i"), axis_name="i")
    y, ty = funcgrad.jvp(f, (jnp.asarray(x),), (jnp.asarray(t),))
    m = x.max(0)
    hit = (x == m).astype(np.float32)
    dm = (hit * t).sum(0) / hit.sum(0)
    np.testing.assert_allclose(np.asarray(y), np.tanh(x) * m, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ty), (1 - np.tanh(x) ** 2) * t * m + np.tanh(x) * dm,
                               rtol=1e-5, atol=1e-6)
    assert isinstance(ty, ShardedArray)
    y2, lin = funcgrad.linearize(f, jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(lin(jnp.asarray(t))), np.asarray(ty), rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("in_axis,bdim", [(0, 0), (0, 1), (1, 0), (0, 2)])
def test_vmap_of_pmap_keeps_the_vmap_axis_on_each_device(in_axis, bdim):
    # the pmap axis is `in_axis` of the unbatched value, vmap's axis `bdim` of the batched one
    shape = [3, 5]
    shape.insert(in_axis, N)
    shape.insert(bdim, 2)
    x = rand(*shape)
    body = (lambda v: v * lax.psum(v, "i") + lax.axis_index("i"))
    pm = funcgrad.pmap(body, axis_name="i", in_axes=in_axis)
    got = funcgrad.vmap(pm, in_axes=bdim)(jnp.asarray(x))
    want = funcgrad.vmap(funcgrad.vmap(body, axis_name="i", in_axes=in_axis), in_axes=bdim)(
        jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    (eqn,) = funcgrad.make_jaxpr(funcgrad.vmap(pm, in_axes=bdim))(jnp.asarray(x)).eqns
    assert eqn.prim.name == "pmap" and eqn.params["axis_size"] == N


def test_vmap_of_pmap_with_collectives_over_both_names():
    x = rand(2, N, 3)

    def body(v):
        return lax.psum(v, ("i", "j")) - lax.pmean(v, "j") * lax.axis_index("j")
    got = funcgrad.vmap(funcgrad.pmap(body, axis_name="i"), axis_name="j")(jnp.asarray(x))
    want = funcgrad.vmap(funcgrad.vmap(body, axis_name="i"), axis_name="j")(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_jit_of_pmap_runs_the_pmap_as_its_own_program():
    x, w = rand(N, 3), rand(3, seed=6)
    pm = funcgrad.pmap(lambda a, wv: jnp.cos(a * wv) / lax.psum(a * a, "i"), axis_name="i",
                       in_axes=(0, None))

    @funcgrad.jit
    def step(v, wv):
        return jnp.sum(pm(v * 2.0, wv) ** 2) + jnp.sum(wv)
    want = jnp.sum(pm(jnp.asarray(x) * 2.0, jnp.asarray(w)) ** 2) + w.sum()
    np.testing.assert_allclose(float(step(jnp.asarray(x), jnp.asarray(w))), float(want),
                               rtol=1e-5)
    np.testing.assert_allclose(float(step(jnp.asarray(x), jnp.asarray(w))), float(want),
                               rtol=1e-5)
    from funcgrad.lowering import spmd
    g = funcgrad.jit(funcgrad.grad(lambda v: jnp.sum(pm(v, jnp.asarray(w)) ** 2)))(
        jnp.asarray(x))
    r = funcgrad.grad(lambda v: jnp.sum(funcgrad.vmap(
        lambda a: jnp.cos(a * jnp.asarray(w)) / lax.psum(a * a, "i"), axis_name="i")(v) ** 2))(
        jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-4, atol=1e-6)
    closed = funcgrad.make_jaxpr(step)(jnp.asarray(x), jnp.asarray(w))
    assert spmd.runs_in_pieces(closed.eqns[0].params["jaxpr"])
    compiled = step.lower(jnp.asarray(x), jnp.asarray(w)).compile()
    pieces = compiled.executable.loaded.hlo_modules()
    assert len(pieces) == 2      # the code before the pmap and the code after it


def test_pmap_inside_a_loop_under_jit_and_pmap_of_pmap_compute_vmap_values():
    x = rand(N, 2, 3)
    inner = funcgrad.pmap(lambda a: a - lax.pmean(a, "j"), axis_name="j")

    def loop(v):
        return lax.fori_loop(0, 2, lambda i, c: c + inner(c), v)
    got = funcgrad.jit(loop)(jnp.asarray(x[0, :, :]).reshape(2, 3))
    ref = x[0] + (x[0] - x[0].mean(0))
    ref = ref + (ref - ref.mean(0))
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-5, atol=1e-6)
    outer = funcgrad.pmap(lambda a: inner(a) * lax.psum(1.0, "i"), axis_name="i")
    np.testing.assert_allclose(np.asarray(outer(x)), N * (x - x.mean(1, keepdims=True)),
                               rtol=1e-5, atol=1e-5)


def test_grad_of_pmap_with_custom_rules_and_checkpoint_in_the_body():
    @funcgrad.custom_jvp
    def softplus(a):
        return jnp.log1p(jnp.exp(a))

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (a,), (t,) = primals, tangents
        return softplus(a), t / (1 + jnp.exp(-a))

    @funcgrad.custom_vjp
    def clip_grad(a):
        return a

    clip_grad.defvjp(lambda a: (a, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    def body(a):
        h = funcgrad.checkpoint(lambda v: jnp.sin(v) * softplus(v))(a)
        return clip_grad(h) * lax.pmean(a, "i")

    x = rand(N, 5, seed=9)
    total = (lambda mapper: lambda v: jnp.sum(mapper(body, axis_name="i")(v)))
    got = funcgrad.grad(total(funcgrad.pmap))(jnp.asarray(x))
    want = funcgrad.grad(total(funcgrad.vmap))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_module_state_in_a_grad_of_pmap_and_closed_over_tracers():
    # the body closes over a value of the enclosing grad (a tracer, passed as an operand)
    x, s = rand(N, 3), np.float32(1.5)

    def total(scale):
        return jnp.sum(funcgrad.pmap(lambda a: jnp.exp(a * scale) * lax.psum(a, "i"),
                                     axis_name="i")(jnp.asarray(x)))
    g = float(funcgrad.grad(total)(jnp.float32(s)))
    want = float((x * np.exp(x * s) * x.sum(0)).sum())
    np.testing.assert_allclose(g, want, rtol=1e-5)


def _bn_models(axis_name):
    from funcgrad import nn
    models = []
    for name in (axis_name, None):
        funcgrad.manual_seed(0)
        models.append(nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6, axis_name=name),
                                    nn.Tanh(), nn.Linear(6, 2)))
    return models


def _bn_loss(m, xb, tb):
    from funcgrad.nn import functional as F
    return F.mse_loss(m(xb), tb)


def _bn_step():
    return funcgrad.pmap(
        lambda m, xb, tb: lax.pmean(funcgrad.value_and_grad(_bn_loss)(m, xb, tb), "d"),
        axis_name="d", in_axes=(None, 0, 0), out_axes=None)


def test_sync_batchnorm_in_a_pmapped_step_equals_the_full_batch_step():
    synced, single = _bn_models("d")
    x, t = rand(N * 5, 3, seed=11), rand(N * 5, 2, seed=12)
    step = _bn_step()
    for k in range(2):      # the second step starts from the written-back statistics
        loss, grads = step(synced, x.reshape(N, 5, 3) + k, t.reshape(N, 5, 2))
        full_loss, full_grads = funcgrad.value_and_grad(_bn_loss)(
            single, jnp.asarray(x + k), jnp.asarray(t))
        np.testing.assert_allclose(float(loss), float(full_loss), rtol=1e-5)
        for g, fg in zip(funcgrad.tree_util.tree_leaves(grads),
                         funcgrad.tree_util.tree_leaves(full_grads)):
            np.testing.assert_allclose(np.asarray(g), np.asarray(fg), rtol=1e-4, atol=1e-6)
        bn, ref = synced[1], single[1]
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            np.testing.assert_allclose(np.asarray(getattr(bn, name)),
                                       np.asarray(getattr(ref, name)), rtol=1e-5, atol=1e-7)
    assert float(synced[1].num_batches_tracked) == 2
    assert synced[1].running_mean.is_fully_replicated     # one copy per device, all equal
    synced.eval()
    single.eval()
    np.testing.assert_allclose(np.asarray(synced(jnp.asarray(x))),
                               np.asarray(single(jnp.asarray(x))), rtol=1e-5, atol=1e-6)


def test_batchnorm_without_axis_name_writes_back_device_zero_statistics():
    local, single = _bn_models(None)
    x, t = rand(N * 5, 3, seed=13), rand(N * 5, 2, seed=14)
    _bn_step()(local, x.reshape(N, 5, 3), t.reshape(N, 5, 2))
    _bn_loss(single, jnp.asarray(x[:5]), jnp.asarray(t[:5]))     # device 0's batch alone
    np.testing.assert_allclose(np.asarray(local[1].running_mean),
                               np.asarray(single[1].running_mean), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(local[1].running_var),
                               np.asarray(single[1].running_var), rtol=1e-5, atol=1e-7)


def test_sync_batchnorm_needs_the_axis():
    from funcgrad import nn
    with pytest.raises(NameError, match="'d'"):
        nn.BatchNorm1d(2, axis_name="d")(jnp.ones((4, 2)))


def test_callbacks_and_random_keys_in_a_pmap_under_grad():
    seen = []
    keys = funcgrad.random.split(funcgrad.random.PRNGKey(3), N)
    x = rand(N, 3, seed=15)

    def body(k, a):
        noise = funcgrad.random.normal(k, a.shape)
        funcgrad.debug.callback(lambda v: seen.append(np.asarray(v).tolist()), a)
        return jnp.sum(jnp.sin(a) * noise)

    devs = funcgrad.local_devices()[::-1]              # devices= in another order
    pm = funcgrad.pmap(body, devices=devs)
    g = funcgrad.grad(lambda v: jnp.sum(pm(keys, v)))(jnp.asarray(x))
    noise = np.asarray(funcgrad.vmap(lambda k: funcgrad.random.normal(k, (3,)))(keys))
    np.testing.assert_allclose(np.asarray(g), np.cos(x) * noise, rtol=1e-5, atol=1e-6)
    assert sorted(seen) == sorted(x.tolist())          # each device once, with its own slice
    assert [s.device for s in g.addressable_shards] == devs


def test_multi_axis_gather_error_says_what_to_do():
    f = funcgrad.pmap(funcgrad.vmap(lambda v: lax.all_gather(v, ("i", "j")), axis_name="j"),
                      axis_name="i")
    with pytest.raises(ValueError, match="all_gather.*one axis at a time"):
        f(rand(N, 2))


def test_higher_order_derivatives_of_pmap():
    x = rand(N, 3, seed=16)
    body = (lambda a: jnp.sin(a) * lax.psum(a * a, "i"))
    total = (lambda mapper: lambda v: jnp.sum(mapper(body, axis_name="i")(v)))
    for transform in (funcgrad.hessian, lambda f: funcgrad.jacfwd(funcgrad.grad(f))):
        got = transform(total(funcgrad.pmap))(jnp.asarray(x))
        want = transform(total(funcgrad.vmap))(jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    got = funcgrad.jacrev(funcgrad.pmap(body, axis_name="i"))(jnp.asarray(x))
    want = funcgrad.jacfwd(funcgrad.vmap(body, axis_name="i"))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def test_jit_of_a_pmapped_step_writes_module_state_back():
    synced, single = _bn_models("d")
    step = funcgrad.pmap(lambda m, xb: lax.pmean(jnp.sum(m(xb) ** 2), "d"), axis_name="d",
                         in_axes=(None, 0), out_axes=None)
    jitted = funcgrad.jit(lambda m, xb: step(m, xb) * 2)
    xb = rand(N, 5, 3, seed=17)
    for _ in range(2):
        loss = jitted(synced, xb)
        want = 2 * jnp.sum(single(jnp.asarray(xb.reshape(-1, 3))) ** 2) / N
        np.testing.assert_allclose(float(loss), float(want), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(synced[1].running_mean),
                               np.asarray(single[1].running_mean), rtol=1e-5, atol=1e-7)
    assert float(synced[1].num_batches_tracked) == 2


def test_pmap_under_checkpoint_jit_and_vmap_of_grad():
    x = rand(N, 3, seed=18)
    body = (lambda a: jnp.sin(a) * lax.psum(a * a, "i"))
    pm, vm = funcgrad.pmap(body, axis_name="i"), funcgrad.vmap(body, axis_name="i")
    want = funcgrad.grad(lambda v: vm(v).sum())(jnp.asarray(x))
    for wrap in (funcgrad.checkpoint, funcgrad.jit):
        got = funcgrad.grad(wrap(lambda v: pm(v).sum()))(jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    xs = jnp.stack([jnp.asarray(x), 2 * jnp.asarray(x)])
    got = funcgrad.vmap(funcgrad.grad(lambda v: pm(v).sum()))(xs)
    np.testing.assert_allclose(np.asarray(got)[0], np.asarray(want), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(got)[1], np.asarray(
        funcgrad.grad(lambda v: vm(v).sum())(2 * jnp.asarray(x))), rtol=1e-5, atol=1e-5)
