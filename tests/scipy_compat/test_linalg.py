"""funcgrad.scipy.linalg against scipy.linalg (float64), with jit/vmap/grad."""
import numpy as np
import pytest
import scipy.linalg as sl

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.scipy import linalg as L

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 4))
SPD = A @ A.T + 4 * np.eye(4)
B = RNG.normal(size=(4, 2))
R = RNG.normal(size=(5, 3))


def _np(x):
    return np.asarray(x)


@pytest.mark.parametrize("lower", [False, True])
def test_cholesky_cho_factor_cho_solve(x64, lower):
    np.testing.assert_allclose(_np(L.cholesky(SPD, lower=lower)), sl.cholesky(SPD, lower=lower),
                               rtol=1e-12, atol=1e-14)
    c = L.cho_factor(SPD, lower=lower)
    assert c[1] == lower
    np.testing.assert_allclose(_np(L.cho_solve(c, B)), sl.cho_solve(sl.cho_factor(SPD, lower),
                                                                     B), rtol=1e-11)
    np.testing.assert_allclose(_np(L.cho_solve(c, B[:, 0])), np.linalg.solve(SPD, B[:, 0]),
                               rtol=1e-11)
    with pytest.raises(ValueError, match="cho_solve: b's first dimension"):
        L.cho_solve(c, np.ones(3))


def test_lu_factor_lu_solve(x64):
    lu, piv = L.lu_factor(A)
    slu, spiv = sl.lu_factor(A)
    np.testing.assert_allclose(_np(lu), slu, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(_np(piv), spiv)
    for trans in (0, 1, 2):
        np.testing.assert_allclose(_np(L.lu_solve((lu, piv), B, trans=trans)),
                                   sl.lu_solve((slu, spiv), B, trans=trans), rtol=1e-11)
    ac = A + 1j * A[::-1]
    lu, piv = L.lu_factor(ac)
    np.testing.assert_allclose(_np(L.lu_solve((lu, piv), B, trans=2)),
                               sl.lu_solve(sl.lu_factor(ac), B, trans=2), rtol=1e-11)


@pytest.mark.parametrize("m", [A, R, R.T], ids=["square", "tall", "wide"])
def test_lu(x64, m):
    p, l_, u = map(_np, L.lu(m))
    sp, sl_, su = sl.lu(m)
    np.testing.assert_allclose(p, sp)
    np.testing.assert_allclose(l_, sl_, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(u, su, rtol=1e-12, atol=1e-14)
    pl, u2 = L.lu(m, permute_l=True)
    np.testing.assert_allclose(_np(pl) @ _np(u2), m, atol=1e-13)


def test_solve_triangular_solve_det_inv(x64):
    t = np.tril(SPD)
    for trans in (0, 1, 2):
        np.testing.assert_allclose(_np(L.solve_triangular(t, B, lower=True, trans=trans)),
                                   sl.solve_triangular(t, B, lower=True, trans=trans),
                                   rtol=1e-12)
    np.testing.assert_allclose(_np(L.solve(A, B)), sl.solve(A, B), rtol=1e-11)
    np.testing.assert_allclose(_np(L.solve(np.triu(SPD), B, assume_a="pos")),
                               sl.solve(SPD, B, assume_a="pos"), rtol=1e-11)
    np.testing.assert_allclose(_np(L.solve(np.tril(SPD), B, assume_a="pos", lower=True)),
                               sl.solve(SPD, B), rtol=1e-11)
    np.testing.assert_allclose(float(L.det(A)), sl.det(A), rtol=1e-12)
    np.testing.assert_allclose(_np(L.inv(A)), sl.inv(A), rtol=1e-11)


def test_expm(x64):
    for m in (A, 0.01 * A, 30 * A, np.array([[0.0, 200.0], [-200.0, 0.0]])):
        np.testing.assert_allclose(_np(L.expm(m)), sl.expm(m), rtol=1e-10, atol=1e-12)
    batch = np.stack([A, 0.5 * A.T])
    got = funcgrad.jit(L.expm)(batch)
    np.testing.assert_allclose(_np(got), np.stack([sl.expm(A), sl.expm(0.5 * A.T)]),
                               rtol=1e-11)
    # d/dt sum(expm(t A)) at t = 1 is sum(A expm(A))
    g = funcgrad.grad(lambda t: jnp.sum(L.expm(t * A)))(1.0)
    np.testing.assert_allclose(float(g), np.sum(A @ sl.expm(A)), rtol=1e-9)
    assert L.expm(A.astype(np.float32)).dtype == np.float32
    big = np.array([[0.0, 1e6], [-1e6, 0.0]])
    assert np.isnan(np.asarray(L.expm(big))).all()          # needs 18 squarings > 16
    np.testing.assert_allclose(_np(L.expm(big, max_squarings=24)), sl.expm(big), atol=1e-6)


def test_sqrtm(x64, on_cpu):
    for m in (SPD, A, np.array([[4.0, 1.0], [0.0, 9.0]])):
        got = _np(L.sqrtm(m))
        np.testing.assert_allclose(got, sl.sqrtm(m), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got @ got, m, atol=1e-12)


def test_block_diag(x64):
    args = (np.ones((2, 2)), np.array([3.0, 4.0]), 5.0, np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(_np(L.block_diag(*args)), sl.block_diag(*args))
    assert L.block_diag().shape == sl.block_diag().shape
    with pytest.raises(ValueError, match="block_diag: argument 0 must have at most 2"):
        L.block_diag(np.ones((2, 2, 2)))
    g = funcgrad.grad(lambda x: jnp.sum(L.block_diag(x, 2 * x) ** 2))(jnp.ones((2, 2)))
    np.testing.assert_allclose(_np(g), 10 * np.ones((2, 2)))


def test_eigh(x64):
    w, v = L.eigh(SPD)
    sw, sv = sl.eigh(SPD)
    np.testing.assert_allclose(_np(w), sw, rtol=1e-12)
    np.testing.assert_allclose(np.abs(_np(v)), np.abs(sv), atol=1e-12)
    bm = 0.1 * A @ A.T + np.eye(4)
    w, v = L.eigh(SPD, bm)
    sw, sv = sl.eigh(SPD, bm)
    np.testing.assert_allclose(_np(w), sw, rtol=1e-11)
    np.testing.assert_allclose(np.abs(_np(v)), np.abs(sv), atol=1e-11)
    np.testing.assert_allclose(_np(L.eigh(SPD, eigvals_only=True)), sw * 0 + sl.eigh(
        SPD, eigvals_only=True), rtol=1e-12)


def test_schur(x64, on_cpu):
    t, z = map(_np, L.schur(A))
    st, sz = sl.schur(A)
    np.testing.assert_allclose(t, st, atol=1e-12)
    np.testing.assert_allclose(z @ t @ z.T, A, atol=1e-12)
    t, z = map(_np, L.schur(A, output="complex"))
    assert np.iscomplexobj(t) and np.abs(np.tril(t, -1)).max() == 0
    np.testing.assert_allclose(z @ t @ z.conj().T, A, atol=1e-12)
    ts = _np(funcgrad.vmap(lambda m: L.schur(m)[0])(np.stack([A, A.T])))
    np.testing.assert_allclose(ts[1], sl.schur(A.T)[0], atol=1e-12)
    with pytest.raises(TypeError, match="schur: the Schur decomposition is not differentiable"):
        funcgrad.grad(lambda m: jnp.sum(L.schur(m)[0]))(A)


@pytest.mark.parametrize("side", ["right", "left"])
def test_polar(x64, side):
    for m in (A, R, R.T):
        u, p = map(_np, L.polar(m, side))
        su, sp = sl.polar(m, side)
        np.testing.assert_allclose(u, su, atol=1e-12)
        np.testing.assert_allclose(p, sp, atol=1e-12)


def test_svd_qr(x64):
    u, s, vh = L.svd(R, full_matrices=False)
    np.testing.assert_allclose(_np(s), sl.svd(R, compute_uv=False), rtol=1e-12)
    q, r = L.qr(R)
    assert q.shape == (5, 5) and r.shape == (5, 3)
    np.testing.assert_allclose(_np(q) @ _np(r), R, atol=1e-12)
    q, r = L.qr(R, mode="economic")
    assert q.shape == (5, 3)


def test_float32_and_errors():
    x = L.cho_solve(L.cho_factor(SPD.astype(np.float32)), B.astype(np.float32))
    assert x.dtype == np.float32
    np.testing.assert_allclose(_np(x), np.linalg.solve(SPD, B), rtol=1e-4)
    with pytest.raises(ValueError, match="scipy.linalg.expm: expected square"):
        L.expm(np.ones((2, 3)))
    with pytest.raises(ValueError, match="polar: side must be"):
        L.polar(A, "up")
