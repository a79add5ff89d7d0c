"""``jnp.float32`` and friends: dtypes that can also be called, as in JAX.

``jnp.float32(1.5)`` makes a float32 Array (not weakly typed); ``jnp.float32`` also works
wherever NumPy takes a dtype (``np.dtype(jnp.float32)``, ``x.astype(jnp.float32)``,
``x.dtype == jnp.float32``), because it carries a ``dtype`` attribute that NumPy reads.

Example:
    >>> jnp.float32(2)
    Array(2., dtype=float32)
    >>> jnp.zeros(3, jnp.int8).dtype == jnp.int8
    True
"""
import numpy as np


class _ScalarType(type):
    """Metaclass of the callable scalar types: calling one converts to an Array of its dtype."""

    def __call__(cls, value=0):
        from funcgrad.numpy.creation import asarray
        return asarray(value, dtype=cls.dtype)

    def __instancecheck__(cls, instance):
        # NumPy scalars of the same type (np.float32(1.0)) are instances, as in JAX.
        return isinstance(instance, cls.dtype.type)

    def __repr__(cls):
        return f"<class 'funcgrad.numpy.{cls.__name__}'>"


def scalar_type(dtype):
    """The callable scalar type for ``dtype``."""
    dtype = np.dtype(dtype)
    name = dtype.name if dtype != np.dtype(bool) else "bool_"
    return _ScalarType(name, (), {"dtype": dtype, "__doc__": f"The {dtype.name} dtype; "
                                  f"calling it converts a value to a {dtype.name} Array."})
