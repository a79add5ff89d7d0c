"""``jax.lax``'s functions over other lax operations: slices along one axis, arrays shaped like
others, batched products, index taking, ``scatter_apply`` and ``platform_dependent``.
"""
import math

import numpy as np

from funcgrad.core import dtypes
from funcgrad.core.ad_util import defjvp_zero
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo, indexing, shapes
from funcgrad.lax.dot import dot_general
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow import conditionals


def _axis(axis, ndim, where):
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"lax.{where}: axis {axis} is out of bounds for rank {ndim}")
    return axis % ndim


def _start(index, size, allow_negative):
    """A scalar start index as int32, counted from the end when negative (JAX's rule)."""
    if isinstance(index, (int, np.integer)):
        index = int(index)
        return np.int32(index + size if allow_negative and index < 0 else index)
    index = ew.convert_element_type(index, dtypes.int32)
    if allow_negative:
        index = ew.select(ew.lt(index, np.int32(0)), ew.add(index, np.int32(size)), index)
    return index


def _starts(aval, index, axis, allow_negative):
    starts = [np.int32(0)] * aval.ndim
    starts[axis] = _start(index, aval.shape[axis], allow_negative)
    return starts


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices=True):
    """``dynamic_slice`` along one axis: ``slice_size`` entries from ``start_index`` (negative
    starts count from the end; the slice is clamped to stay in bounds).

    Example:
        >>> x = jnp.arange(10)
        >>> lax.dynamic_slice_in_dim(x, -3, 2), lax.dynamic_slice_in_dim(x, 9, 3)
        (Array([7, 8], dtype=int32), Array([7, 8, 9], dtype=int32))
    """
    aval = aval_of(operand)
    axis = _axis(axis, aval.ndim, "dynamic_slice_in_dim")
    sizes = list(aval.shape)
    sizes[axis] = int(slice_size)
    return indexing.dynamic_slice(operand, _starts(aval, start_index, axis,
                                                   allow_negative_indices), sizes)


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *,
                                allow_negative_indices=True):
    """``dynamic_update_slice`` along one axis, starting at ``start_index``.

    Example:
        >>> lax.dynamic_update_slice_in_dim(jnp.zeros(5), jnp.ones(2), -2, 0)
        Array([0., 0., 0., 1., 1.], dtype=float32)
    """
    aval = aval_of(operand)
    axis = _axis(axis, aval.ndim, "dynamic_update_slice_in_dim")
    return indexing.dynamic_update_slice(operand, update, _starts(aval, start_index, axis,
                                                                  allow_negative_indices))


def dynamic_update_index_in_dim(operand, update, index, axis, *, allow_negative_indices=True):
    """Write ``update`` (with or without the size-1 ``axis``) at position ``index`` of ``axis``.

    Example:
        >>> lax.dynamic_update_index_in_dim(jnp.zeros((3, 2)), jnp.array([1.0, 2.0]), 1, 0)
        Array([[0., 0.],
               [1., 2.],
               [0., 0.]], dtype=float32)
    """
    aval, uaval = aval_of(operand), aval_of(update)
    axis = _axis(axis, aval.ndim, "dynamic_update_index_in_dim")
    if uaval.ndim == aval.ndim - 1:
        update = shapes.expand_dims(update, (axis,))
    elif uaval.ndim != aval.ndim:
        raise TypeError(f"lax.dynamic_update_index_in_dim: update {uaval.str_short()} must have "
                        f"the rank of the operand {aval.str_short()} or one less")
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """An array filled with ``fill_value``, with ``x``'s shape and dtype unless given.

    Example:
        >>> lax.full_like(jnp.zeros((2, 2), jnp.int32), 7)
        Array([[7, 7],
               [7, 7]], dtype=int32)
        >>> lax.full_like(jnp.zeros(3), 0.5, dtype=jnp.float16, shape=(1,))
        Array([0.5], dtype=float16)
    """
    aval = aval_of(x)
    dt = dtypes.canonicalize(dtype) if dtype is not None else aval.dtype
    weak = aval.weak_type if dtype is None else False
    value = ew.convert_element_type(fill_value, dt, weak_type=weak)
    return shapes.broadcast(value, tuple(aval.shape if shape is None else shape))


def broadcast_like(arr, like_arr):
    """``arr`` broadcast (NumPy rules) to the shape of ``like_arr``.

    Example:
        >>> lax.broadcast_like(jnp.array([1.0, 2.0]), jnp.zeros((3, 2)))
        Array([[1., 2.],
               [1., 2.],
               [1., 2.]], dtype=float32)
    """
    aval, target = aval_of(arr), aval_of(like_arr).shape
    if aval.ndim > len(target) or any(
            d not in (1, t) for d, t in zip(aval.shape[::-1], target[::-1])):
        raise ValueError(f"lax.broadcast_like: cannot broadcast {aval.str_short()} to shape "
                         f"{target}")
    lead = len(target) - aval.ndim
    keep = [i for i, d in enumerate(aval.shape) if d == target[lead + i]]
    squeezed = shapes.reshape(arr, tuple(aval.shape[i] for i in keep))
    return shapes.broadcast_in_dim(squeezed, tuple(target), tuple(lead + i for i in keep))


def collapse(operand, start_dimension, stop_dimension=None):
    """Merge axes ``start_dimension:stop_dimension`` into one (Python slice semantics).

    Example:
        >>> lax.collapse(jnp.zeros((2, 3, 4, 5)), 1, 3).shape
        (2, 12, 5)
        >>> lax.collapse(jnp.zeros((2, 3, 4)), -2).shape
        (2, 12)
    """
    shape = aval_of(operand).shape
    lo, hi, _ = slice(start_dimension, stop_dimension).indices(len(shape))
    if hi < lo:
        raise ValueError(f"lax.collapse: empty dimension range [{start_dimension}:"
                         f"{stop_dimension}] of shape {shape}")
    return shapes.reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def index_take(src, idxs, axes):
    """``src[idxs[0], idxs[1], ...]`` along ``axes``: one index array per axis, wrapped
    modulo the axis size; the remaining axes follow the index axis.

    Example:
        >>> x = jnp.arange(12).reshape(3, 4)
        >>> lax.index_take(x, (jnp.array([0, 2, -1]), jnp.array([1, 3, 0])), (0, 1))
        Array([ 1, 11,  8], dtype=int32)
    """
    aval = aval_of(src)
    axes = tuple(_axis(a, aval.ndim, "index_take") for a in axes)
    idxs = list(idxs)
    if len(idxs) != len(axes) or not idxs:
        raise ValueError(f"lax.index_take: need one index array per axis, got {len(idxs)} "
                         f"arrays for axes {axes}")
    cols = []
    for i, a in zip(idxs, axes):
        i = ew.convert_element_type(i, dtypes.int32)
        cols.append(shapes.expand_dims(ew.rem(ew.add(ew.rem(i, np.int32(aval.shape[a])),
                                                     np.int32(aval.shape[a])),
                                              np.int32(aval.shape[a])), (1,)))
    indices = shapes.concatenate(cols, 1)
    sizes = [1 if d in axes else n for d, n in enumerate(aval.shape)]
    dn = indexing.GatherDimensionNumbers(
        offset_dims=tuple(range(1, aval.ndim - len(axes) + 1)), collapsed_slice_dims=axes,
        start_index_map=axes)
    return indexing.gather(src, indices, dn, sizes)


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over the leading (batch) axes of two arrays of one rank >= 2.

    Example:
        >>> lax.batch_matmul(jnp.ones((2, 3, 4)), jnp.ones((2, 4, 5))).shape
        (2, 3, 5)
    """
    la, ra = aval_of(lhs), aval_of(rhs)
    if min(la.ndim, ra.ndim) < 2 or la.ndim != ra.ndim:
        raise ValueError(f"lax.batch_matmul: operands must have one rank >= 2, got "
                         f"{la.str_short()} and {ra.str_short()}")
    batch = tuple(range(la.ndim - 2))
    return dot_general(lhs, rhs, (((la.ndim - 1,), (ra.ndim - 2,)), (batch, batch)),
                           precision=precision)


def empty(shape, dtype, *, out_sharding=None):
    """An array of ``shape`` and ``dtype`` whose values are unspecified (zeros here).

    Example:
        >>> lax.empty((2,), jnp.int32).shape
        (2,)
    """
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return shapes.full(shape, 0, dtypes.canonicalize(dtype))


def dtype(x):
    """The dtype ``x`` has as a funcgrad value (Python scalars take the default types).

    Example:
        >>> lax.dtype(1.0), lax.dtype(jnp.ones(2, jnp.int8))
        (dtype('float32'), dtype('int8'))
    """
    return aval_of(x).dtype


def shape_as_value(shape):
    """A shape as an int array (shapes are static in funcgrad).

    Example:
        >>> lax.shape_as_value((2, 3))
        array([2, 3], dtype=int32)
    """
    return np.asarray(tuple(int(d) for d in shape), np.int32)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """``operand`` with ``func`` applied to the elements selected by ``scatter_indices``
    (the others unchanged); an element selected more than once gets ``func`` applied once.

    Example:
        >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
        >>> lax.scatter_apply(jnp.arange(4.0), jnp.array([[1], [3]]), jnp.exp, dn,
        ...                   update_shape=(2,))
        Array([ 0.       ,  2.7182817,  2.       , 20.085537 ], dtype=float32)
    """
    dn = indexing.ScatterDimensionNumbers(*(tuple(int(i) for i in f) for f in dimension_numbers))
    aval = aval_of(operand)
    sizes = [1 if d in dn.inserted_window_dims else None for d in range(aval.ndim)]
    window = iter(np.asarray(update_shape, int)[list(dn.update_window_dims)])
    sizes = [1 if s == 1 else int(next(window)) for s in sizes]
    gdn = indexing.GatherDimensionNumbers(
        offset_dims=dn.update_window_dims, collapsed_slice_dims=dn.inserted_window_dims,
        start_index_map=dn.scatter_dims_to_operand_dims)
    gathered = indexing.gather(operand, scatter_indices, gdn, sizes,
                               mode="fill" if mode in (None, "drop", "fill") else mode)
    return indexing.scatter(operand, scatter_indices, func(gathered), dn, mode=mode)


# --- platform_dependent ----------------------------------------------------------------------
# platform_index lowers to the position of the compiling platform in its ``platforms`` list (the
# last entry, None, for any other platform), so one staged program carries every branch and XLA
# keeps the one of the platform it compiles for.
platform_index_p = Primitive("platform_index")
platform_index_p.def_abstract_eval(lambda platforms: ShapedArray((), dtypes.int32))
defjvp_zero(platform_index_p)
platform_index_p.def_batch(lambda args, dims, platforms: (platform_index_p.bind(
    platforms=platforms), None))

_PLATFORM_ALIASES = {"gpu": ("cuda", "rocm")}


@platform_index_p.def_lowering
def _platform_index_lowering(ctx, platforms):
    for i, names in enumerate(platforms):
        if names is None or ctx.platform in names:
            return _hlo.constant(np.int32(i), dtypes.int32)
    raise ValueError(f"lax.platform_dependent: no function for platform {ctx.platform!r} "
                     f"among {[n for names in platforms for n in names]} and no default=")


def platform_dependent(*args, default=None, **per_platform):
    """Call ``per_platform[<platform>](*args)`` for the platform the code is compiled for
    (``cpu``, ``cuda``, ``rocm``, ``gpu``, ``tpu``), else ``default(*args)``.

    Every branch is staged (as ``lax.switch``) and must return the same types.

    Example:
        >>> f = lambda x: lax.platform_dependent(x, cpu=lambda v: v + 1.0,
        ...                                      default=lambda v: v - 1.0)
        >>> f(jnp.float32(1.0)), funcgrad.jit(f)(jnp.float32(1.0))
        (Array(2., dtype=float32), Array(2., dtype=float32))
    """
    names = [tuple(_PLATFORM_ALIASES.get(p, (p,))) for p in per_platform]
    branches = list(per_platform.values())
    if default is not None:
        names.append(None)
        branches.append(default)
    if not branches:
        raise TypeError("lax.platform_dependent: give at least one platform's function or "
                        "default=")
    return conditionals.switch(platform_index_p.bind(platforms=tuple(names)), branches, *args)
