"""Reverse mode through scan runs the forward loop once: linearize splits the jvp body into a
known scan (primal outputs and saved per-step values) and a tangent scan, loop-invariant values
are computed once outside the loops and cheap elementwise values are recomputed backwards.
Gradients are checked against the same model unrolled in Python (float64) and under jit."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.transforms.ad import grad


def _cell(w, b, carry, x):
    h, c = carry
    z = x + jnp.matmul(h, w.T) + b
    i, f, g, o = jnp.split(z, 4, axis=-1)
    sig = lambda v: 1.0 / (1.0 + jnp.exp(-v))
    c = sig(f) * c + sig(i) * jnp.tanh(g)
    h = sig(o) * jnp.tanh(c)
    return (h, c), h * 2.0


def _loss_scan(reverse):
    def f(w, b, h0, xs):
        (h, c), ys = lax.scan(lambda k, x: _cell(w, b, k, x), (h0, h0 * 0.5), xs,
                              reverse=reverse)
        return jnp.sum(ys * ys) + jnp.sum(h * c)
    return f


def _loss_loop(reverse):
    def f(w, b, h0, xs):
        carry, ys = (h0, h0 * 0.5), []
        steps = range(xs.shape[0])
        for t in (reversed(steps) if reverse else steps):
            carry, y = _cell(w, b, carry, xs[t])
            ys.append(y)
        h, c = carry
        return sum(jnp.sum(y * y) for y in ys) + jnp.sum(h * c)
    return f


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_grad_matches_unrolled_loop(x64, reverse):
    rng = np.random.default_rng(0)
    H = 3
    args = (rng.standard_normal((4 * H, H)) * 0.5, rng.standard_normal(4 * H) * 0.1,
            rng.standard_normal((2, H)), rng.standard_normal((5, 2, 4 * H)))
    want = grad(_loss_loop(reverse), argnums=(0, 1, 2, 3))(*args)
    got = grad(_loss_scan(reverse), argnums=(0, 1, 2, 3))(*args)
    got_jit = funcgrad.jit(grad(_loss_scan(reverse), argnums=(0, 1, 2, 3)))(*args)
    for g, gj, w in zip(got, got_jit, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(np.asarray(gj), np.asarray(w), rtol=1e-10, atol=1e-12)


def test_scan_grad_runs_forward_loop_once():
    rng = np.random.default_rng(1)
    H = 4
    args = [jnp.asarray(a.astype(np.float32)) for a in (
        rng.standard_normal((4 * H, H)), rng.standard_normal(4 * H), rng.standard_normal((2, H)),
        rng.standard_normal((6, 2, 4 * H)))]
    jaxpr = funcgrad.make_jaxpr(grad(_loss_scan(False), argnums=(0, 1, 2, 3)))(*args)
    scans = [e for e in jaxpr.jaxpr.eqns if e.prim.name == "scan"]
    assert len(scans) == 2, [e.prim.name for e in jaxpr.jaxpr.eqns]
    fwd = scans[0]
    # Only per-step (stacked) values leave the forward loop besides the carries: the transposed
    # weight is computed once outside, and e.g. 1 - tanh(c)**2 is recomputed from tanh(c).
    stacked = [v for v in fwd.outvars if v.aval.shape[:1] == (6,)]
    assert all(v.aval.shape[1:] != (H, 4 * H) and v.aval.shape[1:] != (4 * H, H)
               for v in stacked), [v.aval for v in stacked]
    assert len(stacked) <= 9, [v.aval for v in stacked]
    # The weight and bias gradients are one dot_general / reduce_sum on the stacked per-step
    # values after the backward loop, not accumulated in its carry.
    bwd = scans[1]
    n_carry = bwd.params["num_carry"]
    carry_shapes = [v.aval.shape for v in bwd.outvars[:n_carry]]
    assert (4 * H, H) not in carry_shapes and (4 * H,) not in carry_shapes, carry_shapes


def test_scan_grad_recomputed_chain_and_shared_values(x64):
    # s feeds several saved values (q, r = q*q) and the carry; the recomputation must not
    # define a value twice in the backward body.
    def step(c, x):
        s = jnp.tanh(x + c)
        q = s * 3.0
        r = q * q
        return c * s + r * q, s * q

    def f(c0, xs):
        c, ys = lax.scan(step, c0, xs)
        return jnp.sum(c * c) + jnp.sum(ys * jnp.cos(ys))

    def f_py(c0, xs):
        c, total = c0, 0.0
        for t in range(xs.shape[0]):
            c, y = step(c, xs[t])
            total = total + jnp.sum(y * jnp.cos(y))
        return jnp.sum(c * c) + total

    rng = np.random.default_rng(2)
    c0, xs = rng.standard_normal(3) * 0.1, rng.standard_normal((4, 3)) * 0.3
    want = grad(f_py, argnums=(0, 1))(c0, xs)
    for got in (grad(f, argnums=(0, 1))(c0, xs),
                funcgrad.jit(grad(f, argnums=(0, 1)))(c0, xs)):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-10, atol=1e-12)
