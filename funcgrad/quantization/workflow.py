"""PyTorch's eager-mode workflows: ``quantize_dynamic``; ``prepare`` (observers on the inputs,
outputs and weights of Linear/Conv2d and their ReLU fusions), calibration by running data,
``convert``; ``prepare_qat`` (``FakeQuantize`` modules trained with an ordinary jitted step)
then ``convert``. Which submodules: the ``qconfig`` attribute (inherited by children; ``None``
leaves a subtree in float) or a ``qconfig_dict`` of submodule names or module types.

Example:
    >>> from funcgrad.quantization import prepare, convert, QConfig, MinMaxObserver
    >>> from funcgrad.quantization import default_per_channel_weight_observer
    >>> model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)).eval()
    >>> qc = QConfig(activation=MinMaxObserver.with_args(reduce_range=True),
    ...              weight=default_per_channel_weight_observer)
    >>> prepared = prepare(model, qc)
    >>> for _ in range(3):
    ...     _ = prepared(funcgrad.random.normal(funcgrad.random.key(0), (8, 4)))
    >>> q = convert(prepared)
    >>> [type(m).__name__ for m in q]
    ['QuantizedLinear', 'ReLU', 'QuantizedLinear']
"""
import copy

import numpy as np

from funcgrad import lax
from funcgrad import nn
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module
from funcgrad.quantization import embedding as qe
from funcgrad.quantization import modules as qm
from funcgrad.quantization.fake_quantize import FakeQuantize
from funcgrad.quantization.fuse import CONV_KINDS, CONV_RELU, LinearReLU
from funcgrad.quantization.qconfig import QConfig, default_dynamic_qconfig, float16_dynamic_qconfig

_UNSET = object()


class QuantStub(Module):
    """Marks where float values enter the quantized part (``torch.ao.quantization.QuantStub``);
    ``convert`` makes it a ``Quantize`` (rounding to the calibrated grid)."""

    def __init__(self, qconfig=None):
        super().__init__()
        if qconfig is not None:
            self.qconfig = qconfig

    def forward(self, x):
        fq = self._modules.get("activation_post_process")
        return x if fq is None else fq(x)


class DeQuantStub(Module):
    """Marks where values leave the quantized part; ``convert`` makes it ``DeQuantize``."""

    def __init__(self, qconfig=None):
        super().__init__()

    def forward(self, x):
        return x


STATIC_TYPES = (nn.Linear, LinearReLU, QuantStub) + tuple(CONV_KINDS) + CONV_RELU
# the static module of each float convolution: (plain, with ReLU)
QUANTIZED_CONV = {nn.Conv1d: (qm.QuantizedConv1d, qm.QuantizedConvReLU1d),
                  nn.Conv2d: (qm.QuantizedConv2d, qm.QuantizedConvReLU2d),
                  nn.Conv3d: (qm.QuantizedConv3d, qm.QuantizedConvReLU3d)}
# weight-only tables (float_qparams_weight_only_qconfig): quantized at convert, nothing observed
EMBEDDING_MAPPING = {nn.Embedding: qe.QuantizedEmbedding, nn.EmbeddingBag: qe.QuantizedEmbeddingBag}


def _effective_qconfigs(model, qconfig, qconfig_dict):
    """{module name: qconfig or None} for every submodule (inherited from the parent)."""
    by_name = {k: v for k, v in (qconfig_dict or {}).items() if isinstance(k, str)}
    by_type = {k: v for k, v in (qconfig_dict or {}).items() if isinstance(k, type)}
    out = {}

    def visit(prefix, mod, inherited):
        own = mod.__dict__.get("qconfig", _UNSET)
        q = inherited
        if type(mod) in by_type:
            q = by_type[type(mod)]
        if prefix in by_name:
            q = by_name[prefix]
        if own is not _UNSET:
            q = own
        if q is not None and not isinstance(q, QConfig):
            raise TypeError(f"prepare: the qconfig of {prefix or 'the model'!r} must be a "
                            f"QConfig or None, got {type(q).__name__}")
        out[prefix] = q
        for name, child in mod.named_children():
            visit(f"{prefix}.{name}" if prefix else name, child, q)
    visit("", model, qconfig if qconfig is not None else by_name.get("", None))
    return out


def _replace(model, name, new):
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, new)


def _targets(model, qconfigs, types):
    """(name, module, qconfig) of the quantizable leaves (fused units count as leaves)."""
    found, skip = [], set()
    for name, mod in model.named_modules():
        if any(name.startswith(s + ".") for s in skip):
            continue
        if isinstance(mod, types) and qconfigs.get(name) is not None:
            found.append((name, mod, qconfigs[name]))
            skip.add(name)
    return found


def _prepare_targets(model, qconfig, inplace, qconfig_dict, where):
    """(the model or its copy, its quantizable modules with their qconfigs)."""
    if not inplace:
        model = copy.deepcopy(model)
    found = _targets(model, _effective_qconfigs(model, qconfig, qconfig_dict),
                     STATIC_TYPES + tuple(EMBEDDING_MAPPING))
    if not found:
        raise ValueError(f"{where}: no Linear, Conv1d/2d/3d, Embedding(Bag), fused or "
                         f"QuantStub module has a "
                         f"qconfig; set model.qconfig or pass {where}(model, qconfig)")
    return model, found


class _Observed:
    """The host observers of one prepared module (input, output; weight made at convert)."""

    def __init__(self, qconfig, stub):
        self.qconfig = qconfig
        self.input = None if stub else qconfig.activation()
        self.output = qconfig.activation()


def _observe(observer):
    def watch(x):
        lax.debug_callback(observer.update, x)
    return watch


def prepare(model, qconfig=None, inplace=False, qconfig_dict=None):
    """Attach observers for post-training static quantization: every Linear, Conv1d/2d/3d,
    LinearReLU, ConvReLU1d/2d/3d and QuantStub whose qconfig is not None gets observers on its
    input and output (``module.activation_post_process`` is the output's). Run data through
    the result (eagerly or under ``jit``: values reach the observers by
    ``lax.debug_callback``), then ``convert``. Returns the prepared model (a copy unless
    ``inplace``).

    Example:
        >>> from funcgrad.quantization import prepare, get_default_qconfig
        >>> prepared = prepare(nn.Sequential(nn.Linear(2, 2)), get_default_qconfig("x86"))
        >>> _ = funcgrad.jit(lambda m, x: m(x))(prepared, jnp.array([[1.0, -2.0]]))
        >>> prepared[0].activation_post_process.count
        1
    """
    model, found = _prepare_targets(model, qconfig, inplace, qconfig_dict, "prepare")
    for name, mod, qc in found:
        if type(mod) in EMBEDDING_MAPPING:      # weight-only: the qconfig is all convert needs
            _mark_table(name, mod, qc, "prepare")
            continue
        obs = _Observed(qc, isinstance(mod, QuantStub))
        mod.__dict__["_quant_observers"] = obs
        mod.__dict__["activation_post_process"] = obs.output
        if obs.input is not None:
            mod.register_forward_pre_hook(lambda m, args, w=_observe(obs.input): w(args[0]))
        mod.register_forward_hook(lambda m, args, out, w=_observe(obs.output): w(out))
    return model


def _qparams(observer, what, name):
    if observer.nonfinite:
        raise ValueError(f"convert: the {what} observer of {name!r} saw NaN or infinite "
                         f"values during calibration")
    if observer.count == 0:
        raise ValueError(f"convert: the {what} observer of {name!r} saw no data: run "
                         f"calibration batches through the prepared model before convert")
    return observer.calculate_qparams()


def _weight_qparams(weight, factory):
    observer = factory()
    observer.update(np.asarray(weight))
    return observer.calculate_qparams(), observer.symmetric


def _float_parts(mod):
    """(core Linear/Conv, relu?) of a float, fused or QAT module."""
    if isinstance(mod, (LinearReLU,) + CONV_RELU):
        return mod[0], True
    return mod, bool(getattr(mod, "relu", False))


def _check_table_qconfig(name, mod, qconfig, where):
    weight = qconfig.weight()
    if getattr(weight, "qscheme", None) != "per_channel_affine_float_qparams":
        raise ValueError(f"{where}: {type(mod).__name__} {name!r}: embedding quantization is "
                         f"only supported with float_qparams_weight_only_qconfig (or its _4bit "
                         f"variant), got a {type(weight).__name__} weight observer with "
                         f"qscheme={getattr(weight, 'qscheme', None)}; set its qconfig to "
                         f"float_qparams_weight_only_qconfig, or to None to keep it in float")


def _mark_table(name, mod, qconfig, where):
    """Note an embedding table's (checked) qconfig for ``convert``, which quantizes it."""
    _check_table_qconfig(name, mod, qconfig, where)
    mod.__dict__["_quant_table_qconfig"] = qconfig


def _convert_one(name, mod):
    table_qconfig = mod.__dict__.get("_quant_table_qconfig")
    if table_qconfig is not None:
        return EMBEDDING_MAPPING[type(mod)].from_float(mod, table_qconfig.weight)
    if isinstance(mod, DeQuantStub):
        return qm.DeQuantize()
    if isinstance(mod, QuantStub) and "activation_post_process" in mod._modules:
        return qm.Quantize(*mod.activation_post_process.calculate_qparams())
    if isinstance(mod, _QAT):
        fq = mod.weight_fake_quant
        wq, sym = fq.calculate_qparams(), fq.symmetric
        inp = mod.input_fake_quant.calculate_qparams()
        out = mod.activation_post_process.calculate_qparams()
        core, relu = mod, mod.relu
    else:
        obs = mod.__dict__.get("_quant_observers")
        if obs is None:
            return None
        out = _qparams(obs.output, "output", name)
        if isinstance(mod, QuantStub):
            return qm.Quantize(*out)
        inp = _qparams(obs.input, "input", name)
        core, relu = _float_parts(mod)
        wq, sym = _weight_qparams(core.weight, obs.qconfig.weight)
    core_type = getattr(core, "float_type", None) or type(core)
    if core_type in QUANTIZED_CONV:
        cls = QUANTIZED_CONV[core_type][bool(relu)]
        return cls.from_float_conv(core, wq, out, inp, sym)
    cls = qm.QuantizedLinearReLU if relu else qm.QuantizedLinear
    return cls.from_params(core.weight, core.bias, wq, out, inp, sym)


def convert(model, inplace=False):
    """Replace each prepared (or QAT-prepared) module by its quantized version, with the
    ranges its observers saw; ``QuantStub``/``DeQuantStub`` become ``Quantize``/
    ``DeQuantize``. Raises ValueError for a module whose observers saw no data or NaN.

    Example:
        >>> from funcgrad.quantization import prepare, convert, default_qconfig
        >>> prepared = prepare(nn.Sequential(nn.Linear(2, 2)), default_qconfig)
        >>> convert(prepared)
        Traceback (most recent call last):
        ...
        ValueError: convert: the output observer of '0' saw no data: run calibration batches through the prepared model before convert
    """
    if not inplace:
        model = copy.deepcopy(model)
    for name, mod in list(model.named_modules()):
        if not name:
            continue
        new = _convert_one(name, mod)
        if new is not None:
            _replace(model, name, new)
    return model


# --- quantization-aware training -----------------------------------------------------------------
class _QAT(Module):
    """A Linear or convolution (optionally with ReLU) whose input, weight and output pass through
    ``FakeQuantize`` modules: ``input_fake_quant``, ``weight_fake_quant`` and
    ``activation_post_process`` (PyTorch's ``torch.ao.nn.qat`` modules)."""
    relu = False

    @classmethod
    def from_float(cls, mod, qconfig):
        core, relu = _float_parts(mod)
        m = cls.__new__(cls)
        Module.__init__(m)
        for k, v in core.__dict__.items():
            if k not in ("_parameters", "_buffers", "_modules", "_forward_pre_hooks",
                         "_forward_hooks", "_aux", "_origin", "_version", "training",
                         "_non_persistent", "qconfig"):
                object.__setattr__(m, k, v)
        m.weight = core.get_parameter("weight")            # the same box: trained in place
        if core.bias is not None:
            m.bias = core.get_parameter("bias")
        else:
            m.register_parameter("bias", None)
        m.relu = relu
        m.training = mod.training
        m.input_fake_quant = qconfig.activation()
        m.weight_fake_quant = qconfig.weight()
        m.activation_post_process = qconfig.activation()
        wfq = m.weight_fake_quant
        if wfq.ch_axis is not None:      # one range per output channel from the start
            n = core.weight.shape[wfq.ch_axis]
            import funcgrad.numpy as jnp
            wfq.min_val = jnp.full((n,), np.inf, np.float32)
            wfq.max_val = jnp.full((n,), -np.inf, np.float32)
        return m

    def _float_forward(self, x, w):
        raise TypeError(f"{type(self).__name__} is an abstract QAT module")

    def forward(self, x):
        y = self._float_forward(self.input_fake_quant(x), self.weight_fake_quant(self.weight))
        if self.relu:
            y = F.relu(y)
        return self.activation_post_process(y)


class QATLinear(_QAT):
    """``torch.ao.nn.qat.Linear`` (and ``LinearReLU`` with ``relu=True``)."""

    def _float_forward(self, x, w):
        return F.linear(x, w, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}" + (", relu=True" if self.relu else ""))


class _QATConv(_QAT):
    """A QAT convolution; ``float_type`` is the float module it stands for."""
    float_type = None

    def _float_forward(self, x, w):
        conv = {nn.Conv1d: F.conv1d, nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d}[self.float_type]
        return conv(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}" + (", relu=True" if self.relu else ""))


class QATConv1d(_QATConv):
    """``torch.ao.nn.qat.Conv1d`` (and ``ConvReLU1d`` with ``relu=True``)."""
    float_type = nn.Conv1d


class QATConv2d(_QATConv):
    """``torch.ao.nn.qat.Conv2d`` (and ``ConvReLU2d`` with ``relu=True``)."""
    float_type = nn.Conv2d


class QATConv3d(_QATConv):
    """``torch.ao.nn.qat.Conv3d`` (and ``ConvReLU3d`` with ``relu=True``)."""
    float_type = nn.Conv3d


QAT_MODULES = {nn.Linear: QATLinear, nn.Conv1d: QATConv1d, nn.Conv2d: QATConv2d,
               nn.Conv3d: QATConv3d}


def prepare_qat(model, qconfig=None, inplace=False, qconfig_dict=None):
    """Swap Linear/Conv1d/2d/3d (and their ReLU fusions) whose qconfig is set for QAT modules that
    fake-quantize input, weight and output with the qconfig's ``FakeQuantize`` factories
    (``get_default_qat_qconfig("x86")``); QuantStubs get a fake quantizer. Train the result
    with an ordinary (jitted) step, then ``convert``. The QAT modules share the float
    model's Parameter boxes.

    Example:
        >>> from funcgrad.quantization import prepare_qat, get_default_qat_qconfig
        >>> m = prepare_qat(nn.Sequential(nn.Linear(2, 2), nn.ReLU()).train(),
        ...                 get_default_qat_qconfig("x86"))
        >>> type(m[0]).__name__, type(m[0].weight_fake_quant).__name__
        ('QATLinear', 'FakeQuantize')
    """
    model, found = _prepare_targets(model, qconfig, inplace, qconfig_dict, "prepare_qat")
    for name, mod, qc in found:
        if type(mod) in EMBEDDING_MAPPING:      # tables train in float; convert quantizes them
            _mark_table(name, mod, qc, "prepare_qat")
            continue
        probe = qc.activation()
        if not isinstance(probe, FakeQuantize):
            raise TypeError(f"prepare_qat: the qconfig of {name!r} makes "
                            f"{type(probe).__name__}, not FakeQuantize; use "
                            f"get_default_qat_qconfig(...) or QConfig(FakeQuantize.with_args"
                            f"(...), ...)")
        if isinstance(mod, QuantStub):
            mod.activation_post_process = probe
            continue
        core, _ = _float_parts(mod)
        _replace(model, name, QAT_MODULES[type(core)].from_float(mod, qc))
    return model


# --- dynamic quantization ---------------------------------------------------------------------------
DYNAMIC_MAPPING = {nn.Linear: qm.DynamicQuantizedLinear, nn.LSTM: qm.DynamicQuantizedLSTM,
                   nn.GRU: qm.DynamicQuantizedGRU, nn.LSTMCell: qm.DynamicQuantizedLSTMCell,
                   nn.GRUCell: qm.DynamicQuantizedGRUCell, nn.RNNCell: qm.DynamicQuantizedRNNCell}


def _dtype_name(dtype):
    """"qint8"/"float16" for PyTorch's dtype objects, NumPy dtypes and strings."""
    name = str(dtype).replace("torch.", "")
    try:
        return "float16" if np.dtype(dtype) == np.float16 else name
    except TypeError:
        return name


def quantize_dynamic(model, qconfig_spec=None, dtype="qint8", mapping=None, inplace=False):
    """Replace Linear, LSTM, GRU (and LSTMCell, GRUCell, RNNCell) modules by dynamically
    quantized ones: int8 weights
    (PyTorch's default: per-tensor symmetric), activations quantized per tensor at run time
    (quint8 with reduce_range, as PyTorch's x86 kernels). ``qconfig_spec``: a set of module
    types (``{nn.Linear, nn.LSTM}``) or names, or a dict of types/names to QConfigs (``None``
    skips); default: all three types. ``dtype="float16"`` (or ``np.float16``) stores float16
    weights and multiplies in float32 (PyTorch's ``dtype=torch.float16``: half the size, no
    integer rounding). Returns the model (a copy unless ``inplace``).

    Example:
        >>> from funcgrad.quantization import quantize_dynamic
        >>> q = quantize_dynamic(nn.Sequential(nn.LSTM(4, 8), nn.Linear(8, 2)), {nn.LSTM})
        >>> [type(m).__name__ for m in q]
        ['DynamicQuantizedLSTM', 'Linear']
    """
    default = {"qint8": default_dynamic_qconfig,
               "float16": float16_dynamic_qconfig}.get(_dtype_name(dtype))
    if default is None:
        raise ValueError(f"quantize_dynamic: dtype {dtype!r} is not supported; use qint8 "
                         f"(int8 weights, int8 products) or float16 (float16 weights, float32 "
                         f"products)")
    mapping = dict(mapping or DYNAMIC_MAPPING)
    if qconfig_spec is None:
        qconfig_spec = set(mapping)
    if isinstance(qconfig_spec, (set, frozenset, list, tuple)):
        qconfig_spec = {k: default for k in qconfig_spec}
    if not inplace:
        model = copy.deepcopy(model)
    mapping.update({k: v for k, v in EMBEDDING_MAPPING.items() if k not in mapping})
    qconfigs = _effective_qconfigs(model, None, qconfig_spec)
    for name, mod in list(model.named_modules()):
        qc = qconfigs.get(name)
        if qc is None or type(mod) not in mapping:
            continue
        if type(mod) in EMBEDDING_MAPPING:
            _check_table_qconfig(name, mod, qc, "quantize_dynamic")
        new = mapping[type(mod)].from_float(mod, qc.weight)
        if name:
            _replace(model, name, new)
        else:
            return new
    return model
