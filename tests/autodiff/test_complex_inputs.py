"""grad / value_and_grad / jacrev of real-valued functions of complex inputs follow JAX's
conjugate convention (``df/dx - i df/dy``); checked against central finite differences in
float64, stored JAX 0.10.2 values, and JAX itself (in a subprocess) when it is installed."""
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

Z = np.array([1 + 2j, 0.5 - 1j, -0.3 + 0.7j], np.complex64)


def f_sq(z):
    return jnp.real(z) ** 2 + jnp.imag(z) ** 2


def f_vec(z):
    return jnp.sum(jnp.abs(jnp.sin(z)) ** 2 + jnp.real(z * jnp.conj(z[::-1])))


def f_jac(z):
    return jnp.abs(z) ** 2 * jnp.real(z[0])


# jax.value_and_grad(f_vec)(Z) and jax.jacrev(f_jac)(Z), JAX 0.10.2 on CPU.
JAX_VG = (19.58592, [0.30929846 - 28.689917j, 1.8414707 + 5.62686j, 1.4353575 - 5.9043016j])
JAX_JACREV = [[7 - 4j, 0, 0], [1.25, 1 + 2j, 0], [0.58, 0, -0.6 - 1.4j]]


def conj_fd_grad(f, z, eps=1e-6):
    """df/dx - i df/dy by central differences (float64), per element of z."""
    z = np.asarray(z, np.complex128)
    out = np.zeros(z.shape + np.shape(f(z)), np.complex128)
    for k in np.ndindex(z.shape):
        e = np.zeros(z.shape, np.complex128)
        e[k] = 1.0
        dx = (np.asarray(f(z + eps * e)) - np.asarray(f(z - eps * e))) / (2 * eps)
        dy = (np.asarray(f(z + 1j * eps * e)) - np.asarray(f(z - 1j * eps * e))) / (2 * eps)
        out[k] = dx - 1j * dy
    return out


def test_issue_example():
    g = funcgrad.grad(f_sq)(3 + 4j)
    assert g.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(g), 6 - 8j)


def test_value_and_grad_matches_stored_jax_and_finite_differences():
    v, g = funcgrad.value_and_grad(f_vec)(jnp.asarray(Z))
    assert g.dtype == np.complex64 and g.shape == (3,)
    np.testing.assert_allclose(float(v), JAX_VG[0], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g), JAX_VG[1], rtol=1e-5, atol=1e-5)
    with funcgrad.config.override("enable_x64", True):
        fd = conj_fd_grad(lambda z: np.asarray(f_vec(jnp.asarray(z))), Z)
        g64 = funcgrad.grad(f_vec)(jnp.asarray(Z.astype(np.complex128)))
        assert g64.dtype == np.complex128
        np.testing.assert_allclose(np.asarray(g64), fd, rtol=1e-7, atol=1e-7)


def test_jacrev_matches_stored_jax_and_finite_differences():
    j = funcgrad.jacrev(f_jac)(jnp.asarray(Z))
    assert j.shape == (3, 3) and j.dtype == np.complex64
    np.testing.assert_allclose(np.asarray(j), JAX_JACREV, rtol=1e-5, atol=1e-6)
    with funcgrad.config.override("enable_x64", True):
        fd = conj_fd_grad(lambda z: np.asarray(f_jac(jnp.asarray(z))), Z)   # (in, out)
        j64 = funcgrad.jacrev(f_jac)(jnp.asarray(Z.astype(np.complex128)))
        np.testing.assert_allclose(np.asarray(j64), fd.T, rtol=1e-7, atol=1e-7)


def test_pytree_argnums_and_jit():
    def loss(p, w):
        return jnp.sum(jnp.abs(p["a"] * w) ** 2) + jnp.real(p["b"]) * w[0]
    p = {"a": jnp.asarray(Z), "b": jnp.asarray(0.5 + 0.25j, dtype=jnp.complex64)}
    w = jnp.asarray([1.0, 2.0, 3.0])
    g = funcgrad.jit(funcgrad.grad(loss, argnums=(0, 1)))(p, w)
    # d/dz-bar of |a w|^2 -> conj-convention gradient 2 * w^2 * conj(a)
    np.testing.assert_allclose(np.asarray(g[0]["a"]), 2 * np.asarray(w) ** 2 * np.conj(Z),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g[0]["b"]), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(g[1]),
                               2 * np.asarray(w) * np.abs(Z) ** 2 + np.array([0.5, 0, 0]),
                               rtol=1e-5)


def test_what_stays_an_error():
    z = jnp.asarray(Z)
    with pytest.raises(TypeError, match="grad.*real float scalar.*holomorphic=True"):
        funcgrad.grad(lambda z: jnp.sum(z * z))(z)
    with pytest.raises(TypeError, match=r"jacrev.*outputs must be real, got c64\[3\]"):
        funcgrad.jacrev(lambda z: z * 2)(z)
    with pytest.raises(TypeError, match="jacfwd.*requires real-valued inputs.*reverse mode"):
        funcgrad.jacfwd(f_jac)(z)
    with pytest.raises(TypeError, match="jacfwd.*requires real-valued inputs"):
        funcgrad.hessian(f_vec)(z)      # JAX raises here too (hessian is jacfwd of jacrev)
    # holomorphic=True still gives f'(z)
    np.testing.assert_allclose(np.asarray(funcgrad.grad(lambda z: z * z, holomorphic=True)(
        jnp.asarray(1 + 1j, dtype=jnp.complex64))), 2 + 2j)


JAX_SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    z = jnp.asarray(np.array(json.loads(sys.argv[1])).view(np.complex128).astype(np.complex64))
    f_vec = lambda z: jnp.sum(jnp.abs(jnp.sin(z)) ** 2 + jnp.real(z * jnp.conj(z[::-1])))
    f_jac = lambda z: jnp.abs(z) ** 2 * jnp.real(z[0])
    f_sq = lambda z: jnp.real(z) ** 2 + jnp.imag(z) ** 2
    v, g = jax.value_and_grad(f_vec)(z)
    j = jax.jacrev(f_jac)(z)
    s = jax.grad(f_sq)(3 + 4j)
    c = lambda a: np.asarray(a, np.complex128).view(np.float64).tolist()
    print(json.dumps({"v": float(v), "g": c(g), "j": c(j), "s": c(np.array([s]))}))
''')


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_against_jax_subprocess():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    arg = json.dumps(Z.astype(np.complex128).view(np.float64).tolist())
    out = subprocess.run([sys.executable, "-c", JAX_SCRIPT, arg], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    ref = json.loads(out.stdout.strip().splitlines()[-1])
    c = lambda a: np.asarray(a, np.float64).view(np.complex128)
    z = jnp.asarray(Z)
    v, g = funcgrad.value_and_grad(f_vec)(z)
    np.testing.assert_allclose(float(v), ref["v"], rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g), c(ref["g"]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(funcgrad.jacrev(f_jac)(z)), c(ref["j"]),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.grad(f_sq)(3 + 4j)), c(ref["s"])[0])
