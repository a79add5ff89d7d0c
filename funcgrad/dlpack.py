"""Zero-copy exchange with other array libraries through DLPack (``jax.dlpack``).

Example:
    >>> import funcgrad.dlpack
    >>> x = funcgrad.dlpack.from_dlpack(np.arange(3.0))
    >>> x
    Array([0., 1., 2.], dtype=float32)
    >>> np.from_dlpack(x)
    array([0., 1., 2.], dtype=float32)
"""
import numpy as np

from funcgrad.lowering.array import Array, from_dlpack

__all__ = ["from_dlpack", "to_dlpack", "is_supported_dtype"]

_SUPPORTED = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64", "complex128"}


def to_dlpack(x, stream=None):
    """A DLPack capsule sharing ``x``'s buffer (consumers: ``np.from_dlpack``, torch's...).

    Example:
        >>> import funcgrad.dlpack
        >>> capsule = funcgrad.dlpack.to_dlpack(jnp.arange(3))
        >>> type(capsule).__name__
        'PyCapsule'
    """
    if not isinstance(x, Array):
        raise TypeError(f"to_dlpack: expected a funcgrad Array, got {type(x).__name__}")
    return x.__dlpack__(stream=stream)


def is_supported_dtype(dtype):
    """Whether arrays of ``dtype`` can be exchanged through DLPack.

    Example:
        >>> import funcgrad.dlpack
        >>> funcgrad.dlpack.is_supported_dtype(np.float32)
        True
    """
    return np.dtype(dtype).name in _SUPPORTED
