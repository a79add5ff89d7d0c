"""The Threefry-2x32 generator behind ``funcgrad.random``: the cipher, seeding, ``split``,
``fold_in`` and raw bits, laid out exactly as ``jax.random`` lays them out.

A key is a ``uint32[2]`` array. Every output word is the Threefry-2x32 encryption (20 rounds,
Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) of a counter under the
key. Two counter layouts exist, chosen by ``funcgrad.config.threefry_partitionable`` (JAX's
``jax_threefry_partitionable``, on by default as in JAX 0.10):

* partitionable (default): element ``i`` of an output of any shape encrypts the 64-bit counter
  ``i`` split into its (high, low) 32-bit words; a 32-bit sample is the xor of the two cipher
  words, a 64-bit sample their concatenation, an 8/16-bit sample the low bits of the xor.
* original: ``n`` words come from encrypting ``iota(n)`` laid out as two halves (padded with a
  zero word when ``n`` is odd); 64-bit samples join the first and second halves of ``2n``
  words, 8/16-bit samples are the bytes/halves of the 32-bit words, low ones first.

The cipher is ordinary uint32 arithmetic, so ``jit``, ``vmap`` over keys and ``grad`` of code
using samples need no special rules.

Example:
    >>> from funcgrad.random import prng
    >>> k = prng.seed(0)
    >>> prng.random_bits(k, 32, (3,))
    Array([4070199207, 4202968722, 1427181096], dtype=uint32)
"""
import math

import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.config import config
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.transforms.jit import jit

_U32 = dtypes.uint32
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def _check_switch(value):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"funcgrad.config.update: threefry_partitionable must be True or False, "
                        f"got {value!r}")


config.validate_with("threefry_partitionable", _check_switch)


def partitionable():
    """Whether the partitionable counter layout is in effect (``config.threefry_partitionable``).

    Example:
        >>> from funcgrad.random import prng
        >>> prng.partitionable()
        True
    """
    return bool(config.threefry_partitionable)


# --- the cipher -------------------------------------------------------------------------------
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


def check_key(name, key):
    """``key`` if it is a single key (``uint32[2]``), else a TypeError naming ``name``."""
    aval = aval_of(key)
    if aval.shape != (2,) or aval.dtype != _U32:
        raise TypeError(f"random.{name}: expected a key (uint32[2], from random.key or "
                        f"random.split), got {aval.str_short()}; for a batch of keys use "
                        f"funcgrad.vmap")
    return key


def threefry2x32(key, x0, x1):
    """Encrypt the uint32 counter pairs ``(x0, x1)`` (equal shapes) under ``key``.

    Example:
        >>> y0, y1 = random.threefry2x32(random.key(0), jnp.arange(4, dtype="uint32"),
        ...                              jnp.zeros(4, "uint32"))
    """
    key = check_key("threefry2x32", key)
    x0 = jnp.asarray(x0, _U32)
    x1 = jnp.asarray(x1, _U32)
    shape = aval_of(x0).shape
    if aval_of(x1).shape != shape:
        raise ValueError(f"random.threefry2x32: counter halves must have equal shapes, got "
                         f"{shape} and {aval_of(x1).shape}")
    k0 = lax.broadcast_in_dim(lax.squeeze(lax.slice(key, (0,), (1,)), (0,)), shape, ())
    k1 = lax.broadcast_in_dim(lax.squeeze(lax.slice(key, (1,), (2,)), (0,)), shape, ())
    return _threefry_jit(k0, k1, x0, x1)


def _encrypt_count(key, count):
    """JAX's ``threefry_2x32(key, count)``: the flat counter split in two halves (a zero word
    appended when its length is odd), encrypted, and joined back to ``count``'s shape."""
    shape = aval_of(count).shape
    flat = lax.reshape(count, (_size(shape),))
    n = _size(shape)
    if n % 2:
        flat = lax.concatenate([flat, lax.full((1,), 0, _U32)], 0)
    half = (n + 1) // 2
    y0, y1 = threefry2x32(key, lax.slice(flat, (0,), (half,)),
                          lax.slice(flat, (half,), (2 * half,)))
    out = lax.concatenate([y0, y1], 0)
    if n % 2:
        out = lax.slice(out, (0,), (n,))
    return lax.reshape(out, shape)


def _iota_2x32(shape):
    """The 64-bit row-major index of every element of ``shape`` as (high, low) uint32 words."""
    n = _size(shape)
    if n >= 2 ** 32:
        raise ValueError(f"random: cannot draw {n} values (shape {shape}) in one call; the "
                         f"limit is 2**32 - 1, split the key and draw in pieces")
    lo = lax.reshape(lax.iota(_U32, n), shape) if shape else lax.full((), 0, _U32)
    return lax.full(shape, 0, _U32), lo


def _size(shape):
    return int(math.prod(shape))


# --- key operations ---------------------------------------------------------------------------
def seed(value):
    """A key from an integer seed, as ``jax.random.PRNGKey``: with 64-bit types enabled a
    64-bit seed gives ``[high word, low word]``; otherwise the seed is taken modulo 2**32 and
    the high word is 0.

    Example:
        >>> from funcgrad.random import prng
        >>> prng.seed(42)
        Array([ 0, 42], dtype=uint32)
    """
    x64 = bool(config.enable_x64)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return _traced_seed(value)
    v = int(value)
    if isinstance(value, np.integer) and np.dtype(type(value)).itemsize <= 4:
        hi, lo = 0, v & 0xFFFFFFFF
    elif x64:
        if not -2 ** 63 <= v < 2 ** 64:
            raise OverflowError(f"random.key: seed {v} does not fit in 64 bits")
        v &= 0xFFFFFFFFFFFFFFFF
        hi, lo = v >> 32, v & 0xFFFFFFFF
    else:
        hi, lo = 0, v & 0xFFFFFFFF
    return jnp.asarray(np.array([hi, lo], np.uint32))


def _traced_seed(value):
    aval = aval_of(value)
    if aval.shape != () or not dtypes.is_integer(aval.dtype) or aval.dtype == np.bool_:
        raise TypeError(f"random.key: seed must be an integer scalar, got {aval.str_short()}")
    if aval.dtype.itemsize == 8:
        hi = lax.convert_element_type(
            lax.shift_right_logical(value, lax.full((), 32, aval.dtype)), _U32)
    else:
        hi = lax.full((), 0, _U32)
    lo = lax.convert_element_type(value, _U32)
    return jnp.stack([hi, lo])


def split(key, shape):
    """``prod(shape)`` new keys from ``key`` as a ``uint32[*shape, 2]`` array.

    Example:
        >>> from funcgrad.random import prng
        >>> k = prng.seed(0)
        >>> prng.split(k, (3,))
        Array([[1797259609, 2579123966],
               [ 928981903, 3453687069],
               [4146024105, 2718843009]], dtype=uint32)
    """
    shape = tuple(shape)
    if partitionable():
        hi, lo = _iota_2x32(shape)
        k0, k1 = threefry2x32(key, hi, lo)
        return jnp.stack([k0, k1], axis=len(shape))
    counts = lax.iota(_U32, 2 * _size(shape))
    return lax.reshape(_encrypt_count(key, counts), shape + (2,))


def fold_in(key, data):
    """A new key from ``key`` and a uint32 scalar ``data`` (the same under both layouts).

    Example:
        >>> from funcgrad.random import prng
        >>> k = prng.seed(0)
        >>> prng.fold_in(k, jnp.asarray(3, "uint32"))
        Array([2467461003, 3840466878], dtype=uint32)
    """
    data = lax.reshape(data, (1,))
    return _encrypt_count(key, lax.concatenate([lax.full((1,), 0, _U32), data], 0))


def random_bits(key, bit_width, shape):
    """Uniform unsigned integers of ``bit_width`` (8, 16, 32 or 64) bits and ``shape``.

    Example:
        >>> from funcgrad.random import prng
        >>> k = prng.seed(0)
        >>> prng.random_bits(k, 8, (4,))
        Array([167, 146,  40,  53], dtype=uint8)
    """
    shape = tuple(shape)
    dtype = dtypes.canonicalize(_UINT[bit_width])
    if np.dtype(dtype).itemsize * 8 != bit_width:
        raise TypeError(f"random.bits: {bit_width}-bit values need 64-bit types; enable them "
                        f"with funcgrad.config.update('enable_x64', True)")
    if partitionable():
        hi, lo = _iota_2x32(shape)
        b1, b2 = threefry2x32(key, hi, lo)
        if bit_width == 64:
            b1 = lax.convert_element_type(b1, dtype)
            b2 = lax.convert_element_type(b2, dtype)
            return jnp.bitwise_or(jnp.left_shift(b1, dtype.type(32)), b2)
        out = jnp.bitwise_xor(b1, b2)
        return out if bit_width == 32 else lax.convert_element_type(out, dtype)
    return _bits_original(key, bit_width, shape, dtype)


def _bits_original(key, bit_width, shape, dtype):
    size = _size(shape)
    nwords = -(-bit_width * size // 32)
    if nwords >= 2 ** 32 - 1:
        raise ValueError(f"random: cannot draw {size} {bit_width}-bit values (shape {shape}) "
                         f"in one call with the original Threefry layout; split the key and "
                         f"draw in pieces")
    words = _encrypt_count(key, lax.iota(_U32, nwords))
    if bit_width == 64:
        hi = lax.convert_element_type(lax.slice(words, (0,), (size,)), dtype)
        lo = lax.convert_element_type(lax.slice(words, (size,), (2 * size,)), dtype)
        out = jnp.bitwise_or(jnp.left_shift(hi, dtype.type(32)), lo)
    elif bit_width == 32:
        out = words
    else:
        per_word = 32 // bit_width
        shifts = lax.broadcast_in_dim(
            np.arange(per_word, dtype=np.uint32) * np.uint32(bit_width), (nwords, per_word),
            (1,))
        pieces = lax.shift_right_logical(lax.broadcast_in_dim(words, (nwords, per_word), (0,)),
                                         shifts)
        pieces = jnp.bitwise_and(pieces, np.uint32(2 ** bit_width - 1))
        out = lax.convert_element_type(lax.reshape(pieces, (nwords * per_word,)), dtype)
        out = lax.slice(out, (0,), (size,))
    return lax.reshape(out, shape)
