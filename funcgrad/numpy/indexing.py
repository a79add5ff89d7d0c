"""NumPy indexing on immutable arrays: ``x[idx]``, ``x.at[idx].set(...)``, take, take_along_axis.

Static ints and slices become ``slice``/``rev``/``squeeze``; integer arrays and traced integers
become one ``gather`` (NumPy's rules for where the advanced-index axes go); boolean masks work
on concrete arrays (their result shape depends on the values).

Out-of-bounds indices never raise by default, as in JAX, static or traced: ``x[idx]`` and
``x.at[idx].get()`` clamp each index into its axis, ``take``/``take_along_axis`` fill, and
``x.at[idx].set/add/...`` drop the update (``mode=`` picks another rule). With
``funcgrad.config.debug_checks`` on, those default rules raise ``IndexError`` instead: at once
for concrete indices, when the compiled code runs (a host callback) for traced ones.
"""
import builtins
import functools

import numpy as np

from funcgrad import lax
from funcgrad.config import config
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer, Value
from funcgrad.core.values import aval_of
from funcgrad.lax.callbacks import debug_callback
from funcgrad.numpy import bool_masks
from funcgrad.numpy._util import broadcast_shapes, broadcast_to_shape, canonicalize_axis


def _is_int_scalar(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _is_array_index(i):
    return isinstance(i, (Value, np.ndarray, list))


def _as_index_array(i):
    from funcgrad.numpy.creation import asarray
    if isinstance(i, (int, np.integer, list, tuple)) and not isinstance(i, bool):
        i = np.asarray(i)
        if i.size == 0:
            i = i.astype(np.int32)
    return i if isinstance(i, Value) else (asarray(i) if i.dtype != np.bool_ else i)


class _Expanded(list):
    """Index entries with the Ellipsis expanded. ``split`` remembers that an Ellipsis standing
    for no axes separated advanced indices: NumPy then still moves the broadcast index axes to
    the front, as for any other separator."""

    split = False


def _expand(fname, idx, ndim):
    """The index as a list with Ellipsis expanded, bool masks turned into int arrays."""
    if isinstance(idx, _Expanded):
        return idx
    if not isinstance(idx, tuple):
        idx = (idx,)
    out = []
    for i in idx:
        if isinstance(i, list) and builtins.any(isinstance(e, (slice, type(None), type(Ellipsis)))
                                                for e in i):
            raise TypeError(f"{fname}: a list containing slices or None is not a valid index; "
                            f"use a tuple")
        if isinstance(i, (bool, np.bool_)):
            raise TypeError(f"{fname}: boolean scalar indices are not supported")
        arr_dtype = getattr(i, "dtype", None)
        if arr_dtype is None and isinstance(i, list):
            arr_dtype = np.asarray(i).dtype
        if arr_dtype is not None and np.dtype(arr_dtype) == np.bool_ and _is_array_index(i):
            if isinstance(i, Tracer) and not hasattr(i, "_value"):
                raise IndexError(
                    f"{fname}: a boolean mask index needs a concrete value (its result shape "
                    f"depends on how many elements are True). Inside jit use "
                    f"jnp.where(mask, x, 0) or jnp.nonzero(mask, size=N)")
            mask = np.asarray(i)
            out.extend(np.nonzero(mask))
            continue
        if isinstance(i, Value) and not (dtypes.is_integer(i.dtype)):
            raise IndexError(f"{fname}: array indices must be integers or booleans, got "
                             f"{aval_of(i).str_short()}")
        out.append(i)
    n_ell = builtins.sum(1 for i in out if i is Ellipsis)
    if n_ell > 1:
        raise IndexError(f"{fname}: an index can only have a single ellipsis ('...')")
    n_real = builtins.sum(1 for i in out if i is not None and i is not Ellipsis)
    if n_real > ndim:
        raise IndexError(f"{fname}: too many indices for array: array is {ndim}-dimensional, "
                         f"but {n_real} were indexed")
    split = False
    if n_ell:
        # list.index compares with ==, which is elementwise on arrays: find the ellipsis by identity
        k = next(j for j, i in enumerate(out) if i is Ellipsis)
        split = ndim == n_real and _has_advanced(out[:k]) and _has_advanced(out[k + 1:])
        out = out[:k] + [slice(None)] * (ndim - n_real) + out[k + 1:]
    else:
        out = out + [slice(None)] * (ndim - n_real)
    result = _Expanded(out)
    result.split = split
    return result


def _has_advanced(entries):
    return builtins.any(e is not None and e is not Ellipsis and not isinstance(e, slice)
                        for e in entries)


# --- the checking switch (config.debug_checks) ----------------------------------------------
def _raise_if_out_of_bounds(values, fname, axis, n, otherwise):
    """Raise ``IndexError`` if a value of the integer array ``values`` is outside ``-n..n-1``."""
    v = np.asarray(values)
    bad = (v < -n) | (v >= n)
    if bad.any():
        raise IndexError(f"{fname}: index {v[bad].flat[0].item()} is out of bounds for axis "
                         f"{axis} with size {n} (raised because funcgrad.config.debug_checks is "
                         f"on; with it off, as in JAX, {otherwise})")


def _check_index(fname, x_aval, idx, otherwise, axis_of=None):
    """With ``config.debug_checks`` on, raise ``IndexError`` for an out-of-bounds integer in
    ``idx`` (an index of an array of ``x_aval``): now for concrete indices, when the compiled
    code runs for traced ones. ``axis_of`` fixes the axis for a single index array (take)."""
    if not config.debug_checks:
        return
    shape = x_aval.shape
    if axis_of is not None:
        pairs = [(idx, axis_of)]
    else:
        entries, axes = _entries_with_axes(shape, idx)
        pairs = [(e, ax) for e, ax in zip(entries, axes)
                 if ax is not None and not isinstance(e, slice)]
    for e, ax in pairs:
        check = functools.partial(_raise_if_out_of_bounds, fname=fname, axis=ax, n=shape[ax],
                                  otherwise=otherwise)
        if isinstance(e, Tracer):
            debug_callback(check, e)
        else:
            check(e)


def getitem(x, idx):
    """``x[idx]`` with NumPy semantics (see the module docstring)."""
    if config.debug_checks:
        _check_index("Array.__getitem__", aval_of(x), idx, "the index is clamped into bounds")
    return _getitem(x, idx)


def _getitem(x, idx):
    fname = "Array.__getitem__"
    av = aval_of(x)
    bool_masks.check_mask_shapes(fname, idx, av.shape)
    special = bool_masks.special_getitem(x, idx)
    if special is not None:
        return special
    entries = _expand(fname, idx, av.ndim)
    # New axes (None) become size-1 axes of x, indexed by a full slice.
    split = entries.split
    new_axes = [k for k, e in enumerate(entries) if e is None]
    if new_axes:
        x = lax.expand_dims(x, new_axes)
        entries = [slice(None) if e is None else e for e in entries]
    shape = aval_of(x).shape
    has_advanced = builtins.any(not _is_int_scalar(e) and not isinstance(e, slice)
                                for e in entries)
    # Static ints and slices first. With advanced indices present, ints join them (NumPy
    # treats them as 0-d index arrays, which decides where the result axes go).
    starts, limits, strides, reverse, squeeze = [], [], [], [], []
    advanced = {}
    for axis, (e, n) in enumerate(zip(entries, shape)):
        if _is_int_scalar(e):
            i = int(e)
            if n == 0:
                raise IndexError(f"{fname}: index {i} is out of bounds for axis {axis} with size "
                                 f"0")
            # as JAX: negative indices count from the end once, then clamp into the axis
            i = builtins.min(builtins.max(i + n if i < 0 else i, 0), n - 1)
            if has_advanced:
                starts.append(0), limits.append(n), strides.append(1)
                advanced[axis] = np.asarray(i, np.int32)
            else:
                starts.append(i), limits.append(i + 1), strides.append(1)
                squeeze.append(axis)
        elif isinstance(e, slice):
            start, stop, step = e.indices(n)
            if step > 0:
                starts.append(start), limits.append(builtins.max(start, stop))
                strides.append(step)
            else:
                # x[a:b:-s] == rev(x)[n-1-a : n-1-b : s]
                lo, hi = n - 1 - start, n - 1 - stop
                starts.append(lo), limits.append(builtins.max(lo, hi)), strides.append(-step)
                reverse.append(axis)
        else:
            starts.append(0), limits.append(n), strides.append(1)
            advanced[axis] = e
    if reverse:
        x = lax.rev(x, reverse)
    x = lax.slice(x, starts, limits, strides)
    if advanced:
        return _gather_advanced(x, advanced, split)
    return lax.squeeze(x, squeeze) if squeeze else x


def _advanced_layout(axes, ndim, batch_ndim, split=False):
    """Output positions of the remaining axes after an advanced-index gather."""
    adjacent = not split and list(axes) == list(range(axes[0], axes[0] + len(axes)))
    rest = [a for a in range(ndim) if a not in axes]
    if adjacent:
        first = axes[0]
        positions = [a if a < first else a - len(axes) + batch_ndim for a in rest]
    else:
        positions = [batch_ndim + k for k in range(len(rest))]
    return rest, positions, adjacent


def _gather_advanced(x, advanced, split=False):
    av = aval_of(x)
    axes = sorted(advanced)
    arrays = []
    for a in axes:
        idx = _as_index_array(advanced[a])
        idx_aval = aval_of(idx)
        if not dtypes.is_integer(idx_aval.dtype):
            raise IndexError(f"Array.__getitem__: index arrays must be integers, got "
                             f"{idx_aval.str_short()}")
        arrays.append(_normalize_negative(idx, av.shape[a]))
    bshape = broadcast_shapes("__getitem__", *[aval_of(i).shape for i in arrays])
    arrays = [broadcast_to_shape(lax.convert_element_type(i, dtypes.int32), bshape)
              for i in arrays]
    indices = lax.concatenate([lax.expand_dims(i, (len(bshape),)) for i in arrays], len(bshape)) \
        if len(arrays) > 1 else lax.expand_dims(arrays[0], (len(bshape),))
    rest, positions, _ = _advanced_layout(axes, av.ndim, len(bshape), split)
    slice_sizes = [1 if a in advanced else av.shape[a] for a in range(av.ndim)]
    dnums = lax.GatherDimensionNumbers(offset_dims=tuple(positions),
                                       collapsed_slice_dims=tuple(axes),
                                       start_index_map=tuple(axes))
    return lax.gather(x, indices, dnums, slice_sizes, mode="clip")


def _normalize_negative(idx, n):
    if isinstance(idx, np.ndarray):
        return np.where(idx < 0, idx + n, idx)
    dt = aval_of(idx).dtype
    if dtypes.is_unsigned(dt):
        return idx
    zero = np.zeros((), dt)
    return lax.select(lax.lt(idx, lax.full(aval_of(idx).shape, zero, dt)),
                      lax.add(idx, lax.full(aval_of(idx).shape, n, dt)), idx)


# --- take / take_along_axis ------------------------------------------------------------------
_TAKE_MODES = (None, "fill", "clip", "promise_in_bounds", "wrap")


def _take_mode(fname, mode, idx, n):
    """The gather mode for ``take``'s ``mode`` (JAX's default: "fill") and the indices to use
    ("wrap" reduces them modulo ``n``)."""
    if mode not in _TAKE_MODES:
        raise ValueError(f"funcgrad.numpy.{fname}: mode must be 'fill' (the default: "
                         f"out-of-bounds positions give fill_value, NaN for floats), 'clip', "
                         f"'wrap' or 'promise_in_bounds', got {mode!r}")
    if mode == "wrap":
        dt = aval_of(idx).dtype
        shape = aval_of(idx).shape
        size = lax.full(shape, builtins.max(n, 1), dt)
        r = lax.rem(idx, size)
        r = lax.select(lax.lt(r, lax.full(shape, 0, dt)), lax.add(r, size), r)
        return "clip", r
    return ("fill" if mode in (None, "fill") else "clip"), _normalize_negative(idx, n)


def take(a, indices, axis=None, mode=None, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened array when None).

    Out-of-bounds indices follow ``mode``, as JAX's ``take``: "fill" (the default) gives
    ``fill_value`` there (NaN for inexact types, the minimum of signed and the maximum of
    unsigned integers, True for bool), "clip" clamps, "wrap" wraps around. Negative indices
    count from the end once (-n..-1).

    Example:
        >>> jnp.take(jnp.array([10, 20, 30]), jnp.array([2, 0]))
        Array([30, 10], dtype=int32)
    """
    from funcgrad.numpy.creation import asarray
    a = asarray(a)
    if axis is None:
        a = lax.reshape(a, (aval_of(a).size,))
        axis = 0
    av = aval_of(a)
    axis = canonicalize_axis("take", axis, av.ndim)
    idx = _as_index_array(indices)
    if mode is None:
        _check_index("take", av, idx, "fill_value is returned there",
                     axis_of=axis)
    gather_mode, idx = _take_mode("take", mode, idx, av.shape[axis])
    idx = lax.convert_element_type(idx, dtypes.int32)
    ishape = aval_of(idx).shape
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + len(ishape), av.ndim + len(ishape)
                                                     - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    slice_sizes = [1 if d == axis else s for d, s in enumerate(av.shape)]
    return lax.gather(a, lax.expand_dims(idx, (len(ishape),)), dnums, slice_sizes,
                      mode=gather_mode, fill_value=fill_value)


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None):
    """Pick values along ``axis`` with an index array of the same rank (as ``np.take_along_axis``;
    ``axis`` defaults to -1, as the array API says).

    Out-of-bounds indices follow ``mode`` as in :func:`take` ("fill" by default, as JAX).

    Example:
        >>> x = jnp.array([[3, 1, 2], [0, 5, 4]])
        >>> jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)     # rows sorted
        Array([[1, 2, 3],
               [0, 4, 5]], dtype=int32)
    """
    from funcgrad.numpy.creation import asarray
    arr = asarray(arr)
    av = aval_of(arr)
    if axis is None:
        arr = lax.reshape(arr, (av.size,))
        av = aval_of(arr)
        axis = 0
    axis = canonicalize_axis("take_along_axis", axis, av.ndim)
    idx = _as_index_array(indices)
    iav = aval_of(idx)
    if iav.ndim != av.ndim:
        raise ValueError(f"funcgrad.numpy.take_along_axis: indices {iav.str_short()} must have "
                         f"the rank of arr {av.str_short()}")
    shape = tuple(builtins.max(a, b) if i != axis else b
                  for i, (a, b) in enumerate(zip(av.shape, iav.shape)))
    if mode is None:
        _check_index("take_along_axis", av, idx, "fill_value is returned there",
                     axis_of=axis)
    gather_mode, idx = _take_mode("take_along_axis", mode, idx, av.shape[axis])
    idx = broadcast_to_shape(lax.convert_element_type(idx, dtypes.int32), shape)
    parts = []
    for d in range(av.ndim):
        if d == axis:
            parts.append(idx)
        else:
            parts.append(lax.broadcasted_iota(dtypes.int32, shape, d))
    full_idx = lax.concatenate([lax.expand_dims(p, (len(shape),)) for p in parts], len(shape))
    if builtins.any(av.shape[d] != shape[d] for d in range(av.ndim) if d != axis):
        arr = broadcast_to_shape(arr, tuple(shape[d] if d != axis else av.shape[d]
                                            for d in range(av.ndim)))
    dnums = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(av.ndim)),
                                       start_index_map=tuple(range(av.ndim)))
    return lax.gather(arr, full_idx, dnums, (1,) * av.ndim,
                      mode=gather_mode, fill_value=fill_value)


# --- x.at[idx] ------------------------------------------------------------------------------
# Out-of-bounds handling (``mode``), as JAX:
#   updates: "drop" (default; also "fill") skip updates at out-of-bounds positions, "clip" and
#            "promise_in_bounds" clamp each index into its axis;
#   get:     None (default) is ``x[idx]`` (every index clamps; ``config.debug_checks`` raises),
#            "clip"/"promise_in_bounds" clamp every index, "fill" gives ``fill_value`` (NaN for
#            inexact types, the minimum of signed, the maximum of unsigned ints, True for bool).
# Negative indices count from the end once (-n..-1), as NumPy; anything beyond is out of bounds.
_MODES = (None, "drop", "clip", "fill", "promise_in_bounds")


def _flat_positions(shape, idx):
    """The flat (row-major) positions of the elements ``idx`` selects in an array of ``shape``."""
    size = int(np.prod(shape, dtype=np.int64))
    iota = lax.reshape(lax.iota(dtypes.int32, size), shape)
    return _getitem(iota, idx)


def _entries_with_axes(shape, idx):
    """The expanded index entries, each paired with the axis of ``shape`` it indexes (None for
    new axes)."""
    entries = _expand("Array.at", idx, len(shape))
    axes, k = [], 0
    for e in entries:
        if e is None:
            axes.append(None)
        else:
            axes.append(k)
            k += 1
    return entries, axes


def _is_static_int_array(e):
    return isinstance(e, np.ndarray) or isinstance(e, list)


def _clamped_index(shape, idx):
    """``idx`` with every integer index clamped into its axis (negative ones wrapped once)."""
    entries, axes = _entries_with_axes(shape, idx)
    out = []
    for e, ax in zip(entries, axes):
        if ax is None or isinstance(e, slice):
            out.append(e)
            continue
        n = shape[ax]
        if _is_int_scalar(e):
            i = int(e)
            i = i + n if i < 0 else i
            out.append(builtins.min(builtins.max(i, 0), builtins.max(n - 1, 0)))
        elif _is_static_int_array(e):
            a = np.asarray(e)
            a = np.where(a < 0, a + n, a)
            out.append(np.clip(a, 0, builtins.max(n - 1, 0)).astype(np.int32))
        else:
            i = _normalize_negative(e, n)
            dt = aval_of(i).dtype
            out.append(lax.clamp(np.zeros((), dt), i, np.asarray(builtins.max(n - 1, 0), dt)))
    return _rewritten(entries, out)


def _rewritten(entries, new_entries):
    """``new_entries`` (one per entry of ``entries``) keeping what the expansion remembered."""
    result = _Expanded(new_entries)
    result.split = entries.split
    return result


def _needs_bounds_check(shape, idx):
    entries, axes = _entries_with_axes(shape, idx)
    for e, ax in zip(entries, axes):
        if ax is None or isinstance(e, slice):
            continue
        if _is_int_scalar(e):
            if not -shape[ax] <= int(e) < shape[ax]:
                return True
        else:
            return True
    return False


def _checked_positions(shape, idx):
    """Flat positions of ``x[idx]`` with -1 wherever an index is out of bounds.

    Indexes an iota padded by one -1 on each side of every axis, with all indices shifted by
    one, so an out-of-bounds index lands on the padding.
    """
    entries, axes = _entries_with_axes(shape, idx)
    size = int(np.prod(shape, dtype=np.int64))
    iota = lax.reshape(lax.iota(dtypes.int32, size), shape)
    padded = lax.pad(iota, np.int32(-1), [(1, 1, 0)] * len(shape))
    out = []
    for e, ax in zip(entries, axes):
        if ax is None:
            out.append(None)
            continue
        n = shape[ax]
        if isinstance(e, slice):
            start, stop, step = e.indices(n)
            out.append(slice(start + 1, stop + 1, step))
        elif _is_int_scalar(e):
            i = int(e)
            i = i + n if i < 0 else i
            out.append(i + 1 if 0 <= i < n else 0)
        elif _is_static_int_array(e):
            a = np.asarray(e).astype(np.int64)
            a = np.where(a < 0, a + n, a)
            out.append((np.clip(a, -1, n) + 1).astype(np.int32))
        else:
            i = lax.convert_element_type(_normalize_negative(e, n), dtypes.int32)
            i = lax.clamp(np.int32(-1), i, np.int32(n))
            out.append(lax.add(i, lax.full(aval_of(i).shape, 1, dtypes.int32)))
    return _getitem(padded, _rewritten(entries, out))


def _bad_mode(mode):
    raise ValueError(f"Array.at: mode must be 'drop', 'clip', 'fill' or 'promise_in_bounds', "
                     f"got {mode!r}")


def _default_fill(dt):
    if dtypes.is_inexact(dt):
        return np.nan
    if dt == dtypes.bool_:
        return True
    info = dtypes.iinfo(dt)
    return info.min if dtypes.is_signed(dt) else info.max


def gather_with_mode(x, idx, mode=None, fill_value=None):
    """``x[idx]`` with ``mode`` for out-of-bounds indices (see above)."""
    from funcgrad.numpy.creation import asarray
    if mode not in _MODES:
        _bad_mode(mode)
    x = asarray(x)
    av = aval_of(x)
    if mode is None:
        _check_index("Array.at[...].get", av, idx, "the index is clamped into bounds")
        return _getitem(x, idx)
    if mode in ("clip", "promise_in_bounds", "drop") or not _needs_bounds_check(av.shape, idx):
        if mode == "drop":
            mode = "fill"
        else:
            return _getitem(x, _clamped_index(av.shape, idx))
    positions = _checked_positions(av.shape, idx)
    pshape = aval_of(positions).shape
    valid = lax.ge(positions, lax.full(pshape, 0, dtypes.int32))
    safe = lax.select(valid, positions, lax.full(pshape, 0, dtypes.int32))
    flat = lax.reshape(x, (av.size,))
    if av.size == 0:
        vals = lax.full(pshape, 0, av.dtype)
    else:
        vals = take(flat, safe, mode="clip")
    fill = _default_fill(av.dtype) if fill_value is None else fill_value
    return lax.select(valid, vals, lax.full(pshape, fill, av.dtype))


def _single_mask(x, idx):
    """The boolean mask if ``idx`` is one boolean array indexing the leading axes of ``x``."""
    if isinstance(idx, tuple):
        if len(idx) != 1:
            return None
        idx = idx[0]
    if not isinstance(idx, (Value, np.ndarray)):
        return None
    dt = aval_of(idx).dtype
    if dt != dtypes.bool_:
        return None
    mshape, xshape = aval_of(idx).shape, aval_of(x).shape
    if mshape != xshape[:len(mshape)]:
        raise IndexError(f"Array.at: boolean index of shape {mshape} does not match the "
                         f"leading axes of the indexed array of shape {xshape}")
    return idx


def _masked_update(x, mask, values, kind):
    """``where(mask, combine(x, values), x)``: a masked update whose shape is static."""
    from funcgrad.numpy import ufuncs
    av = aval_of(x)
    m = lax.broadcast_in_dim(mask, av.shape, tuple(range(aval_of(mask).ndim))) \
        if aval_of(mask).shape != av.shape else mask
    values = lax.convert_element_type(values, av.dtype) if aval_of(values).dtype != av.dtype \
        else values
    combine = {"set": lambda a, b: broadcast_to_shape(b, av.shape), "add": ufuncs.add,
               "mul": ufuncs.multiply, "min": ufuncs.minimum, "max": ufuncs.maximum}[kind]
    new = combine(x, values)
    new = lax.convert_element_type(new, av.dtype) if aval_of(new).dtype != av.dtype else new
    return lax.select(m, broadcast_to_shape(new, av.shape), x)


def _values_fit_mask(x, mask, values):
    """Whether ``values`` broadcast to the trailing (unmasked) axes of ``x``."""
    rest = aval_of(x).shape[aval_of(mask).ndim:]
    vshape = aval_of(values).shape
    if len(vshape) > len(rest):
        return builtins.all(d == 1 for d in vshape[:len(vshape) - len(rest)]) and \
            _fits(vshape[len(vshape) - len(rest):], rest)
    return _fits(vshape, rest)


def _fits(vshape, rest):
    try:
        return tuple(np.broadcast_shapes(vshape, rest)) == tuple(rest)
    except ValueError:
        return False


def scatter_update(x, idx, values, kind, mode=None):
    """``x`` with ``values`` combined into ``x[idx]`` by ``kind`` (set/add/mul/min/max)."""
    from funcgrad.numpy.creation import asarray
    if mode not in _MODES:
        _bad_mode(mode)
    x = asarray(x)
    av = aval_of(x)
    if mode is None:
        _check_index(f"Array.at[...].{kind}", av, idx, "the update is dropped")
    values = values if isinstance(values, Value) else asarray(values)
    mask = _single_mask(x, idx)
    if mask is not None:
        if len(aval_of(values).shape) > len(av.shape) - aval_of(mask).ndim:
            vs = aval_of(values).shape
            values = lax.reshape(values, vs[len(vs) - (len(av.shape) - aval_of(mask).ndim):]) \
                if builtins.all(d == 1 for d in vs[:len(vs) - (len(av.shape) -
                                                              aval_of(mask).ndim)]) else values
        if _values_fit_mask(x, mask, values):
            return _masked_update(x, mask, values, kind)
        if isinstance(mask, Tracer) and not hasattr(mask, "_value"):
            raise IndexError(f"Array.at[mask].{kind}: with a traced boolean mask the values "
                             f"must broadcast to the unmasked axes {av.shape[aval_of(mask).ndim:]}"
                             f" (got {aval_of(values).str_short()}); the number of selected "
                             f"elements is not known while tracing")
    if mode in ("clip", "promise_in_bounds"):
        positions = _flat_positions(av.shape, _clamped_index(av.shape, idx))
    elif _needs_bounds_check(av.shape, idx):
        positions = _checked_positions(av.shape, idx)
        pshape = aval_of(positions).shape
        positions = lax.select(lax.ge(positions, lax.full(pshape, 0, dtypes.int32)), positions,
                               lax.full(pshape, av.size, dtypes.int32))
    else:
        positions = _flat_positions(av.shape, idx)
    pshape = aval_of(positions).shape
    if aval_of(values).dtype != av.dtype:
        values = lax.convert_element_type(values, av.dtype)
    try:
        values = broadcast_to_shape(values, pshape)
    except ValueError:
        raise ValueError(f"Array.at[...].{kind}: values of shape {aval_of(values).shape} do not "
                         f"broadcast to the indexed shape {pshape}") from None
    n = int(np.prod(pshape, dtype=np.int64))
    flat = lax.reshape(x, (av.size,))
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    fn = {"set": lax.scatter, "add": lax.scatter_add, "mul": lax.scatter_mul,
          "min": lax.scatter_min, "max": lax.scatter_max}[kind]
    out = fn(flat, lax.reshape(positions, (n, 1)), lax.reshape(values, (n,)), dnums,
             mode="drop" if mode in (None, "drop", "fill") else "clip")
    return lax.reshape(out, av.shape)


class _IndexUpdateRef:
    """``x.at[idx]``: functional updates, each returning a new array.

    ``mode`` picks what happens to out-of-bounds indices: updates drop them by default
    ("drop"), or clamp them ("clip"); ``get`` clamps (default, "clip") or returns
    ``fill_value`` ("fill", "drop"), as JAX. With ``funcgrad.config.debug_checks`` on, the
    default modes raise ``IndexError`` for an out-of-bounds index instead. A boolean mask index
    works under jit when the values broadcast to the unmasked axes (it becomes a ``where``).

    Example:
        >>> x = jnp.zeros(3)
        >>> x.at[jnp.array([0, 5])].add(1.0)        # index 5 is dropped
        Array([1., 0., 0.], dtype=float32)
        >>> x.at[5].get(mode="fill", fill_value=-1.0)
        Array(-1., dtype=float32)
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def get(self, *, mode=None, fill_value=None, indices_are_sorted=False,
            unique_indices=False):
        """``x[idx]`` (``mode``/``fill_value`` for out-of-bounds indices). Example:
        ``x.at[7].get(mode="fill", fill_value=0)``."""
        return gather_with_mode(self.array, self.index, mode, fill_value)

    def set(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] = values``. Example: ``x.at[0].set(5.0)``."""
        return scatter_update(self.array, self.index, values, "set", mode)

    def add(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] += values`` (repeated indices accumulate)."""
        return scatter_update(self.array, self.index, values, "add", mode)

    def subtract(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] -= values``."""
        from funcgrad.numpy.ufuncs import negative
        return scatter_update(self.array, self.index, negative(values), "add", mode)

    def multiply(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] *= values``."""
        return scatter_update(self.array, self.index, values, "mul", mode)

    mul = multiply

    def divide(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] /= values``."""
        from funcgrad.numpy.ufuncs import divide
        return self.apply(lambda cur: divide(cur, values), mode=mode)

    def power(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] **= values``."""
        from funcgrad.numpy.ufuncs import power
        return self.apply(lambda cur: power(cur, values), mode=mode)

    def min(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] = minimum(x[idx], values)``."""
        return scatter_update(self.array, self.index, values, "min", mode)

    def max(self, values, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] = maximum(x[idx], values)``."""
        return scatter_update(self.array, self.index, values, "max", mode)

    def apply(self, func, *, mode=None, indices_are_sorted=False, unique_indices=False):
        """``x`` with ``x[idx] = func(x[idx])`` (each position once, even if repeated).

        Example:
            >>> x = jnp.array([4.0, 9.0, 16.0])
            >>> x.at[1:].apply(jnp.sqrt)
            Array([4., 3., 4.], dtype=float32)
        """
        from funcgrad.numpy.creation import asarray
        x = asarray(self.array)
        mask = _single_mask(x, self.index)
        if mask is not None:
            m = lax.broadcast_in_dim(mask, aval_of(x).shape, tuple(range(aval_of(mask).ndim)))
            new = asarray(func(x))
            return lax.select(m, lax.convert_element_type(new, aval_of(x).dtype), x)
        get_mode = "clip" if mode in ("clip", "promise_in_bounds") else "fill"
        cur = gather_with_mode(x, self.index, get_mode)
        new = asarray(func(cur))
        return scatter_update(x, self.index, new, "set", mode)


class _AtIndexer:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)
