"""funcgrad.random: key-based, splittable, reproducible random numbers (as ``jax.random``).

A key is a ``uint32[2]`` array. Every sampler is a pure function of its key: the same key
always gives the same numbers (eagerly, under ``jit``, on any backend), and ``split``/
``fold_in`` derive statistically independent keys. There is no global state.

How it works: the Threefry-2x32 block cipher (20 rounds, Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC'11) is written with ordinary ``funcgrad.numpy`` integer ops
(add, shifts, xor) on uint32 arrays. It encrypts a counter (``iota``) under the key, so the
numbers are a deterministic function of (key, position). Being built from existing primitives,
it works under every transformation with no new rules: ``vmap`` over a batch of keys,
``jit``, ``grad`` of code that uses the samples (reparameterized samplers such as ``normal``,
``uniform``, ``multivariate_normal`` differentiate with respect to their parameters). The
cipher core is jitted so eager calls compile once per shape.

We chose this over XLA's ``rng_bit_generator`` because a counter-based cipher makes ``split``
and ``fold_in`` exact and batchable, and the results identical across backends.

Example:
    >>> import funcgrad.random as random
    >>> key = random.key(0)
    >>> k1, k2 = random.split(key)
    >>> x = random.normal(k1, (3,))
    >>> random.uniform(k2, (2, 2), minval=-1.0, maxval=1.0)
"""
import math

import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.lowering.eager_jit import jit_when_eager_in
from funcgrad.transforms.jit import jit

__all__ = [
    "PRNGKey", "key", "key_data", "wrap_key_data", "split", "fold_in", "clone", "bits",
    "uniform", "normal", "truncated_normal", "bernoulli", "categorical", "randint",
    "permutation", "choice", "gamma", "loggamma", "beta", "dirichlet", "multivariate_normal",
    "exponential", "laplace", "logistic", "gumbel", "poisson", "cauchy", "rademacher",
    "lognormal", "chisquare", "t", "pareto", "weibull_min", "maxwell", "ball", "orthogonal",
    "threefry2x32",
]

_U32 = dtypes.uint32


# --- the Threefry-2x32 cipher -----------------------------------------------------------------
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(x, r):
    return jnp.bitwise_or(jnp.left_shift(x, np.uint32(r)), jnp.right_shift(x, np.uint32(32 - r)))


def _threefry2x32_impl(k0, k1, x0, x1):
    ks = (k0, k1, jnp.bitwise_xor(jnp.bitwise_xor(k0, k1), np.uint32(0x1BD11BDA)))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r)
            x1 = jnp.bitwise_xor(x1, x0)
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x0, x1


_threefry_jit = jit(_threefry2x32_impl)


def threefry2x32(key, x0, x1):
    """Encrypt the uint32 counter pairs ``(x0, x1)`` (equal shapes) under ``key``.

    Example:
        >>> y0, y1 = random.threefry2x32(random.key(0), jnp.arange(4, dtype="uint32"),
        ...                              jnp.zeros(4, "uint32"))
    """
    key = _check_key("threefry2x32", key)
    k0 = lax.squeeze(lax.slice(key, (0,), (1,)), (0,))
    k1 = lax.squeeze(lax.slice(key, (1,), (2,)), (0,))
    x0 = jnp.asarray(x0, _U32)
    x1 = jnp.asarray(x1, _U32)
    shape = aval_of(x0).shape
    k0 = lax.broadcast_in_dim(k0, shape, ())
    k1 = lax.broadcast_in_dim(k1, shape, ())
    return _threefry_jit(k0, k1, x0, x1)


def _check_key(name, key):
    aval = aval_of(key)
    if aval.shape != (2,) or aval.dtype != _U32:
        raise TypeError(f"random.{name}: expected a key (uint32[2], from random.key or "
                        f"random.split), got {aval.str_short()}; for a batch of keys use "
                        f"funcgrad.vmap")
    return key


def _raw_bits(key, n):
    """``n`` uint32 words derived from ``key`` (a 1-D array)."""
    m = (n + 1) // 2
    counts = lax.iota(_U32, 2 * m)
    x0 = lax.slice(counts, (0,), (m,))
    x1 = lax.slice(counts, (m,), (2 * m,))
    y0, y1 = threefry2x32(key, x0, x1)
    out = lax.concatenate([y0, y1], 0)
    return out if 2 * m == n else lax.slice(out, (0,), (n,))


def _shape(name, shape):
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


def _size(shape):
    return int(math.prod(shape))


# --- keys -----------------------------------------------------------------------------------
def key(seed):
    """A key from an integer seed: ``uint32[2]`` holding the seed's high and low 32 bits.

    Example:
        >>> k = random.key(42)
    """
    if isinstance(seed, (int, np.integer)):
        s = int(seed) & 0xFFFFFFFFFFFFFFFF
        return jnp.asarray(np.array([s >> 32, s & 0xFFFFFFFF], np.uint32))
    aval = aval_of(seed)
    if aval.shape != () or not (dtypes.is_integer(aval.dtype)):
        raise TypeError(f"random.key: seed must be an integer scalar, got {aval.str_short()}")
    if aval.dtype.itemsize == 8:
        hi = lax.convert_element_type(jnp.right_shift(seed, 32) & 0xFFFFFFFF, _U32)
        lo = lax.convert_element_type(seed & 0xFFFFFFFF, _U32)
    else:
        lo = lax.convert_element_type(seed, _U32)
        hi = jnp.where(jnp.asarray(seed) < 0, np.uint32(0xFFFFFFFF), np.uint32(0))
    return jnp.stack([hi, lo])


PRNGKey = key


def key_data(keys):
    """The raw ``uint32`` data of a key (keys are raw already). Example: ``key_data(k)``."""
    return keys


def wrap_key_data(data):
    """A key from raw ``uint32[2]`` data. Example: ``wrap_key_data(jnp.array([0, 1], "uint32"))``."""
    return _check_key("wrap_key_data", jnp.asarray(data, _U32))


def clone(k):
    """A copy of key ``k`` (keys are immutable values). Example: ``random.clone(k)``."""
    return k


def split(key, num=2):
    """``num`` new independent keys from ``key``, as a ``uint32[num, 2]`` array.

    Example:
        >>> k1, k2, k3 = random.split(random.key(0), 3)
    """
    _check_key("split", key)
    num = int(num)
    return lax.reshape(_raw_bits(key, 2 * num), (num, 2))


def fold_in(key, data):
    """A new key from ``key`` and an integer ``data`` (e.g. a step number).

    Example:
        >>> k_step = random.fold_in(key, step)
    """
    _check_key("fold_in", key)
    d = lax.convert_element_type(jnp.asarray(data), _U32)
    y0, y1 = threefry2x32(key, lax.reshape(jnp.zeros((), _U32), (1,)), lax.reshape(d, (1,)))
    return lax.concatenate([y0, y1], 0)


# --- bits and uniforms ---------------------------------------------------------------------
def bits(key, shape=(), dtype=None):
    """Uniformly random unsigned integers of ``shape`` (uint8/16/32/64; uint32 by default).

    Example:
        >>> random.bits(key, (4,))
    """
    _check_key("bits", key)
    shape = _shape("bits", shape)
    dtype = np.dtype(dtype or _U32)
    if dtype.kind != "u":
        raise TypeError(f"random.bits: dtype must be unsigned, got {dtype}")
    dtype = dtypes.check_user_dtype(dtype, "random.bits")
    n = _size(shape)
    if dtype.itemsize == 8:
        words = _raw_bits(key, 2 * n)
        hi = lax.convert_element_type(lax.slice(words, (0,), (n,)), dtype)
        lo = lax.convert_element_type(lax.slice(words, (n,), (2 * n,)), dtype)
        out = jnp.bitwise_or(jnp.left_shift(hi, np.uint64(32)), lo)
    else:
        out = _raw_bits(key, n)
        if dtype.itemsize < 4:
            out = jnp.right_shift(out, np.uint32(32 - 8 * dtype.itemsize))
            out = lax.convert_element_type(out, dtype)
    return lax.reshape(out, shape)


_MANTISSA = {np.dtype(np.float64): (np.uint64, 52, 0x3FF0000000000000),
             np.dtype(np.float32): (np.uint32, 23, 0x3F800000),
             np.dtype(np.float16): (np.uint16, 10, 0x3C00),
             np.dtype(dtypes.bfloat16): (np.uint16, 7, 0x3F80)}


def _float_dtype(name, dtype):
    dtype = dtypes.check_user_dtype(dtype if dtype is not None else dtypes.default_float(),
                                    f"random.{name}")
    if not dtypes.is_float(dtype):
        raise TypeError(f"random.{name}: dtype must be a float dtype, got {dtype}")
    return dtype


def _unit_uniform(key, shape, dtype):
    """Uniform [0, 1) in ``dtype`` from the top mantissa bits (exact, no rounding to 1)."""
    utype, mant, one = _MANTISSA[np.dtype(dtype)]
    nbits = np.dtype(utype).itemsize * 8
    b = bits(key, shape, utype)
    b = jnp.bitwise_or(jnp.right_shift(b, utype(nbits - mant)), utype(one))
    return lax.sub(lax.bitcast_convert_type(b, dtype), lax.full(shape, 1, dtype))


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform samples in ``[minval, maxval)``; differentiable w.r.t. ``minval``/``maxval``.

    Example:
        >>> random.uniform(key, (3,), minval=-1.0, maxval=1.0)
    """
    _check_key("uniform", key)
    shape = _shape("uniform", shape)
    dtype = _float_dtype("uniform", dtype)
    u = _unit_uniform(key, shape, dtype)
    minval = jnp.asarray(minval, dtype)
    maxval = jnp.asarray(maxval, dtype)
    _check_broadcast("uniform", shape, minval, maxval)
    out = u * (maxval - minval) + minval
    return jnp.broadcast_to(jnp.maximum(minval, out), shape)


def _check_broadcast(name, shape, *params):
    for p in params:
        pshape = aval_of(p).shape
        try:
            if np.broadcast_shapes(pshape, shape) != tuple(shape):
                raise ValueError
        except ValueError:
            raise ValueError(f"random.{name}: parameter shape {pshape} does not broadcast to "
                             f"the sample shape {shape}") from None


def _open_uniform(key, shape, dtype):
    """Uniform on the open interval (0, 1): never 0, so logs are finite."""
    u = _unit_uniform(key, shape, dtype)
    tiny = np.finfo(dtype).tiny if np.dtype(dtype) != dtypes.bfloat16 else \
        float(dtypes.finfo(dtype).tiny)
    return jnp.maximum(u, jnp.asarray(tiny, dtype))


def _compute_dtype(dtype):
    return dtypes.float32 if np.dtype(dtype).itemsize < 4 else dtype


# --- normal family -----------------------------------------------------------------------------
def normal(key, shape=(), dtype=None, loc=0.0, scale=1.0):
    """Standard normal samples (Box-Muller), shifted by ``loc`` and scaled by ``scale``.

    Example:
        >>> random.normal(key, (2, 3))
    """
    _check_key("normal", key)
    shape = _shape("normal", shape)
    dtype = _float_dtype("normal", dtype)
    z = _std_normal(key, shape, dtype)
    if isinstance(loc, (int, float)) and isinstance(scale, (int, float)) and \
            loc == 0.0 and scale == 1.0:
        return z
    loc, scale = jnp.asarray(loc, dtype), jnp.asarray(scale, dtype)
    _check_broadcast("normal", shape, loc, scale)
    return z * scale + loc


def _std_normal(key, shape, dtype):
    ct = _compute_dtype(dtype)
    n = _size(shape)
    m = (n + 1) // 2
    u = _unit_uniform(key, (2, m), ct)
    u1 = 1.0 - u[0]                      # in (0, 1]
    theta = (2 * np.pi) * u[1]
    r = jnp.sqrt(-2.0 * jnp.log(u1))
    z = jnp.concatenate([r * jnp.cos(theta), r * jnp.sin(theta)])[:n]
    return lax.convert_element_type(jnp.reshape(z, shape), dtype)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal samples conditioned on ``lower < x < upper`` (inverse CDF method).

    Example:
        >>> random.truncated_normal(key, -2.0, 2.0, (5,))
    """
    _check_key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    ct = _compute_dtype(dtype)
    lower, upper = jnp.asarray(lower, ct), jnp.asarray(upper, ct)
    if shape is None:
        shape = np.broadcast_shapes(aval_of(lower).shape, aval_of(upper).shape)
    shape = _shape("truncated_normal", shape)
    _check_broadcast("truncated_normal", shape, lower, upper)
    sqrt2 = np.array(np.sqrt(2), ct)
    a = _erf(lower / sqrt2)
    b = _erf(upper / sqrt2)
    u = uniform(key, shape, ct, minval=a, maxval=b)
    out = sqrt2 * _erf_inv(u)
    lo = jnp.nextafter(lower, jnp.asarray(np.inf, ct))
    hi = jnp.nextafter(upper, jnp.asarray(-np.inf, ct))
    out = jnp.clip(out, lo, hi)
    return lax.convert_element_type(out, dtype)


def _erf(x):
    return lax.erf(x)


def _erf_inv(x):
    return lax.erf_inv(x)


def lognormal(key, sigma=1.0, shape=None, dtype=None):
    """``exp(sigma * normal)``. Example: ``random.lognormal(key, 0.5, (3,))``."""
    dtype = _float_dtype("lognormal", dtype)
    sigma = jnp.asarray(sigma, dtype)
    shape = _shape("lognormal", aval_of(sigma).shape if shape is None else shape)
    return jnp.exp(normal(key, shape, dtype) * sigma)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Samples from N(mean, cov); ``shape`` is the batch shape (default: broadcast of
    ``mean.shape[:-1]`` and ``cov.shape[:-2]``). ``method``: "cholesky", "eigh" or "svd".
    Differentiable with respect to ``mean`` and ``cov``.

    Example:
        >>> random.multivariate_normal(key, jnp.zeros(2), jnp.eye(2), (5,))
    """
    _check_key("multivariate_normal", key)
    dtype = _float_dtype("multivariate_normal", dtype)
    mean, cov = jnp.asarray(mean, dtype), jnp.asarray(cov, dtype)
    ma, ca = aval_of(mean), aval_of(cov)
    if ma.ndim < 1 or ca.ndim < 2 or ca.shape[-2:] != (ma.shape[-1],) * 2:
        raise ValueError(f"random.multivariate_normal: mean {ma.str_short()} must be (..., n) "
                         f"and cov {ca.str_short()} (..., n, n)")
    n = ma.shape[-1]
    if shape is None:
        shape = np.broadcast_shapes(ma.shape[:-1], ca.shape[:-2])
    shape = _shape("multivariate_normal", shape)
    from funcgrad.lax import linalg
    if method == "cholesky":
        factor = linalg.cholesky(cov)
    elif method == "eigh":
        v, w = linalg.eigh(cov)
        factor = v * jnp.sqrt(jnp.maximum(w, 0))[..., None, :]
    elif method == "svd":
        s, u, _ = linalg.svd(cov)
        factor = u * jnp.sqrt(s)[..., None, :]
    else:
        raise ValueError(f"random.multivariate_normal: method must be 'cholesky', 'eigh' or "
                         f"'svd', got {method!r}")
    z = normal(key, shape + (n,), dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, z)


# --- discrete ---------------------------------------------------------------------------------
def bernoulli(key, p=0.5, shape=None):
    """Boolean samples that are True with probability ``p``.

    Example:
        >>> random.bernoulli(key, 0.3, (10,))
    """
    _check_key("bernoulli", key)
    p = jnp.asarray(p)
    if not dtypes.is_float(aval_of(p).dtype):
        p = p.astype(dtypes.default_float())
    shape = _shape("bernoulli", aval_of(p).shape if shape is None else shape)
    _check_broadcast("bernoulli", shape, p)
    return uniform(key, shape, aval_of(p).dtype) < p


def randint(key, shape, minval, maxval, dtype=None):
    """Integers uniform in ``[minval, maxval)`` (bounds broadcast against ``shape``).

    Example:
        >>> random.randint(key, (3,), 0, 10)
    """
    _check_key("randint", key)
    shape = _shape("randint", shape)
    dtype = dtypes.check_user_dtype(dtype or dtypes.default_int(), "random.randint")
    if not dtypes.is_integer(dtype):
        raise TypeError(f"random.randint: dtype must be an integer dtype, got {dtype}")
    info = np.iinfo(dtype)
    minval = jnp.clip(jnp.asarray(minval), info.min, info.max).astype(dtype)
    maxval_raw = jnp.asarray(maxval)
    maxval = jnp.clip(maxval_raw, info.min, info.max).astype(dtype)
    _check_broadcast("randint", shape, minval, maxval)
    minval = jnp.broadcast_to(minval, shape)
    maxval = jnp.broadcast_to(maxval, shape)
    unsigned = np.dtype(f"uint{max(32, np.dtype(dtype).itemsize * 8)}")
    unsigned = dtypes.canonicalize(unsigned)
    words = bits(key, (2,) + shape, unsigned)
    hi, lo = words[0], words[1]
    span = lax.convert_element_type(maxval - minval, unsigned)
    span = jnp.where(maxval <= minval, unsigned.type(1), span)
    # (hi * 2**w + lo) mod span, computed without overflow bias beyond 2**-w
    nbits = np.dtype(unsigned).itemsize * 8
    mult = jnp.remainder(unsigned.type(2 ** (nbits // 2)) * jnp.ones_like(span), span)
    mult = jnp.remainder(mult * mult, span)
    off = jnp.remainder(jnp.remainder(hi, span) * mult + jnp.remainder(lo, span), span)
    out = minval + lax.convert_element_type(off, dtype)
    return jnp.where(maxval <= minval, minval, out)


def categorical(key, logits, axis=-1, shape=None, replace=True):
    """Category indices sampled with probabilities ``softmax(logits)`` along ``axis``
    (the Gumbel-max trick). ``shape`` (the output shape) must broadcast the batch shape of
    ``logits``; with ``replace=False`` draws distinct categories along the last of ``shape``.

    Example:
        >>> random.categorical(key, jnp.log(jnp.array([0.2, 0.8])), shape=(100,))
    """
    _check_key("categorical", key)
    logits = jnp.asarray(logits)
    if not dtypes.is_float(aval_of(logits).dtype):
        logits = logits.astype(dtypes.default_float())
    la = aval_of(logits)
    axis = axis % la.ndim
    logits = jnp.moveaxis(logits, axis, -1)
    batch = aval_of(logits).shape[:-1]
    k = aval_of(logits).shape[-1]
    if shape is None:
        shape = batch
    shape = _shape("categorical", shape)
    if not replace:
        nsel = shape[-1] if shape else 1
        bshape = shape[:-1] if shape else ()
        g = gumbel(key, bshape + (k,), aval_of(logits).dtype) + logits
        _, idx = lax.top_k(g, nsel)
        return idx if shape else idx[..., 0]
    if np.broadcast_shapes(batch, shape) != shape:
        raise ValueError(f"random.categorical: shape {shape} does not broadcast the batch "
                         f"shape {batch} of logits")
    g = gumbel(key, shape + (k,), aval_of(logits).dtype)
    return jnp.argmax(g + logits, axis=-1)


def permutation(key, x, axis=0, independent=False):
    """A random permutation of ``arange(x)`` (int ``x``) or of ``x`` along ``axis``.

    ``independent=True`` permutes each slice along ``axis`` independently.

    Example:
        >>> random.permutation(key, 5)
    """
    _check_key("permutation", key)
    if isinstance(x, (int, np.integer)):
        n = int(x)
        return jnp.take(jnp.arange(n), _random_order(key, n), mode="clip")
    x = jnp.asarray(x)
    xa = aval_of(x)
    if xa.ndim == 0:
        raise TypeError("random.permutation: x must be an int or an array with ndim >= 1")
    axis = axis % xa.ndim
    if independent:
        keys = bits(key, xa.shape)
        order = lax.argsort(keys, dimension=axis)
        return jnp.take_along_axis(x, order, axis=axis, mode="clip")
    return jnp.take(x, _random_order(key, xa.shape[axis]), axis=axis, mode="clip")


def _random_order(key, n):
    # Sort by two rounds of 32-bit keys (ties among n items are then vanishingly rare).
    k1, k2 = split(key)
    order = lax.argsort(bits(k1, (n,)))
    b2 = jnp.take(bits(k2, (n,)), order, mode="clip")
    return jnp.take(order, lax.argsort(b2), mode="clip")


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Random elements of ``a`` (an int means ``arange(a)``), with or without replacement,
    optionally with probabilities ``p``.

    Example:
        >>> random.choice(key, 10, (3,), replace=False)
        >>> random.choice(key, jnp.array([1., 2., 3.]), (5,), p=jnp.array([.2, .3, .5]))
    """
    _check_key("choice", key)
    shape = _shape("choice", shape)
    if isinstance(a, (int, np.integer)):
        n = int(a)
        arr = None
    else:
        arr = jnp.asarray(a)
        if aval_of(arr).ndim == 0:
            raise ValueError("random.choice: a must be an int or an array with ndim >= 1")
        axis = axis % aval_of(arr).ndim
        n = aval_of(arr).shape[axis]
    k = _size(shape)
    if n == 0 and k > 0:
        raise ValueError("random.choice: cannot choose from an empty population")
    if not replace and k > n:
        raise ValueError(f"random.choice: cannot take {k} samples from {n} without "
                         f"replacement")
    if p is not None:
        p = jnp.asarray(p)
        if aval_of(p).shape != (n,):
            raise ValueError(f"random.choice: p must have shape ({n},), got "
                             f"{aval_of(p).shape}")
        if not dtypes.is_float(aval_of(p).dtype):
            p = p.astype(dtypes.default_float())
    if replace:
        if p is None:
            idx = randint(key, (k,), 0, n)
        else:
            cdf = jnp.cumsum(p)
            u = uniform(key, (k,), aval_of(p).dtype) * cdf[-1]
            idx = jnp.sum(u[:, None] >= cdf[None, :], axis=1)
            idx = jnp.minimum(idx, n - 1).astype(dtypes.default_int())
    else:
        if p is None:
            idx = _random_order(key, n)[:k]
        else:
            g = gumbel(key, (n,), aval_of(p).dtype) + jnp.log(p)
            _, idx = lax.top_k(g, k)
    idx = jnp.reshape(idx, shape)
    if arr is None:
        return idx
    return jnp.take(arr, jnp.reshape(idx, (-1,)), axis=axis, mode="clip").reshape(
        aval_of(arr).shape[:axis] + shape + aval_of(arr).shape[axis + 1:])


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with equal probability. Example: ``random.rademacher(key, (4,))``."""
    dtype = dtypes.check_user_dtype(dtype or dtypes.default_int(), "random.rademacher")
    b = bernoulli(key, 0.5, _shape("rademacher", shape))
    return (2 * b.astype(dtype) - 1).astype(dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson samples of rate ``lam`` (inverse-CDF search for ``lam < 10``, a rounded normal
    approximation with continuity correction above).

    Example:
        >>> random.poisson(key, 3.0, (5,))
    """
    _check_key("poisson", key)
    dtype = dtypes.check_user_dtype(dtype or dtypes.default_int(), "random.poisson")
    ft = dtypes.default_float()
    lam = jnp.asarray(lam, ft)
    shape = _shape("poisson", aval_of(lam).shape if shape is None else shape)
    _check_broadcast("poisson", shape, lam)
    lam = jnp.broadcast_to(lam, shape)
    k1, k2 = split(key)
    u = uniform(k1, shape, ft)
    # inverse CDF over k = 0..K-1 (K covers lam < 10 up to a 1e-9 tail)
    K = 40
    ks = jnp.arange(K, dtype=ft)
    small = jnp.minimum(lam, 10.0)[..., None]
    logpmf = ks * jnp.log(jnp.maximum(small, 1e-30)) - small - lax.lgamma(ks + 1.0)
    cdf = jnp.cumsum(jnp.exp(logpmf), axis=-1)
    inv = jnp.sum(u[..., None] > cdf, axis=-1).astype(ft)
    z = normal(k2, shape, ft)
    approx = jnp.maximum(jnp.floor(lam + jnp.sqrt(lam) * z + 0.5), 0.0)
    out = jnp.where(lam < 10.0, inv, approx)
    return jnp.where(lam > 0, out, 0.0).astype(dtype)


# --- continuous, by transformation of uniforms ----------------------------------------------
def exponential(key, shape=(), dtype=None):
    """Exponential(1) samples. Example: ``random.exponential(key, (3,))``."""
    dtype = _float_dtype("exponential", dtype)
    u = _unit_uniform(key, _shape("exponential", shape), dtype)
    return -jnp.log1p(-u)


def laplace(key, shape=(), dtype=None):
    """Laplace(0, 1) samples. Example: ``random.laplace(key, (3,))``."""
    dtype = _float_dtype("laplace", dtype)
    u = uniform(key, _shape("laplace", shape), dtype, minval=-1.0, maxval=1.0)
    return -jnp.sign(u) * jnp.log1p(-jnp.abs(u))


def logistic(key, shape=(), dtype=None):
    """Standard logistic samples. Example: ``random.logistic(key, (3,))``."""
    dtype = _float_dtype("logistic", dtype)
    u = _open_uniform(key, _shape("logistic", shape), dtype)
    return jnp.log(u) - jnp.log1p(-u)


def gumbel(key, shape=(), dtype=None):
    """Standard Gumbel samples. Example: ``random.gumbel(key, (3,))``."""
    dtype = _float_dtype("gumbel", dtype)
    u = _open_uniform(key, _shape("gumbel", shape), dtype)
    return -jnp.log(-jnp.log(u))


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy samples. Example: ``random.cauchy(key, (3,))``."""
    dtype = _float_dtype("cauchy", dtype)
    u = _open_uniform(key, _shape("cauchy", shape), dtype)
    return jnp.tan(np.pi * (u - 0.5))


def pareto(key, b, shape=None, dtype=None):
    """Pareto samples with shape ``b`` (support ``x >= 1``). Example: ``random.pareto(key, 3.)``."""
    dtype = _float_dtype("pareto", dtype)
    b = jnp.asarray(b, dtype)
    shape = _shape("pareto", aval_of(b).shape if shape is None else shape)
    return jnp.exp(exponential(key, shape, dtype) / b)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull samples. Example: ``random.weibull_min(key, 1.0, 2.0, (3,))``."""
    dtype = _float_dtype("weibull_min", dtype)
    u = _open_uniform(key, _shape("weibull_min", shape), dtype)
    return jnp.asarray(scale, dtype) * jnp.power(-jnp.log(u), 1.0 / jnp.asarray(concentration,
                                                                                  dtype))


def maxwell(key, shape=(), dtype=None):
    """Maxwell samples (norm of a 3-D standard normal). Example: ``random.maxwell(key, (3,))``."""
    dtype = _float_dtype("maxwell", dtype)
    shape = _shape("maxwell", shape)
    z = normal(key, shape + (3,), dtype)
    return jnp.sqrt(jnp.sum(z * z, axis=-1))


def ball(key, d, p=2, shape=(), dtype=None):
    """Points uniform in the ``d``-dimensional unit p-ball. Example: ``random.ball(key, 3)``."""
    dtype = _float_dtype("ball", dtype)
    shape = _shape("ball", shape)
    k1, k2 = split(key)
    g = _gennorm(k1, shape + (d,), p, dtype)
    e = exponential(k2, shape, dtype)
    norm = jnp.power(jnp.sum(jnp.power(jnp.abs(g), p), axis=-1) + e, 1.0 / p)
    return g / norm[..., None]


def _gennorm(key, shape, p, dtype):
    """Generalized normal samples with density ~ exp(-|x|^p) (by gamma transformation)."""
    k1, k2 = split(key)
    g = gamma(k1, 1.0 / p, shape, dtype)
    r = rademacher(k2, shape, dtype)
    return r * jnp.power(g, 1.0 / p)


def orthogonal(key, n, shape=(), dtype=None):
    """Haar-random orthogonal ``n x n`` matrices. Example: ``random.orthogonal(key, 3)``."""
    dtype = _float_dtype("orthogonal", dtype)
    shape = _shape("orthogonal", shape)
    z = normal(key, shape + (n, n), dtype)
    from funcgrad.lax import linalg
    q, r = linalg.qr(z)
    d = jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1))
    d = jnp.where(d == 0, 1.0, d).astype(dtype)
    return q * d[..., None, :]


# --- gamma family -----------------------------------------------------------------------------
_GAMMA_TRIES = 16


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) samples (Marsaglia-Tsang, a fixed number of vectorized proposals; for
    ``a < 1`` a sample of ``a + 1`` is scaled by ``u ** (1 / a)``). Differentiable with
    respect to ``a`` by implicit reparameterization: ``dx/da = -(dF/da) / (dF/dx)`` with ``F``
    the Gamma CDF ``lax.igamma(a, x)``.

    Example:
        >>> random.gamma(key, 2.0, (3,))
    """
    _check_key("gamma", key)
    dtype = _float_dtype("gamma", dtype)
    ct = _compute_dtype(dtype)
    a = jnp.asarray(a, ct)
    shape = _shape("gamma", aval_of(a).shape if shape is None else shape)
    _check_broadcast("gamma", shape, a)
    a = jnp.broadcast_to(a, shape)
    out = _gamma_impl(key, lax.stop_gradient(a), shape, ct)
    out = _implicit_gamma_grad(a, out)
    return lax.convert_element_type(out, dtype)


def _implicit_gamma_identity(a, x):
    return x


def _implicit_gamma_jvp(primals, tangents):
    # x ~ Gamma(a) with CDF F(a, x): along a fixed quantile F(a, x) = u, so
    # dx/da = -(dF/da) / pdf(x).  dF/da comes from forward-mode differentiation of igamma.
    from funcgrad.core import ad_util
    from funcgrad.transforms.ad import jvp
    a, x = primals
    ta, _ = tangents
    if ad_util.is_zero(ta):
        return x, ad_util.Zero(ad_util.tangent_aval(aval_of(x)))
    a = lax.stop_gradient(a)
    x = lax.stop_gradient(x)
    safe_x = jnp.where(x > 0, x, 1.0)
    _, dcdf_da = jvp(lambda aa: lax.igamma(aa, safe_x), (a,), (jnp.ones_like(a),))
    log_pdf = (a - 1.0) * jnp.log(safe_x) - safe_x - lax.lgamma(a)
    dx_da = jnp.where(x > 0, -dcdf_da * jnp.exp(-log_pdf), 0.0)
    return x, ad_util.instantiate(ta) * dx_da


def _make_implicit_gamma():
    from funcgrad.transforms.custom_derivatives import custom_jvp
    f = custom_jvp(_implicit_gamma_identity)
    f.defjvp(_implicit_gamma_jvp)
    return f


_implicit_gamma_grad = _make_implicit_gamma()


def _gamma_impl(key, a, shape, ct):
    k_norm, k_unif, k_boost = split(key, 3)
    boost_needed = a < 1.0
    alpha = jnp.where(boost_needed, a + 1.0, a)
    d = alpha - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    z = normal(k_norm, (_GAMMA_TRIES,) + shape, ct)
    u = _open_uniform(k_unif, (_GAMMA_TRIES,) + shape, ct)
    v = 1.0 + c * z
    v3 = v * v * v
    safe_v3 = jnp.where(v3 > 0, v3, 1.0)
    accept = (v3 > 0) & (jnp.log(u) < 0.5 * z * z + d - d * safe_v3 + d * jnp.log(safe_v3))
    first = jnp.argmax(accept, axis=0)
    chosen = jnp.take_along_axis(safe_v3, first[None], axis=0, mode="clip")[0]
    sample = d * chosen
    ub = _open_uniform(k_boost, shape, ct)
    boost = jnp.where(boost_needed, jnp.exp(jnp.log(ub) / jnp.where(boost_needed, a, 1.0)),
                      1.0)
    out = sample * boost
    return jnp.where(a > 0, out, jnp.nan)


def loggamma(key, a, shape=None, dtype=None):
    """``log`` of Gamma(a) samples. Example: ``random.loggamma(key, 0.5, (3,))``."""
    return jnp.log(gamma(key, a, shape, dtype))


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) samples as ``X / (X + Y)`` with gamma X, Y.

    Example:
        >>> random.beta(key, 2.0, 5.0, (3,))
    """
    _check_key("beta", key)
    dtype = _float_dtype("beta", dtype)
    a, b = jnp.asarray(a, dtype), jnp.asarray(b, dtype)
    if shape is None:
        shape = np.broadcast_shapes(aval_of(a).shape, aval_of(b).shape)
    shape = _shape("beta", shape)
    ka, kb = split(key)
    x = gamma(ka, a, shape, dtype)
    y = gamma(kb, b, shape, dtype)
    return x / (x + y)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) samples on the simplex (last axis); ``shape`` is the batch shape.

    Example:
        >>> random.dirichlet(key, jnp.array([1., 2., 3.]), (4,))
    """
    _check_key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    alpha = jnp.asarray(alpha, dtype)
    aa = aval_of(alpha)
    if aa.ndim < 1:
        raise ValueError(f"random.dirichlet: alpha must have at least one axis, got "
                         f"{aa.str_short()}")
    if shape is None:
        shape = aa.shape[:-1]
    shape = _shape("dirichlet", shape)
    g = gamma(key, alpha, shape + aa.shape[-1:], dtype)
    return g / jnp.sum(g, axis=-1, keepdims=True)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square samples with ``df`` degrees of freedom. Example: ``random.chisquare(key, 3.)``."""
    dtype = _float_dtype("chisquare", dtype)
    df = jnp.asarray(df, dtype)
    shape = _shape("chisquare", aval_of(df).shape if shape is None else shape)
    return 2.0 * gamma(key, df / 2.0, shape, dtype)


def t(key, df, shape=(), dtype=None):
    """Student's t samples. Example: ``random.t(key, 5.0, (3,))``."""
    dtype = _float_dtype("t", dtype)
    df = jnp.asarray(df, dtype)
    shape = _shape("t", shape)
    kn, kg = split(key)
    z = normal(kn, shape, dtype)
    g = gamma(kg, df / 2.0, shape, dtype)
    return z * jnp.sqrt(df / (2.0 * g))


# --- eager fast path ------------------------------------------------------------------------
# A sampler is dozens of small integer/float ops; run eagerly op by op, each would compile its
# own executable. Called eagerly (the root interpreter is current), the samplers below run as
# one cached jit executable per (shapes, dtypes, static options) instead; under any
# transformation they trace inline as before.
_STATIC = {
    "split": ("num",), "fold_in": (), "bits": ("shape", "dtype"),
    "uniform": ("shape", "dtype"), "normal": ("shape", "dtype"),
    "truncated_normal": ("shape", "dtype"), "lognormal": ("shape", "dtype"),
    "multivariate_normal": ("shape", "dtype", "method"), "bernoulli": ("shape",),
    "randint": ("shape", "dtype"), "categorical": ("axis", "shape", "replace"),
    "permutation": ("x", "axis", "independent"), "choice": ("a", "shape", "replace", "axis"),
    "rademacher": ("shape", "dtype"), "poisson": ("shape", "dtype"),
    "exponential": ("shape", "dtype"), "laplace": ("shape", "dtype"),
    "logistic": ("shape", "dtype"), "gumbel": ("shape", "dtype"), "cauchy": ("shape", "dtype"),
    "pareto": ("shape", "dtype"), "weibull_min": ("shape", "dtype"),
    "maxwell": ("shape", "dtype"), "ball": ("d", "p", "shape", "dtype"),
    "orthogonal": ("n", "shape", "dtype"), "gamma": ("shape", "dtype"),
    "loggamma": ("shape", "dtype"), "beta": ("shape", "dtype"),
    "dirichlet": ("shape", "dtype"), "chisquare": ("shape", "dtype"), "t": ("shape", "dtype"),
}
jit_when_eager_in(globals(), _STATIC)
