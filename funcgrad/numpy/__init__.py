"""funcgrad.numpy: NumPy's API on funcgrad arrays (as ``jax.numpy``).

Functions broadcast and promote dtypes (JAX's lattice: Python scalars are weakly typed, 64-bit
types only with x64 enabled), then call ``funcgrad.lax``. They work the same eagerly and under
every transformation.

Example:
    >>> import funcgrad.numpy as jnp
    >>> jnp.sum(jnp.arange(6.0).reshape(2, 3) ** 2, axis=1)
    Array([ 5., 50.], dtype=float32)
"""
import numpy as _np

from funcgrad.core import dtypes as _dtypes
from funcgrad.numpy import methods as _methods
from funcgrad.numpy.creation import (
    arange, array, asarray, diag, diagonal, empty, empty_like, eye, full, full_like, geomspace,
    identity, linspace, logspace, meshgrid, ones, ones_like, tri, tril, triu, zeros, zeros_like)
from funcgrad.numpy.indexing import take, take_along_axis
from funcgrad.numpy.products import (dot, einsum, inner, matmul, outer, tensordot, vdot,
                                     vecdot)
from funcgrad.numpy.reductions import (
    all, amax, amin, any, argmax, argmin, average, count_nonzero, cumprod, cumsum,
    max, mean, min, prod, ptp, std, sum, var)
from funcgrad.numpy.searching import argwhere, flatnonzero, nonzero
from funcgrad.numpy.sorting import (
    argpartition, argsort, lexsort, median, msort, nanmedian, nanpercentile, nanquantile,
    partition, percentile, quantile, searchsorted, sort, sort_complex, unique)
from funcgrad.numpy.shape_ops import (
    array_split, atleast_1d, atleast_2d, atleast_3d, broadcast_arrays, broadcast_to,
    column_stack, concat, concatenate, dstack, expand_dims, flip, fliplr, flipud, hsplit, hstack,
    matrix_transpose, moveaxis, ndim, pad, permute_dims, ravel, repeat, reshape, roll, rollaxis,
    rot90, row_stack, shape, size, split, squeeze, stack, swapaxes, tile, transpose, vsplit,
    vstack)
from funcgrad.numpy.shape_ops import broadcast_shapes_ as broadcast_shapes
from funcgrad.numpy.ufuncs import (
    abs, absolute, add, angle, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh,
    around, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, cbrt, ceil, clip, conj,
    conjugate, copysign, cos, cosh, deg2rad, degrees, divide, divmod, equal, exp, exp2, expm1,
    fix, float_power, floor, floor_divide, fmax, fmin, fmod, gcd, greater, greater_equal,
    heaviside, hypot, imag, invert, isfinite, isinf, isnan, isneginf, isposinf, lcm, left_shift,
    less, less_equal, log, log1p, log2, log10, logaddexp, logical_and, logical_not, logical_or,
    logical_xor, maximum, minimum, mod, multiply, nan_to_num, negative, nextafter, not_equal,
    positive, pow, power, rad2deg, radians, real, reciprocal, remainder, right_shift, rint,
    round, sign, signbit, sin, sinc, sinh, sqrt, square, subtract, tan, tanh, true_divide,
    trunc, where)
# numpy breadth (array API names, extra math, nan-functions, index tricks, sets, statistics,
# polynomials)
from funcgrad.numpy.array_api import (  # noqa: E402
    __array_api_version__, __array_namespace_info__, acos, acosh, asin, asinh, astype, atan,
    atan2, atanh, bitwise_invert, bitwise_left_shift, bitwise_right_shift, can_cast,
    cumulative_prod, cumulative_sum, finfo, from_dlpack, iinfo, isdtype, unique_all,
    unique_counts, unique_inverse, unique_values, unstack)
from funcgrad.numpy.array_api import bool_dtype as bool  # noqa: E402,A001
from funcgrad.numpy.math_extra import (  # noqa: E402
    allclose, array_equal, array_equiv, bitwise_count, convolve, correlate, cross, diff,
    ediff1d, fabs, frexp, gradient, i0, interp, iscomplex, iscomplexobj, isclose, isreal,
    isrealobj, kron, ldexp, logaddexp2, modf, real_if_close, spacing, trace, trapezoid, unwrap)
from funcgrad.numpy.nan_functions import (  # noqa: E402
    nanargmax, nanargmin, nancumprod, nancumsum, nanmax, nanmean, nanmin, nanprod, nanstd,
    nansum, nanvar)
from funcgrad.numpy.index_tricks import (  # noqa: E402
    append, apply_along_axis, apply_over_axes, choose, compress, delete, diag_indices,
    diag_indices_from, diagflat, extract, fill_diagonal, fromfunction, indices, insert, ix_,
    mask_indices, mgrid, ogrid, piecewise, place, put, put_along_axis, putmask,
    ravel_multi_index, resize, select, tril_indices, tril_indices_from, trim_zeros,
    triu_indices, triu_indices_from, unravel_index, vander, vectorize)
from funcgrad.numpy.set_ops import (  # noqa: E402
    in1d, intersect1d, isin, setdiff1d, setxor1d, union1d)
from funcgrad.numpy.statistics import (  # noqa: E402
    bincount, corrcoef, cov, digitize, histogram, histogram2d, histogram_bin_edges,
    histogramdd)
from funcgrad.numpy.polynomial import (  # noqa: E402
    poly, polyadd, polyder, polydiv, polyfit, polyint, polymul, polysub, polyval, roots)
from funcgrad.numpy.misc import (  # noqa: E402
    ascontiguousarray, block, copy, dsplit, einsum_path, iterable, matvec, packbits, unpackbits,
    vecmat)

# --- dtypes and constants ------------------------------------------------------------------
from funcgrad.numpy.scalar_types import scalar_type as _scalar_type  # noqa: E402

bool_ = _scalar_type(_dtypes.bool_)
int8, int16, int32, int64 = (_scalar_type(t) for t in (_dtypes.int8, _dtypes.int16,
                                                       _dtypes.int32, _dtypes.int64))
uint8, uint16, uint32, uint64 = (_scalar_type(t) for t in (_dtypes.uint8, _dtypes.uint16,
                                                           _dtypes.uint32, _dtypes.uint64))
bfloat16, float16, float32, float64 = (_scalar_type(t) for t in (
    _dtypes.bfloat16, _dtypes.float16, _dtypes.float32, _dtypes.float64))
complex64, complex128 = _scalar_type(_dtypes.complex64), _scalar_type(_dtypes.complex128)
float0 = _dtypes.float0
dtype = _np.dtype
promote_types = _dtypes.promote_types
result_type = _dtypes.result_type
pi, e, inf, nan, euler_gamma = _np.pi, _np.e, _np.inf, _np.nan, _np.euler_gamma
newaxis = None
integer, floating, inexact, number, signedinteger, unsignedinteger, complexfloating = (
    _np.integer, _np.floating, _np.inexact, _np.number, _np.signedinteger, _np.unsignedinteger,
    _np.complexfloating)


def issubdtype(arg1, arg2):
    """``numpy.issubdtype`` that knows bfloat16 is a float. Example: ``jnp.issubdtype(x.dtype, jnp.floating)``."""
    if _np.dtype(arg1) == _dtypes.bfloat16:
        return arg2 in (_np.floating, _np.inexact, _np.number, _np.generic) or \
            _np.dtype(arg2) == _dtypes.bfloat16 if not isinstance(arg2, type) else \
            arg2 in (_np.floating, _np.inexact, _np.number, _np.generic)
    return _np.issubdtype(arg1, arg2)


def isscalar(element):
    """True for Python/NumPy scalars and 0-d arrays."""
    from funcgrad.core.values import is_arraylike, aval_of
    return is_arraylike(element) and aval_of(element).ndim == 0


from funcgrad.lowering.array import Array as ndarray  # noqa: E402  (isinstance checks)
from funcgrad.numpy import fft, linalg  # noqa: E402  (submodules)

_methods.install()
