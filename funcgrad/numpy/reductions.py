"""Reductions with ``axis``/``keepdims``/``where``: sum, mean, max, var, argmax, cumsum..."""
import builtins
import math

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.numpy._util import (canonical_dtype, canonicalize_axes, canonicalize_axis,
                                  check_arraylike, promote_dtypes, to_inexact)
from funcgrad.lowering.eager_jit import jit_when_eager_in


def _keep(x, axes, ndim):
    shape = list(aval_of(x).shape)
    for a in sorted(axes):
        shape.insert(a, 1)
    return lax.reshape(x, shape)


def _apply_where(x, where, identity):
    if where is None:
        return x
    from funcgrad.numpy.ufuncs import where as _where
    return _where(where, x, np.asarray(identity, aval_of(x).dtype))


def _narrower_than_default_int(dt):
    """Integers that sum/prod/cumsum widen to the default integer (int64 with x64 on, as NumPy
    and the array API; int32 otherwise)."""
    return dtypes.is_integer(dt) and dt.itemsize < np.dtype(dtypes.default_int()).itemsize


def _reduction(name, lax_fn, identity_kind, result, upcast_small_ints=False, bool_to_int=False):
    def fn(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
        check_arraylike(name, a)
        if out is not None:
            raise ValueError(f"funcgrad.numpy.{name}: out= is not supported (arrays are "
                             f"immutable); use the return value")
        a = promote_dtypes(a)[0]
        av = aval_of(a)
        dt = canonical_dtype(dtype, f"numpy.{name}")
        if dt is None and (bool_to_int and av.dtype == dtypes.bool_ or upcast_small_ints and
                           _narrower_than_default_int(av.dtype)):
            dt = dtypes.default_int() if not dtypes.is_unsigned(av.dtype) else dtypes.default_uint()
        if dt is not None and dt != av.dtype:
            a = lax.convert_element_type(a, dt)
        axes = canonicalize_axes(name, axis, av.ndim)
        from funcgrad.lax.reductions import identity_value
        a = _apply_where(a, where, identity_value(identity_kind, aval_of(a).dtype))
        if identity_kind in ("max", "min") and where is None and initial is None:
            for ax in axes:
                if av.shape[ax] == 0:
                    raise ValueError(f"funcgrad.numpy.{name}: zero-size array to reduction "
                                     f"operation {name} which has no identity (axis {ax} of "
                                     f"{av.str_short()})")
        r = lax_fn(a, axes)
        if initial is not None:
            from funcgrad.numpy import ufuncs
            combine = {"sum": ufuncs.add, "prod": ufuncs.multiply, "max": ufuncs.maximum,
                       "min": ufuncs.minimum}[identity_kind]
            r = combine(r, np.asarray(initial, aval_of(r).dtype))
        return _keep(r, axes, av.ndim) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"``{name}`` over ``axis`` (all axes when None), optionally keeping reduced "
                  f"axes as size 1.\n\nExample:\n    >>> jnp.{name}(jnp.arange(6).reshape(2, 3), "
                  f"axis=0)\n    {result}\n")
    return fn


sum = _reduction("sum", lax.reduce_sum, "sum", "Array([3, 5, 7], dtype=int32)",
                 upcast_small_ints=True, bool_to_int=True)
prod = _reduction("prod", lax.reduce_prod, "prod", "Array([ 0,  4, 10], dtype=int32)",
                  upcast_small_ints=True, bool_to_int=True)
max = amax = _reduction("max", lax.reduce_max, "max", "Array([3, 4, 5], dtype=int32)")
min = amin = _reduction("min", lax.reduce_min, "min", "Array([0, 1, 2], dtype=int32)")


def _logical_reduction(name, lax_fn, identity):
    def fn(a, axis=None, out=None, keepdims=False, *, where=None):
        check_arraylike(name, a)
        a = promote_dtypes(a)[0]
        av = aval_of(a)
        if av.dtype != dtypes.bool_:
            a = lax.ne(a, np.zeros((), av.dtype))
        a = _apply_where(a, where, identity)
        axes = canonicalize_axes(name, axis, av.ndim)
        r = lax_fn(a, axes)
        return _keep(r, axes, av.ndim) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"Whether {'all' if name == 'all' else 'any'} elements are true along "
                  f"``axis``.\n\nExample:\n    >>> jnp.{name}(jnp.array([1, -2, 3]) > 0)\n"
                  f"    Array({name == 'any'}, dtype=bool)\n")
    return fn


all = _logical_reduction("all", lax.reduce_and, True)
any = _logical_reduction("any", lax.reduce_or, False)


def _count(av, axes, where):
    if where is None:
        return math.prod(av.shape[a] for a in axes)
    return None


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Arithmetic mean along ``axis`` (ints average as floats).

    Example:
        >>> jnp.mean(jnp.array([1, 2, 3, 4]))
        Array(2.5, dtype=float32)
    """
    check_arraylike("mean", a)
    a = promote_dtypes(a)[0]
    av = aval_of(a)
    dt = canonical_dtype(dtype, "numpy.mean") or (av.dtype if dtypes.is_inexact(av.dtype)
                                    else dtypes.default_float())
    a = lax.convert_element_type(a, dt) if av.dtype != dt else a
    axes = canonicalize_axes("mean", axis, av.ndim)
    total = sum(a, axis=axes, keepdims=keepdims, where=where)
    n = _count(av, axes, where)
    if n is None:
        from funcgrad.numpy.ufuncs import divide
        from funcgrad.numpy._util import broadcast_to_shape
        mask = broadcast_to_shape(lax.convert_element_type(where, dt), av.shape)
        return divide(total, sum(mask, axis=axes, keepdims=keepdims))
    from funcgrad.numpy.ufuncs import divide
    return divide(total, np.asarray(n, dt) if n else np.asarray(np.nan, dt))


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, correction=None):
    """Variance along ``axis`` with ``ddof`` (or array-API ``correction``) degrees of freedom.

    Example:
        >>> jnp.var(jnp.array([1.0, 2.0, 3.0, 4.0]))
        Array(1.25, dtype=float32)
    """
    from funcgrad.numpy import ufuncs
    if correction is not None:
        ddof = correction
    a = to_inexact(promote_dtypes(a)[0])
    av = aval_of(a)
    axes = canonicalize_axes("var", axis, av.ndim)
    centered = ufuncs.subtract(a, mean(a, axis=axes, keepdims=True, where=where))
    if dtypes.is_complex(av.dtype):
        sq = lax.real(ufuncs.multiply(centered, ufuncs.conjugate(centered)))
    else:
        sq = ufuncs.multiply(centered, centered)
    total = sum(sq, axis=axes, keepdims=keepdims, where=where)
    n = _count(av, axes, where)
    if n is None:
        from funcgrad.numpy._util import broadcast_to_shape
        mask = broadcast_to_shape(lax.convert_element_type(where, aval_of(total).dtype), av.shape)
        n = ufuncs.subtract(sum(mask, axis=axes, keepdims=keepdims), ddof)
        return ufuncs.divide(total, n)
    dt = aval_of(total).dtype
    return ufuncs.divide(total, np.asarray(builtins.max(n - ddof, 0), dt))


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, correction=None):
    """Standard deviation along ``axis``. Example: ``jnp.std(x, axis=0)``."""
    from funcgrad.numpy import ufuncs
    return ufuncs.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where,
                           correction=correction))


def _arg(name, lax_fn, result):
    def fn(a, axis=None, out=None, keepdims=False):
        check_arraylike(name, a)
        a = promote_dtypes(a)[0]
        av = aval_of(a)
        if axis is None:
            a = lax.reshape(a, (av.size,))
            r = lax_fn(a, 0, dtypes.default_int())
            return lax.reshape(r, (1,) * av.ndim) if keepdims else r
        ax = canonicalize_axis(name, axis, av.ndim)
        r = lax_fn(a, ax, dtypes.default_int())
        return _keep(r, (ax,), av.ndim) if keepdims else r
    fn.__name__ = name
    fn.__doc__ = (f"Index of the {'largest' if 'max' in name else 'smallest'} element along "
                  f"``axis`` (of the flattened array when None).\n\nExample:\n    >>> "
                  f"jnp.{name}(jnp.array([3, 1, 4]))\n    Array({result}, dtype=int32)\n")
    return fn


argmax = _arg("argmax", lax.argmax, 2)
argmin = _arg("argmin", lax.argmin, 1)


def _cumulative(name, lax_fn, upcast, result):
    def fn(a, axis=None, dtype=None, out=None):
        check_arraylike(name, a)
        a = promote_dtypes(a)[0]
        av = aval_of(a)
        if axis is None:
            a = lax.reshape(a, (av.size,))
            axis = 0
        ax = canonicalize_axis(name, axis, aval_of(a).ndim)
        dt = canonical_dtype(dtype, f"numpy.{name}")
        if dt is None and upcast and (av.dtype == dtypes.bool_ or
                                      _narrower_than_default_int(av.dtype)):
            dt = dtypes.default_uint() if dtypes.is_unsigned(av.dtype) else dtypes.default_int()
        if dt is not None and dt != av.dtype:
            a = lax.convert_element_type(a, dt)
        return lax_fn(a, ax)
    fn.__name__ = name
    fn.__doc__ = (f"Running {name[3:]} along ``axis`` (flattened when None).\n\nExample:\n"
                  f"    >>> jnp.{name}(jnp.array([1, 2, 3]))\n    {result}\n")
    return fn


cumsum = _cumulative("cumsum", lax.cumsum, True, "Array([1, 3, 6], dtype=int32)")
cumprod = _cumulative("cumprod", lax.cumprod, True, "Array([1, 2, 6], dtype=int32)")


def ptp(a, axis=None, keepdims=False):
    """Range (max - min) along ``axis``. Example: ``jnp.ptp(x)``."""
    from funcgrad.numpy.ufuncs import subtract
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    """Number of nonzero elements along ``axis``. Example: ``jnp.count_nonzero(x)``."""
    a = promote_dtypes(a)[0]
    av = aval_of(a)
    nz = lax.ne(a, np.zeros((), av.dtype)) if av.dtype != dtypes.bool_ else a
    return sum(nz, axis=axis, keepdims=keepdims)


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """Weighted average along ``axis``. Example: ``jnp.average(x, weights=w)``."""
    from funcgrad.numpy import ufuncs
    if weights is None:
        avg = mean(a, axis=axis, keepdims=keepdims)
        if returned:
            av = aval_of(a)
            n = math.prod(av.shape[i] for i in canonicalize_axes("average", axis, av.ndim))
            return avg, lax.full(aval_of(avg).shape, n, aval_of(avg).dtype)
        return avg
    a, w = promote_dtypes(to_inexact(promote_dtypes(a)[0]), weights)
    from funcgrad.numpy._util import broadcast_to_shape
    if aval_of(w).shape != aval_of(a).shape:
        if axis is None:
            raise ValueError("funcgrad.numpy.average: weights of a different shape need an axis")
        ax = canonicalize_axis("average", axis, aval_of(a).ndim)
        w = lax.broadcast_in_dim(w, aval_of(a).shape, (ax,))
    w = broadcast_to_shape(w, aval_of(a).shape)
    scl = sum(w, axis=axis, keepdims=keepdims)
    avg = ufuncs.divide(sum(ufuncs.multiply(a, w), axis=axis, keepdims=keepdims), scl)
    return (avg, scl) if returned else avg


# --- eager calls as one executable -------------------------------------------------------------
# Eagerly, these multi-primitive reductions compile once per (shapes, dtypes, options) and run
# as one executable (jnp.mean of a (64, 100) array: about 18 us instead of 83 us).
_EAGER_STATIC = {
    "mean": ("axis", "dtype", "out", "keepdims"),
    "var": ("axis", "dtype", "out", "ddof", "keepdims", "correction"),
    "std": ("axis", "dtype", "out", "ddof", "keepdims", "correction"),
}

jit_when_eager_in(globals(), _EAGER_STATIC)
