"""Samplers built on raw bits: uniforms and the normal family, discrete draws, shuffles and
simple transformations of uniforms. Each follows the same arithmetic as ``jax.random`` so that
the same key, shape and dtype give bit-identical numbers (see ``docs/random.md``).

Example:
    >>> import funcgrad.random as random
    >>> random.normal(random.key(0), (3,))
    Array([ 1.6226422 ,  2.0252647 , -0.43359444], dtype=float32)
"""
import math

import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.random import prng
from funcgrad.random.keys import split

_U32 = dtypes.uint32
check_key = prng.check_key


# --- argument helpers ---------------------------------------------------------------------------
def shape_arg(name, shape):
    """``shape`` as a tuple of non-negative ints (``None`` -> ``()``, an int -> ``(n,)``)."""
    if shape is None:
        return ()
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"random.{name}: shape must be a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"random.{name}: negative dimension in shape {shape}")
    return shape


def check_shape(name, shape, *param_shapes):
    """Raise unless every parameter shape broadcasts to the sample ``shape``."""
    for pshape in param_shapes:
        try:
            ok = np.broadcast_shapes(tuple(shape), tuple(pshape)) == tuple(shape)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"random.{name}: parameter shape {tuple(pshape)} does not "
                             f"broadcast to the sample shape {tuple(shape)}")


def param_shape(x):
    return tuple(aval_of(x).shape) if not isinstance(x, (int, float, bool)) else ()


def sample_shape(name, shape, *params):
    """``shape`` checked against the parameters, or (``None``) their broadcast shape."""
    shapes = [param_shape(p) for p in params]
    if shape is None:
        return tuple(np.broadcast_shapes(*shapes)) if shapes else ()
    shape = shape_arg(name, shape)
    check_shape(name, shape, *shapes)
    return shape


def float_dtype(name, dtype):
    dtype = dtypes.check_user_dtype(dtype if dtype is not None else dtypes.default_float(),
                                    f"random.{name}")
    if not dtypes.is_float(dtype):
        raise TypeError(f"random.{name}: dtype must be a float dtype, got {dtype}")
    return dtype


def int_dtype(name, dtype):
    dtype = dtypes.check_user_dtype(dtype if dtype is not None else dtypes.default_int(),
                                    f"random.{name}")
    if not dtypes.is_integer(dtype) or np.dtype(dtype) == np.bool_:
        raise TypeError(f"random.{name}: dtype must be an integer dtype, got {dtype}")
    return dtype


def as_dtype(x, dtype):
    return jnp.asarray(x, dtype)


def _bcast(x, shape):
    return jnp.broadcast_to(x, shape)


# --- bits and uniforms ---------------------------------------------------------------------
def bits(key, shape=(), dtype=None):
    """Uniformly random unsigned integers of ``shape`` (uint8/16/32/64; uint32 by default).

    Example:
        >>> key = random.key(0)
        >>> random.bits(key, (4,))
        Array([4070199207, 4202968722, 1427181096, 2012915765], dtype=uint32)
    """
    check_key("bits", key)
    shape = shape_arg("bits", shape)
    dtype = np.dtype(dtype or _U32)
    if dtype.kind != "u":
        raise TypeError(f"random.bits: dtype must be an unsigned integer dtype, got {dtype}")
    dtype = dtypes.check_user_dtype(dtype, "random.bits")
    return prng.random_bits(key, np.dtype(dtype).itemsize * 8, shape)


def _uniform(key, shape, dtype, minval, maxval):
    finfo = dtypes.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    # fewer than 8 mantissa bits (bfloat16): JAX draws 8 random bits and widens them
    rng_bits = 8 if nmant < 8 else nbits
    utype = np.dtype(f"uint{nbits}").type
    b = prng.random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        b = lax.convert_element_type(b, utype)
    one_bits = np.array(1.0, dtype).view(utype)
    fb = jnp.bitwise_or(lax.shift_right_logical(b, lax.full(shape, rng_bits - nmant, utype)),
                        utype(one_bits))
    floats = lax.bitcast_convert_type(fb, dtype) - lax.full(shape, 1, dtype)
    minval = as_dtype(minval, dtype)
    maxval = as_dtype(maxval, dtype)
    return jnp.maximum(minval, floats * (maxval - minval) + minval)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform samples in ``[minval, maxval)``; differentiable w.r.t. ``minval``/``maxval``.

    Example:
        >>> key = random.key(0)
        >>> random.uniform(key, (3,), minval=-1.0, maxval=1.0)
        Array([ 0.895334  ,  0.95715976, -0.33541703], dtype=float32)
    """
    check_key("uniform", key)
    shape = shape_arg("uniform", shape)
    dtype = float_dtype("uniform", dtype)
    minval, maxval = as_dtype(minval, dtype), as_dtype(maxval, dtype)
    check_shape("uniform", shape, aval_of(minval).shape, aval_of(maxval).shape)
    return _uniform(key, shape, dtype, minval, maxval)


# --- normal family -----------------------------------------------------------------------------
def _normal_real(key, shape, dtype):
    lo = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype), dtype=dtype)
    u = _uniform(key, shape, dtype, lo, np.array(1.0, dtype))
    return lax.mul(lax.full(shape, np.sqrt(2), dtype), lax.erf_inv(u))


def normal(key, shape=(), dtype=None, loc=0.0, scale=1.0):
    """Standard normal samples (``sqrt(2) * erf_inv(u)`` of a uniform ``u`` in (-1, 1), as
    JAX), shifted by ``loc`` and scaled by ``scale``; complex dtypes give
    ``(re + 1j * im) / sqrt(2)``.

    Example:
        >>> key = random.key(0)
        >>> random.normal(key, (2, 3))
        Array([[ 1.6226422 ,  2.0252647 , -0.43359444],
               [-0.07861735,  0.1760909 , -0.97208923]], dtype=float32)
    """
    check_key("normal", key)
    shape = shape_arg("normal", shape)
    dtype = dtypes.check_user_dtype(dtype if dtype is not None else dtypes.default_float(),
                                    "random.normal")
    if dtypes.is_complex(dtype):
        real = np.array(0, dtype).real.dtype
        k_re, k_im = split(key)
        re = _normal_real(k_re, shape, real).astype(dtype)
        im = _normal_real(k_im, shape, real).astype(dtype)
        z = (re + 1j * im) / np.array(np.sqrt(2), dtype)
    elif dtypes.is_float(dtype):
        z = _normal_real(key, shape, dtype)
    else:
        raise TypeError(f"random.normal: dtype must be a float or complex dtype, got {dtype}")
    if isinstance(loc, (int, float)) and isinstance(scale, (int, float)) and \
            loc == 0.0 and scale == 1.0:
        return z
    loc, scale = as_dtype(loc, dtype), as_dtype(scale, dtype)
    check_shape("normal", shape, aval_of(loc).shape, aval_of(scale).shape)
    return z * scale + loc


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples conditioned on ``lower < x < upper`` (inverse CDF method).

    Example:
        >>> key = random.key(0)
        >>> random.truncated_normal(key, -2.0, 2.0, (5,))
        Array([ 1.4559592 ,  1.7147487 , -0.41267535, -0.07503343,  0.16800101], dtype=float32)
    """
    check_key("truncated_normal", key)
    dtype = float_dtype("truncated_normal", dtype)
    shape = sample_shape("truncated_normal", shape, lower, upper)
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower, upper = as_dtype(lower, dtype), as_dtype(upper, dtype)
    a = lax.erf(lower / sqrt2)
    b = lax.erf(upper / sqrt2)
    u = _uniform(key, shape, dtype, a, b)
    out = sqrt2 * lax.erf_inv(u)
    lo = lax.nextafter(lax.stop_gradient(lower), jnp.full(aval_of(lower).shape, np.inf, dtype))
    hi = lax.nextafter(lax.stop_gradient(upper),
                       jnp.full(aval_of(upper).shape, -np.inf, dtype))
    return jnp.clip(out, lo, hi)


def lognormal(key, sigma=1.0, shape=None, dtype=None):
    """``exp(sigma * normal)``. Example: ``random.lognormal(key, 0.5, (3,))``."""
    check_key("lognormal", key)
    dtype = float_dtype("lognormal", dtype)
    shape = sample_shape("lognormal", shape, sigma)
    return jnp.exp(normal(key, shape, dtype) * as_dtype(sigma, dtype))


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Samples from N(mean, cov); ``shape`` is the batch shape (default: broadcast of
    ``mean.shape[:-1]`` and ``cov.shape[:-2]``). ``method``: "cholesky", "eigh" or "svd".
    Differentiable with respect to ``mean`` and ``cov``.

    Example:
        >>> key = random.key(0)
        >>> random.multivariate_normal(key, jnp.zeros(2), jnp.eye(2), (5,))
        Array([[ 1.6226422 ,  2.0252647 ],
               [-0.43359444, -0.07861735],
               [ 0.1760909 , -0.97208923],
               [-0.49529874,  0.4943786 ],
               [ 0.6643493 , -0.9501635 ]], dtype=float32)
    """
    from funcgrad.numpy import linalg
    check_key("multivariate_normal", key)
    if method not in ("cholesky", "eigh", "svd"):
        raise ValueError(f"random.multivariate_normal: method must be 'cholesky', 'eigh' or "
                         f"'svd', got {method!r}")
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    common = np.result_type(*(d if dtypes.is_float(d) else dtypes.default_float()
                              for d in (aval_of(mean).dtype, aval_of(cov).dtype)))
    mean, cov = mean.astype(common), cov.astype(common)
    dtype = float_dtype("multivariate_normal", dtype if dtype is not None else common)
    ma, ca = aval_of(mean), aval_of(cov)
    if ma.ndim < 1 or ca.ndim < 2 or ca.shape[-2:] != (ma.shape[-1],) * 2:
        raise ValueError(f"random.multivariate_normal: mean {ma.str_short()} must be (..., n) "
                         f"and cov {ca.str_short()} (..., n, n)")
    if shape is None:
        shape = tuple(np.broadcast_shapes(ma.shape[:-1], ca.shape[:-2]))
    else:
        shape = shape_arg("multivariate_normal", shape)
        check_shape("multivariate_normal", shape, ma.shape[:-1], ca.shape[:-2])
    if method == "svd":
        u, s, _ = linalg.svd(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = linalg.eigh(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = linalg.cholesky(cov)
    z = normal(key, shape + ma.shape[-1:], dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


# --- discrete ---------------------------------------------------------------------------------
def bernoulli(key, p=0.5, shape=None, mode="low"):
    """Boolean samples that are True with probability ``p`` (``mode="high"`` uses two
    uniforms per sample for accuracy at tiny ``p``).

    Example:
        >>> key = random.key(0)
        >>> random.bernoulli(key, 0.3, (5,))
        Array([False, False, False, False, False], dtype=bool)
    """
    check_key("bernoulli", key)
    if mode not in ("low", "high"):
        raise ValueError(f"random.bernoulli: mode must be 'low' or 'high', got {mode!r}")
    p = jnp.asarray(p)
    if not dtypes.is_float(aval_of(p).dtype):
        raise TypeError(f"random.bernoulli: p must have a float dtype, got "
                        f"{aval_of(p).dtype}")
    dtype = aval_of(p).dtype
    shape = sample_shape("bernoulli", shape, p)
    if mode == "high":
        u = _uniform(key, (2,) + shape, dtype, 0.0, 1.0)
        u1, u2 = u[0], u[1] * np.array(2.0 ** -dtypes.finfo(dtype).nmant, dtype)
        return u2 < p - u1
    return _uniform(key, shape, dtype, 0.0, 1.0) < p


def _convert_and_clip(val, dtype):
    """``val`` (integer) in integer ``dtype``, clipped to its range instead of wrapping."""
    src = np.dtype(aval_of(val).dtype)
    lo = max(int(np.iinfo(dtype).min), int(np.iinfo(src).min))
    hi = min(int(np.iinfo(dtype).max), int(np.iinfo(src).max))
    return jnp.clip(val, np.array(lo, src), np.array(hi, src)).astype(dtype)


def randint(key, shape, minval, maxval, dtype=None):
    """Integers uniform in ``[minval, maxval)`` (bounds broadcast against ``shape``), from two
    words of random bits per sample reduced modulo the span (as JAX).

    Example:
        >>> key = random.key(0)
        >>> random.randint(key, (3,), 0, 10)
        Array([9, 0, 2], dtype=int32)
    """
    check_key("randint", key)
    shape = shape_arg("randint", shape)
    dtype = int_dtype("randint", dtype)
    info = np.iinfo(dtype)
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    sample_dtype = dtype
    if info.bits < 32:
        # sampled in 32 bits so the modulo reduction stays nearly unbiased
        sample_dtype = np.dtype(np.int32)
        minval = jnp.clip(minval.astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(maxval.astype(np.int32), int(info.min), int(info.max) + 1)
    check_shape("randint", shape, aval_of(minval).shape, aval_of(maxval).shape)
    return _randint(key, shape, minval, maxval, sample_dtype).astype(dtype)


def _randint(key, shape, minval, maxval, dtype):
    if not dtypes.is_integer(aval_of(minval).dtype):
        minval = minval.astype(dtypes.default_int())
    if not dtypes.is_integer(aval_of(maxval).dtype):
        maxval = maxval.astype(dtypes.default_int())
    top = _convert_and_clip(jnp.asarray(np.array(np.iinfo(dtype).max, dtype)),
                            aval_of(maxval).dtype)
    maxval_out_of_range = maxval > top
    minval = _bcast(_convert_and_clip(minval, dtype), shape)
    maxval = _bcast(_convert_and_clip(maxval, dtype), shape)
    maxval_out_of_range = _bcast(maxval_out_of_range, shape)
    nbits = np.iinfo(dtype).bits
    utype = np.dtype(f"uint{nbits}").type
    k1, k2 = split(key)
    higher = prng.random_bits(k1, nbits, shape)
    lower = prng.random_bits(k2, nbits, shape)
    span = lax.convert_element_type(maxval - minval, utype)
    span = jnp.where(maxval <= minval, utype(1), span)
    # a maxval past the dtype's range widens the span by one (wrapping to 0 is intended)
    span = jnp.where(maxval_out_of_range & (maxval > minval), span + utype(1), span)
    mult = lax.rem(lax.full(shape, 2 ** (nbits // 2), utype), span)
    mult = lax.rem(mult * mult, span)
    offset = lax.rem(lax.rem(higher, span) * mult + lax.rem(lower, span), span)
    return minval + lax.convert_element_type(offset, dtype)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Category indices sampled with probabilities ``softmax(logits)`` along ``axis`` (the
    Gumbel-max trick). ``shape`` (the output shape) must end with the batch shape of
    ``logits``; with ``replace=False`` the leading part of ``shape`` counts distinct draws.

    Example:
        >>> key = random.key(0)
        >>> random.categorical(key, jnp.log(jnp.array([0.2, 0.8])), shape=(1000,)).mean().round(2)   # about 0.8
        Array(0.8, dtype=float32)
    """
    check_key("categorical", key)
    logits = jnp.asarray(logits)
    if not dtypes.is_float(aval_of(logits).dtype):
        logits = logits.astype(dtypes.default_float())
    la = aval_of(logits)
    if la.ndim == 0:
        raise ValueError("random.categorical: logits must have at least one axis")
    if not -la.ndim <= axis < la.ndim:
        raise ValueError(f"random.categorical: axis {axis} is out of range for logits "
                         f"{la.str_short()}")
    batch = tuple(np.delete(np.array(la.shape, dtype=np.int64), axis).tolist())
    shape = batch if shape is None else shape_arg("categorical", shape)
    check_shape("categorical", shape, batch)
    prefix = shape[:len(shape) - len(batch)]
    if replace:
        ax = axis - la.ndim if axis >= 0 else axis
        lshape = list(shape[len(shape) - len(batch):])
        lshape.insert(ax % la.ndim, la.shape[ax])
        g = gumbel(key, prefix + tuple(lshape), la.dtype, mode)
        expanded = lax.broadcast_in_dim(logits, (1,) * len(prefix) + la.shape,
                                        tuple(range(len(prefix), len(prefix) + la.ndim)))
        return jnp.argmax(g + expanded, axis=ax)
    logits = logits + gumbel(key, la.shape, la.dtype, mode)
    k = math.prod(prefix)
    if k > la.shape[axis]:
        raise ValueError(f"random.categorical: cannot draw {k} samples without replacement "
                         f"from {la.shape[axis]} categories")
    _, idx = lax.top_k(jnp.moveaxis(logits, axis, -1), k)
    idx = jnp.moveaxis(idx, -1, 0)
    return lax.reshape(idx, shape)


def _shuffle(key, x, axis):
    # Sort by fresh random 32-bit keys, in enough rounds that ties are negligible (JAX's
    # static rule: ceil(3 * log(n) / log(2**32 - 1)) rounds).
    size = aval_of(x).size
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        pair = split(key)
        key, sub = pair[0], pair[1]
        sort_keys = prng.random_bits(sub, 32, aval_of(x).shape)
        _, x = lax.sort_key_val(sort_keys, x, axis)
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` (int ``x``) or of ``x`` along ``axis``;
    ``independent=True`` permutes each slice along ``axis`` independently.

    Example:
        >>> key = random.key(0)
        >>> random.permutation(key, 5)
        Array([0, 1, 4, 3, 2], dtype=int32)
    """
    check_key("permutation", key)
    if isinstance(x, (int, np.integer)):
        return _shuffle(key, jnp.arange(int(x)), 0)
    x = jnp.asarray(x)
    xa = aval_of(x)
    if xa.ndim == 0:
        raise TypeError("random.permutation: x must be an int or an array with ndim >= 1")
    if not -xa.ndim <= axis < xa.ndim:
        raise ValueError(f"random.permutation: axis {axis} is out of range for "
                         f"{xa.str_short()}")
    axis = axis % xa.ndim
    if independent or xa.ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, jnp.arange(xa.shape[axis]), 0)
    return jnp.take(x, order, axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Random elements of ``a`` (an int means ``arange(a)``), with or without replacement,
    optionally with probabilities ``p``.

    Example:
        >>> key = random.key(0)
        >>> random.choice(key, 10, (3,), replace=False)
        Array([0, 1, 8], dtype=int32)
        >>> random.choice(key, jnp.array([1., 2., 3.]), (5,), p=jnp.array([.2, .3, .5]))
        Array([1., 1., 3., 3., 2.], dtype=float32)
    """
    check_key("choice", key)
    shape = shape_arg("choice", shape)
    arr = jnp.asarray(a)
    aa = aval_of(arr)
    if aa.ndim == 0:
        if not isinstance(a, (int, np.integer)):
            raise TypeError(f"random.choice: a must be an int or an array with ndim >= 1, "
                            f"got {aa.str_short()}")
        n = int(a)
    else:
        if not -aa.ndim <= axis < aa.ndim:
            raise ValueError(f"random.choice: axis {axis} is out of range for "
                             f"{aa.str_short()}")
        axis = axis % aa.ndim
        n = aa.shape[axis]
    k = math.prod(shape)
    if k == 0:
        return jnp.zeros(shape, aa.dtype)
    if n <= 0:
        raise ValueError("random.choice: a must be greater than 0 unless no samples are taken")
    if not replace and k > n:
        raise ValueError(f"random.choice: cannot take a sample of {k} from a population of "
                         f"{n} without replacement")
    if p is None:
        if replace:
            idx = randint(key, shape, 0, n)
            out = idx if aa.ndim == 0 else jnp.take(arr, idx, axis=axis)
        else:
            perm = permutation(key, n if aa.ndim == 0 else arr, axis)
            out = lax.slice_in_dim(perm, 0, k, axis=axis if aa.ndim else 0)
    else:
        p = jnp.asarray(p)
        if not dtypes.is_float(aval_of(p).dtype):
            p = p.astype(dtypes.default_float())
        if aval_of(p).shape != (n,):
            raise ValueError(f"random.choice: p must have shape ({n},) (a.shape[axis]), got "
                             f"{aval_of(p).shape}")
        pd = aval_of(p).dtype
        if replace:
            cdf = jnp.cumsum(p)
            r = cdf[-1] * (1 - _uniform(key, shape, pd, 0.0, 1.0))
            idx = jnp.searchsorted(cdf, r).astype(dtypes.default_int())
        else:
            g = gumbel(key, (n,), pd, mode) + jnp.log(p)
            idx = lax.top_k(g, k)[1].astype(dtypes.default_int())
        out = idx if aa.ndim == 0 else jnp.take(arr, idx, axis=axis)
    return jnp.reshape(out, shape if aa.ndim == 0 else aa.shape[:axis] + shape +
                       aa.shape[axis + 1:])


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with equal probability. Example: ``random.rademacher(key, (4,))``."""
    check_key("rademacher", key)
    dtype = dtypes.check_user_dtype(dtype or dtypes.default_int(), "random.rademacher")
    b = bernoulli(key, 0.5, shape_arg("rademacher", shape)).astype(dtype)
    return (2 * b - 1).astype(dtype)


def geometric(key, p, shape=None, dtype=None):
    """Number of Bernoulli(``p``) trials up to the first success (support 1, 2, ...).

    Example:
        >>> key = random.key(0)
        >>> random.geometric(key, 0.3, (4,))
        Array([1, 1, 4, 3], dtype=int32)
    """
    check_key("geometric", key)
    dtype = int_dtype("geometric", dtype)
    shape = sample_shape("geometric", shape, p)
    p = jnp.asarray(p)
    if not dtypes.is_float(aval_of(p).dtype):
        p = p.astype(dtypes.default_float())
    u = _uniform(key, shape, aval_of(p).dtype, 0.0, 1.0)
    u = jnp.where(u == 0, np.array(1, aval_of(p).dtype), u)
    g = lax.floor(lax.div(lax.log(u), _bcast(lax.log1p(-p), shape))) + 1
    return g.astype(dtype)


# --- continuous, by transformation of uniforms ----------------------------------------------
def exponential(key, shape=(), dtype=None):
    """Exponential(1) samples. Example: ``random.exponential(key, (3,))``."""
    check_key("exponential", key)
    dtype = float_dtype("exponential", dtype)
    u = _uniform(key, shape_arg("exponential", shape), dtype, 0.0, 1.0)
    return lax.neg(lax.log1p(lax.neg(u)))


def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) samples. Example: ``random.laplace(key, (3,))``."""
    check_key("laplace", key)
    dtype = float_dtype("laplace", dtype)
    u = _uniform(key, shape_arg("laplace", shape), dtype,
                 -1.0 + float(dtypes.finfo(dtype).epsneg), 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key, shape=(), dtype=None):
    """Standard logistic samples. Example: ``random.logistic(key, (3,))``."""
    check_key("logistic", key)
    dtype = float_dtype("logistic", dtype)
    x = _uniform(key, shape_arg("logistic", shape), dtype, dtypes.finfo(dtype).tiny, 1.0)
    return lax.sub(lax.log(x), lax.log1p(lax.neg(x)))


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel samples (``mode="high"`` spends two uniforms per sample for a wider
    range). Example: ``random.gumbel(key, (3,))``."""
    check_key("gumbel", key)
    dtype = float_dtype("gumbel", dtype)
    shape = shape_arg("gumbel", shape)
    mode = "low" if mode is None else mode
    if mode not in ("low", "high"):
        raise ValueError(f"random.gumbel: mode must be 'low' or 'high', got {mode!r}")
    info = dtypes.finfo(dtype)
    if mode == "high":
        u = _uniform(key, (2,) + shape, dtype, 0.0, 1.0)
        high, low = u[0], u[1]
        x = jnp.where(high >= 0.5, high,
                      high + np.array(2.0 ** -info.nmant, dtype) * low +
                      np.array(info.tiny, dtype))
        return -jnp.log(-jnp.log1p(-x))
    return -jnp.log(-jnp.log(_uniform(key, shape, dtype, info.tiny, 1.0)))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples. Example: ``random.cauchy(key, (3,))``."""
    check_key("cauchy", key)
    dtype = float_dtype("cauchy", dtype)
    shape = shape_arg("cauchy", shape)
    u = _uniform(key, shape, dtype, dtypes.finfo(dtype).eps, 1.0)
    return lax.tan(lax.mul(lax.full(shape, np.pi, dtype), lax.sub(u, lax.full(shape, 0.5,
                                                                                dtype))))


def pareto(key, b, shape=None, dtype=None):
    """Pareto samples with shape ``b`` (support ``x >= 1``). Example: ``random.pareto(key, 3.)``."""
    check_key("pareto", key)
    dtype = float_dtype("pareto", dtype)
    shape = sample_shape("pareto", shape, b)
    return lax.exp(exponential(key, shape, dtype) / as_dtype(b, dtype))


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples. Example: ``random.weibull_min(key, 1.0, 2.0, (3,))``."""
    check_key("weibull_min", key)
    dtype = float_dtype("weibull_min", dtype)
    u = _uniform(key, shape_arg("weibull_min", shape), dtype, 0.0, 1.0)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def maxwell(key, shape=(), dtype=None):
    """Maxwell samples (norm of a 3-D standard normal). Example: ``random.maxwell(key, (3,))``."""
    check_key("maxwell", key)
    dtype = float_dtype("maxwell", dtype)
    z = normal(key, shape_arg("maxwell", shape) + (3,), dtype)
    return jnp.sqrt(jnp.sum(z * z, axis=-1))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Maxwell samples with a random sign, scaled by ``scale`` and shifted by ``loc``.

    Example:
        >>> key = random.key(0)
        >>> random.double_sided_maxwell(key, 0.0, 1.0, (3,))
        Array([ 1.5457209,  1.5741276, -2.0825305], dtype=float32)
    """
    check_key("double_sided_maxwell", key)
    dtype = float_dtype("double_sided_maxwell", dtype)
    pshape = tuple(np.broadcast_shapes(param_shape(loc), param_shape(scale)))
    shape = shape_arg("double_sided_maxwell", shape)
    shape = (shape or pshape) + pshape
    k_m, k_r = split(key)
    return rademacher(k_r, shape, dtype) * maxwell(k_m, shape, dtype) * scale + loc


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh samples of ``scale``. Example: ``random.rayleigh(key, 1.0, (3,))``."""
    check_key("rayleigh", key)
    dtype = float_dtype("rayleigh", dtype)
    shape = sample_shape("rayleigh", shape, scale)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    scale = _bcast(as_dtype(scale, dtype), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), lax.full(shape, -2, dtype))))


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) samples of ``mean`` and unit shape.

    Example:
        >>> key = random.key(0)
        >>> random.wald(key, 1.0, (3,))
        Array([0.3805977 , 0.41566527, 0.48107237], dtype=float32)
    """
    check_key("wald", key)
    dtype = float_dtype("wald", dtype)
    shape = sample_shape("wald", shape, mean)
    k1, k2 = split(key)
    mean = _bcast(as_dtype(mean, dtype), shape)
    v = normal(k1, shape, dtype)
    z = _uniform(k2, shape, dtype, 0.0, 1.0)
    y = v * v
    y_sq = y * y
    mean_sq = mean * mean
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return jnp.where(z <= mean / (mean + x), x, mean_sq / x)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular samples on ``[left, right]`` peaking at ``mode``.

    Example:
        >>> key = random.key(0)
        >>> random.triangular(key, 0.0, 0.5, 1.0, (3,))
        Array([0.8382394, 0.8965106, 0.4076098], dtype=float32)
    """
    check_key("triangular", key)
    dtype = float_dtype("triangular", dtype)
    shape = sample_shape("triangular", shape, left, mode, right)
    left, right, mode = (_bcast(as_dtype(v, dtype), shape) for v in (left, right, mode))
    fc = (mode - left) / (right - left)
    u = _uniform(key, shape, dtype, 0.0, 1.0)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return jnp.where(u < fc, out1, out2)


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Haar-random ``n x m`` matrices with orthonormal columns (or rows when ``n < m``);
    ``m`` defaults to ``n``. Example: ``random.orthogonal(key, 3)``."""
    from funcgrad.numpy import linalg
    check_key("orthogonal", key)
    dtype = float_dtype("orthogonal", dtype)
    shape = shape_arg("orthogonal", shape)
    n = int(n)
    m = n if m is None else int(m)
    z = normal(key, shape + (max(n, m), min(n, m)), dtype)
    q, r = linalg.qr(z)
    d = jnp.diagonal(r, axis1=-2, axis2=-1)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x
