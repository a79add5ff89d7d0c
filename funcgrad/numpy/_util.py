"""Argument handling shared by funcgrad.numpy: conversion, promotion, broadcasting, axes."""
import warnings

import numpy as np

from funcgrad import lax
from funcgrad.config import config
from funcgrad.core import axes as core_axes, dtypes
from funcgrad.core.interpreters import Value
from funcgrad.core.values import PYTHON_SCALARS, aval_of


def check_arraylike(fname, *args):
    for i, a in enumerate(args):
        if not isinstance(a, (Value, np.ndarray, np.generic) + PYTHON_SCALARS):
            if isinstance(a, (list, tuple)):
                raise TypeError(f"funcgrad.numpy.{fname}: argument {i} is a {type(a).__name__}; "
                                f"convert it with jnp.asarray first (funcgrad does not treat "
                                f"lists as arrays implicitly, as JAX)")
            raise TypeError(f"funcgrad.numpy.{fname}: argument {i} of type "
                            f"{type(a).__name__} is not an array")


def canonical_dtype(dtype, fname="numpy"):
    """The stored dtype for a user's ``dtype=`` argument of ``fname`` (warns when narrowed)."""
    return dtypes.check_user_dtype(dtype, fname) if dtype is not None else None


def shape_of(x):
    return aval_of(x).shape


def promote_dtypes(*args):
    """Convert ``args`` to their common dtype (JAX's promotion lattice, weak scalars)."""
    if len(args) == 2:
        a, b = args
        if type(a) is type(b) and isinstance(a, Value) and a.aval.dtype == b.aval.dtype \
                and a.aval.weak_type == b.aval.weak_type:
            return list(args)
    dtype, weak = dtypes.result_type_and_weak(*args)
    out = []
    for a in args:
        av = aval_of(a)
        if av.dtype != dtype or (av.weak_type != weak and isinstance(a, Value)):
            a = lax.convert_element_type(a, dtype, weak)
        elif isinstance(a, PYTHON_SCALARS):
            a = np.asarray(a, dtype)[()] if not weak else a
        out.append(a)
    return out


def broadcast_shapes(fname, *shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"funcgrad.numpy.{fname}: shapes {', '.join(map(str, shapes))} cannot "
                         f"be broadcast together") from None


def broadcast_to_shape(x, shape):
    xs = shape_of(x)
    if xs == tuple(shape):
        return x
    nlead = len(shape) - len(xs)
    if nlead < 0:
        raise ValueError(f"cannot broadcast {xs} to {shape}")
    squeeze_dims = [i for i, d in enumerate(xs) if d == 1 and shape[nlead + i] != 1]
    if squeeze_dims:
        x = lax.squeeze(x, squeeze_dims)
    kept = [i for i in range(len(xs)) if i not in squeeze_dims]
    return lax.broadcast_in_dim(x, shape, [nlead + i for i in kept])


_rank_promotion = [config.numpy_rank_promotion]     # mirrors the option (read per broadcast)
config.on_change(lambda name, value: _rank_promotion.__setitem__(0, value)
                 if name == "numpy_rank_promotion" else None)


def check_rank_promotion(fname, shapes):
    """Warn or raise (``numpy_rank_promotion("warn" | "raise")``) when operands of ``fname``
    of different non-zero ranks would be broadcast: NumPy's implicit rank promotion.

    Example:
        >>> from funcgrad.numpy._util import check_rank_promotion
        >>> with funcgrad.numpy_rank_promotion("raise"):
        ...     check_rank_promotion("add", [(2, 3), ()])        # a scalar: allowed
        ...     check_rank_promotion("add", [(2, 3), (3,)])
        Traceback (most recent call last):
        ...
        ValueError: funcgrad.numpy.add: operands of shapes (2, 3) (3,) would be broadcast by implicit rank promotion, which numpy_rank_promotion='raise' forbids; add the leading axes explicitly (x[None, :] or jnp.expand_dims) or use funcgrad.numpy_rank_promotion('allow').
    """
    level = _rank_promotion[0]
    if level == "allow" or len({len(s) for s in shapes if s}) < 2:
        return
    listed = " ".join(str(tuple(s)) for s in shapes)
    if level == "raise":
        raise ValueError(f"funcgrad.numpy.{fname}: operands of shapes {listed} would be "
                         f"broadcast by implicit rank promotion, which "
                         f"numpy_rank_promotion='raise' forbids; add the leading axes "
                         f"explicitly (x[None, :] or jnp.expand_dims) or use "
                         f"funcgrad.numpy_rank_promotion('allow').")
    warnings.warn(f"funcgrad.numpy.{fname}: following NumPy's implicit rank promotion on "
                  f"shapes {listed}; set numpy_rank_promotion to 'allow' to silence this "
                  f"warning, or to 'raise' to make it an error.", stacklevel=4)


def promote_and_broadcast(fname, *args):
    args = promote_dtypes(*args)
    shapes = [shape_of(a) for a in args]
    if all(s == shapes[0] for s in shapes[1:]):
        return args
    check_rank_promotion(fname, shapes)
    shape = broadcast_shapes(fname, *shapes)
    return [broadcast_to_shape(a, shape) for a in args]


def canonicalize_axis(fname, axis, ndim):
    """``axis`` of ``funcgrad.numpy.<fname>`` in ``[0, ndim)``; a 0-d array takes axis 0."""
    if ndim == 0 and int(axis) == 0:
        return 0
    return core_axes.canonicalize_axis(axis, ndim, f"funcgrad.numpy.{fname}")


def canonicalize_axes(fname, axis, ndim):
    """The axes of ``funcgrad.numpy.<fname>`` (None: all of them), canonical, not repeated."""
    if axis is None:
        return tuple(range(ndim))
    if ndim == 0:
        return tuple(canonicalize_axis(fname, a, ndim) for a in (
            axis if isinstance(axis, (tuple, list)) else (axis,)))
    return core_axes.canonicalize_axes(axis, ndim, f"funcgrad.numpy.{fname}")


def to_inexact(x):
    """Promote integer/bool inputs to the default float type (NumPy's true-division rule)."""
    av = aval_of(x)
    if dtypes.is_inexact(av.dtype):
        return x
    return lax.convert_element_type(x, dtypes.default_float(), av.weak_type)
