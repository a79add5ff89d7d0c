"""Derivatives of every linear-algebra function match JAX's (0.10.2): JVPs along fixed
tangents and VJPs of fixed cotangents, real and complex, for the calls in ``grad_cases``.

The references are stored in ``jax_grad_refs.npz`` (written by ``make_jax_grad_refs.py`` with
JAX), so the comparison runs without JAX; with JAX installed, ``test_stored_refs_are_jax``
recomputes some of them in a subprocess (JAX and funcgrad both drive jaxlib, so they do not
share a process) and checks that the file still holds JAX's numbers. Where JAX does not
differentiate a call (it records the error), funcgrad must not invent numbers either, except
where a test below says otherwise (eigenvectors of non-symmetric matrices, behind JAX's
``enable_eigvec_derivs`` switch).
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import funcgrad
import funcgrad.lax
import funcgrad.numpy
import funcgrad.scipy.linalg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grad_cases import CASES, cotangents  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REF = dict(np.load(os.path.join(HERE, "jax_grad_refs.npz")))
UNSUPPORTED = sorted(k.rsplit("/", 1)[0] for k in REF if k.endswith("/unsupported"))
SUPPORTED = sorted(set(CASES) - set(UNSUPPORTED))
# Where funcgrad's VJP is deliberately not JAX's. JAX solves a positive-definite system with
# ``custom_linear_solve(..., symmetric=True)``, whose VJP reuses the solve for its transpose:
# for a complex Hermitian ``a`` that is ``a^-1`` where the transpose is ``a^-T``, so JAX's VJP
# is not the transpose of its own JVP. funcgrad's JVP is JAX's; its VJP is the JVP's
# transpose (checked below).
VJP_NOT_JAX = {"scipy.solve_pos/complex"}


class _Namespace:
    numpy, lax, scipy_linalg = funcgrad.numpy, funcgrad.lax, funcgrad.scipy.linalg


NS = _Namespace()


@pytest.fixture(autouse=True)
def _x64():
    with funcgrad.config.override("enable_x64", True):
        yield


def _close(got, want, what):
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape} vs JAX's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} vs JAX's {want.dtype}"
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * scale, err_msg=what)


def _outputs(name, kind):
    return [REF[f"{name}/{kind}{i}"] for i in range(len(CASES[name].inputs) + 64)
            if f"{name}/{kind}{i}" in REF]


@pytest.mark.parametrize("name", SUPPORTED)
def test_jvp_matches_jax(name):
    case = CASES[name]
    f = case.fn(NS)
    primals, tangents = funcgrad.jvp(f, case.inputs, case.tangents)
    want_p, want_t = _outputs(name, "out"), _outputs(name, "jvp")
    assert len(primals) == len(want_p)
    for i, (p, t) in enumerate(zip(primals, tangents)):
        _close(p, want_p[i], f"{name}: output {i}")
        _close(t, want_t[i], f"{name}: tangent of output {i}")


@pytest.mark.parametrize("name", [n for n in SUPPORTED if n not in VJP_NOT_JAX])
def test_vjp_matches_jax(name):
    case = CASES[name]
    f = case.fn(NS)
    primals, pullback = funcgrad.vjp(f, *case.inputs)
    cts = pullback(cotangents([np.asarray(p) for p in primals], name))
    want = _outputs(name, "vjp")
    assert len(cts) == len(want)
    for j, (c, w) in enumerate(zip(cts, want)):
        _close(c, w, f"{name}: cotangent of input {j}")


@pytest.mark.parametrize("name", sorted(VJP_NOT_JAX))
def test_vjp_is_the_transpose_of_the_jvp(name):
    case = CASES[name]
    f = case.fn(NS)
    _, tangents = funcgrad.jvp(f, case.inputs, case.tangents)
    primals, pullback = funcgrad.vjp(f, *case.inputs)
    cts = cotangents([np.asarray(p) for p in primals], name)
    lhs = sum(np.sum(c * np.asarray(t)) for c, t in zip(cts, tangents))
    rhs = sum(np.sum(np.asarray(c) * t) for c, t in zip(pullback(cts), case.tangents))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


@pytest.mark.parametrize("name", UNSUPPORTED)
def test_refuses_what_jax_refuses(name):
    case = CASES[name]
    f = case.fn(NS)
    with pytest.raises((TypeError, NotImplementedError)):
        funcgrad.jvp(f, case.inputs, case.tangents)


QUICK = ["numpy.cholesky/complex", "numpy.eigh/real", "numpy.svd_wide/complex",
         "scipy.lu_tall/real", "numpy.slogdet/complex", "numpy.qr_wide/real"]


def test_stored_refs_are_jax():
    pytest.importorskip("jax")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "refs.npz")
        subprocess.run([sys.executable, os.path.join(HERE, "make_jax_grad_refs.py"), path,
                        "--only=" + ",".join(QUICK)], check=True, timeout=600,
                       capture_output=True)
        fresh = dict(np.load(path))
    for key, value in fresh.items():
        np.testing.assert_allclose(value, REF[key], rtol=1e-10, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_cholesky_gradient_is_hermitian(kind):
    # the example: JAX symmetrizes, so grad(sum(cholesky)) is Hermitian; reading the
    # lower triangle alone gives a triangular gradient
    x = CASES[f"numpy.cholesky/{kind}"].inputs[0]
    if kind == "real":
        g = np.asarray(funcgrad.grad(lambda a: funcgrad.numpy.linalg.cholesky(a).sum())(x))
    else:
        g = np.asarray(funcgrad.grad(lambda a: funcgrad.numpy.linalg.cholesky(a).sum(),
                                     holomorphic=True)(x))
    np.testing.assert_allclose(g, g.conj().T, rtol=1e-12)
    assert np.abs(np.triu(g, 1)).max() > 1e-3
    # the JVP along a tangent is the JVP along its Hermitian part
    t = CASES[f"numpy.cholesky/{kind}"].tangents[0]
    f = funcgrad.numpy.linalg.cholesky
    _, d1 = funcgrad.jvp(f, (x,), (t,))
    _, d2 = funcgrad.jvp(f, (x,), ((t + t.conj().T) / 2,))
    np.testing.assert_allclose(np.asarray(d1), np.asarray(d2), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["numpy.cholesky/complex", "numpy.qr_wide/real",
                                  "numpy.svd_tall/complex", "lax.eig_right_vectors/real",
                                  "scipy.solve_pos/real"])
def test_jit_and_vmap_of_derivatives(name):
    case = CASES[name]
    f = case.fn(NS)
    jvp = funcgrad.jit(lambda xs, ts: funcgrad.jvp(f, xs, ts)[1])
    for got, want in zip(jvp(case.inputs, case.tangents), _outputs(name, "jvp")):
        _close(got, want, f"jit(jvp({name}))")
    # a batch of two copies of the same inputs: each row is JAX's VJP
    stack = [np.stack([x, x]) for x in case.inputs]
    primals = f(*case.inputs)
    cts = cotangents([np.asarray(p) for p in primals], name)
    batched = funcgrad.vmap(lambda *xs: funcgrad.vjp(f, *xs)[1](cts))(*stack)
    for got, want in zip(batched, _outputs(name, "vjp")):
        _close(np.asarray(got)[1], want, f"vmap(vjp({name}))")
