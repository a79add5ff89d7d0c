"""Making and deriving keys: ``key``/``PRNGKey``, ``split``, ``fold_in``, ``key_data``,
``wrap_key_data``, ``clone``. Keys are ``uint32[2]`` arrays holding the same words as JAX's
keys for the same seed (``jax.random.key_data(jax.random.key(s))``).

Example:
    >>> import funcgrad.random as random
    >>> k1, k2 = random.split(random.key(0))
"""
import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.random import prng

_U32 = dtypes.uint32


def key(seed):
    """A key from an integer seed (the same words as ``jax.random.key``/``PRNGKey``: the seed
    modulo 2**32 in the low word; with 64-bit types enabled, its high 32 bits in the high word).

    Example:
        >>> k = random.key(42)
    """
    return prng.seed(seed)


PRNGKey = key


def key_data(keys):
    """The raw ``uint32`` data of a key (keys are raw already). Example: ``key_data(k)``."""
    return keys


def wrap_key_data(data):
    """A key from raw ``uint32[2]`` data. Example: ``wrap_key_data(jnp.array([0, 1], "uint32"))``."""
    return prng.check_key("wrap_key_data", jnp.asarray(data, _U32))


def clone(k):
    """A copy of key ``k`` (keys are immutable values). Example: ``random.clone(k)``."""
    return k


def split(key, num=2):
    """New keys from ``key``: ``num`` of them as ``uint32[num, 2]``, or for a tuple ``num``
    an array of keys of that shape (``uint32[*num, 2]``).

    Example:
        >>> k1, k2, k3 = random.split(random.key(0), 3)
    """
    prng.check_key("split", key)
    shape = tuple(int(d) for d in num) if isinstance(num, (tuple, list)) else (int(num),)
    if any(d < 0 for d in shape):
        raise ValueError(f"random.split: the number of keys must be >= 0, got {num!r}")
    return prng.split(key, shape)


def fold_in(key, data):
    """A new key from ``key`` and an integer ``data`` (e.g. a step number), taken modulo 2**32.

    Example:
        >>> key = random.key(0)
        >>> step = 3
        >>> k_step = random.fold_in(key, step)
        >>> random.uniform(k_step, (2,))
        Array([0.26698947, 0.73395014], dtype=float32)
    """
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        # as a uint32 array, so one executable serves every step number
        data = np.uint32(int(data) & 0xFFFFFFFF)
    return _fold_in(key, data)


def _fold_in(key, data):
    prng.check_key("fold_in", key)
    d = jnp.asarray(data)
    if aval_of(d).shape != ():
        raise TypeError(f"random.fold_in: data must be a scalar, got {aval_of(d).str_short()}; "
                        f"use funcgrad.vmap for a batch")
    return prng.fold_in(key, lax.convert_element_type(d, _U32))
