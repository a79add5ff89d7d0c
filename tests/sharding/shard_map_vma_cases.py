"""Transformations inside shard_map bodies typed by their varying manual axes (check_vma=True,
the default; JAX 0.10's semantics), on 4 host CPU devices: against the single-device
computation (NumPy, float64 finite differences) and JAX 0.10.2 (live when jax is importable,
else ``tests/sharding/shard_map_reference.json``, key ``vma``, written by
``tools/shard_map_reference.py``).

Run in a subprocess with FUNCGRAD_CPU_DEVICES=4 by ``test_shard_map.py``.
"""
import json
import os

import numpy as np
import pytest

import funcgrad
from funcgrad.sharding import P

N = 4
pytestmark = pytest.mark.skipif(funcgrad.local_device_count() != N,
                                reason="needs FUNCGRAD_CPU_DEVICES=4 (run by test_shard_map.py)")
HERE = os.path.dirname(os.path.abspath(__file__))
REF_PATH = os.path.join(HERE, "shard_map_reference.json")
REF = (json.load(open(REF_PATH)) if os.path.exists(REF_PATH) else {}).get("vma", {})


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want, np.float32), rtol=tol,
                               atol=tol)


def data():
    return dict(x=rand(8, 3, seed=20), p=rand(3, seed=21), t=rand(3, seed=22),
                c=rand(8, seed=23), w1=rand(6, 8, seed=24) * 0.5, b1=rand(8, seed=25) * 0.1,
                w2=rand(8, 3, seed=26) * 0.5, xs=rand(16, 6, seed=27), ys=rand(16, 3, seed=28))


# --- the cases, for funcgrad or JAX (``ns`` is the funcgrad or the jax module) ------------------
def cases(ns, spec, mesh, ring):
    """{name: value} of every case, computed with ``ns``'s shard_map, grad, jvp, lax and
    numpy; ``mesh`` is a 2x2 ("data", "model") mesh, ``ring`` 4 devices along "i"."""
    lax, jnp, d = ns.lax, ns.numpy, data()
    out = {}

    # (1) data parallel: grad of the pmean'd loss w.r.t. replicated parameters
    def dp(p, x):
        return ns.grad(lambda q: lax.pmean(jnp.sum(jnp.tanh(q * x)), "i"))(p)
    out["dp_pmean"] = ns.shard_map(dp, mesh=ring, in_specs=(spec(), spec("i")),
                                   out_specs=spec())(d["p"], d["x"])
    # the same body unchecked: each device's own term
    out["dp_pmean_unchecked"] = ns.shard_map(dp, mesh=ring, in_specs=(spec(), spec("i")),
                                             out_specs=spec("i"), check_vma=False)(
        d["p"], d["x"])

    # (2) tensor parallel MLP on the 2x2 mesh: psum over "model", pmean over "data"
    def tp(w1b, b1b, w2b, xb, yb):
        def loss(a, b, c):
            pred = lax.psum(jnp.tanh(xb @ a + b) @ c, "model")
            return lax.pmean(jnp.mean((pred - yb) ** 2), "data")
        return ns.grad(loss, argnums=(0, 1, 2))(w1b, b1b, w2b)
    tp_specs = (spec(None, "model"), spec("model"), spec("model", None))
    g = ns.shard_map(tp, mesh=mesh, in_specs=tp_specs + (spec("data"), spec("data")),
                     out_specs=tp_specs)(d["w1"], d["b1"], d["w2"], d["xs"], d["ys"])
    out.update(tp_w1=g[0], tp_b1=g[1], tp_w2=g[2])

    # (3) a replicated value times a varying one, summed without a collective
    def unreduced(p, x):
        return ns.grad(lambda q: jnp.sum(q * x))(p)
    out["unreduced"] = ns.shard_map(unreduced, mesh=ring, in_specs=(spec(), spec("i")),
                                    out_specs=spec("i"))(d["p"], d["x"])
    stacked = ns.shard_map(lambda p, x: p * x, mesh=ring, in_specs=(spec(), spec("i")),
                           out_specs=spec("i"))
    out["unreduced_outside"] = ns.grad(lambda p: jnp.sum(stacked(p, d["x"]) ** 2))(d["p"])

    # grad of whole shard_maps from outside, typed and unchecked (JAX splits a replicated
    # output's cotangent over the devices and sums a replicated operand's when unchecked)
    for check in (True, False):
        outer = ns.shard_map(lambda p, x: lax.pmean(jnp.sum(jnp.tanh(p * x)), "i"), mesh=ring,
                             in_specs=(spec(), spec("i")), out_specs=spec(), check_vma=check)
        total = ns.shard_map(lambda p, x: lax.psum(p * x, "i"), mesh=ring,
                             in_specs=(spec(), spec("i")), out_specs=spec(), check_vma=check)
        tag = "" if check else "_unchecked"
        out["outside_pmean" + tag] = ns.grad(lambda p: outer(p, d["x"]))(d["p"])
        out["outside_psum" + tag] = ns.grad(lambda p: jnp.sum(jnp.sin(total(p, d["x"]))))(
            d["p"])

    # a body taking a gradient, itself vmapped, jitted with shardings and differentiated
    sm = ns.shard_map(dp, mesh=ring, in_specs=(spec(), spec("i")), out_specs=spec())
    named = ns.sharding.NamedSharding
    out["vmap_of_inner_grad"] = ns.vmap(sm, in_axes=(0, None))(
        np.stack([d["p"], d["t"]]), d["x"])
    out["jit_shardings_inner_grad"] = ns.jit(
        sm, in_shardings=(named(ring, spec()), named(ring, spec("i"))),
        out_shardings=named(ring, spec()))(d["p"], d["x"])
    out["grad_of_inner_grad"] = ns.grad(lambda q: jnp.sum(sm(q, d["x"]) ** 2))(d["p"])

    # the other collectives differentiated inside (a replicated q against a varying x)
    q, xq = rand(4, 4, seed=33), rand(16, 4, seed=34)
    collectives = {
        "psum_scatter": lambda a, b: jnp.sum(jnp.sin(lax.psum_scatter(
            a * b, "i", scatter_dimension=0, tiled=True))),
        "all_to_all": lambda a, b: jnp.sum(jnp.sin(lax.all_to_all(a * b, "i", 0, 0,
                                                                  tiled=True)) * b),
        "axis_index": lambda a, b: jnp.sum(a * lax.axis_index("i").astype(jnp.float32)),
        "psum_of_replicated": lambda a, b: jnp.sum(lax.psum(a, "i") * b),
    }
    for name, loss in collectives.items():
        out[name] = ns.shard_map(lambda a, b, loss=loss: ns.grad(loss)(a, b), mesh=ring,
                                 in_specs=(spec(), spec("i")), out_specs=spec("i"))(q, xq)

    # (4) jvp inside the body
    def fwd(p, x, t):
        return ns.jvp(lambda q: lax.psum(jnp.sum(jnp.tanh(q * x)), "i"), (p,), (t,))
    pr, tan = ns.shard_map(fwd, mesh=ring, in_specs=(spec(), spec("i"), spec()),
                           out_specs=(spec(), spec()))(d["p"], d["x"], d["t"])
    out.update(jvp_primal=pr, jvp_tangent=tan)

    # all_gather (varying to varying) differentiated inside
    def gathered(v, c):
        return ns.grad(lambda u: jnp.sum(lax.all_gather(u, "i", tiled=True) * c))(v)
    out["all_gather"] = ns.shard_map(gathered, mesh=ring, in_specs=(spec("i"), spec()),
                                     out_specs=spec("i"))(d["c"], d["c"])
    # transformations and control flow inside the differentiated function
    out.update(_inner_transforms(ns, spec, ring, d, varying_init=lambda v: lax.pcast(
        v, "i", to="varying")))
    return {k: np.asarray(v).tolist() for k, v in out.items()}


def _inner_transforms(ns, spec, ring, d, varying_init):
    """grad of bodies holding jit, checkpoint, scan, cond, vmap and ppermute; hessian and
    linearize. ``varying_init(v)``: ``v`` typed varying over "i" (JAX requires it of a scan
    carry and a cond branch result that meet varying values; funcgrad does it itself)."""
    lax, jnp = ns.lax, ns.numpy
    x, p = d["x"], d["p"]
    ring4 = [(i, (i + 1) % 4) for i in range(4)]
    softplus, scaled_sin = _custom_rules(ns)
    losses = {
        "jit": lambda q, x: lax.psum(ns.jit(lambda a, b: jnp.sum(jnp.sin(a * b)))(q, x), "i"),
        "checkpoint": lambda q, x: lax.psum(
            ns.checkpoint(lambda a: jnp.sum(jnp.sin(a * x)))(q), "i"),
        "scan": lambda q, x: lax.pmean(lax.scan(
            lambda c, r: (c + jnp.sum(jnp.tanh(q * r)), None),
            varying_init(jnp.zeros((), jnp.float32)), x)[0], "i"),
        "cond": lambda q, x: lax.psum(lax.cond(
            q[0] > 0, lambda a: jnp.sum(a * x),
            lambda a: varying_init(jnp.sum(a * a)), q), "i"),
        "vmap": lambda q, x: lax.pmean(jnp.sum(ns.vmap(lambda r: jnp.tanh(q * r))(x)), "i"),
        "ppermute": lambda q, x: lax.psum(jnp.sum(lax.ppermute(q * x, "i", ring4) * x), "i"),
        "custom_jvp": lambda q, x: lax.pmean(jnp.sum(softplus(q * x)), "i"),
        "custom_vjp": lambda q, x: lax.pmean(jnp.sum(scaled_sin(q * x, x)), "i"),
        "softmax": lambda q, x: lax.pmean(jnp.sum(ns.nn.softmax(q * x) * x), "i"),
    }
    out = {}
    for name, loss in losses.items():
        for sign in (1, -1):        # both branches of the cond
            out[f"{name}{'' if sign > 0 else '_neg'}"] = ns.shard_map(
                lambda q, x, loss=loss: ns.grad(loss)(q, x), mesh=ring,
                in_specs=(spec(), spec("i")), out_specs=spec())(sign * p, x)

    def hess(q, x):
        return ns.hessian(lambda a: lax.pmean(jnp.sum(jnp.tanh(a * x)), "i"))(q)
    out["hessian"] = ns.shard_map(hess, mesh=ring, in_specs=(spec(), spec("i")),
                                  out_specs=spec())(p, x)

    def lin(q, x, t):
        y, f = ns.linearize(lambda a: lax.psum(jnp.sum(jnp.tanh(a * x)), "i"), q)
        return y, f(t)
    out["linearize_primal"], out["linearize_tangent"] = ns.shard_map(
        lin, mesh=ring, in_specs=(spec(), spec("i"), spec()), out_specs=(spec(), spec()))(
        p, x, d["t"])
    return out


def _custom_rules(ns):
    """A custom_jvp softplus and a custom_vjp ``sin(a) * b`` in ``ns``."""
    jnp = ns.numpy

    @ns.custom_jvp
    def softplus(a):
        return jnp.log1p(jnp.exp(a))

    @softplus.defjvp
    def _softplus_jvp(primals, tangents):
        (a,), (t,) = primals, tangents
        return softplus(a), t / (1 + jnp.exp(-a))

    @ns.custom_vjp
    def scaled_sin(a, b):
        return jnp.sin(a) * b

    def fwd(a, b):
        return scaled_sin(a, b), (a, b)

    def bwd(res, g):
        a, b = res
        return jnp.cos(a) * b * g, jnp.sin(a) * g
    scaled_sin.defvjp(fwd, bwd)
    return softplus, scaled_sin


def jax_cases():
    """The cases in JAX 0.10 (4 host devices)."""
    import jax
    import jax.numpy  # noqa: F401  (jax.numpy as an attribute of the namespace)
    devs = np.array(jax.devices()[:4])
    mesh = jax.sharding.Mesh(devs.reshape(2, 2), ("data", "model"))
    ring = jax.sharding.Mesh(devs, ("i",))
    return cases(jax, jax.sharding.PartitionSpec, mesh, ring)


_GOT = {}


def got():
    if not _GOT:
        import funcgrad.nn  # noqa: F401
        import funcgrad.numpy  # noqa: F401
        from funcgrad import lax  # noqa: F401
        mesh = funcgrad.make_mesh((2, 2), ("data", "model"))
        ring = funcgrad.make_mesh((4,), ("i",))
        _GOT.update(cases(funcgrad, P, mesh, ring))
    return _GOT


# --- single-device references -------------------------------------------------------------------
def _fd(f, x, eps=1e-4):
    x = np.asarray(x, np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        up, dn = x.copy(), x.copy()
        up[idx] += eps
        dn[idx] -= eps
        g[idx] = (f(up) - f(dn)) / (2 * eps)
    return g


def test_data_parallel_grad_of_pmean_inside_the_body():
    d = data()
    x = d["x"].astype(np.float64)
    want = _fd(lambda q: np.mean([np.tanh(q * b).sum() for b in np.split(x, 4)]), d["p"])
    close(got()["dp_pmean"], want, 1e-4)
    # unchecked: device k's own term (not the average), as JAX's check_vma=False
    own = np.concatenate([_fd(lambda q, b=b: np.tanh(q * b).sum(), d["p"])
                          for b in np.split(x, 4)])
    close(got()["dp_pmean_unchecked"], own, 1e-4)
    close(got()["jit_shardings_inner_grad"], want, 1e-4)
    close(got()["vmap_of_inner_grad"][0], want, 1e-4)


def test_tensor_parallel_grad_inside_the_body_equals_the_single_device_gradient():
    d = data()
    xs, ys = d["xs"].astype(np.float64), d["ys"].astype(np.float64)

    def loss(w1, b1, w2):
        return np.mean((np.tanh(xs @ w1 + b1) @ w2 - ys) ** 2)
    w = [d["w1"], d["b1"], d["w2"]]
    for i, name in enumerate(("tp_w1", "tp_b1", "tp_w2")):
        def f(v, i=i):
            args = [np.asarray(a, np.float64) for a in w]
            args[i] = v
            return loss(*args)
        close(got()[name], _fd(f, w[i]), 2e-4)


def test_replicated_times_varying_without_a_collective():
    d = data()
    total = d["x"].astype(np.float64).sum(0)     # the devices' cotangents summed (pvary^T)
    close(got()["unreduced"], np.tile(total, 4), 1e-4)
    close(got()["unreduced_outside"], 2 * (d["p"] * d["x"].astype(np.float64) ** 2).sum(0),
          1e-4)


def test_grad_from_outside_typed_and_unchecked():
    d = data()
    x, p = d["x"].astype(np.float64), d["p"].astype(np.float64)
    mean = _fd(lambda q: np.mean([np.tanh(q * b).sum() for b in np.split(x, 4)]), p)
    summed = _fd(lambda q: np.sin(sum(q * b for b in np.split(x, 4))).sum(), p)
    for tag in ("", "_unchecked"):
        close(got()["outside_pmean" + tag], mean, 1e-4)
        close(got()["outside_psum" + tag], summed, 1e-4)


def test_jvp_inside_the_body():
    d = data()
    x, p, t = (d[k].astype(np.float64) for k in ("x", "p", "t"))
    close(got()["jvp_primal"], np.tanh(p * x).sum(), 1e-4)
    close(got()["jvp_tangent"], ((1 - np.tanh(p * x) ** 2) * x * t).sum(), 1e-4)


def test_all_gather_transposes_over_the_devices_cotangents():
    c = data()["c"]
    close(got()["all_gather"], 4 * c)     # every device's gathered copy contributes


@pytest.mark.parametrize("name", sorted(REF) or ["(no stored reference)"])
def test_against_stored_jax_values(name):
    if name not in REF:
        pytest.fail("tests/sharding/shard_map_reference.json has no 'vma' values: run "
                    "tools/shard_map_reference.py")
    close(got()[name], REF[name], 1e-5)


def test_live_jax_values():
    pytest.importorskip("jax")
    live = jax_cases()
    for name, value in got().items():
        close(value, live[name], 1e-5)


def test_loop_carries_and_branches_are_typed_without_a_pcast():
    # funcgrad widens a scan carry and a branch result to the type they meet (JAX raises
    # and asks for a pcast, as the cases above do): the same values
    d = data()
    ring = funcgrad.make_mesh((4,), ("i",))
    plain = _inner_transforms(funcgrad, P, ring, d, varying_init=lambda v: v)
    for name, value in plain.items():
        close(value, got()[name])


def test_a_custom_vjp_cotangent_that_varies_more_than_its_primal_is_summed():
    # sin(q) * x with q replicated and x varying inside one custom_vjp: its backward rule
    # returns a varying cotangent for the replicated q (JAX raises), which funcgrad sums over
    # the devices, as the pvary JAX asks for would
    from funcgrad import lax
    import funcgrad.numpy as jnp
    d = data()
    _, scaled_sin = _custom_rules(funcgrad)
    ring = funcgrad.make_mesh((4,), ("i",))

    def body(q, x):
        return funcgrad.grad(lambda a: lax.pmean(jnp.sum(
            scaled_sin(jnp.broadcast_to(a, x.shape), x)), "i"))(q)
    g = funcgrad.shard_map(body, mesh=ring, in_specs=(P(), P("i")), out_specs=P())(
        d["p"], d["x"])
    close(g, np.cos(d["p"]) * d["x"].astype(np.float64).sum(0) / 4, 1e-5)


def test_grad_through_pmax_inside_the_body():
    # JAX has no derivative of pmax; funcgrad's: the winning device's term, on every device
    from funcgrad import lax
    import funcgrad.numpy as jnp
    ring = funcgrad.make_mesh((4,), ("i",))
    q, x = rand(4, 4, seed=31), rand(16, 4, seed=32)
    g = funcgrad.shard_map(
        lambda q, x: funcgrad.grad(lambda a: jnp.sum(lax.pmax(a * x, "i")))(q), mesh=ring,
        in_specs=(P(), P("i")), out_specs=P())(q, x)
    blocks = x.reshape(4, 4, 4)
    win = np.argmax(q * blocks, axis=0)
    close(g, np.take_along_axis(blocks, win[None], 0)[0])


def test_make_jaxpr_shows_pvary_like_jax():
    from funcgrad import lax
    import funcgrad.numpy as jnp
    ring = funcgrad.make_mesh((4,), ("d",))

    def body(p, x):
        return funcgrad.grad(lambda q: lax.pmean(jnp.sum(q * x), "d"))(p)
    f = funcgrad.shard_map(body, mesh=ring, in_specs=(P(), P("d")), out_specs=P("d"))
    inner = funcgrad.make_jaxpr(f)(np.ones(2, np.float32),
                                   np.ones((4, 2), np.float32)).eqns[0].params["jaxpr"]
    # JAX 0.10.2's body, equation for equation (its psum of a varying value is
    # ``psum_invariant``)
    assert [e.prim.name for e in inner.jaxpr.eqns] == [
        "broadcast_in_dim", "pvary", "mul", "reduce_sum", "psum", "div", "div", "pvary",
        "broadcast_in_dim", "mul", "psum", "reduce_sum", "pvary"]
    assert [str(v.aval) for v in inner.jaxpr.invars] == ["f32[2]", "f32[1,2]{V:d}"]
    text = str(inner)
    assert "pvary[axis_name=('d',)]" in text and "f32[]{V:d} = reduce_sum" in text
    # unchecked: no types, no pvary
    f = funcgrad.shard_map(body, mesh=ring, in_specs=(P(), P("d")), out_specs=P("d"),
                           check_vma=False)
    inner = funcgrad.make_jaxpr(f)(np.ones(2, np.float32),
                                   np.ones((4, 2), np.float32)).eqns[0].params["jaxpr"]
    assert "pvary" not in str(inner) and "{V:" not in str(inner)


def test_the_out_specs_check_reads_the_types():
    from funcgrad import lax
    ring = funcgrad.make_mesh((4,), ("d",))
    x = np.arange(8.0, dtype=np.float32)
    # a replicated operand made varying: its type varies, so P() is refused
    with pytest.raises(ValueError, match=r"spec PartitionSpec\(\).*varies over them"):
        funcgrad.shard_map(lambda a: lax.pvary(a, "d") * 2, mesh=ring, in_specs=P(),
                           out_specs=P())(x)
    # all_gather's result is the same on every device (JAX types it varying and refuses
    # P(); funcgrad lets it through), and its gradient from outside is exact
    f = funcgrad.shard_map(lambda a: lax.all_gather(a, "d", tiled=True), mesh=ring,
                           in_specs=P("d"), out_specs=P())
    close(f(x), x)
    c = rand(8, seed=30)
    close(funcgrad.grad(lambda v: (f(v) * c).sum())(x), c)
