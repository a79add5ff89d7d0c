"""Calibration: run a function over data with observers on the activations that feed its
selected products, and return the static ranges a ``QuantizeConfig`` takes.

Observers work on NumPy values on the host (the activations reach them through
``lax.debug_callback``, so calibration runs compiled, scan and cond bodies included):
``MinMaxObserver``, ``MovingAverageMinMaxObserver``, ``PerChannelMinMaxObserver``,
``PercentileObserver`` (a clipped range from percentiles of the values seen) and
``MSEObserver`` (the clipping range whose fake quantization has the least squared error).

Example:
    >>> from funcgrad.quantize import QuantizeConfig, calibrate
    >>> w = np.eye(3, dtype=np.float32)
    >>> f = lambda x: jnp.maximum(x @ w, 0.0) @ w
    >>> ranges = calibrate(f, [jnp.array([[1.0, -2.0, 3.0]]), jnp.array([[0.5, 4.0, 0.0]])])
    >>> ranges
    Ranges({(0,): (-2.0, 4.0), (3,): (0.0, 4.0)})
    >>> qf = funcgrad.quantize(f, QuantizeConfig(activation="static", static_ranges=ranges))
    >>> np.round(np.asarray(qf(jnp.array([[1.0, 2.0, 3.0]]))), 2)
    array([[1.01, 2.02, 2.99]], dtype=float32)
"""
import copy

import numpy as np

from funcgrad import lax, tree_util
from funcgrad.quantize import schemes
from funcgrad.quantize.config import QuantizeConfig
from funcgrad.quantize.rewrite import Rewriter, trace
from funcgrad.transforms.jit import jit


class Observer:
    """Watches values (``update``) and reports a range (``range()``: (lo, hi)) and PyTorch's
    ``calculate_qparams()`` (scale, zero_point) for that range."""
    axis = None

    def __init__(self):
        self.nonfinite = False
        self.count = 0

    def update(self, x):
        x = np.asarray(x, np.float32)
        if not np.all(np.isfinite(x)):
            self.nonfinite = True
            return
        self.count += 1
        self._update(x)

    def range(self):
        if self.count == 0:
            raise ValueError(f"{type(self).__name__}.range: no values observed yet")
        return self._range()

    def calculate_qparams(self, dtype="quint8", symmetric=False):
        """(scale, zero_point) for the observed range in format ``dtype``.

        Example:
            >>> from funcgrad.quantize import MinMaxObserver
            >>> obs = MinMaxObserver()
            >>> obs.update(np.array([-1.0, 3.0]))
            >>> s, z = obs.calculate_qparams("quint8")
            >>> round(float(s), 6), int(z)
            (0.015686, 64)
        """
        lo, hi = self.range()
        return schemes.qparams(lo, hi, schemes.get_format(dtype, type(self).__name__),
                               symmetric)


class MinMaxObserver(Observer):
    """The running minimum and maximum of everything seen.

    Example:
        >>> from funcgrad.quantize import MinMaxObserver
        >>> obs = MinMaxObserver()
        >>> obs.update(np.array([1.0, -2.0])); obs.update(np.array([5.0]))
        >>> obs.range()
        (-2.0, 5.0)
    """

    def _update(self, x):
        lo, hi = float(x.min()), float(x.max())
        if self.count == 1:
            self.lo, self.hi = lo, hi
        else:
            self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)

    def _range(self):
        return self.lo, self.hi


class MovingAverageMinMaxObserver(MinMaxObserver):
    """Exponential moving averages of each batch's minimum and maximum, as PyTorch's
    (``averaging_constant`` weighs the newest batch).

    Example:
        >>> from funcgrad.quantize import MovingAverageMinMaxObserver
        >>> obs = MovingAverageMinMaxObserver(averaging_constant=0.5)
        >>> obs.update(np.array([0.0, 2.0])); obs.update(np.array([0.0, 4.0]))
        >>> obs.range()
        (0.0, 3.0)
    """

    def __init__(self, averaging_constant=0.01):
        super().__init__()
        if not 0 < averaging_constant <= 1:
            raise ValueError(f"MovingAverageMinMaxObserver: averaging_constant must be in "
                             f"(0, 1], got {averaging_constant}")
        self.c = float(averaging_constant)

    def _update(self, x):
        lo, hi = float(x.min()), float(x.max())
        if self.count == 1:
            self.lo, self.hi = lo, hi
        else:
            self.lo += self.c * (lo - self.lo)
            self.hi += self.c * (hi - self.hi)


class PerChannelMinMaxObserver(Observer):
    """Minimum and maximum per index of ``ch_axis`` (arrays). For activations the axis must be
    one the product does not contract (a per-channel scale along a contracted axis cannot be
    taken out of an integer product).

    Example:
        >>> from funcgrad.quantize import PerChannelMinMaxObserver
        >>> obs = PerChannelMinMaxObserver(ch_axis=0)
        >>> obs.update(np.array([[1.0, -1.0], [2.0, 3.0]]))
        >>> obs.range()
        (array([-1.,  2.], dtype=float32), array([1., 3.], dtype=float32))
    """

    def __init__(self, ch_axis=0):
        super().__init__()
        self.axis = ch_axis

    def _update(self, x):
        axis = self.axis % x.ndim
        axes = tuple(d for d in range(x.ndim) if d != axis)
        lo, hi = x.min(axis=axes), x.max(axis=axes)
        if self.count == 1:
            self.lo, self.hi = lo, hi
        else:
            if lo.shape != self.lo.shape:
                raise ValueError(f"PerChannelMinMaxObserver: {lo.shape[0]} channels along "
                                 f"axis {self.axis}, earlier {self.lo.shape[0]}")
            self.lo, self.hi = np.minimum(self.lo, lo), np.maximum(self.hi, hi)

    def _range(self):
        return self.lo, self.hi


class _SampleObserver(Observer):
    """Keeps up to ``max_samples`` of the values seen (every k-th once full)."""

    def __init__(self, max_samples=1 << 20):
        super().__init__()
        self.max_samples = int(max_samples)
        self.samples = np.zeros(0, np.float32)

    def _update(self, x):
        s = np.concatenate([self.samples, x.ravel()])
        while s.size > self.max_samples:
            s = s[::2]
        self.samples = s


class PercentileObserver(_SampleObserver):
    """The range between the ``100 - percentile`` and ``percentile`` percentiles of the
    values seen: outliers are clipped.

    Example:
        >>> from funcgrad.quantize import PercentileObserver
        >>> obs = PercentileObserver(percentile=90.0)
        >>> obs.update(np.arange(101, dtype=np.float32))
        >>> obs.range()
        (10.0, 90.0)
    """

    def __init__(self, percentile=99.99, max_samples=1 << 20):
        super().__init__(max_samples)
        if not 50 < percentile <= 100:
            raise ValueError(f"PercentileObserver: percentile must be in (50, 100], got "
                             f"{percentile}")
        self.percentile = float(percentile)

    def _range(self):
        lo, hi = np.percentile(self.samples, [100 - self.percentile, self.percentile])
        return float(lo), float(hi)


class MSEObserver(_SampleObserver):
    """The range, among the min/max range shrunk by factors down to ``1 / steps``... 1, whose
    fake quantization in ``dtype`` has the least mean squared error on the values seen.

    Example:
        >>> from funcgrad.quantize import MSEObserver
        >>> obs = MSEObserver(dtype="int4")
        >>> obs.update(np.concatenate([np.linspace(-1, 1, 9999), [40.0]]).astype(np.float32))
        >>> lo, hi = obs.range()      # the outlier at 40 is clipped
        >>> round(lo, 2), round(hi, 2)
        (-0.31, 12.4)
    """

    def __init__(self, dtype="int8", symmetric=False, steps=100, max_samples=1 << 20):
        super().__init__(max_samples)
        self.fmt = schemes.get_format(dtype, "MSEObserver")
        self.symmetric, self.steps = symmetric, int(steps)

    def _range(self):
        x = self.samples
        lo0, hi0 = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        best, best_err = (lo0, hi0), np.inf
        for k in range(1, self.steps + 1):
            a = k / self.steps
            scale, zp = schemes.qparams(lo0 * a, hi0 * a, self.fmt, self.symmetric)
            err = float(np.mean((schemes.fake_quantize(x, scale, zp, self.fmt) - x) ** 2))
            if err < best_err:
                best, best_err = (lo0 * a, hi0 * a), err
        return best


class Ranges:
    """Calibrated activation ranges, one per quantized product, keyed by the product's path
    (equation indices through sub-Jaxprs, as ``ProductInfo.path``). Give it to
    ``QuantizeConfig(activation="static", static_ranges=...)``.

    Example:
        >>> from funcgrad.quantize import Ranges
        >>> r = Ranges({(0,): (-1.0, 2.0)})
        >>> r.range_of((0,))
        (-1.0, 2.0)
        >>> Ranges({(0,): (0.0, float("nan"))})
        Traceback (most recent call last):
        ...
        ValueError: Ranges: the range of the product at path (0,) is not finite: (0.0, nan)
    """

    def __init__(self, ranges, axes=None):
        self.ranges, self.axes = {}, dict(axes or {})
        for path, (lo, hi) in ranges.items():
            if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
                raise ValueError(f"Ranges: the range of the product at path {path} is not "
                                 f"finite: ({lo}, {hi})")
            self.ranges[tuple(path)] = (lo, hi)

    def range_of(self, path, where="Ranges"):
        if path not in self.ranges:
            raise ValueError(f"{where}: no calibrated range for the product at path {path}; "
                             f"the ranges cover {sorted(self.ranges)} (calibrate the same "
                             f"function with the same selection)")
        return self.ranges[path]

    def axis_of(self, path):
        return self.axes.get(path)

    def __len__(self):
        return len(self.ranges)

    def __repr__(self):
        def fmt(v):
            return round(float(v), 6) if np.ndim(v) == 0 else np.round(v, 6).tolist()
        items = ", ".join(f"{p}: ({fmt(lo)}, {fmt(hi)})" for p, (lo, hi) in
                          sorted(self.ranges.items()))
        return f"Ranges({{{items}}})"


def _new_observer(observer):
    if isinstance(observer, Observer):
        return copy.deepcopy(observer)
    made = observer()
    if not isinstance(made, Observer):
        raise TypeError(f"calibrate: observer must be an Observer, an Observer class or a "
                        f"function making one; got {type(made).__name__}")
    return made


def calibrate(f, batches, observer=MinMaxObserver, config=None):
    """Run ``f`` over ``batches`` (each an argument tuple, or one argument) and observe the
    activation of every product that ``config`` selects (all by default); returns ``Ranges``.

    ``observer`` is an Observer class, instance (copied per product) or factory. Raises
    ValueError for no batches, for NaN or infinite activations, and when nothing was selected.

    Example:
        >>> from funcgrad.quantize import calibrate, MovingAverageMinMaxObserver
        >>> w = np.ones((2, 2), np.float32)
        >>> batches = [(jnp.array([[0.0, 1.0]]),), (jnp.array([[0.0, 3.0]]),)]
        >>> calibrate(lambda x: x @ w, batches, MovingAverageMinMaxObserver(0.5))
        Ranges({(0,): (0.0, 2.0)})
    """
    cfg = config if config is not None else QuantizeConfig(activation="static")
    observers, axes = {}, {}

    def observe(info, act):
        obs = observers.get(info.path)
        if obs is None:
            obs = observers[info.path] = _new_observer(observer)
        lax.debug_callback(obs.update, act)

    def observed(*args):
        closed, flags, leaves, out_tree = trace(f, args, {}, cfg.weight_argnums,
                                                "funcgrad.quantize.calibrate")
        return Rewriter(cfg, observe).run(closed.jaxpr, closed.consts, leaves, flags, ())
    run = jit(observed)
    n = 0
    for batch in batches:
        args = batch if isinstance(batch, tuple) else (batch,)
        for leaf in tree_util.tree_leaves(run(*args)):
            leaf.block_until_ready()
        n += 1
        bad = [p for p, o in observers.items() if o.nonfinite]
        if bad:
            raise ValueError(f"funcgrad.quantize.calibrate: batch {n - 1} gave NaN or infinite "
                             f"activations to the products at paths {sorted(bad)}")
    if n == 0:
        raise ValueError("funcgrad.quantize.calibrate: no batches to calibrate on")
    if not observers:
        raise ValueError(f"funcgrad.quantize.calibrate: {getattr(f, '__name__', f)!r} has no "
                         f"product that the config selects; nothing to calibrate")
    ranges = {}
    for path, obs in observers.items():
        ranges[path] = obs.range()
        if obs.axis is not None:
            axes[path] = obs.axis
    return Ranges(ranges, axes)


