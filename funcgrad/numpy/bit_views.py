"""Reinterpreting an array's bytes: ``view`` (another dtype over the same bytes) and ``byteswap``.

Both go through the array's little-endian bytes as uint8 (shifts and masks of unsigned
integers), so they work eagerly and under ``jit``/``vmap`` without a host copy.

Example:
    >>> from funcgrad.numpy.bit_views import view
    >>> view(jnp.array([1.0], jnp.float32), jnp.uint32)
    Array([1065353216], dtype=uint32)
"""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of

_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
         8: np.dtype(np.uint64)}


def _as_unsigned(x):
    """``x``'s bits as an unsigned integer array of the same width (bool: uint8)."""
    dt = aval_of(x).dtype
    if dt == np.bool_:
        return lax.convert_element_type(x, np.uint8)
    if dt.kind == "c":
        raise TypeError(f"Array.view/byteswap: complex dtype {dt} is not supported; view "
                        f"x.real and x.imag separately")
    u = _UINT[dt.itemsize]
    return x if dt == u else lax.bitcast_convert_type(x, u)


def _from_unsigned(u, dtype):
    if dtype == np.bool_:
        return lax.ne(u, lax.full((), 0, np.uint8))
    return u if aval_of(u).dtype == dtype else lax.bitcast_convert_type(u, dtype)


def _to_bytes(u):
    """(..., n) unsigned -> (..., n * width) uint8, little-endian byte order."""
    aval = aval_of(u)
    width = aval.dtype.itemsize
    if width == 1:
        return u
    parts = []
    for i in range(width):
        shifted = lax.shift_right_logical(u, lax.full(aval.shape, 8 * i, aval.dtype))
        parts.append(lax.convert_element_type(shifted, np.uint8))
    stacked = lax.concatenate([lax.expand_dims(p, (aval.ndim,)) for p in parts], aval.ndim)
    return lax.reshape(stacked, aval.shape[:-1] + (aval.shape[-1] * width,))


def _from_bytes(b, width):
    """(..., n * width) uint8 -> (..., n) unsigned of ``width`` bytes (little-endian)."""
    aval = aval_of(b)
    if width == 1:
        return b
    u = _UINT[width]
    out_shape = aval.shape[:-1] + (aval.shape[-1] // width,)
    grouped = lax.reshape(b, out_shape + (width,))
    acc = None
    for i in range(width):
        byte = lax.convert_element_type(
            lax.squeeze(lax.slice_in_dim(grouped, i, i + 1, axis=len(out_shape)),
                        (len(out_shape),)), u)
        term = lax.shift_left(byte, lax.full(out_shape, 8 * i, u))
        acc = term if acc is None else lax.bitwise_or(acc, term)
    return acc


def view(x, dtype=None, type=None):
    """The same bytes read as ``dtype`` (as ``ndarray.view``): with a different item size the
    last axis is resized so that its bytes stay the same.

    Example:
        >>> jnp.array([1.0], jnp.float32).view(jnp.int32)
        Array([1065353216], dtype=int32)
    """
    if type is not None:
        raise ValueError(f"Array.view: the type argument is not supported (got {type!r}); "
                         f"funcgrad arrays have a single array type")
    if dtype is None:
        return x
    aval = aval_of(x)
    new = np.dtype(dtypes.canonicalize(np.dtype(dtype)))
    old = aval.dtype
    if new == old:
        return x
    if new.kind == "c":
        raise TypeError(f"Array.view: complex dtype {new} is not supported")
    if old.itemsize == new.itemsize:
        return _from_unsigned(_as_unsigned(x), new)
    if aval.ndim == 0:
        raise ValueError(f"Array.view: changing the item size ({old} -> {new}) needs at least "
                         f"one axis, got a 0-d array")
    nbytes = aval.shape[-1] * old.itemsize
    if nbytes % new.itemsize:
        raise ValueError(f"Array.view: the last axis of {aval.str_short()} holds {nbytes} bytes, "
                         f"not a multiple of {new}'s item size {new.itemsize}")
    b = _to_bytes(_as_unsigned(x))
    return _from_unsigned(_from_bytes(b, new.itemsize), new)


def byteswap(x, inplace=False):
    """``x`` with the bytes of every element reversed (as ``ndarray.byteswap``; never in place).

    Example:
        >>> jnp.array([1], jnp.uint16).byteswap()
        Array([256], dtype=uint16)
    """
    if inplace:
        raise ValueError("Array.byteswap: funcgrad arrays are immutable; use inplace=False")
    aval = aval_of(x)
    width = aval.dtype.itemsize
    if width == 1 or aval.dtype == np.bool_:
        return x
    u = _as_unsigned(x)
    flat = lax.reshape(u, aval.shape + (1,))
    b = _to_bytes(flat)
    swapped = lax.rev(b, (aval.ndim,))
    out = lax.reshape(_from_bytes(swapped, width), aval.shape)
    return _from_unsigned(out, aval.dtype)
