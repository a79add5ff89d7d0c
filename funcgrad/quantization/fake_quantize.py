"""``FakeQuantize``: quantize-dequantize in float with a straight-through gradient, its range
tracked in buffers (``min_val``, ``max_val``) updated by every forward pass, so a jitted
training step with ``grad`` trains through it and carries the ranges along (quantization-aware
training). The rounding is ``funcgrad.quantize``'s fake quantizer (the one the transform's
``mode="fake"`` uses).

Example:
    >>> from funcgrad.quantization import FakeQuantize
    >>> fq = FakeQuantize()                          # quint8 [0, 255], moving-average range
    >>> fq(jnp.array([0.0, 0.3, 1.0]))
    Array([0.        , 0.29803923, 1.        ], dtype=float32)
    >>> fq.calculate_qparams()
    (array([0.00392157], dtype=float32), array([0], dtype=int32))
"""
import numpy as np

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.nn.module import Module
from funcgrad.quantization import observer as obs
from funcgrad.quantize import schemes
from funcgrad.quantize.rewrite import fake_quant_fn


class FakeQuantize(Module):
    """PyTorch's ``FakeQuantize(observer, quant_min, quant_max, **observer_kwargs)``.

    ``observer`` names how the range is tracked: ``MovingAverageMinMaxObserver`` (moving
    averages, ``averaging_constant``) or ``MinMaxObserver`` / ``PerChannelMinMaxObserver``
    (running min and max); a per-channel ``qscheme`` keeps one range per index of
    ``ch_axis``. ``enable_observer``/``disable_observer`` and
    ``enable_fake_quant``/``disable_fake_quant`` switch the two halves, as in PyTorch.

    Example:
        >>> from funcgrad.quantization import FakeQuantize, PerChannelMinMaxObserver
        >>> fq = FakeQuantize(observer=PerChannelMinMaxObserver, dtype="qint8",
        ...                   qscheme="per_channel_symmetric", ch_axis=0)
        >>> w = jnp.array([[0.5, -1.0], [0.01, 0.02]])
        >>> np.round(np.asarray(fq(w)), 4)
        array([[ 0.502 , -0.9961],
               [ 0.01  ,  0.0199]], dtype=float32)
        >>> grad = funcgrad.grad(lambda w: jnp.sum(fq(w) * 3.0))(w)    # straight through
        >>> np.asarray(grad)
        array([[3., 3.],
               [3., 3.]], dtype=float32)
    """

    def __init__(self, observer=obs.MovingAverageMinMaxObserver, quant_min=None,
                 quant_max=None, **observer_kwargs):
        super().__init__()
        kwargs = dict(observer_kwargs)
        kwargs.setdefault("dtype", obs.quint8)
        proc = observer(quant_min=quant_min, quant_max=quant_max, **kwargs)
        if not isinstance(proc, obs._TorchQParams):
            raise TypeError(f"FakeQuantize: observer must make a funcgrad.quantization "
                            f"observer, got {type(proc).__name__}")
        self.activation_post_process = _ObserverSettings(proc)
        self.dtype, self.qscheme = proc.dtype, proc.qscheme
        self.quant_min, self.quant_max = proc.quant_min, proc.quant_max
        self.ch_axis = getattr(proc, "ch_axis", 0) if "channel" in proc.qscheme else None
        self.averaging_constant = getattr(proc, "averaging_constant", None)
        self.observer_enabled, self.fake_quant_enabled = True, True
        schemes.FORMATS.setdefault(proc.format.name, proc.format)
        self.format_name = proc.format.name
        self.register_buffer("min_val", jnp.asarray(np.float32(np.inf)))
        self.register_buffer("max_val", jnp.asarray(np.float32(-np.inf)))

    with_args = classmethod(obs._TorchQParams.with_args.__func__)

    @property
    def symmetric(self):
        return self.qscheme.endswith("symmetric")

    def enable_observer(self, enabled=True):
        self.observer_enabled = bool(enabled)
        return self

    def disable_observer(self):
        return self.enable_observer(False)

    def enable_fake_quant(self, enabled=True):
        self.fake_quant_enabled = bool(enabled)
        return self

    def disable_fake_quant(self):
        return self.enable_fake_quant(False)

    def _reduce_axes(self, x):
        if self.ch_axis is None:
            return tuple(range(x.ndim))
        axis = self.ch_axis % x.ndim
        return tuple(d for d in range(x.ndim) if d != axis)

    def _observe(self, x):
        v = lax.stop_gradient(x)
        axes = self._reduce_axes(x)
        lo, hi = jnp.min(v, axis=axes), jnp.max(v, axis=axes)
        old_lo, old_hi = self.min_val, self.max_val
        if old_lo.shape != lo.shape:           # the first call of a per-channel quantizer
            old_lo = jnp.full(lo.shape, np.inf, np.float32)
            old_hi = jnp.full(lo.shape, -np.inf, np.float32)
        first = jnp.isinf(old_lo)
        if self.averaging_constant is None:
            new_lo, new_hi = jnp.minimum(old_lo, lo), jnp.maximum(old_hi, hi)
        else:
            c = np.float32(self.averaging_constant)
            new_lo = jnp.where(first, lo, old_lo + c * (lo - old_lo))
            new_hi = jnp.where(first, hi, old_hi + c * (hi - old_hi))
        if tuple(self.min_val.shape) != tuple(new_lo.shape):
            self.min_val, self.max_val = new_lo, new_hi
        else:
            self.update_buffer("min_val", new_lo)
            self.update_buffer("max_val", new_hi)
        return new_lo, new_hi

    def _qparams(self, lo, hi, xp):
        fmt = schemes.get_format(self.format_name)
        scale, zp = schemes.qparams(lo, hi, fmt, self.symmetric, xp)
        if self.symmetric and fmt.qmin >= 0:
            zp = xp.zeros_like(zp) + 128
        return scale, zp

    def forward(self, x):
        x = jnp.asarray(x)
        if self.observer_enabled:
            lo, hi = self._observe(x)
        else:
            lo, hi = self.min_val, self.max_val
        if not self.fake_quant_enabled:
            return x
        scale, zp = self._qparams(lo, hi, jnp)
        if self.ch_axis is not None:
            shape = [1] * x.ndim
            shape[self.ch_axis % x.ndim] = -1
            scale, zp = jnp.reshape(scale, shape), jnp.reshape(zp, shape)
        return fake_quant_fn(self.format_name)(x, scale, zp.astype(np.float32)).astype(x.dtype)

    def calculate_qparams(self):
        """(scale, zero_point) of the current range, as NumPy arrays (PyTorch's shapes).

        Raises ValueError before any value was observed or for a NaN/infinite range."""
        lo, hi = np.asarray(self.min_val), np.asarray(self.max_val)
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError(f"FakeQuantize.calculate_qparams: the range ({lo}, {hi}) is not "
                             f"finite: run data through the model first (or the data held "
                             f"NaN/inf)")
        scale, zp = self._qparams(np.atleast_1d(lo), np.atleast_1d(hi), np)
        return scale.astype(np.float32), zp.astype(np.int32)

    def extra_repr(self):
        return (f"fake_quant_enabled={self.fake_quant_enabled}, observer_enabled="
                f"{self.observer_enabled}, quant_min={self.quant_min}, quant_max="
                f"{self.quant_max}, dtype={self.dtype}, qscheme={self.qscheme}, "
                f"ch_axis={self.ch_axis if self.ch_axis is not None else -1}")


class _ObserverSettings:
    """The observer a FakeQuantize was made with (its settings; the range lives in the
    FakeQuantize's buffers so that it is updated under jit)."""

    def __init__(self, proc):
        self.proc = proc

    def __repr__(self):
        return type(self.proc).__name__ + "(" + self.proc.extra_repr() + ")"
