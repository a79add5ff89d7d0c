"""funcgrad.scipy.linalg: SciPy's linear algebra (as ``jax.scipy.linalg``), built on the
decompositions of ``funcgrad.lax.linalg`` and ``funcgrad.numpy.linalg``.

Leading dimensions are batch dimensions; everything works under ``jit`` and ``vmap``, and
``grad`` where the decomposition has a derivative (all but ``schur`` and ``sqrtm``).

Example:
    >>> from funcgrad.scipy import linalg
    >>> c = linalg.cho_factor(jnp.array([[4.0, 2.0], [2.0, 3.0]]))
    >>> linalg.cho_solve(c, jnp.array([1.0, 2.0]))
    Array([-0.12499997,  0.74999994], dtype=float32)
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.lax import linalg as _la
from funcgrad.numpy import linalg as _nla
from funcgrad.scipy._special_matrices import (circulant, companion, dft, hadamard,  # noqa: F401
                                              hankel, helmert, hilbert, leslie, toeplitz)

__all__ = [
    "block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "det", "dft",
    "eigh", "expm", "hadamard", "hankel", "helmert", "hilbert", "inv", "leslie", "lu",
    "lu_factor", "lu_solve", "polar", "qr", "schur", "solve", "solve_triangular", "sqrtm", "svd",
    "toeplitz",
]

solve_triangular = _nla.solve_triangular
det = _nla.det
inv = _nla.inv


def _matrix(name, a, square=True):
    a = jnp.asarray(a)
    if a.ndim < 2 or (square and a.shape[-1] != a.shape[-2]):
        what = "square matrices" if square else "matrices"
        raise ValueError(f"scipy.linalg.{name}: expected {what} (rank >= 2), got shape "
                         f"{a.shape}")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(dtypes.default_float())
    return a


def _H(x):
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of a Hermitian positive-definite ``a``: upper ``U`` with
    ``a = U^H U`` (default) or lower ``L`` with ``a = L L^H``.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.cholesky(jnp.array([[4.0, 2.0], [2.0, 3.0]]), lower=True)
        Array([[2.       , 0.       ],
               [1.       , 1.4142135]], dtype=float32)
    """
    a = _matrix("cholesky", a)
    # As JAX: no symmetrization. The lower factor reads a's lower triangle, the upper one its
    # upper triangle (the lower triangle of a^H); the derivative is the factorization's own
    # (along the whole tangent), not that of a Hermitian part.
    low = _la.cholesky(a if lower else _H(a), symmetrize_input=False)
    return low if lower else _H(low)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """``(c, lower)`` for ``cho_solve``: ``c`` holds the Cholesky factor (the other triangle is
    zero).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> c, low = linalg.cho_factor(a)
    """
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` given ``cho_factor(a)``; ``b`` is a vector or a matrix of columns.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> b = jnp.array([1.0, 2.0])
        >>> x = linalg.cho_solve(linalg.cho_factor(a), b)
    """
    c, lower = c_and_lower
    c = _matrix("cho_solve", c)
    b = jnp.asarray(b)
    if b.shape[:1] != c.shape[-1:]:
        raise ValueError(f"scipy.linalg.cho_solve: b's first dimension must match the factor "
                         f"of shape {c.shape}, got b of shape {b.shape}")
    if lower:
        y = _nla.solve_triangular(c, b, lower=True)
        return _nla.solve_triangular(c, y, lower=True, trans=2)
    y = _nla.solve_triangular(c, b, lower=False, trans=2)
    return _nla.solve_triangular(c, y, lower=False)


def lu_factor(a, overwrite_a=False, check_finite=True):
    """``(lu, piv)``: ``L`` (unit diagonal, below) and ``U`` packed in ``lu``, and 0-based
    LAPACK row interchanges ``piv`` (row ``i`` was swapped with ``piv[i]``).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> lu, piv = linalg.lu_factor(a)
    """
    a = _matrix("lu_factor", a)
    lu_, piv, _ = _la.lu(a)
    return lu_, piv


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """Solve ``a x = b`` (``trans=0``), ``a^T x = b`` (1) or ``a^H x = b`` (2) from
    ``lu_factor(a)``.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> b = jnp.array([1.0, 2.0])
        >>> x = linalg.lu_solve(linalg.lu_factor(a), b)
    """
    lu_, piv = lu_and_piv
    lu_ = _matrix("lu_solve", lu_)
    if trans not in (0, 1, 2):
        raise ValueError(f"scipy.linalg.lu_solve: trans must be 0, 1 or 2, got {trans!r}")
    b = jnp.asarray(b)
    n = lu_.shape[-1]
    if b.shape[:1] != (n,):
        raise ValueError(f"scipy.linalg.lu_solve: b's first dimension must be {n} (the "
                         f"factor is {lu_.shape}), got b of shape {b.shape}")
    perm = _la.lu_pivots_to_permutation(piv, n)
    if trans == 0:
        y = _nla.solve_triangular(lu_, b[perm], lower=True, unit_diagonal=True)
        return _nla.solve_triangular(lu_, y, lower=False)
    # a^T = U^T L^T P, so solve U^T y = b, L^T z = y, and undo the permutation
    y = _nla.solve_triangular(lu_, b, lower=False, trans=trans)
    z = _nla.solve_triangular(lu_, y, lower=True, trans=trans, unit_diagonal=True)
    return jnp.zeros_like(z).at[perm].set(z)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """LU decomposition with partial pivoting: ``(p, l, u)`` with ``a = p @ l @ u``, or
    ``(p @ l, u)`` when ``permute_l``. ``a`` may be rectangular (m x n, k = min(m, n)):
    ``l`` is m x k and ``u`` k x n.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> p, l, u = linalg.lu(a)
    """
    a = _matrix("lu", a, square=False)
    m, n = a.shape[-2:]
    k = min(m, n)
    lu_, _, perm = _la.lu(a)
    l_ = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=a.dtype)
    u = jnp.triu(lu_[..., :k, :])
    # a[perm] = l @ u, so a = P l u with P[perm[i], i] = 1
    p = jnp.swapaxes(jnp.asarray(perm[..., :, None] == jnp.arange(m), a.dtype), -1, -2)
    if permute_l:
        return jnp.matmul(p, l_), u
    return p, l_, u


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a="gen"):
    """Solve ``a x = b`` (``assume_a``: "gen", "sym", "her" or "pos" for a positive-definite
    ``a``, solved through its Cholesky factor reading the ``lower`` or upper triangle).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.solve(jnp.array([[3.0, 1.0], [1.0, 2.0]]), jnp.array([9.0, 8.0]))
        Array([2., 3.], dtype=float32)
    """
    if assume_a not in ("gen", "general", "sym", "symmetric", "her", "hermitian", "pos",
                        "positive definite"):
        raise ValueError(f"scipy.linalg.solve: assume_a must be 'gen', 'sym', 'her' or 'pos', "
                         f"got {assume_a!r}")
    a = _matrix("solve", a)
    if assume_a in ("pos", "positive definite"):
        return _solve_pos(a, jnp.asarray(b), bool(lower))
    return _nla.solve(a, b)


def _solve_pos(a, b, lower):
    """``solve(a, b, assume_a="pos")``: the values come from the Cholesky factor of ``a``'s
    ``lower`` (or upper) triangle, the derivative is that of ``a^-1 b`` for the whole ``a``
    (``dx = a^-1 (db - da x)``), as JAX's (a linear solve that reuses the factor)."""
    factors = cho_factor(lax.stop_gradient(a), lower=lower)
    x = cho_solve(factors, lax.stop_gradient(b))
    # zero-valued terms that carry the derivative: d/db = a^-1 db, d/da = -a^-1 da x
    vec = b.ndim == 1
    xm = x[..., None] if vec else x
    bm = b[..., None] if vec else b
    resid = (bm - lax.stop_gradient(bm)) - (a - lax.stop_gradient(a)) @ lax.stop_gradient(xm)
    dx = cho_solve(factors, resid)
    return x + (dx[..., 0] if vec else dx)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """Eigenvalues ``w`` (ascending) and eigenvectors ``v`` of a Hermitian ``a``, or of the
    generalized problem ``a v = w b v`` with a positive-definite ``b`` (``v^H b v = I``).
    Returns ``(w, v)``, or ``w`` when ``eigvals_only``.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> w, v = linalg.eigh(jnp.array([[2.0, 1.0], [1.0, 2.0]]))
    """
    if type != 1 or subset_by_index is not None or subset_by_value is not None:
        raise ValueError("scipy.linalg.eigh: only type=1 without subset_by_index/"
                         "subset_by_value is supported; take a slice of the result instead")
    a = _matrix("eigh", a)
    uplo = "L" if lower else "U"
    if b is None:
        w, v = _nla.eigh(a, UPLO=uplo)
    else:
        b = _matrix("eigh", b).astype(a.dtype)
        if b.shape != a.shape:
            raise ValueError(f"scipy.linalg.eigh: b must have a's shape {a.shape}, got "
                             f"{b.shape}")
        chol = _la.cholesky(b)
        # C = L^-1 a L^-H is Hermitian with the same eigenvalues; v = L^-H y
        left = _nla.solve_triangular(chol, a, lower=True)
        c = _H(_nla.solve_triangular(chol, _H(left), lower=True))
        w, y = _nla.eigh(c, UPLO=uplo)
        v = _nla.solve_triangular(chol, y, lower=True, trans=2)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """Singular value decomposition ``(u, s, vh)`` (or ``s`` when not ``compute_uv``).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> u, s, vh = linalg.svd(a, full_matrices=False)
    """
    return _nla.svd(_matrix("svd", a, square=False), full_matrices=full_matrices,
                    compute_uv=compute_uv)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """QR decomposition: ``(q, r)`` (``mode`` "full" or "economic"), or ``r`` (mode "r").

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> q, r = linalg.qr(a, mode="economic")
    """
    if pivoting:
        raise ValueError("scipy.linalg.qr: pivoting=True is not supported")
    modes = {"full": "complete", "economic": "reduced", "r": "r"}
    if mode not in modes:
        raise ValueError(f"scipy.linalg.qr: mode must be 'full', 'economic' or 'r', got "
                         f"{mode!r}")
    out = _nla.qr(_matrix("qr", a, square=False), mode=modes[mode])
    return (out,) if mode == "r" and not isinstance(out, tuple) else out


def schur(a, output="real"):
    """Schur decomposition ``a = z @ t @ z^H``: ``(t, z)``. ``output="real"`` gives the real
    Schur form of a real ``a`` (2x2 diagonal blocks for complex eigenvalue pairs); "complex"
    an upper triangular ``t``. CPU only.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> t, z = linalg.schur(a)
    """
    if output not in ("real", "complex"):
        raise ValueError(f"scipy.linalg.schur: output must be 'real' or 'complex', got "
                         f"{output!r}")
    a = _matrix("schur", a)
    if output == "complex" and not jnp.iscomplexobj(a):
        a = a.astype(jnp.result_type(a.dtype, jnp.complex64))
    return tuple(_la.schur(a))


def block_diag(*arrs):
    """A block-diagonal matrix of the given blocks (0-d -> 1x1, 1-d -> one row).

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.block_diag(jnp.ones((2, 2)), jnp.array([3.0]))
        Array([[1., 1., 0.],
               [1., 1., 0.],
               [0., 0., 3.]], dtype=float32)
    """
    if not arrs:
        return jnp.zeros((1, 0))
    blocks = [jnp.atleast_2d(jnp.asarray(x)) for x in arrs]
    for i, blk in enumerate(blocks):
        if blk.ndim != 2:
            raise ValueError(f"scipy.linalg.block_diag: argument {i} must have at most 2 "
                             f"dimensions, got shape {blk.shape}")
    dt = jnp.result_type(*blocks)
    n_cols = sum(blk.shape[1] for blk in blocks)
    rows, col = [], 0
    for blk in blocks:
        r, c = blk.shape
        rows.append(jnp.pad(blk.astype(dt), ((0, 0), (col, n_cols - col - c))))
        col += c
    return jnp.concatenate(rows, axis=0)


# Pade approximant of degree 13 (Higham, "The scaling and squaring method for the matrix
# exponential revisited", 2005): coefficients and the 1-norm bound it is accurate below.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _expm_one(a, max_squarings):
    b = _PADE13
    n = a.shape[-1]
    ident = jnp.eye(n, dtype=a.dtype)
    norm = jnp.max(jnp.sum(jnp.abs(a), axis=-2))
    real_dt = dtypes.real_dtype(a.dtype)
    s = jnp.maximum(0, jnp.ceil(jnp.log2(jnp.maximum(norm, 1e-30) / _THETA13)))
    s = jnp.where(jnp.isfinite(s), s, 0).astype(np.int32)
    too_many = s > max_squarings
    s = jnp.minimum(s, max_squarings)
    a = a / jnp.exp2(s.astype(real_dt)).astype(a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
             + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * ident)
    v = (a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2)
         + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * ident)
    r = _nla.solve(v - u, v + u)
    # square s times; a loop of fixed length keeps the result differentiable
    r = lax.fori_loop(0, max_squarings, lambda i, r: jnp.where(i < s, r @ r, r), r)
    return jnp.where(too_many, jnp.nan, r).astype(r.dtype)


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential (scaling and squaring with a degree-13 Pade approximant). A
    matrix whose 1-norm needs more than ``max_squarings`` halvings (norm above about
    ``5.4 * 2**max_squarings``) gives NaN, as in JAX; ``upper_triangular`` is accepted for
    JAX compatibility and not used.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> linalg.expm(jnp.array([[0.0, 1.0], [-1.0, 0.0]]))     # a rotation by 1 radian
        Array([[ 0.54030234,  0.8414711 ],
               [-0.84147096,  0.5403023 ]], dtype=float32)
    """
    a = _matrix("expm", A)
    max_squarings = int(max_squarings)
    if max_squarings < 0:
        raise ValueError(f"scipy.linalg.expm: max_squarings must be >= 0, got {max_squarings}")
    if a.ndim == 2:
        return _expm_one(a, max_squarings)
    from funcgrad import vmap
    flat = jnp.reshape(a, (-1,) + a.shape[-2:])
    return jnp.reshape(vmap(lambda m: _expm_one(m, max_squarings))(flat), a.shape)


def sqrtm(A, blocksize=1):
    """The principal square root of a square matrix (complex Schur form, then the
    triangular square root one superdiagonal at a time). The result is complex.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> r = linalg.sqrtm(jnp.array([[4.0, 1.0], [0.0, 9.0]]))    # r @ r == A
    """
    a = _matrix("sqrtm", A)
    if a.ndim != 2:
        raise ValueError(f"scipy.linalg.sqrtm: expected one square matrix, got shape {a.shape}")
    cdt = jnp.result_type(a.dtype, jnp.complex64)
    t, z = _la.schur(a.astype(cdt))
    n = a.shape[-1]
    d = jnp.diagonal(t)
    if not jnp.iscomplexobj(a):
        # a real eigenvalue of a real matrix comes back with a rounding-error imaginary part,
        # whose sign would pick the root of a negative eigenvalue: take +i, as SciPy does
        tol = 100 * np.finfo(dtypes.real_dtype(cdt)).eps * jnp.abs(d)
        d = jnp.where(jnp.abs(jnp.imag(d)) <= tol, jnp.real(d).astype(cdt), d)
    r = jnp.diag(jnp.sqrt(d))
    rows = jnp.arange(n)
    diag = jnp.diagonal(r)

    def fill(d, r):
        # entries (i, i + d) need only entries of smaller offset, all of which are in r
        cols = rows + d
        valid = cols < n
        cols_c = jnp.minimum(cols, n - 1)
        rr = r @ r
        num = t[rows, cols_c] - rr[rows, cols_c]
        den = diag + diag[cols_c]
        val = jnp.where(valid, num / jnp.where(den == 0, 1, den), 0)
        return r.at[rows, cols_c].add(jnp.where(valid, val, 0))

    r = lax.fori_loop(1, n, fill, r)
    return z @ r @ _H(z)


def polar(a, side="right", *, method="svd", eps=None, max_iterations=None):
    """Polar decomposition: ``(u, p)`` with ``a = u @ p`` (``side="right"``) or ``a = p @ u``
    (``"left"``), ``u`` with orthonormal columns and ``p`` Hermitian positive semidefinite.

    Example:
        >>> from funcgrad.scipy import linalg
        >>> a = jnp.array([[4.0, 2.0], [2.0, 3.0]])
        >>> u, p = linalg.polar(a)
    """
    if side not in ("right", "left"):
        raise ValueError(f"scipy.linalg.polar: side must be 'right' or 'left', got {side!r}")
    if method != "svd":
        raise ValueError(f"scipy.linalg.polar: method must be 'svd', got {method!r}")
    a = _matrix("polar", a, square=False)
    w, s, vh = _nla.svd(a, full_matrices=False)
    u = w @ vh
    s = s.astype(a.dtype)
    if side == "right":
        p = (_H(vh) * s[..., None, :]) @ vh
    else:
        p = (w * s[..., None, :]) @ _H(w)
    return u, p
