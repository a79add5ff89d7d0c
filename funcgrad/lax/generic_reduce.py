"""``lax.reduce`` with any computation: the ``reduce`` primitive (``lax.reduce_p``).

A reduction by a monoid funcgrad knows (``lax.add``, ``lax.mul``, ``lax.max``, ``lax.min``,
``lax.bitwise_and``/``or``/``xor`` with its identity as init value) binds that monoid's primitive
(``reduce_sum``...), as JAX does. Any other computation (several operands at once, e.g. an argmax
over (value, index) pairs) binds ``reduce``: one StableHLO ``reduce`` whose region is the
computation's Jaxpr. Its derivative and batching follow from a decomposition: the reduced axes
are flattened into one and halved pairwise with the computation applied elementwise, which is
the same reduction for the associative and commutative computations ``reduce`` requires.
"""
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad import tree_util
from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching import map_leading_axis
from funcgrad.core.interpreters import Tracer
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo, reductions, shapes, windowed
from funcgrad.lax import elementwise as ew
from funcgrad.lax.decomposed import decomposed_primitive

__all__ = ["reduce", "reduce_p", "reduce_window_p"]


def _combine(computation, xs, ys):
    """The scalar ``computation`` applied elementwise to equal-shaped arrays."""
    flat = [shapes.reshape(v, (aval_of(v).size,)) for v in list(xs) + list(ys)]
    size = aval_of(flat[0]).shape[0]
    shape = aval_of(xs[0]).shape
    if size == 0:
        return list(xs)
    outs = map_leading_axis(lambda *s: computation(*s))(*flat)
    return [shapes.reshape(o, shape) for o in outs]


def _decompose(*args, computation, dimensions):
    operands, inits = args[:len(args) // 2], args[len(args) // 2:]
    aval = aval_of(operands[0])
    keep = [d for d in range(aval.ndim) if d not in dimensions]
    kept_shape = tuple(aval.shape[d] for d in keep)
    k = int(np.prod([aval.shape[d] for d in dimensions], dtype=np.int64))
    xs = [shapes.reshape(shapes.transpose(x, keep + list(dimensions)), kept_shape + (k,))
          for x in operands]
    width = 1
    while width < k:
        width *= 2
    if width != k:   # pad with the init values, neutral for the computation
        xs = [shapes.concatenate([x, shapes.broadcast_in_dim(i, kept_shape + (width - k,), ())],
                                 len(kept_shape)) for x, i in zip(xs, inits)]
    last = len(kept_shape)
    while width > 1:
        width //= 2
        lo = [shapes.slice_in_dim(x, 0, width, axis=last) for x in xs]
        hi = [shapes.slice_in_dim(x, width, 2 * width, axis=last) for x in xs]
        xs = _combine(computation, lo, hi)
    if k == 0:
        return [shapes.broadcast_in_dim(i, kept_shape, ()) for i in inits]
    # fold the init values in once, as XLA's reduce does
    xs = [shapes.squeeze(x, (last,)) for x in xs]
    return _combine(computation, [shapes.broadcast_in_dim(i, kept_shape, ()) for i in inits],
                    xs)


reduce_p = decomposed_primitive("reduce", _decompose, multiple_results=True)


@reduce_p.def_abstract_eval
def _reduce_abstract(*avals, computation, dimensions):
    n = len(avals) // 2
    shape = tuple(d for i, d in enumerate(avals[0].shape) if i not in dimensions)
    return [ShapedArray(shape, a.dtype) for a in avals[:n]]


@reduce_p.def_lowering
def _reduce_lowering(ctx, *args, computation, dimensions):
    n = len(args) // 2
    out_types = [_hlo.ir_type(a) for a in ctx.avals_out]
    op = stablehlo.ReduceOp(out_types, list(args[:n]), list(args[n:]), list(dimensions))
    _computation_region(ctx, op, computation, ctx.avals_in[n:])
    return list(op.results)


def _computation_region(ctx, op, computation, init_avals):
    """Fill ``op``'s region with the scalar ``computation`` over 2 x len(init_avals) args."""
    closed = computation.closed

    def body(*xs):    # runs inside the region's block: constants are made there
        consts = [_hlo.constant(np.asarray(c), aval_of(c).dtype) for c in closed.consts]
        return ctx.lower_jaxpr(closed.jaxpr, consts, list(xs))
    _hlo.scalar_region(op, [ShapedArray((), a.dtype) for a in init_avals] * 2, body)


# --- reduce_window with any computation ---------------------------------------------------------
def _window_decompose(*args, computation, window_dimensions, window_strides, padding,
                      base_dilation, window_dilation):
    """Every window's elements stacked on a leading axis (padding with the init values), then
    reduced over that axis with ``reduce``."""
    n = len(args) // 2
    shape = windowed.window_out_shape("reduce_window", aval_of(args[0]).shape,
                                      window_dimensions, window_strides, padding,
                                      base_dilation, window_dilation)
    patches = [windowed.window_patches(x, i, window_dimensions, window_strides, padding,
                                       base_dilation, window_dilation, shape)
               for x, i in zip(args[:n], args[n:])]
    if len(window_dimensions) == 0 or int(np.prod(window_dimensions)) == 1:
        patches = [shapes.reshape(p, (1,) + tuple(shape)) for p in patches]
    return reduce_p.bind(*patches, *args[n:], computation=computation, dimensions=(0,))


reduce_window_p = decomposed_primitive("reduce_window", _window_decompose,
                                       multiple_results=True)


@reduce_window_p.def_abstract_eval
def _window_abstract(*avals, computation, window_dimensions, window_strides, padding,
                     base_dilation, window_dilation):
    shape = windowed.window_out_shape("reduce_window", avals[0].shape, window_dimensions,
                                      window_strides, padding, base_dilation, window_dilation)
    return [ShapedArray(shape, a.dtype) for a in avals[:len(avals) // 2]]


@reduce_window_p.def_lowering
def _window_lowering(ctx, *args, computation, window_dimensions, window_strides, padding,
                     base_dilation, window_dilation):
    n = len(args) // 2
    nd = ctx.avals_in[0].ndim
    pad_attr = ir.DenseIntElementsAttr.get(np.asarray(padding, np.int64).reshape(nd, 2),
                                           shape=[nd, 2])
    op = stablehlo.ReduceWindowOp(
        [_hlo.ir_type(a) for a in ctx.avals_out], list(args[:n]), list(args[n:]),
        list(window_dimensions), window_strides=list(window_strides),
        base_dilations=list(base_dilation), window_dilations=list(window_dilation),
        padding=pad_attr)
    _computation_region(ctx, op, computation, ctx.avals_in[n:])
    return list(op.results)


def reduce_window_generic(operands, init_values, computation, window_dimensions,
                          window_strides, padding, base_dilation, window_dilation):
    """``lax.reduce_window`` for any computation and pytree of operands (``reduce_window_p``);
    the arguments are already canonical (ints, explicit padding pairs)."""
    op_leaves, op_tree, inits, comp = _flat_computation("reduce_window", operands, init_values,
                                                        computation)
    outs = reduce_window_p.bind(*op_leaves, *inits, computation=comp,
                                window_dimensions=window_dimensions,
                                window_strides=window_strides, padding=padding,
                                base_dilation=base_dilation, window_dilation=window_dilation)
    return tree_util.tree_unflatten(op_tree, list(outs))


class _Computation:
    """A traced scalar computation as a hashable primitive parameter: calling it applies the
    function itself (so transformations see its operations)."""
    __slots__ = ("fn", "closed", "in_tree", "n")

    def __init__(self, fn, closed, in_tree, n):
        self.fn, self.closed, self.in_tree, self.n = fn, closed, in_tree, n

    def __call__(self, *flat):
        xs = tree_util.tree_unflatten(self.in_tree, list(flat[:self.n]))
        ys = tree_util.tree_unflatten(self.in_tree, list(flat[self.n:]))
        return tree_util.tree_leaves(self.fn(xs, ys))

    def __eq__(self, other):
        return isinstance(other, _Computation) and other.fn is self.fn and \
            other.closed.in_avals == self.closed.in_avals

    def __hash__(self):
        return hash((id(self.fn), tuple(self.closed.in_avals)))

    def __repr__(self):
        return getattr(self.fn, "__name__", "computation")


_MONOIDS = {ew.add: "sum", ew.mul: "prod", ew.max: "max", ew.min: "min",
            ew.bitwise_and: "and", ew.bitwise_or: "or", ew.bitwise_xor: "xor"}
_MONOID_FNS = {"sum": reductions.reduce_sum, "prod": reductions.reduce_prod,
               "max": reductions.reduce_max, "min": reductions.reduce_min,
               "and": reductions.reduce_and, "or": reductions.reduce_or,
               "xor": reductions.reduce_xor}


def _monoid(computation, operand, init):
    kind = _MONOIDS.get(computation)
    if kind is None or not isinstance(init, (int, float, bool, np.ndarray, np.generic)):
        return None
    dt = aval_of(operand).dtype
    if dt == dtypes.bool_ and kind in ("sum", "prod"):
        return None
    ident = reductions.identity_value(kind, dt)
    if np.asarray(init).shape != () or np.asarray(init).astype(dt) != ident:
        return None
    return _MONOID_FNS[kind]


def _flat_computation(where, operands, init_values, computation):
    """(operand leaves, treedef, init leaves in the operands' dtypes, the traced scalar
    computation) of a reduction by ``computation`` over a pytree of operands."""
    op_leaves, op_tree = tree_util.tree_flatten(operands)
    init_leaves, init_tree = tree_util.tree_flatten(init_values)
    if op_tree != init_tree:
        raise ValueError(f"lax.{where}: operands {op_tree} and init_values {init_tree} must "
                         f"have one structure")
    avals = [aval_of(x) for x in op_leaves]
    if any(a.shape != avals[0].shape for a in avals):
        raise ValueError(f"lax.{where}: operands must share one shape, got "
                         f"{[a.str_short() for a in avals]}")
    inits = [ew.convert_element_type(i, a.dtype) for i, a in zip(init_leaves, avals)]
    scalars = [ShapedArray((), a.dtype) for a in avals]
    n = len(avals)

    def flat_comp(*xs):
        a = tree_util.tree_unflatten(op_tree, list(xs[:n]))
        b = tree_util.tree_unflatten(op_tree, list(xs[n:]))
        out_leaves, out_tree = tree_util.tree_flatten(computation(a, b))
        if out_tree != op_tree:
            raise TypeError(f"lax.{where}: computation must return the structure of the "
                            f"operands {op_tree}, got {out_tree}")
        return [ew.convert_element_type(o, s.dtype) for o, s in zip(out_leaves, scalars)]

    closed, _ = trace_to_jaxpr(flat_comp, scalars * 2, debug_name=f"{where}_computation")
    if any(isinstance(c, Tracer) for c in closed.consts):
        raise TypeError(f"lax.{where}: computation closes over traced values; pass them as "
                        "operands instead")
    comp = _Computation(computation, closed, op_tree, n)
    return op_leaves, op_tree, inits, comp


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """Reduce ``operands`` (an array or a pytree of arrays of one shape) over ``dimensions``
    with the associative, commutative ``computation(x, y)`` starting from ``init_values``.

    Example:
        >>> lax.reduce(jnp.arange(6.0).reshape(2, 3), 0.0, lax.add, (1,))
        Array([ 3., 12.], dtype=float32)
        >>> vals, idx = jnp.array([[3.0, 9.0, 1.0]]), jnp.array([[0, 1, 2]])
        >>> def keep_larger(a, b):
        ...     take = a[0] >= b[0]
        ...     return lax.select(take, a[0], b[0]), lax.select(take, a[1], b[1])
        >>> lax.reduce((vals, idx), (-jnp.inf, 0), keep_larger, (1,))
        (Array([9.], dtype=float32), Array([1], dtype=int32))
    """
    op_leaves, op_tree, inits, comp = _flat_computation("reduce", operands, init_values,
                                                        computation)
    ndim = aval_of(op_leaves[0]).ndim
    dims = tuple(sorted(int(d) % ndim if ndim else int(d) for d in dimensions))
    if len(op_leaves) == 1:
        fn = _monoid(computation, op_leaves[0], tree_util.tree_leaves(init_values)[0])
        if fn is not None:
            return tree_util.tree_unflatten(op_tree, [fn(op_leaves[0], dims)])
    outs = reduce_p.bind(*op_leaves, *inits, computation=comp, dimensions=dims)
    return tree_util.tree_unflatten(op_tree, list(outs))
