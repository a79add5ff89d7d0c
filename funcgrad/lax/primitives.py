"""JAX's primitive objects under JAX's names (``lax.add_p``, ``lax.dot_general_p``, ...).

Each is funcgrad's own primitive of that name, defined with all of its rules in its family
module; programs that inspect Jaxprs (``eqn.primitive is lax.add_p``) or bind a primitive
directly read them from here, as from ``jax.lax``.

Example:
    >>> from funcgrad.lax.primitives import add_p
    >>> jx = funcgrad.make_jaxpr(lambda x: x + 1.0)(jnp.ones(2))
    >>> jx.jaxpr.eqns[-1].prim is add_p
    True
    >>> add_p.bind(jnp.ones(2), jnp.ones(2))
    Array([2., 2.], dtype=float32)
"""
from funcgrad.lax.elementwise import (
    abs_p, acos_p, acosh_p, add_p, and_p, asin_p, asinh_p, atan2_p, atan_p, atanh_p,
    bitcast_convert_type_p, cbrt_p, ceil_p, clamp_p, clz_p, complex_p, conj_p,
    convert_element_type_p, cos_p, cosh_p, div_p, eq_p, exp_p, expm1_p, floor_p, ge_p, gt_p,
    imag_p, integer_pow_p, is_finite_p, le_p, log1p_p, log_p, logistic_p, lt_p, max_p, min_p,
    mul_p, ne_p, neg_p, nextafter_p, not_p, or_p, population_count_p, pow_p, real_p, rem_p,
    round_p, rsqrt_p, select_n_p, shift_left_p, shift_right_arithmetic_p,
    shift_right_logical_p, sign_p, sin_p, sinh_p, sqrt_p, sub_p, tan_p, tanh_p, xor_p)
from funcgrad.lax.parallel import (
    all_gather_p, all_to_all_p, axis_index_p, pmax_p, pmin_p, ppermute_p, psum_p, pvary_p)
from funcgrad.lax.reductions import (
    argmax_p, argmin_p, cummax_p, cummin_p, cumprod_p, cumsum_p, reduce_and_p, reduce_max_p,
    reduce_min_p, reduce_or_p, reduce_prod_p, reduce_sum_p, reduce_xor_p)
from funcgrad.lax.special import (
    bessel_i1e_p, cumlogsumexp_p, digamma_p, erf_inv_p, erf_p, erfc_p, igamma_p, igammac_p,
    lgamma_p, polygamma_p, zeta_p)
from funcgrad.lax.shapes import (
    broadcast_in_dim_p, concatenate_p, iota_p, pad_p, reshape_p, rev_p, slice_p, split_p,
    squeeze_p, transpose_p)
from funcgrad.lax.control_flow import (
    cond_p, scan_p, while_p)
from funcgrad.lax.convolution import (
    conv_general_dilated_p)
from funcgrad.lax.dot import (
    dot_general_p)
from funcgrad.lax.indexing import (
    dynamic_slice_p, dynamic_update_slice_p, gather_p, scatter_add_p, scatter_max_p,
    scatter_min_p, scatter_mul_p, scatter_p)
from funcgrad.lax.fft import (
    fft_p)
from funcgrad.lax.windowed import (
    reduce_window_max_p, reduce_window_min_p, reduce_window_sum_p)
from funcgrad.lax.sorting import (
    sort_p, top_k_p)
from funcgrad.lax.autodiff import (
    stop_gradient_p)

__all__ = [
    'abs_p', 'acos_p', 'acosh_p', 'add_p', 'all_gather_p', 'all_to_all_p', 'and_p', 'argmax_p',
    'argmin_p', 'asin_p', 'asinh_p', 'atan2_p', 'atan_p', 'atanh_p', 'axis_index_p',
    'bessel_i1e_p', 'bitcast_convert_type_p', 'broadcast_in_dim_p', 'cbrt_p', 'ceil_p',
    'clamp_p', 'clz_p', 'complex_p', 'concatenate_p', 'cond_p', 'conj_p',
    'conv_general_dilated_p', 'convert_element_type_p', 'cos_p', 'cosh_p', 'cumlogsumexp_p',
    'cummax_p', 'cummin_p', 'cumprod_p', 'cumsum_p', 'digamma_p', 'div_p', 'dot_general_p',
    'dynamic_slice_p', 'dynamic_update_slice_p', 'eq_p', 'erf_inv_p', 'erf_p', 'erfc_p',
    'exp_p', 'expm1_p', 'fft_p', 'floor_p', 'gather_p', 'ge_p', 'gt_p', 'igamma_p',
    'igammac_p', 'imag_p', 'integer_pow_p', 'iota_p', 'is_finite_p', 'le_p', 'lgamma_p',
    'log1p_p', 'log_p', 'logistic_p', 'lt_p', 'max_p', 'min_p', 'mul_p', 'ne_p', 'neg_p',
    'nextafter_p', 'not_p', 'or_p', 'pad_p', 'pmax_p', 'pmin_p', 'polygamma_p',
    'population_count_p', 'pow_p', 'ppermute_p', 'psum_p', 'pvary_p', 'real_p', 'reduce_and_p',
    'reduce_max_p', 'reduce_min_p', 'reduce_or_p', 'reduce_prod_p', 'reduce_sum_p',
    'reduce_window_max_p', 'reduce_window_min_p', 'reduce_window_sum_p', 'reduce_xor_p',
    'rem_p', 'reshape_p', 'rev_p', 'round_p', 'rsqrt_p', 'scan_p', 'scatter_add_p',
    'scatter_max_p', 'scatter_min_p', 'scatter_mul_p', 'scatter_p', 'select_n_p',
    'shift_left_p', 'shift_right_arithmetic_p', 'shift_right_logical_p', 'sign_p', 'sin_p',
    'sinh_p', 'slice_p', 'sort_p', 'split_p', 'sqrt_p', 'squeeze_p', 'stop_gradient_p',
    'sub_p', 'tan_p', 'tanh_p', 'top_k_p', 'transpose_p', 'while_p', 'xor_p', 'zeta_p']
