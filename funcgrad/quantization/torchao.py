"""torchao's habit: ``quantize_(model, config)`` swaps every ``nn.Linear`` (that
``filter_fn`` accepts) in place for a weight-quantized Linear; the configs name the scheme and
map onto ``funcgrad.quantize.QuantizeConfig``s (the same integer products as the transform):

* ``Int8DynamicActivationInt8WeightConfig()``: int8 weights per output channel, activations
  per row (token) at run time, symmetric;
* ``Int8WeightOnlyConfig()``: int8 weights per channel, float products;
* ``Int4WeightOnlyConfig(group_size=128)``: int4 weights with one scale per ``group_size``
  inputs (stored in int8 containers, symmetric);
* ``Float8DynamicActivationFloat8WeightConfig()``: fp8 e4m3 weights per channel and
  activations per row at run time.

Example:
    >>> from funcgrad.quantization import quantize_, Int4WeightOnlyConfig
    >>> model = nn.Sequential(nn.Linear(64, 8))
    >>> quantize_(model, Int4WeightOnlyConfig(group_size=32))
    >>> model
    Sequential(
      (0): Linear(in_features=64, out_features=8, bias=True, weight=Int4WeightOnlyConfig(group_size=32))
    )
    >>> model[0].weight.dtype, model[0].weight_scale.shape
    (dtype('int8'), (8, 2))
"""
import dataclasses

import numpy as np

from funcgrad import nn
from funcgrad.nn.module import Module
from funcgrad.quantization import products
from funcgrad.quantization.modules import _arr, _WeightHolder
from funcgrad.quantize import QuantizeConfig, schemes
from funcgrad.quantize.rewrite import Geometry, weight_qparams
from funcgrad.lax.dot import dot_general_p


@dataclasses.dataclass(frozen=True)
class Int8DynamicActivationInt8WeightConfig:
    """int8 weights per channel, int8 activations per row at run time (symmetric)."""

    def quantize_config(self):
        return QuantizeConfig()

    def __repr__(self):
        return "Int8DynamicActivationInt8WeightConfig()"


@dataclasses.dataclass(frozen=True)
class Int8WeightOnlyConfig:
    """int8 weights per output channel; the product stays in float."""

    def quantize_config(self):
        return QuantizeConfig(activation="none")

    def __repr__(self):
        return "Int8WeightOnlyConfig()"


@dataclasses.dataclass(frozen=True)
class Int4WeightOnlyConfig:
    """int4 weights with one scale per ``group_size`` consecutive inputs of each output."""
    group_size: int = 128

    def quantize_config(self):
        return QuantizeConfig(activation="none", weight_dtype="int4", granularity="per_block",
                              block_size=self.group_size)


@dataclasses.dataclass(frozen=True)
class Float8DynamicActivationFloat8WeightConfig:
    """fp8 (e4m3) weights per channel and activations per row at run time."""

    def quantize_config(self):
        return QuantizeConfig(weight_dtype="fp8_e4m3", activation_dtype="fp8_e4m3")

    def __repr__(self):
        return "Float8DynamicActivationFloat8WeightConfig()"


CONFIGS = (Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig, Int4WeightOnlyConfig,
           Float8DynamicActivationFloat8WeightConfig)


class WeightQuantizedLinear(_WeightHolder):
    """A Linear whose weight is stored quantized as ``config`` says (``weight``: integers or
    fp8; ``weight_scale``: per channel, or (out, in // group_size)); prints as ``Linear``
    with its config, as torchao's quantized Linear does.

    Example:
        >>> from funcgrad.quantization.torchao import WeightQuantizedLinear, Int8WeightOnlyConfig
        >>> lin = nn.Linear(4, 2)
        >>> q = WeightQuantizedLinear.from_float(lin, Int8WeightOnlyConfig())
        >>> x = jnp.ones((3, 4))
        >>> bool(np.abs(np.asarray(q(x) - lin(x))).max() < 0.01)
        True
    """

    @classmethod
    def from_float(cls, lin, config):
        m = cls.__new__(cls)
        Module.__init__(m)
        m.in_features, m.out_features, m.config = lin.in_features, lin.out_features, config
        cfg = m.qconfig_ = config.quantize_config()
        w = np.asarray(lin.weight, np.float32)
        params = dict(dimension_numbers=(((1,), (1,)), ((), ())), precision=None,
                      preferred_element_type=None)
        geom = Geometry(dot_general_p, params, (1, w.shape[1]), w.shape)
        if cfg.granularity == "per_block" and w.shape[1] % cfg.block_size:
            raise ValueError(f"quantize_: group_size {cfg.block_size} does not divide "
                             f"in_features {w.shape[1]} of a Linear{w.shape[::-1]}")
        sw, zw = weight_qparams(w, geom, 1, cfg, np)
        if cfg.granularity == "per_block":
            q = schemes.quantize(w.reshape(w.shape[0], -1, cfg.block_size), sw, zw,
                                 cfg.weight_format).reshape(w.shape)
            sw = sw.reshape(w.shape[0], -1)
        else:
            q = schemes.quantize(w, sw, zw, cfg.weight_format)
            sw = sw.reshape(-1)
        m._set_weight(q, sw, np.zeros(sw.shape, np.int32))
        m.register_buffer("bias", None if lin.bias is None else _arr(lin.bias, np.float32))
        return m

    def forward(self, x):
        y = products.linear_product(x, self.weight, self.weight_scale, 0, self.qconfig_)
        return y if self.bias is None else y + self.bias

    def _get_name(self):
        return "Linear"

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, weight={self.config!r}")


def quantize_(model, config, filter_fn=None):
    """Quantize, in place, every ``nn.Linear`` of ``model`` for which
    ``filter_fn(module, fully_qualified_name)`` is true (all by default), as torchao's
    ``quantize_``. Returns None.

    Example:
        >>> from funcgrad.quantization import quantize_, Int8DynamicActivationInt8WeightConfig
        >>> m = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> quantize_(m, Int8DynamicActivationInt8WeightConfig(), lambda mod, fqn: fqn == "2")
        >>> [type(x).__name__ for x in m]
        ['Linear', 'ReLU', 'WeightQuantizedLinear']
    """
    if not isinstance(config, CONFIGS):
        raise TypeError(f"quantize_: config must be one of {[c.__name__ for c in CONFIGS]}, "
                        f"got {type(config).__name__}")
    if isinstance(model, nn.Linear):
        raise TypeError("quantize_: quantizes the Linear submodules of a model in place; wrap "
                        "a lone Linear in nn.Sequential")
    for name, mod in list(model.named_modules()):
        if type(mod) is nn.Linear and (filter_fn is None or filter_fn(mod, name)):
            parent, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, leaf,
                    WeightQuantizedLinear.from_float(mod, config))
