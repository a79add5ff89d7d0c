"""Image resampling (``jax.image``): ``resize`` and ``scale_and_translate``.

Each spatial dimension is resampled separately by a weight matrix (output pixels x input
pixels) built from the method's kernel evaluated at the distance between an output pixel's
centre, mapped back into the input, and each input pixel's centre. When downsampling with
``antialias`` the kernel is widened by the inverse scale, so it also low-pass filters. Rows are
normalized to sum to 1 and output pixels that map outside the input get zero. The weights are
ordinary array operations, so ``jit``, ``grad`` (in the image, the scale and the translation)
and ``vmap`` work through them.
"""
import enum

import numpy as np

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.lax.precision import Precision

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """Resampling methods: NEAREST, LINEAR, LANCZOS3, LANCZOS5, CUBIC (Keys, a = -0.5),
    CUBIC_PYTORCH (a = -0.75 with repeated edges when not antialiasing, as PyTorch) and AREA
    (the overlap of output and input pixels).

    Example:
        >>> from funcgrad.image import ResizeMethod
        >>> ResizeMethod.from_string("bilinear")
        <ResizeMethod.LINEAR: 1>
    """
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s):
        """The method named ``s`` (JAX's names and aliases such as "bilinear", "tricubic")."""
        names = {"nearest": "NEAREST", "linear": "LINEAR", "bilinear": "LINEAR",
                 "trilinear": "LINEAR", "triangle": "LINEAR", "lanczos3": "LANCZOS3",
                 "lanczos5": "LANCZOS5", "cubic": "CUBIC", "bicubic": "CUBIC",
                 "tricubic": "CUBIC", "cubic-pytorch": "CUBIC_PYTORCH",
                 "bicubic-pytorch": "CUBIC_PYTORCH", "area": "AREA"}
        if s not in names:
            raise ValueError(f"funcgrad.image: unknown resize method {s!r}; use one of "
                             f"{sorted(names)}")
        return ResizeMethod[names[s]]


def _method(method):
    return method if isinstance(method, ResizeMethod) else ResizeMethod.from_string(method)


# --- kernels of the distance |x| (in input pixels) ---------------------------------------------
def _triangle(x):
    return jnp.maximum(0.0, 1.0 - x)


def _lanczos(radius):
    def kernel(x):
        safe = jnp.where(x > 1e-3, x, 1.0)
        y = radius * jnp.sin(np.pi * safe) * jnp.sin(np.pi * safe / radius) / (np.pi ** 2 *
                                                                                 safe ** 2)
        return jnp.where(x > radius, 0.0, jnp.where(x > 1e-3, y, 1.0))
    return kernel


def _cubic(a):
    def kernel(x):
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))
    return kernel


_KERNELS = {ResizeMethod.LINEAR: (1, _triangle), ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
            ResizeMethod.LANCZOS5: (5, _lanczos(5.0)), ResizeMethod.CUBIC: (2, _cubic(-0.5)),
            ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)), ResizeMethod.AREA: (1, None)}


def _normalize(weights, axis):
    total = jnp.sum(weights, axis=axis, keepdims=True)
    big = jnp.abs(total) > 1000.0 * float(np.finfo(np.float32).eps)
    return jnp.where(big, weights / jnp.where(total != 0, total, 1.0), 0.0)


def _weights(in_size, out_size, scale, translation, method, antialias, dtype):
    """(in_size, out_size) resampling weights of one dimension."""
    radius, kernel = _KERNELS[method]
    inv = 1.0 / scale
    centers = (jnp.arange(out_size, dtype=dtype) + 0.5) * inv - translation * inv - 0.5
    if method is ResizeMethod.AREA:
        left = jnp.arange(out_size, dtype=dtype) * inv - translation * inv
        lo_in = jnp.arange(in_size, dtype=dtype)
        overlap = (jnp.minimum((left + inv)[None, :], (lo_in + 1.0)[:, None])
                   - jnp.maximum(left[None, :], lo_in[:, None]))
        return _normalize(jnp.maximum(0.0, overlap), 0) * _inside(centers, in_size)
    width = jnp.maximum(inv, 1.0) if antialias else 1.0
    edge = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    pad = radius if edge else 0
    taps = jnp.arange(-pad, in_size + pad, dtype=dtype)
    w = kernel(jnp.abs(centers[None, :] - taps[:, None]) / width)
    if edge:   # weights of pixels past the border go to the border pixel (repeated edges)
        clamped = np.clip(np.arange(-pad, in_size + pad), 0, in_size - 1)
        onehot = (clamped[None, :] == np.arange(in_size)[:, None]).astype(np.dtype(dtype))
        return _normalize(jnp.asarray(onehot) @ w, 0)
    return _normalize(w, 0) * _inside(centers, in_size)


def _inside(centers, in_size):
    return ((centers >= -0.5) & (centers <= in_size - 0.5))[None, :].astype(centers.dtype)


def _check_shape(image, shape, where):
    shape = tuple(int(s) for s in shape)
    if len(shape) != image.ndim:
        raise ValueError(f"funcgrad.image.{where}: shape {shape} must have one size per "
                         f"dimension of the image {image.shape}")
    return shape


def _resample(image, shape, spatial_dims, scale, translation, method, antialias, precision):
    x = image
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(x.dtype, jnp.float32))
    dtype = jnp.result_type(x.dtype, jnp.float32) if x.dtype != jnp.float64 else x.dtype
    for i, d in enumerate(spatial_dims):
        w = _weights(image.shape[d], shape[d], jnp.asarray(scale[i], dtype),
                     jnp.asarray(translation[i], dtype), method, antialias, dtype)
        x = jnp.moveaxis(lax.dot_general(x, w.astype(x.dtype), (((d,), (0,)), ((), ())),
                                         precision=precision), -1, d)
    return x


def scale_and_translate(image, shape, spatial_dims, scale, translation, method, antialias=True,
                        precision=Precision.HIGHEST):
    """Resample ``image`` to ``shape`` mapping input coordinate ``x`` of each dimension in
    ``spatial_dims`` to ``x * scale + translation`` (pixel centres at half-integers).
    ``scale`` and ``translation`` may be traced (and differentiated). NEAREST is not offered
    here (use ``resize``).

    Example:
        >>> from funcgrad import image
        >>> x = jnp.array([[0.0, 1.0, 2.0, 3.0]])
        >>> image.scale_and_translate(x, (1, 4), (1,), jnp.array([1.0]), jnp.array([0.5]),
        ...                           "linear")
        Array([[0. , 0.5, 1.5, 2.5]], dtype=float32)
    """
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("funcgrad.image.scale_and_translate: NEAREST is not supported here; "
                         "use funcgrad.image.resize(..., 'nearest')")
    image = jnp.asarray(image)
    shape = _check_shape(image, shape, "scale_and_translate")
    spatial_dims = tuple(int(d) % image.ndim for d in spatial_dims)
    scale = jnp.reshape(jnp.asarray(scale), (-1,))
    translation = jnp.reshape(jnp.asarray(translation), (-1,))
    if scale.shape[0] != len(spatial_dims) or translation.shape[0] != len(spatial_dims):
        raise ValueError(f"funcgrad.image.scale_and_translate: need one scale and translation "
                         f"per spatial dim {spatial_dims}, got {scale.shape[0]} and "
                         f"{translation.shape[0]}")
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    return _resample(image, shape, spatial_dims, scale, translation, method, antialias,
                     precision)


def _resize_nearest(image, shape):
    x = image
    for d, (n, m) in enumerate(zip(image.shape, shape)):
        if n != m:
            src = np.floor((np.arange(m, dtype=np.float32) + 0.5) * n / m).astype(np.int32)
            x = jnp.take(x, np.minimum(src, n - 1), axis=d)
    return x


def resize(image, shape, method, antialias=True, precision=Precision.HIGHEST):
    """Resize ``image`` to ``shape`` (a size per dimension; keep batch and channel sizes as
    they are). NEAREST keeps the dtype; the other methods return floats.

    Example:
        >>> from funcgrad import image
        >>> image.resize(jnp.array([[1.0, 3.0]]), (1, 4), "linear")
        Array([[1. , 1.5, 2.5, 3. ]], dtype=float32)
        >>> image.resize(jnp.array([[1, 2]]), (2, 4), "nearest")
        Array([[1, 1, 2, 2],
               [1, 1, 2, 2]], dtype=int32)
    """
    method = _method(method)
    image = jnp.asarray(image)
    shape = _check_shape(image, shape, "resize")
    if method is ResizeMethod.NEAREST:
        return _resize_nearest(image, shape)
    spatial_dims = tuple(d for d in range(image.ndim) if image.shape[d] != shape[d])
    scale = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in spatial_dims]
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    return _resample(image, shape, spatial_dims, scale, [0.0] * len(spatial_dims), method,
                     antialias, precision)
