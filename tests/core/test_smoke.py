"""End-to-end checks of the foundation: eager, jit and make_jaxpr agree with NumPy."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp


def test_eager_matches_numpy(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    out = jnp.tanh(jnp.asarray(a) @ jnp.asarray(b)).sum(axis=1)
    np.testing.assert_allclose(np.asarray(out), np.tanh(a @ b).sum(axis=1), rtol=1e-5)


def test_jit_matches_eager_and_traces_once(rng):
    a = jnp.asarray(rng.standard_normal((5,)).astype(np.float32))
    f = funcgrad.jit(lambda x: jnp.sin(x) * 2.0 + x ** 2)
    first = f(a)
    second = f(a + 1.0)
    assert f.trace_count == 1
    np.testing.assert_allclose(np.asarray(first), np.sin(np.asarray(a)) * 2 + np.asarray(a) ** 2,
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(second),
                               np.asarray(jnp.sin(a + 1.0) * 2.0 + (a + 1.0) ** 2), rtol=1e-6)


def test_make_jaxpr_prints_equations():
    text = str(funcgrad.make_jaxpr(lambda x: jnp.sin(x) + 1.0)(1.0))
    assert "sin a" in text and "add b 1.0" in text


def test_python_control_flow_on_tracer_names_function_and_fix():
    def branchy(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TypeError) as info:
        funcgrad.jit(branchy)(jnp.ones(()))
    message = str(info.value)
    assert "branchy" in message and "static_argnums" in message and "lax.cond" in message
    assert "test_smoke.py" in message
