"""Axis numbers: a negative axis counts from the end. Every layer canonicalizes and checks axes
here, so the rule and the error are the same everywhere.

Example:
    >>> from funcgrad.core.axes import canonicalize_axes, canonicalize_axis
    >>> canonicalize_axis(-1, 3, "lax.reduce_sum")
    2
    >>> canonicalize_axes((0, -1), 3, "funcgrad.numpy.sum")
    (0, 2)
"""
from funcgrad.core import errors


def canonicalize_axis(axis, ndim, where):
    """``axis`` as a number in ``[0, ndim)``; ``AxisError`` naming ``where`` (the function)
    when it is out of bounds.

    Example:
        >>> from funcgrad.core.axes import canonicalize_axis
        >>> canonicalize_axis(3, 2, "lax.cumsum")
        Traceback (most recent call last):
        ...
        funcgrad.core.errors.AxisError: lax.cumsum: axis 3 is out of bounds for an array of rank 2
    """
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise errors.AxisError(f"{where}: axis {axis} is out of bounds for an array of rank "
                               f"{ndim}")
    return axis % ndim


def canonicalize_axes(axes, ndim, where, allow_repeats=False):
    """A tuple of canonical axes (in the given order) from ``axes`` (an int or a sequence);
    repeated axes are an ``AxisError`` unless ``allow_repeats``."""
    if isinstance(axes, (list, tuple)):
        out = tuple(canonicalize_axis(a, ndim, where) for a in axes)
    else:
        out = (canonicalize_axis(axes, ndim, where),)
    if not allow_repeats and len(set(out)) != len(out):
        raise errors.AxisError(f"{where}: repeated axis in {axes}")
    return out
