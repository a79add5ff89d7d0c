"""funcgrad.scipy.signal: N-d convolution and correlation (as ``jax.scipy.signal``): direct
(XLA's convolution) or through FFTs.

Example:
    >>> from funcgrad.scipy import signal
    >>> signal.convolve(jnp.array([1.0, 2.0, 3.0]), jnp.array([0.0, 1.0, 0.5]))
    Array([0. , 1. , 2.5, 4. , 1.5], dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core import dtypes

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "fftconvolve"]

_MODES = ("full", "same", "valid")


def _operands(name, in1, in2, mode, ndim=None):
    if mode not in _MODES:
        raise ValueError(f"scipy.signal.{name}: mode must be 'full', 'same' or 'valid', got "
                         f"{mode!r}")
    in1, in2 = jnp.asarray(in1), jnp.asarray(in2)
    if in1.ndim != in2.ndim:
        raise ValueError(f"scipy.signal.{name}: in1 and in2 must have the same number of "
                         f"dimensions, got shapes {in1.shape} and {in2.shape}")
    if ndim is not None and in1.ndim != ndim:
        raise ValueError(f"scipy.signal.{name}: expected {ndim}-d inputs, got shapes "
                         f"{in1.shape} and {in2.shape}")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"scipy.signal.{name}: inputs must not be empty, got shapes "
                         f"{in1.shape} and {in2.shape}")
    dt = jnp.result_type(in1, in2)
    return in1.astype(dt), in2.astype(dt), dt


def _valid_swap(name, s1, s2):
    """Whether 'valid' needs the operands swapped (in2 at least as large in every dimension),
    as SciPy; an error when neither contains the other."""
    if all(a >= b for a, b in zip(s1, s2)):
        return False
    if all(b >= a for a, b in zip(s1, s2)):
        return True
    raise ValueError(f"scipy.signal.{name}: for mode='valid' one input must be at least as "
                     f"large as the other in every dimension, got shapes {s1} and {s2}")


def _crop(full, s1, s2, mode):
    """The 'same' (centred, ``s1``) or 'valid' part of a full convolution."""
    if mode == "full":
        return full
    if mode == "same":
        starts = [(f - a) // 2 for f, a in zip(full.shape, s1)]
        sizes = s1
    else:
        sizes = [abs(a - b) + 1 for a, b in zip(s1, s2)]
        starts = [min(a, b) - 1 for a, b in zip(s1, s2)]
    return lax.slice(full, starts, [s + n for s, n in zip(starts, sizes)])


def _direct_full(a, k):
    """The full N-d convolution of real arrays ``a`` and ``k`` with XLA's convolution."""
    nd = a.ndim
    lhs = jnp.reshape(a, (1, 1) + a.shape)
    rhs = jnp.reshape(lax.rev(k, tuple(range(nd))), (1, 1) + k.shape)
    pad = [(s - 1, s - 1) for s in k.shape]
    out = lax.conv_general_dilated(lhs, rhs, (1,) * nd, pad, precision=("HIGHEST", "HIGHEST"))
    return out[0, 0]


def _direct(a, k):
    if jnp.iscomplexobj(a):
        ar, ai, kr, ki = jnp.real(a), jnp.imag(a), jnp.real(k), jnp.imag(k)
        re = _direct_full(ar, kr) - _direct_full(ai, ki)
        im = _direct_full(ar, ki) + _direct_full(ai, kr)
        return lax.complex(re, im)
    return _direct_full(a, k)


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """The N-d convolution of ``in1`` and ``in2`` (``mode``: "full", "same" (centred, the
    size of ``in1``) or "valid"); ``method`` "direct", "fft" or "auto" (direct).

    Example:
        >>> from funcgrad.scipy import signal
        >>> signal.convolve(jnp.ones((4, 4)), jnp.ones((2, 2)), mode="valid")
        Array([[4., 4., 4.],
               [4., 4., 4.],
               [4., 4., 4.]], dtype=float32)
    """
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"scipy.signal.convolve: method must be 'auto', 'direct' or 'fft', "
                         f"got {method!r}")
    if method == "fft":
        return fftconvolve(in1, in2, mode)
    a, k, dt = _operands("convolve", in1, in2, mode)
    s1, s2 = a.shape, k.shape
    if mode == "valid" and _valid_swap("convolve", s1, s2):
        a, k = k, a
        s1, s2 = s2, s1
    work = dt if jnp.issubdtype(dt, jnp.inexact) else dtypes.default_float()
    full = _direct(a.astype(work), k.astype(work))
    out = _crop(full, s1, s2, mode)
    if not jnp.issubdtype(dt, jnp.inexact):
        out = jnp.round(out).astype(dt)
    return out


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The N-d cross-correlation ``sum(in1[n + k] * conj(in2[k]))`` (modes as ``convolve``).

    Example:
        >>> from funcgrad.scipy import signal
        >>> signal.correlate(jnp.array([1.0, 2.0, 3.0]), jnp.array([0.0, 1.0]))
        Array([1., 2., 3., 0.], dtype=float32)
    """
    a, k, _ = _operands("correlate", in1, in2, mode)
    swap = mode == "valid" and _valid_swap("correlate", a.shape, k.shape)
    if swap:
        # SciPy: correlate(a, k) with k larger is the reversed conj of correlate(k, a)
        out = convolve(k, jnp.conj(lax.rev(a, tuple(range(a.ndim)))), mode, method)
        return jnp.conj(lax.rev(out, tuple(range(out.ndim))))
    return convolve(a, jnp.conj(lax.rev(k, tuple(range(k.ndim)))), mode, method)


def _fft_axes(name, ndim, axes):
    if axes is None:
        return tuple(range(ndim))
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    out = []
    for ax in axes:
        if not -ndim <= ax < ndim:
            raise ValueError(f"scipy.signal.{name}: axis {ax} is out of range for {ndim}-d "
                             f"inputs")
        out.append(ax % ndim)
    return tuple(sorted(set(out)))


def fftconvolve(in1, in2, mode="full", axes=None):
    """Convolution through FFTs over ``axes`` (default all; the other axes broadcast, as in
    SciPy), faster than ``convolve`` for long inputs.

    Example:
        >>> from funcgrad.scipy import signal
        >>> signal.fftconvolve(jnp.ones(1000), jnp.ones(100), mode="same").round(2)[:4]
        Array([50., 51., 52., 53.], dtype=float32)
    """
    a, k, dt = _operands("fftconvolve", in1, in2, mode)
    axes = _fft_axes("fftconvolve", a.ndim, axes)
    for ax in range(a.ndim):
        if ax not in axes and a.shape[ax] != k.shape[ax] and 1 not in (a.shape[ax],
                                                                         k.shape[ax]):
            raise ValueError(f"scipy.signal.fftconvolve: shapes {a.shape} and {k.shape} do "
                             f"not broadcast along axis {ax} (not a convolution axis)")
    s1 = [a.shape[ax] for ax in axes]
    s2 = [k.shape[ax] for ax in axes]
    if mode == "valid" and _valid_swap("fftconvolve", s1, s2):
        a, k, s1, s2 = k, a, s2, s1
    work = dt if jnp.issubdtype(dt, jnp.inexact) else dtypes.default_float()
    a, k = a.astype(work), k.astype(work)
    full_len = [x + y - 1 for x, y in zip(s1, s2)]
    if jnp.iscomplexobj(a):
        full = jnp.fft.ifftn(jnp.fft.fftn(a, full_len, axes) * jnp.fft.fftn(k, full_len, axes),
                             full_len, axes)
    else:
        full = jnp.fft.irfftn(jnp.fft.rfftn(a, full_len, axes) *
                              jnp.fft.rfftn(k, full_len, axes), full_len, axes)
    full = full.astype(work)
    if mode != "full":
        starts = [0] * full.ndim
        limits = list(full.shape)
        if mode == "same":
            for ax, f, n in zip(axes, full_len, s1):
                starts[ax] = (f - n) // 2
                limits[ax] = starts[ax] + n
        else:
            for ax, x, y in zip(axes, s1, s2):
                starts[ax] = min(x, y) - 1
                limits[ax] = starts[ax] + abs(x - y) + 1
        full = lax.slice(full, starts, limits)
    if not jnp.issubdtype(dt, jnp.inexact):
        full = jnp.round(full).astype(dt)
    return full


def _check_2d_boundary(name, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise ValueError(f"scipy.signal.{name}: only boundary='fill' with fillvalue=0 is "
                         f"supported, got boundary={boundary!r}, fillvalue={fillvalue!r}; pad "
                         f"the input yourself (jnp.pad with mode='wrap'/'symmetric') and use "
                         f"mode='valid'")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-d convolution (zero boundary).

    Example:
        >>> from funcgrad.scipy import signal
        >>> signal.convolve2d(jnp.ones((5, 5)), jnp.ones((3, 3)), mode="same")
        Array([[4., 6., 6., 6., 4.],
               [6., 9., 9., 9., 6.],
               [6., 9., 9., 9., 6.],
               [6., 9., 9., 9., 6.],
               [4., 6., 6., 6., 4.]], dtype=float32)
    """
    _check_2d_boundary("convolve2d", boundary, fillvalue)
    _operands("convolve2d", in1, in2, mode, ndim=2)
    return convolve(in1, in2, mode)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-d cross-correlation (zero boundary). In mode "same" the window starts at
    ``in2.shape // 2`` of the full result, as SciPy's ``correlate2d`` (``correlate`` starts at
    ``(in2.shape - 1) // 2``: they differ for even kernel sizes).

    Example:
        >>> from funcgrad.scipy import signal
        >>> signal.correlate2d(jnp.ones((5, 5)), jnp.ones((3, 3)), mode="valid")
        Array([[9., 9., 9.],
               [9., 9., 9.],
               [9., 9., 9.]], dtype=float32)
    """
    _check_2d_boundary("correlate2d", boundary, fillvalue)
    a, k, _ = _operands("correlate2d", in1, in2, mode, ndim=2)
    if mode != "same":
        return correlate(a, k, mode)
    full = correlate(a, k, "full")
    starts = [s // 2 for s in k.shape]
    return lax.slice(full, starts, [st + n for st, n in zip(starts, a.shape)])


