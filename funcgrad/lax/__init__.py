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
    shift_right_logical, sign, sin, sinh, sqrt, sub, tan, tanh)
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
    psum_scatter, pvary)
from funcgrad.lax.control_flow import (
    associative_scan, cond, fori_loop, map, scan, switch, while_loop)
from funcgrad.lax.sorting import argsort, sort, sort_key_val, top_k
from funcgrad.lax.special import (
    bessel_i1e, cumlogsumexp, digamma, erf, erf_inv, erfc, igamma, igammac, lgamma,
    logaddexp, logsumexp, polygamma, zeta)
from funcgrad.lax.autodiff import stop_gradient
from funcgrad.lax.sharding import with_sharding_constraint  # noqa: E402
from funcgrad.lax import linalg  # noqa: E402  (module, as jax.lax.linalg)
from funcgrad.lax.fft import fft  # noqa: E402

# --- the rest of jax.lax's public names (primitive objects, option types, shape arithmetic,
# operations defined by decomposition, convenience functions and collectives)
from funcgrad.lax.primitives import *  # noqa: E402,F401,F403
from funcgrad.lax.enums import *  # noqa: E402,F401,F403
from funcgrad.lax.shape_rules import *  # noqa: E402,F401,F403
from funcgrad.lax.collectives import *  # noqa: E402,F401,F403
from funcgrad.lax.decomposed import composite  # noqa: E402
from funcgrad.lax.composed_ops import (  # noqa: E402
    approx_max_k, approx_min_k, approx_top_k_p, bessel_i0e, bessel_i0e_p, copy_p, eq_to_p,
    exp2, exp2_p, igamma_grad_a, igamma_grad_a_p, le_to_p, lt_to_p, mulhi, mulhi_p,
    optimization_barrier, optimization_barrier_p, random_gamma_grad, reduce_precision,
    reduce_precision_p, scatter_sub, scatter_sub_p, square, square_p, stack, stack_p, stage,
    stage_p, tile, tile_p, unstack, unstack_p)
from funcgrad.lax.convenience import (  # noqa: E402
    batch_matmul, broadcast_like, collapse, dtype, dynamic_slice_in_dim,
    dynamic_update_index_in_dim, dynamic_update_slice_in_dim, empty, full_like, index_take,
    platform_dependent, scatter_apply, shape_as_value)
from funcgrad.lax.linear_solve import (  # noqa: E402
    custom_linear_solve, custom_root, linear_solve_p)
from funcgrad.lax.generic_reduce import reduce, reduce_p, reduce_window_p  # noqa: E402
from funcgrad.lax.rng import (  # noqa: E402
    rng_bit_generator, rng_bit_generator_p, rng_uniform, rng_uniform_p)
from funcgrad.lax.patches import (  # noqa: E402
    conv_general_dilated_local, conv_general_dilated_patches)
from funcgrad.lax.ragged import ragged_dot, ragged_dot_general, scaled_dot  # noqa: E402
from funcgrad.lax.betainc import betainc, regularized_incomplete_beta_p  # noqa: E402
