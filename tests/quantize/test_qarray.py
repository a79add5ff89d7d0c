"""Quantized values: QArray and PyTorch's constructors, against PyTorch when installed and a
stored NumPy reference otherwise."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.quantize import (QArray, dequantize, quantize_per_channel, quantize_per_tensor,
                               schemes)

RNG = np.random.default_rng(3)
X = (RNG.normal(size=(4, 6)) * 3).astype(np.float32)


def np_quant(x, scale, zp, qmin, qmax):
    return np.clip(np.round(x / np.float32(scale)) + zp, qmin, qmax)


@pytest.mark.parametrize("dtype,qmin,qmax,zp", [("qint8", -128, 127, 3),
                                                ("quint8", 0, 255, 128),
                                                ("qint32", -2 ** 31, 2 ** 31 - 1, -5)])
def test_per_tensor_numpy_reference(dtype, qmin, qmax, zp):
    q = quantize_per_tensor(X, 0.05, zp, dtype)
    np.testing.assert_array_equal(np.asarray(q.int_repr()), np_quant(X, 0.05, zp, qmin, qmax))
    assert q.q_scale() == pytest.approx(0.05) and q.q_zero_point() == zp
    assert q.dtype == dtype and q.qscheme() == "per_tensor_affine"
    deq = (np.asarray(q.int_repr()).astype(np.float64) - zp) * np.float32(0.05)
    np.testing.assert_allclose(np.asarray(q.dequantize()), deq, rtol=1e-6)


def test_per_channel_numpy_reference():
    scales = np.array([0.01, 0.02, 0.05, 0.1], np.float32)
    zps = np.array([0, 1, -2, 5], np.int32)
    q = quantize_per_channel(X, scales, zps, 0, "qint8")
    want = np_quant(X, scales[:, None], zps[:, None], -128, 127)
    np.testing.assert_array_equal(np.asarray(q.int_repr()), want)
    assert q.q_per_channel_axis() == 0
    np.testing.assert_array_equal(np.asarray(q.q_per_channel_zero_points()), zps)
    np.testing.assert_allclose(np.asarray(dequantize(q)),
                               (want - zps[:, None]) * scales[:, None], rtol=1e-6)


def test_against_torch():
    torch = pytest.importorskip("torch")
    xt = torch.from_numpy(X)
    for dtype, tdt, zp in (("qint8", torch.qint8, 3), ("quint8", torch.quint8, 128),
                           ("qint32", torch.qint32, -5)):
        ours = quantize_per_tensor(X, 0.0371, zp, dtype)
        theirs = torch.quantize_per_tensor(xt, 0.0371, zp, tdt)
        np.testing.assert_array_equal(np.asarray(ours.int_repr()),
                                      theirs.int_repr().numpy())
        np.testing.assert_allclose(np.asarray(ours.dequantize()),
                                   theirs.dequantize().numpy(), rtol=1e-6)
    scales = np.array([0.011, 0.023, 0.05, 0.1, 0.07, 0.02], np.float32)
    zps = np.array([0, 1, -2, 5, 0, 3], np.int64)
    ours = quantize_per_channel(X, scales, zps, 1, "qint8")
    theirs = torch.quantize_per_channel(xt, torch.from_numpy(scales).double(),
                                        torch.from_numpy(zps), 1, torch.qint8)
    np.testing.assert_array_equal(np.asarray(ours.int_repr()), theirs.int_repr().numpy())
    np.testing.assert_allclose(np.asarray(ours.dequantize()), theirs.dequantize().numpy(),
                               rtol=1e-6)
    # observer qparams: PyTorch's MinMaxObserver formulas
    from torch.ao.quantization import MinMaxObserver
    for tdt, name, qscheme, sym in ((torch.quint8, "quint8", torch.per_tensor_affine, False),
                                    (torch.qint8, "qint8", torch.per_tensor_symmetric, True)):
        obs = MinMaxObserver(dtype=tdt, qscheme=qscheme)
        obs(xt)
        s, z = obs.calculate_qparams()
        ours_s, ours_z = schemes.qparams(X.min(), X.max(), name, symmetric=sym)
        assert float(ours_s) == pytest.approx(float(s), rel=1e-6)
        assert int(ours_z) == int(z)


def test_qarray_is_a_pytree_and_stored_as_integers():
    q = quantize_per_channel(X, np.full(4, 0.05, np.float32), np.zeros(4, np.int32), 0,
                             "qint8")
    doubled = funcgrad.jit(lambda q: q.dequantize() * 2)(q)
    np.testing.assert_allclose(np.asarray(doubled), 2 * np.asarray(q.dequantize()))
    same = funcgrad.jit(lambda q: q)(q)
    assert isinstance(same, QArray) and same.q_per_channel_axis() == 0
    assert q.nbytes == X.size and q.int_repr().dtype == np.int8
    assert str(q).startswith("QArray(int_repr=")
    leaves = funcgrad.tree_util.tree_leaves(q)
    assert [str(np.asarray(v).dtype) for v in leaves] == ["int8", "float32", "int32"]


def test_errors():
    q = quantize_per_tensor(X, 0.1, 0, "qint8")
    with pytest.raises(RuntimeError, match="quantized per tensor"):
        q.q_per_channel_scales()
    with pytest.raises(ValueError, match="scales must be finite and positive"):
        quantize_per_tensor(X, 0.0, 0, "qint8")
    with pytest.raises(ValueError, match=r"scales \(3,\) and zero_points \(4,\) must both"):
        quantize_per_channel(X, np.ones(3), np.zeros(4), 0, "qint8")
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        quantize_per_channel(X, np.ones(4), np.zeros(4), 2, "qint8")
    with pytest.raises(ValueError, match="unknown quantized format"):
        quantize_per_tensor(X, 0.1, 0, "qint16")
    with pytest.raises(TypeError, match="expected a QArray"):
        dequantize(jnp.ones(2))
