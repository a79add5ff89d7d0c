"""funcgrad.scipy.integrate: numerical integration of sampled functions (as
``jax.scipy.integrate``).

Example:
    >>> from funcgrad.scipy import integrate
    >>> integrate.trapezoid(jnp.array([1.0, 2.0, 3.0]), dx=0.5)
    Array(2., dtype=float32)
"""
from funcgrad.numpy.math_extra import trapezoid as _trapezoid

__all__ = ["trapezoid"]


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of ``y`` along ``axis`` by the trapezoidal rule, at sample points ``x``
    (1-d, or the shape of ``y``) or with spacing ``dx``.

    Example:
        >>> from funcgrad.scipy import integrate
        >>> integrate.trapezoid(jnp.array([0.0, 1.0, 4.0]), x=jnp.array([0.0, 1.0, 2.0]))
        Array(3., dtype=float32)
    """
    return _trapezoid(y, x, dx, axis)
