"""funcgrad.scipy.signal, .fft (DCT) and .integrate against SciPy (float64), with jit, vmap and
grad."""
import numpy as np
import pytest
import scipy.fft as sfft
import scipy.integrate as sint
import scipy.signal as ssig

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.scipy import fft, integrate, signal

RNG = np.random.default_rng(0)
A2, K2 = RNG.normal(size=(6, 5)), RNG.normal(size=(3, 2))
A1, K1 = RNG.normal(size=10), RNG.normal(size=4) + 1j * RNG.normal(size=4)
A3, K3 = RNG.normal(size=(5, 4, 6)), RNG.normal(size=(2, 3, 2))
MODES = ["full", "same", "valid"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["convolve", "correlate", "fftconvolve"])
def test_nd_matches_scipy(x64, name, mode):
    ours, ref = getattr(signal, name), getattr(ssig, name)
    for a, k in ((A2, K2), (K2, A2), (A3, K3), (A1, K1), (K1, A1)):
        np.testing.assert_allclose(np.asarray(ours(a, k, mode)), ref(a, k, mode),
                                   atol=1e-12, err_msg=f"{a.shape} {k.shape}")


@pytest.mark.parametrize("mode", MODES)
def test_2d_and_integer_inputs(x64, mode):
    np.testing.assert_allclose(np.asarray(signal.convolve2d(A2, K2, mode)),
                               ssig.convolve2d(A2, K2, mode), atol=1e-12)
    np.testing.assert_allclose(np.asarray(signal.correlate2d(A2, K2, mode)),
                               ssig.correlate2d(A2, K2, mode), atol=1e-12)
    ai, ki = np.array([[1, 2, 3], [4, 5, 6]]), np.array([[1, -1]])
    got = signal.convolve(ai, ki, mode)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(got), ssig.convolve(ai, ki, mode))
    np.testing.assert_allclose(np.asarray(signal.convolve(A2, K2, mode, method="fft")),
                               ssig.convolve(A2, K2, mode), atol=1e-12)


def test_fftconvolve_axes(x64):
    b, k = RNG.normal(size=(4, 50)), RNG.normal(size=(1, 7))
    for mode in MODES:
        np.testing.assert_allclose(np.asarray(signal.fftconvolve(b, k, mode, axes=1)),
                                   ssig.fftconvolve(b, k, mode, axes=1), atol=1e-12)


def test_signal_transforms_and_errors(x64):
    f = funcgrad.jit(funcgrad.vmap(lambda a: signal.convolve(a, K1.real, "same")))
    np.testing.assert_allclose(np.asarray(f(A2)), np.stack([ssig.convolve(r, K1.real, "same")
                                                            for r in A2]), atol=1e-12)
    # d/dk sum(convolve(a, k) * w) = correlate(w, a, 'valid')
    w = RNG.normal(size=A1.size + 3)
    g = funcgrad.grad(lambda k: jnp.sum(signal.convolve(A1, k) * w))(jnp.asarray(K1.real))
    np.testing.assert_allclose(np.asarray(g), ssig.correlate(w, A1, "valid"), atol=1e-12)
    with pytest.raises(ValueError, match="convolve: mode must be"):
        signal.convolve(A1, A1, "middle")
    with pytest.raises(ValueError, match="same number of dimensions"):
        signal.convolve(A1, A2)
    with pytest.raises(ValueError, match="one input must be at least as large"):
        signal.convolve(np.ones((2, 5)), np.ones((5, 2)), "valid")
    with pytest.raises(ValueError, match="convolve2d: only boundary='fill'"):
        signal.convolve2d(A2, K2, boundary="wrap")


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("type_", [2, 3])
def test_dct_idct_match_scipy(x64, type_, norm):
    x = RNG.normal(size=(3, 7))
    for n in (None, 5, 9):
        for axis in (-1, 0):
            np.testing.assert_allclose(np.asarray(fft.dct(x, type_, n, axis, norm)),
                                       sfft.dct(x, type_, n, axis, norm), atol=1e-12)
            np.testing.assert_allclose(np.asarray(fft.idct(x, type_, n, axis, norm)),
                                       sfft.idct(x, type_, n, axis, norm), atol=1e-12)
    np.testing.assert_allclose(np.asarray(fft.idct(fft.dct(x, type_, norm=norm), type_,
                                                   norm=norm)), x, atol=1e-12)


def test_dctn_and_transforms(x64):
    x = RNG.normal(size=(4, 5, 3))
    np.testing.assert_allclose(np.asarray(fft.dctn(x, norm="ortho")), sfft.dctn(x, norm="ortho"),
                               atol=1e-12)
    np.testing.assert_allclose(np.asarray(fft.idctn(x, s=(6, 2), axes=(0, 2))),
                               sfft.idctn(x, s=(6, 2), axes=(0, 2)), atol=1e-12)
    np.testing.assert_allclose(np.asarray(fft.dctn(x, axes=1)), sfft.dctn(x, axes=1),
                               atol=1e-12)
    f = funcgrad.jit(funcgrad.vmap(lambda r: fft.dct(r, norm="ortho")))
    np.testing.assert_allclose(np.asarray(f(x[0])), sfft.dct(x[0], norm="ortho"), atol=1e-12)
    # the orthonormal DCT is orthogonal: the gradient of <dct(x), w> is idct(w)
    w = RNG.normal(size=5)
    g = funcgrad.grad(lambda v: jnp.sum(fft.dct(v, norm="ortho") * w))(jnp.asarray(x[0, :, 0]))
    np.testing.assert_allclose(np.asarray(g), sfft.idct(w, norm="ortho"), atol=1e-12)
    assert fft.dct(jnp.ones(4, jnp.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="dct: type must be 2 or 3"):
        fft.dct(x, type=1)


def test_trapezoid(x64):
    y = RNG.normal(size=(3, 8))
    x = np.sort(RNG.uniform(size=8))
    np.testing.assert_allclose(float(integrate.trapezoid(y[0], dx=0.3)),
                               sint.trapezoid(y[0], dx=0.3), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(integrate.trapezoid(y, x)), sint.trapezoid(y, x),
                               rtol=1e-12)
    np.testing.assert_allclose(np.asarray(integrate.trapezoid(y, axis=0)),
                               sint.trapezoid(y, axis=0), rtol=1e-12)
    g = funcgrad.grad(lambda v: integrate.trapezoid(v, dx=0.5))(jnp.ones(4))
    np.testing.assert_allclose(np.asarray(g), [0.25, 0.5, 0.5, 0.25])
