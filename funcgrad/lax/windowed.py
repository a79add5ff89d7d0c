"""Windowed reductions: ``reduce_window`` with sum, max or min (pooling), with all their rules.

Three primitives (``reduce_window_sum``, ``reduce_window_max``, ``reduce_window_min``) share
the params ``window_dimensions``, ``window_strides``, ``padding`` ((low, high) per axis),
``base_dilation`` and ``window_dilation``. Sum is linear (its transpose pads the cotangent and
sums windows again); the derivative of max/min routes each output's tangent to the first input
that attains the extreme in its window. Non-overlapping windows (stride == window, the usual
pooling) view the input as (out, window) tiles through a reshape; other windows lay their
elements side by side (pad + strided slices). Both are plain lax code, so the derivative is
itself differentiable and batchable, and its transpose (the pooling gradient) stays a cheap
fused select for tiles.

Example:
    >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
    >>> lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")  # max pool
    Array([[[[ 5.,  7.],
             [13., 15.]]]], dtype=float32)
"""
import itertools

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import ad_util
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo, elementwise, generic_reduce
from funcgrad.lax.convolution import _vjp_lhs_padding, padtype_to_pads
from funcgrad.lax.elementwise import add, bitwise_and, bitwise_or, eq, mul, ne, select
from funcgrad.lax.reductions import (_MONOID_HLO, argmax, argmin, identity_value, reduce_min,
                                     reduce_sum)
from funcgrad.lax.shapes import (broadcast_in_dim, broadcasted_iota, concatenate, expand_dims,
                                 pad, reshape, slice)


def _dilate(size, d):
    return 0 if size == 0 else 1 + d * (size - 1)


def window_out_shape(name, shape, window_dimensions, window_strides, padding, base_dilation,
                     window_dilation):
    nd = len(shape)
    for v, what in ((window_dimensions, "window_dimensions"), (window_strides, "window_strides"),
                    (padding, "padding"), (base_dilation, "base_dilation"),
                    (window_dilation, "window_dilation")):
        if len(v) != nd:
            raise TypeError(f"lax.{name}: {what}={tuple(v)} needs one entry per axis of the "
                            f"operand of shape {tuple(shape)}")
    out = []
    for n, k, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding,
                                         base_dilation, window_dilation):
        if k < 1 or s < 1 or bd < 1 or wd < 1:
            raise TypeError(f"lax.{name}: window sizes, strides and dilations must be >= 1, "
                            f"got window {tuple(window_dimensions)}, strides "
                            f"{tuple(window_strides)}")
        size = _dilate(n, bd) + lo + hi
        win = _dilate(k, wd)
        out.append((size - win) // s + 1 if size >= win else 0)
    return tuple(out)


def _make(kind):
    prim = Primitive(f"reduce_window_{kind}")

    @prim.def_abstract_eval
    def _abstract(x, *, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation):
        shape = window_out_shape(prim.name, x.shape, window_dimensions, window_strides, padding,
                                 base_dilation, window_dilation)
        return ShapedArray(shape, x.dtype, x.weak_type)

    def _lowering(ctx, x, *, window_dimensions, window_strides, padding, base_dilation,
                  window_dilation):
        aval = ctx.avals_in[0]
        init = _hlo.constant(identity_value(kind, aval.dtype), aval.dtype)
        pad_attr = ir.DenseIntElementsAttr.get(
            np.asarray(padding, np.int64).reshape(aval.ndim, 2), shape=[aval.ndim, 2])
        op = stablehlo.ReduceWindowOp(
            [_hlo.ir_type(ctx.avals_out[0])], [x], [init], list(window_dimensions),
            window_strides=list(window_strides), base_dilations=list(base_dilation),
            window_dilations=list(window_dilation), padding=pad_attr)
        scalar = ShapedArray((), aval.dtype)
        _hlo.scalar_region(op, [scalar, scalar], _MONOID_HLO[kind])
        return op.result

    prim.def_lowering(_lowering)
    return prim


def _batcher(prim):
    def rule(args, dims, *, window_dimensions, window_strides, padding, base_dilation,
             window_dilation):
        (x,), (d,) = args, dims
        if d is None:
            return prim.bind(x, window_dimensions=window_dimensions,
                             window_strides=window_strides, padding=padding,
                             base_dilation=base_dilation, window_dilation=window_dilation), None

        def ins(t, v):
            return tuple(t[:d]) + (v,) + tuple(t[d:])
        out = prim.bind(x, window_dimensions=ins(window_dimensions, 1),
                        window_strides=ins(window_strides, 1), padding=ins(padding, (0, 0)),
                        base_dilation=ins(base_dilation, 1),
                        window_dilation=ins(window_dilation, 1))
        return out, d
    return rule


# --- reduce_window_sum: linear; its transpose pads the cotangent and sums windows again ----
reduce_window_sum_p = _make("sum")


def _sum_jvp(primals, tangents, **params):
    (x,), (t,) = primals, tangents
    out = reduce_window_sum_p.bind(x, **params)
    if ad_util.is_zero(t):
        return out, ad_util.Zero(aval_of(out))
    return out, reduce_window_sum_p.bind(t, **params)


def _sum_transpose(ct, x, *, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):
    in_aval = x.aval
    if ad_util.is_zero(ct):
        return [ad_util.Zero(in_aval)]
    ct_shape = aval_of(ct).shape
    pads = _vjp_lhs_padding(in_aval.shape, window_dimensions, window_strides, ct_shape, padding,
                            base_dilation, window_dilation)
    config = [(lo, hi, s - 1) for (lo, hi), s in zip(pads, window_strides)]
    padded = pad(ct, np.zeros((), aval_of(ct).dtype), config)
    nd = len(ct_shape)
    out = reduce_window_sum_p.bind(
        padded, window_dimensions=tuple(window_dimensions), window_strides=tuple(base_dilation),
        padding=((0, 0),) * nd, base_dilation=(1,) * nd, window_dilation=tuple(window_dilation))
    return [out]


reduce_window_sum_p.def_jvp(_sum_jvp)
reduce_window_sum_p.def_transpose(_sum_transpose)
reduce_window_sum_p.def_batch(_batcher(reduce_window_sum_p))


# --- reduce_window_max/min: the tangent of the first element attaining the extreme --------
def window_patches(x, fill, window_dimensions, window_strides, padding, base_dilation,
                    window_dilation, out_shape):
    """The K = prod(window) elements of every window, stacked on a new leading axis."""
    dtype = aval_of(x).dtype
    config = [(lo, hi, bd - 1) for (lo, hi), bd in zip(padding, base_dilation)]
    if any(c != (0, 0, 0) for c in config):
        x = pad(x, np.asarray(fill, dtype), config)
    patches = []
    for offs in itertools.product(*[range(k) for k in window_dimensions]):
        start = [o * wd for o, wd in zip(offs, window_dilation)]
        limit = [st + (n - 1) * s + 1 if n > 0 else st
                 for st, n, s in zip(start, out_shape, window_strides)]
        patches.append(expand_dims(slice(x, start, limit, window_strides), (0,)))
    return patches[0] if len(patches) == 1 else concatenate(patches, 0)


def _tiles(x, window, out_shape):
    """``x`` cropped to whole windows and reshaped to (out_0, k_0, out_1, k_1, ...): the view of
    non-overlapping windows (stride == window) without copying elements side by side."""
    shape = aval_of(x).shape
    crop = [n * k for n, k in zip(out_shape, window)]
    if tuple(crop) != tuple(shape):
        x = slice(x, [0] * len(shape), crop)
    return reshape(x, tuple(d for n, k in zip(out_shape, window) for d in (n, k)))


def _tiled_chooser_tangent(kind, x, t, out, window):
    """Tangent of a max/min over non-overlapping windows: each window's tangent is that of its
    first element (row-major) equal to the extreme (NaN counts as equal to a NaN extreme)."""
    out_shape = aval_of(out).shape
    x6, t6 = _tiles(x, window, out_shape), _tiles(t, window, out_shape)
    full = aval_of(x6).shape
    outer = tuple(range(0, len(full), 2))
    inner = tuple(range(1, len(full), 2))
    ext = broadcast_in_dim(out, full, outer)
    hit = bitwise_or(eq(x6, ext), bitwise_and(ne(x6, x6), ne(ext, ext)))
    pos, stride = None, 1
    for ax in reversed(inner):                    # row-major position inside the window
        term = mul(broadcasted_iota("int32", full, ax), np.int32(stride))
        pos = term if pos is None else add(pos, term)
        stride *= full[ax]
    first = reduce_min(select(hit, pos, broadcast_in_dim(np.int32(stride), full, ())), inner)
    chosen = eq(pos, broadcast_in_dim(first, full, outer))
    zeros = broadcast_in_dim(np.zeros((), aval_of(t).dtype), full, ())
    return reduce_sum(select(chosen, t6, zeros), inner)


def _chooser_jvp(prim, kind):
    def rule(primals, tangents, **params):
        (x,), (t,) = primals, tangents
        out = prim.bind(x, **params)
        out_aval = aval_of(out)
        if ad_util.is_zero(t):
            return out, ad_util.Zero(out_aval)
        win = params["window_dimensions"]
        if tuple(params["window_strides"]) == tuple(win) and \
                all(p == (0, 0) for p in map(tuple, params["padding"])) and \
                all(d == 1 for d in params["base_dilation"]) and \
                all(d == 1 for d in params["window_dilation"]):
            return out, _tiled_chooser_tangent(kind, x, t, out, win)
        dtype = aval_of(x).dtype
        xs = window_patches(x, identity_value(kind, dtype), out_shape=out_aval.shape, **params)
        ts = window_patches(t, np.zeros((), aval_of(t).dtype), out_shape=out_aval.shape,
                             **params)
        which = (argmax if kind == "max" else argmin)(xs, 0, "int32")
        k = aval_of(xs).shape[0]
        full = (k,) + tuple(out_aval.shape)
        hit = eq(broadcasted_iota("int32", full, 0),
                 broadcast_in_dim(which, full, tuple(range(1, len(full)))))
        zeros = broadcast_in_dim(np.zeros((), aval_of(t).dtype), full, ())
        return out, reduce_sum(select(hit, ts, zeros), (0,))

    return rule


reduce_window_max_p = _make("max")
reduce_window_max_p.def_jvp(_chooser_jvp(reduce_window_max_p, "max"))
reduce_window_max_p.def_batch(_batcher(reduce_window_max_p))

reduce_window_min_p = _make("min")
reduce_window_min_p.def_jvp(_chooser_jvp(reduce_window_min_p, "min"))
reduce_window_min_p.def_batch(_batcher(reduce_window_min_p))

_PRIMS = {"sum": reduce_window_sum_p, "max": reduce_window_max_p, "min": reduce_window_min_p}


def _kind_of(computation):
    if isinstance(computation, str):
        kind = computation
    else:
        kind = {elementwise.add: "sum", elementwise.max: "max",
                elementwise.min: "min"}.get(computation)
        if kind is None:
            name = getattr(computation, "__name__", "")
            kind = {"add": "sum", "max": "max", "maximum": "max", "min": "min",
                    "minimum": "min"}.get(name)
    if kind not in _PRIMS:
        raise TypeError(f"lax.reduce_window: computation must be lax.add, lax.max or lax.min "
                        f"(or 'sum'/'max'/'min'), got {computation!r}")
    return kind


def _monoid_kind(computation, operand, init_value):
    """"sum"/"max"/"min" when ``computation`` is that monoid on one array with a concrete
    init value, else None (a general computation)."""
    if isinstance(computation, str):
        return _kind_of(computation)
    try:
        kind = _kind_of(computation)
    except TypeError:
        return None
    if isinstance(operand, (list, tuple, dict)) or not isinstance(
            init_value, (int, float, bool, np.ndarray, np.generic)):
        return None
    dtype = aval_of(operand).dtype
    init = np.asarray(init_value)
    return kind if init.shape == () and init.astype(dtype) == identity_value(kind, dtype) \
        else None


def _generic_window(operands, init_values, computation, window_dimensions, window_strides,
                    padding, base_dilation, window_dilation):
    first = aval_of(generic_reduce.tree_util.tree_leaves(operands)[0])
    nd = first.ndim
    window_dimensions = tuple(int(k) for k in window_dimensions)
    window_strides = tuple(int(s) for s in (window_strides or (1,) * nd))
    base_dilation = tuple(int(d) for d in (base_dilation or (1,) * nd))
    window_dilation = tuple(int(d) for d in (window_dilation or (1,) * nd))
    if isinstance(padding, str):
        padding = padtype_to_pads([_dilate(n, d) for n, d in zip(first.shape, base_dilation)],
                                  [_dilate(k, d) for k, d in zip(window_dimensions,
                                                                 window_dilation)],
                                  window_strides, padding)
    padding = tuple(tuple(int(v) for v in p) for p in padding)
    return generic_reduce.reduce_window_generic(operands, init_values, computation,
                                                window_dimensions, window_strides, padding,
                                                base_dilation, window_dilation)


def reduce_window(operand, init_value, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilation=None, window_dilation=None):
    """Reduce each window of ``operand`` with ``computation`` from ``init_value`` (which also
    fills the padding). ``padding`` is "SAME", "VALID" or (low, high) pairs.

    ``lax.add``, ``lax.max`` and ``lax.min`` with their identity bind ``reduce_window_sum`` &
    co.; any other associative computation, or a pytree of operands, binds ``reduce_window``.

    Example:
        >>> lax.reduce_window(jnp.arange(6.0), 0.0, lax.add, (2,), (2,), "VALID")
        Array([1., 5., 9.], dtype=float32)
        >>> lax.reduce_window(jnp.arange(1.0, 5.0), 1.0, lax.mul, (2,), (1,), "VALID")
        Array([ 2.,  6., 12.], dtype=float32)
    """
    kind = _monoid_kind(computation, operand, init_value)
    if kind is None:      # any other computation, or several operands: reduce_window_p
        return _generic_window(operand, init_value, computation, window_dimensions,
                               window_strides, padding, base_dilation, window_dilation)
    aval = aval_of(operand)
    init = np.asarray(init_value)
    ident = identity_value(kind, aval.dtype)
    if init.shape != () or (init.astype(aval.dtype) != ident and not (
            np.isnan(ident) if ident.dtype.kind == "f" else False)):
        raise ValueError(f"lax.reduce_window: init_value {init_value!r} is not the identity of "
                         f"{kind} for {aval.dtype} ({ident}); funcgrad supports only monoid "
                         f"reductions with their identity as init value")
    nd = aval.ndim
    window_dimensions = tuple(int(k) for k in window_dimensions)
    window_strides = tuple(int(s) for s in (window_strides or (1,) * nd))
    base_dilation = tuple(int(d) for d in (base_dilation or (1,) * nd))
    window_dilation = tuple(int(d) for d in (window_dilation or (1,) * nd))
    if isinstance(padding, str):
        padding = padtype_to_pads([_dilate(n, d) for n, d in zip(aval.shape, base_dilation)],
                                  [_dilate(k, d) for k, d in zip(window_dimensions,
                                                                 window_dilation)],
                                  window_strides, padding)
    padding = tuple(tuple(int(v) for v in p) for p in padding)
    return _PRIMS[kind].bind(operand, window_dimensions=window_dimensions,
                             window_strides=window_strides, padding=padding,
                             base_dilation=base_dilation, window_dilation=window_dilation)


def reduce_window_sum(x, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    """Sum over windows; ``padding`` is "SAME"/"VALID" or pairs. Example: ``lax.reduce_window_sum(x, (2,), (2,), "VALID")``."""
    return reduce_window(x, 0, "sum", window_dimensions, window_strides, padding,
                         base_dilation, window_dilation)


def reduce_window_max(x, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    """Max over windows (max pooling). Example: ``lax.reduce_window_max(x, (2,), (2,), "VALID")``."""
    ident = identity_value("max", aval_of(x).dtype)
    return reduce_window(x, ident, "max", window_dimensions, window_strides, padding,
                         base_dilation, window_dilation)


def reduce_window_min(x, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    """Min over windows. Example: ``lax.reduce_window_min(x, (2,), (2,), "VALID")``."""
    ident = identity_value("min", aval_of(x).dtype)
    return reduce_window(x, ident, "min", window_dimensions, window_strides, padding,
                         base_dilation, window_dilation)
