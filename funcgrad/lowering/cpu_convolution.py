"""Convolutions on XLA:CPU: equivalent programs that XLA's CPU backend runs faster than its own
convolution for some shapes, chosen per equation at lowering time (so the choice never leaks
into Jaxprs or transformation rules). The measurements behind each bound are in
docs/design.md, "Lowering choices for XLA's CPU backend".

``conv_general_dilated``'s CPU lowering (registered below for platform "cpu") picks one of:
* a sum over (input feature, kernel tap) of strided input slices (``_conv_by_tap_sum``),
* padding/dilation applied to the input first when the kernel is larger than the input
  (``_conv_padded_input``),
* one convolution per output feature within batch groups (``_conv_split_batch_groups``),
* even/odd output phases as one stride-2 convolution (``_conv_by_output_phases``),
or XLA's convolution (``lax/convolution.py``'s generic lowering).

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> from funcgrad import lax
    >>> f = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "VALID")
    >>> "convolution" in funcgrad.jit(f).lower(jnp.ones((1, 1, 8, 8)), jnp.ones((2, 1, 5, 5))).as_text()
    False
"""
import itertools

import numpy as np

from funcgrad.core.values import aval_of
from funcgrad.lax import convolution, elementwise as ew, shapes


# Convolutions whose output pixels sum few products (input features per group x kernel taps)
# lower on CPU to that sum of shifted, strided input slices times kernel columns: XLA fuses it
# into one vectorized loop, several times faster than its CPU convolution for such shapes (a
# 5x5 kernel on one input channel, 3x3 depthwise convolutions).
# XLA copies the fused sum into the consumers of the convolution's output (the backward pass
# reads it several times), so the sum must also be cheap per output pixel: terms x output
# features per group at most CPU_TAP_SUM_MAX_WORK. Measured (value_and_grad, 2 cores): 1->32
# channels 3x3 on 28x28 is 25% faster as a sum, 1->64 and 3->32 are 30-60% slower, and the
# weight gradient of a 3x3 512-channel layer at 2x2 (32 terms, 512 features) 2.7x slower.
CPU_TAP_SUM_MAX_TERMS = 32
CPU_TAP_SUM_MAX_WORK = 320


def _tap_sum_applies(out_aval, lhs_aval, rhs_aval, dimension_numbers, feature_group_count,
                     batch_group_count, preferred_element_type):
    if batch_group_count != 1:
        return False
    if lhs_aval.dtype not in (np.dtype("float32"), np.dtype("float64")):
        return False
    if preferred_element_type is not None and preferred_element_type != lhs_aval.dtype:
        return False
    rhs_spec = dimension_numbers.rhs_spec
    terms = rhs_aval.shape[rhs_spec[1]] * int(np.prod([rhs_aval.shape[d] for d in rhs_spec[2:]]))
    per_group = rhs_aval.shape[rhs_spec[0]] // max(feature_group_count, 1)
    return 0 < terms <= CPU_TAP_SUM_MAX_TERMS and terms * per_group <= CPU_TAP_SUM_MAX_WORK \
        and _size(out_aval) > 0


def _size(aval):
    return int(np.prod(aval.shape, dtype=np.int64))


def _conv_by_tap_sum(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                     dimension_numbers, feature_group_count, out_shape, **_):
    """The convolution as a sum over (input feature, kernel tap) of products (traced)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    nsp = len(lhs_spec) - 2
    x = shapes.transpose(lhs, lhs_spec)                       # (N, C, *spatial)
    w = shapes.transpose(rhs, rhs_spec)                       # (O, I, *taps)
    x = shapes.pad(x, np.zeros((), aval_of(x).dtype),
                   [(0, 0, 0), (0, 0, 0)] + [(lo, hi, d - 1) for (lo, hi), d
                                             in zip(padding, lhs_dilation)])
    n, o, i = aval_of(x).shape[0], aval_of(w).shape[0], aval_of(w).shape[1]
    g = feature_group_count
    og, sp = o // g, aval_of(x).shape[2:]
    taps = aval_of(w).shape[2:]
    out_sp = [out_shape[d] for d in out_spec[2:]]
    x = shapes.reshape(x, (n, g, i) + tuple(sp))
    w = shapes.reshape(w, (g, og, i) + tuple(taps))
    full = (n, g, og) + tuple(out_sp)
    acc = None
    for ci in range(i):
        for tap in itertools.product(*[range(t) for t in taps]):
            start = [0, 0, ci] + [t * d for t, d in zip(tap, rhs_dilation)]
            limit = [n, g, ci + 1] + [b + (m - 1) * st + 1 for b, m, st
                                      in zip(start[3:], out_sp, window_strides)]
            xs = shapes.slice(x, start, limit, [1, 1, 1] + list(window_strides))
            xs = shapes.broadcast_in_dim(shapes.reshape(xs, (n, g) + tuple(out_sp)), full,
                                         (0, 1) + tuple(range(3, 3 + nsp)))
            wk = shapes.slice(w, [0, 0, ci] + list(tap),
                              [g, og, ci + 1] + [t + 1 for t in tap])
            wk = shapes.broadcast_in_dim(shapes.reshape(wk, (g, og)), full, (1, 2))
            term = ew.mul(xs, wk)
            acc = term if acc is None else ew.add(acc, term)
    out = shapes.reshape(acc, (n, o) + tuple(out_sp))
    return shapes.transpose(out, tuple(int(a) for a in np.argsort(out_spec)))


def _kernel_exceeds_input(lhs_aval, rhs_aval, rhs_dilation, dimension_numbers):
    """Whether a (dilated) kernel is larger than the input as stored (before padding and input
    dilation) along some spatial axis: XLA:CPU then swaps the operands into a batch-minor
    layout that it runs with its naive loop emitter, 10-20x slower (a 3x3 kernel over
    ResNet's 2x2 last stage, or over the 2x2 input gradient of a stride-2 layer)."""
    lhs_spec, rhs_spec, _ = dimension_numbers
    for dl, dr, b in zip(lhs_spec[2:], rhs_spec[2:], rhs_dilation):
        if (rhs_aval.shape[dr] - 1) * b + 1 > lhs_aval.shape[dl]:
            return True
    return False


def _conv_padded_input(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                       dimension_numbers, feature_group_count, batch_group_count, precision=None,
                       preferred_element_type, out_shape=None):
    """The convolution with its padding and input dilation applied to the input first
    (traced), so the convolution proper has no padding."""
    dtype = aval_of(lhs).dtype
    # Zeros are concatenated in rather than padded: XLA folds a pad of a convolution's input
    # back into the convolution's padding and input dilation.
    for d, a in zip(dimension_numbers.lhs_spec[2:], lhs_dilation):
        if a > 1 and aval_of(lhs).shape[d] > 1:
            shape = list(aval_of(lhs).shape)
            n = shape[d]
            col = shapes.expand_dims(lhs, (d + 1,))
            zeros = shapes.full(tuple(shape[:d + 1]) + (a - 1,) + tuple(shape[d + 1:]),
                                np.zeros((), dtype), dtype)
            spread = shapes.concatenate([col, zeros], d + 1)            # (..., n, a, ...)
            spread = shapes.reshape(spread, tuple(shape[:d]) + (n * a,) + tuple(shape[d + 1:]))
            lhs = shapes.slice_in_dim(spread, 0, (n - 1) * a + 1, axis=d)
    for d, (lo, hi) in zip(dimension_numbers.lhs_spec[2:], padding):
        parts = []
        for n in (lo, hi):
            shape = list(aval_of(lhs).shape)
            shape[d] = n
            parts.append(shapes.full(tuple(shape), np.zeros((), dtype), dtype) if n else None)
        pieces = [p for p in (parts[0], lhs, parts[1]) if p is not None]
        if len(pieces) > 1:
            lhs = shapes.concatenate(pieces, d)
    nsp = len(padding)
    return convolution.conv_general_dilated_p.bind(
        lhs, rhs, window_strides=tuple(window_strides), padding=((0, 0),) * nsp,
        lhs_dilation=(1,) * nsp, rhs_dilation=tuple(rhs_dilation),
        dimension_numbers=dimension_numbers, feature_group_count=feature_group_count,
        batch_group_count=batch_group_count, precision=precision,
        preferred_element_type=preferred_element_type)


def _conv_split_batch_groups(lhs, rhs, *, dimension_numbers, batch_group_count,
                             out_shape=None, **params):
    """A batch-grouped convolution with M > 1 output features per group as M convolutions
    with one output feature per group, interleaved back (traced). XLA:CPU runs only the
    one-feature-per-group form with its convolution kernels, the other with a naive loop:
    1.7 s against 6 ms for the gradient of a 3x3 depthwise layer with channel multiplier 2
    (64->128 channels, 28x28, batch 8)."""
    _, rhs_spec, out_spec = dimension_numbers
    fd = rhs_spec[0]
    o = aval_of(rhs).shape[fd]
    m = o // batch_group_count
    outs = []
    for k in range(m):
        start = [0] * aval_of(rhs).ndim
        start[fd] = k
        strides = [1] * aval_of(rhs).ndim
        strides[fd] = m
        rk = shapes.slice(rhs, start, list(aval_of(rhs).shape), strides)
        outs.append(convolution.conv_general_dilated_p.bind(
            lhs, rk, dimension_numbers=dimension_numbers,
            batch_group_count=batch_group_count, **params))
    d = out_spec[1]
    both = shapes.concatenate([shapes.expand_dims(y, (d + 1,)) for y in outs], d + 1)
    shape = list(aval_of(outs[0]).shape)
    shape[d] = o
    return shapes.reshape(both, tuple(shape))


# XLA:CPU's convolution vectorizes over output features, so with few of them (LeNet's
# second convolution has 6 input channels, so its input gradient has 6 output features) most
# of each vector is idle. Splitting every output axis into its 2 phases (even and odd
# positions) makes 2**d times more output features at a stride of 2, computed from a kernel
# one tap larger per axis; the phases are interleaved back after.
CPU_PHASES_MAX_FEATURES = 8


def _phases_apply(out_aval, lhs_aval, rhs_aval, params):
    dn = params["dimension_numbers"]
    if params["feature_group_count"] != 1 or params["batch_group_count"] != 1:
        return False
    if lhs_aval.dtype not in (np.dtype("float32"), np.dtype("float64")):
        return False
    if any(s != 1 for s in tuple(params["window_strides"]) + tuple(params["lhs_dilation"])
           + tuple(params["rhs_dilation"])):
        return False
    if any(lo < 0 or hi < 0 for lo, hi in params["padding"]):
        return False
    out_sp = [out_aval.shape[d] for d in dn.out_spec[2:]]
    taps = [rhs_aval.shape[d] for d in dn.rhs_spec[2:]]
    # Axes with 2 or more outputs are split, and their kernel must not be larger than the
    # output: a weight gradient's "kernel" is the incoming gradient, whose 2**d padded copies
    # cost more than the split saves (LeNet's conv1 weight gradient got slower).
    split = [(t, n) for t, n in zip(taps, out_sp) if n >= 2]
    return rhs_aval.shape[dn.rhs_spec[0]] <= CPU_PHASES_MAX_FEATURES and bool(split) and \
        all(t <= n for t, n in split) and _size(out_aval) > 0


def _conv_by_output_phases(lhs, rhs, *, padding, dimension_numbers, precision=None,
                           preferred_element_type, out_shape, **_):
    """A stride-1 convolution with few output features as a stride-2 convolution with
    2**d times as many, one per output phase, interleaved back (traced)."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    out_sp = [out_shape[d] for d in out_spec[2:]]
    split = [2 if n >= 2 else 1 for n in out_sp]                 # phases per output axis
    n_ph = [-(-n // s) for n, s in zip(out_sp, split)]           # outputs per phase
    kernels = []
    for phase in itertools.product(*[range(s) for s in split]):
        cfg = [(0, 0, 0)] * aval_of(rhs).ndim
        for d, p, s in zip(rhs_spec[2:], phase, split):
            cfg[d] = (p, s - 1 - p, 0)
        kernels.append(shapes.pad(rhs, np.zeros((), aval_of(rhs).dtype), cfg))
    kernel = shapes.concatenate(kernels, rhs_spec[0])            # phase-major features
    # one more zero at the high end of an axis with an odd number of outputs
    pads = [(lo, hi + s * m - n) for (lo, hi), s, m, n in zip(padding, split, n_ph, out_sp)]
    nsp = len(out_sp)
    y = convolution.conv_general_dilated_p.bind(
        lhs, kernel, window_strides=tuple(split), padding=tuple(pads),
        lhs_dilation=(1,) * nsp, rhs_dilation=(1,) * nsp, dimension_numbers=dimension_numbers,
        feature_group_count=1, batch_group_count=1, precision=precision,
        preferred_element_type=preferred_element_type)
    y = shapes.transpose(y, out_spec)                            # (N, phases*O, *n_ph)
    n, o = aval_of(y).shape[0], out_shape[out_spec[1]]
    y = shapes.reshape(y, (n,) + tuple(split) + (o,) + tuple(n_ph))
    perm = [0, 1 + nsp] + [a for k in range(nsp) for a in (2 + nsp + k, 1 + k)]
    y = shapes.reshape(shapes.transpose(y, perm),
                       (n, o) + tuple(m * s for m, s in zip(n_ph, split)))
    y = shapes.slice(y, [0] * (nsp + 2), [n, o] + out_sp)
    return shapes.transpose(y, tuple(int(a) for a in np.argsort(out_spec)))


def _cpu_rewrite(ctx, params):
    """The lax-level rewrite (traced, then inlined) a convolution lowers through on CPU, or
    None for XLA's own convolution."""
    lhs_aval, rhs_aval = ctx.avals_in
    dn, groups = params["dimension_numbers"], params["batch_group_count"]
    if groups > 1 and rhs_aval.shape[dn.rhs_spec[0]] > groups:
        return _conv_split_batch_groups
    if all(lo >= 0 and hi >= 0 for lo, hi in params["padding"]) and _kernel_exceeds_input(
            lhs_aval, rhs_aval, params["rhs_dilation"], dn):
        return _conv_padded_input
    if _tap_sum_applies(ctx.avals_out[0], lhs_aval, rhs_aval, dn,
                        params["feature_group_count"], groups, params["preferred_element_type"]):
        return _conv_by_tap_sum
    if _phases_apply(ctx.avals_out[0], lhs_aval, rhs_aval, params):
        return _conv_by_output_phases
    return None


def _conv_lowering_cpu(ctx, lhs, rhs, **params):
    rule = _cpu_rewrite(ctx, params)
    if rule is None:
        return convolution._conv_lowering(ctx, lhs, rhs, **params)
    out_shape = ctx.avals_out[0].shape
    return ctx.lower_fun(lambda a, b: [rule(a, b, out_shape=out_shape, **params)],
                         (lhs, rhs), rule.__name__)[0]


convolution.conv_general_dilated_p.def_lowering(_conv_lowering_cpu, platform="cpu")
