"""funcgrad.numpy.linalg against NumPy (float32, float64, batched), with gradients checked by
finite differences and batching checked against loops."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.test_util import check_grads

L = jnp.linalg


def _close(got, want, tol=1e-4):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    scale = max(1.0, float(np.max(np.abs(want)))) if np.size(want) else 1.0
    np.testing.assert_allclose(got, want, atol=tol * scale, rtol=tol)


@pytest.fixture
def mats(rng):
    a = rng.standard_normal((3, 4, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4, 2)).astype(np.float32)
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4, dtype=np.float32)
    return a, b, spd


def test_solve_inv_det(mats, rng):
    a, b, _ = mats
    _close(L.solve(a, b), np.linalg.solve(a, b))
    v = rng.standard_normal(4).astype(np.float32)
    _close(L.solve(a[0], v), np.linalg.solve(a[0], v))
    _close(L.solve(a, b[0]), np.linalg.solve(a, b[0]))          # broadcast b over a's batch
    _close(L.inv(a), np.linalg.inv(a), 1e-3)
    _close(L.det(a), np.linalg.det(a))
    sign, logdet = L.slogdet(a)
    nsign, nlogdet = np.linalg.slogdet(a)
    _close(sign, nsign)
    _close(logdet, nlogdet)
    _close(L.det(np.array([[1, 2], [3, 4]])), -2.0)
    assert float(L.det(np.zeros((2, 2), np.float32))) == 0.0
    s, ld = L.slogdet(np.zeros((2, 2), np.float32))
    assert float(s) == 0.0 and float(ld) == -np.inf


def test_float64(x64, rng):
    a = rng.standard_normal((2, 5, 5))
    b = rng.standard_normal((2, 5, 3))
    x = L.solve(a, b)
    assert x.dtype == np.float64
    _close(x, np.linalg.solve(a, b), 1e-10)
    _close(L.det(a), np.linalg.det(a), 1e-10)
    _close(L.eigh(a + np.swapaxes(a, -1, -2))[0],
           np.linalg.eigvalsh(a + np.swapaxes(a, -1, -2)), 1e-10)
    _close(L.svd(a, compute_uv=False), np.linalg.svd(a, compute_uv=False), 1e-10)
    _close(funcgrad.jit(L.inv)(a), np.linalg.inv(a), 1e-9)


def test_decompositions(mats):
    a, _, spd = mats
    _close(L.cholesky(spd), np.linalg.cholesky(spd))
    _close(L.cholesky(spd, upper=True), np.linalg.cholesky(spd, upper=True))
    for mode in ("reduced", "complete"):
        q, r = L.qr(a[:, :, :3], mode=mode)
        nq, nr = np.linalg.qr(a[:, :, :3], mode=mode)
        assert q.shape == nq.shape and r.shape == nr.shape
        _close(np.asarray(q) @ np.asarray(r), a[:, :, :3])
    _close(L.qr(a, mode="r"), np.asarray(L.qr(a)[1]))
    U, S, Vh = L.svd(a[:, :3, :])
    _close(S, np.linalg.svd(a[:, :3, :], compute_uv=False))
    _close((np.asarray(U) * np.asarray(S)[:, None, :]) @ np.asarray(Vh)[:, :3, :], a[:, :3, :])
    _close(L.svdvals(a), np.linalg.svdvals(a))
    sym = a + np.swapaxes(a, -1, -2)
    w, v = L.eigh(sym)
    _close(w, np.linalg.eigvalsh(sym))
    _close(sym @ np.asarray(v), np.asarray(v) * np.asarray(w)[:, None, :], 1e-3)
    _close(L.eigvalsh(sym, UPLO="U"), np.linalg.eigvalsh(sym, UPLO="U"))
    w, v = L.eig(a[0])
    _close(np.sort_complex(np.asarray(w)), np.sort_complex(np.linalg.eigvals(a[0])))
    _close(a[0] @ np.asarray(v), np.asarray(v) * np.asarray(w)[None, :])
    _close(np.sort_complex(np.asarray(L.eigvals(a[1]))), np.sort_complex(np.linalg.eigvals(a[1])))


def test_lstsq_pinv_rank_power(rng, mats):
    a, _, _ = mats
    m = rng.standard_normal((6, 3)).astype(np.float32)
    y = rng.standard_normal(6).astype(np.float32)
    x, res, rank, s = L.lstsq(m, y)
    nx, nres, nrank, ns = np.linalg.lstsq(m, y, rcond=None)
    _close(x, nx)
    _close(res, nres)
    assert int(rank) == nrank
    _close(s, ns)
    _close(L.pinv(a[:, :, :3]), np.linalg.pinv(a[:, :, :3]), 1e-3)
    assert int(L.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]]))) == 1
    np.testing.assert_array_equal(L.matrix_rank(a), np.linalg.matrix_rank(a))
    _close(L.matrix_power(a, 3), np.linalg.matrix_power(a, 3), 1e-3)
    _close(L.matrix_power(a, -2), np.linalg.matrix_power(a, -2), 1e-3)
    _close(L.matrix_power(a, 0), np.linalg.matrix_power(a, 0))
    _close(L.cond(a), np.linalg.cond(a), 1e-3)
    _close(L.cond(a, 1), np.linalg.cond(a, 1), 1e-3)


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3, -1])
def test_vector_norm(rng, ord):
    v = rng.standard_normal((3, 5)).astype(np.float32)
    _close(L.norm(v[0], ord), np.linalg.norm(v[0], ord))
    _close(L.norm(v, ord, axis=1, keepdims=True), np.linalg.norm(v, ord, axis=1, keepdims=True))


@pytest.mark.parametrize("ord", [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf])
def test_matrix_norm(mats, ord):
    a = mats[0]
    _close(L.norm(a, ord, axis=(1, 2)), np.linalg.norm(a, ord, axis=(1, 2)))
    _close(L.norm(a, ord, axis=(2, 0), keepdims=True),
           np.linalg.norm(a, ord, axis=(2, 0), keepdims=True))


def test_array_api_names(mats, rng):
    a = mats[0]
    _close(L.norm(a), np.linalg.norm(a))
    _close(L.vector_norm(a, axis=(0, 2)), np.linalg.vector_norm(a, axis=(0, 2)))
    _close(L.vector_norm(a, ord=1), np.linalg.vector_norm(a, ord=1))
    _close(L.matrix_norm(a, ord="nuc"), np.linalg.matrix_norm(a, ord="nuc"))
    _close(L.trace(a, offset=1), np.linalg.trace(a, offset=1))
    _close(L.diagonal(a), np.linalg.diagonal(a))
    _close(L.matmul(a, a), np.linalg.matmul(a, a))
    _close(L.matrix_transpose(a), np.linalg.matrix_transpose(a))
    _close(L.tensordot(a[0], a[1], axes=2), np.linalg.tensordot(a[0], a[1], axes=2), 1e-3)
    _close(L.vecdot(a, a), np.linalg.vecdot(a, a))
    u, w = rng.standard_normal(3), rng.standard_normal(3)
    _close(L.cross(u.astype(np.float32), w.astype(np.float32)), np.linalg.cross(u, w))
    _close(L.outer(u.astype(np.float32), w.astype(np.float32)), np.linalg.outer(u, w))
    c = rng.standard_normal((3, 5)).astype(np.float32)
    d = rng.standard_normal((5, 2)).astype(np.float32)
    e = rng.standard_normal(2).astype(np.float32)
    _close(L.multi_dot([c, d, e]), np.linalg.multi_dot([c, d, e]))
    t = rng.standard_normal((4, 2, 2)).astype(np.float32)
    _close(L.tensorinv(t, ind=1), np.linalg.tensorinv(t, ind=1), 1e-3)
    A = rng.standard_normal((6, 2, 3)).astype(np.float32)
    B = rng.standard_normal(6).astype(np.float32)
    _close(L.tensorsolve(A, B), np.linalg.tensorsolve(A, B), 1e-3)
    tri = np.tril(a[0]) + 4 * np.eye(4, dtype=np.float32)
    _close(L.solve_triangular(tri, mats[1][0], lower=True),
           np.linalg.solve(tri, mats[1][0]))
    _close(L.solve_triangular(tri, mats[1][0][:, 0], lower=True, trans="T"),
           np.linalg.solve(tri.T, mats[1][0][:, 0]))


def test_errors():
    with pytest.raises(ValueError, match="square"):
        L.inv(np.ones((2, 3), np.float32))
    with pytest.raises(ValueError, match="at least 2"):
        L.det(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="norm order"):
        L.norm(np.ones((2, 2), np.float32), "bad")


def test_vmap_matches_loop(mats):
    a, b, spd = mats
    for f, args in [(L.solve, (a, b)), (L.det, (a,)), (L.cholesky, (spd,)),
                    (lambda x: L.eigh(x)[0], (spd,)), (lambda x: L.svd(x)[1], (a,)),
                    (L.inv, (a,)), (lambda x: L.qr(x)[1], (a,))]:
        out = np.asarray(funcgrad.vmap(f)(*args))
        for i in range(a.shape[0]):
            _close(out[i], np.asarray(f(*(x[i] for x in args))), 1e-3)
    # an unbatched operand with a batched one, batched along a non-leading axis
    out = np.asarray(funcgrad.vmap(lambda bb: L.solve(a[0], bb), in_axes=1)(b[:, :, 0].T))
    _close(out, np.linalg.solve(a[0], b[:, :, 0].T).T, 1e-3)


_GRAD_CASES = {
    "det": lambda a, b, s: (L.det, (a,)),
    "slogdet": lambda a, b, s: (lambda x: L.slogdet(x)[1], (a,)),
    "solve": lambda a, b, s: (L.solve, (a, b)),
    "inv": lambda a, b, s: (L.inv, (a,)),
    "cholesky": lambda a, b, s: (lambda x: L.cholesky(x, symmetrize_input=True), (s,)),
    "eigh": lambda a, b, s: (lambda x: L.eigh(x)[0], (s,)),
    "eigh_vectors": lambda a, b, s: (lambda x: jnp.abs(L.eigh(x)[1]), (s,)),
    "svdvals": lambda a, b, s: (L.svdvals, (a,)),
    "svd_u": lambda a, b, s: (lambda x: jnp.abs(L.svd(x, full_matrices=False)[0]), (a[:, :2],)),
    "pinv": lambda a, b, s: (L.pinv, (a[:, :2],)),
    "norm_2": lambda a, b, s: (lambda x: L.norm(x, 2), (a,)),
    "norm_nuc": lambda a, b, s: (lambda x: L.norm(x, "nuc"), (a,)),
    "qr": lambda a, b, s: (lambda x: L.qr(x)[0], (a,)),
    "lstsq": lambda a, b, s: (lambda x: L.lstsq(x, b[:, 0])[0], (a,)),
    "eigvals": lambda a, b, s: (lambda x: jnp.real(L.eigvals(x)), (a,)),
    "solve_triangular": lambda a, b, s: (lambda x, y: L.solve_triangular(x, y, lower=True),
                                         (np.tril(s), b)),
}


@pytest.mark.parametrize("name", sorted(_GRAD_CASES))
def test_grads(name, rng):
    a = rng.standard_normal((3, 3))
    b = rng.standard_normal((3, 2))
    spd = a @ a.T + 3 * np.eye(3)
    f, args = _GRAD_CASES[name](a, b, spd)
    check_grads(f, args, order=1, atol=1e-4, rtol=1e-4)


def test_eig_vector_grads():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 3))
    a = a @ a.T + np.diag([1.0, 2.0, 3.0]) + 0.3 * rng.standard_normal((3, 3))
    assert np.isreal(np.linalg.eigvals(a)).all()      # real, distinct eigenvalues
    vectors = lambda x: funcgrad.lax.linalg.eig(  # noqa: E731
        x, compute_left_eigenvectors=False, enable_eigvec_derivs=True)[1]
    check_grads(lambda x: jnp.real(vectors(x)), (a,), order=1, atol=1e-4, rtol=1e-4)
    # as JAX: numpy.linalg.eig's eigenvectors are not differentiated without the opt-in
    with pytest.raises(NotImplementedError, match="enable_eigvec_derivs=True"):
        funcgrad.grad(lambda x: jnp.real(L.eig(x)[1]).sum())(a)
