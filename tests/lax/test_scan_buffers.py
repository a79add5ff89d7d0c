"""Scan's buffers and loops: a per-step output written into the buffer of an xs input it is
computed from (no zero-filled buffer), and reverse mode of a scan whose non-linear values come
from its xs alone (recomputed in the backward loop, not saved by an extra forward loop).
Values are checked against Python loops, under jit and eagerly."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax.control_flow.scan_lowering import _reuse_xs_buffers


def _py_scan(step, carry, xs, reverse):
    ys, n = [], xs[0].shape[0]
    order = range(n - 1, -1, -1) if reverse else range(n)
    for t in order:
        carry, y = step(carry, [x[t] for x in xs])
        ys.append(y)
    if reverse:
        ys = ys[::-1]
    return carry, [np.stack([np.asarray(y[k]) for y in ys]) for k in range(len(ys[0]))]


def _step(c, x):
    a, b = x
    y0 = jnp.tanh(a) * 2.0 + 1.0          # made from a only: may be written into a's buffer
    y1 = b * c                            # reads the carry: b's buffer must be kept
    y2 = y0 * 0.5                         # a second output shaped like y0 (first step peeled)
    return c + jnp.sum(y0, axis=0) * 0.1, [y0, y1, y2]


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [1, 2, 3])
@pytest.mark.parametrize("length", [1, 2, 7])
def test_scan_outputs_written_into_xs_buffers_match_a_loop(x64, reverse, unroll, length):
    rng = np.random.default_rng(length)
    a = rng.standard_normal((length, 3, 4))
    b = rng.standard_normal((length, 4))
    c0 = rng.standard_normal(4)
    want_c, want_ys = _py_scan(_step, c0, [a, b], reverse)

    def f(c0, a, b):
        return lax.scan(_step, c0, [a, b], reverse=reverse, unroll=unroll)

    for fn in (f, funcgrad.jit(f)):
        c, ys = fn(c0, a, b)
        np.testing.assert_allclose(np.asarray(c), np.asarray(want_c), rtol=1e-12)
        for got, want in zip(ys, want_ys):
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    # the xs are not modified by the scan that wrote into their buffers
    c, ys = funcgrad.jit(f)(c0, a, b)
    np.testing.assert_array_equal(np.asarray(a), a)


def _body(step, carry, xs):
    closed, _ = trace_to_jaxpr(lambda *args: _flat(step, len(carry), args),
                               [aval_of(v) for v in carry] + [aval_of(x[0]) for x in xs])
    return closed.jaxpr


def _flat(step, n_carry, args):
    c, y = step(list(args[:n_carry]), list(args[n_carry:]))
    return list(c) + list(y)


def test_reuse_pairs_only_outputs_fed_by_their_input():
    a, b, c = np.ones((5, 3)), np.ones((5, 3)), np.ones(3)

    def step(carry, x):
        xa, xb = x
        ya = jnp.exp(xa) + 1.0               # xa goes only into ya: pairs
        yb = xb * carry[0]                   # xb goes into yb, but yb's producer also reads
        new = carry[0] + xb                  # ... and the carry reads xb directly: no pair
        late = ya * 2.0                      # reading ya after it is computed is fine
        return [new], [ya, yb, late]

    body = _body(step, [c], [a, b])
    assert _reuse_xs_buffers(body, 0, 1, [a, b], 5) == {0: 0}
    # each input is paired with at most one output, and shapes must match
    assert _reuse_xs_buffers(body, 0, 1, [a, b], 4) == {}


def _tangent_scan_fn():
    """c_t = c_{t-1} * sin(x_t) + x_t, with a hand-written jvp whose tangent scan reads the
    saved xs and derives sin/cos from them (values free of the tangent carry)."""
    def run(c0, xs):
        def step(c, x):
            c = c * jnp.sin(x) + x
            return c, c
        return lax.scan(step, c0, xs)

    @funcgrad.custom_jvp
    def f(c0, xs):
        return run(c0, xs)

    @f.defjvp
    def f_jvp(primals, tangents):
        c0, xs = primals
        dc0, dxs = tangents
        cT, cs = run(c0, xs)
        cprev = jnp.concatenate([c0[None], cs[:-1]], axis=0)

        def tstep(dc, x):
            dx, xt, cp = x
            dc = dc * jnp.sin(xt) + (cp * jnp.cos(xt) + 1.0) * dx
            return dc, dc
        dT, dcs = lax.scan(tstep, dc0, (dxs, xs, cprev))
        return (cT, cs), (dT, dcs)
    return run, f


def test_custom_tangent_scan_reverse_mode_has_no_extra_forward_loop(x64):
    run, f = _tangent_scan_fn()
    rng = np.random.default_rng(4)
    c0, xs = rng.standard_normal(3), rng.standard_normal((6, 3))

    def loss(fn):
        return lambda c0, xs: jnp.sum(fn(c0, xs)[0] ** 2) + jnp.sum(jnp.cos(fn(c0, xs)[1]))

    want = funcgrad.grad(loss(run), argnums=(0, 1))(c0, xs)
    for got in (funcgrad.grad(loss(f), argnums=(0, 1))(c0, xs),
                funcgrad.jit(funcgrad.grad(loss(f), argnums=(0, 1)))(c0, xs)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)
    jaxpr = funcgrad.make_jaxpr(funcgrad.grad(lambda c0, xs: jnp.sum(f(c0, xs)[1])))(c0, xs)
    scans = [e for e in jaxpr.jaxpr.eqns if e.prim.name == "scan"]
    # the primal loop and the backward loop; sin(x_t) and cos(x_t) * c_{t-1} are recomputed
    # from the saved xs in the backward loop, not stacked by a third (forward) loop
    assert len(scans) == 2, [e.prim.name for e in jaxpr.jaxpr.eqns]


def test_concatenated_cotangent_for_a_weight_gradient_is_joined_after_the_loop(x64):
    """A recurrence with per-gate inputs (as nn.LSTM scans them): the reverse loop stacks each
    gate's input cotangent once; the recurrent weight's gradient joins those stacks after the
    loop instead of stacking their concatenation a second time."""
    rng = np.random.default_rng(5)
    h0 = rng.standard_normal((2, 3))
    w = rng.standard_normal((6, 3)) * 0.5
    xa, xb = rng.standard_normal((5, 2, 3)), rng.standard_normal((5, 2, 3))

    def run(h0, w, xa, xb):
        def step(h, x):
            a, b = jnp.split(h @ w.T, 2, axis=-1)
            h = jnp.tanh(a + x[0]) * lax.logistic(b + x[1])
            return h, h
        return jnp.sum(lax.scan(step, h0, (xa, xb))[1] ** 2)

    def loop(h0, w, xa, xb):          # the same recurrence, unrolled in Python
        h, total = h0, 0.0
        for t in range(5):
            a, b = jnp.split(h @ w.T, 2, axis=-1)
            h = jnp.tanh(a + xa[t]) * lax.logistic(b + xb[t])
            total = total + jnp.sum(h ** 2)
        return total

    got = funcgrad.grad(run, argnums=(0, 1, 2, 3))(h0, w, xa, xb)
    want = funcgrad.grad(loop, argnums=(0, 1, 2, 3))(h0, w, xa, xb)
    for g, r in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-11, atol=1e-12)
    jaxpr = funcgrad.make_jaxpr(funcgrad.grad(run, argnums=(1, 2, 3)))(h0, w, xa, xb).jaxpr
    back = [e for e in jaxpr.eqns if e.prim.name == "scan"][-1]
    stacked = [v.aval.shape for v in back.outvars[back.params["num_carry"]:]]
    # the two per-gate cotangents (5, 2, 3), not also their (5, 2, 6) concatenation
    assert (5, 2, 6) not in stacked and stacked.count((5, 2, 3)) == 2, stacked
    assert any(e.prim.name == "concatenate" and e.outvars[0].aval.shape == (5, 2, 6)
               for e in jaxpr.eqns)
