"""``conv_general_dilated``: N-d convolution with strides, padding, dilations and groups.

One primitive covers every convolution (1-d/2-d/3-d, transposed, depthwise, grouped). Its
layout is described by ``ConvDimensionNumbers(lhs_spec, rhs_spec, out_spec)``: each spec lists
the positions of (batch, feature, *spatial) for lhs/out and (out feature, in feature, *spatial)
for the kernel. All rules (shape inference, lowering, jvp, transposes, batching) live here.

Example:
    >>> x = jnp.ones((1, 3, 8, 8)); w = jnp.ones((4, 3, 3, 3))
    >>> lax.conv_general_dilated(x, w, (1, 1), "SAME").shape
    (1, 4, 8, 8)
"""
import collections

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import ad_util, dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo
from funcgrad.lax.elementwise import add, convert_element_type
from funcgrad.lax.shapes import concatenate, expand_dims, index_in_dim, reshape, rev, transpose
from funcgrad.lax.precision import canonicalize_precision, precision_config

ConvDimensionNumbers = collections.namedtuple("ConvDimensionNumbers",
                                              ["lhs_spec", "rhs_spec", "out_spec"])
ConvDimensionNumbers.__doc__ = (
    "Layout of a convolution: each spec is a tuple of axis positions. lhs/out: (batch, feature, "
    "*spatial); rhs: (out feature, in feature, *spatial).")


def _spec_from_string(s, kind):
    """Axis positions of a layout string such as "NCHW" (lhs/out) or "OIHW" (rhs)."""
    if kind == "rhs":
        first, second = "O", "I"
    else:
        first, second = "N", "C"
    if first not in s or second not in s or len(set(s)) != len(s):
        raise TypeError(f"lax.conv_general_dilated: invalid {kind} layout string {s!r}: it needs "
                        f"one {first!r}, one {second!r} and distinct spatial letters")
    spatial = [i for i, c in enumerate(s) if c not in (first, second)]
    return (s.index(first), s.index(second)), spatial


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """Normalize ``dimension_numbers`` (None, strings or a ConvDimensionNumbers).

    Spatial dimensions of lhs, rhs and out are matched by letter (the order of letters in the
    rhs string), as in XLA's convention for string layouts.

    Example:
        >>> lax.conv_dimension_numbers((1, 8, 8, 3), (3, 3, 3, 4), ("NHWC", "HWIO", "NHWC"))
        ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    nd = len(lhs_shape)
    if dimension_numbers is None:
        spec = tuple(range(nd))
        return ConvDimensionNumbers(spec, spec, spec)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(tuple(int(d) for d in s) for s in dimension_numbers))
    if len(dimension_numbers) != 3:
        raise TypeError(f"lax.conv_general_dilated: dimension_numbers must be three layout "
                        f"strings or a ConvDimensionNumbers, got {dimension_numbers!r}")
    lhs_s, rhs_s, out_s = dimension_numbers
    if not all(isinstance(s, str) for s in dimension_numbers):
        return ConvDimensionNumbers(*(tuple(int(d) for d in s) for s in dimension_numbers))
    for s, shape, what in ((lhs_s, lhs_shape, "lhs"), (rhs_s, rhs_shape, "rhs")):
        if len(s) != len(shape):
            raise TypeError(f"lax.conv_general_dilated: {what} layout {s!r} does not match the "
                            f"rank of shape {tuple(shape)}")
    if len(out_s) != nd:
        raise TypeError(f"lax.conv_general_dilated: out layout {out_s!r} has the wrong rank")
    (ro, ri), rsp = _spec_from_string(rhs_s, "rhs")
    (ln, lc), _ = _spec_from_string(lhs_s, "lhs")
    (on, oc), _ = _spec_from_string(out_s, "out")
    letters = [rhs_s[i] for i in rsp]
    try:
        lsp = [lhs_s.index(c) for c in letters]
        osp = [out_s.index(c) for c in letters]
    except ValueError:
        raise TypeError(f"lax.conv_general_dilated: spatial letters of {dimension_numbers!r} "
                        f"do not match between lhs, rhs and out") from None
    return ConvDimensionNumbers((ln, lc, *lsp), (ro, ri, *rsp), (on, oc, *osp))


def _dilate(size, d):
    return 0 if size == 0 else 1 + d * (size - 1)


def padtype_to_pads(in_shape, window_shape, strides, padding):
    """Explicit (low, high) pads for "SAME", "SAME_LOWER" or "VALID" padding."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return [(0, 0)] * len(in_shape)
        if mode in ("SAME", "SAME_LOWER"):
            pads = []
            for n, k, s in zip(in_shape, window_shape, strides):
                out = -(-n // s)
                total = max((out - 1) * s + k - n, 0)
                lo = total // 2 if mode == "SAME" else total - total // 2
                pads.append((lo, total - lo))
            return pads
        raise TypeError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence of "
                        f"(low, high) pairs, got {padding!r}")
    return [tuple(int(v) for v in p) for p in padding]


# --- the primitive ---------------------------------------------------------------------------
conv_general_dilated_p = Primitive("conv_general_dilated")


def _conv_shape(lhs_shape, rhs_shape, window_strides, padding, lhs_dilation, rhs_dilation,
                dimension_numbers, feature_group_count, batch_group_count):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nsp = len(lhs_spec) - 2
    for v, what in ((window_strides, "window_strides"), (padding, "padding"),
                    (lhs_dilation, "lhs_dilation"), (rhs_dilation, "rhs_dilation")):
        if len(v) != nsp:
            raise TypeError(f"lax.conv_general_dilated: {what}={v} needs {nsp} entries for "
                            f"{nsp} spatial dimensions")
    n, c = lhs_shape[lhs_spec[0]], lhs_shape[lhs_spec[1]]
    o, i = rhs_shape[rhs_spec[0]], rhs_shape[rhs_spec[1]]
    if c != i * feature_group_count:
        raise TypeError(f"lax.conv_general_dilated: lhs feature size {c} must equal kernel "
                        f"input feature size {i} times feature_group_count "
                        f"{feature_group_count} (lhs {tuple(lhs_shape)}, rhs {tuple(rhs_shape)})")
    if o % feature_group_count or o % batch_group_count:
        raise TypeError(f"lax.conv_general_dilated: kernel output feature size {o} must be a "
                        f"multiple of feature_group_count {feature_group_count} and "
                        f"batch_group_count {batch_group_count}")
    if n % batch_group_count:
        raise TypeError(f"lax.conv_general_dilated: lhs batch size {n} must be a multiple of "
                        f"batch_group_count {batch_group_count}")
    if feature_group_count > 1 and batch_group_count > 1:
        raise TypeError("lax.conv_general_dilated: at most one of feature_group_count and "
                        "batch_group_count may exceed 1")
    out = [0] * len(out_spec)
    out[out_spec[0]] = n // batch_group_count
    out[out_spec[1]] = o
    for k in range(nsp):
        size = _dilate(lhs_shape[lhs_spec[2 + k]], lhs_dilation[k]) + sum(padding[k])
        win = _dilate(rhs_shape[rhs_spec[2 + k]], rhs_dilation[k])
        out[out_spec[2 + k]] = max(0, (size - win) // window_strides[k] + 1) if size >= win else 0
    return tuple(out)


@conv_general_dilated_p.def_abstract_eval
def _conv_abstract(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision=None,
                   preferred_element_type):
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"lax.conv_general_dilated: operand dtypes must match, got "
                        f"{lhs.str_short()} and {rhs.str_short()}")
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise TypeError(f"lax.conv_general_dilated: lhs {lhs.str_short()} and rhs "
                        f"{rhs.str_short()} must have the same rank >= 2")
    shape = _conv_shape(lhs.shape, rhs.shape, window_strides, padding, lhs_dilation,
                        rhs_dilation, dimension_numbers, feature_group_count, batch_group_count)
    return ShapedArray(shape, preferred_element_type or lhs.dtype,
                       lhs.weak_type and rhs.weak_type)


def _conv_lowering(ctx, lhs, rhs, **params):
    """XLA's convolution. (On the CPU, ``lowering/cpu_convolution.py`` lowers some shapes
    through faster equivalent programs first.)"""
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    dnums = stablehlo.ConvDimensionNumbers.get(
        input_batch_dimension=lhs_spec[0], input_feature_dimension=lhs_spec[1],
        input_spatial_dimensions=list(lhs_spec[2:]),
        kernel_output_feature_dimension=rhs_spec[0], kernel_input_feature_dimension=rhs_spec[1],
        kernel_spatial_dimensions=list(rhs_spec[2:]),
        output_batch_dimension=out_spec[0], output_feature_dimension=out_spec[1],
        output_spatial_dimensions=list(out_spec[2:]))
    nsp = len(lhs_spec) - 2
    pad_attr = ir.DenseIntElementsAttr.get(
        np.asarray(params["padding"], np.int64).reshape(nsp, 2), shape=[nsp, 2])
    return stablehlo.convolution(
        _hlo.ir_type(ctx.avals_out[0]), lhs, rhs, dnums, params["feature_group_count"],
        params["batch_group_count"], window_strides=list(params["window_strides"]),
        padding=pad_attr, lhs_dilation=list(params["lhs_dilation"]),
        rhs_dilation=list(params["rhs_dilation"]),
        precision_config=precision_config(params.get("precision")))


conv_general_dilated_p.def_lowering(_conv_lowering)


# --- jvp and transpose rules -------------------------------------------------------------------
_is_zero, _zero, _is_undefined = ad_util.is_zero, ad_util.Zero, ad_util.is_undefined_primal


def _conv_jvp(primals, tangents, **params):
    lhs, rhs = primals
    tl, tr = tangents
    out = conv_general_dilated_p.bind(lhs, rhs, **params)
    parts = []
    if not _is_zero(tl):
        parts.append(conv_general_dilated_p.bind(tl, rhs, **params))
    if not _is_zero(tr):
        parts.append(conv_general_dilated_p.bind(lhs, tr, **params))
    if not parts:
        return out, _zero(aval_of(out).update(weak_type=False)
                          if hasattr(aval_of(out), "update") else aval_of(out))
    t = parts[0] if len(parts) == 1 else add(parts[0], parts[1])
    return out, t


conv_general_dilated_p.def_jvp(_conv_jvp)


def _split_axis(x, axis, n, minor=False):
    """Reshape axis ``axis`` of size s into (n, s // n) (or (s // n, n) if ``minor``)."""
    shape = list(aval_of(x).shape)
    s = shape[axis]
    shape[axis:axis + 1] = [s // n, n] if minor else [n, s // n]
    return reshape(x, tuple(shape))


def _reshape_axis_into(src, dst, x):
    """Merge axis ``src`` into axis ``dst`` as its major part; the result has one axis less.

    ``dst`` indexes the array before the merge.
    """
    shape = list(aval_of(x).shape)
    perm = [d for d in range(len(shape)) if d != src]
    pos = perm.index(dst)
    perm.insert(pos, src)
    x = transpose(x, tuple(perm))
    new_shape = [shape[d] for d in perm]
    new_shape[pos:pos + 2] = [new_shape[pos] * new_shape[pos + 1]]
    return reshape(x, tuple(new_shape))


def _swap01(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


def _vjp_lhs_padding(in_shape, k_shape, strides, out_shape, padding, lhs_dil, rhs_dil):
    pads = []
    for n, k, s, o, (lo, _), ld, rd in zip(in_shape, k_shape, strides, out_shape, padding,
                                          lhs_dil, rhs_dil):
        nd, kd, od = _dilate(n, ld), _dilate(k, rd), _dilate(o, s)
        before = kd - lo - 1
        after = nd + kd - 1 - od - before
        pads.append((before, after))
    return tuple(pads)


def _vjp_rhs_padding(in_shape, k_shape, strides, out_shape, padding, lhs_dil, rhs_dil):
    pads = []
    for n, k, s, o, (lo, _), ld, rd in zip(in_shape, k_shape, strides, out_shape, padding,
                                          lhs_dil, rhs_dil):
        nd, kd, od = _dilate(n, ld), _dilate(k, rd), _dilate(o, s)
        pads.append((lo, od - nd + kd - lo - 1))
    return tuple(pads)


def _transpose_lhs(ct, rhs, lhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision=None,
                   preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    rhs_shape = aval_of(rhs).shape
    ct_shape = aval_of(ct).shape
    fgc = feature_group_count
    if fgc > 1:
        # Kernel (O=G*o, I, ...) -> (o, G*I, ...): each group's outputs become its inputs.
        rhs = _split_axis(rhs, rhs_spec[0], fgc)
        o_ax = rhs_spec[0]
        i_ax = rhs_spec[1] + (1 if rhs_spec[1] > rhs_spec[0] else 0)
        rhs = _reshape_axis_into(o_ax, i_ax, rhs)
    elif batch_group_count > 1:
        rhs = _split_axis(rhs, rhs_spec[0], batch_group_count)
        o_ax = rhs_spec[0]
        i_ax = rhs_spec[1] + (1 if rhs_spec[1] > rhs_spec[0] else 0)
        rhs = _reshape_axis_into(o_ax, i_ax, rhs)
        fgc = batch_group_count
    sp = range(2, len(lhs_spec))
    pads = _vjp_lhs_padding([lhs_aval.shape[lhs_spec[k]] for k in sp],
                            [rhs_shape[rhs_spec[k]] for k in sp], window_strides,
                            [ct_shape[out_spec[k]] for k in sp], padding, lhs_dilation,
                            rhs_dilation)
    dn = ConvDimensionNumbers(out_spec, _swap01(rhs_spec), lhs_spec)
    rhs = rev(rhs, tuple(rhs_spec[2:]))
    ct = _cast(ct, aval_of(rhs).dtype)   # a preferred_element_type product's cotangent
    out = conv_general_dilated_p.bind(
        ct, rhs, window_strides=tuple(lhs_dilation), padding=pads,
        lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=dn, feature_group_count=fgc, batch_group_count=1,
        precision=precision, preferred_element_type=None)
    if batch_group_count > 1:
        # out has feature size bgc*C and batch n; put the group factor back into the batch.
        out = _split_axis(out, lhs_spec[1], batch_group_count)
        f_ax = lhs_spec[1]
        b_ax = lhs_spec[0] + (1 if lhs_spec[0] > lhs_spec[1] else 0)
        out = _reshape_axis_into(f_ax, b_ax, out)
    return _cast(out, lhs_aval.dtype)


def _cast(x, dtype):
    if aval_of(x).dtype != dtype:
        return convert_element_type(x, dtype)
    return x


def _transpose_rhs(ct, lhs, rhs_aval, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count, precision=None,
                   preferred_element_type):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_shape = aval_of(lhs).shape
    ct_shape = aval_of(ct).shape
    fgc, bgc = feature_group_count, batch_group_count
    if bgc > 1:
        fgc, bgc = bgc, 1
    elif fgc > 1:
        fgc, bgc = 1, fgc
    sp = range(2, len(lhs_spec))
    pads = _vjp_rhs_padding([lhs_shape[lhs_spec[k]] for k in sp],
                            [rhs_aval.shape[rhs_spec[k]] for k in sp], window_strides,
                            [ct_shape[out_spec[k]] for k in sp], padding, lhs_dilation,
                            rhs_dilation)
    dn = ConvDimensionNumbers(_swap01(lhs_spec), _swap01(out_spec), _swap01(rhs_spec))
    ct = _cast(ct, aval_of(lhs).dtype)   # a preferred_element_type product's cotangent
    out = conv_general_dilated_p.bind(
        lhs, ct, window_strides=tuple(rhs_dilation), padding=pads,
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
        dimension_numbers=dn, feature_group_count=fgc, batch_group_count=bgc,
        precision=precision, preferred_element_type=None)
    return _cast(out, rhs_aval.dtype)


def _conv_transpose_rule(ct, lhs, rhs, **params):
    if _is_undefined(lhs) and _is_undefined(rhs):
        raise TypeError("conv_general_dilated transpose: both operands are linear; the product "
                        "is bilinear, not linear")
    if _is_undefined(lhs):
        if _is_zero(ct):
            return [_zero(lhs.aval), None]
        return [_transpose_lhs(ct, rhs, lhs.aval, **params), None]
    if _is_zero(ct):
        return [None, _zero(rhs.aval)]
    return [None, _transpose_rhs(ct, lhs, rhs.aval, **params)]


conv_general_dilated_p.def_transpose(_conv_transpose_rule)


# --- batching rule -----------------------------------------------------------------------------
def _move_to(x, src, dst):
    nd = aval_of(x).ndim
    perm = [d for d in range(nd) if d != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm)) if perm != list(range(nd)) else x


def _conv_batch_rule(args, dims, **params):
    lhs, rhs = args
    ld, rd = dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    fgc, bgc = params["feature_group_count"], params["batch_group_count"]
    if ld is not None and rd is not None:
        B = aval_of(lhs).shape[ld]
        if bgc == 1:
            # Fold the vmapped axis into feature groups: lhs (B*C), kernel (B*O).
            lhs = _move_to(lhs, ld, 0)
            rhs = _move_to(rhs, rd, 0)
            new_lhs = _reshape_axis_into(0, lhs_spec[1] + 1, lhs)
            new_rhs = _reshape_axis_into(0, rhs_spec[0] + 1, rhs)
            p = dict(params, feature_group_count=fgc * B)
            out = conv_general_dilated_p.bind(new_lhs, new_rhs, **p)
            out = _split_axis(out, out_spec[1], B)
            return out, out_spec[1]
        # batch-grouped (rare: a kernel gradient of a depthwise conv under vmap): one at a time.
        outs = [conv_general_dilated_p.bind(index_in_dim(lhs, b, ld, keepdims=False),
                                            index_in_dim(rhs, b, rd, keepdims=False), **params)
                for b in range(B)]
        return concatenate([expand_dims(o, (0,)) for o in outs], 0), 0
    if ld is not None:
        B = aval_of(lhs).shape[ld]
        lhs = _move_to(lhs, ld, 0)
        if bgc == 1:
            new_lhs = _reshape_axis_into(0, lhs_spec[0] + 1, lhs)
            out = conv_general_dilated_p.bind(new_lhs, rhs, **params)
            return _split_axis(out, out_spec[0], B), out_spec[0]
        # lhs batch (N) holds bgc contiguous groups; keep groups major: (bgc, B, n).
        lhs = _split_axis(lhs, lhs_spec[0] + 1, bgc)          # (B, ..., bgc, n, ...)
        lhs = _reshape_axis_into(0, lhs_spec[0] + 2, lhs)     # B merged into n
        new_lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0] + 1, lhs)
        out = conv_general_dilated_p.bind(new_lhs, rhs, **params)
        return _split_axis(out, out_spec[0], B), out_spec[0]
    B = aval_of(rhs).shape[rd]
    rhs = _move_to(rhs, rd, 0)
    groups = fgc if fgc > 1 else bgc
    if groups == 1:
        new_rhs = _reshape_axis_into(0, rhs_spec[0] + 1, rhs)
        out = conv_general_dilated_p.bind(lhs, new_rhs, **params)
        return _split_axis(out, out_spec[1], B), out_spec[1]
    # Kernel output features hold `groups` contiguous blocks: merge B inside each block.
    rhs = _split_axis(rhs, rhs_spec[0] + 1, groups)           # (B, ..., G, o, ...)
    rhs = _reshape_axis_into(0, rhs_spec[0] + 2, rhs)         # (..., G, B*o, ...)
    new_rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0] + 1, rhs)
    out = conv_general_dilated_p.bind(lhs, new_rhs, **params)  # features (G, B, o)
    out = _split_axis(out, out_spec[1], groups)                # (G, B*o)
    out = _split_axis(out, out_spec[1] + 1, B)                 # (G, B, o)
    out = _move_to(out, out_spec[1] + 1, out_spec[1])          # (B, G, o)
    shape = list(aval_of(out).shape)
    f = out_spec[1]
    shape[f + 1:f + 3] = [shape[f + 1] * shape[f + 2]]
    return reshape(out, tuple(shape)), f


conv_general_dilated_p.def_batch(_conv_batch_rule)


# --- the public functions ------------------------------------------------------------------
def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None):
    """General N-d convolution (XLA's ConvGeneralDilated).

    ``padding`` is "SAME", "VALID" or a sequence of (low, high) pairs; ``lhs_dilation`` > 1
    gives a transposed (fractionally strided) convolution; ``rhs_dilation`` is atrous
    convolution; ``dimension_numbers`` is None (NCHW/OIHW/NCHW), three layout strings such as
    ("NHWC", "HWIO", "NHWC") or a ``ConvDimensionNumbers``.

    Example:
        >>> lax.conv_general_dilated(jnp.ones((2, 3, 9, 9)), jnp.ones((8, 3, 3, 3)), (2, 2),
        ...                          [(1, 1), (1, 1)]).shape
        (2, 8, 5, 5)
    """
    la, ra = aval_of(lhs), aval_of(rhs)
    dnums = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    nsp = la.ndim - 2
    window_strides = tuple(int(s) for s in window_strides)
    lhs_dilation = tuple(int(d) for d in (lhs_dilation or (1,) * nsp))
    rhs_dilation = tuple(int(d) for d in (rhs_dilation or (1,) * nsp))
    if isinstance(padding, str):
        if lhs_dilation != (1,) * nsp and padding.upper() != "VALID":
            raise TypeError("lax.conv_general_dilated: string padding with lhs_dilation is "
                            "ambiguous; give explicit (low, high) pairs")
        in_sp = [_dilate(la.shape[d], lhs_dilation[k]) for k, d in enumerate(dnums.lhs_spec[2:])]
        win = [_dilate(ra.shape[d], rhs_dilation[k]) for k, d in enumerate(dnums.rhs_spec[2:])]
        padding = padtype_to_pads(in_sp, win, window_strides, padding)
    padding = tuple(tuple(int(v) for v in p) for p in padding)
    if la.dtype != ra.dtype:
        dt = dtypes.result_type(la.dtype, ra.dtype) if hasattr(dtypes, "result_type") else None
        if dt is None:
            raise TypeError(f"lax.conv_general_dilated: dtypes differ: {la.dtype} vs {ra.dtype}")
        lhs, rhs = convert_element_type(lhs, dt), convert_element_type(rhs, dt)
    pet = dtypes.canonicalize(preferred_element_type) if preferred_element_type else None
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dnums,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=canonicalize_precision(precision, "lax.conv_general_dilated"),
        preferred_element_type=pet)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Convolution in NCHW/OIHW layout without dilation. Example: ``lax.conv(x, w, (1, 1), "SAME")``."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """``conv_general_dilated`` in NCHW/OIHW layout."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None):
    """Transposed convolution (the gradient of a strided convolution), as ``jax.lax``.

    ``padding`` is "SAME", "VALID" or explicit pairs applied to the dilated input. With
    ``transpose_kernel=True`` the kernel's spatial axes are flipped and its in/out feature axes
    swapped, so that this is exactly the transpose of ``conv_general_dilated(·, rhs)``.

    Example:
        >>> lax.conv_transpose(jnp.ones((1, 2, 4, 4)), jnp.ones((3, 2, 3, 3)), (2, 2), "SAME").shape
        (1, 3, 8, 8)
    """
    la, ra = aval_of(lhs), aval_of(rhs)
    nsp = la.ndim - 2
    dnums = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    rhs_dilation = tuple(rhs_dilation or (1,) * nsp)
    k_sizes = [ra.shape[d] for d in dnums.rhs_spec[2:]]
    if isinstance(padding, str):
        pads = []
        for k, s, d in zip(k_sizes, strides, rhs_dilation):
            kd = _dilate(k, d)
            mode = padding.upper()
            if mode == "SAME":
                # out = in * stride: total padding kd + s - 2 of the dilated input.
                total = kd + s - 2
                lo = kd - 1 if s > kd - 1 else -(-total // 2)
            elif mode == "VALID":
                total = kd + s - 2 + max(kd - s, 0)
                lo = kd - 1
            else:
                raise TypeError(f"lax.conv_transpose: padding must be 'SAME', 'VALID' or "
                                f"pairs, got {padding!r}")
            pads.append((lo, total - lo))
        padding = pads
    if transpose_kernel:
        rhs = rev(rhs, dnums.rhs_spec[2:])
        perm = list(range(ra.ndim))
        perm[dnums.rhs_spec[0]], perm[dnums.rhs_spec[1]] = (perm[dnums.rhs_spec[1]],
                                                            perm[dnums.rhs_spec[0]])
        rhs = transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * nsp, padding, lhs_dilation=strides,
                                rhs_dilation=rhs_dilation, dimension_numbers=dnums,
                                precision=precision,
                                preferred_element_type=preferred_element_type)
