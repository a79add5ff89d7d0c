"""The errors funcgrad raises that programs catch, under ``jax.errors``' names.

Example:
    >>> import funcgrad.errors
    >>> try:
    ...     funcgrad.jit(lambda x: 1 if x > 0 else 0)(1.0)
    ... except funcgrad.errors.ConcretizationTypeError:
    ...     print("caught")
    caught
"""
from jaxlib._jax import JaxRuntimeError

from funcgrad.core.errors import (ConcretizationTypeError, TracerArrayConversionError,
                                  UnexpectedTracerError)

__all__ = ["ConcretizationTypeError", "JaxRuntimeError", "TracerArrayConversionError",
           "UnexpectedTracerError"]
