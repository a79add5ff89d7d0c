"""funcgrad.numpy.fft against numpy.fft: every transform, n/s/axes/norm, plus gradients
(jvp and vjp by finite differences), transposes and vmap."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.test_util import check_grads

F = jnp.fft


def _close(got, want, tol=1e-4):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, atol=tol * scale, rtol=tol)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_1d(rng, name, norm):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    c = (x + 1j * rng.standard_normal((3, 8))).astype(np.complex64)
    inp = x if name in ("rfft", "ihfft") else c
    for n in (None, 6, 11):
        _close(getattr(F, name)(inp, n=n, norm=norm), getattr(np.fft, name)(inp, n=n, norm=norm))
    _close(getattr(F, name)(inp.T, axis=0, norm=norm), getattr(np.fft, name)(inp.T, axis=0,
                                                                             norm=norm))


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_nd(rng, name):
    y = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    inp = y if name.startswith("r") else y.astype(np.complex64)
    for s, axes in [(None, None), ((4, 6), (0, 2)), (None, (1,)), ((2, 3, 4, 6), (0, 1, 2, 3))]:
        _close(getattr(F, name)(inp, s=s, axes=axes), getattr(np.fft, name)(inp, s=s, axes=axes))


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2"])
def test_2d(rng, name):
    y = rng.standard_normal((2, 6, 5)).astype(np.float32)
    inp = y if name.startswith("r") else y.astype(np.complex64)
    _close(getattr(F, name)(inp), getattr(np.fft, name)(inp))
    _close(getattr(F, name)(inp, s=(4, 4), norm="ortho"),
           getattr(np.fft, name)(inp, s=(4, 4), norm="ortho"))


def test_float64(x64, rng):
    x = rng.standard_normal(16)
    out = F.rfft(x)
    assert out.dtype == np.complex128
    _close(out, np.fft.rfft(x), 1e-12)
    _close(F.irfft(out, 16), x, 1e-12)


def test_freqs_and_shifts():
    for n in (4, 5):
        _close(F.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5))
        _close(F.rfftfreq(n), np.fft.rfftfreq(n))
        x = np.arange(n * 3).reshape(3, n)
        np.testing.assert_array_equal(F.fftshift(x), np.fft.fftshift(x))
        np.testing.assert_array_equal(F.ifftshift(x, axes=1), np.fft.ifftshift(x, axes=1))


def test_errors():
    with pytest.raises(TypeError, match="real input"):
        F.rfft(np.ones(4, np.complex64))
    with pytest.raises(ValueError, match="norm"):
        F.fft(np.ones(4), norm="bad")


def test_jit_and_vmap(rng):
    x = rng.standard_normal((3, 8)).astype(np.float32)
    _close(funcgrad.jit(F.rfft)(x), np.fft.rfft(x))
    out = funcgrad.vmap(F.fft, in_axes=1)(x.astype(np.complex64))
    _close(out, np.fft.fft(x.T))
    out = funcgrad.vmap(lambda r: F.irfft(r, 8))(np.fft.rfft(x).astype(np.complex64))
    _close(out, x)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "rfft_odd", "irfft_odd",
                                  "fft2", "rfftn", "irfftn", "hfft"])
def test_grads(rng, name):
    x = rng.standard_normal((2, 6))
    c = x + 1j * rng.standard_normal((2, 6))
    cases = {
        "fft": (lambda z: F.fft(z), c), "ifft": (lambda z: F.ifft(z, norm="ortho"), c),
        "rfft": (lambda z: F.rfft(z), x), "irfft": (lambda z: F.irfft(z), c[:, :4]),
        "rfft_odd": (lambda z: F.rfft(z, n=5), x), "irfft_odd": (lambda z: F.irfft(z, n=7), c),
        "fft2": (lambda z: F.fft2(z), c), "rfftn": (lambda z: F.rfftn(z), x),
        "irfftn": (lambda z: F.irfftn(z, s=(2, 6)), c[:, :4]), "hfft": (lambda z: F.hfft(z), c),
    }
    f, arg = cases[name]
    # real-valued loss so both modes apply to complex inputs too
    check_grads(lambda z: jnp.real(f(z)) + 2 * jnp.imag(f(z)) if jnp.iscomplexobj(f(z))
                else f(z), (arg,), order=1, atol=1e-4, rtol=1e-4)
