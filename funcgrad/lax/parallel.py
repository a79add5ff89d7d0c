"""Collectives over named axes: psum, pmean, pmax, pmin, all_gather, axis_index, ppermute.

A named axis is bound by a transformation that maps a function over it: ``vmap(f,
axis_name="i")`` today (``pmap`` later). Inside, ``psum(x, "i")`` sums ``x`` over the members of
axis ``"i"`` and gives every member the total.

How they run:
- Under ``vmap`` each collective is a primitive whose batching rule (registered in
  ``batching_util.collective_rules``) turns it into an ordinary array operation over vmap's
  batch axis: ``psum`` becomes ``reduce_sum``, ``all_gather`` a moveaxis, ``ppermute`` a
  gather, ``axis_index`` an iota.
- Every collective primitive has an abstract evaluation rule, so it can be staged into a Jaxpr
  (e.g. inside ``jit`` under ``vmap``: the batching rule of ``jit`` batches the body with the
  enclosing axis name). The primitive params (``axis_name`` as a tuple of names, ``perm``,
  ``axis``/``tiled``, and the axis size where the result shape needs it) are what a ``pmap``
  lowering needs to emit ``stablehlo.all_reduce`` / ``all_gather`` / ``collective_permute`` /
  ``replica_id``.
- Inside ``pmap`` each collective is lowered to that StableHLO collective over every device of
  the program (the lowering context's ``axis_env`` lists the device axis names and sizes);
  lowering one over a name no transformation binds raises ``NameError`` naming the axis.
- Inside ``shard_map`` (a program partitioned over a mesh) the ``axis_env`` is a
  ``lax.mesh_axes.MeshAxisEnv``: the collectives group partitions by the mesh axes they name
  (device-id groups, a channel handle and global device ids), ``axis_index`` is computed from
  ``partition_id``.

The size of a named axis is found from the interpreters in effect: any interpreter with an
``axis`` attribute (``.name``, ``.size``) binds that name.
"""
import math

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad import tree_util
from funcgrad.core import ad_util, array_ops, dtypes, interpreters, vma
from funcgrad.core.batching import BatchInterpreter
from funcgrad.core import batching_util as _bu
from funcgrad.core.avals import ShapedArray
from funcgrad.core.axes import canonicalize_axis
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import PYTHON_SCALARS, aval_of
from funcgrad.lax import _hlo, mesh_axes
from funcgrad.lax import elementwise as ew
from funcgrad.lax import reductions as red
from funcgrad.lax.elementwise import div, mul, select_n
from funcgrad.lax.indexing import GatherDimensionNumbers, dynamic_slice, gather
from funcgrad.lax import shapes
from funcgrad.lax.shapes import broadcast_in_dim, iota, reshape, squeeze


def _names(axis_name):
    if isinstance(axis_name, (tuple, list)):
        return tuple(axis_name)
    return (axis_name,)


def _single_name(axis_name, fn):
    """(names, total size) of the axes a collective ``fn`` that is not a reduction runs over:
    one name, or several mesh axes of a ``shard_map`` (devices grouped over all of them, the
    first name major). Several names where one is a ``vmap`` axis are refused."""
    names = _names(axis_name)
    if len(names) != 1:
        for n in names:
            axis_size(n)
            if isinstance(_binder(n), BatchInterpreter):
                raise ValueError(
                    f"lax.{fn}: {fn} over several axes at once ({axis_name!r}) where {n!r} is "
                    f"a vmap axis is not supported; apply it to one axis at a time, e.g. "
                    f"nest two calls (several mesh axes of a shard_map are fine)")
    return names, math.prod(axis_size(n) for n in names)


def _binder(name):
    """The interpreter binding axis ``name`` (a vmap's, or a pmap/shard_map device axis)."""
    interp = interpreters.current()
    while interp is not None:
        axis = getattr(interp, "axis", None)
        if axis is not None and getattr(axis, "name", None) == name:
            return interp
        interp = interp.parent
    return None


def _one_axis(rule, fn):
    """A vmap collective rule for ``fn``, refusing several axis names at once (the vmap
    axis with mesh axes: a shard_map lowered into a single-device program)."""
    def checked(axis_data, args, dims, /, **params):
        if len(params["axis_name"]) != 1:
            raise ValueError(f"lax.{fn} over several axes at once ({params['axis_name']}) "
                             f"cannot run where {axis_data.name!r} is a vmap axis (or a "
                             f"shard_map computed on one device, inside a loop or branch body "
                             f"under plain jit); apply it to one axis at a time")
        return rule(axis_data, args, dims, **params)
    return checked


def axis_size(axis_name):
    """The size of the named axis ``axis_name`` bound by an enclosing ``vmap`` (or pmap).

    Example:
        >>> funcgrad.vmap(lambda x: lax.axis_size("i") * x, axis_name="i")(jnp.ones(3))
        Array([3., 3., 3.], dtype=float32)
    """
    interp = interpreters.current()
    while interp is not None:
        axis = getattr(interp, "axis", None)
        if axis is not None and getattr(axis, "name", None) == axis_name:
            return axis.size
        interp = interp.parent
    raise NameError(f"unbound axis name: {axis_name!r}. Collectives need an enclosing "
                    f"vmap(..., axis_name={axis_name!r}) (or pmap) that binds it")


def _replica_groups(ctx, names, fn):
    """The replica groups of a collective over ``names``, and the extra attributes of its op.

    In a ``pmap`` program ``ctx.axis_env`` holds (name, size) of its one device axis and the
    group is every replica. In a program partitioned over a mesh (``mesh_axes.MeshAxisEnv``,
    inside ``shard_map``) the groups list the partition ids sharing the other mesh axes'
    positions, and the op needs a channel handle (and global device ids)."""
    env = dict(ctx.axis_env)
    for name in names:
        if name not in env:
            raise NameError(f"lax.{fn}: unbound axis name {name!r}: collectives run only "
                            f"inside a transformation that binds the axis (shard_map over a "
                            f"mesh with that axis, pmap(..., axis_name={name!r}) or vmap(..., "
                            f"axis_name={name!r}))")
    if mesh_axes.is_partitioned(ctx.axis_env):
        return (mesh_axes.groups_attr(ctx.axis_env.device_groups(names)),
                {"channel_handle": mesh_axes.channel_handle()})
    size = env[names[0]]
    return ir.DenseElementsAttr.get(np.arange(size, dtype=np.int64).reshape(1, size)), {}


def _global_ids(extra):
    """``extra`` plus ``use_global_device_ids`` where groups name partitions."""
    return dict(extra, use_global_device_ids=True) if extra else extra


def _tree_apply(fn, x):
    return tree_util.tree_map(fn, x)


def _rest(names, axis):
    return tuple(n for n in names if n != axis.name)


def _passthrough_batch(prim):
    # A collective over another (outer) axis acts on each vmap lane's value independently.
    def rule(args, dims, **params):
        return prim.bind(args[0], **params), dims[0]
    return rule


def _linear_jvp(prim):
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        t = tangents[0]
        if ad_util.is_zero(t):
            return out, ad_util.Zero(ad_util.tangent_aval(aval_of(out)))
        return out, prim.bind(t, **params)
    return rule


def _typed(names):
    return frozenset(names) & vma.typed_axes()


def _vma_reducing(ins, axis_name):
    # psum: the operand varies over the summed axes (pvary first where it does not)
    need = ins[0] | _typed(axis_name)
    return [need], need - frozenset(axis_name)


def _vma_extreme(ins, axis_name):
    return [None], ins[0] - frozenset(axis_name)


def _vma_varying(ins, axis_name, **_):
    # all_gather, psum_scatter, ppermute, all_to_all: varying in, varying out (as JAX types them)
    need = ins[0] | _typed(axis_name)
    return [need], need


# --- psum / pmax / pmin --------------------------------------------------------------------------
def _allreduce(kind):
    prim = Primitive(f"p{kind}")

    @prim.def_abstract_eval
    def _abstract(x, axis_name):
        if kind == "sum" and x.dtype == dtypes.bool_:
            raise TypeError(f"lax.psum: bool operands are not supported ({x.str_short()}); "
                            f"convert to an integer type first")
        return ShapedArray(x.shape, x.dtype, x.weak_type)

    @prim.def_lowering
    def _lowering(ctx, x, axis_name):
        aval = ctx.avals_in[0]
        groups, extra = _replica_groups(ctx, axis_name, prim.name)
        op = stablehlo.AllReduceOp([_hlo.ir_type(aval)], [x], groups, **_global_ids(extra))
        monoid = kind if aval.dtype != dtypes.bool_ else {"max": "or", "min": "and"}[kind]
        scalar = ShapedArray((), aval.dtype)
        _hlo.scalar_region(op, [scalar, scalar], red._MONOID_HLO[monoid])
        return op.results[0]
    return prim


def _allreduce_collective(prim, kind):
    def rule(axis, args, dims, axis_name):
        x, d = args[0], dims[0]
        if d is _bu.not_mapped:
            if kind == "sum":
                out = x * axis.size if isinstance(x, PYTHON_SCALARS) else ew.mul(x, axis.size)
            else:
                out = x
        else:
            reducer = {"sum": red.reduce_sum, "max": red.reduce_max, "min": red.reduce_min}[kind]
            out = reducer(x, (d,))
        rest = _rest(axis_name, axis)
        if rest:
            out = prim.bind(out, axis_name=rest)
        return out, _bu.not_mapped
    return rule


def _pextreme_jvp(prim):
    def rule(primals, tangents, axis_name):
        x, = primals
        out = prim.bind(x, axis_name=axis_name)
        t = tangents[0]
        if ad_util.is_zero(t) or not dtypes.is_inexact(aval_of(x).dtype):
            return out, ad_util.Zero(ad_util.tangent_aval(aval_of(out)))
        # the tangent of the winning member(s), averaged over ties
        hit = ew.convert_element_type(ew.eq(x, out), aval_of(x).dtype)
        num = psum_p.bind(ew.mul(hit, t), axis_name=axis_name)
        den = psum_p.bind(hit, axis_name=axis_name)
        return out, ew.div(num, den)
    return rule


psum_p = _allreduce("sum")
psum_p.def_rule("collective", _allreduce_collective(psum_p, "sum"))
psum_p.def_batch(_passthrough_batch(psum_p))
psum_p.def_jvp(_linear_jvp(psum_p))
psum_p.def_rule("vma", _vma_reducing)


def _psum_transpose(ct, x, axis_name):
    # every member's input contributes to every member's output. Over the typed axes of a
    # checked shard_map body a psum takes a varying value to a replicated one, and the
    # cotangent of the replicated result is already the one of every member's input: a pvary
    if ad_util.is_zero(ct):
        return [ct]
    typed = [n for n in axis_name if n in vma.typed_axes()]
    rest = tuple(n for n in axis_name if n not in typed)
    if rest:
        ct = psum_p.bind(ct, axis_name=rest)
    if typed:
        ct = pvary_p.bind(ct, axis_name=tuple(typed))
    return [ct]


psum_p.def_transpose(_psum_transpose)

pmax_p = _allreduce("max")
pmax_p.def_rule("collective", _allreduce_collective(pmax_p, "max"))
pmax_p.def_batch(_passthrough_batch(pmax_p))
pmax_p.def_jvp(_pextreme_jvp(pmax_p))
pmax_p.def_rule("vma", _vma_extreme)

pmin_p = _allreduce("min")
pmin_p.def_rule("collective", _allreduce_collective(pmin_p, "min"))
pmin_p.def_batch(_passthrough_batch(pmin_p))
pmin_p.def_jvp(_pextreme_jvp(pmin_p))
pmin_p.def_rule("vma", _vma_extreme)


def psum(x, axis_name):
    """Sum ``x`` (a pytree of arrays) over the named axis (or tuple of axes); every member of
    the axis gets the total.

    Example:
        >>> funcgrad.vmap(lambda v: v / lax.psum(v, "i"), axis_name="i")(jnp.arange(4.0))
        Array([0.        , 0.16666667, 0.33333334, 0.5       ], dtype=float32)
    """
    names = _names(axis_name)
    for n in names:
        axis_size(n)
    return _tree_apply(lambda v: psum_p.bind(v, axis_name=names), x)


def pmax(x, axis_name):
    """Maximum of ``x`` over the named axis. Example: ``lax.pmax(x, "i")``."""
    names = _names(axis_name)
    for n in names:
        axis_size(n)
    return _tree_apply(lambda v: pmax_p.bind(v, axis_name=names), x)


def pmin(x, axis_name):
    """Minimum of ``x`` over the named axis. Example: ``lax.pmin(x, "i")``."""
    names = _names(axis_name)
    for n in names:
        axis_size(n)
    return _tree_apply(lambda v: pmin_p.bind(v, axis_name=names), x)


def pmean(x, axis_name):
    """Mean of ``x`` over the named axis (or tuple of axes).

    Example:
        >>> funcgrad.vmap(lambda v: v - lax.pmean(v, "i"), axis_name="i")(jnp.arange(3.0))
        Array([-1.,  0.,  1.], dtype=float32)
    """
    n = 1
    for name in _names(axis_name):
        n *= axis_size(name)
    return _tree_apply(lambda v: div(psum(v, axis_name), float(n) if dtypes.is_inexact(
        aval_of(v).dtype) else n), x)


# --- all_gather ----------------------------------------------------------------------------------
all_gather_p = Primitive("all_gather")


@all_gather_p.def_abstract_eval
def _all_gather_abstract(x, axis_name, axis, tiled, axis_size):
    if not 0 <= axis <= x.ndim:
        raise TypeError(f"lax.all_gather: axis {axis} is out of range for {x.str_short()}")
    shape = list(x.shape)
    if tiled:
        if not x.ndim:
            raise TypeError("lax.all_gather: tiled=True needs an operand of rank >= 1")
        shape[axis] *= axis_size
    else:
        shape.insert(axis, axis_size)
    return ShapedArray(shape, x.dtype, x.weak_type)




@all_gather_p.def_lowering
def _all_gather_lowering(ctx, x, axis_name, axis, tiled, axis_size):
    groups, extra = _replica_groups(ctx, axis_name, "all_gather")
    aval = ctx.avals_in[0]
    if not tiled:
        shape = list(aval.shape)
        shape.insert(axis, 1)
        x = stablehlo.reshape(_hlo.tensor_type(shape, aval.dtype), x)
    out = _hlo.ir_type(ctx.avals_out[0])
    return stablehlo.AllGatherOp([out], [x], axis, groups, **_global_ids(extra)).results[0]


all_gather_p.def_jvp(_linear_jvp(all_gather_p))


def _all_gather_transpose(ct, x, axis_name, axis, tiled, axis_size):
    if ad_util.is_zero(ct):
        return [ad_util.Zero(x.aval)]
    total = psum_p.bind(ct, axis_name=axis_name)
    me = axis_index_p.bind(axis_name=axis_name)
    shape = aval_of(total).shape
    width = 1 if not tiled else shape[axis] // axis_size
    starts = [np.int32(0)] * len(shape)
    starts[axis] = mul(me, np.int32(width))
    sizes = list(shape)
    sizes[axis] = width
    piece = dynamic_slice(total, starts, sizes)
    return [piece if tiled else squeeze(piece, (axis,))]


all_gather_p.def_transpose(_all_gather_transpose)


def _all_gather_collective(axis_data, args, dims, /, axis_name, axis_size, tiled, axis):
    x, d = args[0], dims[0]
    gather_axis = axis
    out = _bu.bdim_at(x, d, gather_axis, axis_data.size)
    if tiled:
        shape = list(aval_of(out).shape)
        merged = shape[gather_axis] * shape[gather_axis + 1]
        out = reshape(out, shape[:gather_axis] + [merged] + shape[gather_axis + 2:])
    return out, _bu.not_mapped


def _all_gather_batch(args, dims, axis, **params):
    x = _bu.bdim_to_front(args[0], dims[0])
    return all_gather_p.bind(x, axis=axis + 1, **params), 0


all_gather_p.def_rule("collective", _one_axis(_all_gather_collective, "all_gather"))
all_gather_p.def_batch(_all_gather_batch)
all_gather_p.def_rule("vma", _vma_varying)


def all_gather(x, axis_name, *, axis=0, tiled=False):
    """Stack the values of ``x`` from every member of the named axis along a new ``axis`` (or
    concatenate them along ``axis`` if ``tiled``).

    Example:
        >>> funcgrad.vmap(lambda v: lax.all_gather(v, "i"), axis_name="i")(jnp.arange(3.0))[0]
        Array([0., 1., 2.], dtype=float32)
    """
    names, size = _single_name(axis_name, "all_gather")

    def one(v):
        ndim = aval_of(v).ndim
        ax = canonicalize_axis(axis, ndim if tiled else ndim + 1, "lax.all_gather")
        return all_gather_p.bind(v, axis_name=names, axis=ax, tiled=bool(tiled), axis_size=size)
    return _tree_apply(one, x)


# --- axis_index ----------------------------------------------------------------------------------
axis_index_p = Primitive("axis_index")
axis_index_p.def_abstract_eval(lambda axis_name: ShapedArray((), dtypes.int32))


@axis_index_p.def_lowering
def _axis_index_lowering(ctx, axis_name):
    _replica_groups(ctx, axis_name, "axis_index")
    if mesh_axes.is_partitioned(ctx.axis_env):      # the position along one mesh axis
        return ctx.axis_env.axis_index(axis_name)
    # pmap's program has one replica per member of its single device axis
    rid = stablehlo.ReplicaIdOp().result
    return stablehlo.convert(_hlo.tensor_type((), dtypes.int32), rid)


axis_index_p.def_jvp(lambda primals, tangents, axis_name: (
    axis_index_p.bind(axis_name=axis_name),
    ad_util.Zero(ad_util.tangent_aval(ShapedArray((), dtypes.int32)))))


def _axis_index_collective(axis, args, dims, axis_name):
    return iota(dtypes.int32, axis.size), 0


axis_index_p.def_rule("collective", _one_axis(_axis_index_collective, "axis_index"))
axis_index_p.def_batch(lambda args, dims, axis_name: (axis_index_p.bind(axis_name=axis_name),
                                                      _bu.not_mapped))
axis_index_p.def_rule("vma", lambda ins, axis_name: ([], _typed(axis_name)))


def axis_index(axis_name):
    """This member's position (int32) along the named axis.

    Example:
        >>> funcgrad.vmap(lambda v: lax.axis_index("i"), axis_name="i")(jnp.zeros(3))
        Array([0, 1, 2], dtype=int32)
    """
    names, _ = _single_name(axis_name, "axis_index")
    return axis_index_p.bind(axis_name=names)


# --- ppermute ------------------------------------------------------------------------------------
ppermute_p = Primitive("ppermute")


@ppermute_p.def_abstract_eval
def _ppermute_abstract(x, axis_name, perm):
    return ShapedArray(x.shape, x.dtype, x.weak_type)




@ppermute_p.def_lowering
def _ppermute_lowering(ctx, x, axis_name, perm):
    _, extra = _replica_groups(ctx, axis_name, "ppermute")
    if not perm:
        return _hlo.zeros_like_aval(ctx.avals_out[0])
    if extra:       # partition ids: the pairs in every group along the other mesh axes
        pairs = ctx.axis_env.permute_pairs(axis_name, perm)
    else:
        pairs = np.array(perm, np.int64).reshape(len(perm), 2)
    return stablehlo.CollectivePermuteOp(x, ir.DenseElementsAttr.get(pairs),
                                         **extra).results[0]


ppermute_p.def_jvp(_linear_jvp(ppermute_p))


def _ppermute_transpose(ct, x, axis_name, perm):
    if ad_util.is_zero(ct):
        return [ct]
    return [ppermute_p.bind(ct, axis_name=axis_name, perm=tuple((d, s) for s, d in perm))]


ppermute_p.def_transpose(_ppermute_transpose)


def _ppermute_collective(axis, args, dims, axis_name, perm):
    x = _bu.bdim_to_front(args[0], dims[0], axis.size)
    aval = aval_of(x)
    src_of = {dst: src for src, dst in perm}
    idx = np.array([[src_of.get(i, 0)] for i in range(axis.size)], np.int32)
    dn = GatherDimensionNumbers(offset_dims=tuple(range(1, aval.ndim)),
                                collapsed_slice_dims=(0,), start_index_map=(0,))
    out = gather(x, idx, dn, (1,) + aval.shape[1:])
    if len(src_of) < axis.size:
        covered = np.array([i in src_of for i in range(axis.size)])
        mask = broadcast_in_dim(covered, aval.shape, (0,))
        out = select_n(mask, broadcast_in_dim(np.zeros((), aval.dtype), aval.shape, ()), out)
    return out, 0


ppermute_p.def_rule("collective", _one_axis(_ppermute_collective, "ppermute"))
ppermute_p.def_batch(_passthrough_batch(ppermute_p))
ppermute_p.def_rule("vma", _vma_varying)


def ppermute(x, axis_name, perm):
    """Send ``x`` from member ``src`` to member ``dst`` for each ``(src, dst)`` in ``perm``;
    members that receive nothing get zeros.

    Example:
        >>> shift = [(i, (i + 1) % 4) for i in range(4)]
        >>> funcgrad.vmap(lambda v: lax.ppermute(v, "i", shift), axis_name="i")(jnp.arange(4.0))
        Array([3., 0., 1., 2.], dtype=float32)
    """
    names, size = _single_name(axis_name, "ppermute")
    perm = tuple((int(s), int(d)) for s, d in perm)
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or any(
            not 0 <= i < size for i in srcs + dsts):
        raise ValueError(f"lax.ppermute: perm {perm} must be pairs of distinct sources and "
                         f"distinct destinations in [0, {size}) for axis {names[0]!r}")
    return _tree_apply(lambda v: ppermute_p.bind(v, axis_name=names, perm=perm), x)


# --- psum_scatter --------------------------------------------------------------------------------
psum_scatter_p = Primitive("psum_scatter")


@psum_scatter_p.def_abstract_eval
def _psum_scatter_abstract(x, axis_name, scatter_dimension, tiled, axis_size):
    d = scatter_dimension
    if not 0 <= d < x.ndim:
        raise TypeError(f"lax.psum_scatter: scatter_dimension {d} is out of range for "
                        f"{x.str_short()}")
    shape = list(x.shape)
    if tiled:
        if shape[d] % axis_size:
            raise TypeError(f"lax.psum_scatter: dimension {d} of {x.str_short()} must be a "
                            f"multiple of the axis size {axis_size} (tiled=True)")
        shape[d] //= axis_size
    else:
        if shape[d] != axis_size:
            raise TypeError(f"lax.psum_scatter: dimension {d} of {x.str_short()} must equal the "
                            f"axis size {axis_size} (or pass tiled=True)")
        del shape[d]
    return ShapedArray(shape, x.dtype, x.weak_type)


@psum_scatter_p.def_lowering
def _psum_scatter_lowering(ctx, x, axis_name, scatter_dimension, tiled, axis_size):
    groups, extra = _replica_groups(ctx, axis_name, "psum_scatter")
    aval = ctx.avals_in[0]
    shape = list(aval.shape)
    shape[scatter_dimension] //= axis_size
    op = stablehlo.ReduceScatterOp(_hlo.tensor_type(shape, aval.dtype), x, scatter_dimension,
                                   groups, **_global_ids(extra))
    scalar = ShapedArray((), aval.dtype)
    _hlo.scalar_region(op, [scalar, scalar], red._MONOID_HLO["sum"])
    out = op.results[0]
    if not tiled:
        out = stablehlo.reshape(_hlo.ir_type(ctx.avals_out[0]), out)
    return out


psum_scatter_p.def_jvp(_linear_jvp(psum_scatter_p))


def _psum_scatter_transpose(ct, x, axis_name, scatter_dimension, tiled, axis_size):
    if ad_util.is_zero(ct):
        return [ad_util.Zero(x.aval)]
    return [all_gather_p.bind(ct, axis_name=axis_name, axis=scatter_dimension, tiled=tiled,
                              axis_size=axis_size)]


psum_scatter_p.def_transpose(_psum_scatter_transpose)


def _psum_scatter_collective(axis, args, dims, axis_name, scatter_dimension, tiled, axis_size):
    x, d = args[0], dims[0]
    if d is _bu.not_mapped:
        total = ew.mul(x, axis.size)
    else:
        total = red.reduce_sum(x, (d,))
    if tiled:    # member k gets the k-th block of the scatter dimension
        shape = list(aval_of(total).shape)
        dim = scatter_dimension
        total = reshape(total, shape[:dim] + [axis.size, shape[dim] // axis.size]
                        + shape[dim + 1:])
    return total, scatter_dimension


def _psum_scatter_batch(args, dims, scatter_dimension, **params):
    x = _bu.bdim_to_front(args[0], dims[0])
    return psum_scatter_p.bind(x, scatter_dimension=scatter_dimension + 1, **params), 0


psum_scatter_p.def_rule("collective", _one_axis(_psum_scatter_collective, "psum_scatter"))
psum_scatter_p.def_batch(_psum_scatter_batch)
psum_scatter_p.def_rule("vma", _vma_varying)


def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False):
    """Sum ``x`` over the named axis and give member ``k`` the ``k``-th slice of the sum along
    ``scatter_dimension`` (a block of it when ``tiled``): ``psum`` followed by a split.

    Example:
        >>> funcgrad.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(jnp.ones((2, 2)))
        Array([2., 2.], dtype=float32)
    """
    names, size = _single_name(axis_name, "psum_scatter")

    def one(v):
        ndim = aval_of(v).ndim
        d = canonicalize_axis(scatter_dimension, ndim, "lax.psum_scatter")
        return psum_scatter_p.bind(v, axis_name=names, scatter_dimension=d, tiled=bool(tiled),
                                   axis_size=size)
    return _tree_apply(one, x)


# --- all_to_all ----------------------------------------------------------------------------------
# The primitive is the tiled form (split ``split_axis`` into axis_size blocks, send block k to
# member k, concatenate what arrives along ``concat_axis``); the untiled form reshapes around it.
all_to_all_p = Primitive("all_to_all")


@all_to_all_p.def_abstract_eval
def _all_to_all_abstract(x, axis_name, split_axis, concat_axis, axis_size):
    for a in (split_axis, concat_axis):
        if not 0 <= a < x.ndim:
            raise TypeError(f"lax.all_to_all: axis {a} is out of range for {x.str_short()}")
    if x.shape[split_axis] % axis_size:
        raise TypeError(f"lax.all_to_all: split_axis {split_axis} of {x.str_short()} must be a "
                        f"multiple of the axis size {axis_size}")
    shape = list(x.shape)
    shape[split_axis] //= axis_size
    shape[concat_axis] *= axis_size
    return ShapedArray(shape, x.dtype, x.weak_type)


@all_to_all_p.def_lowering
def _all_to_all_lowering(ctx, x, axis_name, split_axis, concat_axis, axis_size):
    groups, extra = _replica_groups(ctx, axis_name, "all_to_all")
    return stablehlo.AllToAllOp([x], split_axis, concat_axis, axis_size, groups, **extra,
                                results=[_hlo.ir_type(ctx.avals_out[0])]).results[0]


all_to_all_p.def_jvp(_linear_jvp(all_to_all_p))


def _all_to_all_transpose(ct, x, axis_name, split_axis, concat_axis, axis_size):
    if ad_util.is_zero(ct):
        return [ad_util.Zero(x.aval)]
    return [all_to_all_p.bind(ct, axis_name=axis_name, split_axis=concat_axis,
                              concat_axis=split_axis, axis_size=axis_size)]


all_to_all_p.def_transpose(_all_to_all_transpose)


def _all_to_all_collective(axis, args, dims, axis_name, split_axis, concat_axis, axis_size):
    n = axis.size
    x = _bu.bdim_to_front(args[0], dims[0], n)          # (sender j, *shape)
    shape = list(aval_of(x).shape[1:])
    s, c = split_axis, concat_axis
    blocks = shape[:s] + [n, shape[s] // n] + shape[s + 1:]
    x = reshape(x, [n] + blocks)                         # (j, ..., receiver m, block, ...)
    rest = [i + 1 for i in range(len(blocks)) if i != s]   # the block's own axes, in order
    perm = [s + 1] + rest[:c] + [0] + rest[c:]
    x = shapes.transpose(x, perm)                        # (m, ..., j, concat axis, ...)
    out_shape = list(aval_of(x).shape)
    merged = out_shape[:c + 1] + [out_shape[c + 1] * out_shape[c + 2]] + out_shape[c + 3:]
    return reshape(x, merged), 0


def _all_to_all_batch(args, dims, split_axis, concat_axis, **params):
    x = _bu.bdim_to_front(args[0], dims[0])
    return all_to_all_p.bind(x, split_axis=split_axis + 1, concat_axis=concat_axis + 1,
                             **params), 0


all_to_all_p.def_rule("collective", _one_axis(_all_to_all_collective, "all_to_all"))
all_to_all_p.def_batch(_all_to_all_batch)
all_to_all_p.def_rule("vma", _vma_varying)


def all_to_all(x, axis_name, split_axis, concat_axis, *, tiled=False):
    """Member ``k`` receives the ``k``-th piece (along ``split_axis``) of every member's ``x``,
    stacked along a new ``concat_axis`` of the result in member order (concatenated along
    ``concat_axis`` when ``tiled``). Untiled, ``x.shape[split_axis]`` must equal the axis size.

    Example:
        >>> x = jnp.arange(4.0).reshape(2, 2)
        >>> funcgrad.vmap(lambda v: lax.all_to_all(v, "i", 0, 0), axis_name="i")(x)
        Array([[0., 2.],
               [1., 3.]], dtype=float32)
    """
    names, size = _single_name(axis_name, "all_to_all")

    def one(v):
        aval = aval_of(v)
        if tiled:
            s = canonicalize_axis(split_axis, aval.ndim, "lax.all_to_all")
            c = canonicalize_axis(concat_axis, aval.ndim, "lax.all_to_all")
            return all_to_all_p.bind(v, axis_name=names, split_axis=s, concat_axis=c,
                                     axis_size=size)
        s = canonicalize_axis(split_axis, aval.ndim, "lax.all_to_all")
        c = canonicalize_axis(concat_axis, aval.ndim, "lax.all_to_all")
        if aval.shape[s] != size:
            raise ValueError(f"lax.all_to_all: split_axis {s} of {aval.str_short()} must equal "
                             f"the size {size} of axis {names[0]!r} (or pass tiled=True)")
        q = c if c <= s else c + 1                      # where a unit axis goes for the result
        shape = list(aval.shape)
        shape.insert(q, 1)
        st = s + 1 if q <= s else s
        out = all_to_all_p.bind(reshape(v, shape), axis_name=names, split_axis=st,
                                concat_axis=q, axis_size=size)
        return squeeze(out, (st,))
    return _tree_apply(one, x)


# --- pvary and the varying-manual-axes types (core/vma.py) -------------------------------------
pvary_p = Primitive("pvary")
pvary_p.def_abstract_eval(lambda x, axis_name: ShapedArray(x.shape, x.dtype, x.weak_type))
pvary_p.def_lowering(lambda ctx, x, axis_name: x)
pvary_p.def_jvp(_linear_jvp(pvary_p))
pvary_p.def_batch(_passthrough_batch(pvary_p))


def _pvary_transpose(ct, x, axis_name):
    # the devices' cotangents of the one replicated value add up
    if ad_util.is_zero(ct):
        return [ad_util.Zero(x.aval)]
    return [psum_p.bind(ct, axis_name=axis_name)]


pvary_p.def_transpose(_pvary_transpose)


def _pvary_collective(axis, args, dims, axis_name):
    rest = _rest(axis_name, axis)
    x = args[0]
    return (pvary_p.bind(x, axis_name=rest) if rest else x), dims[0]


pvary_p.def_rule("collective", _pvary_collective)
pvary_p.def_rule("vma", lambda ins, axis_name: ([None], ins[0] | frozenset(axis_name)))


def pvary(x, axis_name):
    """``x`` (a pytree) typed as varying over the manual mesh axes ``axis_name`` of the
    enclosing ``shard_map``: the same values, but reverse mode now adds the devices'
    cotangents of ``x`` (its transpose is ``psum``). funcgrad inserts it where a replicated
    value meets a varying one (JAX's ``jax.lax.pvary``); outside a checked body it is the
    identity.

    Example:
        >>> from funcgrad.sharding import P
        >>> mesh = funcgrad.make_mesh((1,), ("x",), devices=funcgrad.local_devices()[:1])
        >>> f = funcgrad.shard_map(lambda a: lax.pvary(a, "x"), mesh=mesh, in_specs=P(),
        ...                        out_specs=P("x"))
        >>> f(jnp.ones(2))
        Array([1., 1.], dtype=float32)
        >>> print(funcgrad.make_jaxpr(f)(jnp.ones(2)).eqns[0].params["jaxpr"])
        { lambda ; a:f32[2]. let
            b:f32[2]{V:x} = pvary[axis_name=('x',)] a
          in (b,) }
    """
    names = _names(axis_name)
    for n in names:
        axis_size(n)

    def one(v):
        missing = tuple(n for n in names if n in vma.typed_axes() and n not in vma.vma_of(v))
        return pvary_p.bind(v, axis_name=missing) if missing else v
    return _tree_apply(one, x)


array_ops.register(pvary=lambda x, axes: pvary_p.bind(x, axis_name=tuple(axes)),
                   psum=lambda x, axes: psum_p.bind(x, axis_name=tuple(axes)))
