"""Reverse mode through a ``scan`` whose body holds another ``cond``, ``scan`` or static
``fori_loop`` (the primal carry of the inner equation must stay on the known side): gradients
against float64 central differences, eager vs ``jit``, and ``jacfwd`` vs ``jacrev``."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.lax.control_flow.linear_split import split_known_linear

INNER = {
    "cond": lambda c, x, w: lax.cond(x > 0, lambda v: jnp.sin(v) * w, lambda v: v + w * x, c),
    "switch": lambda c, x, w: lax.switch(jnp.int32(x > 0) + jnp.int32(x > 2),
                                         [lambda v: v * w, lambda v: jnp.tanh(v) + w,
                                          lambda v: v * v * w], c),
    "scan": lambda c, x, w: lax.scan(lambda cc, _: (jnp.sin(cc) * w + x, None), c, None,
                                     length=2)[0],
    "fori_loop": lambda c, x, w: lax.fori_loop(0, 2, lambda i, cc: jnp.cos(cc) * w + x, c),
    "cond_in_scan": lambda c, x, w: lax.scan(
        lambda cc, _: (lax.cond(cc > 0, lambda v: v * w, lambda v: -v * w, cc) + x, None),
        c, None, length=3)[0],
}


def outer(inner):
    def f(w, xs):
        def body(c, x):
            c = inner(c, x, w)
            return c, c * x
        c, ys = lax.scan(body, jnp.asarray(0.7, xs.dtype), xs)
        return c + jnp.sum(ys)
    return f


def central_difference(f, w, xs, eps=1e-6):
    return (float(f(w + eps, xs)) - float(f(w - eps, xs))) / (2 * eps)


@pytest.mark.parametrize("name", sorted(INNER))
def test_grad_matches_float64_differences(name, x64):
    f = outer(INNER[name])
    xs = jnp.asarray(np.array([0.5, -1.0, 2.5, 0.25]))
    w = jnp.asarray(0.8)
    g = funcgrad.grad(f)(w, xs)
    np.testing.assert_allclose(float(g), central_difference(f, 0.8, xs), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(float(funcgrad.jit(funcgrad.grad(f))(w, xs)), float(g),
                               rtol=1e-12)
    # the gradient with respect to the xs too, forward vs reverse mode
    np.testing.assert_allclose(np.asarray(funcgrad.jacrev(f, argnums=1)(w, xs)),
                               np.asarray(funcgrad.jacfwd(f, argnums=1)(w, xs)), rtol=1e-10)


def test_value_and_grad_float32_under_jit():
    f = outer(INNER["cond"])
    xs = jnp.array([1.0, -2.0, 3.0])
    v, g = funcgrad.jit(funcgrad.value_and_grad(f))(jnp.float32(0.5), xs)
    np.testing.assert_allclose(float(v), float(f(jnp.float32(0.5), xs)), rtol=1e-6)
    np.testing.assert_allclose(float(g), central_difference(f, 0.5, xs, eps=1e-3), rtol=2e-3)


def test_split_keeps_the_primal_outputs_of_a_cond_known():
    """The JVP cond inside a linearized body: its primal output computed by a known copy."""
    def body(c, x, t):
        return lax.cond(x > 0, lambda v, u: (v * 2.0, u * v), lambda v, u: (v, u), c, t)
    j = funcgrad.make_jaxpr(body)(1.0, 1.0, 1.0).jaxpr
    known, linear, lin_vars = split_known_linear(j.eqns, [j.invars[2]])
    assert j.outvars[0] not in lin_vars and j.outvars[1] in lin_vars
    assert [e.prim.name for e in linear] == ["cond"]
    assert any(e.prim.name == "cond" and j.outvars[0] in e.outvars for e in known)
    # the known copy reads no linear value
    copy = next(e for e in known if e.prim.name == "cond")
    assert not any(v in lin_vars for v in copy.invars if hasattr(v, "aval") and
                   not hasattr(v, "val"))
