"""Sorting, searching and order statistics: ``sort``, ``argsort``, ``partition``,
``searchsorted``, ``lexsort``, ``unique``, ``median``, ``quantile``/``percentile`` (and their
``nan*`` forms), on ``funcgrad.lax.sort``.

NaNs sort last (as NumPy). Results have static shapes, so all of these work under ``jit`` except
``unique`` without ``size=`` (its length depends on the values; it runs on concrete arrays).

Example:
    >>> jnp.sort(jnp.array([3.0, jnp.nan, 1.0]))
    Array([ 1.,  3., nan], dtype=float32)
"""
import builtins

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of
from funcgrad.numpy._util import canonicalize_axis, check_arraylike, promote_dtypes


def _asarray(x):
    from funcgrad.numpy.creation import asarray
    return asarray(x)


def _prep(fname, a, axis):
    """``a`` as an array and ``axis`` canonical; ``axis=None`` flattens."""
    check_arraylike(fname, a)
    a = _asarray(a)
    aval = aval_of(a)
    if axis is None:
        a = lax.reshape(a, (aval.size,))
        return a, 0
    if aval.ndim == 0:
        raise ValueError(f"funcgrad.numpy.{fname}: axis {axis} is out of bounds for a 0-d "
                         f"array; use axis=None")
    return a, canonicalize_axis(fname, axis, aval.ndim)


def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """A sorted copy of ``a`` along ``axis`` (None: flattened). NaNs sort last.

    Example:
        >>> jnp.sort(jnp.array([[3, 1], [0, 2]]), axis=0)
        Array([[0, 1],
               [3, 2]], dtype=int32)
    """
    if order is not None:
        raise TypeError("funcgrad.numpy.sort: order= (structured arrays) is not supported")
    a, axis = _prep("sort", a, axis)
    if aval_of(a).shape[axis] <= 1:
        return a
    if descending:
        idx = lax.argsort(a, axis, is_stable=True, descending=True)
        from funcgrad.numpy.indexing import take_along_axis
        return take_along_axis(a, idx, axis, mode="clip")
    return lax.sort(a, dimension=axis, is_stable=True)


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """The indices that sort ``a`` along ``axis`` (stable; NaNs last).

    Example:
        >>> jnp.argsort(jnp.array([3.0, 1.0, 2.0]))
        Array([1, 2, 0], dtype=int32)
    """
    if order is not None:
        raise TypeError("funcgrad.numpy.argsort: order= (structured arrays) is not supported")
    a, axis = _prep("argsort", a, axis)
    return lax.argsort(a, axis, is_stable=True, descending=bool(descending),
                       index_dtype=dtypes.default_int())


def msort(a):
    """``sort(a, axis=0)``. Example: ``jnp.msort(x)``."""
    return sort(a, axis=0)


def sort_complex(a):
    """``a`` sorted as complex numbers (real part, then imaginary part).

    Example:
        >>> jnp.sort_complex(jnp.array([1 + 2j, 1 - 1j]))
        Array([1.-1.j, 1.+2.j], dtype=complex64)
    """
    a = _asarray(a)
    dt = aval_of(a).dtype
    if not dtypes.is_complex(dt):
        a = lax.convert_element_type(a, dtypes.complex_dtype(dtypes.promote_types(
            dt, dtypes.default_float())))
    return sort(a, axis=-1)


def _check_kth(fname, kth, n):
    kth = int(kth)
    if not -n <= kth < n:
        raise ValueError(f"funcgrad.numpy.{fname}: kth={kth} is out of bounds for an axis of "
                         f"size {n}")
    return kth % n


def partition(a, kth, axis=-1):
    """``a`` rearranged so position ``kth`` holds the value it would have when sorted, smaller
    values before it and larger after (here: fully sorted, which satisfies that).

    Example:
        >>> jnp.partition(jnp.array([3, 4, 1, 2]), 2)[2]
        Array(3, dtype=int32)
    """
    a, axis = _prep("partition", a, axis)
    _check_kth("partition", kth, aval_of(a).shape[axis])
    return lax.sort(a, dimension=axis, is_stable=True)


def argpartition(a, kth, axis=-1):
    """Indices that partition ``a`` around ``kth`` (a stable argsort satisfies that).

    Example:
        >>> jnp.argpartition(jnp.array([3, 4, 1, 2]), 1)
        Array([2, 3, 0, 1], dtype=int32)
    """
    a, axis = _prep("argpartition", a, axis)
    _check_kth("argpartition", kth, aval_of(a).shape[axis])
    return lax.argsort(a, axis, index_dtype=dtypes.default_int())


def lexsort(keys, axis=-1):
    """Indices sorting by several keys, the LAST key primary (as ``np.lexsort``).

    Example:
        >>> jnp.lexsort((jnp.array([1, 0, 2]), jnp.array([0, 0, 1])))
        Array([1, 0, 2], dtype=int32)
    """
    keys = [_asarray(k) for k in keys]
    if not keys:
        raise TypeError("funcgrad.numpy.lexsort: needs at least one key")
    shape = aval_of(keys[0]).shape
    for k in keys:
        if aval_of(k).shape != shape:
            raise ValueError(f"funcgrad.numpy.lexsort: all keys must have one shape, got "
                             f"{[aval_of(x).shape for x in keys]}")
    if not shape:
        raise ValueError("funcgrad.numpy.lexsort: keys must have at least one axis")
    axis = canonicalize_axis("lexsort", axis, len(shape))
    iota = lax.broadcasted_iota(dtypes.default_int(), shape, axis)
    outs = lax.sort(tuple(keys[::-1]) + (iota,), dimension=axis, num_keys=len(keys))
    return outs[-1]


# --- searchsorted --------------------------------------------------------------------------
def _less(a, b, dtype):
    """a < b in sort order (NaN largest)."""
    lt = lax.lt(a, b)
    if dtypes.is_float(dtype):
        lt = lax.bitwise_or(lt, lax.bitwise_and(lax.ne(b, b), lax.eq(a, a)))
    return lt


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Indices where ``v`` would be inserted into the sorted 1-D ``a`` to keep it sorted
    (``side="left"``: before equal entries, ``"right"``: after). A binary search of
    ``ceil(log2(len(a) + 1))`` steps; NaN counts as largest, as in ``sort``.

    Example:
        >>> jnp.searchsorted(jnp.array([1.0, 2.0, 3.0]), jnp.array([2.0, 0.0, 9.0]))
        Array([1, 0, 3], dtype=int32)
    """
    if side not in ("left", "right"):
        raise ValueError(f"funcgrad.numpy.searchsorted: side must be 'left' or 'right', got "
                         f"{side!r}")
    check_arraylike("searchsorted", a, v)
    a, v = _asarray(a), _asarray(v)
    if aval_of(a).ndim != 1:
        raise ValueError(f"funcgrad.numpy.searchsorted: a must be 1-D, got "
                         f"{aval_of(a).str_short()}")
    if sorter is not None:
        from funcgrad.numpy.indexing import take
        a = take(a, _asarray(sorter), mode="clip")
    a, v = promote_dtypes(a, v)
    dt = aval_of(a).dtype
    n = aval_of(a).shape[0]
    idt = dtypes.default_int()
    v_shape = aval_of(v).shape
    if n == 0:
        return lax.full(v_shape, np.zeros((), idt), idt)
    lo = lax.full(v_shape, np.zeros((), idt), idt)
    hi = lax.full(v_shape, np.asarray(n, idt), idt)
    steps = builtins.max(1, int(np.ceil(np.log2(n + 1))))

    def body(_, state):
        lo, hi = state
        mid = lax.div(lax.add(lo, hi), np.asarray(2, idt))
        safe = lax.min(mid, np.asarray(n - 1, idt))
        from funcgrad.numpy.indexing import take
        am = take(a, safe, mode="clip")
        # go right while a[mid] < v (left) or a[mid] <= v (right)
        go_right = _less(am, v, dt) if side == "left" else lax.bitwise_not(_less(v, am, dt))
        go_right = lax.bitwise_and(go_right, lax.lt(lo, hi))
        new_lo = lax.select(go_right, lax.add(mid, np.asarray(1, idt)), lo)
        new_hi = lax.select(lax.bitwise_or(go_right, lax.ge(lo, hi)), hi, mid)
        return new_lo, new_hi

    lo, hi = lax.fori_loop(0, steps, body, (lo, hi))
    return lo


# --- unique --------------------------------------------------------------------------------
def _is_concrete(x):
    return not isinstance(x, Tracer)


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted unique elements of ``ar`` (flattened), optionally with the index of each
    first occurrence, the inverse mapping and the counts.

    Without ``size`` the number of results depends on the data, so ``ar`` must be concrete
    (not traced). With a static ``size`` it works under jit: the first ``size`` unique values,
    padded with ``fill_value`` (default: the smallest value); padded counts are 0.

    Example:
        >>> jnp.unique(jnp.array([3, 1, 3, 2]))
        Array([1, 2, 3], dtype=int32)
        >>> funcgrad.jit(lambda x: jnp.unique(x, size=4, fill_value=0))(jnp.array([3, 1, 3, 3]))
        Array([1, 3, 0, 0], dtype=int32)
    """
    check_arraylike("unique", ar)
    ar = _asarray(ar)
    if axis is not None:
        raise ValueError("funcgrad.numpy.unique: axis= is not supported; unique works on the "
                         "flattened array (reshape first, or apply it to each slice)")
    aval = aval_of(ar)
    idt = dtypes.default_int()
    if size is None:
        if not _is_concrete(ar):
            raise TypeError("funcgrad.numpy.unique: the number of unique values is not known "
                            "while tracing (under jit/vmap/grad); pass a static size=N (and "
                            "optionally fill_value=)")
        host = np.asarray(ar).ravel()
        res = np.unique(host, return_index=True, return_inverse=True, return_counts=True,
                        equal_nan=equal_nan)
        vals, index, inverse, counts = res
        outs = [_asarray(vals.astype(host.dtype))]
        if return_index:
            outs.append(_asarray(index.astype(idt)))
        if return_inverse:
            outs.append(_asarray(inverse.reshape(-1).astype(idt)))
        if return_counts:
            outs.append(_asarray(counts.astype(idt)))
        return outs[0] if len(outs) == 1 else tuple(outs)
    size = int(size)
    flat = lax.reshape(ar, (aval.size,))
    n = aval.size
    if n == 0:
        raise ValueError("funcgrad.numpy.unique: size= needs a non-empty input")
    iota = lax.iota(idt, n)
    s, perm = lax.sort((flat, iota), num_keys=1)
    prev = lax.concatenate([lax.slice(s, (0,), (1,)), lax.slice(s, (0,), (n - 1,))], 0)
    differ = lax.ne(s, prev)
    if dtypes.is_inexact(aval.dtype) and equal_nan:
        both_nan = lax.bitwise_and(lax.ne(s, s), lax.ne(prev, prev))
        differ = lax.bitwise_and(differ, lax.bitwise_not(both_nan))
    first = lax.concatenate([np.ones((1,), bool), lax.slice(differ, (1,), (n,))], 0)
    gid = lax.sub(lax.cumsum(lax.convert_element_type(first, idt)), np.asarray(1, idt))
    fill = lax.slice(s, (0,), (1,)) if fill_value is None else None
    from funcgrad.lax import indexing as lind
    dn = lind.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,))
    # Non-first positions scatter out of bounds (dropped); first ones land at their group id.
    target = lax.select(first, gid, lax.full((n,), np.asarray(size, idt), idt))
    tidx = lax.expand_dims(target, (1,))
    if fill_value is None:
        base = lax.broadcast_in_dim(lax.reshape(fill, ()), (size,), ())
    else:
        base = lax.full((size,), np.asarray(fill_value, aval.dtype), aval.dtype)
    vals = lind.scatter(base, tidx, s, dn, mode="drop")
    outs = [vals]
    if return_index:
        outs.append(lind.scatter(lax.full((size,), np.zeros((), idt), idt), tidx, perm, dn,
                                 mode="drop"))
    if return_inverse:
        inv = lind.scatter(lax.full((n,), np.zeros((), idt), idt), lax.expand_dims(perm, (1,)),
                           gid, dn, mode="drop")
        outs.append(inv)
    if return_counts:
        gidx = lax.expand_dims(gid, (1,))
        outs.append(lind.scatter_add(lax.full((size,), np.zeros((), idt), idt), gidx,
                                     lax.full((n,), np.ones((), idt), idt), dn, mode="drop"))
    return outs[0] if len(outs) == 1 else tuple(outs)


# --- order statistics ------------------------------------------------------------------------
_METHODS = ("linear", "lower", "higher", "nearest", "midpoint", "inverted_cdf",
            "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
            "hazen", "weibull", "median_unbiased", "normal_unbiased")


def _quantile(fname, a, q, axis, method, keepdims, ignore_nan):
    from funcgrad.numpy import reductions, ufuncs
    from funcgrad.numpy.indexing import take_along_axis
    if method not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"funcgrad.numpy.{fname}: method must be one of 'linear', 'lower', "
                         f"'higher', 'nearest', 'midpoint', got {method!r}")
    check_arraylike(fname, a)
    a = _asarray(a)
    aval = aval_of(a)
    if not dtypes.is_inexact(aval.dtype):
        a = lax.convert_element_type(a, dtypes.default_float())
    q = _asarray(q)
    if not dtypes.is_inexact(aval_of(q).dtype):
        q = lax.convert_element_type(q, aval_of(a).dtype)
    a, q = promote_dtypes(a, q)
    dt = aval_of(a).dtype
    orig_ndim = aval_of(a).ndim
    if axis is None:
        axes = tuple(range(orig_ndim))
    elif isinstance(axis, (tuple, list)):
        axes = tuple(sorted(canonicalize_axis(fname, x, orig_ndim) for x in axis))
    else:
        axes = (canonicalize_axis(fname, axis, orig_ndim),)
    # Move the reduced axes to the end and merge them.
    rest = [d for d in range(orig_ndim) if d not in axes]
    a = lax.transpose(a, rest + list(axes)) if orig_ndim else a
    shp = aval_of(a).shape
    keep_shape = shp[:len(rest)]
    m = int(np.prod(shp[len(rest):], dtype=np.int64))
    a = lax.reshape(a, keep_shape + (m,))
    if m == 0:
        raise ValueError(f"funcgrad.numpy.{fname}: cannot take a quantile of an empty axis")
    s = lax.sort(a, dimension=len(keep_shape))
    nan = lax.ne(s, s)
    n_nan = reductions.sum(nan, axis=-1, dtype=dtypes.default_int())
    if ignore_nan:
        n_valid = ufuncs.subtract(m, n_nan)
    else:
        n_valid = lax.full(keep_shape, np.asarray(m, dtypes.default_int()), dtypes.default_int())
    qv = aval_of(q)
    q_shape = qv.shape
    qf = lax.reshape(q, (qv.size,)) if q_shape else lax.reshape(q, (1,))
    nq = aval_of(qf).shape[0]
    # positions: (nq, *keep_shape)
    nv = lax.convert_element_type(ufuncs.maximum(n_valid, 1), dt)
    nvb = lax.broadcast_in_dim(nv, (nq,) + keep_shape, tuple(range(1, 1 + len(keep_shape))))
    qb = lax.broadcast_in_dim(qf, (nq,) + keep_shape, (0,))
    pos = lax.mul(qb, lax.sub(nvb, np.asarray(1, dt)))
    lo = lax.floor(pos)
    hi = lax.ceil(pos)
    if method == "lower":
        hi = lo
    elif method == "higher":
        lo = hi
    elif method == "nearest":
        lo = hi = lax.round(pos, rounding_method=1)
    sb = lax.broadcast_in_dim(s, (nq,) + keep_shape + (m,), tuple(range(1, 2 + len(keep_shape))))

    def at(p):
        i = lax.convert_element_type(p, dtypes.default_int())
        i = lax.expand_dims(i, (len(keep_shape) + 1,))
        return lax.squeeze(take_along_axis(sb, i, -1, mode="clip"), (len(keep_shape) + 1,))

    v_lo, v_hi = at(lo), at(hi)
    if method == "midpoint":
        out = lax.mul(lax.add(v_lo, v_hi), np.asarray(0.5, dt))
    elif method in ("linear",):
        w = lax.sub(pos, lo)
        out = lax.add(v_lo, lax.mul(w, lax.sub(v_hi, v_lo)))
        out = lax.select(lax.eq(lo, hi), v_lo, out)
    else:
        out = v_lo
    any_nan = lax.gt(n_nan, np.asarray(0, n_nan.dtype))
    bad = lax.eq(n_valid, np.asarray(0, aval_of(n_valid).dtype)) if ignore_nan else any_nan
    bad = lax.broadcast_in_dim(bad, (nq,) + keep_shape, tuple(range(1, 1 + len(keep_shape))))
    out = lax.select(bad, lax.full(aval_of(out).shape, np.asarray(np.nan, dt), dt), out)
    if keepdims:
        full = [1 if d in axes else aval.shape[d] for d in range(orig_ndim)]
        out = lax.reshape(out, (nq,) + tuple(full))
        return lax.reshape(out, q_shape + tuple(full))
    return lax.reshape(out, q_shape + keep_shape)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, interpolation=None):
    """The ``q``-th quantiles (``q`` in [0, 1], scalar or array) of ``a`` along ``axis``.

    Example:
        >>> jnp.quantile(jnp.arange(5.0), 0.25)
        Array(1., dtype=float32)
    """
    if interpolation is not None:
        method = interpolation
    return _quantile("quantile", a, q, axis, method, keepdims, ignore_nan=False)


def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, interpolation=None):
    """The ``q``-th percentiles (``q`` in [0, 100]) of ``a`` along ``axis``.

    Example:
        >>> jnp.percentile(jnp.arange(5.0), 50)
        Array(2., dtype=float32)
    """
    if interpolation is not None:
        method = interpolation
    return _quantile("percentile", a, _percent_to_fraction(q), axis, method, keepdims,
                     ignore_nan=False)


def _percent_to_fraction(q):
    """``q / 100``. A value known on the host is divided there in float64, as NumPy does: a
    device division may round 30 / 100 below 0.3 (XLA:GPU multiplies by the reciprocal), which
    moves the 'lower'/'higher'/'nearest' positions by one element."""
    if isinstance(q, (int, float)) and not isinstance(q, bool):
        return q / 100                                  # stays a weakly typed Python float
    if isinstance(q, (np.ndarray, np.generic, list, tuple)):
        arr = np.asarray(q)
        dt = arr.dtype if np.issubdtype(arr.dtype, np.inexact) else dtypes.default_float()
        return (arr.astype(np.float64) / 100).astype(dt)
    q = _to_float(q)
    return lax.div(q, np.asarray(100, aval_of(q).dtype))


def _to_float(q):
    q = _asarray(q)
    if not dtypes.is_inexact(aval_of(q).dtype):
        q = lax.convert_element_type(q, dtypes.default_float())
    return q


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median along ``axis`` (NaN if the slice holds a NaN).

    Example:
        >>> jnp.median(jnp.array([3.0, 1.0, 2.0, 10.0]))
        Array(2.5, dtype=float32)
    """
    return _quantile("median", a, 0.5, axis, "linear", keepdims, ignore_nan=False)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, interpolation=None):
    """``quantile`` ignoring NaNs (all-NaN slices give NaN).

    Example:
        >>> jnp.nanquantile(jnp.array([1.0, jnp.nan, 3.0]), 0.5)
        Array(2., dtype=float32)
    """
    if interpolation is not None:
        method = interpolation
    return _quantile("nanquantile", a, q, axis, method, keepdims, ignore_nan=True)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, interpolation=None):
    """``percentile`` ignoring NaNs. Example: ``jnp.nanpercentile(x, 90)``."""
    if interpolation is not None:
        method = interpolation
    q = _percent_to_fraction(q)
    return _quantile("nanpercentile", a, q, axis, method, keepdims, ignore_nan=True)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``median`` ignoring NaNs. Example: ``jnp.nanmedian(jnp.array([1.0, jnp.nan, 3.0]))``."""
    return _quantile("nanmedian", a, 0.5, axis, "linear", keepdims, ignore_nan=True)
