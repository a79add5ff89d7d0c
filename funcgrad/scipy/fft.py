"""funcgrad.scipy.fft: discrete cosine transforms (as ``jax.scipy.fft``), types 2 and 3,
computed with FFTs of twice the length.

Example:
    >>> from funcgrad.scipy import fft
    >>> fft.dct(jnp.array([1.0, 2.0, 3.0]))
    Array([12.       , -3.4641013,  0.       ], dtype=float32)
"""
import math

import numpy as np

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core import dtypes

__all__ = ["dct", "dctn", "idct", "idctn"]

_NORMS = (None, "backward", "ortho", "forward")


def _prep(name, x, type, n, axis, norm):
    if type not in (2, 3):
        raise ValueError(f"scipy.fft.{name}: type must be 2 or 3, got {type!r}")
    if norm not in _NORMS:
        raise ValueError(f"scipy.fft.{name}: norm must be None, 'backward', 'ortho' or "
                         f"'forward', got {norm!r}")
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(dtypes.default_float())
    if x.ndim == 0:
        raise ValueError(f"scipy.fft.{name}: expected an array of at least 1 dimension")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"scipy.fft.{name}: axis {axis} is out of range for shape {x.shape}")
    axis %= x.ndim
    if n is not None:
        if n < 1:
            raise ValueError(f"scipy.fft.{name}: n must be positive, got {n}")
        size = x.shape[axis]
        if n < size:
            x = lax.slice_in_dim(x, 0, n, axis=axis)
        elif n > size:
            pad = [(0, 0)] * x.ndim
            pad[axis] = (0, n - size)
            x = jnp.pad(x, pad)
    return x, axis


def _along(v, axis, ndim):
    """A 1-d array ``v`` shaped to broadcast along ``axis`` of an ``ndim``-d array."""
    shape = [1] * ndim
    shape[axis] = -1
    return jnp.reshape(v, shape)


def _dct2(x, axis):
    """Unnormalized DCT-II: y[k] = 2 sum_n x[n] cos(pi k (2n + 1) / (2N))."""
    n = x.shape[axis]
    f = jnp.fft.fft(x, 2 * n, axis=axis)
    f = lax.slice_in_dim(f, 0, n, axis=axis)
    twiddle = np.exp(-1j * np.pi * np.arange(n) / (2 * n))
    out = 2 * jnp.real(f * _along(jnp.asarray(twiddle.astype(f.dtype)), axis, x.ndim))
    return out.astype(x.dtype)


def _dct3(x, axis):
    """Unnormalized DCT-III: y[k] = x[0] + 2 sum_{n>=1} x[n] cos(pi n (2k + 1) / (2N))."""
    n = x.shape[axis]
    weights = np.exp(1j * np.pi * np.arange(n) / (2 * n)) * np.where(np.arange(n) == 0, 1, 2)
    cdt = jnp.result_type(x.dtype, jnp.complex64)
    w = x.astype(cdt) * _along(jnp.asarray(weights.astype(cdt)), axis, x.ndim)
    f = jnp.fft.ifft(w, 2 * n, axis=axis) * (2 * n)
    return jnp.real(lax.slice_in_dim(f, 0, n, axis=axis)).astype(x.dtype)


def _scaled_dct(x, type, axis, norm):
    n = x.shape[axis]
    if type == 2:
        y = _dct2(x, axis)
        if norm == "ortho":
            scale = np.full(n, math.sqrt(1 / (2 * n)))
            scale[0] = math.sqrt(1 / (4 * n))
            y = y * _along(jnp.asarray(scale.astype(y.dtype)), axis, x.ndim)
        elif norm == "forward":
            y = y / (2 * n)
        return y
    if norm == "ortho":
        scale = np.full(n, math.sqrt(1 / (2 * n)))
        scale[0] = math.sqrt(1 / n)
        x = x * _along(jnp.asarray(scale.astype(x.dtype)), axis, x.ndim)
    y = _dct3(x, axis)
    return y / (2 * n) if norm == "forward" else y


_INVERSE_NORM = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": None}


def dct(x, type=2, n=None, axis=-1, norm=None):
    """The discrete cosine transform of type 2 (default) or 3 along ``axis`` (``n``: crop or
    zero-pad to that length first; ``norm``: None/"backward", "ortho" or "forward").

    Example:
        >>> from funcgrad.scipy import fft
        >>> fft.dct(jnp.array([1.0, 2.0, 3.0]), norm="ortho")
        Array([ 3.4641016, -1.4142135,  0.       ], dtype=float32)
    """
    x, axis = _prep("dct", x, type, n, axis, norm)
    return _scaled_dct(x, type, axis, norm)


def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of ``dct`` of the same ``type`` and ``norm``: ``idct(dct(x)) == x``.

    Example:
        >>> from funcgrad.scipy import fft
        >>> fft.idct(fft.dct(jnp.array([1.0, 2.0, 3.0])))
        Array([1.0000002, 2.       , 3.       ], dtype=float32)
    """
    x, axis = _prep("idct", x, type, n, axis, norm)
    return _scaled_dct(x, 5 - type, axis, _INVERSE_NORM[norm])


def _axes_for(name, x, s, axes):
    x = jnp.asarray(x)
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    sizes = [None] * len(axes) if s is None else list(s)
    if len(sizes) != len(axes):
        raise ValueError(f"scipy.fft.{name}: s and axes must have the same length, got "
                         f"s={s} and axes={axes}")
    return axes, sizes


def dctn(x, type=2, s=None, axes=None, norm=None):
    """The N-d discrete cosine transform over ``axes`` (default all).

    Example:
        >>> from funcgrad.scipy import fft
        >>> fft.dctn(jnp.ones((4, 4)), norm="ortho").round(4)
        Array([[ 4., -0.,  0.,  0.],
               [-0., -0.,  0., -0.],
               [ 0.,  0.,  0.,  0.],
               [ 0.,  0.,  0.,  0.]], dtype=float32)
    """
    axes, sizes = _axes_for("dctn", x, s, axes)
    for ax, size in zip(axes, sizes):
        x = dct(x, type, size, ax, norm)
    return x


def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of ``dctn``.

    Example:
        >>> from funcgrad.scipy import fft
        >>> fft.idctn(fft.dctn(jnp.ones((4, 4))))
        Array([[1., 1., 1., 1.],
               [1., 1., 1., 1.],
               [1., 1., 1., 1.],
               [1., 1., 1., 1.]], dtype=float32)
    """
    axes, sizes = _axes_for("idctn", x, s, axes)
    for ax, size in zip(axes, sizes):
        x = idct(x, type, size, ax, norm)
    return x
