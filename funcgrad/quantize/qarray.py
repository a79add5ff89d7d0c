"""Quantized values: ``QArray`` (integers plus scales, a pytree) and PyTorch's constructors
``quantize_per_tensor`` / ``quantize_per_channel`` / ``dequantize``, with PyTorch's numerics
(``q = clamp(round(x / scale) + zero_point)``, round half to even).

Example:
    >>> from funcgrad.quantize import quantize_per_tensor
    >>> q = quantize_per_tensor(jnp.array([-1.0, 0.0, 0.5]), 0.25, 2, "quint8")
    >>> q
    QArray(int_repr=[0 2 4], dtype=quint8, scale=0.25, zero_point=2)
    >>> q.int_repr().dtype, q.dequantize()
    (dtype('uint8'), Array([-0.5,  0. ,  0.5], dtype=float32))
"""
import numpy as np

from funcgrad import numpy as jnp
from funcgrad import tree_util
from funcgrad.core.interpreters import Tracer
from funcgrad.quantize import schemes

_TORCH_NAMES = {"int8": "qint8", "uint8": "quint8", "int32": "qint32"}


class QArray:
    """A quantized array: stored integers ``int_repr()``, per-tensor ``q_scale()`` /
    ``q_zero_point()`` or per-channel ``q_per_channel_scales()`` /
    ``q_per_channel_zero_points()`` along ``q_per_channel_axis()``; ``dequantize()`` gives
    float32 values. A pytree (the integers and scales are its leaves), so it passes through
    ``jit`` and ``vmap`` and saves with ``funcgrad.save``.

    Example:
        >>> from funcgrad.quantize import quantize_per_channel
        >>> w = jnp.array([[1.0, -2.0], [0.1, 0.3]])
        >>> q = quantize_per_channel(w, jnp.array([0.02, 0.01]), jnp.array([0, 0]), 0, "qint8")
        >>> q.int_repr()
        Array([[ 50, -100],
               [  10,   30]], dtype=int8)
        >>> q.q_per_channel_axis(), q.nbytes
        (0, 4)
    """

    def __init__(self, int_repr, scale, zero_point, axis=None, dtype="qint8"):
        fmt = schemes.get_format(dtype, "QArray")
        self._q, self._scale, self._zp = int_repr, scale, zero_point
        self._axis, self._fmt = axis, fmt

    # PyTorch's accessors
    def int_repr(self):
        return self._q

    def _per_tensor(self, what):
        if self._axis is not None:
            raise RuntimeError(f"QArray.{what}: this array is quantized per channel (axis "
                               f"{self._axis}); use q_per_channel_scales/zero_points")

    def q_scale(self):
        self._per_tensor("q_scale")
        return self._scale if isinstance(self._scale, Tracer) else float(np.asarray(self._scale))

    def q_zero_point(self):
        self._per_tensor("q_zero_point")
        return self._zp if isinstance(self._zp, Tracer) else int(np.asarray(self._zp))

    def _per_channel(self, what):
        if self._axis is None:
            raise RuntimeError(f"QArray.{what}: this array is quantized per tensor; use "
                               f"q_scale/q_zero_point")

    def q_per_channel_scales(self):
        self._per_channel("q_per_channel_scales")
        return self._scale

    def q_per_channel_zero_points(self):
        self._per_channel("q_per_channel_zero_points")
        return self._zp

    def q_per_channel_axis(self):
        self._per_channel("q_per_channel_axis")
        return self._axis

    def qscheme(self):
        return "per_tensor_affine" if self._axis is None else "per_channel_affine"

    @property
    def dtype(self):
        """PyTorch's name of the format ("qint8", "quint8", "qint32") or funcgrad's."""
        return _TORCH_NAMES.get(self._fmt.name, self._fmt.name)

    shape = property(lambda self: tuple(self._q.shape))
    ndim = property(lambda self: len(self._q.shape))
    nbytes = property(lambda self: int(np.prod(self._q.shape)) * self._fmt.storage.itemsize)

    def _broadcast(self, v):
        if self._axis is None:
            return v
        shape = [1] * len(self._q.shape)
        shape[self._axis] = -1
        return jnp.reshape(v, shape)

    def dequantize(self):
        return schemes.dequantize(self._q, self._broadcast(self._scale),
                                  self._broadcast(self._zp), jnp)

    def __repr__(self):
        q = np.asarray(self._q) if not isinstance(self._q, Tracer) else self._q
        if self._axis is None:
            return (f"QArray(int_repr={q}, dtype={self.dtype}, scale={self.q_scale()}, "
                    f"zero_point={self.q_zero_point()})")
        return (f"QArray(int_repr={q}, dtype={self.dtype}, axis={self._axis}, "
                f"scales={np.asarray(self._scale)}, zero_points={np.asarray(self._zp)})")


tree_util.register_pytree_node(
    QArray, lambda q: ((q._q, q._scale, q._zp), (q._axis, q._fmt.name)),
    lambda aux, ch: QArray(*ch, axis=aux[0], dtype=aux[1]))


def _check_scale(where, scale):
    if not isinstance(scale, Tracer):
        s = np.asarray(scale, np.float64)
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError(f"{where}: scales must be finite and positive, got {s}")


def quantize_per_tensor(x, scale, zero_point, dtype):
    """``x`` quantized with one ``scale`` and ``zero_point`` into ``dtype`` ("qint8",
    "quint8", "qint32", or funcgrad's "int4"...): as ``torch.quantize_per_tensor``.

    Example:
        >>> from funcgrad.quantize import quantize_per_tensor
        >>> quantize_per_tensor(jnp.array([0.3, -0.3, 100.0]), 0.1, 0, "qint8").int_repr()
        Array([  3,  -3, 127], dtype=int8)
    """
    fmt = schemes.get_format(dtype, "quantize_per_tensor")
    if fmt.is_float:
        raise ValueError("quantize_per_tensor: dtype must be an integer format, got fp8")
    _check_scale("quantize_per_tensor", scale)
    x = jnp.asarray(x, dtype=np.float32)
    scale = jnp.asarray(scale, dtype=np.float32)
    zero_point = jnp.asarray(zero_point, dtype=np.int32)
    return QArray(schemes.quantize(x, scale, zero_point, fmt, jnp), scale, zero_point,
                  None, fmt.name)


def quantize_per_channel(x, scales, zero_points, axis, dtype):
    """``x`` quantized with one scale and zero point per index of ``axis``: as
    ``torch.quantize_per_channel``.

    Example:
        >>> from funcgrad.quantize import quantize_per_channel
        >>> q = quantize_per_channel(jnp.array([[1.0, 1.0], [1.0, 1.0]]), jnp.array([0.5, 0.25]),
        ...                          jnp.array([0, 10]), 1, "quint8")
        >>> q.int_repr()
        Array([[ 2, 14],
               [ 2, 14]], dtype=uint8)
    """
    fmt = schemes.get_format(dtype, "quantize_per_channel")
    x = jnp.asarray(x, dtype=np.float32)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"quantize_per_channel: axis {axis} is out of range for shape "
                         f"{x.shape}")
    axis = axis % x.ndim
    scales = jnp.asarray(scales, dtype=np.float32)
    zero_points = jnp.asarray(zero_points, dtype=np.int32)
    if scales.shape != (x.shape[axis],) or zero_points.shape != (x.shape[axis],):
        raise ValueError(f"quantize_per_channel: scales {scales.shape} and zero_points "
                         f"{zero_points.shape} must both have shape ({x.shape[axis]},), the "
                         f"size of axis {axis} of {x.shape}")
    _check_scale("quantize_per_channel", scales)
    shape = [1] * x.ndim
    shape[axis] = -1
    q = schemes.quantize(x, jnp.reshape(scales, shape), jnp.reshape(zero_points, shape), fmt,
                         jnp)
    return QArray(q, scales, zero_points, axis, fmt.name)


def dequantize(q):
    """Float32 values of a QArray (or a list/tuple of them), as ``torch.dequantize``.

    Example:
        >>> from funcgrad.quantize import dequantize, quantize_per_tensor
        >>> dequantize(quantize_per_tensor(jnp.array([0.26, -1.0]), 0.1, 0, "qint8"))
        Array([ 0.3, -1. ], dtype=float32)
    """
    if isinstance(q, (list, tuple)):
        return type(q)(dequantize(v) for v in q)
    if not isinstance(q, QArray):
        raise TypeError(f"dequantize: expected a QArray, got {type(q).__name__}")
    return q.dequantize()
