"""Linear-algebra primitives on LAPACK (CPU) and cuSOLVER (CUDA) kernels.

Each decomposition is one primitive whose lowering emits a ``stablehlo.custom_call`` to a
typed-FFI kernel; the platform picks the kernel family, target name and attributes, and the
rest of the rule (shapes, layouts, post-processing) is shared:

* CPU: jaxlib's LAPACK kernels ``lapack_<s|d|c|z><routine>_ffi``, registered with XLA at the
  first lowering.
Which kernels a platform has, and their registration, is the platform file's business
(``lowering/cpu.py``, ``lowering/cuda.py``, through ``KERNELS``); the rules here speak the two
calling conventions. Their attributes are ``uint8`` characters (``uplo='L'``, ``mode='V'``...).
* CUDA: the cuSOLVER kernels of the CUDA plugin wheel (``cusolver_getrf_ffi``,
  ``cusolver_geqrf_ffi``/``cusolver_orgqr_ffi``, ``cusolver_syevd_ffi``, ``cusolver_gesvd_ffi``,
  ``cusolver_geev_ffi``), one target for all four dtypes, registered with the CUDA PJRT plugin at
  the first lowering that needs one. Their attributes are bools and
  small integers (``lower=True``, ``algorithm=0 : ui8``, ``full_matrices``...). Cholesky and
  triangular solves lower to the native ``stablehlo.cholesky``/``stablehlo.triangular_solve``,
  which XLA:GPU runs itself. cuSOLVER's ``gesvd`` needs m >= n: a wide matrix is passed
  row-major (the kernel sees its transpose) and the two singular-vector results swap. Its
  ``geev`` computes no left eigenvectors (they are derived from ``inv(vr)`` in the lowering)
  and returns a real matrix's complex eigenvectors in LAPACK's packed real form, unpacked in
  the lowering.

Both families take column-major matrices with any number of leading batch dimensions (passed
through ``operand_layouts``/``result_layouts``) and report failures in an ``info`` status per
matrix (custom-call API version 4, attributes in a dictionary ``backend_config``). Other
platforms raise ``MissingRuleError``. Post-processing that every caller wants (zeroing the
unused triangle, NaN where the kernel reported failure, 0-based pivots) happens inside the
lowering, so every primitive's output is the same on both platforms.

Primitives: ``cholesky``, ``triangular_solve``, ``lu`` (with pivots and permutation), ``qr``,
``eigh``, ``svd``, ``eig`` (eigenvector derivatives behind ``enable_eigvec_derivs``, as
JAX's). Every derivative is JAX's (``tests/linalg/test_grad_vs_jax.py`` compares them).

Example:
    >>> a = jnp.array([[2.0, 1.0], [1.0, 2.0]])
    >>> L = lax.linalg.cholesky(a)
    >>> L
    Array([[1.414213..., 0.        ],
           [0.707106..., 1.224744...]], dtype=float32)
    >>> bool(jnp.allclose(L @ L.T, a))
    True
"""
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo, stablehlo

from funcgrad.core import errors
from funcgrad.core import ad_util
from funcgrad.core.batching_util import all_to_front, moveaxis, vectorized_batcher
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.interpreters import Value
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad import lax  # the package: lax.linalg is imported last by lax/__init__.py
from funcgrad.lax import _hlo
from funcgrad.lax.reductions import reduce_hlo

# --- custom-call plumbing -------------------------------------------------------------------
LAPACK, CUSOLVER = "lapack", "cusolver"

#: The kernels behind the decompositions on each platform: platform name -> kernel set, filled
#: by the platform files (``lowering/cpu.py``: jaxlib's LAPACK; ``lowering/cuda.py``: the CUDA
#: plugin's cuSOLVER). A kernel set has ``family``, the calling convention the rules below
#: speak (LAPACK or CUSOLVER), and ``target(fn_name, routine, dtype)``, the name of a
#: custom-call target it has registered with XLA for ``routine`` (``getrf``...) on ``dtype``.
KERNELS = {}


def _kernel_family(ctx, name):
    """The calling convention of the kernels behind ``lax.linalg.<name>`` on ``ctx.platform``."""
    kernels = KERNELS.get(ctx.platform)
    if kernels is None:
        raise errors.MissingRuleError(
            f"lax.linalg.{name}: no linear-algebra kernels for platform {ctx.platform!r} "
            f"(there are kernels for {', '.join(repr(k) for k in sorted(KERNELS))})")
    return kernels.family


def _kernel(family, name, routine, dtype):
    """The registered custom-call target running ``routine`` for ``lax.linalg.<name>``."""
    for kernels in KERNELS.values():
        if kernels.family == family:
            return kernels.target(name, routine, dtype)
    raise errors.MissingRuleError(f"lax.linalg.{name}: no {family} kernels are registered")


def _layout(ndim, matrix):
    """Minor-to-major layout: column-major for the trailing two dims of a matrix."""
    if matrix and ndim >= 2:
        order = [ndim - 2, ndim - 1] + list(range(ndim - 3, -1, -1))
    else:
        order = list(range(ndim - 1, -1, -1))
    return ir.DenseIntElementsAttr.get(np.asarray(order, np.int64), type=ir.IndexType.get())


def _ffi_attr(value):
    """An FFI attribute: a one-character ``str`` is a LAPACK flag (its ``uint8`` code), a
    ``bool`` an ``i1``, a NumPy integer scalar an integer of its own width and signedness."""
    if isinstance(value, str) and len(value) == 1:
        return ir.IntegerAttr.get(ir.IntegerType.get_unsigned(8), ord(value))
    if isinstance(value, (bool, np.bool_)):
        return ir.BoolAttr.get(bool(value))
    if isinstance(value, np.integer):
        bits = value.dtype.itemsize * 8
        kind = (ir.IntegerType.get_unsigned(bits) if value.dtype.kind == "u"
                else ir.IntegerType.get_signless(bits))
        return ir.IntegerAttr.get(kind, int(value))
    raise TypeError(f"lax.linalg: cannot encode {value!r} ({type(value).__name__}) as an FFI "
                    f"attribute; use a one-character str, a bool or a NumPy integer scalar")


def _ffi_call(name, operands, operand_avals, result_avals, attrs, operand_matrix,
              result_matrix):
    """Emit a typed-FFI custom call to the registered target ``name``; returns its results.

    ``operand_matrix``/``result_matrix`` flag the arrays passed column-major (LAPACK and
    cuSOLVER matrices); the others keep XLA's default row-major layout."""
    op = stablehlo.CustomCallOp(
        [_hlo.ir_type(a) for a in result_avals], list(operands), name,
        has_side_effect=ir.BoolAttr.get(False),
        backend_config=ir.DictAttr.get({k: _ffi_attr(v) for k, v in attrs.items()}),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4),
        operand_layouts=ir.ArrayAttr.get([_layout(a.ndim, m) for a, m in
                                          zip(operand_avals, operand_matrix)]),
        result_layouts=ir.ArrayAttr.get([_layout(a.ndim, m) for a, m in
                                         zip(result_avals, result_matrix)]))
    return list(op.results)


# --- MLIR helpers for post-processing ------------------------------------------------------
def _iota(shape, dim, dtype=np.int32):
    return stablehlo.iota(_hlo.tensor_type(shape, dtype), dim)


def _triangle_mask(shape, lower, k=0):
    """Boolean mask of ``shape`` selecting the lower (row >= col - k) or upper triangle."""
    rows = _iota(shape, len(shape) - 2)
    cols = _iota(shape, len(shape) - 1)
    if k:
        cols = stablehlo.add(cols, _hlo.constant(-k, np.int32, shape))
    return _hlo.compare(rows, cols, "GE" if lower else "LE", np.int32)


def _keep_triangle(x, aval, lower):
    mask = _triangle_mask(aval.shape, lower)
    return stablehlo.select(mask, x, _hlo.zeros_like_aval(aval))


def _nan_unless(ok, ok_shape, x, aval):
    """``x`` where ``ok`` (a bool array of the leading ``ok_shape`` dims of ``aval``), else NaN."""
    ok = stablehlo.broadcast_in_dim(_hlo.tensor_type(aval.shape, dtypes.bool_), ok,
                                    list(range(len(ok_shape))))
    return stablehlo.select(ok, x, _hlo.constant(np.nan, aval.dtype, aval.shape))


def _nan_if_failed(x, aval, info, info_aval):
    """NaN for the batch elements whose ``info`` (a LAPACK/cuSOLVER status) is not 0."""
    ok = _hlo.compare(info, _hlo.constant(0, np.int32, info_aval.shape), "EQ", np.int32)
    return _nan_unless(ok, info_aval.shape, x, aval)


def _nan_on_diagonal(x, aval):
    """Per matrix of ``x`` (batch shape): whether a diagonal entry is NaN."""
    nd = aval.ndim
    is_nan = _hlo.compare(x, x, "NE", aval.dtype)
    diag = _hlo.compare(_iota(aval.shape, nd - 2), _iota(aval.shape, nd - 1), "EQ", np.int32)
    return reduce_hlo("or", stablehlo.and_(is_nan, diag), ShapedArray(aval.shape, dtypes.bool_),
                      (nd - 2, nd - 1), ShapedArray(aval.shape[:-2], dtypes.bool_))


def _slice(x, aval, starts, limits):
    return stablehlo.slice(x, list(starts), list(limits), [1] * aval.ndim)


def _pad_cols(x, aval, new_cols):
    """Zero-pad the last dim of ``x`` to ``new_cols``."""
    extra = new_cols - aval.shape[-1]
    zero = _hlo.constant(0, aval.dtype)
    return stablehlo.pad(x, zero, [0] * aval.ndim, [0] * (aval.ndim - 1) + [extra],
                         [0] * aval.ndim)


# --- checks ----------------------------------------------------------------------------------
_LAPACK_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _check_matrix(name, a, square=False):
    if a.ndim < 2:
        raise TypeError(f"lax.linalg.{name}: expected a matrix (rank >= 2), got {a.str_short()}")
    if square and a.shape[-1] != a.shape[-2]:
        raise TypeError(f"lax.linalg.{name}: expected square matrices, got {a.str_short()}")
    if a.dtype not in _LAPACK_DTYPES:
        raise TypeError(f"lax.linalg.{name}: expected float32/float64/complex64/complex128, "
                        f"got {a.str_short()}")


def _int_aval(shape):
    return ShapedArray(shape, dtypes.int32)


# --- helpers for the rules (written with funcgrad.lax, so they work under every transform) ---
def _mm(a, b):
    """Batched matrix product of ``a`` (..., m, k) and ``b`` (..., k, n) with equal batch dims."""
    nd = aval_of(a).ndim
    batch = tuple(range(nd - 2))
    return lax.dot_general(a, b, (((nd - 1,), (nd - 2,)), (batch, batch)))


def _H(x):
    """Conjugate transpose of the trailing two dims."""
    x = _mT(x)
    return lax.conj(x) if dtypes.is_complex(aval_of(x).dtype) else x


def _tri(x, lower, k=0):
    """``tril(x, k)`` (``lower``) or ``triu(x, k)`` of the trailing two dims."""
    aval = aval_of(x)
    rows = lax.broadcasted_iota(np.int32, aval.shape, aval.ndim - 2)
    cols = lax.broadcasted_iota(np.int32, aval.shape, aval.ndim - 1)
    diff = lax.sub(cols, rows)
    mask = lax.le(diff, lax.full(aval.shape, k, np.int32)) if lower else \
        lax.ge(diff, lax.full(aval.shape, k, np.int32))
    return lax.select(mask, x, lax.full(aval.shape, 0, aval.dtype))


def _eye_like(shape, dtype):
    rows = lax.broadcasted_iota(np.int32, shape, len(shape) - 2)
    cols = lax.broadcasted_iota(np.int32, shape, len(shape) - 1)
    return lax.convert_element_type(lax.eq(rows, cols), dtype)


def _diag(x):
    """The diagonal of the trailing square dims: (..., n, n) -> (..., n)."""
    aval = aval_of(x)
    return lax.reduce_sum(lax.mul(x, _eye_like(aval.shape, aval.dtype)), (aval.ndim - 1,))


def _from_diag(d, dtype=None):
    """A diagonal matrix with ``d`` (..., n) on its diagonal."""
    aval = aval_of(d)
    shape = aval.shape + aval.shape[-1:]
    dtype = dtype or aval.dtype
    d = lax.convert_element_type(d, dtype)
    return lax.mul(lax.broadcast_in_dim(d, shape, tuple(range(aval.ndim - 1)) + (aval.ndim,)),
                   _eye_like(shape, dtype))


def _row(v, shape):
    """``v`` (..., n) broadcast as a row over matrices of ``shape`` (..., m, n)."""
    nd = aval_of(v).ndim
    return lax.broadcast_in_dim(v, shape, tuple(range(nd - 1)) + (nd,))


def _col(v, shape):
    """``v`` (..., m) broadcast as a column over matrices of ``shape`` (..., m, n)."""
    nd = aval_of(v).ndim
    return lax.broadcast_in_dim(v, shape, tuple(range(nd)))


def _real(x):
    return lax.real(x) if dtypes.is_complex(aval_of(x).dtype) else x


def _to(x, dtype):
    return lax.convert_element_type(x, dtype)


def _zero_out(aval):
    return ad_util.Zero(ad_util.tangent_aval(aval))


def solve(a, b):
    """Solve ``a @ x = b`` for square ``a`` (..., n, n) and ``b`` (..., n, k) by LU.

    Example:
        >>> a, b = jnp.array([[3.0, 1.0], [1.0, 2.0]]), jnp.array([[9.0], [8.0]])
        >>> lax.linalg.solve(a, b)
        Array([[2.],
               [3.]], dtype=float32)
    """
    lu_, _, perm = lu(a)
    pb = _take_rows(b, perm)
    y = triangular_solve(lu_, pb, left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, y, left_side=True, lower=False)


def _take_rows(b, perm):
    """``b[..., perm, :]`` for a batched permutation (a one-hot matmul: differentiable in b)."""
    bt = aval_of(b)
    n = bt.shape[-2]
    shape = bt.shape[:-2] + (n, n)
    p = lax.broadcast_in_dim(perm, shape, tuple(range(bt.ndim - 1)))
    cols = lax.broadcasted_iota(np.int32, shape, bt.ndim - 1)
    onehot = _to(lax.eq(p, cols), bt.dtype)
    return _mm(onehot, b)


# --- cholesky ---------------------------------------------------------------------------------
cholesky_p = Primitive("cholesky")


@cholesky_p.def_abstract_eval
def _cholesky_abstract(a):
    _check_matrix("cholesky", a, square=True)
    return a.strip_weak()


def _cholesky_lowering(ctx, a):
    aval = ctx.avals_out[0]
    batch = aval.shape[:-2]
    if _kernel_family(ctx, "cholesky") == LAPACK:
        info_aval = _int_aval(batch)
        out, info = _ffi_call(_kernel(LAPACK, "cholesky", "potrf", aval.dtype), [a], [aval],
                              [aval, info_aval], {"uplo": "L"}, [True], [True, False])
        ok = _hlo.compare(info, _hlo.constant(0, np.int32, batch), "EQ", np.int32)
    else:
        # XLA's own Cholesky (cuSOLVER inside XLA:GPU) leaves the upper triangle as it was and
        # fills a matrix whose factorization failed with NaN: its diagonal tells.
        out = stablehlo.cholesky(a, lower=True)
        ok = stablehlo.not_(_nan_on_diagonal(out, aval))
    out = _keep_triangle(out, aval, lower=True)
    return _nan_unless(ok, batch, out, aval)


cholesky_p.def_lowering(_cholesky_lowering)


def _cholesky_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    L = cholesky_p.bind(a)
    if ad_util.is_zero(da):
        return L, _zero_out(aval_of(L))
    # dL = L Phi(L^-1 dA L^-H), Phi = lower triangle with half the diagonal.
    tmp = triangular_solve(L, da, left_side=True, lower=True)
    x = triangular_solve(L, tmp, left_side=False, lower=True, transpose_a=True,
                         conjugate_a=True)
    aval = aval_of(x)
    half = lax.mul(_eye_like(aval.shape, aval.dtype), lax.full(aval.shape, 0.5, aval.dtype))
    phi = lax.sub(_tri(x, lower=True), lax.mul(x, half))
    return L, _mm(L, phi)


cholesky_p.def_jvp(_cholesky_jvp)

# The kernels loop over leading batch dimensions: vmap moves its axis to the front.
cholesky_p.def_batch(vectorized_batcher(cholesky_p))


def cholesky(x, symmetrize_input=True):
    """The lower Cholesky factor ``L`` of a Hermitian positive-definite ``x`` (``x = L L^H``).

    As in JAX, ``symmetrize_input`` (the default) factors ``(x + x^H) / 2``: the derivative
    along a tangent is that along its Hermitian part, and gradients are Hermitian. With
    ``symmetrize_input=False`` only the lower triangle of ``x`` is read and the derivative
    rule applies to the whole tangent. Matrices that are not positive definite give NaN.

    Example:
        >>> x = jnp.array([[4., 2.], [2., 3.]])
        >>> lax.linalg.cholesky(x)
        Array([[2.       , 0.       ],
               [1.       , 1.4142135]], dtype=float32)
        >>> funcgrad.grad(lambda x: lax.linalg.cholesky(x).sum())(x)   # symmetric
        Array([[0.21338835, 0.07322331],
               [0.07322331, 0.35355335]], dtype=float32)
    """
    _check_matrix("cholesky", aval_of(x), square=True)
    if symmetrize_input:
        x = symmetrize(x)
    return cholesky_p.bind(x)


def symmetrize(x):
    """``(x + x^H) / 2``, the Hermitian part of ``x``.

    Example:
        >>> lax.linalg.symmetrize(jnp.array([[1.0, 4.0], [0.0, 2.0]]))
        Array([[1., 2.],
               [2., 2.]], dtype=float32)
    """
    xt = _mT(x)
    if dtypes.is_complex(aval_of(x).dtype):
        xt = lax.conj(xt)
    return lax.div(lax.add(x, xt), lax.full((), 2, aval_of(x).dtype))


def _mT(x):
    nd = aval_of(x).ndim
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


# --- triangular_solve ------------------------------------------------------------------------
triangular_solve_p = Primitive("triangular_solve")


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract(a, b, left_side, lower, transpose_a, conjugate_a,
                               unit_diagonal):
    _check_matrix("triangular_solve", a, square=True)
    if b.ndim < 2:
        raise TypeError(f"lax.linalg.triangular_solve: b must be a matrix, got {b.str_short()}")
    if a.dtype != b.dtype:
        raise TypeError(f"lax.linalg.triangular_solve: dtypes of a {a.str_short()} and b "
                        f"{b.str_short()} must match")
    if a.shape[:-2] != b.shape[:-2]:
        raise TypeError(f"lax.linalg.triangular_solve: batch dims of a {a.str_short()} and b "
                        f"{b.str_short()} must match")
    k = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[-1] != k:
        raise TypeError(f"lax.linalg.triangular_solve: a {a.str_short()} does not match b "
                        f"{b.str_short()} with left_side={left_side}")
    return b.strip_weak()


_XLA_TRANSPOSE = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}


def _triangular_solve_lowering(ctx, a, b, left_side, lower, transpose_a, conjugate_a,
                               unit_diagonal):
    family = _kernel_family(ctx, "triangular_solve")
    a_aval, b_aval = ctx.avals_in
    if conjugate_a and not transpose_a and dtypes.is_complex(a_aval.dtype):
        a = _conj(a, a_aval)
        conjugate_a = False
    trans = "N"
    if transpose_a:
        trans = "C" if (conjugate_a and dtypes.is_complex(a_aval.dtype)) else "T"
    if family == CUSOLVER:
        # XLA:GPU runs stablehlo.triangular_solve itself (cuBLAS trsm).
        return stablehlo.triangular_solve(a, b, bool(left_side), bool(lower),
                                          bool(unit_diagonal),
                                          stablehlo.TransposeAttr.get(_XLA_TRANSPOSE[trans]))
    (out,) = _ffi_call(_kernel(family, "triangular_solve", "trsm", a_aval.dtype), [a, b],
                       [a_aval, b_aval], [b_aval],
                       {"side": "L" if left_side else "R", "uplo": "L" if lower else "U",
                        "trans_x": trans, "diag": "U" if unit_diagonal else "N"},
                       [True, True], [True])
    return out


def _conj(x, aval):
    return chlo.conj(x)


triangular_solve_p.def_lowering(_triangular_solve_lowering)


def _triangular_solve_jvp(primals, tangents, left_side, lower, transpose_a, conjugate_a,
                          unit_diagonal):
    a, b = primals
    da, db = tangents
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    x = triangular_solve_p.bind(a, b, **params)
    out = None
    if not ad_util.is_zero(db):
        out = triangular_solve_p.bind(a, db, **params)
    if not ad_util.is_zero(da):
        da = _tri(da, lower, k=-1 if unit_diagonal else 0) if lower else \
            _tri(da, lower, k=1 if unit_diagonal else 0)
        if transpose_a:
            da = _H(da) if conjugate_a else _mT(da)
        elif conjugate_a and dtypes.is_complex(aval_of(da).dtype):
            da = lax.conj(da)
        t = _mm(da, x) if left_side else _mm(x, da)
        dx_a = lax.neg(triangular_solve_p.bind(a, t, **params))
        out = dx_a if out is None else lax.add(out, dx_a)
    if out is None:
        return x, _zero_out(aval_of(x))
    return x, out


def _triangular_solve_transpose(ct, a, b, left_side, lower, transpose_a, conjugate_a,
                                unit_diagonal):
    if ad_util.is_undefined_primal(a):
        raise TypeError("lax.linalg.triangular_solve is linear only in b; cannot transpose "
                        "with respect to a")
    if ad_util.is_zero(ct):
        return [None, ad_util.Zero(b.aval)]
    ct_b = triangular_solve_p.bind(a, ad_util.instantiate(ct), left_side=left_side, lower=lower,
                                   transpose_a=not transpose_a, conjugate_a=conjugate_a,
                                   unit_diagonal=unit_diagonal)
    return [None, ct_b]


triangular_solve_p.def_jvp(_triangular_solve_jvp)
triangular_solve_p.def_transpose(_triangular_solve_transpose)

def _triangular_solve_batch(args, dims, **params):
    # A shared (unbatched) triangular matrix with a batched right-hand side: fold the batch
    # into b's free dimension (columns for left_side, rows otherwise) and solve once.
    a, b = args
    da, db = dims
    if da is None and db is not None:
        bt = aval_of(b)
        nd = bt.ndim
        if params["left_side"]:
            b = moveaxis(b, db, nd - 2)                 # (..., m, B, n)
            shp = aval_of(b).shape
            b2 = lax.reshape(b, shp[:-2] + (shp[-2] * shp[-1],))
        else:
            b = moveaxis(b, db, nd - 3)                 # (..., B, m, n)
            shp = aval_of(b).shape
            b2 = lax.reshape(b, shp[:-3] + (shp[-3] * shp[-2], shp[-1]))
        batch = aval_of(b2).shape[:-2]
        a2 = _broadcast_batch(a, batch)
        x = triangular_solve_p.bind(a2, b2, **params)
        out = lax.reshape(x, shp)
        return out, (nd - 2 if params["left_side"] else nd - 3)
    a, b = all_to_front(args, dims)
    return triangular_solve_p.bind(a, b, **params), 0


triangular_solve_p.def_batch(_triangular_solve_batch)


def triangular_solve(a, b, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False):
    """Solve ``op(a) @ x = b`` (``left_side=True``) or ``x @ op(a) = b`` for triangular ``a``.

    ``op(a)`` is ``a``, ``a.T`` (``transpose_a``) or ``a^H`` (with ``conjugate_a``). Only the
    ``lower``/upper triangle of ``a`` is read; ``unit_diagonal`` assumes ones on the diagonal.
    Leading batch dimensions of ``a`` and ``b`` are broadcast against each other.

    Example:
        >>> L, b = jnp.array([[2.0, 0.0], [1.0, 1.0]]), jnp.array([[4.0], [5.0]])
        >>> lax.linalg.triangular_solve(L, b, left_side=True, lower=True)
        Array([[2.],
               [3.]], dtype=float32)
    """
    a_aval, b_aval = aval_of(a), aval_of(b)
    dt = dtypes.result_type(a_aval.dtype, b_aval.dtype)
    if not dtypes.is_inexact(dt):
        dt = dtypes.canonicalize(dtypes.float64)
    a = lax.convert_element_type(a, dt)
    b = lax.convert_element_type(b, dt)
    batch = tuple(np.broadcast_shapes(a_aval.shape[:-2], b_aval.shape[:-2]))
    a = _broadcast_batch(a, batch)
    b = _broadcast_batch(b, batch)
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a),
                                   conjugate_a=bool(conjugate_a),
                                   unit_diagonal=bool(unit_diagonal))


def _broadcast_batch(x, batch):
    aval = aval_of(x)
    if aval.shape[:-2] == batch:
        return x
    shape = batch + aval.shape[-2:]
    dims = tuple(range(len(shape) - aval.ndim, len(shape)))
    return lax.broadcast_in_dim(x, shape, dims)


# --- lu ---------------------------------------------------------------------------------------
lu_p = Primitive("lu", multiple_results=True)


@lu_p.def_abstract_eval
def _lu_abstract(a):
    _check_matrix("lu", a)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return [a.strip_weak(), _int_aval(batch + (min(m, n),)), _int_aval(batch + (m,))]


def _lu_lowering(ctx, a):
    family = _kernel_family(ctx, "lu")
    aval, piv_aval, perm_aval = ctx.avals_out
    batch = aval.shape[:-2]
    info_aval = _int_aval(batch)
    lu, piv, info = _ffi_call(_kernel(family, "lu", "getrf", aval.dtype), [a], [aval],
                              [aval, piv_aval, info_aval], {}, [True], [True, False, False])
    # LAPACK and cuSOLVER pivots are 1-based; a singular matrix (info > 0) still gives a valid
    # LU.
    piv = stablehlo.subtract(piv, _hlo.constant(1, np.int32, piv_aval.shape))
    bad = _hlo.compare(info, _hlo.constant(0, np.int32, batch), "LT", np.int32)
    bad = stablehlo.broadcast_in_dim(_hlo.tensor_type(aval.shape, dtypes.bool_), bad,
                                     list(range(len(batch))))
    lu = stablehlo.select(bad, _hlo.constant(np.nan, aval.dtype, aval.shape), lu)
    perm = _permutation_from_pivots(piv, piv_aval, perm_aval)
    return [lu, piv, perm]


def _permutation_from_pivots(piv, piv_aval, perm_aval):
    """Apply the row swaps ``i <-> piv[..., i]`` in order to ``iota(m)``: a while loop."""
    k = piv_aval.shape[-1]
    batch = perm_aval.shape[:-1]
    i32 = np.int32
    perm0 = _iota(perm_aval.shape, len(batch))
    if k == 0:
        return perm0
    scalar_t = _hlo.tensor_type((), i32)
    perm_t = _hlo.ir_type(perm_aval)
    piv_t = _hlo.ir_type(piv_aval)
    zero = _hlo.constant(0, i32)
    loop = stablehlo.WhileOp([scalar_t, perm_t, piv_t], [zero, perm0, piv])
    cond = loop.regions[0].blocks.append(scalar_t, perm_t, piv_t)
    with ir.InsertionPoint(cond):
        stablehlo.return_([_hlo.compare(cond.arguments[0], _hlo.constant(k, i32), "LT", i32)])
    body = loop.regions[1].blocks.append(scalar_t, perm_t, piv_t)
    with ir.InsertionPoint(body):
        i, perm, pv = body.arguments
        starts = [zero] * len(batch) + [i]
        sizes = list(batch) + [1]
        j = stablehlo.dynamic_slice(pv, starts, sizes)               # batch + (1,)
        p_i = stablehlo.dynamic_slice(perm, starts, sizes)           # batch + (1,)
        col = _iota(perm_aval.shape, len(batch))
        bshape = perm_aval.shape
        j_b = stablehlo.broadcast_in_dim(perm_t, j, list(range(len(batch) + 1)))
        is_j = _hlo.compare(col, j_b, "EQ", i32)
        p_j = stablehlo.ReduceOp(
            [_hlo.tensor_type(batch, i32)],
            [stablehlo.select(is_j, perm, _hlo.constant(0, i32, bshape))],
            [_hlo.constant(0, i32)], [len(batch)])
        _hlo.scalar_region(p_j, [ShapedArray((), i32)] * 2, lambda x, y: stablehlo.add(x, y))
        p_j = p_j.results[0]                                         # batch
        p_j = stablehlo.broadcast_in_dim(perm_t, p_j, list(range(len(batch))))
        p_i = stablehlo.broadcast_in_dim(perm_t, p_i, list(range(len(batch) + 1)))
        i_b = stablehlo.broadcast_in_dim(perm_t, i, [])
        is_i = _hlo.compare(col, i_b, "EQ", i32)
        new = stablehlo.select(is_i, p_j, stablehlo.select(is_j, p_i, perm))
        stablehlo.return_([stablehlo.add(i, _hlo.constant(1, i32)), new, pv])
    return loop.results[1]


lu_p.def_lowering(_lu_lowering)


def _lu_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    lu_, piv, perm = lu_p.bind(a)
    outs = [lu_, piv, perm]
    zeros = [_zero_out(aval_of(piv)), _zero_out(aval_of(perm))]
    if ad_util.is_zero(da):
        return outs, [_zero_out(aval_of(lu_))] + zeros
    aval = aval_of(a)
    m, n = aval.shape[-2:]
    k = min(m, n)
    nb = aval.ndim - 2
    # P A = L U with L (m, k) unit lower trapezoidal and U (k, n) upper trapezoidal. On the
    # leading k x k blocks: L1^-1 (P dA)_11 U1^-1 = L1^-1 dL1 + dU1 U1^-1 (strictly lower +
    # upper parts); the remaining rows of L / columns of U follow from the off-diagonal blocks.
    pda = _take_rows(da, perm)
    lu11 = _slice_mat(lu_, 0, k, 0, k)
    L1 = lax.add(_tri(lu11, lower=True, k=-1), _eye_like(aval.shape[:nb] + (k, k), aval.dtype))
    U1 = _tri(lu11, lower=False)
    x = triangular_solve(lu11, _slice_mat(pda, 0, k, 0, k), left_side=True, lower=True,
                         unit_diagonal=True)
    x = triangular_solve(lu11, x, left_side=False, lower=False)
    dL1 = _mm(L1, _tri(x, lower=True, k=-1))
    dU1 = _mm(_tri(x, lower=False), U1)
    dlu = lax.add(_tri(dL1, lower=True, k=-1), dU1)
    if m > n:
        L2 = _slice_mat(lu_, k, m, 0, k)
        rhs = lax.sub(_slice_mat(pda, k, m, 0, k), _mm(L2, dU1))
        dL2 = triangular_solve(lu11, rhs, left_side=False, lower=False)
        dlu = lax.concatenate([dlu, dL2], nb)
    elif n > m:
        U2 = _slice_mat(lu_, 0, k, k, n)
        rhs = lax.sub(_slice_mat(pda, 0, k, k, n), _mm(dL1, U2))
        dU2 = triangular_solve(lu11, rhs, left_side=True, lower=True, unit_diagonal=True)
        dlu = lax.concatenate([dlu, dU2], nb + 1)
    return outs, [dlu] + zeros


def _slice_mat(x, r0, r1, c0, c1):
    aval = aval_of(x)
    nb = aval.ndim - 2
    return lax.slice(x, (0,) * nb + (r0, c0), aval.shape[:nb] + (r1, c1))


lu_p.def_jvp(_lu_jvp)

lu_p.def_batch(vectorized_batcher(lu_p))


def lu(x):
    """LU decomposition with partial pivoting: ``(lu, pivots, permutation)``.

    ``lu`` packs unit-lower ``L`` (below the diagonal) and ``U``; ``pivots[i]`` is the row
    swapped with row ``i`` (0-based); ``x[permutation] == L @ U``.

    Example:
        >>> lu, piv, perm = lax.linalg.lu(jnp.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> lu
        Array([[3.        , 4.        ],
               [0.33333334, 0.666666...]], dtype=float32)
        >>> piv, perm
        (Array([1, 1], dtype=int32), Array([1, 0], dtype=int32))
    """
    return lu_p.bind(x)


# --- qr ---------------------------------------------------------------------------------------
qr_p = Primitive("qr", multiple_results=True)


@qr_p.def_abstract_eval
def _qr_abstract(a, full_matrices):
    _check_matrix("qr", a)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    qc = m if full_matrices else k
    return [ShapedArray(batch + (m, qc), a.dtype), ShapedArray(batch + (qc, n), a.dtype)]


def _qr_lowering(ctx, a, full_matrices):
    family = _kernel_family(ctx, "qr")
    aval = ctx.avals_in[0].strip_weak()
    q_aval, r_aval = ctx.avals_out
    batch = aval.shape[:-2]
    m, n = aval.shape[-2:]
    k = min(m, n)
    tau_aval = ShapedArray(batch + (k,), aval.dtype)
    qr, tau = _ffi_call(_kernel(family, "qr", "geqrf", aval.dtype), [a], [aval],
                        [aval, tau_aval], {}, [True], [True, False])
    # R: the upper triangle of the first q-columns rows.
    rows = r_aval.shape[-2]
    r = qr
    r_src = aval
    if rows != m:
        r = _slice(qr, aval, [0] * aval.ndim, batch + (rows, n))
        r_src = r_aval
    r = _keep_triangle(r, r_src, lower=False)
    # Q from the Householder reflectors: orgqr needs an (m, qcols) input with qcols >= k.
    qcols = q_aval.shape[-1]
    if qcols < n:
        h = _slice(qr, aval, [0] * aval.ndim, batch + (m, qcols))
    elif qcols > n:
        h = _pad_cols(qr, aval, qcols)
    else:
        h = qr
    if k == 0:
        eye = _hlo.compare(_iota(q_aval.shape, aval.ndim - 2), _iota(q_aval.shape, aval.ndim - 1),
                           "EQ", np.int32)
        q = _hlo.convert(eye, ShapedArray(q_aval.shape, dtypes.bool_), q_aval.dtype)
        return [q, r]
    # cuSOLVER's orgqr target also takes complex matrices (ungqr).
    routine = "ungqr" if family == LAPACK and dtypes.is_complex(aval.dtype) else "orgqr"
    (q,) = _ffi_call(_kernel(family, "qr", routine, aval.dtype), [h, tau], [q_aval, tau_aval],
                     [q_aval], {}, [True, False], [True])
    return [q, r]


qr_p.def_lowering(_qr_lowering)


def _qr_jvp(primals, tangents, full_matrices):
    (a,), (da,) = primals, tangents
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    if ad_util.is_zero(da):
        return [q, r], [_zero_out(aval_of(q)), _zero_out(aval_of(r))]
    aval = aval_of(a)
    m, n = aval.shape[-2:]
    if m < n:
        # a = [a1 a2] with a1 square: q r1 = a1 is a square QR, and r2 = q^H a2 follows.
        dq, dr1 = _thin_qr_jvp(q, _slice_mat(r, 0, m, 0, m), _slice_mat(da, 0, m, 0, m))
        dr2 = lax.add(_mm(_H(dq), _slice_mat(a, 0, m, m, n)),
                      _mm(_H(q), _slice_mat(da, 0, m, m, n)))
        return [q, r], [dq, lax.concatenate([dr1, dr2], aval.ndim - 1)]
    if not full_matrices or m == n:
        dq, dr = _thin_qr_jvp(q, r, da)
        return [q, r], [dq, dr]
    # Tall with the complete q = [q1 q2] (m x n and m x (m - n)): q1 and the top of r as in
    # the thin case; q2 is fixed by the Householder construction, whose derivative
    # (Roberts & Roberts, arXiv:2409.13374, eqs. 32-33) uses Z = q1[n:] (q1[:n] - I)^-1.
    nb = aval.ndim - 2
    q1 = _slice_mat(q, 0, m, 0, n)
    dq1, dr = _thin_qr_jvp(q1, _slice_mat(r, 0, n, 0, n), da)
    q_top, q_bot = _slice_mat(q1, 0, n, 0, n), _slice_mat(q1, n, m, 0, n)
    dq_top, dq_bot = _slice_mat(dq1, 0, n, 0, n), _slice_mat(dq1, n, m, 0, n)
    shifted = lax.sub(q_top, _eye_like(aval_of(q_top).shape, aval.dtype))
    z_h = solve(_H(shifted), _H(q_bot))                      # Z^H, n x (m - n)
    z = _H(z_h)
    q2 = _slice_mat(q, 0, m, n, m)
    dq2 = lax.sub(_mm(dq1, z_h),
                  _mm(lax.add(q1, _mm(q2, z)), _H(lax.sub(dq_bot, _mm(z, dq_top)))))
    zeros = lax.full(aval.shape[:nb] + (m - n, n), 0, aval.dtype)
    return [q, r], [lax.concatenate([dq1, dq2], nb + 1), lax.concatenate([dr, zeros], nb)]


def _thin_qr_jvp(q, r, da):
    """Tangents of ``q`` (m x n) and ``r`` (n x n, invertible) of a thin QR, m >= n."""
    dt = aval_of(q).dtype
    dx_rinv = triangular_solve(r, da, left_side=False, lower=False)
    qt_dx_rinv = _mm(_H(q), dx_rinv)
    low = _tri(qt_dx_rinv, lower=True, k=-1)
    do = lax.sub(low, _H(low))
    if dtypes.is_complex(dt):
        # LAPACK's r has a real diagonal: the imaginary part of diag(q^H dx r^-1) is q's
        im = lax.imag(_diag(qt_dx_rinv))
        zero = lax.full(aval_of(im).shape, 0, aval_of(im).dtype)
        do = lax.add(do, _from_diag(lax.complex(zero, im)))
    dq = lax.add(_mm(q, do), lax.sub(dx_rinv, _mm(q, qt_dx_rinv)))
    dr = _mm(lax.sub(qt_dx_rinv, do), r)
    return dq, dr


qr_p.def_jvp(_qr_jvp)

qr_p.def_batch(vectorized_batcher(qr_p))


def qr(x, full_matrices=True):
    """QR decomposition ``x = q @ r`` by Householder reflections: returns ``(q, r)``.

    Example:
        >>> a = jnp.array([[1.0, 2.0], [3.0, 4.0]])
        >>> q, r = lax.linalg.qr(a, full_matrices=False)
        >>> r
        Array([[-3.162277..., -4.427188...],
               [ 0.       , -0.632455...]], dtype=float32)
        >>> bool(jnp.allclose(q @ r, a)), bool(jnp.allclose(q.T @ q, jnp.eye(2), atol=1e-6))
        (True, True)
    """
    return qr_p.bind(x, full_matrices=bool(full_matrices))


# --- eigh -------------------------------------------------------------------------------------
eigh_p = Primitive("eigh", multiple_results=True)


@eigh_p.def_abstract_eval
def _eigh_abstract(a, lower):
    _check_matrix("eigh", a, square=True)
    return [a.strip_weak(), ShapedArray(a.shape[:-1], dtypes.real_dtype(a.dtype))]


def _eigh_lowering(ctx, a, lower):
    family = _kernel_family(ctx, "eigh")
    v_aval, w_aval = ctx.avals_out
    info_aval = _int_aval(v_aval.shape[:-2])
    if family == LAPACK:
        routine = "heevd" if dtypes.is_complex(v_aval.dtype) else "syevd"
        attrs = {"uplo": "L" if lower else "U", "mode": "V"}
    else:
        # cuSOLVER's syevd target handles complex matrices too; algorithm 0 lets it pick
        # Jacobi (syevj) for n <= 32 and divide and conquer above.
        routine = "syevd"
        attrs = {"lower": bool(lower), "algorithm": np.uint8(0)}
    v, w, info = _ffi_call(_kernel(family, "eigh", routine, v_aval.dtype), [a], [v_aval],
                           [v_aval, w_aval, info_aval], attrs, [True], [True, False, False])
    return [_nan_if_failed(v, v_aval, info, info_aval), _nan_if_failed(w, w_aval, info, info_aval)]


eigh_p.def_lowering(_eigh_lowering)


def _safe_reciprocal_offdiag(diffs, eye):
    """1/diffs off the diagonal, 0 on it (diffs has zeros on its diagonal)."""
    return lax.sub(lax.div(lax.full(aval_of(eye).shape, 1, aval_of(eye).dtype),
                           lax.add(diffs, eye)), eye)


def _eigh_jvp(primals, tangents, lower):
    (a,), (da,) = primals, tangents
    v, w = eigh_p.bind(a, lower=lower)
    if ad_util.is_zero(da):
        return [v, w], [_zero_out(aval_of(v)), _zero_out(aval_of(w))]
    vaval = aval_of(v)
    shape, dt = vaval.shape, vaval.dtype
    wr = _to(w, dt)
    diffs = lax.sub(_row(wr, shape), _col(wr, shape))        # w_j - w_i
    eye = _eye_like(shape, dt)
    F = _safe_reciprocal_offdiag(diffs, eye)
    vdv = _mm(_H(v), _mm(da, v))
    dv = _mm(v, lax.mul(F, vdv))
    dw = _real(_diag(vdv))
    return [v, w], [dv, dw]


eigh_p.def_jvp(_eigh_jvp)

eigh_p.def_batch(vectorized_batcher(eigh_p))


def eigh(x, lower=True, symmetrize_input=True):
    """Eigendecomposition of a Hermitian matrix: ``(v, w)`` with ascending eigenvalues ``w``
    and eigenvectors in the columns of ``v`` (``x @ v == v * w``).

    Example:
        >>> v, w = lax.linalg.eigh(jnp.array([[2.0, 1.0], [1.0, 2.0]]))
        >>> w
        Array([1., 3.], dtype=float32)
        >>> v
        Array([[-0.707106...,  0.707106...],
               [ 0.707106...,  0.707106...]], dtype=float32)
    """
    _check_matrix("eigh", aval_of(x), square=True)
    if symmetrize_input:
        x = symmetrize(x)
    return eigh_p.bind(x, lower=bool(lower))


# --- svd --------------------------------------------------------------------------------------
svd_p = Primitive("svd", multiple_results=True)


@svd_p.def_abstract_eval
def _svd_abstract(a, full_matrices, compute_uv):
    _check_matrix("svd", a)
    batch = a.shape[:-2]
    m, n = a.shape[-2:]
    k = min(m, n)
    s = ShapedArray(batch + (k,), dtypes.real_dtype(a.dtype))
    if not compute_uv:
        return [s]
    uc, vr = (m, n) if full_matrices else (k, k)
    return [s, ShapedArray(batch + (m, uc), a.dtype), ShapedArray(batch + (vr, n), a.dtype)]


def _svd_lowering(ctx, a, full_matrices, compute_uv):
    family = _kernel_family(ctx, "svd")
    aval = ctx.avals_in[0].strip_weak()
    batch = aval.shape[:-2]
    m, n = aval.shape[-2:]
    outs = ctx.avals_out
    s_aval = outs[0]
    info_aval = _int_aval(batch)
    if compute_uv:
        u_aval, vt_aval = outs[1], outs[2]
    else:   # placeholders: neither kernel writes u or vt then
        u_aval = vt_aval = ShapedArray(batch + (1, 1), aval.dtype)
    if m == 0 or n == 0:
        return _svd_empty(aval, outs, compute_uv)
    swap = False
    if family == LAPACK:
        routine = "gesdd"
        attrs = {"mode": ("A" if full_matrices else "S") if compute_uv else "N"}
    else:
        # cuSOLVER's gesvd needs m >= n. A wide matrix goes in row-major, which the kernel reads
        # as the tall a^T = conj(v) s u^T; its "u" and "vt" results, read back row-major, are
        # then vt and u.
        routine = "gesvd"
        swap = m < n
        attrs = {"full_matrices": bool(full_matrices), "compute_uv": bool(compute_uv),
                 "transposed": swap}
    col = not swap
    _, s, u, vt, info = _ffi_call(
        _kernel(family, "svd", routine, aval.dtype), [a], [aval],
        [aval, s_aval] + ([vt_aval, u_aval] if swap else [u_aval, vt_aval]) + [info_aval], attrs,
        [col], [col, False, col, col, False])
    if swap:
        u, vt = vt, u
    s = _nan_if_failed(s, s_aval, info, info_aval)
    if not compute_uv:
        return [s]
    return [s, _nan_if_failed(u, u_aval, info, info_aval),
            _nan_if_failed(vt, vt_aval, info, info_aval)]


def _svd_empty(aval, outs, compute_uv):
    res = [_hlo.zeros_like_aval(outs[0])]
    if compute_uv:
        for o in outs[1:]:
            nd = o.ndim
            eye = _hlo.compare(_iota(o.shape, nd - 2), _iota(o.shape, nd - 1), "EQ", np.int32)
            res.append(_hlo.convert(eye, ShapedArray(o.shape, dtypes.bool_), o.dtype))
    return res


svd_p.def_lowering(_svd_lowering)


def _svd_jvp(primals, tangents, full_matrices, compute_uv):
    (a,), (da,) = primals, tangents
    outs = svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv)
    if ad_util.is_zero(da):
        return outs, [_zero_out(aval_of(o)) for o in outs]
    aval = aval_of(a)
    m, n = aval.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise TypeError(f"lax.linalg.svd: differentiating u and vt needs "
                        f"full_matrices=False for non-square {aval.str_short()}")
    s, u, vt = svd_p.bind(a, full_matrices=False, compute_uv=True)
    v = _H(vt)
    dS = _mm(_H(u), _mm(da, v))
    ds = _real(_diag(dS))
    if not compute_uv:
        return outs, [ds]
    k = min(m, n)
    dt = aval.dtype
    kshape = aval.shape[:-2] + (k, k)
    sr = aval_of(s).dtype
    s_row = _row(s, kshape[:-2] + (k, k))
    s_col = _col(s, kshape[:-2] + (k, k))
    eye_r = _eye_like(kshape, sr)
    F = _safe_reciprocal_offdiag(lax.mul(lax.add(s_row, s_col), lax.sub(s_row, s_col)), eye_r)
    F = _to(F, dt)
    dSS = lax.mul(_to(s_row, dt), dS)          # dS scaled by s along columns
    SdS = lax.mul(_to(s_col, dt), dS)          # dS scaled by s along rows
    zero_s = _to(lax.eq(s, lax.full(aval_of(s).shape, 0, sr)), sr)
    s_inv = lax.sub(lax.div(lax.full(aval_of(s).shape, 1, sr), lax.add(s, zero_s)), zero_s)
    du_inner = lax.mul(F, lax.add(dSS, _H(dSS)))
    if dtypes.is_complex(dt):
        half = lax.full(kshape, 0.5, dt)
        du_inner = lax.add(du_inner, lax.mul(lax.mul(half, lax.sub(dS, _H(dS))),
                                             _from_diag(s_inv, dt)))
    du = _mm(u, du_inner)
    dv = _mm(v, lax.mul(F, lax.add(SdS, _H(SdS))))
    if m > n:
        dav = _mm(da, v)
        du = lax.add(du, lax.div(lax.sub(dav, _mm(u, _mm(_H(u), dav))),
                                 _to(_row(s, aval_of(dav).shape), dt)))
    if n > m:
        dahu = _mm(_H(da), u)
        dv = lax.add(dv, lax.div(lax.sub(dahu, _mm(v, _mm(vt, dahu))),
                                 _to(_row(s, aval_of(dahu).shape), dt)))
    return [s, u, vt], [ds, du, _H(dv)]


svd_p.def_jvp(_svd_jvp)

svd_p.def_batch(vectorized_batcher(svd_p))


def svd(x, full_matrices=True, compute_uv=True):
    """Singular value decomposition: LAPACK's divide and conquer (``gesdd``) on the CPU,
    cuSOLVER's QR iteration (``gesvd``) on CUDA.

    Returns ``(s, u, vt)`` with descending ``s`` and ``x == u[..., :k] * s @ vt[..., :k, :]``,
    or just ``s`` when ``compute_uv=False``.

    Example:
        >>> a = jnp.array([[1.0, 2.0], [3.0, 4.0]])
        >>> s, u, vt = lax.linalg.svd(a, full_matrices=False)
        >>> s
        Array([5.46498..., 0.36596...], dtype=float32)
        >>> bool(jnp.allclose((u * s) @ vt, a, atol=1e-5))
        True
    """
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    return outs if compute_uv else outs[0]


# --- eig --------------------------------------------------------------------------------------
eig_p = Primitive("eig", multiple_results=True)


@eig_p.def_abstract_eval
def _eig_abstract(a, compute_left_eigenvectors, compute_right_eigenvectors,
                  enable_eigvec_derivs):
    _check_matrix("eig", a, square=True)
    cdt = dtypes.complex128 if a.dtype in (dtypes.float64, dtypes.complex128) else \
        dtypes.complex64
    batch = a.shape[:-2]
    outs = [ShapedArray(a.shape[:-1], cdt)]
    if compute_left_eigenvectors:
        outs.append(ShapedArray(a.shape, cdt))
    if compute_right_eigenvectors:
        outs.append(ShapedArray(a.shape, cdt))
    del batch
    return outs


def _eig_lowering(ctx, a, compute_left_eigenvectors, compute_right_eigenvectors,
                  enable_eigvec_derivs):
    family = _kernel_family(ctx, "eig")
    aval = ctx.avals_in[0].strip_weak()
    w_aval = ctx.avals_out[0]
    cdt = w_aval.dtype
    batch = aval.shape[:-2]
    info_aval = _int_aval(batch)
    vec_aval = ShapedArray(aval.shape, cdt)
    if family == CUSOLVER:
        return _eig_cusolver(ctx, a, aval, w_aval, info_aval, compute_left_eigenvectors,
                             compute_right_eigenvectors)
    attrs = {"compute_left": "V" if compute_left_eigenvectors else "N",
             "compute_right": "V" if compute_right_eigenvectors else "N"}
    target = _kernel(family, "eig", "geev", aval.dtype)
    if dtypes.is_complex(aval.dtype):
        w, vl, vr, info = _ffi_call(target, [a], [aval], [w_aval, vec_aval, vec_aval, info_aval],
                                    attrs, [True], [False, True, True, False])
    else:
        wr_aval = ShapedArray(aval.shape[:-1], aval.dtype)
        wr, wi, vl, vr, info = _ffi_call(
            target, [a], [aval], [wr_aval, wr_aval, vec_aval, vec_aval, info_aval], attrs,
            [True], [False, False, True, True, False])
        w = stablehlo.complex(wr, wi)
    outs = [_nan_if_failed(w, w_aval, info, info_aval)]
    if compute_left_eigenvectors:
        outs.append(_nan_if_failed(vl, vec_aval, info, info_aval))
    if compute_right_eigenvectors:
        outs.append(_nan_if_failed(vr, vec_aval, info, info_aval))
    return outs


def _eig_cusolver(ctx, a, aval, w_aval, info_aval, compute_left, compute_right):
    # cuSOLVER's geev (cusolverDnXgeev) returns the overwritten matrix, complex eigenvalues and
    # eigenvectors of the input's dtype: for a real matrix, LAPACK's packing where a complex
    # conjugate pair (w_j, w_j+1) shares columns j (real part) and j+1 (imaginary part). It
    # computes no left eigenvectors: those come from the right ones (_left_from_right).
    vec_aval = ShapedArray(aval.shape, aval.dtype)
    need_right = bool(compute_right or compute_left)
    _, w, _, vr, info = _ffi_call(
        _kernel(CUSOLVER, "eig", "geev", aval.dtype), [a], [aval],
        [aval, w_aval, vec_aval, vec_aval, info_aval],
        {"left": False, "right": need_right}, [True], [True, False, True, True, False])
    outs = [_nan_if_failed(w, w_aval, info, info_aval)]
    if need_right:
        cvec_aval = ShapedArray(aval.shape, w_aval.dtype)
        if not dtypes.is_complex(aval.dtype):
            (vr,) = _lower_lax(ctx, lambda w_, v_: [_unpack_conjugate_pairs(w_, v_)], [w, vr],
                               [w_aval, vec_aval])
        if compute_left:
            (vl,) = _lower_lax(ctx, lambda v_: [_left_from_right(v_)], [vr], [cvec_aval])
            outs.append(_nan_if_failed(vl, cvec_aval, info, info_aval))
        if compute_right:
            outs.append(_nan_if_failed(vr, cvec_aval, info, info_aval))
    return outs


def _left_from_right(v):
    """Left eigenvectors from the right ones ``v`` (columns): ``inv(v) @ a == w * inv(v)``, so
    the conjugated rows of ``inv(v)`` are left eigenvectors. Each is scaled to unit 2-norm with
    its largest component real and positive (LAPACK's geev makes it real)."""
    aval = aval_of(v)
    col_axis = aval.ndim - 2
    vl = _H(solve(v, _eye_like(aval.shape, aval.dtype)))
    mag = lax.abs(vl)
    norms = lax.sqrt(lax.reduce_sum(lax.mul(mag, mag), (col_axis,)))
    rows = lax.broadcasted_iota(np.int32, aval.shape, col_axis)
    biggest = lax.expand_dims(lax.argmax(mag, col_axis, np.int32), (col_axis,))
    pick = lax.eq(rows, lax.broadcast_in_dim(biggest, aval.shape, tuple(range(aval.ndim))))
    big = lax.reduce_sum(lax.select(pick, vl, lax.full(aval.shape, 0, aval.dtype)), (col_axis,))
    phase = lax.div(big, _to(lax.abs(big), aval.dtype))
    scale = lax.mul(_to(norms, aval.dtype), phase)
    return lax.div(vl, lax.broadcast_in_dim(scale, aval.shape,
                                            tuple(d for d in range(aval.ndim) if d != col_axis)))


def _lower_lax(ctx, fn, args, avals):
    """Lower ``fn`` (funcgrad.lax code returning a list) on MLIR values ``args`` of ``avals``."""
    closed, _ = trace_to_jaxpr(fn, list(avals))
    consts = [_hlo.constant(np.asarray(c), aval_of(c).dtype) for c in closed.consts]
    return ctx.lower_jaxpr(closed.jaxpr, consts, list(args))


def _unpack_conjugate_pairs(w, v):
    """Complex eigenvectors from LAPACK's real packing: for a pair w_j, w_j+1 = conj(w_j),
    v_j = v[:, j] + i v[:, j+1] and v_j+1 = v[:, j] - i v[:, j+1]; real w_j keep v[:, j]."""
    shape = aval_of(v).shape
    nd = len(shape)
    wi = lax.imag(w)
    paired = lax.ne(wi, lax.full(aval_of(wi).shape, 0, aval_of(wi).dtype))
    count = lax.cumsum(lax.convert_element_type(paired, np.int32), axis=nd - 2)
    first = lax.bitwise_and(paired, lax.eq(lax.rem(count, lax.full(aval_of(count).shape, 2,
                                                                    np.int32)),
                                           lax.full(aval_of(count).shape, 1, np.int32)))
    second = lax.bitwise_and(paired, lax.bitwise_not(first))
    first, second = _row(first, shape), _row(second, shape)
    zero = lax.full((), 0, aval_of(v).dtype)
    cols = [(0, 0, 0)] * (nd - 1)
    next_col = lax.pad(v, zero, cols + [(-1, 1, 0)])       # v[..., j + 1]
    prev_col = lax.pad(v, zero, cols + [(1, -1, 0)])       # v[..., j - 1]
    re = lax.select(second, prev_col, v)
    im = lax.select(first, next_col,
                    lax.select(second, lax.neg(v), lax.full(shape, 0, aval_of(v).dtype)))
    return lax.complex(re, im)


eig_p.def_lowering(_eig_lowering)


def _eig_jvp(primals, tangents, compute_left_eigenvectors, compute_right_eigenvectors,
             enable_eigvec_derivs):
    (a,), (da,) = primals, tangents
    params = dict(compute_left_eigenvectors=compute_left_eigenvectors,
                  compute_right_eigenvectors=compute_right_eigenvectors,
                  enable_eigvec_derivs=enable_eigvec_derivs)
    vectors = compute_left_eigenvectors or compute_right_eigenvectors
    if vectors and not enable_eigvec_derivs:
        raise NotImplementedError(
            "lax.linalg.eig: the derivative of eigenvectors of a non-symmetric matrix holds "
            "only for distinct eigenvalues, which cannot be checked while tracing; as JAX, "
            "pass enable_eigvec_derivs=True to lax.linalg.eig to opt in (or differentiate "
            "eigenvalues only: compute_left_eigenvectors=False, "
            "compute_right_eigenvectors=False, or numpy.linalg.eigvals)")
    outs = eig_p.bind(a, **params)
    if ad_util.is_zero(da):
        return outs, [_zero_out(aval_of(o)) for o in outs]
    if compute_right_eigenvectors:
        w, vr = outs[0], outs[-1]
    else:
        w, vr = eig_p.bind(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True,
                           enable_eigvec_derivs=enable_eigvec_derivs)
    da_c = _to(da, aval_of(w).dtype)
    dw, dvr = _eig_vectors_jvp(w, vr, da_c)
    tangents_out = [dw]
    if compute_left_eigenvectors:
        tangents_out.append(_eig_vectors_jvp(lax.conj(w), outs[1], _H(da_c))[1])
    if compute_right_eigenvectors:
        tangents_out.append(dvr)
    return outs, tangents_out


def _eig_vectors_jvp(w, v, da):
    """Tangents of the eigenvalues ``w`` and unit eigenvectors ``v`` (columns) of ``a`` along
    ``da`` (first-order perturbation theory, distinct eigenvalues). ``dv_j = u_j + c_j v_j``
    with ``c_j`` free; LAPACK's normalisation (unit 2-norm, largest-magnitude component real)
    fixes it: ``c_j = -Re(v_j^H u_j) - i Im(u_kj) / v_kj`` with ``k = argmax_i |v_ij|``."""
    shape = aval_of(v).shape
    dt = aval_of(v).dtype
    col_axis = len(shape) - 2
    p = solve(v, _mm(da, v))                      # v^-1 da v
    dw = _diag(p)
    eye = _eye_like(shape, dt)
    F = _safe_reciprocal_offdiag(lax.sub(_row(w, shape), _col(w, shape)), eye)
    u = _mm(v, lax.mul(F, p))
    biggest = lax.argmax(lax.abs(v), col_axis, np.int32)
    rows = lax.broadcasted_iota(np.int32, shape, col_axis)
    pick = _to(lax.eq(rows, lax.broadcast_in_dim(
        biggest, shape, tuple(d for d in range(len(shape)) if d != col_axis))), dt)
    re = lax.neg(lax.real(lax.reduce_sum(lax.mul(lax.conj(v), u), (col_axis,))))
    im = lax.neg(lax.div(lax.imag(lax.reduce_sum(lax.mul(pick, u), (col_axis,))),
                         lax.real(lax.reduce_sum(lax.mul(pick, v), (col_axis,)))))
    return dw, lax.add(u, lax.mul(v, _row(lax.complex(re, im), shape)))


eig_p.def_jvp(_eig_jvp)

eig_p.def_batch(vectorized_batcher(eig_p))


def eig(x, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        enable_eigvec_derivs=False):
    """Eigendecomposition of a general square matrix: ``[w, vl?, vr?]``, complex.

    Right eigenvectors satisfy ``x @ vr == vr * w``; left ones ``vl^H @ x == w[:, None] * vl^H``;
    each has unit 2-norm. On CUDA, cuSOLVER's ``geev`` computes right eigenvectors only, and
    the left ones come from ``inv(vr)`` (unit norm, largest component real and positive): skip
    them with ``compute_left_eigenvectors=False`` when only ``vr`` is needed.

    Eigenvalues are differentiable. As in JAX, differentiating eigenvectors raises unless
    ``enable_eigvec_derivs=True``: their derivative holds only for distinct eigenvalues (not
    checked) and follows LAPACK's normalisation (unit norm, largest component real).

    Example:
        >>> w, vl, vr = lax.linalg.eig(jnp.array([[0.0, -1.0], [1.0, 0.0]]))   # a rotation
        >>> w
        Array([0.+1.j, 0.-1.j], dtype=complex64)
    """
    return eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                      compute_right_eigenvectors=bool(compute_right_eigenvectors),
                      enable_eigvec_derivs=bool(enable_eigvec_derivs))


# --- schur -----------------------------------------------------------------------------------
schur_p = Primitive("schur", multiple_results=True)


@schur_p.def_abstract_eval
def _schur_abstract(a):
    _check_matrix("schur", a, square=True)
    return [ShapedArray(a.shape, a.dtype), ShapedArray(a.shape, a.dtype)]


def _schur_lowering(ctx, a):
    if _kernel_family(ctx, "schur") != LAPACK:
        raise errors.MissingRuleError(
            "lax.linalg.schur: runs on the CPU's LAPACK kernels only (cuSOLVER has no Schur "
            "decomposition); compute it on the CPU with funcgrad.device_put(a, "
            "funcgrad.devices('cpu')[0])")
    aval = ctx.avals_in[0].strip_weak()
    batch = aval.shape[:-2]
    info_aval = _int_aval(batch)
    w_aval = ShapedArray(aval.shape[:-1], aval.dtype)
    target = _kernel(LAPACK, "schur", "gees", aval.dtype)
    if dtypes.is_complex(aval.dtype):
        outs = [aval, aval, w_aval, info_aval, info_aval]
        layouts = [True, True, False, False, False]
    else:
        outs = [aval, aval, w_aval, w_aval, info_aval, info_aval]
        layouts = [True, True, False, False, False, False]
    res = _ffi_call(target, [a], [aval], outs, {"mode": "V", "sort": "N"}, [True], layouts)
    t, z, info = res[0], res[1], res[-1]
    return [_nan_if_failed(t, aval, info, info_aval), _nan_if_failed(z, aval, info, info_aval)]


schur_p.def_lowering(_schur_lowering)


def _schur_jvp(primals, tangents):
    raise TypeError("lax.linalg.schur: the Schur decomposition is not differentiable (it is "
                    "not unique: z's columns and t's blocks can change together); "
                    "differentiate through eig or eigh instead")


schur_p.def_jvp(_schur_jvp)


schur_p.def_batch(vectorized_batcher(schur_p))


def schur(x):
    """Schur decomposition ``x = z @ t @ z^H`` with unitary ``z``: ``(t, z)``. For a real ``x``,
    ``t`` is the real Schur form (quasi upper triangular: 2x2 blocks on the diagonal for
    complex conjugate eigenvalue pairs); for a complex ``x`` it is upper triangular. CPU only
    (LAPACK's ``gees``); not differentiable (the decomposition is not unique).

    Example:
        >>> a = jnp.array([[1.0, 2.0], [3.0, 4.0]])
        >>> t, z = lax.linalg.schur(a)
        >>> bool(jnp.allclose(z @ t @ z.T, a, atol=1e-5)), bool(abs(t[1, 0]) < 1e-6)
        (True, True)
    """
    _check_matrix("schur", aval_of(x), square=True)
    return schur_p.bind(x)


# --- pivots -> permutation (a lax-level function: works under every transformation) --------
def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation produced by applying LU row swaps ``i <-> pivots[..., i]`` in order to
    ``arange(permutation_size)`` (0-based pivots, as returned by ``lu``).

    Example:
        >>> lu, piv, perm = lax.linalg.lu(jnp.array([[1.0, 2.0], [3.0, 4.0]]))
        >>> piv, lax.linalg.lu_pivots_to_permutation(piv, 2)   # the second is perm
        (Array([1, 1], dtype=int32), Array([1, 0], dtype=int32))
    """
    if not isinstance(pivots, Value):
        pivots = np.asarray(pivots)
    pivots = lax.convert_element_type(pivots, np.int32)
    pa = aval_of(pivots)
    if pa.ndim < 1:
        raise TypeError(f"lax.linalg.lu_pivots_to_permutation: pivots must have at least one "
                        f"dimension, got {pa.str_short()}")
    m = int(permutation_size)
    k = pa.shape[-1]
    if k > m:
        raise ValueError(f"lax.linalg.lu_pivots_to_permutation: {k} pivots exceed "
                         f"permutation_size {m}")
    shape = pa.shape[:-1] + (m,)
    last = len(shape) - 1
    cols = lax.broadcasted_iota(np.int32, shape, last)
    spread = tuple(range(len(shape)))

    def column(x, i):      # x[..., i] broadcast over the last axis
        return lax.broadcast_in_dim(lax.dynamic_index_in_dim(x, i, last), shape, spread)

    def body(i, perm):
        j, p_i = column(pivots, i), column(perm, i)
        is_j = lax.eq(cols, j)
        p_j = lax.broadcast_in_dim(
            lax.reduce_sum(lax.select(is_j, perm, lax.full(shape, 0, np.int32)), (last,)),
            shape, spread[:-1])
        is_i = lax.eq(cols, lax.full(shape, i, np.int32))
        return lax.select(is_i, p_j, lax.select(is_j, p_i, perm))

    return lax.fori_loop(0, k, body, cols)
