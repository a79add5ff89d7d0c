"""``QConfig``: which observers (or fake quantizers) watch a module's activations and weight,
and PyTorch's defaults per backend (``get_default_qconfig("x86")`` & co.).

Example:
    >>> from funcgrad.quantization import get_default_qconfig
    >>> qc = get_default_qconfig("x86")
    >>> type(qc.activation()).__name__, qc.activation().quant_max, qc.weight().qscheme
    ('HistogramObserver', 127, 'per_channel_symmetric')
"""
import collections

from funcgrad.quantization import observer as obs

_QConfig = collections.namedtuple("QConfig", ["activation", "weight"])


class QConfig(_QConfig):
    """(activation, weight): factories of observers (``MinMaxObserver.with_args(...)``) or of
    ``FakeQuantize`` modules, as PyTorch's ``QConfig``. Set ``model.qconfig`` (or a
    submodule's; ``None`` leaves it in float) before ``prepare``.

    Example:
        >>> from funcgrad.quantization import QConfig, MinMaxObserver, PerChannelMinMaxObserver
        >>> qc = QConfig(activation=MinMaxObserver.with_args(reduce_range=True),
        ...              weight=PerChannelMinMaxObserver.with_args(dtype="qint8",
        ...                                                        qscheme="per_channel_symmetric"))
        >>> qc.weight().dtype
        'qint8'
        >>> QConfig(activation=MinMaxObserver(), weight=MinMaxObserver)
        Traceback (most recent call last):
        ...
        ValueError: QConfig: activation and weight must be observer classes or factories (e.g. MinMaxObserver.with_args(...)), not instances; got MinMaxObserver
    """

    def __new__(cls, activation, weight):
        for f in (activation, weight):
            if isinstance(f, obs._TorchQParams) or not callable(f):
                raise ValueError(f"QConfig: activation and weight must be observer classes or "
                                 f"factories (e.g. MinMaxObserver.with_args(...)), not "
                                 f"instances; got {type(f).__name__}")
        return super().__new__(cls, activation, weight)


default_weight_observer = obs.MinMaxObserver.with_args(dtype=obs.qint8,
                                                       qscheme=obs.per_tensor_symmetric)
default_per_channel_weight_observer = obs.PerChannelMinMaxObserver.with_args(
    dtype=obs.qint8, qscheme=obs.per_channel_symmetric)
default_dynamic_quant_observer = obs.PlaceholderObserver.with_args(
    dtype=obs.quint8, quant_min=0, quant_max=255, is_dynamic=True)
default_qconfig = QConfig(activation=obs.MinMaxObserver.with_args(reduce_range=True),
                          weight=default_weight_observer)
default_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                  weight=default_weight_observer)
per_channel_dynamic_qconfig = QConfig(activation=default_dynamic_quant_observer,
                                      weight=default_per_channel_weight_observer)
# embedding tables (prepare/convert or quantize_dynamic): per-row 8-bit or 4-bit weights with
# float scales and zero points; nothing observed on the activations
float_qparams_weight_only_qconfig = QConfig(
    activation=obs.PlaceholderObserver.with_args(dtype="float32"),
    weight=obs.PerChannelMinMaxObserver.with_args(
        dtype=obs.quint8, qscheme=obs.per_channel_affine_float_qparams, ch_axis=0))
float_qparams_weight_only_qconfig_4bit = QConfig(
    activation=obs.PlaceholderObserver.with_args(dtype="float32"),
    weight=obs.PerChannelMinMaxObserver.with_args(
        dtype=obs.quint4x2, qscheme=obs.per_channel_affine_float_qparams, ch_axis=0))
# quantize_dynamic(..., dtype=float16): float16 weights, float32 products
float16_dynamic_qconfig = QConfig(
    activation=obs.PlaceholderObserver.with_args(dtype=obs.float16, is_dynamic=True),
    weight=obs.PlaceholderObserver.with_args(dtype=obs.float16))
_BACKENDS = ("x86", "fbgemm", "qnnpack", "onednn")


def _check_backend(backend, where):
    if backend not in _BACKENDS:
        raise ValueError(f"{where}: unknown backend {backend!r}; expected one of {_BACKENDS}")


def get_default_qconfig(backend="x86"):
    """PyTorch's post-training static qconfig for ``backend``: on x86/fbgemm a
    ``HistogramObserver(reduce_range=True)`` on activations and per-channel symmetric qint8
    weights; on qnnpack/onednn full-range activations and per-tensor weights.

    Example:
        >>> from funcgrad.quantization import get_default_qconfig
        >>> get_default_qconfig("qnnpack").activation().reduce_range
        False
    """
    _check_backend(backend, "get_default_qconfig")
    if backend in ("x86", "fbgemm"):
        return QConfig(activation=obs.HistogramObserver.with_args(reduce_range=True),
                       weight=default_per_channel_weight_observer)
    if backend == "onednn":
        return QConfig(activation=obs.HistogramObserver.with_args(reduce_range=False),
                       weight=default_per_channel_weight_observer)
    return QConfig(activation=obs.HistogramObserver.with_args(reduce_range=False),
                   weight=default_weight_observer)


def get_default_qat_qconfig(backend="x86"):
    """PyTorch's QAT qconfig: ``FakeQuantize`` with moving-average min/max observers
    (activations quint8, reduced range on x86; weights per-channel symmetric qint8).

    Example:
        >>> from funcgrad.quantization import get_default_qat_qconfig
        >>> fq = get_default_qat_qconfig("x86").weight()
        >>> type(fq).__name__, fq.qscheme, fq.ch_axis
        ('FakeQuantize', 'per_channel_symmetric', 0)
    """
    from funcgrad.quantization.fake_quantize import FakeQuantize
    _check_backend(backend, "get_default_qat_qconfig")
    x86 = backend in ("x86", "fbgemm")
    act = FakeQuantize.with_args(observer=obs.MovingAverageMinMaxObserver, quant_min=0,
                                 quant_max=127 if x86 else 255, dtype=obs.quint8)
    if backend == "qnnpack":
        weight = FakeQuantize.with_args(observer=obs.MovingAverageMinMaxObserver,
                                        dtype=obs.qint8, qscheme=obs.per_tensor_symmetric)
    else:
        weight = FakeQuantize.with_args(observer=obs.PerChannelMinMaxObserver, dtype=obs.qint8,
                                        qscheme=obs.per_channel_symmetric)
    return QConfig(activation=act, weight=weight)
