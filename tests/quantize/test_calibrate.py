"""Observers and calibration: static activation ranges for funcgrad.quantize."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.quantize import (MinMaxObserver, MovingAverageMinMaxObserver, MSEObserver,
                               PerChannelMinMaxObserver, PercentileObserver, QuantizeConfig,
                               Ranges, calibrate)
from tests.quantize import reference as ref

RNG = np.random.default_rng(4)
W1 = RNG.normal(size=(6, 5)).astype(np.float32)
W2 = RNG.normal(size=(5, 3)).astype(np.float32)
BATCHES = [RNG.normal(size=(8, 6)).astype(np.float32) * s for s in (1.0, 2.0, 0.5)]


def mlp(x):
    return jnp.maximum(x @ W1, 0.0) @ W2


def test_observers_against_numpy():
    a, b = BATCHES[0], BATCHES[1]
    mm = MinMaxObserver()
    mm.update(a); mm.update(b)  # noqa: E702
    assert mm.range() == (float(min(a.min(), b.min())), float(max(a.max(), b.max())))
    ma = MovingAverageMinMaxObserver(0.25)
    ma.update(a); ma.update(b)  # noqa: E702
    assert ma.range() == pytest.approx((a.min() + 0.25 * (b.min() - a.min()),
                                        a.max() + 0.25 * (b.max() - a.max())), rel=1e-6)
    pc = PerChannelMinMaxObserver(ch_axis=1)
    pc.update(a); pc.update(b)  # noqa: E702
    np.testing.assert_array_equal(pc.range()[1], np.maximum(a.max(0), b.max(0)))
    pct = PercentileObserver(99.0)
    pct.update(a); pct.update(b)  # noqa: E702
    both = np.concatenate([a.ravel(), b.ravel()])
    assert pct.range() == pytest.approx(tuple(np.percentile(both, [1.0, 99.0])), rel=1e-6)
    mse = MSEObserver("int8")
    mse.update(a)
    lo, hi = mse.range()
    assert a.min() * 1.0001 <= lo <= 0 <= hi <= a.max() * 1.0001


def test_observer_qparams_against_torch():
    torch = pytest.importorskip("torch")
    from torch.ao.quantization import MovingAverageMinMaxObserver as TorchMA
    from torch.ao.quantization import PerChannelMinMaxObserver as TorchPC
    ours, theirs = MovingAverageMinMaxObserver(0.01), TorchMA(averaging_constant=0.01)
    for b in BATCHES:
        ours.update(b)
        theirs(torch.from_numpy(b))
    s, z = theirs.calculate_qparams()
    os_, oz = ours.calculate_qparams("quint8")
    assert float(os_) == pytest.approx(float(s), rel=1e-6) and int(oz) == int(z)
    ours, theirs = PerChannelMinMaxObserver(ch_axis=0), TorchPC(ch_axis=0, dtype=torch.qint8,
                                                                 qscheme=torch.per_channel_symmetric)
    ours.update(W1)
    theirs(torch.from_numpy(W1))
    s, z = theirs.calculate_qparams()
    os_, oz = ours.calculate_qparams("qint8", symmetric=True)
    np.testing.assert_allclose(os_, s.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(oz, z.numpy())


def test_calibrate_records_the_inputs_of_each_product():
    ranges = calibrate(mlp, BATCHES)
    assert len(ranges) == 2
    (p1, r1), (p2, r2) = sorted(ranges.ranges.items())
    xs = np.concatenate(BATCHES)
    assert r1 == (float(xs.min()), float(xs.max()))
    hidden = np.maximum(xs @ W1, 0)
    assert r2[0] == 0.0 and r2[1] == pytest.approx(float(hidden.max()), rel=1e-5)


def test_static_quantization_matches_numpy_reference():
    ranges = calibrate(mlp, BATCHES)
    cfg = QuantizeConfig(activation="static", static_ranges=ranges)
    x = BATCHES[0]
    got = np.asarray(funcgrad.jit(funcgrad.quantize(mlp, cfg))(x))
    (_, (lo1, hi1)), (_, (lo2, hi2)) = sorted(ranges.ranges.items())

    def static(a, lo, hi, w):
        s = np.float32(max(-lo, hi, 0.0)) / np.float32(127)
        qa = np.clip(np.round(a / s), -128, 127)
        qw, sw = ref.sym_quant(w, (0,))
        return (qa @ qw) * s * sw
    h = np.maximum(static(x, lo1, hi1, W1), 0).astype(np.float32)
    np.testing.assert_allclose(got, static(h, lo2, hi2, W2), rtol=1e-4, atol=1e-4)
    float_out = np.asarray(mlp(x))
    assert np.abs(got - float_out).max() < 0.05 * np.abs(float_out).max()


def test_calibrate_inside_scan_and_with_other_observers():
    def f(xs):
        return lax.scan(lambda c, x: (c, jnp.tanh(x @ W1)), 0.0, xs)[1]
    data = [np.stack(BATCHES[:2])]
    ranges = calibrate(f, data, observer=PercentileObserver(100.0))
    ((path, (lo, hi)),) = ranges.ranges.items()
    assert len(path) == 3          # the scan equation, its body, the product in it
    assert (lo, hi) == pytest.approx((float(data[0].min()), float(data[0].max())))
    cfg = QuantizeConfig(activation="static", static_ranges=ranges)
    got = np.asarray(funcgrad.quantize(f, cfg)(data[0]))
    assert np.abs(got - np.asarray(f(data[0]))).max() < 0.05


def test_per_channel_static_ranges_along_a_free_axis():
    # per-row (axis 0) ranges of the activation: a scale per row factors out of the product
    ranges = calibrate(lambda x: x @ W1, [BATCHES[0]], observer=lambda: PerChannelMinMaxObserver(0))
    cfg = QuantizeConfig(activation="static", static_ranges=ranges)
    got = np.asarray(funcgrad.quantize(lambda x: x @ W1, cfg)(BATCHES[0]))
    np.testing.assert_allclose(got, ref.matmul_dynamic(BATCHES[0], W1), rtol=1e-5, atol=1e-5)
    # along the contracted axis it cannot: a clear error
    ranges = calibrate(lambda x: x @ W1, [BATCHES[0]], observer=lambda: PerChannelMinMaxObserver(1))
    cfg = QuantizeConfig(activation="static", static_ranges=ranges)
    with pytest.raises(ValueError, match="per channel along axis 1, which the product"):
        funcgrad.quantize(lambda x: x @ W1, cfg)(BATCHES[0])


def test_errors():
    bad = BATCHES[0].copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match=r"batch 1 gave NaN or infinite activations .*\(0,\)"):
        calibrate(mlp, [BATCHES[0], bad])
    with pytest.raises(ValueError, match="no batches"):
        calibrate(mlp, [])
    with pytest.raises(ValueError, match="has no product that the config selects"):
        calibrate(lambda x: x * 2.0, [BATCHES[0]])
    with pytest.raises(ValueError, match="not finite"):
        Ranges({(0,): (-np.inf, 1.0)})
    with pytest.raises(ValueError, match=r"no calibrated range for the product at path \(3,\)"):
        cfg = QuantizeConfig(activation="static", static_ranges=Ranges({(0,): (-1.0, 1.0)}))
        funcgrad.quantize(mlp, cfg)(BATCHES[0])
    with pytest.raises(TypeError, match="observer must be an Observer"):
        calibrate(mlp, [BATCHES[0]], observer=lambda: 3)
