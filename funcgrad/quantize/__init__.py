"""``funcgrad.quantize``: quantization as a composable Jaxpr transformation.

``funcgrad.quantize(f, config)`` returns ``f`` with its matrix products and convolutions
computed on integers (or fake-quantized for training); the subpackage also holds the config
(``QuantizeConfig``, alias ``Config``), quantized values (``QArray``, ``quantize_per_tensor``,
``quantize_per_channel``, ``dequantize``), observers and ``calibrate`` for static ranges.
The module itself is callable, so ``funcgrad.quantize(f, cfg)`` and
``funcgrad.quantize.calibrate(...)`` both work. See ``docs/quantization.md``.

Example:
    >>> w = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
    >>> qf = funcgrad.quantize(lambda x: x @ w, funcgrad.quantize.Config())
    >>> np.round(np.asarray(qf(jnp.array([[1.0, 2.0]]))), 3)
    array([[ 4.508, -0.504]], dtype=float32)
"""
import sys
import types

from funcgrad.quantize.calibrate import (MinMaxObserver, MSEObserver,
                                         MovingAverageMinMaxObserver, PercentileObserver,
                                         PerChannelMinMaxObserver, Ranges, calibrate)
from funcgrad.quantize.config import ProductInfo, QuantizeConfig
from funcgrad.quantize.qarray import (QArray, dequantize, quantize_per_channel,
                                      quantize_per_tensor)
from funcgrad.quantize.rewrite import quantize, quantize_jaxpr

Config = QuantizeConfig

__all__ = ["quantize", "quantize_jaxpr", "QuantizeConfig", "Config", "ProductInfo", "QArray",
           "quantize_per_tensor", "quantize_per_channel", "dequantize", "calibrate", "Ranges",
           "MinMaxObserver", "MovingAverageMinMaxObserver", "PerChannelMinMaxObserver",
           "PercentileObserver", "MSEObserver"]


class _CallableModule(types.ModuleType):
    """This package's module type: calling the module calls ``quantize``."""

    def __call__(self, f, config=None, **changes):
        return quantize(f, config, **changes)


sys.modules[__name__].__class__ = _CallableModule
