"""The arithmetic of quantization, written once for NumPy and ``funcgrad.numpy`` alike.

Every function takes its array namespace ``xp`` (``numpy`` by default, ``funcgrad.numpy`` inside
the transform), so the NumPy reference the tests check against is the same formula the
transform runs. Conventions follow PyTorch's observers:

* affine: ``scale = (hi - lo) / (qmax - qmin)``, ``zero_point = qmin - round(lo / scale)``;
* symmetric: ``scale = max(-lo, hi) / ((qmax - qmin) / 2)`` and a zero point of 0 for signed
  formats (the middle of the range for unsigned ones);
* both widen the range to include 0 and keep ``scale >= eps`` (float32's);
* ``q = clip(round(x / scale) + zero_point, qmin, qmax)`` (round half to even) and
  ``x ~ (q - zero_point) * scale``.

fp8 e4m3 is symmetric only: ``scale = max|x| / 448`` and ``q = fp8(clip(x / scale))``.

Example:
    >>> from funcgrad.quantize import schemes
    >>> fmt = schemes.get_format("int8")
    >>> scale, zp = schemes.qparams(-1.0, 2.0, fmt, symmetric=False)
    >>> round(float(scale), 6), int(zp)
    (0.011765, -43)
    >>> schemes.quantize(np.array([-1.0, 0.0, 2.0]), scale, zp, fmt)
    array([-128,  -43,  127], dtype=int8)
"""
import dataclasses

import ml_dtypes
import numpy as np

from funcgrad import lax

EPS = float(np.finfo(np.float32).eps)


@dataclasses.dataclass(frozen=True)
class Format:
    """A quantized number format: its name, the dtype values are stored in, and the range of
    representable values (integers for integer formats; ±max for fp8)."""
    name: str
    storage: np.dtype
    qmin: float
    qmax: float
    is_float: bool = False

    @property
    def bits(self):
        if self.is_float:
            return 8
        return int(round(np.log2(self.qmax - self.qmin + 1)))


def _int_format(name, bits, signed=True, storage=None):
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    storage = storage or (np.int8 if signed and bits <= 8 else np.uint8 if bits <= 8 else np.int32)
    return Format(name, np.dtype(storage), lo, hi)


FORMATS = {
    "int8": _int_format("int8", 8),
    "uint8": _int_format("uint8", 8, signed=False),
    "int32": _int_format("int32", 32, storage=np.int32),
    "fp8_e4m3": Format("fp8_e4m3", np.dtype(ml_dtypes.float8_e4m3fn), -448.0, 448.0, True),
}
# emulated narrower widths, stored in int8 containers (int4 included)
FORMATS.update({f"int{b}": _int_format(f"int{b}", b) for b in range(2, 8)})
# PyTorch's reduce_range=True: quint8 values in [0, 127] (x86 kernels avoid int16 overflow)
FORMATS["uint7"] = _int_format("uint7", 7, signed=False)
# PyTorch's quint4x2 (4-bit embedding tables): values in [0, 15]
FORMATS["uint4"] = _int_format("uint4", 4, signed=False)
ALIASES = {"qint8": "int8", "quint8": "uint8", "qint32": "int32", "float8_e4m3fn": "fp8_e4m3",
           "e4m3": "fp8_e4m3", "torch.qint8": "int8", "torch.quint8": "uint8",
           "torch.qint32": "int32", "quint4x2": "uint4", "torch.quint4x2": "uint4"}


def get_format(name, where="quantize"):
    """The Format called ``name`` ("int8", "int4", "int2".."int7", "uint8", "int32",
    "fp8_e4m3", or PyTorch's "qint8"/"quint8"/"qint32", also as a NumPy or torch dtype).

    Example:
        >>> from funcgrad.quantize.schemes import get_format
        >>> fmt = get_format("int4")
        >>> fmt.qmin, fmt.qmax, fmt.storage
        (-8, 7, dtype('int8'))
    """
    if isinstance(name, Format):
        return name
    key = str(name)
    if not isinstance(name, str):
        try:
            key = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8",
                   np.dtype(np.int32): "int32"}.get(np.dtype(name), key)
        except TypeError:
            pass
    key = ALIASES.get(key, key)
    if key not in FORMATS:
        raise ValueError(f"{where}: unknown quantized format {name!r}; expected one of "
                         f"{sorted(FORMATS)} or {sorted(ALIASES)}")
    return FORMATS[key]


def qparams(lo, hi, fmt, symmetric=True, xp=np, narrow=False):
    """(scale, zero_point) mapping the range [lo, hi] (arrays broadcast: per channel) onto
    ``fmt``; scale is float32, zero_point int32 (0 for symmetric signed and float formats).
    ``narrow=True`` maps a symmetric range onto [-qmax, qmax] (``scale = max|x| / qmax``, as
    Qwix and most int8 kernels: the extremes are not clipped) instead of PyTorch's
    ``max|x| / ((qmax - qmin) / 2)``.

    Example:
        >>> from funcgrad.quantize.schemes import qparams, get_format
        >>> s, z = qparams(np.array([-1.0, -4.0]), np.array([1.0, 2.0]), get_format("int8"))
        >>> np.round(s, 5), z
        (array([0.00784, 0.03137], dtype=float32), array([0, 0], dtype=int32))
    """
    fmt = get_format(fmt)
    lo = xp.minimum(xp.asarray(lo, dtype=np.float32), 0.0)
    hi = xp.maximum(xp.asarray(hi, dtype=np.float32), 0.0)
    if fmt.is_float:
        scale = xp.maximum(xp.maximum(-lo, hi) / np.float32(fmt.qmax), np.float32(EPS))
        return scale.astype(np.float32), xp.zeros_like(scale, dtype=np.int32)
    if symmetric:
        amax = xp.maximum(-lo, hi)
        half = fmt.qmax if narrow and fmt.qmin < 0 else (fmt.qmax - fmt.qmin) / 2
        scale = xp.maximum(amax / np.float32(half), np.float32(EPS))
        mid = 0 if fmt.qmin < 0 else (fmt.qmin + fmt.qmax + 1) // 2
        return scale.astype(np.float32), (xp.zeros_like(scale) + mid).astype(np.int32)
    scale = xp.maximum((hi - lo) / np.float32(fmt.qmax - fmt.qmin), np.float32(EPS))
    zp = xp.clip(np.float32(fmt.qmin) - xp.round(lo / scale), fmt.qmin, fmt.qmax)
    return scale.astype(np.float32), zp.astype(np.int32)


def quantize(x, scale, zero_point, fmt, xp=np):
    """Values of ``x`` in ``fmt``, stored in ``fmt.storage`` (scale and zero_point broadcast).

    Example:
        >>> from funcgrad.quantize.schemes import quantize, get_format
        >>> quantize(np.array([0.1, -0.26, 9.0]), 0.1, 0, get_format("int4"))
        array([ 1, -3,  7], dtype=int8)
    """
    fmt = get_format(fmt)
    y = x / scale
    if fmt.is_float:
        return xp.clip(y, fmt.qmin, fmt.qmax).astype(fmt.storage)
    # float32 cannot hold int32's maximum: clip to the largest float32 below it
    qmax = fmt.qmax if fmt.storage.itemsize < 4 else float(np.nextafter(np.float32(2 ** 31), 0))
    y = xp.round(y)
    if not _is_zero(zero_point):
        y = y + zero_point
    return xp.clip(y, fmt.qmin, qmax).astype(fmt.storage)


def dequantize(q, scale, zero_point, xp=np):
    """Float32 values of stored ``q``: ``(q - zero_point) * scale``.

    Example:
        >>> from funcgrad.quantize.schemes import dequantize
        >>> dequantize(np.array([-3, 0, 7], np.int8), 0.5, 1)
        array([-2. , -0.5,  3. ], dtype=float32)
    """
    q = q.astype(np.float32)
    if not _is_zero(zero_point):
        q = q - xp.asarray(zero_point, dtype=np.float32)
    return (q * xp.asarray(scale, dtype=np.float32)).astype(np.float32)


def _is_zero(zero_point):
    """A zero point known to be 0 when traced (a Python 0): adding it is skipped."""
    return isinstance(zero_point, (int, float)) and zero_point == 0


def fake_quantize(x, scale, zero_point, fmt, xp=np):
    """``dequantize(quantize(x))`` in float: what ``x`` becomes after a round trip.

    Example:
        >>> from funcgrad.quantize.schemes import fake_quantize
        >>> fake_quantize(np.array([0.26, 1.0], np.float32), 0.1, 0, "int4")
        array([0.3, 0.7], dtype=float32)
    """
    fmt = get_format(fmt)
    if xp is np or fmt.is_float or fmt.storage.itemsize >= 4 or _is_zero(zero_point):
        return dequantize(quantize(x, scale, zero_point, fmt, xp), scale, zero_point, xp)
    return shifted_values(x, scale, zero_point, fmt, xp) * xp.asarray(scale, dtype=np.float32)


def shifted_values(x, scale, zero_point, fmt, xp=np):
    """``quantize(x) - zero_point`` as float32, computed as ``clip(round(x / scale), qmin -
    zero_point, qmax - zero_point)``: the same integers (all exactly representable), but the
    zero point enters only the clip bounds, so a compiler need not broadcast it over ``x``
    (XLA:CPU materializes such broadcasts when it fuses the values into a library kernel).

    Example:
        >>> from funcgrad.quantize.schemes import shifted_values
        >>> shifted_values(np.array([0.26, 9.0, -9.0, -30.0]), 0.1, 250, "uint8")
        array([   3.,    5.,  -90., -250.], dtype=float32)
    """
    fmt = get_format(fmt)
    z = xp.asarray(zero_point, dtype=np.float32)
    y = xp.round(x / scale).astype(np.float32)
    return xp.clip(y, np.float32(fmt.qmin) - z, np.float32(fmt.qmax) - z).astype(np.float32)


def reduced_range(x, axes, xp=np):
    """(min, max) of ``x`` over ``axes``, kept as size-1 axes (the shape scales broadcast in).

    Example:
        >>> from funcgrad.quantize.schemes import reduced_range
        >>> lo, hi = reduced_range(np.array([[1.0, -2.0], [3.0, 0.5]]), (1,))
        >>> lo.ravel(), hi.ravel()
        (array([-2. ,  0.5]), array([1., 3.]))
    """
    axes = tuple(axes)
    if xp is np:
        return xp.min(x, axis=axes, keepdims=True), xp.max(x, axis=axes, keepdims=True)
    # traced: one variadic reduction computing both in one pass (one XLA:CPU kernel, which
    # XLA may fuse into its consumer; a min and a max, or a max of (x, -x), ran as two or
    # three): inside loop bodies dynamic ranges are taken at every step
    x = xp.asarray(x)
    inf = np.array(np.inf, x.dtype)
    lo, hi = lax.reduce((x, x), (inf, -inf), _min_max, axes)
    kept = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    return xp.reshape(lo, kept), xp.reshape(hi, kept)


def _min_max(a, b):
    return lax.min(a[0], b[0]), lax.max(a[1], b[1])
