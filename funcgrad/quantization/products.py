"""The products of quantized modules: a float activation times a stored integer weight,
computed by ``funcgrad.quantize``'s ``weight_product`` (the same integer product, zero-point
algebra and rescale the transform emits), for ``Linear`` (``x @ W.T``) and ``Conv2d``
(channels-last, as ``funcgrad.nn.functional.conv2d``) layouts.

Example:
    >>> from funcgrad.quantization.products import linear_product, DYNAMIC_X86
    >>> qw = jnp.array([[100, -50], [20, 127]], dtype="int8")       # (out, in)
    >>> y = linear_product(jnp.array([[1.0, 2.0]]), qw, jnp.array(0.01), 0, DYNAMIC_X86)
    >>> np.round(np.asarray(y), 2)
    array([[0.01, 2.74]], dtype=float32)
"""
import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.lax.convolution import conv_general_dilated_p
from funcgrad.lax.dot import dot_general_p
from funcgrad.lax.precision import canonicalize_precision
from funcgrad.quantize import QuantizeConfig
from funcgrad.quantize.rewrite import Geometry, _blocked_weight, weight_product
from funcgrad.transforms.custom_derivatives import custom_jvp

# PyTorch's dynamic quantization on x86 (fbgemm): activations per tensor, affine, quint8 with
# reduce_range ([0, 127]), PyTorch's scale formula
DYNAMIC_X86 = QuantizeConfig(activation="dynamic", activation_dtype="uint7",
                             activation_symmetric=False, activation_granularity="per_tensor",
                             activation_narrow=False)
DYNAMIC_FULL = DYNAMIC_X86.replace(activation_dtype="uint8")
# static: the input arrives on a quint8 grid (values may use the whole [0, 255])
STATIC = QuantizeConfig(activation="static", activation_dtype="uint8",
                        activation_symmetric=False)
WEIGHT_ONLY = QuantizeConfig(activation="none")


def _float_precision():
    """The precision of the float products built here: ``default_matmul_precision``'s, as
    ``lax.dot_general`` gives when none is named (TensorFloat-32 on a GPU by default)."""
    return canonicalize_precision(None, "funcgrad.quantization")


def _dot_params(x, rhs_contract=1):
    return dict(dimension_numbers=(((x.ndim - 1,), (rhs_contract,)), ((), ())),
                precision=_float_precision(), preferred_element_type=None)


def _straight_through(quantized, float_fn, x, arrays):
    """``quantized(x, arrays)`` whose derivative in ``x`` is ``float_fn(t, arrays)``'s (a
    linear function: the product with the dequantized weight), so ``grad`` through a quantized
    module gives the float gradient rather than the zero derivative of rounding; the stored
    integers and scales (``arrays``, a dict) get no derivative."""
    keys = sorted(arrays)
    f = custom_jvp(lambda x, *vals: quantized(x, dict(zip(keys, vals))))
    f.defjvp(lambda p, t: (f(*p), float_fn(t[0], dict(zip(keys, p[1:])))))
    return f(x, *[arrays[k] for k in keys])


def _arrays(qw, sw, zw, act_scale, act_zero_point):
    """The array operands of a product (Python constants stay out: they are not traced)."""
    out = {"qw": qw, "sw": sw}
    for k, v in (("zw", zw), ("sa", act_scale), ("za", act_zero_point)):
        if v is not None and not isinstance(v, int):
            out[k] = v
    return out


def _get(a, key, default):
    return a.get(key, default)


def _dequantized(qw, sw, zw):
    return (qw.astype(np.float32) - (0 if isinstance(zw, int) else zw)) * sw


def _static(scale, zero_point):
    return None if scale is None else (lambda a, geom, side: (scale, zero_point))


def _span(fmt, affine):
    """The largest ``|q - zero_point|`` of a format's values (an affine zero point can sit at
    either end of the range)."""
    return fmt.qmax - fmt.qmin if affine else max(-fmt.qmin, fmt.qmax)


def float_exact(terms, cfg, zw):
    """Whether a product summing ``terms`` integer products under ``cfg`` is exact in float32
    (every partial sum below 2**24), so it may run as a float product of the same integers:
    XLA:CPU runs small float products and convolutions faster than int8 ones, and the
    zero-point corrections of the integer path (sums of the weight, extra products) vanish.

    Example:
        >>> from funcgrad.quantization.products import float_exact, STATIC
        >>> float_exact(400, STATIC, 0), float_exact(1024, STATIC, 0)
        (True, False)
    """
    if cfg.activation == "none" or cfg.weight_format.is_float or cfg.granularity == "per_block":
        return False
    a = _span(cfg.activation_format, not cfg.activation_symmetric)
    w = _span(cfg.weight_format, not (isinstance(zw, int) and zw == 0))
    return terms * a * w < 2 ** 24


def linear_product(x, qw, sw, zw, cfg, act_scale=None, act_zero_point=None, transposed=False):
    """``x @ dequantize(qw).T`` as an integer product (``cfg`` says how ``x`` is quantized:
    dynamically, or with the static ``act_scale``/``act_zero_point``; weight-only configs
    dequantize). ``sw``/``zw``: a scalar, or one per output row, or (out, in // group).
    Where ``float_exact`` holds, the integers are multiplied as float32 (the same result).

    The product runs as ``x @ W`` with ``W`` in (in, out) layout: XLA:CPU's library products
    measured up to 2x slower with the weight's contracted axis last (PyTorch's (out, in)
    layout) at small batches. ``transposed=True`` says ``qw`` is in (in, out) layout already
    (a loop transposes its weight once, outside the loop, where XLA cannot fold the
    transposition back into the product)."""
    x = jnp.asarray(x)
    block = cfg.block_size if cfg.granularity == "per_block" else None
    if block:
        if transposed:
            qw = jnp.transpose(qw)
        params = _dot_params(x)
        shapes = (tuple(x.shape), tuple(qw.shape))
        exact = float_exact(shapes[1][1], cfg, zw)
        geom = Geometry(dot_general_p, params, *shapes)
        qw = _blocked_weight(qw, geom, 1, block, jnp)
        sw = jnp.reshape(sw, tuple(sw.shape) + (1,))
    else:
        params = _dot_params(x, rhs_contract=0)
        qw = qw if transposed else jnp.transpose(qw)
        shapes = (tuple(x.shape), tuple(qw.shape))
        exact = float_exact(shapes[1][0], cfg, zw)
        if np.ndim(sw) == 1:               # one scale per output column (or one in all)
            sw = jnp.reshape(sw, (1, -1))
            zw = zw if isinstance(zw, int) else jnp.reshape(zw, (1, -1))

    def quantized(x, a):
        return weight_product(dot_general_p, params, shapes, x, a["qw"], a["sw"],
                              _get(a, "zw", zw), 1, cfg, x.dtype,
                              _static(a.get("sa"), _get(a, "za", act_zero_point)),
                              float_accumulation=exact)

    def float_fn(t, a):
        w = _dequantized(a["qw"], a["sw"], _get(a, "zw", zw))
        return dot_general_p.bind(t, jnp.reshape(w, shapes[1]).astype(t.dtype), **params)
    return _straight_through(quantized, float_fn, x,
                             _arrays(qw, sw, zw, act_scale, act_zero_point))


def conv_product(x, qw, sw, zw, cfg, stride, padding, dilation, groups, act_scale=None,
                 act_zero_point=None):
    """The channels-first convolution (``(N, C, *spatial)`` x ``(O, I, *kernel)``, any number
    of spatial dimensions) of ``x`` and the stored ``qw`` (scales per output channel or one),
    computed channels-last as an integer convolution."""
    x = jnp.asarray(x)
    nd = x.ndim - 2
    to_last = (0,) + tuple(range(2, nd + 2)) + (1,)
    xt = jnp.transpose(x, to_last)
    wt = jnp.transpose(qw, tuple(range(2, nd + 2)) + (1, 0))
    if np.ndim(sw) == 1:
        sw = jnp.reshape(sw, (1,) * (nd + 1) + (-1,))
        zw = zw if isinstance(zw, int) else jnp.reshape(zw, (1,) * (nd + 1) + (-1,))
    channels_last = (0, nd + 1) + tuple(range(1, nd + 1))
    dn = lax.ConvDimensionNumbers(channels_last, (nd + 1, nd) + tuple(range(nd)),
                                  channels_last)
    params = dict(window_strides=tuple(stride), padding=tuple(tuple(p) for p in padding),
                  lhs_dilation=(1,) * nd, rhs_dilation=tuple(dilation), dimension_numbers=dn,
                  feature_group_count=int(groups), batch_group_count=1,
                  precision=_float_precision(), preferred_element_type=None)
    # XLA:CPU's float convolutions are several times faster than its int8 ones: multiply
    # the integers (zero points subtracted: at most 255 in size) as float32 where that is
    # exact, every partial sum below 2**24
    exact = float_exact(int(np.prod(wt.shape[:-1])), cfg, zw)

    def quantized(xt, a):
        return weight_product(conv_general_dilated_p, params, (tuple(xt.shape),
                              tuple(wt.shape)), xt, a["qw"], a["sw"], _get(a, "zw", zw), 1,
                              cfg, x.dtype, _static(a.get("sa"), _get(a, "za", act_zero_point)),
                              float_accumulation=exact)

    def float_fn(t, a):
        w = _dequantized(a["qw"], a["sw"], _get(a, "zw", zw))
        return conv_general_dilated_p.bind(t, w.astype(t.dtype), **params)
    y = _straight_through(quantized, float_fn, xt, _arrays(wt, sw, zw, act_scale, act_zero_point))
    return jnp.transpose(y, (0, nd + 1) + tuple(range(1, nd + 1)))
