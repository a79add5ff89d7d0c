"""``fft``: XLA's fast Fourier transform over up to three trailing dimensions.

``fft_type`` is "FFT" (complex -> complex), "IFFT" (its inverse, scaled by 1/n as NumPy's
``ifft``), "RFFT" (real -> complex, keeping the ``n // 2 + 1`` non-negative frequencies of the
last axis) or "IRFFT" (the inverse of RFFT, complex -> real). ``fft_lengths`` are the sizes of
the transformed trailing dimensions.

Example:
    >>> x = jnp.array([1.0, 0.0, -1.0, 0.0])
    >>> lax.fft(x.astype(jnp.complex64), "FFT", (4,))
    Array([0.+0.j, 2.+0.j, 0.+0.j, 2.+0.j], dtype=complex64)
"""
import math

import numpy as np
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import ad_util, dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching_util import bdim_to_front
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo
from funcgrad.lax.elementwise import conj, convert_element_type, mul, real
from funcgrad.lax.shapes import broadcast_in_dim, full, pad
FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")

fft_p = Primitive("fft")


def _complex_of(dtype):
    return dtypes.complex128 if np.dtype(dtype) in (dtypes.float64, dtypes.complex128) else \
        dtypes.complex64


@fft_p.def_abstract_eval
def _fft_abstract(x, fft_type, fft_lengths):
    if fft_type not in FFT_TYPES:
        raise ValueError(f"lax.fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    k = len(fft_lengths)
    if not 1 <= k <= 3 or k > x.ndim:
        raise TypeError(f"lax.fft: 1 to 3 fft_lengths within the rank of the operand, got "
                        f"{fft_lengths} for {x.str_short()}")
    lead, tail = x.shape[:-k], x.shape[-k:]
    if fft_type in ("FFT", "IFFT"):
        if not dtypes.is_complex(x.dtype):
            raise TypeError(f"lax.fft: {fft_type} needs a complex operand, got {x.str_short()}")
        if tuple(tail) != tuple(fft_lengths):
            raise TypeError(f"lax.fft: fft_lengths {fft_lengths} must equal the trailing dims "
                            f"of {x.str_short()}")
        return ShapedArray(x.shape, x.dtype)
    if fft_type == "RFFT":
        if x.dtype not in (dtypes.float32, dtypes.float64):
            raise TypeError(f"lax.fft: RFFT needs a float32/float64 operand, got "
                            f"{x.str_short()}")
        if tuple(tail) != tuple(fft_lengths):
            raise TypeError(f"lax.fft: fft_lengths {fft_lengths} must equal the trailing dims "
                            f"of {x.str_short()}")
        return ShapedArray(lead + tuple(fft_lengths[:-1]) + (fft_lengths[-1] // 2 + 1,),
                           _complex_of(x.dtype))
    if not dtypes.is_complex(x.dtype):
        raise TypeError(f"lax.fft: IRFFT needs a complex operand, got {x.str_short()}")
    want = tuple(fft_lengths[:-1]) + (fft_lengths[-1] // 2 + 1,)
    if tuple(tail) != want:
        raise TypeError(f"lax.fft: IRFFT of lengths {fft_lengths} needs trailing dims {want}, "
                        f"got {x.str_short()}")
    return ShapedArray(lead + tuple(fft_lengths), dtypes.real_dtype(x.dtype))


def _fft_lowering(ctx, x, fft_type, fft_lengths):
    out = ctx.avals_out[0]
    if any(d == 0 for d in ctx.avals_in[0].shape) or any(d == 0 for d in out.shape):
        return _hlo.zeros_like_aval(out)
    return stablehlo.FftOp(x, stablehlo.FftTypeAttr.get(fft_type), list(fft_lengths),
                           results=[_hlo.ir_type(out)]).result


fft_p.def_lowering(_fft_lowering)


def _fft_jvp(primals, tangents, fft_type, fft_lengths):
    (x,), (t,) = primals, tangents
    y = fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths)
    if ad_util.is_zero(t):
        return y, ad_util.Zero(ad_util.tangent_aval(aval_of(y)))
    return y, fft_p.bind(t, fft_type=fft_type, fft_lengths=fft_lengths)


def _rfft_transpose(ct, fft_lengths, real_dtype):
    # RFFT = slice(FFT(complex(x))): its transpose pads the cotangent back to the full
    # spectrum, applies the (symmetric) FFT and keeps the real part.
    a = aval_of(ct)
    n = fft_lengths[-1]
    n_pad = n - a.shape[-1]
    cfg = [(0, 0, 0)] * (a.ndim - 1) + [(0, n_pad, 0)]
    padded = pad(ct, full((), 0, a.dtype), cfg)
    return convert_element_type(
        real(fft_p.bind(padded, fft_type="FFT", fft_lengths=fft_lengths)), real_dtype)


def _irfft_transpose(ct, fft_lengths):
    # IRFFT(x) = (1/n) * (Hermitian extension of x)'s FFT: the interior frequencies appear
    # twice in the extension, so the transpose doubles them.
    x = fft_p.bind(ct, fft_type="RFFT", fft_lengths=fft_lengths)
    xa = aval_of(x)
    m = xa.shape[-1]
    odd = fft_lengths[-1] % 2
    weights = np.full((m,), 2.0)
    weights[0] = 1.0
    if not odd and m > 1:
        weights[-1] = 1.0
    weights = weights / math.prod(fft_lengths)
    w = broadcast_in_dim(np.asarray(weights, dtypes.real_dtype(xa.dtype)).astype(xa.dtype),
                         xa.shape, (xa.ndim - 1,))
    return conj(mul(x, w))


def _fft_transpose(ct, x, fft_type, fft_lengths):
    if ad_util.is_zero(ct):
        return [ad_util.Zero(x.aval)]
    if fft_type == "RFFT":
        return [_rfft_transpose(ct, fft_lengths, x.aval.dtype)]
    if fft_type == "IRFFT":
        return [_irfft_transpose(ct, fft_lengths)]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


fft_p.def_jvp(_fft_jvp)
fft_p.def_transpose(_fft_transpose)


def _fft_batch(args, dims, fft_type, fft_lengths):
    (x,), (d,) = args, dims
    return fft_p.bind(bdim_to_front(x, d), fft_type=fft_type, fft_lengths=fft_lengths), 0


fft_p.def_batch(_fft_batch)


def fft(x, fft_type, fft_lengths):
    """Apply XLA's FFT of ``fft_type`` over the trailing ``len(fft_lengths)`` dims of ``x``.

    Example:
        >>> lax.fft(jnp.array([1.0, 0.0, -1.0, 0.0]), "RFFT", (4,))
        Array([0.+0.j, 2.+0.j, 0.+0.j], dtype=complex64)
    """
    fft_type = str(fft_type).upper().replace("FFTTYPE.", "")
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=tuple(int(n) for n in fft_lengths))
