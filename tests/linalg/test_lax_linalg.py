"""funcgrad.lax.linalg primitives against NumPy: eager, jit, batched, float32/float64/complex."""
import numpy as np
import pytest

import funcgrad
from funcgrad.lax import linalg as L


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _spd(rng, shape, dtype):
    a = _rand(rng, shape, dtype)
    n = shape[-1]
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n, dtype=dtype)


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_cholesky(rng, dtype):
    a = _spd(rng, (2, 4, 4), dtype)
    np.testing.assert_allclose(L.cholesky(a), np.linalg.cholesky(a), atol=_tol(dtype))
    assert np.isnan(np.asarray(L.cholesky(-a))).all()


def test_cholesky_f64_jit(rng, x64):
    a = _spd(rng, (4, 4), np.float64)
    out = funcgrad.jit(L.cholesky)(a)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, np.linalg.cholesky(a), atol=1e-10)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", [False, True])
def test_triangular_solve(rng, left_side, lower, transpose_a):
    a = _rand(rng, (2, 3, 3), np.float32) + 3 * np.eye(3, dtype=np.float32)
    b = _rand(rng, (2, 3, 4) if left_side else (2, 4, 3), np.float32)
    x = np.asarray(L.triangular_solve(a, b, left_side=left_side, lower=lower,
                                      transpose_a=transpose_a))
    t = np.tril(a) if lower else np.triu(a)
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    np.testing.assert_allclose(t @ x if left_side else x @ t, b, atol=1e-4)


def test_triangular_solve_conj_unit(rng):
    a = _rand(rng, (3, 3), np.complex64)
    b = _rand(rng, (3, 2), np.complex64)
    x = np.asarray(L.triangular_solve(a, b, left_side=True, lower=True, transpose_a=True,
                                      conjugate_a=True, unit_diagonal=True))
    t = np.tril(a, -1) + np.eye(3)
    np.testing.assert_allclose(np.conj(t.T) @ x, b, atol=1e-4)


@pytest.mark.parametrize("shape", [(3, 4, 4), (5, 3), (3, 5)])
def test_lu(rng, shape):
    a = _rand(rng, shape, np.float32)
    lu, piv, perm = (np.asarray(t) for t in L.lu(a))
    m, n = shape[-2:]
    k = min(m, n)
    lower = np.tril(lu, -1)[..., :, :k] + np.eye(m, k, dtype=np.float32)
    upper = np.triu(lu)[..., :k, :]
    permuted = np.take_along_axis(a, perm[..., :, None], axis=-2)
    np.testing.assert_allclose(permuted, lower @ upper, atol=1e-5)
    assert piv.shape == shape[:-2] + (k,) and perm.shape == shape[:-1]
    assert piv.min() >= 0 and piv.max() < m


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 5), (4, 4)])
def test_qr(rng, shape, full_matrices):
    a = _rand(rng, shape, np.float32)
    q, r = (np.asarray(t) for t in L.qr(a, full_matrices=full_matrices))
    nq, nr = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    assert q.shape == nq.shape and r.shape == nr.shape
    np.testing.assert_allclose(q @ r, a, atol=1e-5)
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q,
                               np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2), atol=1e-5)
    np.testing.assert_allclose(r, np.triu(r))


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_eigh(rng, dtype):
    a = _spd(rng, (2, 4, 4), dtype)
    v, w = (np.asarray(t) for t in L.eigh(a))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=1e-4)
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=1e-3)


@pytest.mark.parametrize("full_matrices", [True, False])
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 4)])
def test_svd(rng, shape, full_matrices):
    a = _rand(rng, shape, np.float32)
    s, u, vt = (np.asarray(t) for t in L.svd(a, full_matrices=full_matrices))
    nu, ns, nvt = np.linalg.svd(a, full_matrices=full_matrices)
    assert u.shape == nu.shape and vt.shape == nvt.shape
    np.testing.assert_allclose(s, ns, rtol=1e-4)
    k = min(shape[-2:])
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vt[..., :k, :], a,
                               atol=1e-4)
    np.testing.assert_allclose(L.svd(a, compute_uv=False), ns, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.complex64])
def test_eig(rng, dtype):
    a = _rand(rng, (2, 4, 4), dtype)
    w, vl, vr = (np.asarray(t) for t in L.eig(a))
    np.testing.assert_allclose(np.sort_complex(w.reshape(-1)),
                               np.sort_complex(np.linalg.eigvals(a).reshape(-1)), atol=1e-4)
    np.testing.assert_allclose(a @ vr, vr * w[..., None, :], atol=1e-4)
    vlh = np.conj(np.swapaxes(vl, -1, -2))
    np.testing.assert_allclose(vlh @ a, w[..., :, None] * vlh, atol=1e-4)


def test_errors():
    with pytest.raises(TypeError, match="square"):
        L.cholesky(np.ones((2, 3), np.float32))
    with pytest.raises(TypeError, match="lax.linalg.lu"):
        L.lu(np.ones((3, 3), np.int32))


@pytest.mark.parametrize("left_side", [True, False])
def test_triangular_solve_vmap_shared_matrix(rng, left_side):
    # a unbatched, b batched along a middle axis: the batch folds into b's free dimension
    a = np.tril(_rand(rng, (2, 4, 4), np.float32)) + 4 * np.eye(4, dtype=np.float32)
    b = _rand(rng, (5, 2, 4, 3) if left_side else (5, 2, 3, 4), np.float32)

    def f(bb):
        return L.triangular_solve(a, bb, left_side=left_side, lower=True)

    out = np.asarray(funcgrad.vmap(f, in_axes=2)(np.moveaxis(b, 0, 2)))
    ref = np.stack([np.asarray(f(b[i])) for i in range(5)])
    np.testing.assert_allclose(out, ref, rtol=1e-5)     # cuBLAS's batched trsm: 5e-6 on a GPU


def test_vmap_decompositions(rng):
    a = _rand(rng, (3, 4, 4), np.float32)
    spd = _spd(rng, (3, 4, 4), np.float32)
    for fn, x in [(L.cholesky, spd), (lambda m: L.lu(m)[0], a), (lambda m: L.qr(m)[1], a),
                  (lambda m: L.eigh(m)[1], spd), (lambda m: L.svd(m, compute_uv=False), a)]:
        out = np.asarray(funcgrad.vmap(fn, in_axes=2)(np.moveaxis(x, 0, 2)))
        ref = np.stack([np.asarray(fn(x[i])) for i in range(3)])
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5)])
def test_lu_grad(rng, shape):
    from funcgrad.test_util import check_grads
    a = rng.standard_normal(shape)
    check_grads(lambda x: L.lu(x)[0], (a,), order=1, atol=1e-4, rtol=1e-4)


def test_lu_pivots_to_permutation(rng):
    a = _rand(rng, (3, 5, 4), np.float32)
    _, piv, perm = L.lu(a)
    np.testing.assert_array_equal(L.lu_pivots_to_permutation(piv, 5), perm)
    out = funcgrad.vmap(lambda p: L.lu_pivots_to_permutation(p, 5))(piv)
    np.testing.assert_array_equal(out, perm)
