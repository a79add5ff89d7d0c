"""Shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims, concatenate,
pad, iota, slice and rev."""
import builtins
import math

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import array_ops, dtypes, interpreters
from funcgrad.core import batching_util as _bu
from funcgrad.core.ad_util import Zero, deflinear, defjvp_zero, instantiate, is_undefined_primal
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo
from funcgrad.lax import elementwise, reductions   # module objects: both import this module


def _ints(values):
    return tuple(int(v) for v in values)


def _unary_t(fn):
    """The transpose rule of a one-operand linear primitive from ``fn(ct, aval, **params)``."""
    def rule(ct, x, **params):
        return [Zero(x.aval) if type(ct) is Zero else fn(ct, x.aval, **params)]
    return rule


# --- broadcast_in_dim ---------------------------------------------------------------------
broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract(x, shape, broadcast_dimensions):
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"lax.broadcast_in_dim: operand {x.str_short()} needs {x.ndim} "
                        f"broadcast_dimensions, got {broadcast_dimensions}")
    for d, od in zip(x.shape, broadcast_dimensions):
        if not 0 <= od < len(shape) or d not in (1, shape[od]):
            raise TypeError(f"lax.broadcast_in_dim: cannot broadcast {x.str_short()} to shape "
                            f"{shape} with broadcast_dimensions={broadcast_dimensions}")
    if list(broadcast_dimensions) != sorted(broadcast_dimensions):
        raise TypeError(f"lax.broadcast_in_dim: broadcast_dimensions {broadcast_dimensions} "
                        f"must be increasing")
    return ShapedArray(shape, x.dtype, x.weak_type)


broadcast_in_dim_p.def_lowering(
    lambda ctx, x, shape, broadcast_dimensions:
    stablehlo.broadcast_in_dim(_hlo.ir_type(ctx.avals_out[0]), x, list(broadcast_dimensions)))


def _broadcast_in_dim_t(ct, aval, shape, broadcast_dimensions):
    new_axes = tuple(i for i in range(len(shape)) if i not in broadcast_dimensions)
    expanded = tuple(od for d, od in zip(aval.shape, broadcast_dimensions)
                     if d == 1 and shape[od] != 1)
    summed = reductions.reduce_sum(ct, tuple(sorted(new_axes + expanded))) \
        if (new_axes or expanded) else ct
    return reshape(summed, aval.shape)


deflinear(broadcast_in_dim_p, _unary_t(_broadcast_in_dim_t))


def _broadcast_in_dim_batch(args, dims, shape, broadcast_dimensions):
    x, = args
    x = _bu.bdim_to_front(x, dims[0])
    size = aval_of(x).shape[0]
    return broadcast_in_dim_p.bind(x, shape=(size,) + tuple(shape),
                                   broadcast_dimensions=(0,) + _bu.shift_axes(
                                       broadcast_dimensions)), 0


broadcast_in_dim_p.def_batch(_broadcast_in_dim_batch)


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """Broadcast ``x`` to ``shape``; operand dim i maps to output dim broadcast_dimensions[i].

    Example:
        >>> lax.broadcast_in_dim(jnp.ones(3), (2, 3), (1,)).shape
        (2, 3)
    """
    shape, dims = _ints(shape), _ints(broadcast_dimensions)
    aval = aval_of(x)
    if aval.shape == shape and dims == tuple(range(len(shape))):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


def broadcast(x, sizes):
    """Add leading dimensions ``sizes``. Example: ``lax.broadcast(x, (4,))``."""
    aval = aval_of(x)
    sizes = _ints(sizes)
    return broadcast_in_dim(x, sizes + aval.shape,
                            tuple(range(len(sizes), len(sizes) + aval.ndim)))


def broadcast_to_rank(x, rank):
    aval = aval_of(x)
    return broadcast(x, (1,) * (rank - aval.ndim)) if aval.ndim < rank else x


# --- reshape ----------------------------------------------------------------------------------
reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_abstract(x, new_sizes):
    if math.prod(new_sizes) != x.size:
        raise TypeError(f"lax.reshape: cannot reshape {x.str_short()} ({x.size} elements) to "
                        f"{new_sizes} ({math.prod(new_sizes)} elements)")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


reshape_p.def_lowering(
    lambda ctx, x, new_sizes: stablehlo.reshape(_hlo.ir_type(ctx.avals_out[0]), x))
deflinear(reshape_p, _unary_t(lambda ct, aval, new_sizes: reshape(ct, aval.shape)))


def _reshape_batch(args, dims, new_sizes):
    x = _bu.bdim_to_front(args[0], dims[0])
    return reshape_p.bind(x, new_sizes=(aval_of(x).shape[0],) + tuple(new_sizes)), 0


reshape_p.def_batch(_reshape_batch)


def reshape(x, new_sizes, dimensions=None):
    """Reshape (row-major); ``dimensions`` transposes first.

    Example:
        >>> lax.reshape(jnp.arange(6), (2, 3)).shape
        (2, 3)
    """
    if dimensions is not None and tuple(dimensions) != tuple(range(len(dimensions))):
        x = transpose(x, dimensions)
    new_sizes = _ints(new_sizes)
    if aval_of(x).shape == new_sizes:
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


# --- transpose ----------------------------------------------------------------------------
transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_abstract(x, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"lax.transpose: permutation {permutation} is not a permutation of "
                        f"the axes of {x.str_short()}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


transpose_p.def_lowering(lambda ctx, x, permutation: stablehlo.transpose(x, list(permutation)))
deflinear(transpose_p, _unary_t(lambda ct, aval, permutation: transpose(
    ct, tuple(int(i) for i in np.argsort(permutation)))))


def _transpose_batch(args, dims, permutation):
    d = dims[0]
    # output axis 0 takes the batch; the others follow the permutation around it
    perm = (d,) + tuple(p + (p >= d) for p in permutation)
    return transpose_p.bind(args[0], permutation=perm), 0


transpose_p.def_batch(_transpose_batch)


def transpose(x, permutation):
    """Permute axes. Example: ``lax.transpose(x, (1, 0))``."""
    permutation = _ints(permutation)
    if permutation == tuple(range(len(permutation))):
        return x
    return transpose_p.bind(x, permutation=permutation)


# --- squeeze and expand_dims (as reshapes, with their own names in the Jaxpr) -----------------
squeeze_p = Primitive("squeeze")


@squeeze_p.def_abstract_eval
def _squeeze_abstract(x, dimensions):
    for d in dimensions:
        if not 0 <= d < x.ndim or x.shape[d] != 1:
            raise TypeError(f"lax.squeeze: cannot squeeze axis {d} of {x.str_short()} (it must "
                            f"exist and have size 1)")
    return ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions), x.dtype,
                       x.weak_type)


squeeze_p.def_lowering(
    lambda ctx, x, dimensions: stablehlo.reshape(_hlo.ir_type(ctx.avals_out[0]), x))
deflinear(squeeze_p, _unary_t(lambda ct, aval, dimensions: reshape(ct, aval.shape)))


def _squeeze_batch(args, dims, dimensions):
    x = _bu.bdim_to_front(args[0], dims[0])
    return squeeze_p.bind(x, dimensions=_bu.shift_axes(dimensions)), 0


squeeze_p.def_batch(_squeeze_batch)


def squeeze(x, dimensions):
    """Remove size-1 axes ``dimensions``. Example: ``lax.squeeze(x, (0,))``."""
    ndim = aval_of(x).ndim
    dimensions = tuple(sorted(d % ndim if ndim else d for d in _ints(dimensions)))
    if not dimensions:
        return x
    return squeeze_p.bind(x, dimensions=dimensions)


expand_dims_p = Primitive("expand_dims")


@expand_dims_p.def_abstract_eval
def _expand_dims_abstract(x, dimensions):
    ndim = x.ndim + len(dimensions)
    shape = list(x.shape)
    for d in sorted(dimensions):
        if not 0 <= d < ndim:
            raise TypeError(f"lax.expand_dims: axis {d} is out of range for a result of rank "
                            f"{ndim}")
        shape.insert(d, 1)
    return ShapedArray(shape, x.dtype, x.weak_type)


expand_dims_p.def_lowering(
    lambda ctx, x, dimensions: stablehlo.reshape(_hlo.ir_type(ctx.avals_out[0]), x))
deflinear(expand_dims_p, _unary_t(lambda ct, aval, dimensions: reshape(ct, aval.shape)))


def _expand_dims_batch(args, dims, dimensions):
    x = _bu.bdim_to_front(args[0], dims[0])
    return expand_dims_p.bind(x, dimensions=_bu.shift_axes(dimensions)), 0


expand_dims_p.def_batch(_expand_dims_batch)


def expand_dims(x, dimensions):
    """Insert size-1 axes at ``dimensions`` (of the result). Example: ``lax.expand_dims(x, (0,))``."""
    ndim = aval_of(x).ndim + len(dimensions)
    dimensions = tuple(sorted(d % ndim for d in _ints(dimensions)))
    if not dimensions:
        return x
    return expand_dims_p.bind(x, dimensions=dimensions)


# --- concatenate ----------------------------------------------------------------------------
concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_abstract(*xs, dimension):
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise TypeError(f"lax.concatenate: dimension {dimension} is out of range for "
                        f"{first.str_short()}")
    for x in xs[1:]:
        same = (x.ndim == first.ndim and x.dtype == first.dtype and builtins.all(
            a == b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != dimension))
        if not same:
            raise TypeError(f"lax.concatenate: operands must agree in dtype and in every axis "
                            f"but {dimension}, got {', '.join(a.str_short() for a in xs)}")
    shape = list(first.shape)
    shape[dimension] = builtins.sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, first.dtype, builtins.all(x.weak_type for x in xs))


concatenate_p.def_lowering(
    lambda ctx, *xs, dimension: stablehlo.concatenate(list(xs), dimension))


def _concatenate_t(ct, *xs, dimension):
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined_primal(x) else None for x in xs]
    res, offset = [], 0
    for x in xs:
        size = (x.aval if is_undefined_primal(x) else aval_of(x)).shape[dimension]
        if is_undefined_primal(x):
            res.append(slice_in_dim(ct, offset, offset + size, 1, dimension))
        else:
            res.append(None)
        offset += size
    return res


deflinear(concatenate_p, _concatenate_t)


def _concatenate_batch(args, dims, dimension):
    xs = _bu.all_to_front(args, dims)
    return concatenate_p.bind(*xs, dimension=dimension + 1), 0


concatenate_p.def_batch(_concatenate_batch)


def concatenate(operands, dimension):
    """Join arrays along ``dimension``. Example: ``lax.concatenate([x, y], 0)``."""
    operands = list(operands)
    if len(operands) == 1:
        return operands[0]
    return concatenate_p.bind(*operands, dimension=int(dimension))


# --- pad ----------------------------------------------------------------------------------
pad_p = Primitive("pad")


@pad_p.def_abstract_eval
def _pad_abstract(x, padding_value, padding_config):
    if padding_value.shape != () or padding_value.dtype != x.dtype:
        raise TypeError(f"lax.pad: padding_value must be a scalar of {x.dtype}, got "
                        f"{padding_value.str_short()}")
    if len(padding_config) != x.ndim:
        raise TypeError(f"lax.pad: padding_config needs {x.ndim} (low, high, interior) "
                        f"triples for {x.str_short()}, got {len(padding_config)}")
    shape = []
    for d, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise TypeError(f"lax.pad: interior padding must be >= 0, got {interior}")
        size = lo + hi + d + builtins.max(d - 1, 0) * interior
        if size < 0:
            raise TypeError(f"lax.pad: padding {padding_config} gives a negative size for "
                            f"{x.str_short()}")
        shape.append(size)
    return ShapedArray(shape, x.dtype, x.weak_type)


pad_p.def_lowering(
    lambda ctx, x, pv, padding_config: stablehlo.pad(
        x, pv, [c[0] for c in padding_config], [c[1] for c in padding_config],
        [c[2] for c in padding_config]))


def _pad_t(ct, x, padding_value, padding_config):
    if type(ct) is Zero:
        return [Zero(x.aval) if is_undefined_primal(x) else None,
                Zero(padding_value.aval) if is_undefined_primal(padding_value) else None]
    ct_aval = aval_of(ct)
    zero = np.zeros((), ct_aval.dtype)
    unpadded = pad(ct, zero, [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    t_x = slice(unpadded, (0,) * ct_aval.ndim, aval_of(unpadded).shape,
                tuple(i + 1 for _, _, i in padding_config))
    res_x = t_x if is_undefined_primal(x) else None
    res_pv = None
    if is_undefined_primal(padding_value):
        axes = tuple(range(ct_aval.ndim))
        total = reductions.reduce_sum(ct, axes) if axes else ct
        inner = reductions.reduce_sum(t_x, axes) if axes else t_x
        res_pv = elementwise.sub(total, inner)
    return [res_x, res_pv]


deflinear(pad_p, _pad_t)


def _pad_batch(args, dims, padding_config):
    x, pv = args
    xd, pd = dims
    size = _bu.batch_size(args, dims)
    config = ((0, 0, 0),) + tuple(padding_config)
    if pd is _bu.not_mapped:
        return pad_p.bind(_bu.bdim_to_front(x, xd), pv, padding_config=config), 0
    # A batched padding value: pad with zeros, then select the per-lane value where padded.
    aval = aval_of(x)
    x = _bu.bdim_to_front(x, xd, size)
    zero = np.zeros((), aval.dtype)
    padded = pad_p.bind(x, zero, padding_config=config)
    out_shape = aval_of(padded).shape
    ones = broadcast_in_dim(np.array(True), aval_of(x).shape[1:], ())   # no big constants
    inside = pad_p.bind(ones, np.zeros((), dtypes.bool_), padding_config=tuple(padding_config))
    inside = broadcast_in_dim(inside, out_shape, tuple(range(1, len(out_shape))))
    fill = broadcast_in_dim(_bu.bdim_to_front(pv, pd), out_shape, (0,))
    return elementwise.select_n_p.bind(inside, fill, padded), 0


pad_p.def_batch(_pad_batch)


def pad(x, padding_value, padding_config):
    """Pad with (low, high, interior) per axis; negative low/high crop.

    Example:
        >>> lax.pad(jnp.array([1.0, 2.0]), 0.0, [(1, 2, 1)])   # (low, high, interior)
        Array([0., 1., 0., 2., 0., 0.], dtype=float32)
    """
    padding_value = elementwise._match_scalar(padding_value, x)
    config = tuple(tuple(int(v) for v in c) for c in padding_config)
    return pad_p.bind(x, padding_value, padding_config=config)


# --- iota -----------------------------------------------------------------------------------
iota_p = Primitive("iota")


@iota_p.def_abstract_eval
def _iota_abstract(dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise TypeError(f"lax.iota: dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype, False)


iota_p.def_lowering(
    lambda ctx, dtype, shape, dimension: stablehlo.iota(_hlo.ir_type(ctx.avals_out[0]),
                                                        dimension))
defjvp_zero(iota_p)


def _iota_batch(args, dims, dtype, shape, dimension):
    # iota takes no operands, so it is never batched; kept for the rule checklist
    return iota_p.bind(dtype=dtype, shape=shape, dimension=dimension), _bu.not_mapped


iota_p.def_batch(_iota_batch)


def iota(dtype, size):
    """``[0, 1, ..., size-1]`` of ``dtype``. Example: ``lax.iota("int32", 4)``."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype, shape, dimension):
    """An array of ``shape`` counting along ``dimension``.

    Example:
        >>> lax.broadcasted_iota("int32", (2, 3), 1)
        Array([[0, 1, 2],
               [0, 1, 2]], dtype=int32)
    """
    return iota_p.bind(dtype=dtypes.canonicalize(dtype), shape=_ints(shape),
                       dimension=int(dimension))


# --- slice ----------------------------------------------------------------------------------
slice_p = Primitive("slice")


@slice_p.def_abstract_eval
def _slice_abstract(x, start_indices, limit_indices, strides):
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise TypeError(f"lax.slice: {x.str_short()} needs {x.ndim} start/limit/stride "
                        f"values, got {start_indices}, {limit_indices}, {strides}")
    shape = []
    for d, s, l, st in zip(x.shape, start_indices, limit_indices, strides):
        if not (0 <= s <= l <= d) or st < 1:
            raise TypeError(f"lax.slice: invalid slice start={start_indices} "
                            f"limit={limit_indices} strides={strides} of {x.str_short()}")
        shape.append(-(-(l - s) // st))
    return ShapedArray(shape, x.dtype, x.weak_type)


slice_p.def_lowering(
    lambda ctx, x, start_indices, limit_indices, strides: stablehlo.slice(
        x, list(start_indices), list(limit_indices), list(strides)))


def _slice_t(ct, aval, start_indices, limit_indices, strides):
    cfg = []
    out_shape = aval_of(ct).shape
    for d, s, n, st in zip(aval.shape, start_indices, out_shape, strides):
        real_limit = s + (n - 1) * st + 1 if n > 0 else s
        cfg.append((s, d - real_limit, st - 1 if n > 0 else 0))
    if builtins.any(n == 0 for n in out_shape):
        return zeros_like_shape(aval.shape, aval.dtype)
    return pad(ct, np.zeros((), aval.dtype), cfg)


deflinear(slice_p, _unary_t(_slice_t))


def _slice_batch(args, dims, start_indices, limit_indices, strides):
    x = _bu.bdim_to_front(args[0], dims[0])
    size = aval_of(x).shape[0]
    return slice_p.bind(x, start_indices=(0,) + tuple(start_indices),
                        limit_indices=(size,) + tuple(limit_indices),
                        strides=(1,) + tuple(strides)), 0


slice_p.def_batch(_slice_batch)


def slice(x, start_indices, limit_indices, strides=None):
    """Static slice ``x[start:limit:stride]`` per axis.

    Example:
        >>> lax.slice(jnp.arange(10), (2,), (8,), (2,))
        Array([2, 4, 6], dtype=int32)
    """
    aval = aval_of(x)
    strides = _ints(strides) if strides is not None else (1,) * aval.ndim
    start, limit = _ints(start_indices), _ints(limit_indices)
    if start == (0,) * aval.ndim and limit == aval.shape and strides == (1,) * aval.ndim:
        return x
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


# --- split --------------------------------------------------------------------------------
# One primitive for cutting an axis into consecutive pieces: its transpose is a concatenate
# (the pieces' cotangents side by side), where separate slices would transpose to a sum of
# zero-padded arrays that XLA evaluates in full for every output element.
split_p = Primitive("split", multiple_results=True)


@split_p.def_abstract_eval
def _split_abstract(x, sizes, axis):
    if not 0 <= axis < x.ndim:
        raise TypeError(f"lax.split: axis {axis} is out of range for {x.str_short()}")
    if builtins.any(n < 0 for n in sizes) or builtins.sum(sizes) != x.shape[axis]:
        raise TypeError(f"lax.split: sizes {tuple(sizes)} must be >= 0 and sum to the size "
                        f"{x.shape[axis]} of axis {axis} of {x.str_short()}")
    return [ShapedArray(x.shape[:axis] + (n,) + x.shape[axis + 1:], x.dtype, x.weak_type)
            for n in sizes]


def _split_lowering(ctx, x, sizes, axis):
    shape = ctx.avals_in[0].shape
    outs, start = [], 0
    for n in sizes:
        lo = [0] * len(shape)
        hi = list(shape)
        lo[axis], hi[axis] = start, start + n
        outs.append(stablehlo.slice(x, lo, hi, [1] * len(shape)))
        start += n
    return outs


split_p.def_lowering(_split_lowering)


def _split_t(cts, x, sizes, axis):
    if builtins.all(type(c) is Zero for c in cts):
        return [Zero(x.aval)]
    return [concatenate([instantiate(c) for c in cts], axis)]


deflinear(split_p, _split_t)


def _split_batch(args, dims, sizes, axis):
    x = _bu.bdim_to_front(args[0], dims[0])
    return split_p.bind(x, sizes=sizes, axis=axis + 1), [0] * len(sizes)


split_p.def_batch(_split_batch)


def split(x, sizes, axis=0):
    """Cut ``axis`` of ``x`` into consecutive pieces of the given ``sizes`` (summing to its
    length); returns a list of arrays.

    Example:
        >>> [p.shape for p in lax.split(jnp.ones((2, 7)), (3, 4), axis=1)]
        [(2, 3), (2, 4)]
    """
    sizes = _ints(sizes)
    ndim = aval_of(x).ndim
    axis = int(axis)
    if -ndim <= axis < 0:
        axis += ndim
    return list(split_p.bind(x, sizes=sizes, axis=axis))


def slice_in_dim(x, start, limit, stride=1, axis=0):
    """Slice along one axis. Example: ``lax.slice_in_dim(x, 1, 3, axis=1)``."""
    aval = aval_of(x)
    starts, limits, strides = [0] * aval.ndim, list(aval.shape), [1] * aval.ndim
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


def index_in_dim(x, index, axis=0, keepdims=True):
    """``x`` at ``index`` of ``axis`` (static). Example: ``lax.index_in_dim(x, 0, keepdims=False)``."""
    out = slice_in_dim(x, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


# --- rev ------------------------------------------------------------------------------------
rev_p = Primitive("rev")


@rev_p.def_abstract_eval
def _rev_abstract(x, dimensions):
    for d in dimensions:
        if not 0 <= d < x.ndim:
            raise TypeError(f"lax.rev: axis {d} out of range for {x.str_short()}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


rev_p.def_lowering(lambda ctx, x, dimensions: stablehlo.reverse(x, list(dimensions)))
deflinear(rev_p, _unary_t(lambda ct, aval, dimensions: rev(ct, dimensions)))


def _rev_batch(args, dims, dimensions):
    d = dims[0]
    return rev_p.bind(args[0], dimensions=tuple(a + (a >= d) for a in dimensions)), d


rev_p.def_batch(_rev_batch)


def rev(x, dimensions):
    """Reverse the order of elements along ``dimensions``. Example: ``lax.rev(x, (0,))``."""
    dimensions = _ints(dimensions)
    if not dimensions:
        return x
    return rev_p.bind(x, dimensions=dimensions)


def full(shape, fill_value, dtype=None):
    """An array of ``shape`` filled with ``fill_value``. Example: ``lax.full((2,), 1.0)``."""
    dtype = dtypes.canonicalize(dtype) if dtype is not None else aval_of(fill_value).dtype
    value = elementwise.convert_element_type(fill_value, dtype)
    return broadcast(value, _ints(shape))


def zeros_like_shape(shape, dtype):
    return full(shape, np.zeros((), dtype), dtype)


_ = ir  # keep the MLIR module imported for rules that need attributes


# --- what core's machinery applies without naming a primitive (core/array_ops.py) -------------
def _zeros_of_aval(aval):
    """Zeros of ``aval``: one broadcast of a (weakly typed, if asked) scalar zero; a device
    scalar when eager, so users get ``Array``s."""
    zero = np.zeros((), aval.dtype)
    if aval.weak_type:
        zero = elementwise.convert_element_type_p.bind(zero, new_dtype=aval.dtype, weak_type=True)
    if aval.shape:
        return broadcast_in_dim_p.bind(zero, shape=aval.shape, broadcast_dimensions=())
    if interpreters.is_eager() and not aval.weak_type:
        return elementwise.convert_element_type_p.bind(zero, new_dtype=aval.dtype,
                                                       weak_type=False)
    return zero


array_ops.register(zeros=_zeros_of_aval, broadcast_in_dim=broadcast_in_dim, transpose=transpose)
