"""funcgrad.numpy.fft: NumPy's discrete Fourier transforms on XLA's FFT (as ``jax.numpy.fft``).

All transforms take ``n``/``s`` (crop or zero-pad the input), ``axis``/``axes`` and ``norm``
("backward" (default), "ortho" or "forward"); they differentiate and batch like any other
operation.

Example:
    >>> import funcgrad.numpy as jnp
    >>> jnp.fft.rfft(jnp.arange(8.0))
    Array([28.+0.j       , -4.+9.656855j , -4.+4.j       , -4.+1.6568542j,
           -4.+0.j       ], dtype=complex64)
"""
import math

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.lax.fft import fft as _lax_fft
from funcgrad.numpy import creation as _creation

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")


def _asarray(a):
    from funcgrad.numpy import asarray
    return asarray(a)


def _complex_dtype(dtype):
    if dtype in (dtypes.float64, dtypes.complex128):
        return dtypes.canonicalize(dtypes.complex128)
    return dtypes.complex64


def _real_dtype(dtype):
    if dtype in (dtypes.float64, dtypes.complex128):
        return dtypes.canonicalize(dtypes.float64)
    return dtypes.float32


def _resize(x, axis, size):
    """Crop or zero-pad ``x`` along ``axis`` to ``size``."""
    a = aval_of(x)
    cur = a.shape[axis]
    if cur == size:
        return x
    if cur > size:
        return lax.slice_in_dim(x, 0, size, axis=axis)
    cfg = [(0, 0, 0)] * a.ndim
    cfg[axis] = (0, size - cur, 0)
    return lax.pad(x, lax.full((), 0, a.dtype), cfg)


def _norm_scale(norm, n, inverse):
    """The factor applied after XLA's transform (XLA's IFFT already divides by n)."""
    if norm in (None, "backward"):
        return None
    if norm == "ortho":
        return math.sqrt(n) if inverse else 1.0 / math.sqrt(n)
    return n if inverse else 1.0 / n


def _canon_axes(name, a, s, axes):
    nd = aval_of(a).ndim
    if axes is None:
        axes = tuple(range(nd - len(s), nd)) if s is not None else tuple(range(nd))
    else:
        axes = tuple(int(ax) for ax in np.atleast_1d(axes))
    try:
        axes = tuple(ax % nd if -nd <= ax < nd else _raise() for ax in axes)
    except ValueError:
        raise ValueError(f"numpy.fft.{name}: axes {axes} out of range for an array of rank "
                         f"{nd}") from None
    if len(set(axes)) != len(axes):
        raise ValueError(f"numpy.fft.{name}: repeated axes {axes}")
    if s is not None:
        s = tuple(int(v) for v in np.atleast_1d(s))
        if len(s) != len(axes):
            raise ValueError(f"numpy.fft.{name}: s {s} and axes {axes} differ in length")
        if any(v < 1 for v in s):
            raise ValueError(f"numpy.fft.{name}: invalid transform sizes s={s}")
    return s, axes


def _raise():
    raise ValueError


def _transform(name, a, s, axes, norm, kind):
    """``kind``: "c2c", "c2c_inv", "r2c" or "c2r" over ``axes`` (r2c/c2r: the last axis)."""
    if norm not in _NORMS:
        raise ValueError(f"numpy.fft.{name}: norm must be 'backward', 'ortho' or 'forward', "
                         f"got {norm!r}")
    a = _asarray(a)
    s, axes = _canon_axes(name, a, s, axes)
    if not axes:
        return a
    a_aval = aval_of(a)
    if kind == "r2c":
        if dtypes.is_complex(a_aval.dtype):
            raise TypeError(f"numpy.fft.{name}: expects a real input, got {a_aval.str_short()}")
        a = lax.convert_element_type(a, _real_dtype(a_aval.dtype))
    else:
        a = lax.convert_element_type(a, _complex_dtype(a_aval.dtype))
    shape = aval_of(a).shape
    if s is None:
        s = tuple(shape[ax] for ax in axes)
        if kind == "c2r":
            s = s[:-1] + (2 * (s[-1] - 1),)
    if any(v < 1 for v in s):
        raise ValueError(f"numpy.fft.{name}: invalid transform sizes {s} for input of shape "
                         f"{shape}")
    for ax, n in zip(axes, s):
        size = n // 2 + 1 if (kind == "c2r" and ax == axes[-1]) else n
        a = _resize(a, ax, size)
    # Move the transformed axes to the end, in order.
    nd = len(shape)
    rest = [i for i in range(nd) if i not in axes]
    perm = tuple(rest) + tuple(axes)
    a = lax.transpose(a, perm)
    total = math.prod(s)
    inverse = kind in ("c2c_inv", "c2r")
    if kind in ("c2c", "c2c_inv"):
        ftype = "IFFT" if inverse else "FFT"
        k = len(s)
        # XLA transforms at most 3 dims at once: do the leading ones in extra passes.
        while k > 3:
            a = _pass_on_axis(a, ftype, s, len(rest) + len(s) - k)
            k -= 1
        out = _lax_fft(a, ftype, s[-k:])
    elif kind == "r2c":
        k = len(s)
        out = _lax_fft(a, "RFFT", s[-min(k, 3):])
        for j in range(k - 4, -1, -1):
            out = _pass_on_axis(out, "FFT", s, len(rest) + j)
    else:
        k = len(s)
        for j in range(k - 4, -1, -1):
            a = _pass_on_axis(a, "IFFT", s, len(rest) + j)
        out = _lax_fft(a, "IRFFT", s[-min(k, 3):])
    scale = _norm_scale(norm, total, inverse)
    if scale is not None:
        out = lax.mul(out, lax.full((), scale, aval_of(out).dtype))
    inv = [0] * nd
    for i, p in enumerate(perm):
        inv[p] = i
    return lax.transpose(out, tuple(inv))


def _pass_on_axis(a, ftype, s, axis):
    """A 1-D c2c transform of ``a`` along ``axis`` (moved last and back)."""
    nd = aval_of(a).ndim
    perm = [i for i in range(nd) if i != axis] + [axis]
    inv = [0] * nd
    for i, p in enumerate(perm):
        inv[p] = i
    t = lax.transpose(a, tuple(perm))
    t = _lax_fft(t, ftype, (aval_of(t).shape[-1],))
    return lax.transpose(t, tuple(inv))


def _one(n, axis):
    return None if n is None else (n,), (axis,)


def fft(a, n=None, axis=-1, norm=None):
    """1-D discrete Fourier transform. Example: ``jnp.fft.fft(jnp.arange(4.0))``."""
    s, axes = _one(n, axis)
    return _transform("fft", a, s, axes, norm, "c2c")


def ifft(a, n=None, axis=-1, norm=None):
    """Inverse of ``fft``. Example: ``jnp.fft.ifft(jnp.fft.fft(x))``."""
    s, axes = _one(n, axis)
    return _transform("ifft", a, s, axes, norm, "c2c_inv")


def rfft(a, n=None, axis=-1, norm=None):
    """FFT of a real input: the ``n // 2 + 1`` non-negative frequencies.

    Example:
        >>> jnp.fft.rfft(jnp.ones(8))
        Array([8.+0.j, 0.+0.j, 0.-0.j, 0.+0.j, 0.+0.j], dtype=complex64)
    """
    s, axes = _one(n, axis)
    return _transform("rfft", a, s, axes, norm, "r2c")


def irfft(a, n=None, axis=-1, norm=None):
    """Inverse of ``rfft``; ``n`` (default ``2 * (m - 1)``) is the output length.

    Example:
        >>> x = jnp.array([1.0, 2.0, 0.0, -1.0, 3.0])
        >>> jnp.fft.irfft(jnp.fft.rfft(x), n=x.shape[-1]).round(4)    # odd length: pass n
        Array([ 1.,  2.,  0., -1.,  3.], dtype=float32)
    """
    s, axes = _one(n, axis)
    return _transform("irfft", a, s, axes, norm, "c2r")


def _swap(norm):
    return {None: "forward", "backward": "forward", "forward": "backward",
            "ortho": "ortho"}[norm]


def hfft(a, n=None, axis=-1, norm=None):
    """FFT of a signal with Hermitian symmetry (real spectrum): ``irfft(conj(a))`` scaled.

    Example:
        >>> jnp.fft.hfft(jnp.array([1.0, 2.0, 3.0]))
        Array([ 8., -2.,  0., -2.], dtype=float32)
    """
    if norm not in _NORMS:
        raise ValueError(f"numpy.fft.hfft: invalid norm {norm!r}")
    a = _asarray(a)
    a = lax.convert_element_type(a, _complex_dtype(aval_of(a).dtype))
    return irfft(lax.conj(a), n, axis, _swap(norm))


def ihfft(a, n=None, axis=-1, norm=None):
    """Inverse of ``hfft``: ``conj(rfft(a)) / n``. Example: ``jnp.fft.ihfft(x)``."""
    if norm not in _NORMS:
        raise ValueError(f"numpy.fft.ihfft: invalid norm {norm!r}")
    return lax.conj(rfft(a, n, axis, _swap(norm)))


def fftn(a, s=None, axes=None, norm=None):
    """N-D FFT over ``axes`` (default all, or the last ``len(s)``).

    Example:
        >>> x = jnp.arange(4.0).reshape(2, 2)
        >>> jnp.fft.fftn(x, axes=(0, 1))
        Array([[ 6.+0.j, -2.+0.j],
               [-4.+0.j,  0.+0.j]], dtype=complex64)
    """
    return _transform("fftn", a, s, axes, norm, "c2c")


def ifftn(a, s=None, axes=None, norm=None):
    """Inverse of ``fftn``. Example: ``jnp.fft.ifftn(jnp.fft.fftn(x))``."""
    return _transform("ifftn", a, s, axes, norm, "c2c_inv")


def rfftn(a, s=None, axes=None, norm=None):
    """N-D FFT of a real input (half spectrum along the last axis). Example: ``jnp.fft.rfftn(x)``."""
    return _transform("rfftn", a, s, axes, norm, "r2c")


def irfftn(a, s=None, axes=None, norm=None):
    """Inverse of ``rfftn``. Example: ``jnp.fft.irfftn(jnp.fft.rfftn(x), x.shape)``."""
    return _transform("irfftn", a, s, axes, norm, "c2r")


def fft2(a, s=None, axes=(-2, -1), norm=None):
    """2-D FFT over the last two axes. Example: ``jnp.fft.fft2(img)``."""
    return _transform("fft2", a, s, axes, norm, "c2c")


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    """Inverse of ``fft2``. Example: ``jnp.fft.ifft2(jnp.fft.fft2(img))``."""
    return _transform("ifft2", a, s, axes, norm, "c2c_inv")


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    """2-D FFT of a real input. Example: ``jnp.fft.rfft2(img)``."""
    return _transform("rfft2", a, s, axes, norm, "r2c")


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    """Inverse of ``rfft2``. Example: ``jnp.fft.irfft2(jnp.fft.rfft2(img), img.shape)``."""
    return _transform("irfft2", a, s, axes, norm, "c2r")


def fftfreq(n, d=1.0, dtype=None, device=None):
    """Sample frequencies of an ``n``-point FFT with spacing ``d``.

    Example:
        >>> jnp.fft.fftfreq(4)          # [0., 0.25, -0.5, -0.25]
        Array([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    dtype = dtypes.canonicalize(dtype or dtypes.default_float())
    n = int(n)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    return _creation.asarray(k, dtype=dtype) / (n * d) if n else _creation.zeros((0,), dtype)


def rfftfreq(n, d=1.0, dtype=None, device=None):
    """Sample frequencies of ``rfft`` (the non-negative ones).

    Example:
        >>> jnp.fft.rfftfreq(4)         # [0., 0.25, 0.5]
        Array([0.  , 0.25, 0.5 ], dtype=float32)
    """
    dtype = dtypes.canonicalize(dtype or dtypes.default_float())
    n = int(n)
    return _creation.asarray(np.arange(0, n // 2 + 1), dtype=dtype) / (n * d)


def _shift(name, x, axes, sign):
    from funcgrad.numpy import roll
    x = _asarray(x)
    nd = aval_of(x).ndim
    if axes is None:
        axes = tuple(range(nd))
    elif isinstance(axes, (int, np.integer)):
        axes = (int(axes),)
    shape = aval_of(x).shape
    shifts = tuple(sign * (shape[ax] // 2) if sign > 0 else -(shape[ax] // 2) for ax in axes)
    return roll(x, shifts, axes)


def fftshift(x, axes=None):
    """Move the zero frequency to the centre. Example: ``jnp.fft.fftshift(jnp.fft.fftfreq(5))``."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    """Inverse of ``fftshift``. Example: ``jnp.fft.ifftshift(jnp.fft.fftshift(x))``."""
    return _shift("ifftshift", x, axes, -1)
