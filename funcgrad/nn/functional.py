"""PyTorch's ``torch.nn.functional`` on funcgrad arrays: layers, activations and losses.

Layouts and formulas follow PyTorch (NCHW activations, (out, in/groups, kh, kw) convolution
weights, unbiased running variance in batch norm, ``reduction="mean"|"sum"|"none"``), so
PyTorch code ports by changing imports. Functions never mutate their inputs: where PyTorch
updates running statistics in place, ``batch_norm`` here returns the new statistics when asked
(the ``BatchNorm`` modules do the in-place part).

Example:
    >>> import funcgrad.nn.functional as F
    >>> logits, labels = jnp.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]]), jnp.array([0, 1])
    >>> F.cross_entropy(logits, labels, label_smoothing=0.1)
    Array(0.47731203, dtype=float32)

Note ``F.gelu`` (and ``nn.GELU``) default to PyTorch's exact erf form (``approximate="none"``),
while JAX's ``funcgrad.nn.gelu`` defaults to the tanh approximation (``approximate=True``):

    >>> x = jnp.array([-1.0, 0.5])
    >>> F.gelu(x)                                      # exact, x * Phi(x)
    Array([-0.15865526,  0.34573123], dtype=float32)
    >>> funcgrad.nn.gelu(x)                            # tanh form
    Array([-0.15880796,  0.345714  ], dtype=float32)
    >>> bool(jnp.all(F.gelu(x) == funcgrad.nn.gelu(x, approximate=False)))
    True
    >>> bool(jnp.all(F.gelu(x, approximate="tanh") == funcgrad.nn.gelu(x)))
    True
"""
import functools
import inspect
import math
import warnings

import numpy as np

import funcgrad.numpy as jnp
from funcgrad import debug, lax
from funcgrad.core.interpreters import Tracer
from funcgrad.nn import jax_functions as _fn
from funcgrad.nn.jax_functions import (elu, log_sigmoid,  # noqa
                                       mish, relu, relu6, selu, silu, soft_sign as softsign)
from funcgrad.lowering.eager_jit import jit_when_eager_in

logsigmoid = log_sigmoid


def _tuple(v, n, name):
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(f"{name} must be an int or a tuple of {n} ints, got {v!r}")
        return tuple(int(x) for x in v)
    return (int(v),) * n


# --- activations -----------------------------------------------------------------------------
def sigmoid(x):
    """Logistic sigmoid. Example: ``F.sigmoid(x)``."""
    return _fn.sigmoid(x)


def tanh(x):
    """Hyperbolic tangent. Example: ``F.tanh(x)``."""
    return jnp.tanh(x)


def gelu(x, approximate="none"):
    """GELU as PyTorch: exact ``x * Phi(x)`` by default (``approximate="none"``, through erf);
    ``approximate="tanh"`` for the tanh form. Unlike ``funcgrad.nn.gelu`` (JAX's), whose default
    is the tanh form.

    Example:
        >>> x = jnp.array([-1.0, 0.5, 2.0])
        >>> F.gelu(x)
        Array([-0.15865526,  0.34573123,  1.9544997 ], dtype=float32)
        >>> F.gelu(x, approximate="tanh")
        Array([-0.15880796,  0.345714  ,  1.9545977 ], dtype=float32)
    """
    if approximate not in ("none", "tanh"):
        raise ValueError(f"F.gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _fn.gelu(x, approximate=approximate == "tanh")


def leaky_relu(x, negative_slope=0.01, inplace=False):
    """Leaky ReLU. Example: ``F.leaky_relu(x, 0.2)``."""
    return _fn.leaky_relu(x, negative_slope)


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above ``threshold`` (as PyTorch). Example: ``F.softplus(x)``."""
    x = jnp.asarray(x)
    bx = x * beta
    return jnp.where(bx > threshold, x, _fn.softplus(bx) / beta)


def hardswish(x):
    """x * relu6(x + 3) / 6. Example: ``F.hardswish(x)``."""
    return _fn.hard_silu(x)


def hardsigmoid(x):
    """relu6(x + 3) / 6. Example: ``F.hardsigmoid(x)``."""
    return _fn.hard_sigmoid(x)


def softmax(x, dim=-1, dtype=None):
    """Softmax along ``dim``. Example: ``F.softmax(logits, dim=1)``."""
    x = jnp.asarray(x)
    if dtype is not None:
        x = x.astype(dtype)
    return _fn.softmax(x, axis=dim)


def log_softmax(x, dim=-1, dtype=None):
    """Log-softmax along ``dim``. Example: ``F.log_softmax(logits, dim=1)``."""
    x = jnp.asarray(x)
    if dtype is not None:
        x = x.astype(dtype)
    return _fn.log_softmax(x, axis=dim)


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """x / max(||x||_p, eps) along ``dim``. Example: ``F.normalize(x, dim=-1)``."""
    x = jnp.asarray(x)
    norm = jnp.sum(jnp.abs(x) ** p, axis=dim, keepdims=True) ** (1.0 / p)
    return x / jnp.maximum(norm, eps)


def celu(input, alpha=1.0, inplace=False):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    Example:
        >>> F.celu(jnp.array([-1.0, 2.0]), alpha=0.5)
        Array([-0.43233237,  2.        ], dtype=float32)
    """
    return _fn.celu(input, alpha)


def glu(input, dim=-1):
    """Gated linear unit: a * sigmoid(b) for the two halves a, b of axis ``dim``.

    Example:
        >>> F.glu(jnp.ones((2, 6)), dim=1).shape
        (2, 3)
    """
    x = jnp.asarray(input)
    if x.ndim == 0:
        raise ValueError("F.glu: glu does not support scalars (it halves an axis)")
    n = x.shape[dim]
    if n % 2:
        raise ValueError(f"F.glu: halving dimension must be even, but dimension {dim} of "
                         f"shape {tuple(x.shape)} is size {n}")
    return _fn.glu(x, dim)


def tanhshrink(input):
    """x - tanh(x). Example: ``F.tanhshrink(x)``."""
    x = jnp.asarray(input)
    return x - jnp.tanh(x)


def threshold(input, threshold, value, inplace=False):
    """x where x > ``threshold``, else ``value`` (a NaN stays NaN, as PyTorch).

    Example:
        >>> F.threshold(jnp.array([0.5, 2.0]), 1.0, -1.0)
        Array([-1.,  2.], dtype=float32)
    """
    x = jnp.asarray(input)
    return jnp.where(x <= threshold, jnp.asarray(value, x.dtype), x)


def _check_lambd(lambd, name):
    if lambd < 0:
        raise ValueError(f"F.{name}: lambd must be greater or equal to 0, got {lambd}")


def softshrink(input, lambd=0.5):
    """x - lambd above ``lambd``, x + lambd below ``-lambd``, 0 between.

    Example:
        >>> F.softshrink(jnp.array([-1.0, 0.2, 1.0]), 0.5)
        Array([-0.5,  0. ,  0.5], dtype=float32)
    """
    _check_lambd(lambd, "softshrink")
    x = jnp.asarray(input)
    return jnp.where(x > lambd, x - lambd, jnp.where(x < -lambd, x + lambd, x * 0))


def hardshrink(input, lambd=0.5):
    """x where |x| > ``lambd``, else 0.

    Example:
        >>> F.hardshrink(jnp.array([-1.0, 0.2, 1.0]), 0.5)
        Array([-1.,  0.,  1.], dtype=float32)
    """
    _check_lambd(lambd, "hardshrink")
    x = jnp.asarray(input)
    return jnp.where((x >= -lambd) & (x <= lambd), jnp.zeros((), x.dtype), x)


# --- linear and convolution ------------------------------------------------------------------
def linear(x, weight, bias=None):
    """x @ weight.T + bias with weight of shape (out, in). Example: ``F.linear(x, w, b)``."""
    x = jnp.asarray(x)
    y = lax.dot_general(x, weight, (((x.ndim - 1,), (1,)), ((), ())))
    return _add_bias(y, bias) if bias is not None else y


def _add_bias(y, bias):
    """``y + bias`` in the product's floating dtype: the bias is part of the product (PyTorch's
    addmm), so under ``autocast`` a bfloat16 product stays bfloat16 rather than promoting. The
    bias is broadcast before the cast, so its gradient is summed in its own (float32) dtype."""
    bias = jnp.asarray(bias)
    if bias.dtype != y.dtype and jnp.issubdtype(bias.dtype, jnp.floating) \
            and jnp.issubdtype(y.dtype, jnp.floating):
        bias = jnp.broadcast_to(bias, y.shape).astype(y.dtype)
    return y + bias


def bilinear(x1, x2, weight, bias=None):
    """y_k = x1 W_k x2 + b_k with weight (out, in1, in2). Example: ``F.bilinear(a, b, w)``."""
    y = jnp.einsum("...i,kij,...j->...k", x1, weight, x2)
    return _add_bias(y, bias) if bias is not None else y


def _conv_padding(padding, k, dilation, stride, n, fname):
    if isinstance(padding, str):
        mode = padding.lower()
        if mode == "valid":
            return [(0, 0)] * n
        if mode == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{fname}: padding='same' is not supported for strided "
                                 f"convolutions (as in PyTorch)")
            pads = []
            for kk, d in zip(k, dilation):
                total = d * (kk - 1)
                pads.append((total // 2, total - total // 2))
            return pads
        raise ValueError(f"{fname}: padding must be 'same', 'valid', an int or a tuple, got "
                         f"{padding!r}")
    p = _tuple(padding, n, f"{fname} padding")
    return [(v, v) for v in p]


def _conv_channels_last(x, w, stride, pads, lhs_dilation, rhs_dilation, groups):
    """An NC* x OI* convolution computed in channels-last layout (N*C x *IO): XLA's CPU
    convolutions (and their gradients) run about twice as fast that way; the transposes at
    the boundaries are cheap and often fused away."""
    n = x.ndim - 2
    to_last = (0,) + tuple(range(2, 2 + n)) + (1,)
    xt = jnp.transpose(x, to_last)
    wt = jnp.transpose(w, tuple(range(2, 2 + n)) + (1, 0))
    sp = tuple(range(1, 1 + n))
    dn = lax.ConvDimensionNumbers((0, n + 1) + sp, (n + 1, n) + tuple(range(n)), (0, n + 1) + sp)
    y = lax.conv_general_dilated(xt, wt, stride, pads, lhs_dilation=lhs_dilation,
                                 rhs_dilation=rhs_dilation, dimension_numbers=dn,
                                 feature_group_count=groups)
    return jnp.transpose(y, (0, n + 1) + sp)


# 1x1 convolutions with at least this many output positions per example run as matrix
# products (``_conv_pointwise``); below it the per-example weight-gradient products lose.
POINTWISE_MIN_POSITIONS = 256


def _conv_pointwise(x, w, stride):
    """A 1x1 convolution (no padding, one group) as a matrix product per example over the
    channel axis, in NC* layout: no layout transposes, and XLA's matrix product kernels run
    it and its gradients 1.5-6x faster than its convolution kernels when each example has at
    least ``POINTWISE_MIN_POSITIONS`` output positions (with fewer, the weight gradient's
    per-example products lose: ``_convnd`` then uses the convolution). Measured in
    ``bench/conv_kernels.py``."""
    if any(s != 1 for s in stride):
        x = x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)]
    sp = x.shape[2:]
    o, c = w.shape[0], w.shape[1]
    xb = jnp.reshape(x, (x.shape[0], c, -1))
    wb = lax.broadcast_in_dim(jnp.reshape(w, (o, c)), (x.shape[0], o, c), (1, 2))
    y = lax.dot_general(wb, xb, (((2,), (1,)), ((0,), (0,))))
    return jnp.reshape(y, (x.shape[0], o) + tuple(sp))


def _convnd(n, fname, x, weight, bias, stride, padding, dilation, groups):
    x = jnp.asarray(x)
    unbatched = x.ndim == n + 1
    if unbatched:
        x = x[None]
    if x.ndim != n + 2:
        raise ValueError(f"{fname}: expected a {n + 2}-d (batched) or {n + 1}-d input, got "
                         f"shape {x.shape}")
    stride = _tuple(stride, n, f"{fname} stride")
    dilation = _tuple(dilation, n, f"{fname} dilation")
    k = tuple(weight.shape[2:])
    if x.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"{fname}: input has {x.shape[1]} channels but weight {weight.shape} "
                         f"with groups={groups} expects {weight.shape[1] * groups}")
    pads = _conv_padding(padding, k, dilation, stride, n, fname)
    if all(kk == 1 for kk in k) and groups == 1 and all(p == (0, 0) for p in pads) \
            and np.prod([-(-d // s) for d, s in zip(x.shape[2:], stride)]) \
            >= POINTWISE_MIN_POSITIONS:
        y = _conv_pointwise(x, weight, stride)
    else:
        y = _conv_channels_last(x, weight, stride, pads, (1,) * n, dilation, groups)
    if bias is not None:
        y = _add_bias(y, jnp.reshape(bias, (1, -1) + (1,) * n))
    return y[0] if unbatched else y


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d convolution, NCL input, (out, in/groups, k) weight. Example: ``F.conv1d(x, w, padding=1)``."""
    return _convnd(1, "F.conv1d", x, weight, bias, stride, padding, dilation, groups)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d convolution, NCHW input, (out, in/groups, kh, kw) weight.

    Example:
        >>> F.conv2d(jnp.ones((1, 3, 8, 8)), jnp.ones((4, 3, 3, 3)), padding="same").shape
        (1, 4, 8, 8)
    """
    return _convnd(2, "F.conv2d", x, weight, bias, stride, padding, dilation, groups)


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d convolution, NCDHW input. Example: ``F.conv3d(x, w)``."""
    return _convnd(3, "F.conv3d", x, weight, bias, stride, padding, dilation, groups)


def _conv_transposend(n, fname, x, weight, bias, stride, padding, output_padding, groups,
                      dilation):
    x = jnp.asarray(x)
    unbatched = x.ndim == n + 1
    if unbatched:
        x = x[None]
    stride = _tuple(stride, n, f"{fname} stride")
    padding = _tuple(padding, n, f"{fname} padding")
    output_padding = _tuple(output_padding, n, f"{fname} output_padding")
    dilation = _tuple(dilation, n, f"{fname} dilation")
    cin, cout_g = weight.shape[0], weight.shape[1]
    if x.shape[1] != cin:
        raise ValueError(f"{fname}: input has {x.shape[1]} channels, weight {weight.shape} "
                         f"expects {cin}")
    k = tuple(weight.shape[2:])
    # PyTorch's weight is (in, out/groups, *k): regroup to (out, in/groups, *k) and flip.
    w = jnp.reshape(weight, (groups, cin // groups, cout_g) + k)
    w = jnp.swapaxes(w, 1, 2)
    w = jnp.reshape(w, (groups * cout_g, cin // groups) + k)
    w = lax.rev(w, tuple(range(2, 2 + n)))
    pads = [(d * (kk - 1) - p, d * (kk - 1) - p + op)
            for kk, d, p, op in zip(k, dilation, padding, output_padding)]
    y = _conv_channels_last(x, w, (1,) * n, pads, stride, dilation, groups)
    if bias is not None:
        y = _add_bias(y, jnp.reshape(bias, (1, -1) + (1,) * n))
    return y[0] if unbatched else y


def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """1-d transposed convolution, weight (in, out/groups, k). Example: ``F.conv_transpose1d(x, w, stride=2)``."""
    return _conv_transposend(1, "F.conv_transpose1d", x, weight, bias, stride, padding,
                             output_padding, groups, dilation)


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """2-d transposed convolution, weight (in, out/groups, kh, kw) as PyTorch.

    Example:
        >>> F.conv_transpose2d(jnp.ones((1, 4, 5, 5)), jnp.ones((4, 2, 3, 3)), stride=2).shape
        (1, 2, 11, 11)
    """
    return _conv_transposend(2, "F.conv_transpose2d", x, weight, bias, stride, padding,
                             output_padding, groups, dilation)


# --- pooling ---------------------------------------------------------------------------------
def _pool_geometry(n_in, k, s, p, d, ceil_mode):
    """Output size and (low, high) padding of one spatial axis, as PyTorch computes them."""
    eff = d * (k - 1) + 1
    num = n_in + 2 * p - eff
    out = (-(-num // s) if ceil_mode else num // s) + 1
    if ceil_mode and (out - 1) * s >= n_in + p:
        out -= 1
    hi = max((out - 1) * s + eff - n_in - p, 0)
    return out, (p, hi)


def _prep_pool(n, fname, x, kernel_size, stride, padding, dilation, ceil_mode):
    x = jnp.asarray(x)
    unbatched = x.ndim == n + 1
    if unbatched:
        x = x[None]
    if x.ndim != n + 2:
        raise ValueError(f"{fname}: expected a {n + 2}-d or {n + 1}-d input, got {x.shape}")
    k = _tuple(kernel_size, n, f"{fname} kernel_size")
    s = _tuple(stride if stride is not None and stride != () else kernel_size, n,
               f"{fname} stride")
    p = _tuple(padding, n, f"{fname} padding")
    d = _tuple(dilation, n, f"{fname} dilation")
    for kk, pp in zip(k, p):
        if pp > kk // 2:
            raise ValueError(f"{fname}: padding {p} must be at most half of kernel_size {k}")
    geo = [_pool_geometry(x.shape[2 + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(n)]
    return x, unbatched, k, s, p, d, geo


def _max_poolnd(n, fname, x, kernel_size, stride, padding, dilation, ceil_mode,
                return_indices):
    x, unbatched, k, s, p, d, geo = _prep_pool(n, fname, x, kernel_size, stride, padding,
                                               dilation, ceil_mode)
    pads = ((0, 0), (0, 0)) + tuple(g[1] for g in geo)
    y = lax.reduce_window_max(x, (1, 1) + k, (1, 1) + s, pads, None, (1, 1) + d)
    if return_indices:
        idx = _max_pool_indices(x, y, k, s, pads, d)
        return (y[0], idx[0]) if unbatched else (y, idx)
    return y[0] if unbatched else y


def _max_pool_indices(x, y, k, s, pads, d):
    """Flat spatial index (PyTorch's convention) of each window's first maximum."""
    import itertools
    n = len(k)
    spatial = x.shape[2:]
    flat = np.arange(int(np.prod(spatial)), dtype=np.int32).reshape(spatial)
    best = None
    best_idx = None
    xp = jnp.pad(x, [(0, 0), (0, 0)] + [tuple(pp) for pp in pads[2:]],
                 constant_values=-jnp.inf)
    fp = np.pad(flat, [tuple(pp) for pp in pads[2:]], constant_values=-1)
    out_sp = y.shape[2:]
    for offs in itertools.product(*[range(kk) for kk in k]):
        sl = tuple(slice(o * dd, o * dd + (m - 1) * ss + 1, ss)
                   for o, dd, m, ss in zip(offs, d, out_sp, s))
        v = xp[(slice(None), slice(None)) + sl]
        iv = jnp.asarray(fp[sl])
        if best is None:
            best, best_idx = v, jnp.broadcast_to(iv, v.shape)
        else:
            better = v > best
            best = jnp.where(better, v, best)
            best_idx = jnp.where(better, iv, best_idx)
    del n
    return best_idx


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-d max pooling. Example: ``F.max_pool1d(x, 2)``."""
    return _max_poolnd(1, "F.max_pool1d", x, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices)


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-d max pooling (padding counts as -inf).

    Example:
        >>> F.max_pool2d(jnp.ones((1, 1, 4, 4)), 2).shape
        (1, 1, 2, 2)
    """
    return _max_poolnd(2, "F.max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices)


def max_pool3d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-d max pooling. Example: ``F.max_pool3d(x, 2)``."""
    return _max_poolnd(3, "F.max_pool3d", x, kernel_size, stride, padding, dilation, ceil_mode,
                       return_indices)


def _window_counts(n_in, k, s, p, out, include_pad):
    counts = np.zeros(out, np.float64)
    lo, hi = (-p, n_in + p) if include_pad else (0, n_in)
    for i in range(out):
        start = i * s - p
        end = start + k
        counts[i] = max(min(end, hi) - max(start, lo), 0)
    return counts


def _avg_poolnd(n, fname, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    x, unbatched, k, s, p, d, geo = _prep_pool(n, fname, x, kernel_size, stride, padding, 1,
                                               ceil_mode)
    pads = ((0, 0), (0, 0)) + tuple(g[1] for g in geo)
    y = lax.reduce_window_sum(x, (1, 1) + k, (1, 1) + s, pads)
    if divisor_override:
        y = y / float(divisor_override)
    else:
        div = np.ones((), np.float64)
        for i in range(n):
            c = _window_counts(x.shape[2 + i], k[i], s[i], p[i], geo[i][0], count_include_pad)
            div = np.multiply.outer(div, c)
        y = y / jnp.asarray(div.astype(np.dtype(x.dtype)))
    return y[0] if unbatched else y


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-d average pooling. Example: ``F.avg_pool1d(x, 2)``."""
    return _avg_poolnd(1, "F.avg_pool1d", x, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, None)


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """2-d average pooling with PyTorch's divisor rules (``count_include_pad``).

    Example:
        >>> F.avg_pool2d(jnp.arange(16.0).reshape(1, 1, 4, 4), 2)
        Array([[[[ 2.5,  4.5],
                 [10.5, 12.5]]]], dtype=float32)
    """
    return _avg_poolnd(2, "F.avg_pool2d", x, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override)


def avg_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """3-d average pooling of (N, C, D, H, W) or (C, D, H, W), PyTorch's divisor rules.

    Example:
        >>> F.avg_pool3d(jnp.ones((1, 2, 4, 4, 4)), 2).shape
        (1, 2, 2, 2, 2)
    """
    return _avg_poolnd(3, "F.avg_pool3d", x, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override)


# --- sliding blocks (im2col) -------------------------------------------------------------------
def _block_geometry(fname, spatial, kernel_size, dilation, padding, stride):
    """(k, d, p, s, number of blocks per axis) of a 2-d sliding-block operation."""
    k = _tuple(kernel_size, 2, f"{fname} kernel_size")
    d = _tuple(dilation, 2, f"{fname} dilation")
    p = _tuple(padding, 2, f"{fname} padding")
    s = _tuple(stride, 2, f"{fname} stride")
    if min(k) <= 0 or min(d) <= 0 or min(s) <= 0 or min(p) < 0:
        raise ValueError(f"{fname}: kernel_size {k}, dilation {d} and stride {s} must be "
                         f"positive and padding {p} non-negative")
    blocks = tuple((n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
                   for n, kk, dd, pp, ss in zip(spatial, k, d, p, s))
    if min(blocks) <= 0:
        raise ValueError(f"{fname}: spatial size {tuple(spatial)} with padding {p} is smaller "
                         f"than the dilated kernel (kernel_size {k}, dilation {d}): no "
                         f"sliding block fits")
    return k, d, p, s, blocks


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Extract sliding blocks (im2col): (N, C, H, W) -> (N, C * kh * kw, L), L the number of
    blocks, channel index ``c * kh * kw + i * kw + j`` as PyTorch; unbatched (C, H, W) inputs
    give (C * kh * kw, L).

    Example:
        >>> F.unfold(jnp.ones((2, 3, 5, 5)), kernel_size=2, stride=1).shape
        (2, 12, 16)
    """
    x = jnp.asarray(input)
    if x.ndim not in (3, 4):
        raise ValueError(f"F.unfold: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got "
                         f"shape {tuple(x.shape)}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    n, c = x.shape[:2]
    k, d, p, s, blocks = _block_geometry("F.unfold", x.shape[2:], kernel_size, dilation,
                                         padding, stride)
    if any(p):
        x = jnp.pad(x, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
    cols = []
    for i in range(k[0]):
        for j in range(k[1]):
            lo = (0, 0, i * d[0], j * d[1])
            hi = (n, c, lo[2] + (blocks[0] - 1) * s[0] + 1, lo[3] + (blocks[1] - 1) * s[1] + 1)
            cols.append(lax.slice(x, lo, hi, (1, 1) + s))
    y = jnp.reshape(jnp.stack(cols, axis=2), (n, c * k[0] * k[1], blocks[0] * blocks[1]))
    return y[0] if unbatched else y


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sum sliding blocks back into an image (col2im), the adjoint of ``unfold``:
    (N, C * kh * kw, L) -> (N, C, H, W) with (H, W) = ``output_size``; overlapping entries
    add up. Unbatched (C * kh * kw, L) inputs give (C, H, W).

    Example:
        >>> F.fold(jnp.ones((1, 4, 9)), output_size=(4, 4), kernel_size=2).shape
        (1, 1, 4, 4)
    """
    x = jnp.asarray(input)
    if x.ndim not in (2, 3):
        raise ValueError(f"F.fold: expected a 2-D (C * kh * kw, L) or 3-D (N, C * kh * kw, L) "
                         f"input, got shape {tuple(x.shape)}")
    unbatched = x.ndim == 2
    if unbatched:
        x = x[None]
    out = _tuple(output_size, 2, "F.fold output_size")
    k, d, p, s, blocks = _block_geometry("F.fold", out, kernel_size, dilation, padding,
                                         stride)
    n, ck, nb = x.shape
    if ck % (k[0] * k[1]):
        raise ValueError(f"F.fold: expected size of input's dimension 1 ({ck}, input shape "
                         f"{tuple(jnp.shape(input))}) to be divisible by the product of "
                         f"kernel_size {k}")
    if nb != blocks[0] * blocks[1]:
        raise ValueError(f"F.fold: given output_size={out}, kernel_size={k}, dilation={d}, "
                         f"padding={p}, stride={s}, expected size of input's last dimension to "
                         f"match the number of sliding blocks {blocks[0]} * {blocks[1]} = "
                         f"{blocks[0] * blocks[1]}, but got input shape "
                         f"{tuple(jnp.shape(input))}")
    c = ck // (k[0] * k[1])
    x = jnp.reshape(x, (n, c, k[0], k[1], blocks[0], blocks[1]))
    ph, pw = out[0] + 2 * p[0], out[1] + 2 * p[1]
    total = None
    for i in range(k[0]):
        for j in range(k[1]):
            # place block (i, j) at rows i*d + b*s: interior padding spaces the blocks
            cfg = [(0, 0, 0), (0, 0, 0)]
            for lo, size, full, st in ((i * d[0], blocks[0], ph, s[0]),
                                       (j * d[1], blocks[1], pw, s[1])):
                cfg.append((lo, full - lo - (size - 1) * st - 1, st - 1))
            placed = lax.pad(x[:, :, i, j], jnp.zeros((), x.dtype), cfg)
            total = placed if total is None else total + placed
    y = total[:, :, p[0]:p[0] + out[0], p[1]:p[1] + out[1]]
    return y[0] if unbatched else y


def _adaptive_matrix(n_in, n_out, dtype):
    m = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        start = (i * n_in) // n_out
        end = -(-((i + 1) * n_in) // n_out)
        m[i, start:end] = 1.0 / (end - start)
    return m.astype(dtype)


def adaptive_avg_pool1d(x, output_size):
    """Average pooling to ``output_size`` bins (PyTorch's bin edges). Example: ``F.adaptive_avg_pool1d(x, 4)``."""
    x = jnp.asarray(x)
    (o,) = _tuple(output_size, 1, "output_size")
    m = _adaptive_matrix(x.shape[-1], o, np.dtype(x.dtype))
    return jnp.einsum("...l,ol->...o", x, m)


def adaptive_avg_pool2d(x, output_size):
    """Average pooling to an ``output_size`` grid (None keeps that axis).

    Example:
        >>> F.adaptive_avg_pool2d(jnp.ones((2, 3, 7, 7)), 1).shape
        (2, 3, 1, 1)
    """
    x = jnp.asarray(x)
    if isinstance(output_size, (tuple, list)):
        oh, ow = output_size
    else:
        oh = ow = output_size
    h, w = x.shape[-2:]
    oh = h if oh is None else int(oh)
    ow = w if ow is None else int(ow)
    if h % oh == 0 and w % ow == 0:
        kh, kw = h // oh, w // ow
        if (kh, kw) == (h, w):
            return jnp.mean(x, axis=(-2, -1), keepdims=True)
        nb = x.ndim - 2
        y = lax.reduce_window_sum(x, (1,) * nb + (kh, kw), (1,) * nb + (kh, kw), "VALID")
        return y / float(kh * kw)
    mh = _adaptive_matrix(h, oh, np.dtype(x.dtype))
    mw = _adaptive_matrix(w, ow, np.dtype(x.dtype))
    return jnp.einsum("...hw,ih,jw->...ij", x, mh, mw)


# --- normalization ---------------------------------------------------------------------------
def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5, return_stats=False):
    """Batch normalization over all axes but 1 (channels), as ``F.batch_norm``.

    In training mode the batch statistics normalize ``x``; with ``return_stats=True`` the result
    is ``(y, new_running_mean, new_running_var)`` computed with PyTorch's rule (unbiased batch
    variance, ``new = (1 - momentum) * old + momentum * batch``; ``momentum=None`` is handled by
    the module as a cumulative average). Inputs are never modified.

    Example:
        >>> x = jnp.array([[1.0, 2.0], [3.0, 6.0]])              # (N, C)
        >>> rm, rv = jnp.zeros(2), jnp.ones(2)
        >>> F.batch_norm(x, rm, rv, training=False)             # uses the running statistics
        Array([[0.999995, 1.99999 ],
               [2.999985, 5.99997 ]], dtype=float32)
        >>> y, new_rm, new_rv = F.batch_norm(x, rm, rv, training=True, return_stats=True)
        >>> y
        Array([[-0.999995  , -0.99999875],
               [ 0.999995  ,  0.99999875]], dtype=float32)
        >>> new_rm, new_rv
        (Array([0.2, 0.4], dtype=float32), Array([1.1, 1.7], dtype=float32))
    """
    x = jnp.asarray(x)
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if training:
        n = x.size // x.shape[1]
        if n <= 1:
            raise ValueError(f"F.batch_norm: expected more than 1 value per channel when "
                             f"training, got input of shape {x.shape}")
        mean = jnp.mean(x, axis=axes)
        var = jnp.mean(jnp.square(x - jnp.reshape(mean, shape)), axis=axes)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("F.batch_norm: running_mean and running_var are needed in eval mode")
        mean, var = running_mean, running_var
    y = (x - jnp.reshape(mean, shape)) * jnp.reshape(lax.rsqrt(var + eps), shape)
    if weight is not None:
        y = y * jnp.reshape(weight, shape)
    if bias is not None:
        y = y + jnp.reshape(bias, shape)
    if not return_stats:
        return y
    if not training or running_mean is None:
        return y, running_mean, running_var
    n = x.size // x.shape[1]
    bm, bv = lax.stop_gradient(mean), lax.stop_gradient(var) * (n / (n - 1))
    m = momentum
    new_mean = (1 - m) * running_mean + m * bm
    new_var = (1 - m) * running_var + m * bv
    return y, new_mean.astype(running_mean.dtype), new_var.astype(running_var.dtype)


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` axes. Example: ``F.layer_norm(x, (64,))``."""
    x = jnp.asarray(x)
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    k = len(normalized_shape)
    if tuple(x.shape[x.ndim - k:]) != tuple(normalized_shape):
        raise ValueError(f"F.layer_norm: input shape {x.shape} does not end with "
                         f"normalized_shape {tuple(normalized_shape)}")
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over trailing axes (eps defaults to the dtype's epsilon).

    Example:
        >>> F.rms_norm(jnp.array([[3.0, 4.0]]), (2,))     # x / sqrt(mean(x ** 2) + eps)
        Array([[0.84852815, 1.1313709 ]], dtype=float32)
    """
    x = jnp.asarray(x)
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    k = len(normalized_shape)
    axes = tuple(range(x.ndim - k, x.ndim))
    if eps is None:
        eps = float(np.finfo(np.dtype(x.dtype)).eps)
    y = x * lax.rsqrt(jnp.mean(jnp.square(x), axis=axes, keepdims=True) + eps)
    return y * weight if weight is not None else y


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize channel groups of an (N, C, ...) input. Example: ``F.group_norm(x, 4)``."""
    x = jnp.asarray(x)
    n, c = x.shape[:2]
    if c % num_groups:
        raise ValueError(f"F.group_norm: {c} channels are not divisible into {num_groups} groups")
    g = jnp.reshape(x, (n, num_groups, -1))
    mean = jnp.mean(g, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(g - mean), axis=2, keepdims=True)
    y = jnp.reshape((g - mean) * lax.rsqrt(var + eps), x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * jnp.reshape(weight, shape)
    if bias is not None:
        y = y + jnp.reshape(bias, shape)
    return y


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) over its spatial axes. Example: ``F.instance_norm(x)``."""
    x = jnp.asarray(x)
    axes = tuple(range(2, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + eps)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * jnp.reshape(weight, shape)
    if bias is not None:
        y = y + jnp.reshape(bias, shape)
    return y


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over ``size`` neighbouring channels) ** beta, the window
    zero-padded by (size // 2, (size - 1) // 2) channels (PyTorch's formula) for an
    (N, C, ...) input of 3 or more dimensions.

    Example:
        >>> F.local_response_norm(jnp.ones((1, 8, 4, 4)), size=5).shape
        (1, 8, 4, 4)
    """
    x = jnp.asarray(input)
    if x.ndim < 3:
        raise ValueError(f"F.local_response_norm: expected a 3-D or higher dimensional input "
                         f"(N, C, ...), got shape {tuple(x.shape)}")
    size = int(size)
    if size <= 0:
        raise ValueError(f"F.local_response_norm: size must be positive, got {size}")
    if x.size == 0:
        return x
    window = (1, size) + (1,) * (x.ndim - 2)
    pads = ((0, 0), (size // 2, (size - 1) // 2)) + ((0, 0),) * (x.ndim - 2)
    div = lax.reduce_window_sum(x * x, window, (1,) * x.ndim, pads) * (alpha / size)
    return x / (div + k) ** beta


# --- dropout and embedding -------------------------------------------------------------------
def _hash_uniform(shape, seed):
    """Uniform [0, 1) floats from a counter-based hash of (seed, position).

    Used for dropout when ``funcgrad.random`` is not available; ``seed`` may be traced, so a
    jitted step that receives a new seed draws a new mask.
    """
    size = int(np.prod(shape, dtype=np.int64))
    idx = lax.iota("uint32", max(size, 1))
    s = jnp.asarray(seed).astype("uint32")
    h = idx * np.uint32(0x9E3779B1) + s * np.uint32(0x85EBCA77) + np.uint32(0x2545F491)
    for mult in (0x7FEB352D, 0x846CA68B):
        h = h ^ lax.shift_right_logical(h, np.uint32(16))
        h = h * np.uint32(mult)
    h = h ^ lax.shift_right_logical(h, np.uint32(16))
    u = lax.shift_right_logical(h, np.uint32(8)).astype("float32") * (1.0 / (1 << 24))
    return jnp.reshape(u[:size], shape)


def dropout(x, p=0.5, training=True, inplace=False, key=None):
    """Zero each element with probability ``p`` and scale the rest by 1 / (1 - p).

    ``key`` (an int or a uint32 array; may be traced) seeds the mask. Without a key a seed is
    drawn from funcgrad's host generator (``funcgrad.manual_seed``): fine eagerly, but under
    ``jit`` that seed is fixed at trace time, so pass a key there (``nn.Dropout`` modules carry
    their own key state that a jitted step advances).

    Example:
        >>> y = F.dropout(jnp.ones(8), 0.5, training=True, key=3)
        >>> sorted(set(np.asarray(y).tolist()))                 # dropped, or kept and scaled
        [0.0, 2.0]
        >>> bool(jnp.all(F.dropout(jnp.ones(8), 0.5, key=3) == y))   # the same key, the same mask
        True
        >>> F.dropout(jnp.ones(3), 0.5, training=False)
        Array([1., 1., 1.], dtype=float32)
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"F.dropout: p must be in [0, 1], got {p}")
    x = jnp.asarray(x)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return jnp.zeros_like(x)
    if key is None:
        from funcgrad.nn import init
        key = int(init.generator().integers(0, 2 ** 31 - 1))
    u = _hash_uniform(x.shape, key)
    keep = u >= p
    return jnp.where(keep, x / (1.0 - p), jnp.zeros((), x.dtype))


def _draw_key(key):
    if key is None:
        from funcgrad.nn import init
        key = int(init.generator().integers(0, 2 ** 31 - 1))
    return key


def _keep_mask(x, p, key, channel_axes):
    """Boolean keep-mask (probability 1 - p) broadcastable to ``x``: one draw per element of
    ``x.shape[:channel_axes]`` (whole channels), or per element when ``channel_axes`` is None."""
    if channel_axes is None:
        return _hash_uniform(x.shape, _draw_key(key)) >= p
    lead = tuple(x.shape[:channel_axes])
    u = _hash_uniform(lead, _draw_key(key))
    return jnp.reshape(u >= p, lead + (1,) * (x.ndim - channel_axes))


def _trivial_dropout(x, p, training, name):
    """``x`` itself (eval mode, p == 0) or zeros (p == 1); None when a mask must be drawn."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"F.{name}: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return jnp.zeros_like(x)
    return None


def _channel_dropout(x, p, training, key, channel_axes, name):
    done = _trivial_dropout(x, p, training, name)
    if done is not None:
        return done
    keep = _keep_mask(x, p, key, channel_axes)
    return jnp.where(keep, x / (1.0 - p), jnp.zeros((), x.dtype))


def dropout1d(input, p=0.5, training=True, inplace=False, key=None):
    """Zero whole channels of a (N, C, L) or unbatched (C, L) input with probability ``p``
    and scale the rest by 1 / (1 - p). ``key`` as in ``F.dropout``.

    Example:
        >>> y = F.dropout1d(jnp.ones((2, 8, 5)), 0.5, key=0)
        >>> bool(jnp.all((y == 0).all(-1) | (y == 2).all(-1)))   # each [n, c, :] is all 0 or all 2
        True
    """
    x = jnp.asarray(input)
    if x.ndim not in (2, 3):
        raise ValueError(f"F.dropout1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got "
                         f"shape {tuple(x.shape)}")
    return _channel_dropout(x, p, training, key, x.ndim - 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False, key=None):
    """Zero whole channels (``x[n, c]``) of a (N, C, H, W) input with probability ``p`` and
    scale the rest by 1 / (1 - p). As PyTorch 2.x, a 3-D input is read as (N, C, L) (with a
    warning) and other ranks >= 2 as (N, C, ...). ``key`` as in ``F.dropout``.

    Example:
        >>> y = F.dropout2d(jnp.ones((2, 8, 4, 4)), 0.25, key=1)
        >>> bool(jnp.all(y == y[:, :, :1, :1]))        # whole channels are dropped or kept
        True
        >>> sorted(set(np.asarray(y[:, :, 0, 0]).ravel().tolist()))   # kept ones scaled by 1/0.75
        [0.0, 1.33333...]
    """
    x = jnp.asarray(input)
    if x.ndim < 2:
        raise ValueError(f"F.dropout2d: expected an input with a batch and a channel axis, "
                         f"got shape {tuple(x.shape)}")
    if x.ndim == 3:
        warnings.warn("F.dropout2d: a 3-D input is read as (N, C, L) (channel-wise 1-D "
                      "dropout), as PyTorch does; use F.dropout1d for that, or add a batch "
                      "axis for an unbatched (C, H, W) image", UserWarning, stacklevel=2)
    elif x.ndim != 4:
        warnings.warn(f"F.dropout2d: expected a 4-D (N, C, H, W) input, got shape "
                      f"{tuple(x.shape)}; dropping whole x[n, c] channels", UserWarning,
                      stacklevel=2)
    return _channel_dropout(x, p, training, key, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False, key=None):
    """Zero whole channels of a (N, C, D, H, W) or unbatched (C, D, H, W) input with
    probability ``p`` and scale the rest by 1 / (1 - p). ``key`` as in ``F.dropout``.

    Example:
        >>> F.dropout3d(jnp.ones((2, 4, 3, 3, 3)), 0.5, key=2).shape
        (2, 4, 3, 3, 3)
    """
    x = jnp.asarray(input)
    if x.ndim not in (4, 5):
        warnings.warn(f"F.dropout3d: expected a 4-D (C, D, H, W) or 5-D (N, C, D, H, W) "
                      f"input, got shape {tuple(x.shape)}; reading it as unbatched "
                      f"(C, ...)", UserWarning, stacklevel=2)
    if x.ndim < 1:
        raise ValueError("F.dropout3d: expected an input with a channel axis, got a scalar")
    return _channel_dropout(x, p, training, key, 2 if x.ndim == 5 else 1, "dropout3d")


_SELU_NEG = 1.7580993408473766          # -SELU(-inf) = scale * alpha


def _alpha_dropout(x, p, training, key, channel_axes, name):
    done = _trivial_dropout(x, p, training, name)
    if done is not None:
        return done
    # dropped units take SELU's negative saturation value, then an affine map restores zero
    # mean and unit variance: kept -> a*x + a*s*p, dropped -> a*s*(p - 1), s = _SELU_NEG.
    a = 1.0 / math.sqrt((_SELU_NEG * _SELU_NEG * p + 1.0) * (1.0 - p))
    keep = _keep_mask(x, p, key, channel_axes)
    return jnp.where(keep, x * a + (a * _SELU_NEG * p),
                     jnp.full((), a * _SELU_NEG * (p - 1.0), x.dtype))


def alpha_dropout(input, p=0.5, training=False, inplace=False, key=None):
    """Dropout for SELU networks: keeps zero mean and unit variance of its input by setting
    dropped elements to SELU's saturation value and applying an affine correction (PyTorch's
    formula). ``training`` defaults to False as in PyTorch; ``key`` as in ``F.dropout``.

    Example:
        >>> x = jnp.tile(jnp.array([1.0, -1.0]), 5000)          # mean 0, std 1
        >>> y = F.alpha_dropout(x, 0.1, training=True, key=0)
        >>> abs(float(y.mean())) < 0.05, abs(float(y.std()) - 1.0) < 0.1   # keeps mean 0, std 1
        (True, True)
    """
    x = jnp.asarray(input)
    return _alpha_dropout(x, p, training, key, None, "alpha_dropout")


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False, key=None):
    """``F.alpha_dropout`` that drops whole channels (``x[n, c]`` of an (N, C, ...) input).

    Example:
        >>> F.feature_alpha_dropout(jnp.ones((2, 8, 5)), 0.2, training=True, key=0).shape
        (2, 8, 5)
    """
    x = jnp.asarray(input)
    if x.ndim < 2:
        raise ValueError(f"F.feature_alpha_dropout: expected an (N, C, ...) input, got shape "
                         f"{tuple(x.shape)}")
    return _alpha_dropout(x, p, training, key, 2, "feature_alpha_dropout")


def embedding(input, weight, padding_idx=None, max_norm=None):
    """Rows of ``weight`` at integer ``input``; rows at ``padding_idx`` get no gradient.

    An id outside ``[0, num_embeddings)`` raises ``IndexError`` (as PyTorch) when the ids are
    concrete; under ``jit``/``vmap`` it is checked at run time with
    ``config.update("debug_checks", True)`` and otherwise gives a row of NaN.

    Example:
        >>> table = jnp.arange(12.0).reshape(4, 3)
        >>> F.embedding(jnp.array([1, 3]), table)
        Array([[ 3.,  4.,  5.],
               [ 9., 10., 11.]], dtype=float32)
    """
    idx = jnp.asarray(input)
    _check_ids_dtype("F.embedding", idx)
    debug.check_ids(idx, weight.shape[0], "F.embedding",
                    of=f"a table of {weight.shape[0]} rows")
    return embedding_rows(idx, weight, padding_idx)


def _check_ids_dtype(where, idx):
    if not jnp.issubdtype(idx.dtype, jnp.integer):
        raise TypeError(f"{where}: indices must be integers, got {idx.dtype}")


def embedding_rows(idx, weight, padding_idx=None):
    """``F.embedding`` without the range check: an out-of-range id (negative too) gives NaN."""
    n = weight.shape[0]
    if jnp.issubdtype(idx.dtype, jnp.signedinteger):
        idx = jnp.where(idx < 0, n, idx)       # negative ids are out of range, as in PyTorch
    out = jnp.take(weight, idx, axis=0, mode="fill")
    if padding_idx is not None:
        pad = padding_idx % n
        mask = jnp.expand_dims(idx == pad, -1)
        out = jnp.where(mask, lax.stop_gradient(out), out)
    return out


def one_hot(tensor, num_classes=-1):
    """Integer one-hot encoding (int32), as ``F.one_hot``. Example: ``F.one_hot(y, 10)``."""
    t = jnp.asarray(tensor)
    if num_classes < 0:
        num_classes = int(np.asarray(t).max()) + 1
    return _fn.one_hot(t, num_classes, dtype="int32")


def pad(x, pad, mode="constant", value=0.0):
    """PyTorch's ``F.pad``: ``pad`` lists (left, right) pairs from the LAST axis backwards.

    Example:
        >>> x = jnp.ones((1, 2, 2))
        >>> F.pad(x, (1, 1, 2, 2)).shape        # last axis by 1, the one before by 2
        (1, 6, 4)
        >>> F.pad(jnp.array([1.0, 2.0]), (2, 1), mode="constant", value=9.0)
        Array([9., 9., 1., 2., 9.], dtype=float32)
    """
    x = jnp.asarray(x)
    if len(pad) % 2:
        raise ValueError(f"F.pad: padding length must be even, got {pad}")
    cfg = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        cfg[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    modes = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
             "circular": "wrap"}
    if mode not in modes:
        raise ValueError(f"F.pad: unknown mode {mode!r}")
    if mode == "constant":
        if any(lo < 0 or hi < 0 for lo, hi in cfg):
            full = [(lo, hi, 0) for lo, hi in cfg]
            return lax.pad(x, value, full)
        return jnp.pad(x, cfg, constant_values=value)
    return jnp.pad(x, cfg, mode=modes[mode])


# --- losses ------------------------------------------------------------------------------------
def _reduce(loss, reduction, fname):
    if reduction == "mean":
        return jnp.mean(loss)
    if reduction == "sum":
        return jnp.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{fname}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _class_axis_last(x):
    """(N, C, d1, ...) -> (N, d1, ..., C); (C,) and (N, C) unchanged."""
    if x.ndim <= 2:
        return x
    return jnp.moveaxis(x, 1, -1)


def _check_class_targets(name, t, input_shape, logp):
    """Class-index targets have the input's shape without its class axis (axis 1, or 0 for
    one unbatched example)."""
    if tuple(t.shape) != tuple(logp.shape[:-1]):
        want = tuple(input_shape[:1]) + tuple(input_shape[2:]) if len(input_shape) > 1 else ()
        raise ValueError(f"{name}: class-index target of shape {tuple(t.shape)} does not match "
                         f"input {tuple(input_shape)} (expected target shape {want})")
    if not jnp.issubdtype(t.dtype, jnp.integer):
        raise TypeError(f"{name}: class-index targets must be integers, got {t.dtype}")


def _class_ids(t, c, ignore_index, fname):
    """(mask of counted targets, gather indices): ignored targets read class 0 and count
    nothing; out-of-range ones (negative too) gather NaN, so the loss is NaN, never another
    class's value. Traced targets are range-checked at run time with ``debug_checks`` on."""
    if isinstance(t, Tracer):          # concrete targets were checked by _with_target_check
        debug.check_ids(t, c, fname, what="target", ignore=ignore_index, of=f"{c} classes")
    valid = t != ignore_index
    safe_t = jnp.where(valid, t, 0)
    if jnp.issubdtype(safe_t.dtype, jnp.signedinteger):
        safe_t = jnp.where(safe_t < 0, c, safe_t)
    return valid, safe_t


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities ``input`` (N, C, ...) at class ``target``.

    The mean divides by the summed weights of the non-ignored targets (PyTorch's rule).

    Example:
        >>> logits, labels = jnp.array([[2.0, 0.0], [0.0, 2.0]]), jnp.array([0, 0])
        >>> F.nll_loss(F.log_softmax(logits, 1), labels)
        Array(1.1269281, dtype=float32)
    """
    logp = _class_axis_last(jnp.asarray(input))
    t = jnp.asarray(target)
    _check_class_targets("F.nll_loss", t, jnp.shape(input), logp)
    c = logp.shape[-1]
    valid, safe_t = _class_ids(t, c, ignore_index, "F.nll_loss")
    picked = jnp.take_along_axis(logp, jnp.expand_dims(safe_t, -1), axis=-1, mode="fill")[..., 0]
    w = jnp.ones((c,), logp.dtype) if weight is None else jnp.asarray(weight, logp.dtype)
    wt = jnp.where(valid, jnp.take(w, safe_t, mode="fill"), 0.0)
    loss = -picked * wt
    if reduction == "mean":
        return jnp.sum(loss) / jnp.sum(wt)
    return _reduce(loss, reduction, "F.nll_loss")


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Softmax cross-entropy of logits ``input`` (N, C, ...) against class indices or class
    probabilities ``target``, with PyTorch's ``weight``, ``ignore_index`` and
    ``label_smoothing`` semantics.

    Example:
        >>> logits, labels = jnp.array([[2.0, 0.0], [0.0, 2.0]]), jnp.array([0, 0])
        >>> F.cross_entropy(logits, labels)
        Array(1.1269281, dtype=float32)
        >>> soft_targets = jnp.array([[0.9, 0.1], [0.5, 0.5]])
        >>> F.cross_entropy(logits, soft_targets, label_smoothing=0.1)
        Array(0.7669281, dtype=float32)
    """
    x = jnp.asarray(input)
    t = jnp.asarray(target)
    logp = _class_axis_last(log_softmax(x, dim=1 if x.ndim > 1 else 0))
    c = logp.shape[-1]
    eps = float(label_smoothing)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"F.cross_entropy: label_smoothing must be in [0, 1], got {eps}")
    w = None if weight is None else jnp.asarray(weight, logp.dtype)
    if jnp.issubdtype(t.dtype, jnp.floating):
        probs = _class_axis_last(t) if t.ndim == x.ndim else t
        if tuple(probs.shape) != tuple(logp.shape):
            raise ValueError(f"F.cross_entropy: probability targets {t.shape} must match input "
                             f"{x.shape}")
        if eps > 0:
            probs = probs * (1 - eps) + eps / c
        terms = logp * probs
        if w is not None:
            terms = terms * w
        loss = -jnp.sum(terms, axis=-1)
        if reduction == "mean":
            return jnp.sum(loss) / (loss.size if loss.ndim else 1)
        return _reduce(loss, reduction, "F.cross_entropy")
    _check_class_targets("F.cross_entropy", t, x.shape, logp)
    valid, safe_t = _class_ids(t, c, ignore_index, "F.cross_entropy")
    picked = jnp.take_along_axis(logp, jnp.expand_dims(safe_t, -1), axis=-1, mode="fill")[..., 0]
    wt = jnp.where(valid, 1.0 if w is None else jnp.take(w, safe_t, mode="fill"),
                   0.0).astype(logp.dtype)
    nll = -picked * wt
    if eps > 0:
        smooth = -jnp.sum(logp * (1.0 if w is None else w), axis=-1)
        smooth = jnp.where(valid, smooth, 0.0)
    if reduction == "mean":
        denom = jnp.sum(wt)
        out = jnp.sum(nll) / denom
        if eps > 0:
            sden = denom if w is not None else jnp.sum(valid.astype(logp.dtype))
            out = (1 - eps) * out + eps / c * (jnp.sum(smooth) / sden)
        return out
    loss = nll if eps == 0 else (1 - eps) * nll + eps / c * smooth
    return _reduce(loss, reduction, "F.cross_entropy")


def mse_loss(input, target, reduction="mean"):
    """Mean squared error. Example: ``F.mse_loss(pred, y)``."""
    d = jnp.asarray(input) - jnp.asarray(target)
    return _reduce(d * d, reduction, "F.mse_loss")


def l1_loss(input, target, reduction="mean"):
    """Mean absolute error. Example: ``F.l1_loss(pred, y)``."""
    return _reduce(jnp.abs(jnp.asarray(input) - jnp.asarray(target)), reduction, "F.l1_loss")


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta for |d| < beta, else |d| - 0.5 beta. Example: ``F.smooth_l1_loss(p, y)``."""
    d = jnp.abs(jnp.asarray(input) - jnp.asarray(target))
    if beta == 0:
        loss = d
    else:
        loss = jnp.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
    return _reduce(loss, reduction, "F.smooth_l1_loss")


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 for |d| <= delta, else delta (|d| - 0.5 delta). Example: ``F.huber_loss(p, y)``."""
    d = jnp.abs(jnp.asarray(input) - jnp.asarray(target))
    loss = jnp.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta))
    return _reduce(loss, reduction, "F.huber_loss")


def binary_cross_entropy(input, target, weight=None, reduction="mean"):
    """BCE of probabilities ``input``; logs are clamped at -100 as in PyTorch.

    Example:
        >>> F.binary_cross_entropy(jnp.array([0.9]), jnp.array([1.0]))     # -log(0.9)
        Array(0.10536055, dtype=float32)
    """
    p = jnp.asarray(input)
    t = jnp.asarray(target, p.dtype)
    logp = jnp.maximum(jnp.log(p), -100.0)
    log1mp = jnp.maximum(jnp.log1p(-p), -100.0)
    loss = -(t * logp + (1 - t) * log1mp)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "F.binary_cross_entropy")


def binary_cross_entropy_with_logits(input, target, weight=None, reduction="mean",
                                     pos_weight=None):
    """BCE of logits, computed stably; ``pos_weight`` scales the positive term.

    Example:
        >>> logits, y = jnp.array([0.0, 1.0]), jnp.array([1.0, 0.0])
        >>> F.binary_cross_entropy_with_logits(logits, y, pos_weight=jnp.array([3.0]))
        Array(1.6963516, dtype=float32)
    """
    x = jnp.asarray(input)
    t = jnp.asarray(target, x.dtype)
    softplus_neg = jnp.logaddexp(-x, 0.0)      # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1 - t) * x + softplus_neg
    else:
        lw = 1 + (jnp.asarray(pos_weight, x.dtype) - 1) * t
        loss = (1 - t) * x + lw * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "F.binary_cross_entropy_with_logits")


def kl_div(input, target, reduction="mean", log_target=False):
    """KL divergence with ``input`` as log-probabilities; ``reduction="batchmean"`` divides
    the sum by the batch size (the mathematically correct KL).

    Example:
        >>> q, p = jnp.array([[1.0, 0.0]]), jnp.array([[0.5, 0.5]])
        >>> F.kl_div(F.log_softmax(q, 1), p, reduction="batchmean")
        Array(0.12011445, dtype=float32)
    """
    x = jnp.asarray(input)
    t = jnp.asarray(target, x.dtype)
    if log_target:
        loss = jnp.exp(t) * (t - x)
    else:
        safe = jnp.where(t > 0, t, 1.0)
        loss = jnp.where(t > 0, t * (jnp.log(safe) - x), 0.0)
    if reduction == "batchmean":
        return jnp.sum(loss) / (x.shape[0] if x.ndim else 1)
    return _reduce(loss, reduction, "F.kl_div")


def _legacy_reduction(size_average, reduce, reduction, fname):
    """PyTorch's deprecated ``size_average``/``reduce`` pair mapped to a ``reduction``."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn(f"{fname}: size_average and reduce are deprecated, use reduction=...",
                  UserWarning, stacklevel=3)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "mean" if size_average and reduce else ("sum" if reduce else "none")


def _same_ndim(fname, **arrays):
    dims = {k: jnp.ndim(v) for k, v in arrays.items()}
    if len(set(dims.values())) > 1:
        raise ValueError(f"{fname}: all inputs should have the same number of dimensions, got "
                         + ", ".join(f"{k} {tuple(jnp.shape(v))}" for k, v in arrays.items()))


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), ``target`` of 1 or -1.

    Example:
        >>> F.margin_ranking_loss(jnp.array([1.0, 2.0]), jnp.array([2.0, 0.0]),
        ...                       jnp.array([1.0, 1.0]), margin=0.5)      # (1.5 + 0) / 2
        Array(0.75, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction, "F.margin_ranking_loss")
    _same_ndim("F.margin_ranking_loss", input1=input1, input2=input2, target=target)
    x1, x2 = jnp.asarray(input1), jnp.asarray(input2)
    loss = jnp.maximum(-jnp.asarray(target) * (x1 - x2) + margin, 0)
    return _reduce(loss, reduction, "F.margin_ranking_loss")


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """x where target is 1, max(0, margin - x) where target is -1 (PyTorch's rule: the
    margin term applies where target != 1, the x term where target != -1).

    Example:
        >>> F.hinge_embedding_loss(jnp.array([0.3, 2.0]), jnp.array([1.0, -1.0]))
        Array(0.15, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction, "F.hinge_embedding_loss")
    x, t = jnp.asarray(input), jnp.asarray(target)
    zero = jnp.zeros((), x.dtype)
    loss = jnp.where(t != 1, jnp.maximum(margin - x, 0), zero) + jnp.where(t != -1, x, zero)
    return _reduce(loss, reduction, "F.hinge_embedding_loss")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)) (two-class logistic loss), computed stably.

    Example:
        >>> F.soft_margin_loss(jnp.array([0.5, -1.0]), jnp.array([1.0, -1.0]))
        Array(0.39366934, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction, "F.soft_margin_loss")
    x = jnp.asarray(input)
    z = -jnp.asarray(target, x.dtype) * x
    return _reduce(jnp.logaddexp(z, jnp.zeros((), z.dtype)), reduction, "F.soft_margin_loss")


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with d the ``pairwise_distance`` (``p``-norm of
    the difference plus ``eps``) along the last axis; ``swap`` uses min(d(a, n), d(p, n)).

    Example:
        >>> a, pos, neg = jnp.zeros((1, 2)), jnp.ones((1, 2)), jnp.full((1, 2), 1.5)  # (N, D)
        >>> F.triplet_margin_loss(a, pos, neg, margin=1.0)
        Array(0.29289317, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction, "F.triplet_margin_loss")
    if margin <= 0:
        raise ValueError(f"F.triplet_margin_loss: margin must be greater than 0, got {margin}")
    dims = (jnp.ndim(anchor), jnp.ndim(positive), jnp.ndim(negative))
    if len(set(dims)) > 1:
        raise ValueError(f"F.triplet_margin_loss: the anchor, positive, and negative tensors "
                         f"are expected to have the same number of dimensions, but got: anchor "
                         f"{dims[0]}D, positive {dims[1]}D, and negative {dims[2]}D inputs")
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = jnp.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(jnp.maximum(margin + d_pos - d_neg, 0), reduction, "F.triplet_margin_loss")


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1; the
    cosine along the last axis of (N, D) inputs with a (N,) target, or (D,) inputs with a
    scalar target (PyTorch adds 1e-12 to each squared norm).

    Example:
        >>> a, b = jnp.array([[1.0, 0.0], [1.0, 1.0]]), jnp.array([[1.0, 1.0], [1.0, 1.0]])
        >>> F.cosine_embedding_loss(a, b, jnp.array([1, -1]), margin=0.2)
        Array(0.5464466, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction, "F.cosine_embedding_loss")
    x1, x2, t = jnp.asarray(input1), jnp.asarray(input2), jnp.asarray(target)
    want = {1: 2, 0: 1}.get(t.ndim)
    if want is None or x1.ndim != want or x2.ndim != want:
        raise ValueError(f"F.cosine_embedding_loss: expected (N, D) inputs with a (N,) target "
                         f"or (D,) inputs with a scalar target, got input1 {tuple(x1.shape)}, "
                         f"input2 {tuple(x2.shape)} and target {tuple(t.shape)}")
    eps = 1e-12
    dot = jnp.sum(x1 * x2, axis=-1)
    cos = dot / jnp.sqrt((jnp.sum(x1 * x1, axis=-1) + eps) * (jnp.sum(x2 * x2, axis=-1) + eps))
    zero = jnp.zeros((), cos.dtype)
    loss = jnp.where(t == 1, 1 - cos, zero) + jnp.where(t == -1, jnp.maximum(cos - margin, 0),
                                                        zero)
    return _reduce(loss, reduction, "F.cosine_embedding_loss")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """Poisson negative log-likelihood: exp(input) - target * input with ``log_input``, else
    input - target * log(input + eps); ``full`` adds Stirling's approximation of
    log(target!) where target > 1.

    Example:
        >>> log_rate, counts = jnp.array([0.0, 1.0]), jnp.array([1.0, 3.0])
        >>> F.poisson_nll_loss(log_rate, counts)
        Array(0.35914087, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction, "F.poisson_nll_loss")
    x = jnp.asarray(input)
    t = jnp.asarray(target, x.dtype)
    if log_input:
        loss = jnp.exp(x) - t * x
    else:
        loss = x - t * jnp.log(x + eps)
    if full:
        big = t > 1
        ts = jnp.where(big, t, jnp.ones((), t.dtype))     # finite values in the unused branch
        stirling = ts * jnp.log(ts) - ts + 0.5 * jnp.log(2 * math.pi * ts)
        loss = loss + jnp.where(big, stirling, jnp.zeros((), t.dtype))
    return _reduce(loss, reduction, "F.poisson_nll_loss")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 * (log(var) + (input - target)^2 / var) (+ 0.5 log(2 pi) with ``full``), ``var``
    clamped below at ``eps`` without changing its gradient (as PyTorch). ``var`` has the
    input's shape, or one axis of size 1 (or the last axis missing) for a shared variance,
    or is a Python float.

    Example:
        >>> mean, y, var = jnp.array([0.0, 1.0]), jnp.array([0.5, 1.0]), jnp.array([1.0, 2.0])
        >>> F.gaussian_nll_loss(mean, y, var)
        Array(0.2357868, dtype=float32)
    """
    x = jnp.asarray(input)
    if isinstance(var, float):
        if var < 0:
            raise ValueError("F.gaussian_nll_loss: var has negative entry/entries")
        var = jnp.full(x.shape, var, x.dtype)
    v = jnp.asarray(var)
    if not isinstance(v, Tracer) and bool(np.any(np.asarray(v) < 0)):      # checked eagerly
        raise ValueError("F.gaussian_nll_loss: var has negative entry/entries")
    if tuple(v.shape) != tuple(x.shape):
        if tuple(x.shape[:-1]) == tuple(v.shape):
            v = jnp.expand_dims(v, -1)
        elif not (v.ndim == x.ndim and sum(b for a, b in zip(x.shape, v.shape) if a != b) == 1):
            raise ValueError(f"F.gaussian_nll_loss: var is of incorrect size: var "
                             f"{tuple(v.shape)} for input {tuple(x.shape)} (expected the "
                             f"input's shape, one axis of size 1, or the last axis dropped)")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"F.gaussian_nll_loss: {reduction!r} is not a valid reduction")
    v = v + lax.stop_gradient(jnp.maximum(v, eps) - v)                 # clamp, gradient of the identity
    d = x - jnp.asarray(target)
    loss = 0.5 * (jnp.log(v) + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "F.gaussian_nll_loss")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """Per-class logistic loss averaged over the C classes of an (N, C) (or (C,)) input:
    -mean_c(w_c (y_c log sigmoid(x_c) + (1 - y_c) log sigmoid(-x_c))).

    Example:
        >>> logits, multi_hot = jnp.array([[2.0, -1.0, 0.0]]), jnp.array([[1.0, 0.0, 1.0]])
        >>> F.multilabel_soft_margin_loss(logits, multi_hot)
        Array(0.37777898, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction,
                                  "F.multilabel_soft_margin_loss")
    x = jnp.asarray(input)
    t = jnp.asarray(target, x.dtype)
    loss = -(t * log_sigmoid(x) + (1 - t) * log_sigmoid(-x))
    if weight is not None:
        loss = loss * jnp.asarray(weight, x.dtype)
    loss = jnp.sum(loss, axis=-1) / x.shape[-1]
    return _reduce(loss, reduction, "F.multilabel_soft_margin_loss")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Multi-class multi-label hinge loss of an (N, C) (or (C,)) input: for each sample,
    sum over its target classes j and the non-target classes i of
    max(0, 1 - (x[j] - x[i])) / C. ``target`` holds class indices, the list ending at the
    first -1 (PyTorch's format).

    Example:
        >>> F.multilabel_margin_loss(jnp.array([[0.1, 0.2, 0.4, 0.8]]),
        ...                          jnp.array([[3, 0, -1, 1]]))
        Array(0.84999996, dtype=float32)
    """
    reduction = _legacy_reduction(size_average, reduce, reduction, "F.multilabel_margin_loss")
    x, t = jnp.asarray(input), jnp.asarray(target)
    if x.ndim not in (1, 2) or t.shape != x.shape:
        raise ValueError(f"F.multilabel_margin_loss: expected a (C,) or (N, C) input and a "
                         f"target of the same shape, got input {tuple(x.shape)} and target "
                         f"{tuple(t.shape)}")
    if not jnp.issubdtype(t.dtype, jnp.integer):
        raise TypeError(f"F.multilabel_margin_loss: target must hold integer class indices, "
                        f"got {t.dtype}")
    unbatched = x.ndim == 1
    if unbatched:
        x, t = x[None], t[None]
    c = x.shape[1]
    valid = jnp.cumprod((t >= 0).astype("int32"), axis=1) > 0            # before the first -1
    safe = jnp.where(valid, t, 0)
    hot = _fn.one_hot(safe, c, dtype="int32") * valid[..., None].astype("int32")
    is_target = jnp.sum(hot, axis=1) > 0                                  # (N, C)
    picked = jnp.take_along_axis(x, safe, axis=1, mode="clip")             # (N, J)
    z = 1 - picked[:, :, None] + x[:, None, :]                            # (N, J, C)
    use = valid[:, :, None] & ~is_target[:, None, :] & (z > 0)
    loss = jnp.sum(jnp.where(use, z, jnp.zeros((), z.dtype)), axis=(1, 2)) / c
    if unbatched:
        loss = loss[0]
    return _reduce(loss, reduction, "F.multilabel_margin_loss")


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``. Example: ``F.cosine_similarity(a, b)``."""
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    n1 = jnp.sqrt(jnp.sum(x1 * x1, axis=dim))
    n2 = jnp.sqrt(jnp.sum(x2 * x2, axis=dim))
    return jnp.sum(x1 * x2, axis=dim) / (jnp.maximum(n1, eps) * jnp.maximum(n2, eps))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last axis (PyTorch's formula).

    Example:
        >>> a, b = jnp.array([[0.0, 0.0], [1.0, 1.0]]), jnp.array([[3.0, 4.0], [1.0, 2.0]])
        >>> F.pairwise_distance(a, b)                  # (with eps=1e-6 added to a - b)
        Array([4.9999986, 0.999999 ], dtype=float32)
    """
    d = jnp.asarray(x1) - jnp.asarray(x2) + eps
    return jnp.linalg.norm(d, ord=p, axis=-1, keepdims=keepdim)


def softmin(x, dim=-1, dtype=None):
    """softmax(-x) along ``dim``. Example: ``F.softmin(x, dim=1)``."""
    return softmax(-jnp.asarray(x), dim, dtype)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, dropout_key=None):
    """softmax(q k^T * scale + mask) v over the last two axes (PyTorch's SDPA).

    A boolean ``attn_mask`` marks positions that may be attended; a float mask is added.

    Example:
        >>> q = k = jnp.ones((1, 3, 4))                # (batch, length, features)
        >>> v = jnp.arange(3.0).reshape(1, 3, 1)
        >>> F.scaled_dot_product_attention(q, k, v, is_causal=True)   # running means of v
        Array([[[0. ],
                [0.5],
                [1. ]]], dtype=float32)
    """
    q, k, v = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
    L, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = jnp.matmul(q, jnp.swapaxes(k, -1, -2)) * scale
    if is_causal:
        causal = np.tril(np.ones((L, S), bool))
        scores = jnp.where(causal, scores, -jnp.inf)
    if attn_mask is not None:
        m = jnp.asarray(attn_mask)
        if m.dtype == jnp.bool_:
            scores = jnp.where(m, scores, -jnp.inf)
        else:
            scores = scores + m
    w = softmax(scores, dim=-1)
    if dropout_p > 0.0:
        w = dropout(w, dropout_p, True, key=dropout_key)
    return jnp.matmul(w, v)


# --- resampling ------------------------------------------------------------------------------
_INTERP_MODES = {"nearest": 0, "nearest-exact": 0, "linear": 1, "bilinear": 2, "trilinear": 3}


def _interp_index_scale(n_in, n_out, align_corners, scale_factor):
    """PyTorch's source-per-output scale along one axis."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale_factor if scale_factor else n_in / n_out


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize the spatial axes of ``input`` (N, C, *spatial) with PyTorch's index rules:
    ``nearest`` (floor of dst * in/out), ``nearest-exact`` (pixel centres), and ``linear``,
    ``bilinear``, ``trilinear`` (1, 2, 3 spatial axes; ``align_corners`` as PyTorch).

    Example:
        >>> x = jnp.arange(4.0).reshape(1, 1, 2, 2)
        >>> F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        Array([[[[0.  , 0.25, 0.75, 1.  ],
                 [0.5 , 0.75, 1.25, 1.5 ],
                 [1.5 , 1.75, 2.25, 2.5 ],
                 [2.  , 2.25, 2.75, 3.  ]]]], dtype=float32)
    """
    x = jnp.asarray(input)
    nsp = x.ndim - 2
    if mode not in _INTERP_MODES:
        raise ValueError(f"F.interpolate: mode must be one of {sorted(_INTERP_MODES)}, got "
                         f"{mode!r}")
    if nsp < 1 or (_INTERP_MODES[mode] and _INTERP_MODES[mode] != nsp):
        raise ValueError(f"F.interpolate: mode {mode!r} needs a "
                         f"{_INTERP_MODES[mode] + 2 if _INTERP_MODES[mode] else '3-5'}-d input "
                         f"(N, C, *spatial), got shape {tuple(x.shape)}")
    if antialias:
        raise ValueError("F.interpolate: antialias=True is not supported; downsample with "
                         "F.avg_pool2d first")
    if align_corners is not None and not _INTERP_MODES[mode]:
        raise ValueError(f"F.interpolate: align_corners only applies to the linear modes, "
                         f"not {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("F.interpolate: give exactly one of size and scale_factor")
    in_sp = tuple(x.shape[2:])
    if size is not None:
        out_sp = (tuple(int(v) for v in size) if isinstance(size, (tuple, list))
                  else (int(size),) * nsp)
        scales = (None,) * nsp
    else:
        scales = (tuple(float(v) for v in scale_factor)
                  if isinstance(scale_factor, (tuple, list)) else (float(scale_factor),) * nsp)
        out_sp = tuple(int(math.floor(n * f)) for n, f in zip(in_sp, scales))
        if recompute_scale_factor:
            scales = (None,) * nsp
    if len(out_sp) != nsp or len(scales) != nsp:
        raise ValueError(f"F.interpolate: expected {nsp} sizes or scale factors for input "
                         f"{tuple(x.shape)}, got size={size} scale_factor={scale_factor}")
    if _INTERP_MODES[mode] and not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"F.interpolate: mode {mode!r} needs a floating-point input, got "
                        f"{x.dtype}")
    for ax, (n_in, n_out, f) in enumerate(zip(in_sp, out_sp, scales), start=2):
        scale = _interp_index_scale(n_in, n_out, bool(align_corners), f)
        dst = np.arange(n_out, dtype=np.float64)
        if mode == "nearest":
            x = jnp.take(x, np.minimum(np.floor(dst * scale), n_in - 1).astype(np.int32), ax,
                         mode="clip")
        elif mode == "nearest-exact":
            x = jnp.take(x, np.minimum(np.floor((dst + 0.5) * scale), n_in - 1)
                         .astype(np.int32), ax, mode="clip")
        else:
            src = dst * scale if align_corners else np.maximum(scale * (dst + 0.5) - 0.5, 0.0)
            i0 = np.minimum(np.floor(src), n_in - 1).astype(np.int32)
            i1 = np.minimum(i0 + 1, n_in - 1).astype(np.int32)
            w = (src - i0).astype(np.dtype(x.dtype))
            shape = [1] * x.ndim
            shape[ax] = n_out
            w = jnp.asarray(w.reshape(shape))
            x = jnp.take(x, i0, ax, mode="clip") * (1 - w) + jnp.take(x, i1, ax, mode="clip") * w
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """PyTorch's older name for ``interpolate``. Example: ``F.upsample(x, scale_factor=2)``."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def pixel_shuffle(input, upscale_factor):
    """(N, C*r*r, H, W) -> (N, C, H*r, W*r), channels interleaved as PyTorch's.

    Example:
        >>> x = jnp.arange(4.0).reshape(1, 4, 1, 1)        # 4 channels -> one 2x2 channel
        >>> F.pixel_shuffle(x, 2)
        Array([[[[0., 1.],
                 [2., 3.]]]], dtype=float32)
    """
    x = jnp.asarray(input)
    r = int(upscale_factor)
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"F.pixel_shuffle: {c} channels are not divisible by "
                         f"upscale_factor**2 = {r * r}")
    nl = len(lead)
    x = x.reshape(*lead, c // (r * r), r, r, h, w)
    x = jnp.transpose(x, tuple(range(nl)) + (nl, nl + 3, nl + 1, nl + 4, nl + 2))
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(N, C, H*r, W*r) -> (N, C*r*r, H, W), the inverse of ``pixel_shuffle``.

    Example:
        >>> x = jnp.arange(4.0).reshape(1, 1, 2, 2)
        >>> F.pixel_unshuffle(x, 2).reshape(-1)            # one 2x2 channel -> 4 channels
        Array([0., 1., 2., 3.], dtype=float32)
    """
    x = jnp.asarray(input)
    r = int(downscale_factor)
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise ValueError(f"F.pixel_unshuffle: spatial size {(h, w)} is not divisible by "
                         f"downscale_factor = {r}")
    nl = len(lead)
    x = x.reshape(*lead, c, h // r, r, w // r, r)
    x = jnp.transpose(x, tuple(range(nl)) + (nl, nl + 2, nl + 4, nl + 1, nl + 3))
    return x.reshape(*lead, c * r * r, h // r, w // r)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), ``weight`` of one value or one per channel (axis 1).

    Example:
        >>> F.prelu(jnp.array([-2.0, 3.0]), jnp.full((1,), 0.25))
        Array([-0.5,  3. ], dtype=float32)
    """
    x = jnp.asarray(input)
    w = jnp.asarray(weight, x.dtype)
    if w.size > 1:
        if x.ndim < 2 or x.shape[1] != w.size:
            raise ValueError(f"F.prelu: {w.size} weights need input channels (axis 1) of the "
                             f"same size, got input shape {tuple(x.shape)}")
        w = w.reshape((1, w.size) + (1,) * (x.ndim - 2))
    else:
        w = w.reshape(())
    return jnp.where(x >= 0, x, w * x)


# --- eager calls as one executable -------------------------------------------------------------
# Called eagerly (outside any transformation), these multi-primitive functions compile once per
# (shapes, dtypes, options) and run as one executable: F.cross_entropy on (64, 100) logits takes
# about 25 us instead of 800 us of per-primitive dispatches. Every non-array option is static.
_EAGER_STATIC = {
    "linear": (),
    "conv1d": ("stride", "padding", "dilation", "groups"),
    "conv2d": ("stride", "padding", "dilation", "groups"),
    "conv3d": ("stride", "padding", "dilation", "groups"),
    "max_pool1d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "max_pool2d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "max_pool3d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
    "softmax": ("dim", "dtype"), "log_softmax": ("dim", "dtype"),
    "nll_loss": ("ignore_index", "reduction"),
    "cross_entropy": ("ignore_index", "reduction", "label_smoothing"),
    "mse_loss": ("reduction",), "l1_loss": ("reduction",),
    "smooth_l1_loss": ("reduction", "beta"), "huber_loss": ("reduction", "delta"),
    "binary_cross_entropy": ("reduction",),
    "binary_cross_entropy_with_logits": ("reduction",),
    "kl_div": ("reduction", "log_target"),
    "interpolate": ("size", "scale_factor", "mode", "align_corners", "recompute_scale_factor",
                    "antialias"),
    "pixel_shuffle": ("upscale_factor",), "pixel_unshuffle": ("downscale_factor",),
    "pairwise_distance": ("p", "eps", "keepdim"), "softmin": ("dim", "dtype"),
    "cosine_similarity": ("dim", "eps"),
    "margin_ranking_loss": ("margin", "size_average", "reduce", "reduction"),
    "hinge_embedding_loss": ("margin", "size_average", "reduce", "reduction"),
    "soft_margin_loss": ("size_average", "reduce", "reduction"),
    "triplet_margin_loss": ("margin", "p", "eps", "swap", "size_average", "reduce",
                            "reduction"),
    "cosine_embedding_loss": ("margin", "size_average", "reduce", "reduction"),
    "poisson_nll_loss": ("log_input", "full", "size_average", "eps", "reduce", "reduction"),
    "multilabel_soft_margin_loss": ("size_average", "reduce", "reduction"),
    "multilabel_margin_loss": ("size_average", "reduce", "reduction"),
    "unfold": ("kernel_size", "dilation", "padding", "stride"),
    "fold": ("output_size", "kernel_size", "dilation", "padding", "stride"),
    "local_response_norm": ("size", "alpha", "beta", "k"),
}

jit_when_eager_in(globals(), _EAGER_STATIC)


def _with_target_check(fname, fn):
    """``fn`` (a loss taking class-index targets) that first range-checks concrete integer
    targets, raising ``IndexError`` as PyTorch does; the eager path compiles ``fn``, where the
    targets are no longer concrete, so the check runs before it."""
    params = inspect.signature(fn).parameters
    position = {name: i for i, name in enumerate(params)}

    def argument(name, args, kwargs):
        # positional or keyword, else the default: what binding the call would give, without
        # building a BoundArguments per call (a call that does not bind fails in fn itself)
        i = position[name]
        if i < len(args) and params[name].kind is not inspect.Parameter.KEYWORD_ONLY:
            return args[i]
        return kwargs.get(name, params[name].default)

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        t, x = argument("target", args, kwargs), argument("input", args, kwargs)
        if t is not inspect.Parameter.empty and x is not inspect.Parameter.empty and \
                not isinstance(t, Tracer):
            dt = t.dtype if hasattr(t, "dtype") else np.asarray(t).dtype
            shape = jnp.shape(x)
            if jnp.issubdtype(dt, jnp.integer) and shape:
                c = shape[1] if len(shape) > 1 else shape[0]
                debug.check_ids(t, c, fname, what="target",
                                ignore=argument("ignore_index", args, kwargs),
                                of=f"{c} classes")
        return fn(*args, **kwargs)
    return checked


nll_loss = _with_target_check("F.nll_loss", nll_loss)
cross_entropy = _with_target_check("F.cross_entropy", cross_entropy)


# --- the rest of torch.nn.functional, one module per family (they import this one) -------------
from funcgrad.nn.functional_pooling import *  # noqa: E402,F401,F403
from funcgrad.nn.functional_sampling import *  # noqa: E402,F401,F403
from funcgrad.nn.functional_extra import *  # noqa: E402,F401,F403
from funcgrad.nn.functional_losses import *  # noqa: E402,F401,F403
