"""Reductions over axes: reduce_sum/max/min/prod/and/or/xor, argmax/argmin, cumulative sums."""
import numpy as np
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import dtypes
from funcgrad.core.ad_util import Zero, deflinear, defjvp_zero, instantiate, tangent_aval
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.axes import canonicalize_axes
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo
from funcgrad.lax._doc_examples import example_section
from funcgrad.lax import elementwise as ew
from funcgrad.lax import shapes   # a module object: shapes imports this module too


def _reduced_shape(name, x, axes):
    for a in axes:
        if not 0 <= a < x.ndim:
            raise TypeError(f"lax.{name}: axis {a} is out of range for {x.str_short()}")
    if len(set(axes)) != len(axes):
        raise TypeError(f"lax.{name}: repeated axis in {axes}")
    return tuple(d for i, d in enumerate(x.shape) if i not in axes)


def identity_value(kind, dtype):
    """The identity element of a monoid (sum, prod, max, min, and, or, xor) for ``dtype``."""
    dtype = np.dtype(dtype)
    if kind in ("sum", "or", "xor"):
        return np.zeros((), dtype)
    if kind == "prod":
        return np.ones((), dtype)
    if kind == "and":
        return np.array(True if dtype == dtypes.bool_ else -1).astype(dtype)
    if kind in ("max", "min"):
        if dtype == dtypes.bool_:
            return np.array(kind == "min")
        if dtypes.is_float(dtype):
            return np.array(-np.inf if kind == "max" else np.inf, dtype)
        info = np.iinfo(dtype)
        return np.array(info.min if kind == "max" else info.max, dtype)
    raise ValueError(kind)


_MONOID_HLO = {"sum": stablehlo.add, "prod": stablehlo.multiply, "max": stablehlo.maximum,
               "min": stablehlo.minimum, "and": stablehlo.and_, "or": stablehlo.or_,
               "xor": stablehlo.xor}


def reduce_hlo(kind, x, aval, axes, out_aval):
    """Emit a stablehlo.reduce of ``x`` over ``axes`` with monoid ``kind``."""
    init = _hlo.constant(identity_value(kind, aval.dtype), aval.dtype)
    op = stablehlo.ReduceOp([_hlo.ir_type(out_aval)], [x], [init], list(axes))
    scalar = ShapedArray((), aval.dtype)
    _hlo.scalar_region(op, [scalar, scalar], _MONOID_HLO[kind])
    return op.result


def _reduction(kind, accepts_bool=True, logical=False):
    prim = Primitive(f"reduce_{kind}")

    @prim.def_abstract_eval
    def _abstract(x, axes):
        if logical and not (dtypes.is_integer(x.dtype) or x.dtype == dtypes.bool_):
            raise TypeError(f"lax.reduce_{kind}: expected a bool or integer operand, got "
                            f"{x.str_short()}")
        if not accepts_bool and x.dtype == dtypes.bool_:
            raise TypeError(f"lax.reduce_{kind}: bool operands are not supported; convert "
                            f"first")
        return ShapedArray(_reduced_shape(prim.name, x, axes), x.dtype, x.weak_type)

    prim.def_lowering(lambda ctx, x, axes: reduce_hlo(kind, x, ctx.avals_in[0], axes,
                                                      ctx.avals_out[0]))
    return prim


def _axes(x, axes, name="reduce"):
    return tuple(sorted(canonicalize_axes(tuple(axes), aval_of(x).ndim, f"lax.{name}",
                                          allow_repeats=True)))


def _reducer(prim):
    def fn(x, axes):
        axes = _axes(x, axes, prim.name)
        if not axes:
            return x
        return prim.bind(x, axes=axes)
    fn.__name__ = prim.name
    fn.__doc__ = (f"``{prim.name}`` of ``x`` over ``axes`` (a tuple of ints).\n\n"
                  f"{example_section(prim.name)}")
    return fn


# --- batching rules ---
# Reductions keep the batch axis where it is: per-example axes are renumbered around it.
def _reduction_batch(prim):
    def rule(args, dims, axes, **params):
        d = dims[0]
        new_axes = tuple(a + (a >= d) for a in axes)
        out_dim = d - sum(1 for a in new_axes if a < d)
        return prim.bind(args[0], axes=new_axes, **params), out_dim
    return rule


def _chooser_jvp(prim):
    def rule(primals, tangents, axes):
        (x,), (t,) = primals, tangents
        ans = prim.bind(x, axes=axes)
        aval = aval_of(x)
        if not dtypes.is_inexact(aval.dtype):
            return ans, Zero(tangent_aval(aval_of(ans)))
        kept = tuple(i for i in range(aval.ndim) if i not in axes)
        loc = ew.convert_element_type(ew.eq(x, shapes.broadcast_in_dim(ans, aval.shape, kept)),
                                      aval.dtype)
        counts = reduce_sum_p.bind(loc, axes=axes)
        return ans, ew.div(reduce_sum_p.bind(ew.mul(t, loc), axes=axes), counts)
    return rule


# --- jvp and transpose rules ---------------------------------------------------------------------
def _shift(x, axis, reverse, fill):
    """``x`` shifted by one along ``axis`` (towards higher indices, or lower if ``reverse``),
    with ``fill`` entering at the open end."""
    aval = aval_of(x)
    cfg = [(0, 0, 0)] * aval.ndim
    cfg[axis] = (0, 1, 0) if reverse else (1, 0, 0)
    cfg = list(cfg)
    padded = shapes.pad(x, np.asarray(fill, aval.dtype), cfg)
    n = aval.shape[axis]
    return shapes.slice_in_dim(padded, 1, n + 1, 1, axis) if reverse else \
        shapes.slice_in_dim(padded, 0, n, 1, axis)


def _scan_shift(x, axis, reverse, k, fill):
    """``x`` shifted by ``k`` along ``axis`` (fill entering), for prefix scans."""
    aval = aval_of(x)
    n = aval.shape[axis]
    cfg = [(0, 0, 0)] * aval.ndim
    cfg[axis] = (0, k, 0) if reverse else (k, 0, 0)
    padded = shapes.pad(x, np.asarray(fill, aval.dtype), cfg)
    return shapes.slice_in_dim(padded, k, n + k, 1, axis) if reverse else \
        shapes.slice_in_dim(padded, 0, n, 1, axis)


reduce_sum_p = _reduction("sum", accepts_bool=False)


def _reduce_sum_t(ct, x, axes):
    if type(ct) is Zero:
        return [Zero(x.aval)]
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [shapes.broadcast_in_dim(ct, shape, kept)]


deflinear(reduce_sum_p, _reduce_sum_t)
reduce_sum_p.def_batch(_reduction_batch(reduce_sum_p))
reduce_sum = _reducer(reduce_sum_p)

reduce_prod_p = _reduction("prod", accepts_bool=False)


def _reduce_prod_jvp(primals, tangents, axes):
    (x,), (t,) = primals, tangents
    ans = reduce_prod_p.bind(x, axes=axes)
    aval = aval_of(x)
    # move the reduced axes last, flatten them, and use exclusive products (no division:
    # exact at zeros)
    kept = [i for i in range(aval.ndim) if i not in axes]
    perm = tuple(kept + list(axes))
    n = int(np.prod([aval.shape[a] for a in axes]))
    flat_shape = tuple(aval.shape[i] for i in kept) + (n,)
    xm = shapes.reshape(shapes.transpose(x, perm), flat_shape)
    tm = shapes.reshape(shapes.transpose(instantiate(t), perm), flat_shape)
    axis = len(kept)
    left = _shift(cumprod_p.bind(xm, axis=axis, reverse=False), axis, False, 1)
    right = _shift(cumprod_p.bind(xm, axis=axis, reverse=True), axis, True, 1)
    others = ew.mul(left, right)
    return ans, reduce_sum_p.bind(ew.mul(tm, others), axes=(axis,))


reduce_prod_p.def_jvp(_reduce_prod_jvp)
reduce_prod_p.def_batch(_reduction_batch(reduce_prod_p))
reduce_prod = _reducer(reduce_prod_p)

reduce_max_p = _reduction("max")
reduce_max_p.def_jvp(_chooser_jvp(reduce_max_p))
reduce_max_p.def_batch(_reduction_batch(reduce_max_p))
reduce_max = _reducer(reduce_max_p)

reduce_min_p = _reduction("min")
reduce_min_p.def_jvp(_chooser_jvp(reduce_min_p))
reduce_min_p.def_batch(_reduction_batch(reduce_min_p))
reduce_min = _reducer(reduce_min_p)

reduce_and_p = _reduction("and", logical=True)
defjvp_zero(reduce_and_p)
reduce_and_p.def_batch(_reduction_batch(reduce_and_p))
reduce_and = _reducer(reduce_and_p)

reduce_or_p = _reduction("or", logical=True)
defjvp_zero(reduce_or_p)
reduce_or_p.def_batch(_reduction_batch(reduce_or_p))
reduce_or = _reducer(reduce_or_p)

reduce_xor_p = _reduction("xor", logical=True)
defjvp_zero(reduce_xor_p)
reduce_xor_p.def_batch(_reduction_batch(reduce_xor_p))
reduce_xor = _reducer(reduce_xor_p)


# --- argmax / argmin -------------------------------------------------------------------------
def _arg_reduction(kind):
    prim = Primitive(f"arg{kind}")

    @prim.def_abstract_eval
    def _abstract(x, axes, index_dtype):
        if len(axes) != 1:
            raise TypeError(f"lax.arg{kind}: reduces exactly one axis, got {axes}")
        if x.shape[axes[0]] == 0:
            raise ValueError(f"lax.arg{kind}: attempt to get arg{kind} of an empty sequence "
                             f"({x.str_short()}, axis {axes[0]})")
        return ShapedArray(_reduced_shape(prim.name, x, axes), index_dtype)

    def _lowering(ctx, x, axes, index_dtype):
        aval, out = ctx.avals_in[0], ctx.avals_out[0]
        axis = axes[0]
        idx_aval = ShapedArray(aval.shape, index_dtype)
        idx = stablehlo.iota(_hlo.ir_type(idx_aval), axis)
        init_val = _hlo.constant(identity_value(kind, aval.dtype), aval.dtype)
        init_idx = _hlo.constant(0, index_dtype)
        op = stablehlo.ReduceOp([_hlo.ir_type(out.update(dtype=aval.dtype)), _hlo.ir_type(out)],
                                [x, idx], [init_val, init_idx], [axis])
        sv, si = ShapedArray((), aval.dtype), ShapedArray((), index_dtype)

        def body(a_val, a_idx, b_val, b_idx):
            # Pick a if it is strictly better, or equal with a smaller index; NaN wins (first).
            better = _hlo.compare(a_val, b_val, "GT" if kind == "max" else "LT", aval.dtype)
            equal = _hlo.compare(a_val, b_val, "EQ", aval.dtype)
            if dtypes.is_float(aval.dtype):
                a_nan = _hlo.compare(a_val, a_val, "NE", aval.dtype)
                b_nan = _hlo.compare(b_val, b_val, "NE", aval.dtype)
                better = stablehlo.or_(better, stablehlo.and_(a_nan, stablehlo.not_(b_nan)))
                equal = stablehlo.or_(equal, stablehlo.and_(a_nan, b_nan))
            smaller_idx = _hlo.compare(a_idx, b_idx, "LT", index_dtype)
            pick_a = stablehlo.or_(better, stablehlo.and_(equal, smaller_idx))
            return [stablehlo.select(pick_a, a_val, b_val), stablehlo.select(pick_a, a_idx, b_idx)]

        _hlo.scalar_region(op, [sv, si, sv, si], body)
        return op.results[1]

    prim.def_lowering(_lowering)
    return prim


argmax_p = _arg_reduction("max")
defjvp_zero(argmax_p)
argmax_p.def_batch(_reduction_batch(argmax_p))


def argmax(x, axis, index_dtype="int32"):
    """Index of the largest element along ``axis`` (first one on ties; NaN counts as largest).

    Example:
        >>> lax.argmax(jnp.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]]), 1)
        Array([1, 2], dtype=int32)
    """
    return argmax_p.bind(x, axes=_axes(x, (axis,), "argmax"),
                        index_dtype=dtypes.canonicalize(index_dtype))


argmin_p = _arg_reduction("min")
defjvp_zero(argmin_p)
argmin_p.def_batch(_reduction_batch(argmin_p))


def argmin(x, axis, index_dtype="int32"):
    """Index of the smallest element along ``axis``. Example: ``lax.argmin(x, 0)``."""
    return argmin_p.bind(x, axes=_axes(x, (axis,), "argmin"),
                        index_dtype=dtypes.canonicalize(index_dtype))


# --- cumulative reductions -------------------------------------------------------------------
def _cumulative(kind):
    prim = Primitive(f"cum{kind}")

    @prim.def_abstract_eval
    def _abstract(x, axis, reverse):
        if not 0 <= axis < x.ndim:
            raise TypeError(f"lax.cum{kind}: axis {axis} is out of range for {x.str_short()}")
        return ShapedArray(x.shape, x.dtype, x.weak_type)

    def _lowering(ctx, x, axis, reverse):
        aval = ctx.avals_in[0]
        return _hlo.cumulative(x, aval, axis, reverse, identity_value(kind, aval.dtype),
                               _MONOID_HLO[kind])

    prim.def_lowering(_lowering)
    return prim


def _cumulative_fn(prim):
    def fn(x, axis=0, reverse=False):
        return prim.bind(x, axis=_axes(x, (axis,), prim.name)[0], reverse=bool(reverse))
    fn.__name__ = prim.name
    fn.__doc__ = (f"Running ``{prim.name[3:]}`` along ``axis`` (from the end if ``reverse``)."
                  f"\n\n{example_section(prim.name)}")
    return fn


def _cumulative_batch(prim):
    def rule(args, dims, axis, reverse):
        d = dims[0]
        return prim.bind(args[0], axis=axis + (axis >= d), reverse=reverse), d
    return rule


def _cumulative_jvp(kind):
    """jvp of cumprod/cummax/cummin by a Hillis-Steele prefix scan of (value, tangent) pairs,
    written with differentiable primitives so that higher derivatives compose."""
    def rule(primals, tangents, axis, reverse):
        (x,), (t,) = primals, tangents
        prim = {"prod": cumprod_p, "max": cummax_p, "min": cummin_p}[kind]
        out = prim.bind(x, axis=axis, reverse=reverse)
        t = instantiate(t)
        n = aval_of(x).shape[axis]
        ident = identity_value(kind, aval_of(x).dtype)
        y, dy = x, t
        k = 1
        while k < n:
            ys = _scan_shift(y, axis, reverse, k, ident)
            dys = _scan_shift(dy, axis, reverse, k, 0)
            if kind == "prod":
                y, dy = ew.mul(y, ys), ew.add(ew.mul(dy, ys), ew.mul(y, dys))
            else:
                keep = ew.ge(y, ys) if kind == "max" else ew.le(y, ys)
                y, dy = ew.select(keep, y, ys), ew.select(keep, dy, dys)
            k *= 2
        return out, dy
    return rule


cumsum_p = _cumulative("sum")
deflinear(cumsum_p, lambda ct, x, axis, reverse: [
    Zero(x.aval) if type(ct) is Zero else cumsum_p.bind(ct, axis=axis, reverse=not reverse)])
cumsum_p.def_batch(_cumulative_batch(cumsum_p))
cumsum = _cumulative_fn(cumsum_p)

cumprod_p = _cumulative("prod")
cumprod_p.def_jvp(_cumulative_jvp("prod"))
cumprod_p.def_batch(_cumulative_batch(cumprod_p))
cumprod = _cumulative_fn(cumprod_p)

cummax_p = _cumulative("max")
cummax_p.def_jvp(_cumulative_jvp("max"))
cummax_p.def_batch(_cumulative_batch(cummax_p))
cummax = _cumulative_fn(cummax_p)

cummin_p = _cumulative("min")
cummin_p.def_jvp(_cumulative_jvp("min"))
cummin_p.def_batch(_cumulative_batch(cummin_p))
cummin = _cumulative_fn(cummin_p)
