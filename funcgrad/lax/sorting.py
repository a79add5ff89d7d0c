"""Sorting primitives: ``sort`` (several operands, lexicographic keys, stable) and ``top_k``;
``argsort`` is a sort carrying an iota.

Ordering is NumPy's: NaNs sort after every number (all NaNs equal to each other), ``-0.0`` and
``0.0`` are equal (a stable sort keeps their order); complex numbers order by real part, then
imaginary part. ``top_k`` (XLA's TopK, a partial sort) treats every NaN as the largest value
and ``-0.0 == 0.0``; ties go to the lower index.
"""
import numpy as np
from jaxlib.mlir.dialects import chlo, stablehlo

from funcgrad.core import batching_util as bu
from funcgrad.core import dtypes
from funcgrad.core.ad_util import Zero, tangent_aval
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo, indexing, shapes
from funcgrad.lax import elementwise as ew


# --- comparators -------------------------------------------------------------------------------
def _float_lt_eq(a, b, dtype):
    """(a < b, a == b) on scalars with NaN after everything and NaN == NaN."""
    lt = _hlo.compare(a, b, "LT", dtype)
    eq = _hlo.compare(a, b, "EQ", dtype)
    a_nan = _hlo.compare(a, a, "NE", dtype)
    b_nan = _hlo.compare(b, b, "NE", dtype)
    lt = stablehlo.or_(lt, stablehlo.and_(b_nan, stablehlo.not_(a_nan)))
    eq = stablehlo.or_(eq, stablehlo.and_(a_nan, b_nan))
    return lt, eq


def _lt_eq(a, b, dtype):
    dtype = np.dtype(dtype)
    if dtypes.is_complex(dtype):
        rdt = dtypes.real_dtype(dtype)
        lt_r, eq_r = _float_lt_eq(stablehlo.real(a), stablehlo.real(b), rdt)
        lt_i, eq_i = _float_lt_eq(stablehlo.imag(a), stablehlo.imag(b), rdt)
        return stablehlo.or_(lt_r, stablehlo.and_(eq_r, lt_i)), stablehlo.and_(eq_r, eq_i)
    if dtypes.is_float(dtype):
        return _float_lt_eq(a, b, dtype)
    return _hlo.compare(a, b, "LT", dtype), _hlo.compare(a, b, "EQ", dtype)


def _lexicographic_less(pairs, key_dtypes):
    """``pairs[k] = (a_k, b_k)``: whether a < b comparing keys in order."""
    result = None
    for (a, b), dt in reversed(list(zip(pairs, key_dtypes))):
        lt, eq = _lt_eq(a, b, dt)
        result = lt if result is None else stablehlo.or_(lt, stablehlo.and_(eq, result))
    return result


def _sort_hlo(operands, avals, dimension, is_stable, num_keys, descending=False):
    """stablehlo.sort of ``operands`` along ``dimension`` ordered by the first ``num_keys``."""
    op = stablehlo.SortOp([_hlo.ir_type(a) for a in avals], list(operands), dimension=dimension,
                          is_stable=is_stable)
    scalars = []
    for a in avals:
        scalars += [ShapedArray((), a.dtype)] * 2

    def comparator(*args):
        pairs = [(args[2 * k], args[2 * k + 1]) for k in range(num_keys)]
        if descending:
            pairs = [(b, a) for a, b in pairs]
        return _lexicographic_less(pairs, [a.dtype for a in avals[:num_keys]])

    _hlo.scalar_region(op, scalars, comparator)
    return list(op.results)


# --- sort ----------------------------------------------------------------------------------------
sort_p = Primitive("sort", multiple_results=True)


@sort_p.def_abstract_eval
def _sort_abstract(*operands, dimension, is_stable, num_keys):
    if not operands:
        raise TypeError("lax.sort: needs at least one operand")
    shape = operands[0].shape
    for o in operands:
        if o.shape != shape:
            raise TypeError(f"lax.sort: all operands must have one shape, got "
                            f"{', '.join(x.str_short() for x in operands)}")
    if not shape or not 0 <= dimension < len(shape):
        raise TypeError(f"lax.sort: dimension {dimension} is out of range for "
                        f"{operands[0].str_short()}")
    if not 1 <= num_keys <= len(operands):
        raise TypeError(f"lax.sort: num_keys={num_keys} must be between 1 and the number of "
                        f"operands ({len(operands)})")
    return [o for o in operands]


sort_p.def_lowering(lambda ctx, *ops, dimension, is_stable, num_keys: _sort_hlo(
    ops, ctx.avals_in, dimension, is_stable, num_keys))


def _take_along(x, idx, dimension):
    """``x`` gathered along ``dimension`` by ``idx`` (an int32 array of x's shape)."""
    aval = aval_of(x)
    shape = aval.shape
    parts = [idx if d == dimension else shapes.broadcasted_iota(np.int32, shape, d)
             for d in range(len(shape))]
    full = shapes.concatenate([shapes.expand_dims(p, (len(shape),)) for p in parts], len(shape))
    dnums = indexing.GatherDimensionNumbers(offset_dims=(),
                                            collapsed_slice_dims=tuple(range(len(shape))),
                                            start_index_map=tuple(range(len(shape))))
    return indexing.gather(x, full, dnums, (1,) * len(shape), mode="clip")


def _sort_jvp(primals, tangents, dimension, is_stable, num_keys):
    shape = aval_of(primals[0]).shape
    iota = shapes.broadcasted_iota(np.int32, shape, dimension)
    outs = sort_p.bind(*primals, iota, dimension=dimension, is_stable=is_stable,
                       num_keys=num_keys)
    perm = outs[-1]
    t_out = [t if type(t) is Zero else _take_along(t, perm, dimension) for t in tangents]
    return outs[:-1], t_out


sort_p.def_jvp(_sort_jvp)


def _sort_batch(args, dims, dimension, is_stable, num_keys):
    ops = bu.all_to_front(args, dims)
    outs = sort_p.bind(*ops, dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return outs, [0] * len(outs)


sort_p.def_batch(_sort_batch)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort ``operand`` (an array, or a sequence of same-shaped arrays sorted together by the
    first ``num_keys`` of them, lexicographically) along ``dimension``. NaNs sort last.

    Example:
        >>> lax.sort(jnp.array([3.0, jnp.nan, 1.0]))
        Array([ 1.,  3., nan], dtype=float32)
        >>> k, v = jnp.array([2, 0, 1]), jnp.array([10.0, 20.0, 30.0])
        >>> lax.sort((k, v), num_keys=1)     # v reordered by k
        (Array([0, 1, 2], dtype=int32), Array([20., 30., 10.], dtype=float32))
    """
    single = not isinstance(operand, (tuple, list))
    ops = [operand] if single else list(operand)
    if not ops:
        raise TypeError("lax.sort: needs at least one operand")
    ndim = aval_of(ops[0]).ndim
    if ndim == 0:
        raise TypeError(f"lax.sort: cannot sort a 0-d array {aval_of(ops[0]).str_short()}")
    if not -ndim <= dimension < ndim:
        raise TypeError(f"lax.sort: dimension {dimension} is out of range for "
                        f"{aval_of(ops[0]).str_short()}")
    outs = sort_p.bind(*ops, dimension=int(dimension) % ndim, is_stable=bool(is_stable),
                       num_keys=int(num_keys))
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """``values`` reordered as ``keys`` sort. Example: ``k, v = lax.sort_key_val(k, v)``."""
    return sort((keys, values), dimension, is_stable, num_keys=1)


def argsort(operand, dimension=-1, is_stable=True, descending=False, index_dtype="int32"):
    """The indices that sort ``operand`` along ``dimension`` (NaNs last; stable by default).

    Example:
        >>> lax.argsort(jnp.array([3.0, 1.0, 2.0]))
        Array([1, 2, 0], dtype=int32)
    """
    aval = aval_of(operand)
    if aval.ndim == 0:
        raise TypeError(f"lax.argsort: cannot sort a 0-d array {aval.str_short()}")
    dimension = int(dimension) % aval.ndim
    idx = shapes.broadcasted_iota(index_dtype, aval.shape, dimension)
    if descending:
        # Stable descending: sort reversed data ascending, then map positions back, so equal
        # elements keep their original order.
        n = aval.shape[dimension]
        rev_op = shapes.rev(operand, (dimension,))
        _, perm = sort((rev_op, idx), dimension, is_stable, num_keys=1)
        perm = shapes.rev(ew.sub(np.asarray(n - 1, perm.dtype), perm), (dimension,))
        return perm
    _, perm = sort((operand, idx), dimension, is_stable, num_keys=1)
    return perm


# --- top_k ---------------------------------------------------------------------------------------
top_k_p = Primitive("top_k", multiple_results=True)


@top_k_p.def_abstract_eval
def _top_k_abstract(operand, k):
    if operand.ndim == 0:
        raise TypeError(f"lax.top_k: operand must have at least one axis, got "
                        f"{operand.str_short()}")
    if not 0 <= k <= operand.shape[-1]:
        raise TypeError(f"lax.top_k: k={k} must be between 0 and the last axis size of "
                        f"{operand.str_short()}")
    shape = operand.shape[:-1] + (k,)
    return [ShapedArray(shape, operand.dtype, operand.weak_type), ShapedArray(shape, np.int32)]


def _top_k_lowering(ctx, operand, k):
    # XLA's TopK (a partial sort on CPU) is orders of magnitude faster than a full sort.
    aval = ctx.avals_in[0]
    out_types = [_hlo.ir_type(a) for a in ctx.avals_out]
    if dtypes.is_integer(aval.dtype):
        return list(chlo.TopKOp(operand, k, results=out_types).results)
    if not dtypes.is_float(aval.dtype):
        return _top_k_sort_lowering(ctx, operand, k)
    # TopK orders by IEEE total order (-NaN smallest, -0 < +0): rank a canonical copy (every
    # NaN positive, -0 -> +0), then read the values from the operand at the chosen indices.
    is_nan = _hlo.compare(operand, operand, "NE", aval.dtype)
    nan = _hlo.constant(np.nan, aval.dtype, aval.shape)
    zero = _hlo.constant(0, aval.dtype, aval.shape)
    canon = stablehlo.select(_hlo.compare(operand, zero, "EQ", aval.dtype), zero, operand)
    canon = stablehlo.select(is_nan, nan, canon)
    _, idx = chlo.TopKOp(canon, k, results=out_types).results
    nd = aval.ndim
    idx_aval = ctx.avals_out[1]
    idx_col = stablehlo.reshape(_hlo.tensor_type(idx_aval.shape + (1,), np.int32), idx)
    dnums = stablehlo.GatherDimensionNumbers.get(
        offset_dims=[], collapsed_slice_dims=[nd - 1],
        operand_batching_dims=list(range(nd - 1)),
        start_indices_batching_dims=list(range(nd - 1)),
        start_index_map=[nd - 1], index_vector_dim=nd)
    vals = stablehlo.gather(operand, idx_col, dnums, [1] * nd, indices_are_sorted=False)
    return [vals, idx]


def _top_k_sort_lowering(ctx, operand, k):
    aval = ctx.avals_in[0]
    d = aval.ndim - 1
    idx_aval = ShapedArray(aval.shape, np.int32)
    iota = stablehlo.iota(_hlo.ir_type(idx_aval), d)
    vals, idx = _sort_hlo([operand, iota], [aval, idx_aval], d, True, 1, descending=True)
    start, limit = [0] * aval.ndim, list(aval.shape)
    limit[-1] = k
    return [stablehlo.slice(vals, start, limit, [1] * aval.ndim),
            stablehlo.slice(idx, start, limit, [1] * aval.ndim)]


top_k_p.def_lowering(_top_k_lowering)


def _top_k_jvp(primals, tangents, k):
    operand, = primals
    t, = tangents
    vals, idx = top_k_p.bind(operand, k=k)
    if type(t) is Zero:
        return [vals, idx], [Zero(tangent_aval(aval_of(vals).update(weak_type=False))),
                             Zero(ShapedArray(aval_of(idx).shape, dtypes.float0))]
    shape = aval_of(idx).shape
    nd = len(shape)
    parts = [idx if d == nd - 1 else shapes.broadcasted_iota(np.int32, shape, d)
             for d in range(nd)]
    full = shapes.concatenate([shapes.expand_dims(p, (nd,)) for p in parts], nd)
    dnums = indexing.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=tuple(range(nd)),
                                            start_index_map=tuple(range(nd)))
    t_vals = indexing.gather(t, full, dnums, (1,) * nd, mode="clip")
    return [vals, idx], [t_vals, Zero(ShapedArray(shape, dtypes.float0))]


top_k_p.def_jvp(_top_k_jvp)


def _top_k_batch(args, dims, k):
    x, = args
    d, = dims
    nd = aval_of(x).ndim
    if d == nd - 1:
        x, d = bu.moveaxis(x, d, 0), 0
    outs = top_k_p.bind(x, k=k)
    return outs, [d, d]


top_k_p.def_batch(_top_k_batch)


def top_k(operand, k):
    """The ``k`` largest entries along the last axis, in descending order, and their indices
    (NaN counts as largest; ties keep the lower index first).

    Example:
        >>> vals, idx = lax.top_k(jnp.array([1.0, 4.0, 2.0]), 2)
    """
    return tuple(top_k_p.bind(operand, k=int(k)))
