"""Quantized modules, printed and named as PyTorch's (``torch.ao.nn.quantized`` and
``.dynamic``). Their weights are int8 buffers with float32 scales (``state_dict()`` holds
integers; ``funcgrad.save``/``load`` store them), and their products are the integer products
of ``funcgrad.quantize`` (``funcgrad.quantization.products``). They are ordinary modules:
pytrees that ``jit``, ``vmap`` and ``grad`` (with respect to inputs and float buffers) take.

Static modules (``QuantizedLinear``, ``QuantizedConv2d`` and their ``ReLU`` fusions) take a
float input, quantize it with the input range calibrated by ``prepare`` (PyTorch's modules
take it already quantized; an input produced by another quantized module is on that grid
already, so the result is the same), multiply as integers and round the output to the
calibrated output grid (``scale``, ``zero_point``), returning floats on that grid.

Example:
    >>> from funcgrad.quantization import quantize_dynamic
    >>> model = quantize_dynamic(nn.Sequential(nn.Linear(4, 3)), {nn.Linear})
    >>> model
    Sequential(
      (0): DynamicQuantizedLinear(in_features=4, out_features=3, dtype=torch.qint8, qscheme=torch.per_tensor_affine)
    )
    >>> model.state_dict()["0.weight"].dtype
    dtype('int8')
"""
import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.nn import functional as F
from funcgrad.nn.jax_functions import sigmoid
from funcgrad.nn.module import Module
from funcgrad.quantization import products
from funcgrad.quantize import QArray
from funcgrad.quantize.rewrite import fake_quant_fn


def _arr(v, dtype):
    return jnp.asarray(np.asarray(v, dtype))


def quantize_weight_values(w, scale, zero_point, axis=None):
    """int8 values of the float weight ``w`` with per-tensor (``axis=None``) or per-channel
    scales, computed as PyTorch's kernels do: ``round(w * (1 / scale))`` in float32 (which can
    differ from ``round(w / scale)`` by one where ``w / scale`` is a half).

    Example:
        >>> from funcgrad.quantization.modules import quantize_weight_values
        >>> quantize_weight_values(np.array([[1.0, -2.0]]), np.array([0.5]), np.array([0]), 0)
        array([[ 2, -4]], dtype=int8)
    """
    w = np.asarray(w, np.float32)
    scale = np.asarray(scale, np.float32)
    zero_point = np.asarray(zero_point, np.float32)
    if axis is not None:
        shape = [1] * w.ndim
        shape[axis] = -1
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    inv = (np.float32(1.0) / scale).astype(np.float32)
    return np.clip(np.round(w * inv) + zero_point, -128, 127).astype(np.int8)


def _scalar(v):
    return float(np.asarray(v).reshape(-1)[0])


class _WeightHolder(Module):
    """Stores a quantized weight: ``weight`` (integers), ``weight_scale`` and
    ``weight_zero_point`` (one, or one per output channel, or per group)."""

    weight_symmetric = True

    def _set_weight(self, q, scale, zero_point, symmetric=True):
        # per-tensor scales are stored with shape (1,), as PyTorch's (and as they load back)
        self.register_buffer("weight", _arr(q, np.asarray(q).dtype))
        self.register_buffer("weight_scale", _arr(np.atleast_1d(scale), np.float32))
        self.register_buffer("weight_zero_point", _arr(np.atleast_1d(zero_point), np.int32))
        self.weight_symmetric = bool(symmetric and not np.any(np.asarray(zero_point)))
        self.per_channel = np.size(scale) > 1

    def _wzp(self):
        return 0 if self.weight_symmetric else self.weight_zero_point

    def qweight(self):
        """The weight as a ``QArray`` (PyTorch's ``module.weight()``); float16 weights come
        back as float32 values, as PyTorch's do."""
        if getattr(self, "dtype", None) == "float16":
            return self.weight.astype(np.float32)
        if self.per_channel:
            return QArray(self.weight, self.weight_scale, self.weight_zero_point, 0, "qint8")
        return QArray(self.weight, self.weight_scale[0], self.weight_zero_point[0], None,
                      "qint8")

    def _qscheme(self):
        kind = "per_channel" if self.per_channel else "per_tensor"
        return f"torch.{kind}_affine"


class _Static(_WeightHolder):
    """Input and output quantization parameters of a static module."""
    relu = False

    def _set_activation(self, input_qparams, output_qparams):
        (si, zi), (so, zo) = input_qparams, output_qparams
        for name, v, dt in (("input_scale", si, np.float32), ("input_zero_point", zi, np.int32),
                            ("scale", so, np.float32), ("zero_point", zo, np.int32)):
            self.register_buffer(name, _arr(np.asarray(v).reshape(-1)[:1], dt))

    def _output(self, y):
        if self.relu:
            y = F.relu(y)
        return fake_quant_fn("uint8")(y, self.scale, self.zero_point.astype(np.float32))

    def _act_repr(self):
        return f"scale={_scalar(self.scale)}, zero_point={int(_scalar(self.zero_point))}"


class QuantizedLinear(_Static):
    """A static int8 Linear (``torch.ao.nn.quantized.Linear``), made by ``convert``.

    Example:
        >>> from funcgrad.quantization.modules import QuantizedLinear
        >>> m = QuantizedLinear.from_params(jnp.array([[0.5, -0.24]]), jnp.array([0.1]),
        ...                                 (np.array([0.02]), np.array([0])),
        ...                                 (np.array([0.01]), np.array([0])), (0.5, 0))
        >>> m
        QuantizedLinear(in_features=2, out_features=1, scale=0.009999999776482582, zero_point=0, qscheme=torch.per_tensor_affine)
        >>> m(jnp.array([[2.0, 4.0]]))           # 2 * 0.5 - 4 * 0.24 + 0.1, on the 0.01 grid
        Array([[0.14]], dtype=float32)
    """

    @classmethod
    def from_params(cls, weight, bias, weight_qparams, output_qparams, input_qparams,
                    weight_symmetric=True):
        """A module from a float weight (out, in), its qparams (per channel when the scale
        has one entry per row, else per tensor) and the activation qparams."""
        m = cls.__new__(cls)
        Module.__init__(m)
        w = np.asarray(weight, np.float32)
        m.out_features, m.in_features = w.shape
        s, z = (np.asarray(v).reshape(-1) for v in weight_qparams)
        q = quantize_weight_values(w, s, z, 0 if s.size > 1 else None)
        m._set_weight(q, s if s.size > 1 else s[0], z if s.size > 1 else z[0],
                      weight_symmetric)
        m.register_buffer("bias", None if bias is None else _arr(bias, np.float32))
        m._set_activation(input_qparams, output_qparams)
        return m

    def forward(self, x):
        y = products.linear_product(x, self.weight, self.weight_scale, self._wzp(),
                                    products.STATIC, self.input_scale, self.input_zero_point)
        if self.bias is not None:
            y = y + self.bias
        return self._output(y)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"{self._act_repr()}, qscheme={self._qscheme()}")


class QuantizedLinearReLU(QuantizedLinear):
    """``QuantizedLinear`` followed by ReLU (from a fused ``LinearReLU``)."""
    relu = True


class _QuantizedConv(_Static):
    """A static int8 convolution over ``len(kernel_size)`` spatial dimensions, made by
    ``convert`` from a Conv1d/2d/3d (or its ReLU fusion)."""

    @classmethod
    def from_float_conv(cls, conv, weight_qparams, output_qparams, input_qparams,
                        weight_symmetric=True):
        m = cls.__new__(cls)
        Module.__init__(m)
        for k in ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                  "dilation", "groups"):
            object.__setattr__(m, k, getattr(conv, k))
        w = np.asarray(conv.weight, np.float32)
        s, z = (np.asarray(v).reshape(-1) for v in weight_qparams)
        q = quantize_weight_values(w, s, z, 0 if s.size > 1 else None)
        m._set_weight(q, s if s.size > 1 else s[0], z if s.size > 1 else z[0],
                      weight_symmetric)
        m.register_buffer("bias", None if conv.bias is None else _arr(conv.bias, np.float32))
        m._set_activation(input_qparams, output_qparams)
        return m

    def forward(self, x):
        nd = len(self.kernel_size)
        x = jnp.asarray(x)
        if x.ndim != nd + 2:
            raise ValueError(f"{type(self).__name__}: expected a {nd + 2}-d input (N, C, "
                             f"{nd} spatial dimensions), got shape {tuple(x.shape)}")
        pads = F._conv_padding(self.padding, self.kernel_size, self.dilation, self.stride, nd,
                               type(self).__name__)
        y = products.conv_product(x, self.weight, self.weight_scale, self._wzp(),
                                  products.STATIC, self.stride, pads, self.dilation,
                                  self.groups, self.input_scale, self.input_zero_point)
        if self.bias is not None:
            y = y + jnp.reshape(self.bias, (1, -1) + (1,) * nd)
        return self._output(y)

    def extra_repr(self):
        nd = len(self.kernel_size)
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        return s + ", " + self._act_repr()


class QuantizedConv1d(_QuantizedConv):
    """A static int8 Conv1d (``torch.ao.nn.quantized.Conv1d``), made by ``convert``.

    Example:
        >>> from funcgrad.quantization.modules import QuantizedConv1d
        >>> m = QuantizedConv1d.from_float_conv(nn.Conv1d(2, 3, 3, padding=1),
        ...                                     (np.full(3, 0.01), np.zeros(3)),
        ...                                     (np.array([0.05]), np.array([60])), (0.02, 0))
        >>> m(jnp.ones((1, 2, 7))).shape
        (1, 3, 7)
    """


class QuantizedConv2d(_QuantizedConv):
    """A static int8 Conv2d (``torch.ao.nn.quantized.Conv2d``), made by ``convert``.

    Example:
        >>> from funcgrad.quantization.modules import QuantizedConv2d
        >>> conv = nn.Conv2d(1, 2, 3)
        >>> m = QuantizedConv2d.from_float_conv(conv, (np.array([0.01, 0.01]), np.array([0, 0])),
        ...                                     (np.array([0.05]), np.array([60])), (0.02, 0))
        >>> m
        QuantizedConv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), scale=0.05000000074505806, zero_point=60)
        >>> m(jnp.ones((1, 1, 5, 5))).shape
        (1, 2, 3, 3)
    """


class QuantizedConv3d(_QuantizedConv):
    """A static int8 Conv3d (``torch.ao.nn.quantized.Conv3d``), made by ``convert``."""


class QuantizedConvReLU1d(QuantizedConv1d):
    """``QuantizedConv1d`` followed by ReLU (from a fused ``ConvReLU1d``)."""
    relu = True


class QuantizedConvReLU2d(QuantizedConv2d):
    """``QuantizedConv2d`` followed by ReLU (from a fused ``ConvReLU2d``)."""
    relu = True


class QuantizedConvReLU3d(QuantizedConv3d):
    """``QuantizedConv3d`` followed by ReLU (from a fused ``ConvReLU3d``)."""
    relu = True


class Quantize(Module):
    """What a ``QuantStub`` becomes: rounds its input to the calibrated quint8 grid
    (``torch.ao.nn.quantized.Quantize``); values stay float.

    Example:
        >>> from funcgrad.quantization.modules import Quantize
        >>> Quantize(0.5, 10)(jnp.array([0.3, 1.1, -9.0]))
        Array([ 0.5,  1. , -5. ], dtype=float32)
    """

    def __init__(self, scale, zero_point, dtype="quint8"):
        super().__init__()
        self.register_buffer("scale", _arr(np.asarray(scale).reshape(-1)[:1], np.float32))
        self.register_buffer("zero_point", _arr(np.asarray(zero_point).reshape(-1)[:1],
                                                np.int32))
        self.dtype = dtype

    def forward(self, x):
        return fake_quant_fn(self.dtype)(jnp.asarray(x), self.scale,
                                         self.zero_point.astype(np.float32))

    def extra_repr(self):
        return (f"scale=tensor([{_scalar(self.scale):.4f}]), zero_point=tensor(["
                f"{int(_scalar(self.zero_point))}]), dtype=torch.{self.dtype}")


class DeQuantize(Module):
    """What a ``DeQuantStub`` becomes: values are float already, so it returns them."""

    def forward(self, x):
        return x


# --- dynamic quantization -------------------------------------------------------------------------
def _float16_weights(weight_observer):
    """Whether a qconfig's weight observer asks for float16 weights
    (``float16_dynamic_qconfig``) rather than qint8 ones."""
    return weight_observer is not None and getattr(weight_observer(), "dtype", None) == "float16"


def _float16_values(w):
    """``w`` rounded to float16, values beyond float16's range saturated to its largest finite
    value (as PyTorch's fp16 packing does, which warns where it saturates)."""
    big = np.finfo(np.float16).max
    return np.clip(np.asarray(w, np.float32), -big, big).astype(np.float16)


def _quantize_weight(w, weight_observer):
    """(int8 values, scale, zero_point, symmetric) of ``w`` by a fresh weight observer."""
    obs = weight_observer()
    w = np.asarray(w, np.float32)
    obs.update(w)
    scale, zp = obs.calculate_qparams()
    if scale.size == 1:
        return quantize_weight_values(w, scale[0], zp[0]), scale[0], zp[0], obs.symmetric
    return quantize_weight_values(w, scale, zp, 0), scale, zp, obs.symmetric


class DynamicQuantizedLinear(_WeightHolder):
    """Linear with an int8 weight and activations quantized at run time, per tensor
    (``torch.ao.nn.quantized.dynamic.Linear``; PyTorch's x86 scheme: quint8 with
    ``reduce_range``). Made by ``quantize_dynamic``. With float16 weights
    (``quantize_dynamic(..., dtype="float16")``) the weight is stored as float16 and the
    product runs in float32, as PyTorch's fp16 dynamic Linear.

    Example:
        >>> from funcgrad.quantization.modules import DynamicQuantizedLinear
        >>> lin = nn.Linear(3, 2)
        >>> q = DynamicQuantizedLinear.from_float(lin)
        >>> x = jnp.ones((4, 3))
        >>> bool(np.abs(np.asarray(q(x) - lin(x))).max() < 0.02)
        True
    """

    dtype = "qint8"

    @classmethod
    def from_float(cls, mod, weight_observer=None, reduce_range=True):
        from funcgrad.quantization.qconfig import default_weight_observer
        m = cls.__new__(cls)
        Module.__init__(m)
        m.in_features, m.out_features = mod.in_features, mod.out_features
        if _float16_weights(weight_observer):
            m.dtype = "float16"
            m.register_buffer("weight", _arr(_float16_values(mod.weight), np.float16))
        else:
            m._set_weight(*_quantize_weight(mod.weight,
                                            weight_observer or default_weight_observer))
        m.register_buffer("bias", None if mod.bias is None else _arr(mod.bias, np.float32))
        m.reduce_range = reduce_range
        return m

    def forward(self, x):
        if self.dtype == "float16":
            y = jnp.matmul(x, jnp.transpose(self.weight.astype(np.float32)))
        else:
            cfg = products.DYNAMIC_X86 if self.reduce_range else products.DYNAMIC_FULL
            y = products.linear_product(x, self.weight, self.weight_scale, self._wzp(), cfg)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        s = f"in_features={self.in_features}, out_features={self.out_features}, "
        if self.dtype == "float16":
            return s + "dtype=torch.float16"
        return s + f"dtype=torch.qint8, qscheme={self._qscheme()}"


def _lstm_cell(mm, carry, xw):
    """One LSTM step; ``xw``: the input projection of this step, one array per gate."""
    h, c = carry
    i, f, g, o = (x + y for x, y in zip(xw, jnp.split(mm(h), 4, axis=-1)))
    c = sigmoid(f) * c + sigmoid(i) * jnp.tanh(g)
    h = sigmoid(o) * jnp.tanh(c)
    return (h, c), h


def _gru_cell(mm, h, xw):
    xr, xz, xn = xw
    hr, hz, hn = jnp.split(mm(h), 3, axis=-1)
    r, z = sigmoid(xr + hr), sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    h = (1 - z) * n + z * h
    return h, h


class _DynamicWeights(Module):
    """Recurrent weights (PyTorch's names: ``weight_ih``, ``weight_hh``, per layer and
    direction) stored int8 with ``_scale``/``_zero_point`` buffers, or float16; biases
    float32. ``_product`` multiplies by one of them with the input quantized at run time."""
    dtype = "qint8"

    @classmethod
    def _from_float(cls, mod, weight_observer, reduce_range, attributes):
        from funcgrad.quantization.qconfig import default_weight_observer
        m = cls.__new__(cls)
        Module.__init__(m)
        for k in attributes:
            object.__setattr__(m, k, getattr(mod, k))
        m.reduce_range = reduce_range
        obs = weight_observer or default_weight_observer
        m._sym = {}
        if _float16_weights(obs):
            m.dtype = "float16"
        for name, p in mod.named_parameters():
            if name.startswith("weight") and m.dtype == "float16":
                m.register_buffer(name, _arr(_float16_values(p.data), np.float16))
            elif name.startswith("weight"):
                q, s, z, sym = _quantize_weight(p.data, obs)
                m.register_buffer(name, _arr(q, np.int8))
                m.register_buffer(name + "_scale", _arr(np.atleast_1d(s), np.float32))
                m.register_buffer(name + "_zero_point", _arr(np.atleast_1d(z), np.int32))
                m._sym[name] = sym and not np.any(z)
            else:
                m.register_buffer(name, _arr(p.data, np.float32))
        for name in ("bias_ih", "bias_hh"):        # cells without bias: PyTorch's None
            if hasattr(mod, name) and getattr(mod, name) is None:
                m.register_buffer(name, None)
        return m

    def _product(self, x, name, weight=None):
        """``x`` times the int8 weight ``name``; ``weight``: that weight transposed to (in,
        out) already (the recurrent weight, transposed once outside the loop)."""
        if self.dtype == "float16":
            w = jnp.transpose(getattr(self, name)) if weight is None else weight
            return jnp.matmul(x, w.astype(np.float32))
        cfg = products.DYNAMIC_X86 if self.reduce_range else products.DYNAMIC_FULL
        zp = 0 if self._sym[name] else getattr(self, name + "_zero_point")
        return products.linear_product(x, getattr(self, name) if weight is None else weight,
                                       getattr(self, name + "_scale"), zp, cfg,
                                       transposed=weight is not None)

    def _sizes_and(self, *options):
        """PyTorch's repr: "input_size, hidden_size" and the options that are set (the
        others passed as False)."""
        return ", ".join([f"{self.input_size}, {self.hidden_size}"] + [o for o in options if o])

    def _biased(self, x, name, bias, weight=None):
        out = self._product(x, name, weight)
        b = getattr(self, bias, None)
        return out if b is None else out + b


class _DynamicRNN(_DynamicWeights):
    """LSTM / GRU with int8 ``weight_ih``/``weight_hh`` per layer and direction (PyTorch's
    names, with ``_scale``/``_zero_point`` buffers) and dynamically quantized inputs and
    hidden states: the input projection of all steps is one integer product, the recurrence
    one integer product per step inside ``lax.scan``. With float16 weights
    (``quantize_dynamic(..., dtype="float16")``) the weights are float16 buffers and the
    products run in float32."""
    mode = None

    @classmethod
    def from_float(cls, mod, weight_observer=None, reduce_range=True):
        if getattr(mod, "proj_size", 0):
            raise ValueError(f"quantize_dynamic: {type(mod).__name__} with proj_size is not "
                             f"supported (PyTorch's dynamic LSTM has no projections either)")
        return cls._from_float(mod, weight_observer, reduce_range,
                               ("input_size", "hidden_size", "num_layers", "bias",
                                "batch_first", "bidirectional"))


    def forward(self, x, hx=None):
        x = jnp.asarray(x)
        if x.ndim != 3:
            raise ValueError(f"{type(self).__name__}: expected a 3-d input, got shape "
                             f"{tuple(x.shape)}")
        if self.batch_first:
            x = jnp.swapaxes(x, 0, 1)
        lstm = self.mode == "LSTM"
        dirs = 2 if self.bidirectional else 1
        n, H = x.shape[1], self.hidden_size
        if hx is None:
            zeros = jnp.zeros((self.num_layers * dirs, n, H), x.dtype)
            hx = (zeros, zeros) if lstm else zeros
        hs, cs, layer_in = [], [], x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                xw = self._product(layer_in, "weight_ih" + sfx)
                b_hh = getattr(self, "bias_hh" + sfx) if self.bias else None
                if self.bias:
                    xw = xw + getattr(self, "bias_ih" + sfx)
                    if lstm:
                        xw, b_hh = xw + b_hh, None

                w_hh = jnp.transpose(getattr(self, "weight_hh" + sfx))

                def mm(h, sfx=sfx, b_hh=b_hh, w_hh=w_hh):
                    out = self._product(h, "weight_hh" + sfx, w_hh)
                    return out if b_hh is None else out + b_hh
                k = layer * dirs + d
                carry = (hx[0][k], hx[1][k]) if lstm else hx[k]
                cell = _lstm_cell if lstm else _gru_cell
                # one scanned array per gate, as nn.LSTM: XLA:CPU's loop fusions are slow when
                # they read one dynamically sliced array at several offsets (measured: the
                # step's cell fusion took ~5x the float model's)
                xw = tuple(jnp.split(xw, 4 if lstm else 3, axis=-1))
                carry, ys = lax.scan(lambda c, v, mm=mm, cell=cell: cell(mm, c, v), carry, xw,
                                     reverse=bool(d))
                hs.append(carry[0] if lstm else carry)
                if lstm:
                    cs.append(carry[1])
                outs.append(ys)
            layer_in = outs[0] if dirs == 1 else jnp.concatenate(outs, axis=-1)
        out = jnp.swapaxes(layer_in, 0, 1) if self.batch_first else layer_in
        h_n = jnp.stack(hs, 0)
        return (out, (h_n, jnp.stack(cs, 0))) if lstm else (out, h_n)

    def extra_repr(self):
        return self._sizes_and(self.num_layers != 1 and f"num_layers={self.num_layers}",
                               self.batch_first and "batch_first=True",
                               self.bidirectional and "bidirectional=True")


class DynamicQuantizedLSTM(_DynamicRNN):
    """``torch.ao.nn.quantized.dynamic.LSTM``: see ``quantize_dynamic``.

    Example:
        >>> from funcgrad.quantization.modules import DynamicQuantizedLSTM
        >>> lstm = nn.LSTM(4, 8)
        >>> q = DynamicQuantizedLSTM.from_float(lstm)
        >>> out, (h, c) = q(jnp.ones((5, 2, 4)))
        >>> out.shape, bool(np.abs(np.asarray(out - lstm(jnp.ones((5, 2, 4)))[0])).max() < 0.02)
        ((5, 2, 8), True)
    """
    mode = "LSTM"


class DynamicQuantizedGRU(_DynamicRNN):
    """``torch.ao.nn.quantized.dynamic.GRU``: see ``quantize_dynamic``."""
    mode = "GRU"


class _DynamicCell(_DynamicWeights):
    """One step of a recurrent cell with dynamically quantized products (PyTorch's
    ``torch.ao.nn.quantized.dynamic`` cells): ``weight_ih``/``weight_hh`` int8 (or float16),
    input and hidden state quantized per tensor at run time, one integer product each."""
    gates = 1

    @classmethod
    def from_float(cls, mod, weight_observer=None, reduce_range=True):
        attrs = ("input_size", "hidden_size", "bias") + \
            (("nonlinearity",) if hasattr(mod, "nonlinearity") else ())
        return cls._from_float(mod, weight_observer, reduce_range, attrs)

    def _start(self, x, hx):
        x = jnp.asarray(x)
        if x.ndim not in (1, 2) or x.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: expected an input of shape (batch, "
                             f"{self.input_size}) or ({self.input_size},), got "
                             f"{tuple(x.shape)}")
        zeros = jnp.zeros(tuple(x.shape[:-1]) + (self.hidden_size,), x.dtype)
        xw = jnp.split(self._biased(x, "weight_ih", "bias_ih"), self.gates, axis=-1)
        return xw, zeros, (lambda h: self._biased(h, "weight_hh", "bias_hh"))

    def extra_repr(self):
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        return self._sizes_and(not self.bias and "bias=False",
                               nonlinearity != "tanh" and f"nonlinearity={nonlinearity}")


class DynamicQuantizedLSTMCell(_DynamicCell):
    """``torch.ao.nn.quantized.dynamic.LSTMCell``: ``h, c = cell(x, (h, c))``.

    Example:
        >>> from funcgrad.quantization.modules import DynamicQuantizedLSTMCell
        >>> cell = nn.LSTMCell(4, 8)
        >>> q = DynamicQuantizedLSTMCell.from_float(cell)
        >>> x = jnp.ones((2, 4))
        >>> bool(np.abs(np.asarray(q(x)[0] - cell(x)[0])).max() < 0.02)
        True
    """
    gates = 4

    def forward(self, x, hx=None):
        xw, zeros, mm = self._start(x, hx)
        (h, c), _ = _lstm_cell(mm, (zeros, zeros) if hx is None else hx, xw)
        return h, c


class DynamicQuantizedGRUCell(_DynamicCell):
    """``torch.ao.nn.quantized.dynamic.GRUCell``: ``h = cell(x, h)``."""
    gates = 3

    def forward(self, x, hx=None):
        xw, zeros, mm = self._start(x, hx)
        return _gru_cell(mm, zeros if hx is None else hx, xw)[0]


class DynamicQuantizedRNNCell(_DynamicCell):
    """``torch.ao.nn.quantized.dynamic.RNNCell`` (tanh or relu): ``h = cell(x, h)``."""

    def forward(self, x, hx=None):
        (xw,), zeros, mm = self._start(x, hx)
        act = jnp.tanh if self.nonlinearity == "tanh" else F.relu
        return act(xw + mm(zeros if hx is None else hx))
