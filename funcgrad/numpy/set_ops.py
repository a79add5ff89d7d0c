"""Set operations on 1-D arrays: isin, in1d, intersect1d, union1d, setdiff1d, setxor1d.

``isin``/``in1d`` compare every pair of elements, so they work under jit as they are. The
others return arrays whose length depends on the values: without ``size=`` they need concrete
inputs; with ``size=N`` (static) the result is the first N sorted values, padded with
``fill_value`` (default: the smallest result value, as JAX), and they work under jit.
"""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of
from funcgrad.numpy import ufuncs as uf
from funcgrad.numpy._util import check_arraylike, promote_dtypes


def _asarray(x):
    from funcgrad.numpy.creation import asarray
    return asarray(x)


def _ravel(x):
    from funcgrad.numpy.shape_ops import ravel
    return ravel(_asarray(x))


def isin(element, test_elements, assume_unique=False, invert=False, *, method="compare"):
    """Elementwise: whether each element of ``element`` is in ``test_elements``.

    Example:
        >>> jnp.isin(jnp.array([1, 2, 3]), jnp.array([2, 5]))
        Array([False,  True, False], dtype=bool)
    """
    check_arraylike("isin", element, test_elements)
    element, test = promote_dtypes(_asarray(element), _ravel(test_elements))
    shape = aval_of(element).shape
    if aval_of(test).shape[0] == 0:
        out = lax.full(shape, False, dtypes.bool_)
    else:
        from funcgrad.numpy.reductions import any as _any
        eq = uf.equal(lax.expand_dims(element, (len(shape),)), test)
        out = _any(eq, axis=-1)
    return uf.logical_not(out) if invert else out


def in1d(ar1, ar2, assume_unique=False, invert=False):
    """``isin`` on the flattened ``ar1``. Example: ``jnp.in1d(x, jnp.array([1, 2]))``."""
    return isin(_ravel(ar1), ar2, assume_unique, invert)


def _concrete(fname, *xs):
    for x in xs:
        if isinstance(x, Tracer) and not hasattr(x, "_value"):
            raise TypeError(f"funcgrad.numpy.{fname}: the result length depends on the values; "
                            f"inside jit pass size=N (and fill_value=)")
    return [np.asarray(x) for x in xs]


def _sorted_first(x):
    """The sorted ``x`` and a mask of the first occurrence of each value in it."""
    from funcgrad.lax.sorting import sort
    s = sort(x) if aval_of(x).shape[0] else x
    n = aval_of(s).shape[0]
    if n == 0:
        return s, lax.full((0,), False, dtypes.bool_)
    first = lax.concatenate([lax.full((1,), True, dtypes.bool_),
                             lax.ne(lax.slice(s, [1], [n]), lax.slice(s, [0], [n - 1]))], 0)
    return s, first


def _compact(values, keep, size, fill_value):
    """The entries of ``values`` where ``keep``, in order, in a length-``size`` array."""
    from funcgrad.numpy.reductions import cumsum, min as _min
    dt = aval_of(values).dtype
    n = aval_of(values).shape[0]
    pos = lax.sub(cumsum(keep), np.ones((), dtypes.default_int()))
    pos = lax.select(keep, pos, lax.full((n,), size, dtypes.default_int()))
    if fill_value is None:
        big = dtypes.finfo(dt).max if dtypes.is_inexact(dt) else (
            True if dt == dtypes.bool_ else dtypes.iinfo(dt).max)
        masked = uf.where(keep, values, np.asarray(big, dt))
        fill = _min(masked) if n else np.asarray(0, dt)
    else:
        fill = np.asarray(fill_value, dt)
    out = lax.broadcast_in_dim(lax.convert_element_type(fill, dt), (size,), ()) \
        if aval_of(fill).ndim == 0 else fill
    if n == 0:
        return out
    return out.at[pos].set(values, mode="drop")


def _finish(fname, host_result, dtype):
    return _asarray(np.asarray(host_result).astype(dtype))


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """Sorted unique values in either array.

    Example:
        >>> jnp.union1d(jnp.array([3, 1]), jnp.array([1, 2]))
        Array([1, 2, 3], dtype=int32)
    """
    a, b = promote_dtypes(_ravel(ar1), _ravel(ar2))
    dt = aval_of(a).dtype
    if size is None:
        ha, hb = _concrete("union1d", a, b)
        return _finish("union1d", np.union1d(ha, hb), dt)
    c = lax.concatenate([a, b], 0)
    s, first = _sorted_first(c)
    return _compact(s, first, size, fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    """Sorted unique values in both arrays (``return_indices``: also where they first occur).

    Example:
        >>> jnp.intersect1d(jnp.array([3, 1, 2]), jnp.array([2, 3, 5]))
        Array([2, 3], dtype=int32)
    """
    a, b = promote_dtypes(_ravel(ar1), _ravel(ar2))
    dt = aval_of(a).dtype
    if size is None:
        ha, hb = _concrete("intersect1d", a, b)
        if return_indices:
            v, ia, ib = np.intersect1d(ha, hb, return_indices=True)
            it = dtypes.default_int()
            return _finish("", v, dt), _finish("", ia, it), _finish("", ib, it)
        return _finish("intersect1d", np.intersect1d(ha, hb), dt)
    if return_indices:
        raise ValueError("funcgrad.numpy.intersect1d: return_indices with size= is not "
                         "supported")
    s, first = _sorted_first(a)
    keep = uf.logical_and(first, isin(s, b))
    return _compact(s, keep, size, fill_value)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Sorted unique values of ``ar1`` that are not in ``ar2``.

    Example:
        >>> jnp.setdiff1d(jnp.array([3, 1, 2]), jnp.array([2]))
        Array([1, 3], dtype=int32)
    """
    a, b = promote_dtypes(_ravel(ar1), _ravel(ar2))
    dt = aval_of(a).dtype
    if size is None:
        ha, hb = _concrete("setdiff1d", a, b)
        return _finish("setdiff1d", np.setdiff1d(ha, hb), dt)
    s, first = _sorted_first(a)
    keep = uf.logical_and(first, isin(s, b, invert=True))
    return _compact(s, keep, size, fill_value)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Sorted unique values in exactly one of the arrays.

    Example:
        >>> jnp.setxor1d(jnp.array([1, 2, 3]), jnp.array([2, 3, 4]))
        Array([1, 4], dtype=int32)
    """
    a, b = promote_dtypes(_ravel(ar1), _ravel(ar2))
    dt = aval_of(a).dtype
    if size is None:
        ha, hb = _concrete("setxor1d", a, b)
        return _finish("setxor1d", np.setxor1d(ha, hb), dt)
    s, first = _sorted_first(lax.concatenate([a, b], 0))
    keep = uf.logical_and(first, uf.logical_xor(isin(s, a), isin(s, b)))
    return _compact(s, keep, size, fill_value)
