"""``funcgrad.quantization``: PyTorch's quantization workflows (``torch.ao.quantization``
names, and torchao's ``quantize_``) on ``funcgrad.quantize``'s integer products.

* dynamic: ``quantize_dynamic(model, {nn.Linear, nn.LSTM, nn.GRU}, dtype="qint8")``;
* static: ``fuse_modules``, ``prepare(model, get_default_qconfig("x86"))``, run calibration
  data, ``convert``;
* QAT: ``prepare_qat(model, get_default_qat_qconfig("x86"))``, train, ``convert``;
* torchao: ``quantize_(model, Int8DynamicActivationInt8WeightConfig())`` and the other configs.

See ``docs/quantization.md``.

Example:
    >>> from funcgrad import quantization as tq
    >>> model = tq.quantize_dynamic(nn.Sequential(nn.Linear(16, 4)), {nn.Linear}, dtype=tq.qint8)
    >>> x = funcgrad.random.normal(funcgrad.random.key(0), (2, 16))
    >>> model(x).shape, type(model[0]).__name__
    ((2, 4), 'DynamicQuantizedLinear')
"""
from funcgrad.quantization.fake_quantize import FakeQuantize
from funcgrad.quantization.fuse import (ConvReLU1d, ConvReLU2d, ConvReLU3d, LinearReLU,
                                        fuse_conv_bn_eval, fuse_modules)
from funcgrad.quantization.modules import (DeQuantize, DynamicQuantizedGRU,
                                           DynamicQuantizedGRUCell, DynamicQuantizedLSTMCell,
                                           DynamicQuantizedRNNCell,
                                           DynamicQuantizedLinear, DynamicQuantizedLSTM,
                                           Quantize, QuantizedConv1d, QuantizedConv2d,
                                           QuantizedConv3d, QuantizedConvReLU1d,
                                           QuantizedConvReLU2d, QuantizedConvReLU3d,
                                           QuantizedLinear, QuantizedLinearReLU)
from funcgrad.quantization.observer import (HistogramObserver, MinMaxObserver,
                                            MovingAverageMinMaxObserver, PerChannelMinMaxObserver,
                                            PlaceholderObserver, default_observer,
                                            per_channel_affine, per_channel_symmetric,
                                            per_tensor_affine, per_tensor_symmetric, qint8,
                                            qint32, quint8, float16, quint4x2,
                                            per_channel_affine_float_qparams)
from funcgrad.quantization.qconfig import (QConfig, default_dynamic_qconfig,
                                           default_per_channel_weight_observer, default_qconfig,
                                           default_weight_observer, get_default_qat_qconfig,
                                           get_default_qconfig, per_channel_dynamic_qconfig,
                                           float16_dynamic_qconfig,
                                           float_qparams_weight_only_qconfig,
                                           float_qparams_weight_only_qconfig_4bit)
from funcgrad.quantization.embedding import QuantizedEmbedding, QuantizedEmbeddingBag
from funcgrad.quantization.torchao import (Float8DynamicActivationFloat8WeightConfig,
                                           Int4WeightOnlyConfig,
                                           Int8DynamicActivationInt8WeightConfig,
                                           Int8WeightOnlyConfig, WeightQuantizedLinear, quantize_)
from funcgrad.quantization.workflow import (DeQuantStub, QATConv1d, QATConv2d, QATConv3d,
                                            QATLinear, QuantStub,
                                            convert, prepare, prepare_qat, quantize_dynamic)

__all__ = [
    "quantize_dynamic", "fuse_modules", "fuse_conv_bn_eval", "prepare", "convert",
    "prepare_qat", "quantize_", "QConfig", "get_default_qconfig", "get_default_qat_qconfig",
    "default_qconfig", "default_dynamic_qconfig", "per_channel_dynamic_qconfig",
    "float16_dynamic_qconfig", "float_qparams_weight_only_qconfig",
    "float_qparams_weight_only_qconfig_4bit", "QuantizedEmbedding", "QuantizedEmbeddingBag",
    "quint4x2", "per_channel_affine_float_qparams",
    "default_weight_observer", "default_per_channel_weight_observer", "default_observer",
    "MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
    "HistogramObserver", "PlaceholderObserver", "FakeQuantize", "QuantStub", "DeQuantStub",
    "Quantize", "DeQuantize", "QuantizedLinear", "QuantizedLinearReLU", "QuantizedConv2d",
    "QuantizedConvReLU2d", "DynamicQuantizedLinear", "DynamicQuantizedLSTM",
    "DynamicQuantizedGRU", "QATLinear", "QATConv2d", "LinearReLU", "ConvReLU2d",
    "QuantizedConv1d", "QuantizedConv3d", "QuantizedConvReLU1d", "QuantizedConvReLU3d",
    "QATConv1d", "QATConv3d", "ConvReLU1d", "ConvReLU3d", "DynamicQuantizedLSTMCell",
    "DynamicQuantizedGRUCell", "DynamicQuantizedRNNCell",
    "WeightQuantizedLinear", "Int8DynamicActivationInt8WeightConfig", "Int8WeightOnlyConfig",
    "Int4WeightOnlyConfig", "Float8DynamicActivationFloat8WeightConfig", "qint8", "quint8",
    "float16", "qint32", "per_tensor_affine", "per_tensor_symmetric", "per_channel_affine",
    "per_channel_symmetric"]
