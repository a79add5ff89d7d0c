"""Reductions that ignore NaN: nansum, nanprod, nanmax, nanmin, nanargmax, nanargmin, nanmean,
nanvar, nanstd, nancumsum, nancumprod.

Slices with only NaN give NaN for nanmax/nanmin/nanmean/nanvar (NumPy warns and does the same)
and -1 for nanargmax/nanargmin (NumPy raises; a traced function cannot).
"""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.numpy import reductions as red
from funcgrad.numpy import ufuncs as uf
from funcgrad.numpy._util import check_arraylike, promote_dtypes, to_inexact


def _prep(name, a):
    check_arraylike(name, a)
    return promote_dtypes(a)[0]


def _replace_nan(a, value):
    dt = aval_of(a).dtype
    if not dtypes.is_inexact(dt):
        return a
    return uf.where(uf.isnan(a), np.asarray(value, dt), a)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Sum treating NaN as 0. Example: ``jnp.nansum(jnp.array([1.0, jnp.nan, 2.0]))``."""
    a = _prep("nansum", a)
    return red.sum(_replace_nan(a, 0), axis=axis, dtype=dtype, keepdims=keepdims,
                   initial=initial, where=where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Product treating NaN as 1. Example: ``jnp.nanprod(jnp.array([2.0, jnp.nan, 3.0]))``."""
    a = _prep("nanprod", a)
    return red.prod(_replace_nan(a, 1), axis=axis, dtype=dtype, keepdims=keepdims,
                    initial=initial, where=where)


def _nan_extreme(name, reduce_fn, fill):
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        a = _prep(name, a)
        dt = aval_of(a).dtype
        if not dtypes.is_inexact(dt):
            return reduce_fn(a, axis=axis, keepdims=keepdims, initial=initial, where=where)
        nan_mask = uf.isnan(a)
        r = reduce_fn(_replace_nan(a, fill), axis=axis, keepdims=keepdims, initial=initial,
                      where=where)
        valid = uf.logical_not(nan_mask)
        any_valid = red.any(valid if where is None else uf.logical_and(valid, where),
                            axis=axis, keepdims=keepdims)
        if initial is not None:
            return r
        return uf.where(any_valid, r, np.asarray(np.nan, dt))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"{name[3:].capitalize()} ignoring NaN (NaN where a slice is all NaN).\n\n"
                  f"Example:\n    >>> jnp.{name}(jnp.array([1.0, jnp.nan, 3.0]))\n"
                  f"    Array({'3.' if name == 'nanmax' else '1.'}, dtype=float32)\n")
    return fn


nanmax = _nan_extreme("nanmax", red.max, -np.inf)
nanmin = _nan_extreme("nanmin", red.min, np.inf)


def _nan_arg(name, arg_fn, fill):
    def fn(a, axis=None, out=None, keepdims=False):
        a = _prep(name, a)
        dt = aval_of(a).dtype
        if not dtypes.is_inexact(dt):
            return arg_fn(a, axis=axis, keepdims=keepdims)
        nan_mask = uf.isnan(a)
        idx = arg_fn(_replace_nan(a, fill), axis=axis, keepdims=keepdims)
        all_nan = red.all(nan_mask, axis=axis, keepdims=keepdims)
        return uf.where(all_nan, np.asarray(-1, aval_of(idx).dtype), idx)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Index of the {'largest' if 'max' in name else 'smallest'} non-NaN element "
                  f"(-1 where a slice is all NaN).\n\nExample:\n    >>> jnp.{name}(jnp.array("
                  f"[jnp.nan, 2.0, 1.0]))\n    Array({1 if 'max' in name else 2}, dtype=int32)\n")
    return fn


nanargmax = _nan_arg("nanargmax", red.argmax, -np.inf)
nanargmin = _nan_arg("nanargmin", red.argmin, np.inf)


def _count_valid(a, axis, keepdims, where, dt):
    valid = uf.logical_not(uf.isnan(a))
    if where is not None:
        valid = uf.logical_and(valid, where)
    return red.sum(lax.convert_element_type(valid, dt), axis=axis, keepdims=keepdims)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Mean of the non-NaN elements. Example: ``jnp.nanmean(jnp.array([1.0, jnp.nan, 3.0]))``."""
    a = _prep("nanmean", a)
    if not dtypes.is_inexact(aval_of(a).dtype):
        return red.mean(a, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    if dtype is not None:
        a = lax.convert_element_type(a, dtypes.canonicalize(dtype))
    dt = aval_of(a).dtype
    total = red.sum(_replace_nan(a, 0), axis=axis, keepdims=keepdims, where=where)
    count = _count_valid(a, axis, keepdims, where, dtypes.real_dtype(dt))
    return uf.divide(total, count)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None):
    """Variance of the non-NaN elements (``ddof`` or ``correction`` degrees of freedom).

    Example:
        >>> jnp.nanvar(jnp.array([1.0, jnp.nan, 3.0]))
        Array(1., dtype=float32)
    """
    if correction is not None:
        ddof = correction
    a = to_inexact(_prep("nanvar", a))
    if dtype is not None:
        a = lax.convert_element_type(a, dtypes.canonicalize(dtype))
    dt = aval_of(a).dtype
    rdt = dtypes.real_dtype(dt)
    mu = nanmean(a, axis=axis, keepdims=True, where=where)
    centered = _replace_nan(uf.subtract(a, mu), 0)
    sq = uf.real(uf.multiply(centered, uf.conjugate(centered))) if dtypes.is_complex(dt) \
        else uf.multiply(centered, centered)
    total = red.sum(sq, axis=axis, keepdims=keepdims, where=where)
    count = _count_valid(a, axis, keepdims, where, rdt)
    denom = uf.maximum(uf.subtract(count, ddof), np.asarray(0, rdt))
    return uf.divide(total, denom)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           correction=None):
    """Standard deviation of the non-NaN elements. Example: ``jnp.nanstd(x, axis=0)``."""
    return uf.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where,
                          correction=correction))


def nancumsum(a, axis=None, dtype=None, out=None):
    """Running sum treating NaN as 0. Example: ``jnp.nancumsum(jnp.array([1.0, jnp.nan, 2.0]))``."""
    return red.cumsum(_replace_nan(_prep("nancumsum", a), 0), axis=axis, dtype=dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    """Running product treating NaN as 1. Example: ``jnp.nancumprod(x)``."""
    return red.cumprod(_replace_nan(_prep("nancumprod", a), 1), axis=axis, dtype=dtype)
