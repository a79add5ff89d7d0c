"""Operations that ``jax.lax`` defines as primitives and funcgrad defines by a decomposition.

Each is a real primitive (``lax.tile_p``, ``lax.square_p``...: one equation in a Jaxpr, under
JAX's name) whose rules follow from a decomposition into other lax operations
(``lax.decomposed``); the function that binds it is JAX's (``lax.tile``, ``lax.square``...).
``reduce_precision`` and ``optimization_barrier`` lower to their own StableHLO operations.
"""
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad import tree_util
from funcgrad.core import dtypes
from funcgrad.core.batching_util import broadcast_batcher
from funcgrad.core.ad import jvp_flat
from funcgrad.core.ad_util import Zero, deflinear, instantiate
from funcgrad.core.values import aval_of
from funcgrad.lax import elementwise as ew
from funcgrad.lax import indexing, shapes, sorting, special
from funcgrad.lax.decomposed import decomposed_primitive


def _axis(axis, ndim, where):
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"lax.{where}: axis {axis} is out of bounds for rank {ndim}")
    return axis % ndim


# --- tile, stack, unstack --------------------------------------------------------------------
def _tile(x, reps):
    aval = aval_of(x)
    wide = []
    for r, d in zip(reps, aval.shape):
        wide += [r, d]
    y = shapes.broadcast_in_dim(x, tuple(wide), tuple(range(1, 2 * aval.ndim, 2)))
    return shapes.reshape(y, tuple(r * d for r, d in zip(reps, aval.shape)))


tile_p = decomposed_primitive("tile", _tile)


def tile(operand, reps):
    """Repeat ``operand`` ``reps[i]`` times along each axis ``i`` (one rep per axis).

    Example:
        >>> lax.tile(jnp.array([[1, 2]]), (2, 3))
        Array([[1, 2, 1, 2, 1, 2],
               [1, 2, 1, 2, 1, 2]], dtype=int32)
    """
    reps = tuple(int(r) for r in reps)
    ndim = aval_of(operand).ndim
    if len(reps) != ndim or any(r < 0 for r in reps):
        raise ValueError(f"lax.tile: reps must hold one non-negative int per axis of the "
                         f"operand {aval_of(operand).str_short()}, got {reps}")
    return tile_p.bind(operand, reps=reps)


def _stack(*xs, axis):
    return shapes.concatenate([shapes.expand_dims(x, (axis,)) for x in xs], axis)


stack_p = decomposed_primitive("stack", _stack)


def stack(operands, axis=0):
    """Join arrays of one shape and dtype along a new axis ``axis``.

    Example:
        >>> lax.stack([jnp.array([1.0, 2.0]), jnp.array([3.0, 4.0])], axis=1)
        Array([[1., 3.],
               [2., 4.]], dtype=float32)
    """
    operands = list(operands)
    if not operands:
        raise ValueError("lax.stack: needs at least one operand")
    avals = [aval_of(x) for x in operands]
    if any(a.shape != avals[0].shape or a.dtype != avals[0].dtype for a in avals):
        raise TypeError(f"lax.stack: operands must share one shape and dtype, got "
                        f"{', '.join(a.str_short() for a in avals)}")
    return stack_p.bind(*operands, axis=_axis(axis, avals[0].ndim + 1, "stack"))


def _unstack(x, axis):
    n = aval_of(x).shape[axis]
    return [shapes.squeeze(shapes.slice_in_dim(x, i, i + 1, axis=axis), (axis,))
            for i in range(n)]


unstack_p = decomposed_primitive("unstack", _unstack, multiple_results=True)


def unstack(x, axis=0):
    """Split ``x`` along ``axis`` into a tuple of arrays without that axis.

    Example:
        >>> lax.unstack(jnp.array([[1, 2], [3, 4]]), axis=1)
        (Array([1, 3], dtype=int32), Array([2, 4], dtype=int32))
    """
    return tuple(unstack_p.bind(x, axis=_axis(axis, aval_of(x).ndim, "unstack")))


# --- elementwise ----------------------------------------------------------------------------
def _inexact(name, x):
    aval = aval_of(x)
    if not dtypes.is_inexact(aval.dtype):
        raise TypeError(f"lax.{name}: expected a floating-point or complex operand, got "
                        f"{aval.str_short()}")


square_p = decomposed_primitive("square", lambda x: ew.mul(x, x))


def square(x):
    """``x * x`` elementwise.

    Example:
        >>> lax.square(jnp.array([-2.0, 3.0]))
        Array([4., 9.], dtype=float32)
    """
    if aval_of(x).dtype == dtypes.bool_:
        raise TypeError(f"lax.square: expected a numeric operand, got {aval_of(x).str_short()}")
    return square_p.bind(x)


exp2_p = decomposed_primitive(
    "exp2", lambda x: ew.exp(ew.mul(x, ew.full_like_scalar(x, np.log(2.0)))))


def exp2(x, *, accuracy=None):
    """``2 ** x`` elementwise (``accuracy`` is accepted for JAX's signature).

    Example:
        >>> lax.exp2(jnp.array([0.0, 3.0, -1.0]))
        Array([1. , 8. , 0.5], dtype=float32)
    """
    _inexact("exp2", x)
    return exp2_p.bind(x)


bessel_i0e_p = decomposed_primitive("bessel_i0e", special.bessel_i0e)


def bessel_i0e(x):
    """Exponentially scaled modified Bessel function of order 0, ``exp(-|x|) I0(x)``.

    Example:
        >>> lax.bessel_i0e(jnp.array([0.0, 1.0]))
        Array([1.        , 0.46575963], dtype=float32)
    """
    return bessel_i0e_p.bind(x)


def _identity(x):
    return x


copy_p = decomposed_primitive("copy", _identity)
stage_p = decomposed_primitive("stage", _identity)


def stage(x, /):
    """Lift ``x`` (a Python scalar, a NumPy array) into the current trace: the identity.

    Example:
        >>> funcgrad.make_jaxpr(lambda: lax.stage(np.float32(2.0)))().jaxpr.eqns[0].prim
        stage
        >>> lax.stage(3)
        Array(3, dtype=int32, weak_type=True)
    """
    return stage_p.bind(x)


# mulhi: the high half of the double-width product.
def _mulhi(x, y):
    dt = np.dtype(aval_of(x).dtype)
    bits = dt.itemsize * 8
    if bits <= 16:    # exact in a 32-bit product
        wide = np.dtype(f"{dt.kind}4")
        p = ew.mul(ew.convert_element_type(x, wide), ew.convert_element_type(y, wide))
        return ew.convert_element_type(
            ew.shift_right_arithmetic(p, ew.full_like_scalar(p, bits)), dt)
    # schoolbook product of half-width digits in the unsigned type of the same width
    u, half = np.dtype(f"u{dt.itemsize}"), bits // 2
    ux, uy = ew.bitcast_convert_type(x, u), ew.bitcast_convert_type(y, u)
    mask, sh = ew.full_like_scalar(ux, (1 << half) - 1), ew.full_like_scalar(ux, half)
    x_lo, x_hi = ew.bitwise_and(ux, mask), ew.shift_right_logical(ux, sh)
    y_lo, y_hi = ew.bitwise_and(uy, mask), ew.shift_right_logical(uy, sh)
    lo_lo, hi_lo = ew.mul(x_lo, y_lo), ew.mul(x_hi, y_lo)
    cross = ew.add(ew.add(ew.shift_right_logical(lo_lo, sh), ew.bitwise_and(hi_lo, mask)),
                   ew.mul(x_lo, y_hi))
    high = ew.add(ew.add(ew.mul(x_hi, y_hi), ew.shift_right_logical(hi_lo, sh)),
                  ew.shift_right_logical(cross, sh))
    if dt.kind == "i":   # signed: subtract the other operand for each negative one
        zero, uzero = ew.full_like_scalar(x, 0), ew.full_like_scalar(ux, 0)
        high = ew.sub(high, ew.select(ew.lt(x, zero), uy, uzero))
        high = ew.sub(high, ew.select(ew.lt(y, zero), ux, uzero))
    return ew.bitcast_convert_type(high, dt)


mulhi_p = decomposed_primitive("mulhi", _mulhi)


def mulhi(x, y, /):
    """The high half of the double-width integer product ``x * y`` (low half: ``x * y``).

    Example:
        >>> lax.mulhi(jnp.array([2**31 - 1, -3], jnp.int32), jnp.array([4, 2**30], jnp.int32))
        Array([ 1, -1], dtype=int32)
    """
    x, y = ew.binary_operands(x, y)
    ax, ay = aval_of(x), aval_of(y)
    if ax.dtype != ay.dtype or not dtypes.is_integer(ax.dtype):
        raise TypeError(f"lax.mulhi: expected two integer operands of one dtype, got "
                        f"{ax.str_short()} and {ay.str_short()}")
    return mulhi_p.bind(x, y)


# JAX's comparisons used on dimension sizes: eq/le/lt under their own names.
eq_to_p = decomposed_primitive("eq_to", ew.eq)
le_to_p = decomposed_primitive("le_to", ew.le)
lt_to_p = decomposed_primitive("lt_to", ew.lt)


# --- scatter_sub -----------------------------------------------------------------------------
def _scatter_sub(operand, indices, updates, dimension_numbers, mode):
    return indexing.scatter_add(operand, indices, ew.neg(updates), dimension_numbers, mode=mode)


scatter_sub_p = decomposed_primitive("scatter_sub", _scatter_sub)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """``operand`` with ``updates`` subtracted at ``scatter_indices`` (as ``scatter_add``).

    Example:
        >>> dn = lax.ScatterDimensionNumbers((), (0,), (0,))
        >>> lax.scatter_sub(jnp.zeros(3), jnp.array([[2], [2]]), jnp.array([1.0, 2.0]), dn)
        Array([ 0.,  0., -3.], dtype=float32)
    """
    dn = indexing.ScatterDimensionNumbers(*(tuple(int(i) for i in f)
                                            for f in dimension_numbers))
    return scatter_sub_p.bind(operand, scatter_indices, updates, dimension_numbers=dn,
                              mode=None if mode is None else str(getattr(mode, "value", mode)))


# --- approx_max_k / approx_min_k -------------------------------------------------------------
def _approx_top_k(x, k, reduction_dimension, is_max_k, **_):
    last = aval_of(x).ndim - 1
    perm = list(range(last + 1))
    perm[reduction_dimension], perm[last] = last, reduction_dimension
    y = shapes.transpose(x, perm)
    vals, idx = sorting.top_k(y if is_max_k else ew.neg(y), k)
    vals = vals if is_max_k else ew.neg(vals)
    return [shapes.transpose(vals, perm), shapes.transpose(idx, perm)]


approx_top_k_p = decomposed_primitive("approx_top_k", _approx_top_k, multiple_results=True)


def _approx_k(name, is_max_k):
    def fn(operand, k, reduction_dimension=-1, recall_target=0.95,
           reduction_input_size_override=-1, aggregate_to_topk=True):
        aval = aval_of(operand)
        dim = _axis(reduction_dimension, aval.ndim, name)
        if not 0 <= int(k) <= aval.shape[dim]:
            raise ValueError(f"lax.{name}: k={k} must be in [0, {aval.shape[dim]}] for "
                             f"{aval.str_short()} along axis {dim}")
        return tuple(approx_top_k_p.bind(
            operand, k=int(k), reduction_dimension=dim, recall_target=float(recall_target),
            is_max_k=is_max_k, reduction_input_size_override=int(reduction_input_size_override),
            aggregate_to_topk=bool(aggregate_to_topk)))
    fn.__name__ = name
    word = "largest" if is_max_k else "smallest"
    fn.__doc__ = (f"The ``k`` {word} values along ``reduction_dimension`` and their indices.\n\n"
                  f"JAX's TPU algorithm is approximate (``recall_target``); here, as on JAX's "
                  f"CPU and GPU backends, the result is exact.\n\n"
                  f"Example:\n"
                  f"    >>> lax.{name}(jnp.array([[3.0, 1.0, 2.0]]), 2)[1]\n"
                  f"    Array([[{'0, 2' if is_max_k else '1, 2'}]], dtype=int32)\n")
    return fn


approx_max_k = _approx_k("approx_max_k", True)
approx_min_k = _approx_k("approx_min_k", False)


# --- igamma_grad_a, random_gamma_grad ---------------------------------------------------------
def _igamma_grad_a(a, x):
    _, (t,) = jvp_flat(lambda a_: [special.igamma(a_, x)], [a], [ew.full_like_scalar(a, 1.0)])
    return instantiate(t) if type(t) is not Zero else ew.full_like_scalar(a, 0.0)


igamma_grad_a_p = decomposed_primitive("igamma_grad_a", _igamma_grad_a)


def _float_pair(name, a, x):
    a, x = ew.binary_operands(a, x)
    for v in (a, x):
        if not dtypes.is_float(aval_of(v).dtype):
            raise TypeError(f"lax.{name}: expected floating-point operands, got "
                            f"{aval_of(a).str_short()} and {aval_of(x).str_short()}")
    return a, x


def igamma_grad_a(a, x):
    """The derivative of ``igamma(a, x)`` with respect to ``a``.

    Example:
        >>> lax.igamma_grad_a(jnp.array([2.0]), jnp.array([1.5]))
        Array([-0.31348884], dtype=float32)
    """
    return igamma_grad_a_p.bind(*_float_pair("igamma_grad_a", a, x))


def random_gamma_grad(a, x):
    """The derivative of a Gamma(a, 1) sample ``x`` with respect to ``a`` at fixed quantile:
    ``-(dP/da) / (dP/dx)`` with ``P = igamma(a, x)`` (what reparameterized gamma samples use).

    Example:
        >>> lax.random_gamma_grad(jnp.array([2.0]), jnp.array([1.5]))
        Array([0.93663967], dtype=float32)
    """
    a, x = _float_pair("random_gamma_grad", a, x)
    one = ew.full_like_scalar(a, 1.0)
    log_density = ew.sub(ew.sub(ew.mul(ew.sub(a, one), ew.log(x)), x), special.lgamma(a))
    return ew.neg(ew.div(igamma_grad_a(a, x), ew.exp(log_density)))


# --- reduce_precision: its own StableHLO operation -------------------------------------------
def _reduce_precision_ref(x, exponent_bits, mantissa_bits):
    return x


reduce_precision_p = decomposed_primitive("reduce_precision", _reduce_precision_ref)


@reduce_precision_p.def_lowering
def _reduce_precision_lowering(ctx, x, exponent_bits, mantissa_bits):
    i32 = ir.IntegerType.get_signless(32)
    return stablehlo.reduce_precision(x, ir.IntegerAttr.get(i32, exponent_bits),
                                      ir.IntegerAttr.get(i32, mantissa_bits))


# rounding is treated as linear (as in JAX): tangents and cotangents are rounded alike
deflinear(reduce_precision_p, lambda ct, x, **params: [
    ct if type(ct) is Zero else reduce_precision_p.bind(ct, **params)])
reduce_precision_p.def_batch(broadcast_batcher(reduce_precision_p))


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """Round floating-point values to a format with ``exponent_bits`` and ``mantissa_bits``
    (kept in the operand's dtype): e.g. (8, 7) rounds float32 to bfloat16's values.

    Example:
        >>> lax.reduce_precision(jnp.array([1.0 + 2**-10]), 8, 7)
        Array([1.], dtype=float32)
        >>> lax.reduce_precision(jnp.array([1e6]), 5, 10)   # float16 overflows
        Array([inf], dtype=float32)
    """
    _inexact("reduce_precision", operand)
    e, m = int(exponent_bits), int(mantissa_bits)
    if e < 1 or m < 0:
        raise ValueError(f"lax.reduce_precision: exponent_bits must be >= 1 and mantissa_bits "
                         f">= 0, got {e} and {m}")
    return reduce_precision_p.bind(operand, exponent_bits=e, mantissa_bits=m)


# --- optimization_barrier: its own StableHLO operation ----------------------------------------
optimization_barrier_p = decomposed_primitive("optimization_barrier", lambda *xs: list(xs),
                                              multiple_results=True)
optimization_barrier_p.def_lowering(
    lambda ctx, *xs: list(stablehlo.OptimizationBarrierOp(list(xs)).results))


def optimization_barrier(operand, /):
    """The identity on a pytree of arrays that XLA may not move computations across (used to
    control rematerialization and scheduling).

    Example:
        >>> a, b = lax.optimization_barrier((jnp.ones(2), jnp.arange(2)))
        >>> a, b
        (Array([1., 1.], dtype=float32), Array([0, 1], dtype=int32))
    """
    leaves, tree = tree_util.tree_flatten(operand)
    return tree_util.tree_unflatten(tree, list(optimization_barrier_p.bind(*leaves)))
