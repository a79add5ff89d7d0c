"""funcgrad.numpy.linalg: NumPy's (and the array API's) linear algebra (as ``jax.numpy.linalg``).

Decompositions run on the LAPACK kernels of ``funcgrad.lax.linalg`` (CPU); everything else is
built from them and ordinary array operations, so all functions work eagerly, under ``jit``,
``vmap`` and (where the math allows) ``grad``. Leading dimensions are batch dimensions.
Integer inputs are promoted to the default float; float16/bfloat16 compute in float32.

Example:
    >>> import funcgrad.numpy as jnp
    >>> a = jnp.array([[3.0, 1.0], [1.0, 2.0]])
    >>> jnp.linalg.solve(a, jnp.array([9.0, 8.0]))
    Array([2., 3.], dtype=float32)
"""
import itertools
import math
from typing import NamedTuple

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.lax import linalg as _la

__all__ = [
    "cholesky", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
    "lstsq", "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose",
    "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "solve_triangular", "svd",
    "svdvals", "tensordot", "tensorinv", "tensorsolve", "trace", "vecdot", "vector_norm",
    "EighResult", "EigResult", "QRResult", "SlogdetResult", "SVDResult",
]


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


def _jnp():
    import funcgrad.numpy as jnp
    return jnp


def _prep(name, a, min_ndim=2, square=False):
    """``a`` as an inexact array LAPACK accepts; returns (array, dtype to cast results to)."""
    jnp = _jnp()
    a = jnp.asarray(a)
    aval = aval_of(a)
    if aval.ndim < min_ndim:
        raise ValueError(f"numpy.linalg.{name}: expected an array with at least {min_ndim} "
                         f"dimensions, got {aval.str_short()}")
    if square and aval.shape[-1] != aval.shape[-2]:
        raise ValueError(f"numpy.linalg.{name}: last two dimensions must be square, got "
                         f"{aval.str_short()}")
    dt = aval.dtype
    if not dtypes.is_inexact(dt):
        dt = dtypes.default_float()
    out_dt = dt
    if dt in (dtypes.float16, dtypes.bfloat16):
        dt = dtypes.float32
    return lax.convert_element_type(a, dt), out_dt


def _cast(x, dtype):
    """Cast a float result back (complex results keep their precision class)."""
    xd = aval_of(x).dtype
    if dtypes.is_complex(xd) or xd == dtype:
        return x
    if dtypes.is_complex(dtype):
        return lax.convert_element_type(x, dtypes.real_dtype(dtype)) if \
            dtypes.real_dtype(dtype) != xd else x
    return lax.convert_element_type(x, dtype)


def _mT(x):
    nd = aval_of(x).ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _H(x):
    x = _mT(x)
    return lax.conj(x) if dtypes.is_complex(aval_of(x).dtype) else x


def _matmul(a, b):
    return _jnp().matmul(a, b)


# --- decompositions --------------------------------------------------------------------------
def cholesky(a, *, upper=False, symmetrize_input=True):
    """Cholesky factor of Hermitian positive-definite matrices: lower ``L`` with
    ``a = L @ L^H`` (``upper=True``: ``U = L^H``); non-positive-definite inputs give NaN.

    As in JAX, ``symmetrize_input`` (the default) factors the Hermitian part
    ``(a + a^H) / 2``, so the derivative along any tangent is that of its Hermitian part
    and the gradient is Hermitian; ``symmetrize_input=False`` reads the lower triangle only.

    Example:
        >>> jnp.linalg.cholesky(jnp.array([[4.0, 2.0], [2.0, 3.0]]))
        Array([[2.       , 0.       ],
               [1.       , 1.4142135]], dtype=float32)
    """
    a, dt = _prep("cholesky", a, square=True)
    L = _la.cholesky(a, symmetrize_input=symmetrize_input)
    return _cast(_H(L) if upper else L, dt)


def qr(a, mode="reduced"):
    """QR decomposition. ``mode``: "reduced" (default), "complete" or "r" (R only).

    Example:
        >>> a = jnp.array([[3.0, 1.0], [4.0, 2.0]])
        >>> q, r = jnp.linalg.qr(a)
        >>> bool(jnp.allclose(q @ r, a, atol=1e-5))
        True
        >>> bool(jnp.allclose(q.T @ q, jnp.eye(2), atol=1e-5))
        True
        >>> jnp.abs(r[0, 0])                   # the norm of the first column
        Array(5., dtype=float32)
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"numpy.linalg.qr: mode must be 'reduced', 'complete' or 'r', "
                         f"got {mode!r}")
    a, dt = _prep("qr", a)
    q, r = _la.qr(a, full_matrices=(mode == "complete"))
    if mode == "r":
        return _cast(r, dt)
    return QRResult(_cast(q, dt), _cast(r, dt))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """Singular value decomposition ``a = U @ diag(S) @ Vh`` with descending ``S``; just
    ``S`` when ``compute_uv=False``.

    Example:
        >>> a = jnp.array([[3.0, 0.0], [0.0, -4.0], [0.0, 0.0]])
        >>> U, S, Vh = jnp.linalg.svd(a, full_matrices=False)
        >>> U.shape, S, Vh.shape
        ((3, 2), Array([4., 3.], dtype=float32), (2, 2))
        >>> bool(jnp.allclose(U @ jnp.diag(S) @ Vh, a, atol=1e-5))
        True
    """
    a, dt = _prep("svd", a)
    if not compute_uv:
        return _cast(_la.svd(a, full_matrices=False, compute_uv=False), dt)
    s, u, vt = _la.svd(a, full_matrices=full_matrices, compute_uv=True)
    return SVDResult(_cast(u, dt), _cast(s, dt), _cast(vt, dt))


def svdvals(x):
    """Singular values, descending. Example: ``jnp.linalg.svdvals(a)``."""
    return svd(x, compute_uv=False)


def eigh(a, UPLO="L", symmetrize_input=True):
    """Eigenvalues (ascending) and eigenvectors (columns) of Hermitian matrices.

    Example:
        >>> w, v = jnp.linalg.eigh(jnp.array([[2.0, 1.0], [1.0, 2.0]]))
    """
    if UPLO not in ("L", "U"):
        raise ValueError(f"numpy.linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    a, dt = _prep("eigh", a, square=True)
    v, w = _la.eigh(a, lower=(UPLO == "L"), symmetrize_input=symmetrize_input)
    return EighResult(_cast(w, dt), _cast(v, dt))


def eigvalsh(a, UPLO="L"):
    """Eigenvalues of Hermitian matrices, ascending. Example: ``jnp.linalg.eigvalsh(a)``."""
    return eigh(a, UPLO).eigenvalues


def eig(a):
    """Eigenvalues and right eigenvectors (columns) of general square matrices (CPU);
    always complex.

    Example:
        >>> a = jnp.array([[2.0, 1.0], [0.0, 3.0]])
        >>> w, v = jnp.linalg.eig(a)
        >>> w
        Array([2.+0.j, 3.+0.j], dtype=complex64)
        >>> bool(jnp.allclose(a @ v, v * w, atol=1e-5))        # a v = v diag(w)
        True
    """
    a, _ = _prep("eig", a, square=True)
    w, v = _la.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)
    return EigResult(w, v)


def eigvals(a):
    """Eigenvalues of general square matrices (complex). Example: ``jnp.linalg.eigvals(a)``."""
    a, _ = _prep("eigvals", a, square=True)
    return _la.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


# --- determinants and solves ---------------------------------------------------------------
def _lu_diag_parity(a):
    lu, piv, _ = _la.lu(a)
    diag = _jnp().diagonal(lu, axis1=-2, axis2=-1)
    n = aval_of(piv).shape[-1]
    swaps = _jnp().sum(piv != _jnp().arange(n, dtype=aval_of(piv).dtype), axis=-1)
    parity = swaps % 2
    return diag, parity


def det(a):
    """Determinant (via LU). Example: ``jnp.linalg.det(jnp.eye(3) * 2)`` is 8."""
    jnp = _jnp()
    a, dt = _prep("det", a, square=True)
    if aval_of(a).shape[-1] == 0:
        return _cast(jnp.ones(aval_of(a).shape[:-2], aval_of(a).dtype), dt)
    diag, parity = _lu_diag_parity(a)
    sign = jnp.where(parity == 1, -1, 1).astype(aval_of(a).dtype)
    return _cast(sign * jnp.prod(diag, axis=-1), dt)


def slogdet(a):
    """``(sign, log|det|)``, stable for large/small determinants (via LU).

    Example:
        >>> sign, logdet = jnp.linalg.slogdet(jnp.array([[0.0, 2.0], [3.0, 0.0]]))   # det = -6
        >>> sign, logdet
        (Array(-1., dtype=float32), Array(1.7917595, dtype=float32))
    """
    jnp = _jnp()
    a, dt = _prep("slogdet", a, square=True)
    adt = aval_of(a).dtype
    if aval_of(a).shape[-1] == 0:
        shp = aval_of(a).shape[:-2]
        return SlogdetResult(_cast(jnp.ones(shp, adt), dt),
                             _cast(jnp.zeros(shp, dtypes.real_dtype(adt)), dt))
    diag, parity = _lu_diag_parity(a)
    absd = jnp.abs(diag)
    logabs = jnp.sum(jnp.log(absd), axis=-1)
    psign = jnp.where(parity == 1, -1, 1).astype(adt)
    if dtypes.is_complex(adt):
        unit = diag / jnp.where(absd == 0, 1, absd).astype(adt)
        sign = psign * jnp.prod(unit, axis=-1)
    else:
        sign = psign * jnp.prod(jnp.sign(diag), axis=-1)
    singular = jnp.any(absd == 0, axis=-1)
    sign = jnp.where(singular, jnp.zeros((), adt), sign)
    logabs = jnp.where(singular, -jnp.inf, logabs)
    return SlogdetResult(_cast(sign, dt), _cast(logabs, dt))


def solve(a, b):
    """Solve ``a @ x = b``. ``b`` is a vector (``b.ndim == 1``) or a stack of matrices
    (..., M, K) whose batch dims broadcast with ``a``'s.

    Example:
        >>> jnp.linalg.solve(jnp.array([[2.0, 0.0], [0.0, 4.0]]), jnp.array([2.0, 2.0]))
        Array([1. , 0.5], dtype=float32)
    """
    jnp = _jnp()
    a, dt = _prep("solve", a, square=True)
    b = jnp.asarray(b)
    bdt = aval_of(b).dtype
    ct = dtypes.result_type(aval_of(a).dtype, bdt if dtypes.is_inexact(bdt) else aval_of(a).dtype)
    if ct in (dtypes.float16, dtypes.bfloat16):
        ct = dtypes.float32
    a = a.astype(ct)
    b = b.astype(ct)
    n = aval_of(a).shape[-1]
    vector = aval_of(b).ndim == 1
    if vector:
        if aval_of(b).shape[0] != n:
            raise ValueError(f"numpy.linalg.solve: a {aval_of(a).str_short()} and b "
                             f"{aval_of(b).str_short()} do not match")
        b = b[:, None]
    if aval_of(b).shape[-2] != n:
        raise ValueError(f"numpy.linalg.solve: a {aval_of(a).str_short()} and b "
                         f"{aval_of(b).str_short()} do not match (b must be (..., {n}, K))")
    batch = np.broadcast_shapes(aval_of(a).shape[:-2], aval_of(b).shape[:-2])
    a = jnp.broadcast_to(a, batch + (n, n))
    b = jnp.broadcast_to(b, batch + aval_of(b).shape[-2:])
    x = _la.solve(a, b)
    if vector:
        x = x[..., 0]
    return _cast(x, dtypes.result_type(dt, bdt) if dtypes.is_inexact(bdt) else dt)


def inv(a):
    """Matrix inverse (by LU). Example: ``jnp.linalg.inv(jnp.eye(2) * 2)``."""
    jnp = _jnp()
    a, dt = _prep("inv", a, square=True)
    shape = aval_of(a).shape
    eye = jnp.broadcast_to(jnp.eye(shape[-1], dtype=aval_of(a).dtype), shape)
    return _cast(_la.solve(a, eye), dt)


def solve_triangular(a, b, lower=False, trans=0, unit_diagonal=False):
    """Solve ``op(a) @ x = b`` for triangular ``a`` (as ``scipy.linalg.solve_triangular``);
    ``trans``: 0/"N", 1/"T" (transpose) or 2/"C" (conjugate transpose). ``b`` may be a vector.

    Example:
        >>> jnp.linalg.solve_triangular(jnp.array([[2.0, 0.0], [1.0, 1.0]]),
        ...                             jnp.array([2.0, 3.0]), lower=True)
        Array([1., 2.], dtype=float32)
    """
    jnp = _jnp()
    trans = {"N": 0, "T": 1, "C": 2}.get(trans, trans)
    if trans not in (0, 1, 2):
        raise ValueError(f"numpy.linalg.solve_triangular: trans must be 0, 1, 2, 'N', 'T' or "
                         f"'C', got {trans!r}")
    a, dt = _prep("solve_triangular", a, square=True)
    b = jnp.asarray(b)
    vector = aval_of(b).ndim == 1
    if vector:
        b = b[:, None]
    x = _la.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=trans > 0,
                             conjugate_a=trans == 2, unit_diagonal=unit_diagonal)
    return _cast(x[..., 0] if vector else x, dt)


def lstsq(a, b, rcond=None):
    """Least-squares solution of ``a @ x = b`` by SVD: ``(x, residuals, rank, s)``.

    ``residuals`` (squared 2-norms of ``b - a @ x`` per column) is returned when ``M > N``
    (computed even if ``a`` is rank deficient, since shapes must be static), else empty.

    Example:
        >>> a = jnp.array([[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]])     # fit y = c0 + c1 t
        >>> b = jnp.array([1.0, 3.0, 5.0])
        >>> x, res, rank, s = jnp.linalg.lstsq(a, b)
        >>> x.round(4), rank
        (Array([1., 2.], dtype=float32), Array(2, dtype=int32))
    """
    jnp = _jnp()
    a, dt = _prep("lstsq", a)
    b = jnp.asarray(b).astype(aval_of(a).dtype)
    aval = aval_of(a)
    if aval.ndim != 2:
        raise ValueError(f"numpy.linalg.lstsq: a must be 2-D, got {aval.str_short()}")
    m, n = aval.shape
    vector = aval_of(b).ndim == 1
    if vector:
        b = b[:, None]
    if aval_of(b).shape[0] != m:
        raise ValueError(f"numpy.linalg.lstsq: a {aval.str_short()} and b "
                         f"{aval_of(b).str_short()} do not match")
    s, u, vt = _la.svd(a, full_matrices=False)
    sr = aval_of(s).dtype
    if rcond is None:
        rcond = float(np.finfo(sr).eps) * max(m, n)
    elif rcond < 0:
        rcond = float(np.finfo(sr).eps)
    if min(m, n) == 0:
        x = jnp.zeros((n, aval_of(b).shape[1]), aval.dtype)
        rank = jnp.asarray(0, dtypes.default_int())
    else:
        cutoff = rcond * jnp.max(s)
        keep = s > cutoff
        s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(aval.dtype)
        x = _matmul(_H(vt), s_inv[:, None] * _matmul(_H(u), b))
        rank = jnp.sum(keep).astype(dtypes.default_int())
    if m > n:
        r = b - _matmul(a, x)
        resid = jnp.sum(jnp.real(r * jnp.conj(r)) if dtypes.is_complex(aval.dtype) else r * r,
                        axis=0)
        if vector:
            resid = resid.reshape((1,))
    else:
        resid = jnp.zeros((0,), sr)
    if vector:
        x = x[:, 0]
    return _cast(x, dt), _cast(resid, dt), rank, _cast(s, dt)


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """Moore-Penrose pseudo-inverse by SVD; singular values below ``rtol * max(s)`` are
    dropped (default ``rtol = max(M, N) * eps``).

    Example:
        >>> jnp.linalg.pinv(jnp.array([[1.0, 2.0], [2.0, 4.0]])).round(4)   # a singular matrix
        Array([[0.04, 0.08],
               [0.08, 0.16]], dtype=float32)
    """
    jnp = _jnp()
    a, dt = _prep("pinv", a)
    if rcond is not None:
        rtol = rcond
    m, n = aval_of(a).shape[-2:]
    if min(m, n) == 0:
        return _cast(jnp.zeros(aval_of(a).shape[:-2] + (n, m), aval_of(a).dtype), dt)
    s, u, vt = _la.svd(a, full_matrices=False)
    sr = aval_of(s).dtype
    if rtol is None:
        rtol = float(np.finfo(sr).eps) * max(m, n)
    rtol = jnp.asarray(rtol, sr)
    cutoff = jnp.expand_dims(rtol, -1) * jnp.max(s, axis=-1, keepdims=True)
    keep = s > cutoff
    s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(aval_of(a).dtype)
    return _cast(_matmul(_H(vt) * s_inv[..., None, :], _H(u)), dt)


def matrix_power(a, n):
    """``a`` multiplied by itself ``n`` times (integer ``n``; negative uses ``inv(a)``).

    Example:
        >>> jnp.linalg.matrix_power(jnp.array([[1, 1], [0, 1]]), 3)
        Array([[1, 3],
               [0, 1]], dtype=int32)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    aval = aval_of(a)
    if aval.ndim < 2 or aval.shape[-1] != aval.shape[-2]:
        raise ValueError(f"numpy.linalg.matrix_power: expected square matrices, got "
                         f"{aval.str_short()}")
    if int(n) != n:
        raise TypeError(f"numpy.linalg.matrix_power: exponent must be an integer, got {n!r}")
    n = int(n)
    if n == 0:
        return jnp.broadcast_to(jnp.eye(aval.shape[-1], dtype=aval.dtype), aval.shape)
    if n < 0:
        a = inv(a)
        n = -n
    result = None
    base = a
    while n:
        if n & 1:
            result = base if result is None else _matmul(result, base)
        n >>= 1
        if n:
            base = _matmul(base, base)
    return result


def matrix_rank(M, rtol=None, *, tol=None):
    """Number of singular values above ``tol`` (absolute) or ``rtol * max(s)``.

    Example:
        >>> jnp.linalg.matrix_rank(jnp.array([[1.0, 2.0], [2.0, 4.0]]))   # 1
        Array(1, dtype=int32)
    """
    jnp = _jnp()
    M = jnp.asarray(M)
    if aval_of(M).ndim < 2:
        return jnp.any(M != 0).astype(dtypes.default_int())
    s = svdvals(M)
    m, n = aval_of(M).shape[-2:]
    if tol is None:
        if rtol is None:
            rtol = float(np.finfo(aval_of(s).dtype).eps) * max(m, n)
        tol = jnp.expand_dims(jnp.asarray(rtol, aval_of(s).dtype), -1) * \
            jnp.max(s, axis=-1, keepdims=True)
    else:
        tol = jnp.expand_dims(jnp.asarray(tol, aval_of(s).dtype), -1)
    return jnp.sum(s > tol, axis=-1).astype(dtypes.default_int())


def cond(x, p=None):
    """Condition number in the ``p`` norm (default 2: ratio of extreme singular values).

    Example:
        >>> jnp.linalg.cond(jnp.array([[1.0, 0.0], [0.0, 4.0]]))   # 4
        Array(4., dtype=float32)
    """
    if p in (None, 2, -2):
        s = svdvals(x)
        r = s[..., 0] / s[..., -1]
        return 1 / r if p == -2 else r
    return norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))


# --- norms --------------------------------------------------------------------------------------
def _abs2_sum(x, axis, keepdims):
    jnp = _jnp()
    ax = jnp.abs(x) if dtypes.is_complex(aval_of(x).dtype) else x
    return jnp.sum(ax * ax, axis=axis, keepdims=keepdims)


def _vector_norm(x, ord, axis, keepdims):
    jnp = _jnp()
    if ord is None or ord == 2:
        return jnp.sqrt(_abs2_sum(x, axis, keepdims))
    ax = jnp.abs(x)
    if ord == np.inf:
        return jnp.max(ax, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return jnp.min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(aval_of(ax).dtype)
    if ord == 1:
        return jnp.sum(ax, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"numpy.linalg.norm: invalid norm order {ord!r} for vectors")
    ord = float(ord)
    return jnp.power(jnp.sum(jnp.power(ax, ord), axis=axis, keepdims=keepdims), 1.0 / ord)


def _matrix_norm(x, ord, axis, keepdims):
    jnp = _jnp()
    r, c = axis
    if ord is None or ord == "fro":
        return jnp.sqrt(_abs2_sum(x, axis, keepdims))
    if ord in (1, -1):
        col = jnp.sum(jnp.abs(x), axis=r, keepdims=True)
        f = jnp.max if ord == 1 else jnp.min
        out = f(col, axis=c, keepdims=True)
    elif ord in (np.inf, -np.inf):
        row = jnp.sum(jnp.abs(x), axis=c, keepdims=True)
        f = jnp.max if ord == np.inf else jnp.min
        out = f(row, axis=r, keepdims=True)
    elif ord in (2, -2, "nuc"):
        y = jnp.moveaxis(x, (r, c), (-2, -1))
        s = svdvals(y)
        if ord == 2:
            v = s[..., 0]
        elif ord == -2:
            v = s[..., -1]
        else:
            v = jnp.sum(s, axis=-1)
        out = jnp.expand_dims(jnp.expand_dims(v, -1), -1)
        out = jnp.moveaxis(out, (-2, -1), (r, c))
    else:
        raise ValueError(f"numpy.linalg.norm: invalid norm order {ord!r} for matrices")
    if keepdims:
        return out
    return jnp.squeeze(out, axis=(r, c))


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector or matrix norm, as ``numpy.linalg.norm``.

    ``axis`` None: the 2-norm of the flattened array when ``ord`` is None, else a vector
    norm (1-D) or matrix norm (2-D); an int: vector norms along it; a pair: matrix norms
    ("fro", "nuc", 1, -1, 2, -2, inf, -inf).

    Example:
        >>> jnp.linalg.norm(jnp.array([3.0, 4.0]))          # 5
        Array(5., dtype=float32)
        >>> a = jnp.stack([jnp.eye(2), 3 * jnp.eye(2)])           # a batch of two matrices
        >>> jnp.linalg.norm(a, ord="nuc", axis=(-2, -1))            # sum of singular values
        Array([2., 6.], dtype=float32)
    """
    jnp = _jnp()
    x = _inexact(x)
    nd = aval_of(x).ndim
    if axis is None:
        if ord is None:
            out = jnp.sqrt(_abs2_sum(jnp.reshape(x, (-1,)), 0, False))
            if keepdims:
                out = jnp.reshape(out, (1,) * nd)
            return out
        if nd == 1:
            axis = (0,)
        elif nd == 2:
            axis = (0, 1)
        else:
            raise ValueError(f"numpy.linalg.norm: ord={ord!r} with axis=None needs a 1-D or "
                             f"2-D input, got {nd}-D")
    if isinstance(axis, (int, np.integer)):
        axis = (int(axis),)
    axis = tuple(int(a) % nd if -nd <= a < nd else _bad_axis(a, nd) for a in axis)
    if len(axis) == 1:
        return _vector_norm(x, ord, axis[0], keepdims)
    if len(axis) == 2:
        if axis[0] == axis[1]:
            raise ValueError(f"numpy.linalg.norm: duplicate axes {axis}")
        return _matrix_norm(x, ord, axis, keepdims)
    raise ValueError(f"numpy.linalg.norm: axis must be an int or a pair, got {axis}")


def _inexact(x):
    """``x`` as an array of an inexact dtype (integers and bools become default floats)."""
    x = _jnp().asarray(x)
    return x if dtypes.is_inexact(aval_of(x).dtype) else x.astype(dtypes.default_float())


def _bad_axis(a, nd):
    raise ValueError(f"numpy.linalg.norm: axis {a} out of range for a {nd}-D array")


def vector_norm(x, *, axis=None, keepdims=False, ord=2):
    """Array-API vector norm: over all elements (``axis=None``) or the given axes.

    Example:
        >>> jnp.linalg.vector_norm(jnp.ones((2, 2)))        # 2
        Array(2., dtype=float32)
    """
    jnp = _jnp()
    x = _inexact(x)
    nd = aval_of(x).ndim
    if axis is None:
        out = _vector_norm(jnp.reshape(x, (-1,)), ord, 0, False)
        return jnp.reshape(out, (1,) * nd) if keepdims else out
    if isinstance(axis, (int, np.integer)):
        return _vector_norm(x, ord, int(axis), keepdims)
    axis = tuple(int(a) % nd for a in axis)
    rest = [i for i in range(nd) if i not in axis]
    y = jnp.transpose(x, tuple(rest) + axis)
    y = jnp.reshape(y, tuple(aval_of(x).shape[i] for i in rest) + (-1,))
    out = _vector_norm(y, ord, -1, False)
    if keepdims:
        out = jnp.reshape(out, tuple(1 if i in axis else aval_of(x).shape[i] for i in range(nd)))
    return out


def matrix_norm(x, *, keepdims=False, ord="fro"):
    """Array-API matrix norm over the last two axes. Example: ``jnp.linalg.matrix_norm(a)``."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


# --- products and array-API names --------------------------------------------------------------
def matmul(x1, x2, /):
    """Matrix product (array API). Example: ``jnp.linalg.matmul(a, b)``."""
    return _jnp().matmul(x1, x2)


def tensordot(x1, x2, /, *, axes=2):
    """Tensor contraction (array API). Example: ``jnp.linalg.tensordot(a, b, axes=1)``."""
    return _jnp().tensordot(x1, x2, axes=axes)


def vecdot(x1, x2, /, *, axis=-1):
    """Conjugated dot product along ``axis`` (array API). Example: ``jnp.linalg.vecdot(u, v)``."""
    return _jnp().vecdot(x1, x2, axis=axis)


def matrix_transpose(x, /):
    """Swap the last two axes. Example: ``jnp.linalg.matrix_transpose(a)``."""
    return _jnp().matrix_transpose(x)


def diagonal(x, /, *, offset=0):
    """Diagonals of the last two axes (array API). Example: ``jnp.linalg.diagonal(a)``."""
    return _jnp().diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset=0, dtype=None):
    """Sum of the diagonals of the last two axes (array API). Example: ``jnp.linalg.trace(a)``."""
    return _jnp().sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def outer(x1, x2, /):
    """Outer product of two vectors. Example: ``jnp.linalg.outer(u, v)``."""
    jnp = _jnp()
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    if aval_of(x1).ndim != 1 or aval_of(x2).ndim != 1:
        raise ValueError(f"numpy.linalg.outer: expects 1-D inputs, got "
                         f"{aval_of(x1).str_short()} and {aval_of(x2).str_short()}")
    return jnp.outer(x1, x2)


def cross(x1, x2, /, *, axis=-1):
    """Cross product of 3-vectors along ``axis`` (array API). Example: ``jnp.linalg.cross(u, v)``."""
    jnp = _jnp()
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    if aval_of(x1).shape[axis] != 3 or aval_of(x2).shape[axis] != 3:
        raise ValueError(f"numpy.linalg.cross: needs size 3 along axis {axis}, got "
                         f"{aval_of(x1).str_short()} and {aval_of(x2).str_short()}")
    return jnp.cross(x1, x2, axis=axis)


def multi_dot(arrays, *, precision=None):
    """Product of a chain of matrices in the cheapest order (dynamic programming); the first
    and last may be vectors.

    Example:
        >>> a, b, c = jnp.ones((2, 10)), jnp.ones((10, 10)), jnp.ones((10, 1))
        >>> jnp.linalg.multi_dot([a, b, c])          # a @ b @ c, in the cheapest order
        Array([[100.],
               [100.]], dtype=float32)
    """
    jnp = _jnp()
    arrays = [jnp.asarray(a) for a in arrays]
    if len(arrays) < 2:
        raise ValueError("numpy.linalg.multi_dot: needs at least two arrays")
    first_vec = aval_of(arrays[0]).ndim == 1
    last_vec = aval_of(arrays[-1]).ndim == 1
    if first_vec:
        arrays[0] = arrays[0][None, :]
    if last_vec:
        arrays[-1] = arrays[-1][:, None]
    for a in arrays:
        if aval_of(a).ndim != 2:
            raise ValueError(f"numpy.linalg.multi_dot: arrays must be 2-D (ends may be 1-D), "
                             f"got {aval_of(a).str_short()}")
    dims = [aval_of(arrays[0]).shape[0]] + [aval_of(a).shape[1] for a in arrays]
    n = len(arrays)
    cost = [[0] * n for _ in range(n)]
    split_at = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split_at[i][j] = c, k

    def build(i, j):
        if i == j:
            return arrays[i]
        k = split_at[i][j]
        return jnp.matmul(build(i, k), build(k + 1, j), precision=precision)

    out = build(0, n - 1)
    if first_vec:
        out = out[0]
    if last_vec:
        out = out[..., 0]
    return out


def tensorinv(a, ind=2):
    """Inverse of ``a`` seen as a linear map from its last dims to its first ``ind`` dims.

    Example:
        >>> jnp.linalg.tensorinv(jnp.eye(4).reshape(4, 2, 2), ind=1)
        Array([[[1., 0., 0., 0.],
                [0., 1., 0., 0.]],
        <BLANKLINE>
               [[0., 0., 1., 0.],
                [0., 0., 0., 1.]]], dtype=float32)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    shape = aval_of(a).shape
    left, right = shape[:ind], shape[ind:]
    rows, cols = math.prod(left), math.prod(right)
    if rows != cols:
        raise ValueError(f"numpy.linalg.tensorinv: dims {left} and {right} do not form a "
                         f"square map")
    return jnp.reshape(inv(jnp.reshape(a, (rows, cols))), right + left)


def tensorsolve(a, b, axes=None):
    """Solve ``tensordot(a, x, x.ndim) = b`` for ``x``.

    Example:
        >>> a = jnp.eye(6).reshape(2, 3, 6) * 2.0
        >>> b = jnp.ones((2, 3))
        >>> x = jnp.linalg.tensorsolve(a, b)
        >>> x.shape, bool(jnp.allclose(jnp.tensordot(a, x, 1), b))
        ((6,), True)
    """
    jnp = _jnp()
    a, b = jnp.asarray(a), jnp.asarray(b)
    nd = aval_of(a).ndim
    if axes is not None:
        axes = [ax % nd for ax in axes]
        order = [i for i in range(nd) if i not in axes] + axes
        a = jnp.transpose(a, order)
    shape = aval_of(a).shape
    bnd = aval_of(b).ndim
    x_shape = shape[bnd:]
    rows, cols = math.prod(shape[:bnd]), math.prod(x_shape)
    if rows != cols:
        raise ValueError(f"numpy.linalg.tensorsolve: a {shape} does not define a square map for "
                         f"b {aval_of(b).shape}")
    x = solve(jnp.reshape(a, (rows, cols)), jnp.reshape(b, (rows,)))
    return jnp.reshape(x, x_shape)


# --- eager fast path ------------------------------------------------------------------------
# Called eagerly, each function below compiles once per (shapes, dtypes, options) into one
# executable instead of dispatching each of its primitives separately; under transformations
# it traces inline. (funcgrad.transforms is imported lazily: it sits above numpy.)
_STATIC = {
    "cholesky": ("upper", "symmetrize_input"), "qr": ("mode",),
    "svd": ("full_matrices", "compute_uv", "hermitian"), "svdvals": (),
    "eigh": ("UPLO", "symmetrize_input"), "eigvalsh": ("UPLO",), "eig": (), "eigvals": (),
    "det": (), "slogdet": (), "solve": (), "inv": (),
    "solve_triangular": ("lower", "trans", "unit_diagonal"), "lstsq": ("rcond",),
    "pinv": ("hermitian", "rcond"), "matrix_power": ("n",), "matrix_rank": (),
    "cond": ("p",), "norm": ("ord", "axis", "keepdims"),
    "vector_norm": ("axis", "keepdims", "ord"), "matrix_norm": ("keepdims", "ord"),
    "tensorinv": ("ind",), "tensorsolve": ("axes",),
}


def _install_eager_jit():
    from funcgrad.lowering.eager_jit import jit_when_eager_in
    jit_when_eager_in(globals(), _STATIC)


_install_eager_jit()
del itertools
