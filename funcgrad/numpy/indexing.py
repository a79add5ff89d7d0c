"""NumPy indexing on immutable arrays: ``x[idx]``, ``x.at[idx].set(...)``, take, take_along_axis.

Static ints and slices become ``slice``/``rev``/``squeeze``; integer arrays and traced integers
become one ``gather`` (NumPy's rules for where the advanced-index axes go); boolean masks work
on concrete arrays (their result shape depends on the values). Traced indices are clamped into
bounds, as in JAX.
"""
import builtins

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer, Value
from funcgrad.core.values import aval_of
from funcgrad.numpy._util import broadcast_shapes, broadcast_to_shape, canonicalize_axis


def _is_int_scalar(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _is_array_index(i):
    return isinstance(i, (Value, np.ndarray, list))


def _as_index_array(i):
    from funcgrad.numpy.creation import asarray
    if isinstance(i, list):
        i = np.asarray(i)
        if i.size == 0:
            i = i.astype(np.int32)
    return i if isinstance(i, Value) else (asarray(i) if i.dtype != np.bool_ else i)


def _expand(fname, idx, ndim):
    """The index as a tuple with Ellipsis expanded, bool masks turned into int arrays."""
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
    if n_ell:
        k = out.index(Ellipsis)
        out = out[:k] + [slice(None)] * (ndim - n_real) + out[k + 1:]
    else:
        out = out + [slice(None)] * (ndim - n_real)
    return out


def getitem(x, idx):
    """``x[idx]`` with NumPy semantics (see the module docstring)."""
    fname = "Array.__getitem__"
    av = aval_of(x)
    entries = _expand(fname, idx, av.ndim)
    # New axes (None) become size-1 axes of x, indexed by a full slice.
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
            if not -n <= i < n:
                raise IndexError(f"{fname}: index {i} is out of bounds for axis {axis} with size "
                                 f"{n}")
            i %= n
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
        return _gather_advanced(x, advanced)
    return lax.squeeze(x, squeeze) if squeeze else x


def _advanced_layout(axes, ndim, batch_ndim):
    """Output positions of the remaining axes after an advanced-index gather."""
    adjacent = list(axes) == list(range(axes[0], axes[0] + len(axes)))
    rest = [a for a in range(ndim) if a not in axes]
    if adjacent:
        first = axes[0]
        positions = [a if a < first else a - len(axes) + batch_ndim for a in rest]
    else:
        positions = [batch_ndim + k for k in range(len(rest))]
    return rest, positions, adjacent


def _gather_advanced(x, advanced):
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
    rest, positions, _ = _advanced_layout(axes, av.ndim, len(bshape))
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
def take(a, indices, axis=None, mode=None, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened array when None).

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
    idx = _normalize_negative(_as_index_array(indices), av.shape[axis])
    idx = lax.convert_element_type(idx, dtypes.int32)
    ishape = aval_of(idx).shape
    dnums = lax.GatherDimensionNumbers(
        offset_dims=tuple(range(axis)) + tuple(range(axis + len(ishape), av.ndim + len(ishape)
                                                     - 1)),
        collapsed_slice_dims=(axis,), start_index_map=(axis,))
    slice_sizes = [1 if d == axis else s for d, s in enumerate(av.shape)]
    return lax.gather(a, lax.expand_dims(idx, (len(ishape),)), dnums, slice_sizes,
                      mode="fill" if mode == "fill" else "clip", fill_value=fill_value)


def take_along_axis(arr, indices, axis, mode=None, fill_value=None):
    """Pick values along ``axis`` with an index array of the same rank (as ``np.take_along_axis``).

    Example:
        >>> jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)
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
    idx = broadcast_to_shape(lax.convert_element_type(
        _normalize_negative(idx, av.shape[axis]), dtypes.int32), shape)
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
                      mode="fill" if mode == "fill" else "clip", fill_value=fill_value)


# --- x.at[idx] ------------------------------------------------------------------------------
def _flat_positions(shape, idx):
    """The flat (row-major) positions of the elements ``idx`` selects in an array of ``shape``."""
    size = int(np.prod(shape, dtype=np.int64))
    iota = lax.reshape(lax.iota(dtypes.int32, size), shape)
    return getitem(iota, idx)


def scatter_update(x, idx, values, kind, mode=None):
    """``x`` with ``values`` combined into ``x[idx]`` by ``kind`` (set/add/mul/min/max)."""
    from funcgrad.numpy._util import promote_dtypes
    from funcgrad.numpy.creation import asarray
    x = asarray(x)
    av = aval_of(x)
    positions = _flat_positions(av.shape, idx)
    pshape = aval_of(positions).shape
    values = lax.convert_element_type(values, av.dtype) if not isinstance(values, Value) or \
        aval_of(values).dtype != av.dtype else values
    values = broadcast_to_shape(values if isinstance(values, Value) else asarray(values),
                                pshape)
    n = int(np.prod(pshape, dtype=np.int64))
    flat = lax.reshape(x, (av.size,))
    dnums = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
    fn = {"set": lax.scatter, "add": lax.scatter_add, "mul": lax.scatter_mul,
          "min": lax.scatter_min, "max": lax.scatter_max}[kind]
    out = fn(flat, lax.reshape(positions, (n, 1)), lax.reshape(values, (n,)), dnums,
             mode=mode if mode in (None, "drop", "clip", "fill", "promise_in_bounds") else
             _bad_mode(mode))
    del promote_dtypes
    return lax.reshape(out, av.shape)


def _bad_mode(mode):
    raise ValueError(f"Array.at: mode must be 'drop', 'clip', 'fill' or 'promise_in_bounds', "
                     f"got {mode!r}")


class _IndexUpdateRef:
    """``x.at[idx]``: functional updates, each returning a new array."""

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def get(self, mode=None, fill_value=None):
        """``x[idx]``. Example: ``x.at[0].get()``."""
        return getitem(self.array, self.index)

    def set(self, values, mode=None):
        """``x`` with ``x[idx] = values``. Example: ``x.at[0].set(5.0)``."""
        return scatter_update(self.array, self.index, values, "set", mode)

    def add(self, values, mode=None):
        """``x`` with ``x[idx] += values`` (repeated indices accumulate)."""
        return scatter_update(self.array, self.index, values, "add", mode)

    def subtract(self, values, mode=None):
        from funcgrad.numpy.ufuncs import negative
        return scatter_update(self.array, self.index, negative(values), "add", mode)

    def multiply(self, values, mode=None):
        """``x`` with ``x[idx] *= values``."""
        return scatter_update(self.array, self.index, values, "mul", mode)

    mul = multiply

    def divide(self, values, mode=None):
        """``x`` with ``x[idx] /= values``."""
        from funcgrad.numpy.ufuncs import reciprocal
        return scatter_update(self.array, self.index, reciprocal(values), "mul", mode)

    def power(self, values, mode=None):
        """``x`` with ``x[idx] **= values``."""
        from funcgrad.numpy.ufuncs import power
        current = getitem(self.array, self.index)
        return scatter_update(self.array, self.index, power(current, values), "set", mode)

    def min(self, values, mode=None):
        """``x`` with ``x[idx] = minimum(x[idx], values)``."""
        return scatter_update(self.array, self.index, values, "min", mode)

    def max(self, values, mode=None):
        """``x`` with ``x[idx] = maximum(x[idx], values)``."""
        return scatter_update(self.array, self.index, values, "max", mode)


class _AtIndexer:
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index):
        return _IndexUpdateRef(self.array, index)
