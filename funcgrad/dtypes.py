"""Dtype helpers under ``jax.dtypes``' names: ``canonicalize_dtype``, ``float0``,
``bfloat16``, ``issubdtype``, ``result_type``, ``finfo``/``iinfo``, ``scalar_type_of``.

Example:
    >>> import funcgrad.dtypes
    >>> funcgrad.dtypes.canonicalize_dtype(np.float64)     # 64-bit types are off by default
    dtype('float32')
    >>> funcgrad.dtypes.float0
    dtype([('float0', 'V')])
"""
import numpy as np

from funcgrad.core import dtypes as _core
from funcgrad.numpy import bfloat16, finfo, iinfo, issubdtype, result_type

__all__ = ["bfloat16", "canonicalize_dtype", "finfo", "float0", "iinfo", "issubdtype",
           "result_type", "scalar_type_of"]

float0 = _core.float0


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """``dtype`` as funcgrad stores it: 64-bit types become 32-bit unless x64 is on.

    Example:
        >>> import funcgrad.dtypes
        >>> funcgrad.dtypes.canonicalize_dtype(np.int64)
        dtype('int32')
    """
    return np.dtype(_core.canonicalize(dtype))


def scalar_type_of(x):
    """The Python scalar type (bool, int, float or complex) of ``x``'s dtype.

    Example:
        >>> import funcgrad.dtypes
        >>> funcgrad.dtypes.scalar_type_of(jnp.ones(2, jnp.int8)), funcgrad.dtypes.scalar_type_of(1.5)
        (<class 'int'>, <class 'float'>)
    """
    dt = np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)
    if dt == np.bool_:
        return bool
    if dt.kind in "iu":
        return int
    if dt.kind == "c":
        return complex
    if dt.kind == "f" or dt == np.dtype(bfloat16):
        return float
    raise TypeError(f"scalar_type_of: no Python scalar type for dtype {dt}")
