"""custom_jvp / custom_vjp functions and rules with Python control flow on their inputs run on
concrete values under eager differentiation (nothing is staged), as JAX documents; under jit
they are staged and the same code raises ConcretizationTypeError, as in JAX."""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.core.errors import ConcretizationTypeError


# The same definitions run here with funcgrad and, in the JAX check below, with jax.
DEFINITIONS = '''
@lib.custom_jvp
def f(x):
    if x > 0:
        return jnp.sin(x)
    return jnp.cos(x)


@f.defjvp
def f_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    ans = f(x)
    if x > 0:
        return ans, jnp.cos(x) * 2.0 * t
    return ans, 3.0 * t


@lib.custom_vjp
def g(x, y):
    if x > y:
        return x * y
    return x + y


def g_fwd(x, y):
    return g(x, y), (x, y)


def g_bwd(res, ct):
    x, y = res
    if x > y:
        return (2.0 * y * ct, 2.0 * x * ct)
    return (3.0 * ct, None)


g.defvjp(g_fwd, g_bwd)
'''
_namespace = {"lib": funcgrad, "jnp": jnp}
exec(DEFINITIONS, _namespace)
f, g = _namespace["f"], _namespace["g"]


# Values JAX 0.10.2 gives for the same definitions (checked with the subprocess test below).
EXPECTED = {
    "grad_f_pos": 2 * np.cos(1.0), "grad_f_neg": 3.0,
    "grad_grad_f_pos": -2 * np.sin(1.0), "grad_grad_f_neg": 0.0,
    "vg_f_pos": (np.sin(1.0), 2 * np.cos(1.0)),
    "grad_g_pos": (2 * 0.5, 2 * 2.0), "grad_g_neg": (3.0, 0.0),
    "jvp_f": (np.sin(0.5), 2 * np.cos(0.5) * 0.25),
}


def test_custom_jvp_control_flow_under_grad():
    np.testing.assert_allclose(float(funcgrad.grad(f)(1.0)), EXPECTED["grad_f_pos"], rtol=1e-6)
    np.testing.assert_allclose(float(funcgrad.grad(f)(-1.0)), EXPECTED["grad_f_neg"], rtol=1e-6)
    v, d = funcgrad.value_and_grad(f)(1.0)
    np.testing.assert_allclose((float(v), float(d)), EXPECTED["vg_f_pos"], rtol=1e-6)
    p, t = funcgrad.jvp(f, (0.5,), (0.25,))
    np.testing.assert_allclose((float(p), float(t)), EXPECTED["jvp_f"], rtol=1e-6)


def test_custom_jvp_control_flow_nested_grad():
    np.testing.assert_allclose(float(funcgrad.grad(funcgrad.grad(f))(1.0)),
                               EXPECTED["grad_grad_f_pos"], rtol=1e-6)
    np.testing.assert_allclose(float(funcgrad.grad(funcgrad.grad(f))(-1.0)),
                               EXPECTED["grad_grad_f_neg"], atol=1e-7)


def test_custom_jvp_inside_a_larger_function_and_jacrev():
    def h(x):
        return f(x[0]) * x[1] + f(-x[1])
    x = jnp.asarray([1.0, 2.0])
    expected = [2 * np.cos(1.0) * 2.0, np.sin(1.0) - 3.0]
    np.testing.assert_allclose(np.asarray(funcgrad.grad(h)(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.jacrev(h)(x)), expected, rtol=1e-6)


def test_custom_vjp_control_flow_under_grad():
    gx, gy = funcgrad.grad(g, argnums=(0, 1))(2.0, 0.5)
    np.testing.assert_allclose((float(gx), float(gy)), EXPECTED["grad_g_pos"], rtol=1e-6)
    gx, gy = funcgrad.grad(g, argnums=(0, 1))(0.5, 2.0)
    np.testing.assert_allclose((float(gx), float(gy)), EXPECTED["grad_g_neg"], rtol=1e-6)
    v, gx = funcgrad.value_and_grad(g)(2.0, 0.5)
    np.testing.assert_allclose((float(v), float(gx)), (1.0, 1.0), rtol=1e-6)


def test_structured_outputs_keep_their_tree():
    @funcgrad.custom_vjp
    def pair(x):
        return {"a": x * 2.0 if x > 0 else -x, "b": x}

    pair.defvjp(lambda x: (pair(x), x),
                lambda x, ct: (ct["a"] * (5.0 if x > 0 else 7.0) + ct["b"],))
    loss = lambda x: pair(x)["a"] + 10.0 * pair(x)["b"]
    np.testing.assert_allclose(float(funcgrad.grad(loss)(1.0)), 5.0 + 10.0)
    np.testing.assert_allclose(float(funcgrad.grad(loss)(-1.0)), 7.0 + 10.0)


def test_staged_under_jit_as_in_jax():
    with pytest.raises(ConcretizationTypeError):
        funcgrad.jit(funcgrad.grad(f))(1.0)
    with pytest.raises(ConcretizationTypeError):
        funcgrad.grad(funcgrad.jit(f))(1.0)
    # a branch-free custom rule still compiles
    np.testing.assert_allclose(float(funcgrad.jit(funcgrad.grad(
        lambda x: jnp.sin(x) * 2.0))(1.0)), 2 * np.cos(1.0), rtol=1e-6)


def test_vmap_of_grad_stages_the_call():
    @funcgrad.custom_jvp
    def softplus(x):
        return jnp.log1p(jnp.exp(x))
    softplus.defjvp(lambda p, t: (softplus(p[0]), t[0] * funcgrad.nn.sigmoid(p[0])))
    xs = jnp.asarray([-1.0, 0.0, 2.0])
    got = funcgrad.vmap(funcgrad.grad(softplus))(xs)
    np.testing.assert_allclose(np.asarray(got), 1 / (1 + np.exp(-np.asarray(xs))), rtol=1e-6)


JAX_SCRIPT = ("import json\nimport jax, jax.numpy as jnp\nlib = jax\n" + DEFINITIONS
              + textwrap.dedent('''
    fl = lambda t: [float(v) for v in t]
    print(json.dumps({
        "grad_f_pos": float(jax.grad(f)(1.0)), "grad_f_neg": float(jax.grad(f)(-1.0)),
        "grad_grad_f_pos": float(jax.grad(jax.grad(f))(1.0)),
        "grad_grad_f_neg": float(jax.grad(jax.grad(f))(-1.0)),
        "vg_f_pos": fl(jax.value_and_grad(f)(1.0)),
        "grad_g_pos": fl(jax.grad(g, argnums=(0, 1))(2.0, 0.5)),
        "grad_g_neg": fl(jax.grad(g, argnums=(0, 1))(0.5, 2.0)),
        "jvp_f": fl(jax.jvp(f, (0.5,), (0.25,))),
    }))
'''))


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_expected_values_are_jax_values():
    out = subprocess.run([sys.executable, "-c", JAX_SCRIPT], capture_output=True, text=True,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ref = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(ref) == set(EXPECTED)
    for k, v in ref.items():
        np.testing.assert_allclose(v, EXPECTED[k], rtol=1e-6, atol=1e-7, err_msg=k)
