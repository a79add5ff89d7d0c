"""PyTorch's observers (``torch.ao.quantization.observer``) on top of ``funcgrad.quantize``'s.

Each observer is made with PyTorch's arguments (``dtype``, ``qscheme``, ``reduce_range``,
``quant_min``/``quant_max``, ``eps``), watches NumPy values on the host (``update``, or
calling it) and gives PyTorch's ``calculate_qparams()``: (scale, zero_point) as float32 /
int32 arrays of shape (1,) per tensor or (channels,) per channel, with PyTorch's formulas
(``funcgrad.quantize.schemes.qparams``). ``HistogramObserver`` chooses the range whose
quantization has the least L2 error on a 2048-bin histogram (PyTorch's search).

Example:
    >>> from funcgrad.quantization import MinMaxObserver, qint8, per_tensor_symmetric
    >>> obs = MinMaxObserver(dtype=qint8, qscheme=per_tensor_symmetric)
    >>> obs(np.array([-1.0, 3.0], np.float32))
    array([-1.,  3.], dtype=float32)
    >>> obs.calculate_qparams()
    (array([0.02352941], dtype=float32), array([0], dtype=int32))
"""
import functools

import numpy as np

import funcgrad.quantize as _base  # the observers live in funcgrad.quantize.calibrate
from funcgrad.quantize import schemes

qint8, quint8, qint32 = "qint8", "quint8", "qint32"
float16, float8_e4m3fn = "float16", "float8_e4m3fn"
per_tensor_affine, per_tensor_symmetric = "per_tensor_affine", "per_tensor_symmetric"
per_channel_affine, per_channel_symmetric = "per_channel_affine", "per_channel_symmetric"
# embedding tables: per-row scale and a float zero point, -min / scale (no rounding to the grid)
per_channel_affine_float_qparams = "per_channel_affine_float_qparams"
quint4x2 = "quint4x2"
_FLOAT_PLACEHOLDERS = (float16, "float32")
QSCHEMES = (per_tensor_affine, per_tensor_symmetric, per_channel_affine, per_channel_symmetric,
            per_channel_affine_float_qparams)


def _name(value):
    """PyTorch's dtype/qscheme objects (``torch.qint8``) or funcgrad's strings."""
    return str(value).replace("torch.", "")


def quant_range(dtype, reduce_range=False, quant_min=None, quant_max=None, where="observer"):
    """The integer range [quant_min, quant_max] of ``dtype`` (PyTorch's rules: halved by
    ``reduce_range``; a custom range must lie inside the dtype's).

    Example:
        >>> from funcgrad.quantization.observer import quant_range
        >>> quant_range("quint8", reduce_range=True), quant_range("qint8", reduce_range=True)
        ((0, 127), (-64, 63))
    """
    fmt = schemes.get_format(_name(dtype), where)
    lo, hi = int(fmt.qmin), int(fmt.qmax)
    if quant_min is not None or quant_max is not None:
        if quant_min is None or quant_max is None or not lo <= quant_min < quant_max <= hi:
            raise ValueError(f"{where}: quant_min/quant_max ({quant_min}, {quant_max}) must "
                             f"both be given and lie inside {_name(dtype)}'s [{lo}, {hi}]")
        return int(quant_min), int(quant_max)
    if reduce_range:
        return (lo // 2, hi // 2) if lo < 0 else (lo, hi // 2)
    return lo, hi


class _TorchQParams:
    """PyTorch's constructor arguments and ``calculate_qparams`` for an observer."""

    def _setup(self, dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic):
        where = type(self).__name__
        if _name(qscheme) not in QSCHEMES:
            raise ValueError(f"{where}: unknown qscheme {qscheme!r}; expected one of {QSCHEMES}")
        self.dtype, self.qscheme = _name(dtype), _name(qscheme)
        self.reduce_range, self.eps, self.is_dynamic = bool(reduce_range), float(eps), is_dynamic
        self.quant_min, self.quant_max = quant_range(dtype, reduce_range, quant_min, quant_max,
                                                     where)
        base = schemes.get_format(self.dtype, where)
        self.format = schemes.Format(f"{base.name}[{self.quant_min},{self.quant_max}]",
                                     base.storage, self.quant_min, self.quant_max)
        self.has_customized_qrange = quant_min is not None

    @property
    def symmetric(self):
        return self.qscheme.endswith("symmetric")

    def __call__(self, x):
        """Observe ``x`` and return it unchanged (PyTorch's ``forward``)."""
        self.update(x)
        return x

    forward = __call__

    def calculate_qparams(self):
        """(scale, zero_point) for the observed range, as PyTorch computes them."""
        if self.qscheme == per_channel_affine_float_qparams:
            return self._float_qparams()
        lo, hi = self.range()
        scale, zp = schemes.qparams(np.atleast_1d(lo), np.atleast_1d(hi), self.format,
                                    self.symmetric)
        if self.symmetric and self.format.qmin >= 0:
            # PyTorch: the middle of the unsigned range, 128 unless the range is customized
            mid = (self.quant_min + self.quant_max) // 2 if self.has_customized_qrange else 128
            zp = np.full_like(zp, mid)
        scale = np.maximum(scale, np.float32(self.eps)).astype(np.float32)
        return scale, zp.astype(np.int32)

    def _float_qparams(self):
        """PyTorch's embedding scheme: ``scale = (max - min) / (qmax - qmin)`` (1 where that is
        not above ``eps``) and the float zero point ``-min / scale``, the range not widened to
        hold 0."""
        lo, hi = (np.atleast_1d(np.asarray(v, np.float32)) for v in self.range())
        scale = ((hi - lo) / np.float32(self.quant_max - self.quant_min)).astype(np.float32)
        scale = np.where(scale > np.float32(self.eps), scale, np.float32(1.0)).astype(np.float32)
        return scale, (-lo / scale).astype(np.float32)

    @classmethod
    def with_args(cls, **kwargs):
        """A factory of observers with these arguments (PyTorch's ``with_args``).

        Example:
            >>> from funcgrad.quantization import MinMaxObserver
            >>> MinMaxObserver.with_args(reduce_range=True)().quant_max
            127
        """
        return functools.partial(cls, **kwargs)

    def extra_repr(self):
        return f"dtype={self.dtype}, qscheme={self.qscheme}, reduce_range={self.reduce_range}"

    def __repr__(self):
        state = ""
        if self.count:
            lo, hi = self.range()
            state = f", min_val={np.round(lo, 6)}, max_val={np.round(hi, 6)}"
        return f"{type(self).__name__}({self.extra_repr()}{state})"


class MinMaxObserver(_TorchQParams, _base.MinMaxObserver):
    """The running min and max (``torch.ao.quantization.MinMaxObserver``).

    Example:
        >>> from funcgrad.quantization import MinMaxObserver
        >>> obs = MinMaxObserver()                        # quint8, per-tensor affine
        >>> _ = obs(np.array([-1.0, 3.0], np.float32))
        >>> obs.calculate_qparams()
        (array([0.01568628], dtype=float32), array([64], dtype=int32))
    """

    def __init__(self, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, eps=schemes.EPS, is_dynamic=False, **kwargs):
        _base.MinMaxObserver.__init__(self)
        self._setup(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)


class MovingAverageMinMaxObserver(_TorchQParams, _base.MovingAverageMinMaxObserver):
    """Moving averages of each batch's min and max (``averaging_constant`` weighs the newest).

    Example:
        >>> from funcgrad.quantization import MovingAverageMinMaxObserver
        >>> obs = MovingAverageMinMaxObserver(averaging_constant=0.5)
        >>> _ = obs(np.array([0.0, 2.0], np.float32)); _ = obs(np.array([0.0, 4.0], np.float32))
        >>> obs.range()
        (0.0, 3.0)
    """

    def __init__(self, averaging_constant=0.01, dtype=quint8, qscheme=per_tensor_affine,
                 reduce_range=False, quant_min=None, quant_max=None, eps=schemes.EPS,
                 is_dynamic=False, **kwargs):
        _base.MovingAverageMinMaxObserver.__init__(self, averaging_constant)
        self.averaging_constant = self.c
        self._setup(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)


class PerChannelMinMaxObserver(_TorchQParams, _base.PerChannelMinMaxObserver):
    """Min and max per index of ``ch_axis`` (weights: one scale per output channel).

    Example:
        >>> from funcgrad.quantization import PerChannelMinMaxObserver
        >>> obs = PerChannelMinMaxObserver(dtype="qint8", qscheme="per_channel_symmetric")
        >>> _ = obs(np.array([[-1.0, 3.0], [2.0, 1.0]], np.float32))
        >>> obs.calculate_qparams()
        (array([0.02352941, 0.01568628], dtype=float32), array([0, 0], dtype=int32))
    """

    def __init__(self, ch_axis=0, dtype=quint8, qscheme=per_channel_affine, reduce_range=False,
                 quant_min=None, quant_max=None, eps=schemes.EPS, is_dynamic=False, **kwargs):
        _base.PerChannelMinMaxObserver.__init__(self, ch_axis)
        self.ch_axis = ch_axis
        self._setup(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)

    def extra_repr(self):
        return f"ch_axis={self.ch_axis}, " + super().extra_repr()


class PlaceholderObserver(_TorchQParams, _base.MinMaxObserver):
    """Records nothing that is used: marks a dtype/scheme for dynamic quantization, whose
    activation ranges are computed at run time (PyTorch's ``PlaceholderObserver``).

    ``dtype="float16"`` (``float16_dynamic_qconfig``) marks float16 weights instead: no integer
    grid and no qparams.

    Example:
        >>> from funcgrad.quantization import PlaceholderObserver
        >>> PlaceholderObserver(dtype="quint8", is_dynamic=True).is_dynamic
        True
        >>> PlaceholderObserver(dtype="float16").dtype
        'float16'
    """

    def __init__(self, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, eps=schemes.EPS, is_dynamic=False, **kwargs):
        _base.MinMaxObserver.__init__(self)
        if _name(dtype) in _FLOAT_PLACEHOLDERS:     # float16 weights, or float activations
            self.dtype, self.qscheme, self.is_dynamic = _name(dtype), _name(qscheme), is_dynamic
            self.reduce_range, self.eps = bool(reduce_range), float(eps)
            self.quant_min = self.quant_max = self.format = None
            self.has_customized_qrange = False
            return
        self._setup(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)

    def calculate_qparams(self):
        if self.dtype in _FLOAT_PLACEHOLDERS:
            raise ValueError(f"PlaceholderObserver(dtype={self.dtype}): a {self.dtype} "
                             f"placeholder has no scale or zero point (the values it marks stay "
                             f"{self.dtype})")
        return super().calculate_qparams()


class HistogramObserver(_TorchQParams, _base.MinMaxObserver):
    """A histogram of the values seen (``bins`` over the running min/max) and the sub-range
    whose quantization into ``2 ** 8`` levels has the least L2 error (PyTorch's search: the
    range shrinks from whichever end holds less mass, while the error keeps falling).
    Later batches that widen the range re-spread the old counts over the new bins.

    Example:
        >>> from funcgrad.quantization import HistogramObserver
        >>> obs = HistogramObserver(reduce_range=True)
        >>> _ = obs(np.random.default_rng(0).normal(size=10000).astype(np.float32))
        >>> lo, hi = obs.range()         # the maximum, 3.482, is clipped a little
        >>> round(lo, 3), round(hi, 3)
        (-3.899, 3.478)
    """

    def __init__(self, bins=2048, dtype=quint8, qscheme=per_tensor_affine, reduce_range=False,
                 quant_min=None, quant_max=None, eps=schemes.EPS, is_dynamic=False, **kwargs):
        _base.MinMaxObserver.__init__(self)
        self._setup(dtype, qscheme, reduce_range, quant_min, quant_max, eps, is_dynamic)
        self.bins = int(bins)
        self.dst_nbins = 2 ** 8
        self.histogram = np.zeros(self.bins, np.float64)

    def _update(self, x):
        lo, hi = float(x.min()), float(x.max())
        if self.count == 1:
            self.lo, self.hi = lo, hi
            self.histogram = self._hist(x, lo, hi)
            return
        new_lo, new_hi = min(self.lo, lo), max(self.hi, hi)
        if (new_lo, new_hi) != (self.lo, self.hi):
            self.histogram = self._respread(self.histogram, self.lo, self.hi, new_lo, new_hi)
            self.lo, self.hi = new_lo, new_hi
        self.histogram = self.histogram + self._hist(x, self.lo, self.hi)

    def _hist(self, x, lo, hi):
        if hi == lo:
            h = np.zeros(self.bins)
            h[0] = x.size
            return h
        return np.histogram(x, bins=self.bins, range=(lo, hi))[0].astype(np.float64)

    def _respread(self, hist, lo, hi, new_lo, new_hi):
        """``hist`` over [lo, hi] moved onto ``bins`` bins over [new_lo, new_hi], each old
        bin's count spread uniformly over the new bins it overlaps."""
        edges = np.linspace(lo, hi, self.bins + 1)
        new_edges = np.linspace(new_lo, new_hi, self.bins + 1)
        cum = np.concatenate([[0.0], np.cumsum(hist)])
        # mass below each new edge: linear inside the old bins
        at = np.interp(new_edges, edges, cum) if hi > lo else \
            np.where(new_edges >= lo, cum[-1], 0.0)
        return np.diff(at)

    def _error(self, start, end):
        """L2 error of quantizing the histogram's mass in bins [start, end] into
        ``dst_nbins`` levels (each source bin's mass taken as uniform)."""
        width = (self.hi - self.lo) / self.bins
        dst_width = width * (end - start + 1) / self.dst_nbins
        if dst_width == 0.0:
            return 0.0
        src = np.arange(self.bins)
        begin = (src - start) * width
        stop = begin + width
        d_begin = np.clip(np.floor(begin / dst_width), 0, self.dst_nbins - 1)
        d_end = np.clip(np.floor(stop / dst_width), 0, self.dst_nbins - 1)
        density = self.histogram / width

        def norm(a, b):
            return density * (b ** 3 - a ** 3) / 3.0
        half = dst_width / 2
        err = norm(begin - (d_begin + 0.5) * dst_width, np.full(self.bins, half))
        err = err + (d_end - d_begin - 1) * norm(np.full(self.bins, -half),
                                                 np.full(self.bins, half))
        err = err + norm(np.full(self.bins, -half), stop - (d_end * dst_width + half))
        return float(err.sum())

    def _range(self):
        if self.hi == self.lo:
            return self.lo, self.hi
        total = self.histogram.sum()
        cum = np.cumsum(self.histogram)
        step, alpha, beta = 1e-5, 0.0, 1.0
        start, end = 0, self.bins - 1
        best = np.inf
        while alpha < beta:
            next_alpha, next_beta = alpha + step, beta - step
            left, right = start, end
            while left < end and cum[left] < next_alpha * total:
                left += 1
            while right > start and cum[right] > next_beta * total:
                right -= 1
            new_start, new_end = start, end
            if left - start > end - right:
                new_start, alpha = left, next_alpha
            else:
                new_end, beta = right, next_beta
            if (new_start, new_end) == (start, end):
                continue
            err = self._error(new_start, new_end)
            if err > best:
                break
            best, start, end = err, new_start, new_end
        width = (self.hi - self.lo) / self.bins
        return self.lo + width * start, self.lo + width * (end + 1)


def default_observer(**kwargs):
    """PyTorch's ``default_observer``: MinMaxObserver(quint8, reduce_range=True)."""
    return MinMaxObserver(**{"reduce_range": True, **kwargs})
