"""funcgrad.lax: the primitives and the thin functions that bind them (as ``jax.lax``).

Each family lives in one module with every rule of its primitives.
"""
from funcgrad.lax.elementwise import (
    abs, acos, acosh, add, asin, asinh, atan, atan2, atanh, bitcast_convert_type, bitwise_and,
    bitwise_not,
    bitwise_or, bitwise_xor, cbrt, ceil, clamp, clz, complex, conj, convert_element_type, cos,
    cosh, div, eq, exp, expm1, floor, ge, gt, imag, integer_pow, is_finite, le, log, log1p,
    logistic, lt, max, min, mul, ne, neg, nextafter, population_count, pow, real, reciprocal,
    rem, round, rsqrt, select, select_n, shift_left, shift_right_arithmetic,
    shift_right_logical, sign, sin, sinh, sqrt, square, sub, tan, tanh)
from funcgrad.lax.shapes import (
    broadcast, broadcast_in_dim, broadcast_to_rank, broadcasted_iota, concatenate,
    expand_dims, full, index_in_dim, iota, pad, reshape, rev, slice, slice_in_dim, split, squeeze,
    transpose)
from funcgrad.lax.reductions import (
    argmax, argmin, cummax, cummin, cumprod, cumsum, reduce_and, reduce_max, reduce_min,
    reduce_or, reduce_prod, reduce_sum, reduce_xor)
from funcgrad.lax.dot import dot, dot_general
from funcgrad.lax.precision import Precision
from funcgrad.lax.callbacks import debug_callback, pure_callback
from funcgrad.lax.indexing import (
    GatherDimensionNumbers, ScatterDimensionNumbers, dynamic_index_in_dim, dynamic_slice,
    dynamic_update_slice, gather, scatter, scatter_add, scatter_max, scatter_min, scatter_mul)
from funcgrad.lax.convolution import (
    ConvDimensionNumbers, conv, conv_dimension_numbers, conv_general_dilated, conv_transpose,
    conv_with_general_padding)
from funcgrad.lax.windowed import (
    reduce_window, reduce_window_max, reduce_window_min, reduce_window_sum)
from funcgrad.lax.parallel import (
    all_gather, all_to_all, axis_index, axis_size, pmax, pmean, pmin, ppermute, psum,
    psum_scatter)
from funcgrad.lax.control_flow import (
    associative_scan, cond, fori_loop, map, scan, switch, while_loop)
from funcgrad.lax.sorting import argsort, sort, sort_key_val, top_k
from funcgrad.lax.special import (
    bessel_i0e, bessel_i1e, cumlogsumexp, digamma, erf, erf_inv, erfc, igamma, igammac, lgamma,
    logaddexp, logsumexp, polygamma, zeta)
from funcgrad.lax.autodiff import stop_gradient
from funcgrad.lax.sharding import with_sharding_constraint  # noqa: E402
from funcgrad.lax import linalg  # noqa: E402  (module, as jax.lax.linalg)
from funcgrad.lax.fft import fft  # noqa: E402
