"""Indexing primitives: dynamic_slice, dynamic_update_slice, gather and the scatter family.

Index vectors of ``gather``/``scatter`` lie along the last axis of ``indices`` (as in
``jax.lax``). Out-of-bounds handling (``mode``): gather clamps ("clip", the default, also what
XLA does natively) or returns ``fill_value`` ("fill"); scatter drops out-of-bounds updates
("drop"/"fill", the default) or clamps them ("clip").
"""
import collections

import numpy as np
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import batching_util as _bu
from funcgrad.core import dtypes
from funcgrad.core.ad_util import (Zero, add_tangents, instantiate, is_undefined_primal,
                                   tangent_aval, zeros_like_aval)
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo
from funcgrad.lax._doc_examples import example_section
from funcgrad.lax import elementwise as ew
from funcgrad.lax.elementwise import convert_element_type
from funcgrad.lax.reductions import reduce_hlo
from funcgrad.lax.shapes import (broadcast_in_dim, broadcasted_iota, concatenate, reshape,
                                 squeeze)


def _zero_out(out):
    return Zero(tangent_aval(aval_of(out)))


# --- dynamic_slice -----------------------------------------------------------------------------
dynamic_slice_p = Primitive("dynamic_slice")


def _check_starts(name, operand, starts):
    if len(starts) != operand.ndim:
        raise TypeError(f"lax.{name}: {operand.str_short()} needs {operand.ndim} start indices, "
                        f"got {len(starts)}")
    for s in starts:
        if s.shape != () or not dtypes.is_integer(s.dtype):
            raise TypeError(f"lax.{name}: start indices must be integer scalars, got "
                            f"{s.str_short()}")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract(operand, *starts, slice_sizes):
    _check_starts("dynamic_slice", operand, starts)
    for d, s in zip(operand.shape, slice_sizes):
        if not 0 <= s <= d:
            raise TypeError(f"lax.dynamic_slice: slice_sizes {slice_sizes} do not fit in "
                            f"{operand.str_short()}")
    return ShapedArray(slice_sizes, operand.dtype, operand.weak_type)


def _same_index_type(starts, avals):
    """stablehlo wants all start indices of one integer type: convert them to int32."""
    return [_hlo.convert(s, a, dtypes.int32) for s, a in zip(starts, avals)]


dynamic_slice_p.def_lowering(
    lambda ctx, operand, *starts, slice_sizes: stablehlo.dynamic_slice(
        operand, _same_index_type(starts, ctx.avals_in[1:]), list(slice_sizes)))


# dynamic_slice: linear in the operand
def _ds_jvp(primals, tangents, slice_sizes):
    operand, *starts = primals
    out = dynamic_slice_p.bind(operand, *starts, slice_sizes=slice_sizes)
    t = tangents[0]
    if type(t) is Zero or not dtypes.is_inexact(aval_of(out).dtype):
        return out, _zero_out(out)
    return out, dynamic_slice_p.bind(t, *starts, slice_sizes=slice_sizes)


def _ds_t(ct, operand, *starts, slice_sizes):
    if type(ct) is Zero:
        return [Zero(operand.aval)] + [None] * len(starts)
    zeros = zeros_like_aval(operand.aval)
    return [dynamic_update_slice_p.bind(zeros, ct, *starts)] + [None] * len(starts)


dynamic_slice_p.def_jvp(_ds_jvp)
dynamic_slice_p.def_transpose(_ds_t)


def _stack_starts(starts, dims, size):
    """Batched start indices (scalars, some batched) as int32[size, n] index vectors."""
    cols = []
    for s, d in zip(starts, dims):
        s = convert_element_type(s, dtypes.int32)
        if d is _bu.not_mapped:
            s = broadcast_in_dim(s, (size, 1), ())
        else:
            s = broadcast_in_dim(s, (size, 1), (0,))
        cols.append(s)
    return concatenate(cols, 1)


def _dynamic_slice_batch(args, dims, slice_sizes):
    operand, *starts = args
    od, *sds = dims
    size = _bu.batch_size(args, dims)
    n = len(starts)
    if all(d is _bu.not_mapped for d in sds):
        operand = _bu.bdim_to_front(operand, od)
        zero = np.zeros((), aval_of(starts[0]).dtype if starts else dtypes.int32)
        return dynamic_slice_p.bind(operand, zero, *starts,
                                    slice_sizes=(size,) + tuple(slice_sizes)), 0
    # Per-lane starts: a gather of one window per lane (clamped like dynamic_slice).
    indices = _stack_starts(starts, sds, size)
    if od is _bu.not_mapped:
        dn = GatherDimensionNumbers(offset_dims=tuple(range(1, n + 1)), collapsed_slice_dims=(),
                                    start_index_map=tuple(range(n)))
        sizes = tuple(slice_sizes)
    else:
        operand = _bu.bdim_to_front(operand, od)
        dn = GatherDimensionNumbers(offset_dims=tuple(range(1, n + 1)), collapsed_slice_dims=(),
                                    start_index_map=tuple(range(1, n + 1)),
                                    operand_batching_dims=(0,), start_indices_batching_dims=(0,))
        sizes = (min(size, 1),) + tuple(slice_sizes)   # a batch of 0 slices 0 wide
    return gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=sizes, mode="clip",
                         fill_value=None), 0


dynamic_slice_p.def_batch(_dynamic_slice_batch)


def dynamic_slice(operand, start_indices, slice_sizes):
    """``operand[s0:s0+n0, ...]`` with traced starts, clamped so the slice stays in bounds.

    Example:
        >>> x = jnp.arange(12.0).reshape(3, 4)
        >>> lax.dynamic_slice(x, (jnp.int32(1), 1), (2, 3))
        Array([[ 5.,  6.,  7.],
               [ 9., 10., 11.]], dtype=float32)
        >>> lax.dynamic_slice(x, (5, 0), (2, 2))    # start clamped to row 1
        Array([[4., 5.],
               [8., 9.]], dtype=float32)
    """
    return dynamic_slice_p.bind(operand, *start_indices,
                                slice_sizes=tuple(int(s) for s in slice_sizes))


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    aval = aval_of(operand)
    starts = [0] * aval.ndim
    starts[axis] = index
    sizes = list(aval.shape)
    sizes[axis] = 1
    out = dynamic_slice(operand, [np.int32(s) if isinstance(s, int) else s for s in starts], sizes)
    if keepdims:
        return out
    return squeeze(out, (axis,))


# --- dynamic_update_slice ------------------------------------------------------------------
dynamic_update_slice_p = Primitive("dynamic_update_slice")


@dynamic_update_slice_p.def_abstract_eval
def _dus_abstract(operand, update, *starts):
    _check_starts("dynamic_update_slice", operand, starts)
    if update.ndim != operand.ndim or any(u > d for u, d in zip(update.shape, operand.shape)) \
            or update.dtype != operand.dtype:
        raise TypeError(f"lax.dynamic_update_slice: update {update.str_short()} must have the "
                        f"dtype and rank of {operand.str_short()} and fit inside it")
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type)


dynamic_update_slice_p.def_lowering(
    lambda ctx, operand, update, *starts: stablehlo.dynamic_update_slice(
        operand, update, _same_index_type(starts, ctx.avals_in[2:])))


# dynamic_update_slice: linear in operand and update
def _dus_jvp(primals, tangents):
    operand, update, *starts = primals
    out = dynamic_update_slice_p.bind(operand, update, *starts)
    t_op, t_up = tangents[:2]
    if (type(t_op) is Zero and type(t_up) is Zero) or \
            not dtypes.is_inexact(aval_of(out).dtype):
        return out, _zero_out(out)
    return out, dynamic_update_slice_p.bind(instantiate(t_op), instantiate(t_up), *starts)


def _dus_t(ct, operand, update, *starts):
    up_aval = update.aval if is_undefined_primal(update) else aval_of(update)
    if type(ct) is Zero:
        return [Zero(operand.aval) if is_undefined_primal(operand) else None,
                Zero(update.aval) if is_undefined_primal(update) else None] + \
            [None] * len(starts)
    ct_op = ct_up = None
    if is_undefined_primal(operand):
        ct_op = dynamic_update_slice_p.bind(ct, zeros_like_aval(up_aval), *starts)
    if is_undefined_primal(update):
        ct_up = dynamic_slice_p.bind(ct, *starts, slice_sizes=up_aval.shape)
    return [ct_op, ct_up] + [None] * len(starts)


dynamic_update_slice_p.def_jvp(_dus_jvp)
dynamic_update_slice_p.def_transpose(_dus_t)


def _dynamic_update_slice_batch(args, dims):
    operand, update, *starts = args
    od, ud, *sds = dims
    size = _bu.batch_size(args, dims)
    n = len(starts)
    operand = _bu.bdim_to_front(operand, od, size)
    update = _bu.bdim_to_front(update, ud, size)
    if all(d is _bu.not_mapped for d in sds):
        zero = np.zeros((), aval_of(starts[0]).dtype if starts else dtypes.int32)
        return dynamic_update_slice_p.bind(operand, update, zero, *starts), 0
    indices = _stack_starts(starts, sds, size)
    dn = ScatterDimensionNumbers(update_window_dims=tuple(range(1, n + 1)),
                                 inserted_window_dims=(),
                                 scatter_dims_to_operand_dims=tuple(range(1, n + 1)),
                                 operand_batching_dims=(0,), scatter_indices_batching_dims=(0,))
    return scatter_p.bind(operand, indices, update, dimension_numbers=dn, mode="clip"), 0


dynamic_update_slice_p.def_batch(_dynamic_update_slice_batch)


def dynamic_update_slice(operand, update, start_indices):
    """``operand`` with ``update`` written at ``start_indices`` (clamped to stay in bounds).

    Example:
        >>> lax.dynamic_update_slice(jnp.zeros((3, 4)), jnp.ones((1, 2)), (jnp.int32(2), 1))
        Array([[0., 0., 0., 0.],
               [0., 0., 0., 0.],
               [0., 1., 1., 0.]], dtype=float32)
    """
    return dynamic_update_slice_p.bind(operand, update, *start_indices)


# --- gather ----------------------------------------------------------------------------------
GatherDimensionNumbers = collections.namedtuple(
    "GatherDimensionNumbers", ["offset_dims", "collapsed_slice_dims", "start_index_map",
                               "operand_batching_dims", "start_indices_batching_dims"],
    defaults=((), ()))

gather_p = Primitive("gather")


def gather_shape(operand, indices, dnums, slice_sizes):
    batch_shape = indices.shape[:-1]
    offset_sizes = [s for i, s in enumerate(slice_sizes)
                    if i not in dnums.collapsed_slice_dims and i not in dnums.operand_batching_dims]
    rank = len(batch_shape) + len(offset_sizes)
    shape, b, o = [], iter(batch_shape), iter(offset_sizes)
    for i in range(rank):
        shape.append(next(o) if i in dnums.offset_dims else next(b))
    return tuple(shape)


@gather_p.def_abstract_eval
def _gather_abstract(operand, indices, dimension_numbers, slice_sizes, mode, fill_value):
    d = dimension_numbers
    if not dtypes.is_integer(indices.dtype) or indices.ndim < 1:
        raise TypeError(f"lax.gather: indices must be an integer array with the index vector "
                        f"on the last axis, got {indices.str_short()}")
    if indices.shape[-1] != len(d.start_index_map):
        raise TypeError(f"lax.gather: index vectors of length {indices.shape[-1]} but "
                        f"start_index_map {d.start_index_map}")
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"lax.gather: slice_sizes {slice_sizes} must have one entry per axis "
                        f"of {operand.str_short()}")
    for i in d.collapsed_slice_dims:
        if slice_sizes[i] > 1:
            raise TypeError(f"lax.gather: collapsed axis {i} needs slice size <= 1, got "
                            f"{slice_sizes[i]}")
    return ShapedArray(gather_shape(operand, indices, d, slice_sizes), operand.dtype,
                       operand.weak_type)


def _in_bounds_mask(ctx, indices, idx_aval, operand_aval, dims, window_sizes):
    """bool[batch...]: whether each index vector's window lies inside the operand."""
    batch_shape = idx_aval.shape[:-1]
    n = idx_aval.shape[-1]
    limit = np.array([operand_aval.shape[d] - window_sizes[d] for d in dims],
                     dtypes.int64 if idx_aval.dtype.itemsize == 8 else dtypes.int32)
    idx_dtype = idx_aval.dtype
    zero = _hlo.constant(0, idx_dtype, idx_aval.shape)
    upper = _hlo.constant(limit.astype(idx_dtype), idx_dtype, (n,))
    upper = stablehlo.broadcast_in_dim(_hlo.ir_type(idx_aval), upper, [idx_aval.ndim - 1])
    ok = stablehlo.and_(_hlo.compare(indices, zero, "GE", idx_dtype),
                        _hlo.compare(indices, upper, "LE", idx_dtype))
    return reduce_hlo("and", ok, idx_aval.update(dtype=dtypes.bool_), [idx_aval.ndim - 1],
                      ShapedArray(batch_shape, dtypes.bool_))


def _gather_lowering(ctx, operand, indices, dimension_numbers, slice_sizes, mode, fill_value):
    d = dimension_numbers
    op_aval, idx_aval = ctx.avals_in
    out = ctx.avals_out[0]
    dnums = stablehlo.GatherDimensionNumbers.get(
        offset_dims=list(d.offset_dims), collapsed_slice_dims=list(d.collapsed_slice_dims),
        operand_batching_dims=list(d.operand_batching_dims),
        start_indices_batching_dims=list(d.start_indices_batching_dims),
        start_index_map=list(d.start_index_map), index_vector_dim=idx_aval.ndim - 1)
    result = stablehlo.gather(operand, indices, dnums, list(slice_sizes),
                              indices_are_sorted=False)
    if mode != "fill":
        return result
    mask = _in_bounds_mask(ctx, indices, idx_aval, op_aval, d.start_index_map, slice_sizes)
    batch_positions = [i for i in range(out.ndim) if i not in d.offset_dims]
    mask = stablehlo.broadcast_in_dim(_hlo.tensor_type(out.shape, dtypes.bool_), mask,
                                      batch_positions)
    if fill_value is None:
        fill_value = (np.nan if dtypes.is_inexact(out.dtype) else
                      (True if out.dtype == dtypes.bool_ else
                       (np.iinfo(out.dtype).min if dtypes.is_signed(out.dtype)
                        else np.iinfo(out.dtype).max)))
    fill = _hlo.constant(fill_value, out.dtype, out.shape)
    return stablehlo.select(mask, result, fill)


gather_p.def_lowering(_gather_lowering)


def _scatter_dnums_for_gather(d):
    return ScatterDimensionNumbers(
        update_window_dims=d.offset_dims, inserted_window_dims=d.collapsed_slice_dims,
        scatter_dims_to_operand_dims=d.start_index_map,
        operand_batching_dims=d.operand_batching_dims,
        scatter_indices_batching_dims=d.start_indices_batching_dims)


# gather: linear in the operand
def _gather_jvp(primals, tangents, dimension_numbers, slice_sizes, mode, fill_value):
    operand, indices = primals
    out = gather_p.bind(operand, indices, dimension_numbers=dimension_numbers,
                        slice_sizes=slice_sizes, mode=mode, fill_value=fill_value)
    t = tangents[0]
    if type(t) is Zero or not dtypes.is_inexact(aval_of(out).dtype):
        return out, _zero_out(out)
    return out, gather_p.bind(t, indices, dimension_numbers=dimension_numbers,
                              slice_sizes=slice_sizes, mode=mode,
                              fill_value=0 if mode == "fill" else fill_value)


def _gather_t(ct, operand, indices, dimension_numbers, slice_sizes, mode, fill_value):
    if type(ct) is Zero:
        return [Zero(operand.aval), None]
    zeros = zeros_like_aval(operand.aval)
    dn = _scatter_dnums_for_gather(dimension_numbers)
    return [scatter_add_p.bind(zeros, indices, ct, dimension_numbers=dn,
                               mode="clip" if mode == "clip" else "fill"), None]


gather_p.def_jvp(_gather_jvp)
gather_p.def_transpose(_gather_t)


def _plus1(axes):
    return tuple(a + 1 for a in axes)


def _gather_batch(args, dims, dimension_numbers, slice_sizes, mode, fill_value):
    operand, indices = args
    od, idd = dims
    d = dimension_numbers
    if idd is _bu.not_mapped:
        # vmap's axis is one more window axis of the operand, put first in the output
        operand = _bu.bdim_to_front(operand, od)
        dn = GatherDimensionNumbers(
            offset_dims=(0,) + _plus1(d.offset_dims),
            collapsed_slice_dims=_plus1(d.collapsed_slice_dims),
            start_index_map=_plus1(d.start_index_map),
            operand_batching_dims=_plus1(d.operand_batching_dims),
            start_indices_batching_dims=d.start_indices_batching_dims)
        sizes = (aval_of(operand).shape[0],) + tuple(slice_sizes)
    elif od is _bu.not_mapped:
        # vmap's axis is one more batch axis of the indices: the first non-offset output axis
        indices = _bu.bdim_to_front(indices, idd)
        dn = GatherDimensionNumbers(
            offset_dims=_plus1(d.offset_dims), collapsed_slice_dims=d.collapsed_slice_dims,
            start_index_map=d.start_index_map, operand_batching_dims=d.operand_batching_dims,
            start_indices_batching_dims=_plus1(d.start_indices_batching_dims))
        sizes = tuple(slice_sizes)
    else:
        operand = _bu.bdim_to_front(operand, od)
        indices = _bu.bdim_to_front(indices, idd)
        dn = GatherDimensionNumbers(
            offset_dims=_plus1(d.offset_dims),
            collapsed_slice_dims=_plus1(d.collapsed_slice_dims),
            start_index_map=_plus1(d.start_index_map),
            operand_batching_dims=(0,) + _plus1(d.operand_batching_dims),
            start_indices_batching_dims=(0,) + _plus1(d.start_indices_batching_dims))
        sizes = (min(aval_of(operand).shape[0], 1),) + tuple(slice_sizes)
    return gather_p.bind(operand, indices, dimension_numbers=dn, slice_sizes=sizes, mode=mode,
                         fill_value=fill_value), 0


gather_p.def_batch(_gather_batch)


def _check_mode(name, mode, allowed):
    mode = "clip" if mode is None and "clip" in allowed and name == "gather" else mode
    if mode is None:
        mode = allowed[0]
    if mode == "promise_in_bounds":
        mode = "clip"
    if mode not in allowed:
        raise ValueError(f"lax.{name}: mode must be one of {allowed + ('promise_in_bounds',)}, "
                         f"got {mode!r}")
    return mode


def gather(operand, start_indices, dimension_numbers, slice_sizes, mode=None, fill_value=None):
    """General gather: slices of ``operand`` of ``slice_sizes`` starting at ``start_indices``
    (index vectors on the last axis), arranged per ``dimension_numbers``.

    Example:
        >>> x, idx = jnp.arange(6.0).reshape(3, 2), jnp.array([2, 0])
        >>> dn = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
        ...                                 start_index_map=(0,))
        >>> lax.gather(x, idx[:, None], dn, slice_sizes=(1, 2))   # x[idx]
        Array([[4., 5.],
               [0., 1.]], dtype=float32)
    """
    dn = GatherDimensionNumbers(*(tuple(int(i) for i in f) for f in dimension_numbers))
    return gather_p.bind(operand, start_indices, dimension_numbers=dn,
                         slice_sizes=tuple(int(s) for s in slice_sizes),
                         mode=_check_mode("gather", mode, ("clip", "fill")),
                         fill_value=fill_value)


# --- scatter family --------------------------------------------------------------------------
ScatterDimensionNumbers = collections.namedtuple(
    "ScatterDimensionNumbers", ["update_window_dims", "inserted_window_dims",
                                "scatter_dims_to_operand_dims", "operand_batching_dims",
                                "scatter_indices_batching_dims"], defaults=((), ()))


def _scatter_abstract(operand, indices, updates, dimension_numbers, mode, **_):
    d = dimension_numbers
    if updates.dtype != operand.dtype:
        raise TypeError(f"lax.scatter: updates {updates.str_short()} must have the dtype of the "
                        f"operand {operand.str_short()}")
    if not dtypes.is_integer(indices.dtype) or indices.shape[-1:] != (
            len(d.scatter_dims_to_operand_dims),):
        raise TypeError(f"lax.scatter: indices {indices.str_short()} must be integer with index "
                        f"vectors of length {len(d.scatter_dims_to_operand_dims)} on the last axis")
    expected_rank = indices.ndim - 1 + len(d.update_window_dims)
    if updates.ndim != expected_rank:
        raise TypeError(f"lax.scatter: updates {updates.str_short()} should have rank "
                        f"{expected_rank} for indices {indices.str_short()}")
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type)


_COMBINE = {"set": lambda a, b: b, "add": stablehlo.add, "mul": stablehlo.multiply,
            "min": stablehlo.minimum, "max": stablehlo.maximum}


def _scatter_lowering(kind):
    def rule(ctx, operand, indices, updates, dimension_numbers, mode, **_):
        d = dimension_numbers
        op_aval, idx_aval, upd_aval = ctx.avals_in
        if mode == "clip":
            window_sizes = _scatter_window_sizes(op_aval, upd_aval, d)
            upper = [op_aval.shape[od] - window_sizes[od] for od in d.scatter_dims_to_operand_dims]
            lo = _hlo.constant(0, idx_aval.dtype, idx_aval.shape)
            hi = _hlo.constant(np.asarray(upper, idx_aval.dtype), idx_aval.dtype,
                               (len(upper),))
            hi = stablehlo.broadcast_in_dim(_hlo.ir_type(idx_aval), hi, [idx_aval.ndim - 1])
            indices = stablehlo.clamp(lo, indices, hi)
        dnums = stablehlo.ScatterDimensionNumbers.get(
            update_window_dims=list(d.update_window_dims),
            inserted_window_dims=list(d.inserted_window_dims),
            input_batching_dims=list(d.operand_batching_dims),
            scatter_indices_batching_dims=list(d.scatter_indices_batching_dims),
            scattered_dims_to_operand_dims=list(d.scatter_dims_to_operand_dims),
            index_vector_dim=idx_aval.ndim - 1)
        op = stablehlo.ScatterOp([_hlo.ir_type(op_aval)], [operand], indices, [updates], dnums,
                                 indices_are_sorted=False, unique_indices=False)
        scalar = ShapedArray((), op_aval.dtype)
        _hlo.scalar_region(op, [scalar, scalar], _COMBINE[kind])
        return op.results[0]
    return rule


def _scatter_window_sizes(op_aval, upd_aval, d):
    """Per operand axis, the extent of one update window."""
    window = [upd_aval.shape[i] for i in d.update_window_dims]
    sizes, it = [], iter(window)
    for axis in range(op_aval.ndim):
        if axis in d.inserted_window_dims or axis in d.operand_batching_dims:
            sizes.append(1)
        else:
            sizes.append(next(it))
    return sizes


def _make_scatter(kind):
    prim = Primitive("scatter" if kind == "set" else f"scatter_{kind}")
    prim.def_abstract_eval(_scatter_abstract)
    prim.def_lowering(_scatter_lowering(kind))
    return prim


def _gather_dnums_for_scatter(d):
    """The GatherDimensionNumbers that read back what a scatter with ``d`` writes."""
    return GatherDimensionNumbers(
        offset_dims=d.update_window_dims, collapsed_slice_dims=d.inserted_window_dims,
        start_index_map=d.scatter_dims_to_operand_dims,
        operand_batching_dims=d.operand_batching_dims,
        start_indices_batching_dims=d.scatter_indices_batching_dims)


def _read_back(x, indices, upd_aval, dn, mode):
    """What each update position of a scatter with ``dn`` sees of ``x`` (0 where dropped)."""
    op_aval = aval_of(x)
    sizes = _scatter_window_sizes(op_aval, upd_aval, dn)
    return gather_p.bind(x, indices, dimension_numbers=_gather_dnums_for_scatter(dn),
                         slice_sizes=tuple(sizes),
                         mode="clip" if mode == "clip" else "fill", fill_value=0)


def _scatter_batch(prim):
    def rule(args, dims, dimension_numbers, mode, **params):
        # Batch all three operands on axis 0 and pair the operand's and the indices' new axes
        # as scatter batching dims: one scatter for the whole batch.
        size = _bu.batch_size(args, dims)
        operand, indices, updates = _bu.all_to_front(args, dims, size)
        d = dimension_numbers
        dn = ScatterDimensionNumbers(
            update_window_dims=_plus1(d.update_window_dims),
            inserted_window_dims=_plus1(d.inserted_window_dims),
            scatter_dims_to_operand_dims=_plus1(d.scatter_dims_to_operand_dims),
            operand_batching_dims=(0,) + _plus1(d.operand_batching_dims),
            scatter_indices_batching_dims=(0,) + _plus1(d.scatter_indices_batching_dims))
        return prim.bind(operand, indices, updates, dimension_numbers=dn, mode=mode,
                         **params), 0
    return rule


scatter_p = _make_scatter("set")


# scatter (set): the update that wins each location is found by scattering ids; the
# tangent is then written with linear primitives (scatter_add and masks)
def _scatter_jvp(primals, tangents, dimension_numbers, mode, **kw):
    operand, indices, updates = primals
    out = scatter_p.bind(operand, indices, updates, dimension_numbers=dimension_numbers,
                         mode=mode, **kw)
    t_op, _, t_up = tangents
    out_aval = aval_of(out)
    if (type(t_op) is Zero and type(t_up) is Zero) or not dtypes.is_inexact(out_aval.dtype):
        return out, _zero_out(out)
    up_aval = aval_of(updates)
    ids = ew.add(reshape(broadcasted_iota(dtypes.int32, (max(up_aval.size, 1),), 0),
                         up_aval.shape) if up_aval.size else
                 np.zeros(up_aval.shape, np.int32), np.int32(1))
    zeros_i = np.zeros((), np.int32)
    scattered = scatter_p.bind(broadcast_in_dim(zeros_i, out_aval.shape, ()), indices, ids,
                               dimension_numbers=dimension_numbers, mode=mode, **kw)
    winner = ew.eq(_read_back(scattered, indices, up_aval, dimension_numbers, mode), ids)
    untouched = ew.eq(scattered, broadcast_in_dim(zeros_i, out_aval.shape, ()))
    dt = out_aval.dtype
    t_op = ew.mul(instantiate(t_op), ew.convert_element_type(untouched, dt))
    t_up = ew.mul(instantiate(t_up), ew.convert_element_type(winner, dt))
    return out, scatter_add_p.bind(t_op, indices, t_up, dimension_numbers=dimension_numbers,
                                   mode=mode, **kw)


scatter_p.def_jvp(_scatter_jvp)
scatter_p.def_batch(_scatter_batch(scatter_p))

scatter_add_p = _make_scatter("add")


# scatter_add: linear in operand and updates
def _scatter_add_jvp(primals, tangents, dimension_numbers, mode, **kw):
    operand, indices, updates = primals
    out = scatter_add_p.bind(operand, indices, updates, dimension_numbers=dimension_numbers,
                             mode=mode, **kw)
    t_op, _, t_up = tangents
    if (type(t_op) is Zero and type(t_up) is Zero) or \
            not dtypes.is_inexact(aval_of(out).dtype):
        return out, _zero_out(out)
    return out, scatter_add_p.bind(instantiate(t_op), indices, instantiate(t_up),
                                   dimension_numbers=dimension_numbers, mode=mode, **kw)


def _scatter_add_t(ct, operand, indices, updates, dimension_numbers, mode, **kw):
    up_aval = updates.aval if is_undefined_primal(updates) else aval_of(updates)
    if type(ct) is Zero:
        return [Zero(operand.aval) if is_undefined_primal(operand) else None, None,
                Zero(updates.aval) if is_undefined_primal(updates) else None]
    ct_op = ct if is_undefined_primal(operand) else None
    ct_up = _read_back(ct, indices, up_aval, dimension_numbers, mode) \
        if is_undefined_primal(updates) else None
    return [ct_op, None, ct_up]


scatter_add_p.def_jvp(_scatter_add_jvp)
scatter_add_p.def_transpose(_scatter_add_t)
scatter_add_p.def_batch(_scatter_batch(scatter_add_p))

scatter_mul_p = _make_scatter("mul")


# scatter_mul: d(op * prod upd) (non-zero updates are assumed for the update tangent)
def _scatter_mul_jvp(primals, tangents, dimension_numbers, mode, **kw):
    operand, indices, updates = primals
    out = scatter_mul_p.bind(operand, indices, updates, dimension_numbers=dimension_numbers,
                             mode=mode, **kw)
    t_op, _, t_up = tangents
    out_aval = aval_of(out)
    if not dtypes.is_inexact(out_aval.dtype):
        return out, _zero_out(out)
    t = Zero(tangent_aval(out_aval))
    if type(t_op) is not Zero:
        t = scatter_mul_p.bind(t_op, indices, updates, dimension_numbers=dimension_numbers,
                               mode=mode, **kw)
    if type(t_up) is not Zero:
        zeros = broadcast_in_dim(np.zeros((), out_aval.dtype), out_aval.shape, ())
        rel = scatter_add_p.bind(zeros, indices, ew.div(t_up, updates),
                                 dimension_numbers=dimension_numbers, mode=mode, **kw)
        t = add_tangents(t, ew.mul(out, rel))
    return out, t


scatter_mul_p.def_jvp(_scatter_mul_jvp)


def _scatter_mul_t(ct, operand, indices, updates, dimension_numbers, mode, **kw):
    if is_undefined_primal(updates):
        raise TypeError("transpose of scatter_mul: the updates cannot be linear")
    if type(ct) is Zero:
        return [Zero(operand.aval), None, None]
    return [scatter_mul_p.bind(ct, indices, updates, dimension_numbers=dimension_numbers,
                               mode=mode, **kw), None, None]


scatter_mul_p.def_transpose(_scatter_mul_t)
scatter_mul_p.def_batch(_scatter_batch(scatter_mul_p))


# scatter_min/max: the tangent of whichever value(s) won, averaged over ties
def _scatter_chooser_jvp(prim):
    def rule(primals, tangents, dimension_numbers, mode, **kw):
        operand, indices, updates = primals
        out = prim.bind(operand, indices, updates, dimension_numbers=dimension_numbers,
                        mode=mode, **kw)
        t_op, _, t_up = tangents
        out_aval = aval_of(out)
        if not dtypes.is_inexact(out_aval.dtype):
            return out, _zero_out(out)
        dt = out_aval.dtype
        up_aval = aval_of(updates)
        zeros = broadcast_in_dim(np.zeros((), dt), out_aval.shape, ())
        op_won = ew.convert_element_type(ew.eq(operand, out), dt)
        up_won = ew.convert_element_type(
            ew.eq(updates, _read_back(out, indices, up_aval, dimension_numbers, mode)), dt)
        count = ew.add(op_won, scatter_add_p.bind(zeros, indices, up_won,
                                                  dimension_numbers=dimension_numbers,
                                                  mode=mode, **kw))
        num = ew.add(ew.mul(instantiate(t_op), op_won),
                     scatter_add_p.bind(zeros, indices, ew.mul(instantiate(t_up), up_won),
                                        dimension_numbers=dimension_numbers, mode=mode,
                                        **kw))
        return out, ew.div(num, count)
    return rule


scatter_min_p = _make_scatter("min")
scatter_min_p.def_jvp(_scatter_chooser_jvp(scatter_min_p))
scatter_min_p.def_batch(_scatter_batch(scatter_min_p))

scatter_max_p = _make_scatter("max")
scatter_max_p.def_jvp(_scatter_chooser_jvp(scatter_max_p))
scatter_max_p.def_batch(_scatter_batch(scatter_max_p))

_SCATTERS = {"set": scatter_p, "add": scatter_add_p, "mul": scatter_mul_p,
             "min": scatter_min_p, "max": scatter_max_p}


def _scatter_fn(kind):
    prim = _SCATTERS[kind]

    def fn(operand, scatter_indices, updates, dimension_numbers, mode=None):
        dn = ScatterDimensionNumbers(*(tuple(int(i) for i in f) for f in dimension_numbers))
        return prim.bind(operand, scatter_indices, updates, dimension_numbers=dn,
                         mode=_check_mode(prim.name, mode, ("drop", "clip", "fill")))
    fn.__name__ = prim.name
    fn.__doc__ = (f"Scatter ``updates`` into ``operand`` at ``scatter_indices`` combining with "
                  f"``{kind}``; out-of-bounds updates are dropped unless mode='clip'.\n\n"
                  f"{example_section(prim.name)}")
    return fn


scatter = _scatter_fn("set")
scatter_add = _scatter_fn("add")
scatter_mul = _scatter_fn("mul")
scatter_min = _scatter_fn("min")
scatter_max = _scatter_fn("max")
