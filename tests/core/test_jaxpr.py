"""Jaxpr construction, pretty-printing, type checking and evaluation."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core.avals import ShapedArray
from funcgrad.core.jaxpr import (ClosedJaxpr, Eqn, Jaxpr, JaxprTypeError, Var, check_jaxpr,
                                 eval_jaxpr)
from funcgrad.lax.elementwise import add_p, sin_p


def test_make_jaxpr_prints_readably():
    closed = funcgrad.make_jaxpr(lambda x, y: (jnp.sin(x) * y).sum(axis=0))(
        jnp.ones((2, 3)), jnp.ones(3))
    text = str(closed)
    assert text.startswith("{ lambda ; a:f32[2,3] b:f32[3]. let")
    assert "sin a" in text and "reduce_sum[axes=(0,)]" in text
    assert text.rstrip().endswith("}")
    check_jaxpr(closed.jaxpr)


def test_closed_over_arrays_are_consts_and_literals_inline():
    w = jnp.arange(3.0)
    closed = funcgrad.make_jaxpr(lambda x: x * w + 2.0)(jnp.ones(3))
    assert len(closed.consts) == 1 and closed.consts[0] is w
    assert "2.0" in str(closed)
    out = eval_jaxpr(closed.jaxpr, closed.consts, jnp.ones(3))
    np.testing.assert_allclose(np.asarray(out[0]), [2.0, 3.0, 4.0])


def test_eval_jaxpr_under_jit_matches():
    def f(x):
        return jnp.tanh(x) @ jnp.ones((3, 2)) + x.sum()

    x = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    closed = funcgrad.make_jaxpr(f)(x)
    eager = eval_jaxpr(closed.jaxpr, closed.consts, jnp.asarray(x))[0]
    jitted = funcgrad.jit(lambda a: eval_jaxpr(closed.jaxpr, closed.consts, a)[0])(x)
    np.testing.assert_allclose(np.asarray(eager), np.asarray(f(jnp.asarray(x))), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6)


def test_check_jaxpr_catches_errors():
    f32 = ShapedArray((3,), np.float32)
    a, b = Var(f32), Var(f32)
    wrong = Var(ShapedArray((4,), np.float32))
    bad_type = Jaxpr([], [a], [Eqn(sin_p, [a], {}, [wrong])], [wrong])
    with pytest.raises(JaxprTypeError, match=r"sin.*f32\[4\].*f32\[3\]"):
        check_jaxpr(bad_type)
    undefined = Jaxpr([], [a], [Eqn(add_p, [a, b], {}, [Var(f32)])], [a])
    with pytest.raises(JaxprTypeError, match="used before it is defined"):
        check_jaxpr(undefined)
    twice = Jaxpr([], [a], [Eqn(sin_p, [a], {}, [a])], [a])
    with pytest.raises(JaxprTypeError, match="defined twice"):
        check_jaxpr(twice)
    i32 = Var(ShapedArray((3,), np.int32))
    bad_prim = Jaxpr([], [a, i32], [Eqn(add_p, [a, i32], {}, [Var(f32)])], [a])
    with pytest.raises(TypeError, match=r"lax\.add.*dtypes must match"):
        check_jaxpr(bad_prim)


def test_closed_jaxpr_is_callable():
    closed = funcgrad.make_jaxpr(lambda x: lax.mul(x, x))(jnp.ones(2))
    assert isinstance(closed, ClosedJaxpr)
    out = closed(jnp.asarray(np.array([2.0, 3.0], np.float32)))
    out = out[0] if isinstance(out, (list, tuple)) else out
    np.testing.assert_allclose(np.asarray(out), [4.0, 9.0])
