"""Samplers that need rejection loops: the gamma family (``gamma``, ``loggamma``, ``beta``,
``dirichlet``, ``chisquare``, ``t``, ``f``, ``generalized_normal``, ``ball``) and ``poisson``.
They run the same loops on the same key stream as ``jax.random`` (Marsaglia-Tsang per element
for gamma, Knuth's product of uniforms for ``lam < 10`` and Hormann's transformed rejection
above it for Poisson), so they return the same numbers.

Example:
    >>> import funcgrad.random as random
    >>> random.gamma(random.key(0), 2.0, (3,))
    Array([1.5897877, 1.7599413, 1.1290071], dtype=float32)
"""
import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.random.keys import split
from funcgrad.random.samplers import (
    _uniform,
    as_dtype,
    check_key,
    exponential,
    float_dtype,
    int_dtype,
    normal,
    rademacher,
    sample_shape,
    shape_arg,
)


# --- gamma ------------------------------------------------------------------------------------
def _gamma_one(key, alpha, log_space):
    """One Gamma(alpha) sample (Marsaglia-Tsang; ``alpha < 1`` boosted from ``alpha + 1``)."""
    dtype = aval_of(alpha).dtype

    def c(v):
        return lax.full((), v, dtype)

    zero, one = c(0), c(1)
    boost_mask = alpha >= one
    alpha_orig = alpha
    alpha = jnp.where(boost_mask, alpha, alpha + one)
    d = alpha - c(1.0 / 3.0)
    scale = c(1.0 / 3.0) / lax.sqrt(d)

    def accept_not_yet(state):
        _, x2, v, u = state
        squeeze = u >= one - c(0.0331) * (x2 * x2)
        log_test = lax.log(u) >= x2 * c(0.5) + d * ((one - v) + lax.log(v))
        return squeeze & log_test

    def positive_v(state):
        k, _, _ = state
        pair = split(k)
        x = normal(pair[1], (), dtype)
        return pair[0], x, one + x * scale

    def propose(state):
        keys = split(state[0], 3)
        _, x, v = lax.while_loop(lambda s: s[2] <= zero, positive_v, (keys[1], zero, c(-1)))
        u = _uniform(keys[2], (), dtype, 0.0, 1.0)
        return keys[0], x * x, (v * v) * v, u

    pair = split(key)
    _, _, v, _ = lax.while_loop(accept_not_yet, propose, (pair[0], zero, one, c(2)))
    if log_space:
        log_u = lax.neg(exponential(pair[1], (), dtype))
        log_boost = jnp.where(boost_mask | (log_u == zero), zero, log_u * (one / alpha_orig))
        return (lax.log(d) + lax.log(v)) + log_boost
    u = one - _uniform(pair[1], (), dtype, 0.0, 1.0)
    boost = jnp.where(boost_mask, one, lax.pow(u, one / alpha_orig))
    return (d * v) * boost


def _gamma_samples(key, a, log_space):
    from funcgrad.transforms.batching import vmap
    shape = aval_of(a).shape
    n = int(np.prod(shape))
    keys = split(key, n)
    flat = lax.reshape(a, (n,))
    out = vmap(lambda k, al: _gamma_one(k, al, log_space))(keys, flat)
    return lax.reshape(out, shape)


def _gamma_tangent(a, x, log_space):
    # x ~ Gamma(a) with CDF F(a, x): along a fixed quantile F(a, x) = u, so
    # dx/da = -(dF/da) / pdf(x); dF/da comes from forward-mode differentiation of igamma.
    from funcgrad.transforms.ad import jvp
    sample = jnp.exp(x) if log_space else x
    tiny = np.array(dtypes.finfo(aval_of(x).dtype).tiny, aval_of(x).dtype)
    sample = jnp.where(sample > 0, sample, tiny)
    _, dcdf_da = jvp(lambda aa: lax.igamma(aa, sample), (a,), (jnp.ones_like(a),))
    log_pdf = (a - 1.0) * jnp.log(sample) - sample - lax.lgamma(a)
    dx_da = -dcdf_da * jnp.exp(-log_pdf)
    return dx_da / sample if log_space else dx_da


def _make_reparameterized(log_space):
    from funcgrad.core import ad_util
    from funcgrad.transforms.custom_derivatives import custom_jvp

    def identity(a, x):
        return x

    def rule(primals, tangents):
        a, x = primals
        ta, _ = tangents
        if ad_util.is_zero(ta):
            return x, ad_util.Zero(ad_util.tangent_aval(aval_of(x)))
        grad = _gamma_tangent(lax.stop_gradient(a), lax.stop_gradient(x), log_space)
        return x, ad_util.instantiate(ta) * grad

    f = custom_jvp(identity)
    f.defjvp(rule)
    return f


_reparam = {False: _make_reparameterized(False), True: _make_reparameterized(True)}


def _gamma(name, key, a, shape, dtype, log_space):
    check_key(name, key)
    dtype = float_dtype(name, dtype)
    shape = sample_shape(name, shape, a)
    a = jnp.broadcast_to(as_dtype(a, dtype), shape)
    out = _gamma_samples(key, lax.stop_gradient(a), log_space)
    return _reparam[log_space](a, out)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples (Marsaglia-Tsang rejection per element, as JAX). Differentiable
    with respect to ``a`` by implicit reparameterization (``dx/da = -(dF/da) / pdf(x)``).

    Example:
        >>> key = random.key(0)
        >>> random.gamma(key, 2.0, (3,))
        Array([1.5897877, 1.7599413, 1.1290071], dtype=float32)
    """
    return _gamma("gamma", key, a, shape, dtype, False)


def loggamma(key, a, shape=None, dtype=None):
    """``log`` of Gamma(a) samples, computed in log space (accurate for small ``a``).

    Example:
        >>> key = random.key(0)
        >>> random.loggamma(key, 0.5, (3,))
        Array([-0.12265953,  0.02866279, -3.05603   ], dtype=float32)
    """
    return _gamma("loggamma", key, a, shape, dtype, True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples, from two log-gamma samples. Example: ``random.beta(key, 2., 5., (3,))``."""
    check_key("beta", key)
    dtype = float_dtype("beta", dtype)
    shape = sample_shape("beta", shape, a, b)
    k_a, k_b = split(key)
    log_a = loggamma(k_a, jnp.broadcast_to(as_dtype(a, dtype), shape), shape, dtype)
    log_b = loggamma(k_b, jnp.broadcast_to(as_dtype(b, dtype), shape), shape, dtype)
    log_max = jnp.maximum(log_a, log_b)
    ga = jnp.exp(log_a - log_max)
    gb = jnp.exp(log_b - log_max)
    return ga / (ga + gb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples on the simplex (last axis); ``shape`` is the batch shape.

    Example:
        >>> key = random.key(0)
        >>> random.dirichlet(key, jnp.array([1., 2., 3.]), (4,))
        Array([[0.1422856 , 0.4048826 , 0.45283177],
               [0.2847853 , 0.35153106, 0.36368367],
               [0.13108926, 0.10866259, 0.7602482 ],
               [0.10009737, 0.25626004, 0.6436426 ]], dtype=float32)
    """
    check_key("dirichlet", key)
    dtype = float_dtype("dirichlet", dtype)
    alpha = as_dtype(alpha, dtype)
    aa = aval_of(alpha)
    if aa.ndim < 1:
        raise ValueError(f"random.dirichlet: alpha must have at least one axis, got "
                         f"{aa.str_short()}")
    shape = sample_shape("dirichlet", shape, jnp.zeros(aa.shape[:-1]))
    logs = loggamma(key, alpha, shape + aa.shape[-1:], dtype)
    unnormalized = jnp.exp(logs - jnp.max(logs, axis=-1, keepdims=True))
    return unnormalized / jnp.sum(unnormalized, axis=-1, keepdims=True)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square samples with ``df`` degrees of freedom. Example: ``random.chisquare(key, 3.)``."""
    check_key("chisquare", key)
    dtype = float_dtype("chisquare", dtype)
    shape = sample_shape("chisquare", shape, df)
    half = as_dtype(df, dtype) / np.array(2, dtype)
    return jnp.exp(loggamma(key, half, shape, dtype)) * np.array(2, dtype)


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F-distribution samples. Example: ``random.f(key, 3.0, 5.0, (3,))``."""
    check_key("f", key)
    dtype = float_dtype("f", dtype)
    shape = sample_shape("f", shape, dfnum, dfden)
    dfnum, dfden = as_dtype(dfnum, dtype), as_dtype(dfden, dtype)
    k_den, k_num = split(key)
    num = chisquare(k_num, dfnum, shape, dtype) / dfnum
    den = chisquare(k_den, dfden, shape, dtype) / dfden
    return num / den


def t(key, df, shape=None, dtype=None):
    """Student's t samples. Example: ``random.t(key, 5.0, (3,))``."""
    check_key("t", key)
    dtype = float_dtype("t", dtype)
    shape = sample_shape("t", shape, df)
    df = as_dtype(df, dtype)
    k_n, k_g = split(key)
    z = normal(k_n, shape, dtype)
    half = df / np.array(2, dtype)
    g = gamma(k_g, half, shape, dtype)
    return z * jnp.sqrt(half / g)


def generalized_normal(key, p, shape=(), dtype=None):
    """Samples with density proportional to ``exp(-|x|^p)``.

    Example:
        >>> key = random.key(0)
        >>> random.generalized_normal(key, 1.5, (3,))
        Array([ 1.0603918 ,  0.08920828, -1.3751338 ], dtype=float32)
    """
    check_key("generalized_normal", key)
    dtype = float_dtype("generalized_normal", dtype)
    shape = shape_arg("generalized_normal", shape)
    # p is an array (as in JAX, where it is traced): the powers below are float ``pow``s
    inv_p = lax.div(np.array(1, dtype), as_dtype(p, dtype))
    keys = split(key)
    g = gamma(keys[0], inv_p, shape, dtype)
    r = rademacher(keys[1], shape, dtype)
    return r * lax.pow(g, jnp.broadcast_to(inv_p, shape))


def ball(key, d, p=2, shape=(), dtype=None):
    """Points uniform in the ``d``-dimensional unit p-ball. Example: ``random.ball(key, 3)``."""
    check_key("ball", key)
    dtype = float_dtype("ball", dtype)
    shape = shape_arg("ball", shape)
    p = as_dtype(p, dtype)
    k1, k2 = split(key)
    g = generalized_normal(k1, p, shape + (int(d),), dtype)
    e = exponential(k2, shape, dtype)
    total = jnp.sum(lax.pow(jnp.abs(g), jnp.broadcast_to(p, aval_of(g).shape)), axis=-1) + e
    norm = lax.pow(total, jnp.broadcast_to(lax.div(np.array(1, dtype), p), shape))
    return g / norm[..., None]


# --- poisson ----------------------------------------------------------------------------------
def _poisson_knuth(key, lam, shape, dtype, max_iters):
    def body(carry):
        i, k, rng, log_prod = carry
        pair = split(rng)
        k = jnp.where(log_prod > -lam, k + 1, k)
        u = _uniform(pair[1], shape, np.dtype(np.float32), 0.0, 1.0)
        return i + 1, k, pair[0], log_prod + jnp.log(u)

    def cond(carry):
        i, _, _, log_prod = carry
        return jnp.any(log_prod > -lam) & (i < max_iters)

    init = (jnp.asarray(0, dtype), lax.full(shape, 0, dtype), key,
            lax.full(shape, 0, np.float32))
    k = lax.while_loop(cond, body, init)[1]
    return (k - 1).astype(dtype)


def _poisson_rejection(key, lam, shape, dtype, max_iters):
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry):
        i, k_out, accepted, rng = carry
        keys = split(rng, 3)
        u = _uniform(keys[1], shape, np.dtype(np.float32), 0.0, 1.0) - 0.5
        v = _uniform(keys[2], shape, np.dtype(np.float32), 0.0, 1.0)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t_ = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = accept1 | (~reject & (s <= t_))
        return i + 1, jnp.where(accept, k, k_out), accepted | accept, keys[0]

    def cond(carry):
        i, _, accepted, _ = carry
        return jnp.any(~accepted) & (i < max_iters)

    init = (jnp.asarray(0, dtype), lax.full(shape, -1, np.float32),
            lax.full(shape, False, np.bool_), key)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson samples of rate ``lam`` (Knuth's method below 10, transformed rejection
    above, on float32 rates as JAX).

    Example:
        >>> key = random.key(0)
        >>> random.poisson(key, 3.0, (5,))
        Array([0, 0, 4, 4, 1], dtype=int32)
    """
    check_key("poisson", key)
    dtype = int_dtype("poisson", dtype)
    shape = sample_shape("poisson", shape, lam)
    lam = jnp.broadcast_to(jnp.asarray(lam), shape).astype(np.float32)
    lam = lax.stop_gradient(lam)
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = jnp.where(use_knuth, lam, np.float32(0))
    lam_rejection = jnp.where(use_knuth, np.float32(100000.0), lam)
    max_iters = np.array(np.iinfo(dtype).max, dtype)
    out = jnp.where(use_knuth, _poisson_knuth(key, lam_knuth, shape, dtype, max_iters),
                    _poisson_rejection(key, lam_rejection, shape, dtype, max_iters))
    return jnp.where(lam == 0, jnp.zeros_like(out), out)


# --- binomial ---------------------------------------------------------------------------------
_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                           0.0118967099458917, 0.010411265261972, 0.00925546218271273,
                           0.00833056343336287])


def _stirling_tail(k):
    """``log k! - (Stirling's approximation of it)``: tabulated for k <= 9, a series above."""
    dtype = aval_of(k).dtype
    table = jnp.asarray(_STIRLING_TAIL.astype(dtype))
    small = k <= 9
    kc = jnp.clip(k, np.array(0, dtype), np.array(9, dtype))
    kp1sq = (kc + 1) * (kc + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (kc + 1)
    return jnp.where(small, jnp.take(table, jnp.floor(kc).astype(np.int32)), approx)


def _binomial_inversion(key, count, prob, shape, dtype, max_iters):
    log1m = jnp.log1p(-prob)

    def body(carry):
        i, num_geom, geom_sum, rng = carry
        keys = split(rng)
        num_geom = jnp.where(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(keys[0], shape, aval_of(prob).dtype, 0.0, 1.0)
        return i + 1, num_geom, geom_sum + jnp.ceil(jnp.log(u) / log1m), keys[1]

    def cond(carry):
        return jnp.any(carry[2] <= count) & (carry[0] < max_iters)

    pd = aval_of(prob).dtype
    init = (jnp.asarray(0, np.int32), lax.full(shape, 0, pd), lax.full(shape, 0, pd), key)
    return (lax.while_loop(cond, body, init)[1] - 1).astype(dtype)


def _btrs(key, count, prob, shape, dtype, max_iters):
    # Hormann's transformed rejection with squeeze (BTRS)
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)
    pd = aval_of(prob).dtype

    def body(carry):
        i, k_out, accepted, rng = carry
        keys = split(rng, 3)
        u = _uniform(keys[1], shape, pd, 0.0, 1.0)
        v = _uniform(keys[2], shape, pd, 0.0, 1.0)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1))) +
              (count + 1) * jnp.log((count - m + 1) / (count - k + 1)) +
              (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1)) +
              _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(k) -
              _stirling_tail(count - k))
        accept = accept1 | (~reject & (v <= ub))
        return i + 1, jnp.where(accept, k, k_out), accepted | accept, keys[0]

    def cond(carry):
        return jnp.any(~carry[2]) & (carry[0] < max_iters)

    init = (jnp.asarray(0, np.int32), lax.full(shape, -1, pd), lax.full(shape, False, np.bool_),
            key)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats (inversion for small ``n * min(p, 1 - p)``, BTRS
    rejection above, as JAX); invalid parameters give nan, ``n = inf`` gives inf.

    Example:
        >>> key = random.key(0)
        >>> random.binomial(key, 10.0, 0.3, (4,))
        Array([2., 2., 1., 2.], dtype=float32)
    """
    check_key("binomial", key)
    dtype = float_dtype("binomial", dtype)
    shape = sample_shape("binomial", shape, n, p)
    prob = jnp.asarray(p)
    if not dtypes.is_float(aval_of(prob).dtype):
        prob = prob.astype(dtypes.default_float())
    pd = aval_of(prob).dtype
    count = jnp.broadcast_to(jnp.asarray(n).astype(pd), shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = jnp.where(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = jnp.isnan(q)
    q_l_0 = q < 0.0
    q = jnp.where(q_is_nan | q_l_0, np.array(0.01, pd), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = jnp.where(use_inversion, count, np.array(0, pd))
    count_btrs = jnp.where(use_inversion, np.array(10000.0, pd), count)
    q_btrs = jnp.where(use_inversion, np.array(0.5, pd), q)
    max_iters = np.array(np.finfo(dtype).max, dtype)
    samples = jnp.where(use_inversion,
                        _binomial_inversion(key, count_inv, q, shape, dtype, max_iters),
                        _btrs(key, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = jnp.where(invalid, np.array(np.nan, dtype), samples)
    samples = jnp.where(count_inf & ~invalid, np.array(np.inf, dtype), samples)
    return jnp.where(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                     count.astype(dtype) - samples)
