"""Image transforms on NumPy arrays, for use as a dataset's ``transform``.

Layout: images are channels-first (C, H, W) or plain (H, W), as after ``ToArray``; the
spatial transforms take ``channels_last=True`` for (H, W, C). Random transforms draw from their
own generator when given ``seed`` (an int or a ``numpy.random.Generator``), and otherwise from
``funcgrad.data.current_rng()``, which the DataLoader seeds per batch from (seed, epoch, batch
index): augmentations then repeat exactly for a given loader seed and epoch, whatever the
number or kind of workers.

Example:
    >>> from funcgrad.data.transforms import Compose, Normalize, RandomCrop, ToArray
    >>> import numpy as np
    >>> t = Compose([ToArray(), RandomCrop(2, seed=0), Normalize([0.5], [0.5])])
    >>> t(np.zeros((3, 3), np.uint8)).tolist()
    [[[-1.0, -1.0], [-1.0, -1.0]]]
"""
import numbers
import operator

import numpy as np

from ._worker import current_rng

__all__ = ["Compose", "ToArray", "Normalize", "RandomCrop", "CenterCrop",
           "RandomHorizontalFlip", "Resize", "Lambda"]


def _make_rng(seed, where):
    if seed is None:
        return None
    if isinstance(seed, np.random.Generator):
        return seed
    try:
        return np.random.default_rng(operator.index(seed))
    except TypeError:
        raise TypeError(f"{where}: seed must be None, an int or a numpy.random.Generator, got "
                        f"{seed!r}") from None


def _pair(size, where):
    if isinstance(size, numbers.Integral):
        size = (int(size), int(size))
    size = tuple(operator.index(s) for s in size)
    if len(size) != 2 or min(size) <= 0:
        raise ValueError(f"{where}: size must be a positive int or a (height, width) pair, got "
                         f"{size}")
    return size


def _spatial_axes(x, channels_last, where):
    if x.ndim < 2 or (channels_last and x.ndim < 3):
        want = "(H, W, C)" if channels_last else "(H, W) or (C, H, W)"
        raise ValueError(f"{where}: expected an image of shape {want}, got shape {x.shape}")
    return (x.ndim - 3, x.ndim - 2) if channels_last else (x.ndim - 2, x.ndim - 1)


def _window(ndim, ax_h, ax_w, i, h, j, w):
    index = [slice(None)] * ndim
    index[ax_h] = slice(i, i + h)
    index[ax_w] = slice(j, j + w)
    return tuple(index)


class Compose:
    """Apply transforms one after another.

    Example:
        >>> from funcgrad.data.transforms import Compose
        >>> Compose([lambda x: x + 1, lambda x: x * 2])(3)
        8
    """

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self):
        inner = ", ".join(repr(t) for t in self.transforms)
        return f"Compose([{inner}])"


class Lambda:
    """Wrap a function as a transform (picklable when the function is module-level).

    Example:
        >>> from funcgrad.data.transforms import Lambda
        >>> Lambda(lambda x: x * 10)(4)
        40
    """

    def __init__(self, fn):
        if not callable(fn):
            raise TypeError(f"Lambda: expected a callable, got {fn!r}")
        self.fn = fn

    def __call__(self, x):
        return self.fn(x)

    def __repr__(self):
        return f"Lambda({getattr(self.fn, '__name__', self.fn)!r})"


class ToArray:
    """Convert an image (anything ``numpy.asarray`` takes) to a channels-first float array.

    (H, W) becomes (1, H, W); with ``input_layout="HWC"`` (the default, like a PIL image) an
    (H, W, C) image is transposed to (C, H, W); ``"CHW"`` leaves 3-D input as it is. Integer
    images are scaled to [0, 1] by their type's maximum (uint8: / 255) unless ``scale=False``.

    Example:
        >>> from funcgrad.data.transforms import ToArray
        >>> import numpy as np
        >>> y = ToArray()(np.full((2, 2, 3), 255, np.uint8))
        >>> y.shape, y.dtype, float(y.max())
        ((3, 2, 2), dtype('float32'), 1.0)
    """

    def __init__(self, dtype=np.float32, scale=True, input_layout="HWC"):
        if input_layout not in ("HWC", "CHW"):
            raise ValueError(f"ToArray: input_layout must be 'HWC' or 'CHW', got "
                             f"{input_layout!r}")
        self.dtype = np.dtype(dtype)
        self.scale = scale
        self.input_layout = input_layout

    def __call__(self, img):
        x = np.asarray(img)
        if x.ndim == 2:
            x = x[None]
        elif x.ndim == 3:
            if self.input_layout == "HWC":
                x = x.transpose(2, 0, 1)
        else:
            raise ValueError(f"ToArray: expected an image of shape (H, W) or 3-D "
                             f"({self.input_layout}), got shape {x.shape}")
        if self.scale and x.dtype.kind in "ui":
            return (x.astype(self.dtype) / self.dtype.type(np.iinfo(x.dtype).max)).astype(
                self.dtype, copy=False)
        if x.dtype == np.bool_ and self.scale:
            return x.astype(self.dtype)
        return np.ascontiguousarray(x, dtype=self.dtype)

    def __repr__(self):
        return f"ToArray(dtype={self.dtype.name}, scale={self.scale}, " \
               f"input_layout={self.input_layout!r})"


class Normalize:
    """``(x - mean[c]) / std[c]`` per channel, in float32 (or x's float type).

    Channels are axis -3 of (C, H, W), or the last axis with ``channels_last=True``; a 2-D
    image is one channel. Integer input is converted to float first, without rescaling.

    Example:
        >>> from funcgrad.data.transforms import Normalize
        >>> import numpy as np
        >>> Normalize([1.0, 2.0], [2.0, 4.0])(np.ones((2, 1, 1), np.float32)).ravel().tolist()
        [0.0, -0.25]
    """

    def __init__(self, mean, std, channels_last=False):
        self.mean = np.asarray(mean, dtype=np.float64).reshape(-1)
        self.std = np.asarray(std, dtype=np.float64).reshape(-1)
        if self.mean.size != self.std.size:
            raise ValueError(f"Normalize: mean and std need the same number of channels, got "
                             f"{self.mean.size} and {self.std.size}")
        if np.any(self.std == 0):
            raise ValueError(f"Normalize: std must not contain zeros, got {self.std.tolist()}")
        self.channels_last = channels_last
        self._cache = {}

    def _params(self, dtype, ndim):
        key = (dtype, ndim)
        if key not in self._cache:
            shape = (-1,) if self.channels_last or ndim == 2 else (-1, 1, 1)
            mean = self.mean.astype(dtype).reshape(shape)
            inv = (1.0 / self.std).astype(dtype).reshape(shape)
            self._cache[key] = (mean, inv)
        return self._cache[key]

    def __call__(self, x):
        x = np.asarray(x)
        dtype = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
        nch = x.shape[-1] if self.channels_last else (1 if x.ndim == 2 else
                                                      x.shape[-3] if x.ndim >= 3 else None)
        if nch is None or (self.mean.size not in (1, nch)):
            raise ValueError(f"Normalize: image of shape {x.shape} has {nch} channels but "
                             f"mean/std have {self.mean.size}")
        mean, inv = self._params(dtype, 2 if x.ndim == 2 and not self.channels_last else 3)
        out = x.astype(dtype, copy=True) if x.dtype != dtype else x.copy()
        out -= mean
        out *= inv
        return out

    def __repr__(self):
        return f"Normalize(mean={self.mean.tolist()}, std={self.std.tolist()})"


class RandomCrop:
    """Cut a random ``size`` window (after optional ``padding`` on every side).

    ``padding``: an int (all sides), (left/right, top/bottom) or (left, top, right, bottom);
    ``padding_mode``: "constant" (with ``fill``), "edge", "reflect" or "symmetric";
    ``pad_if_needed`` pads images smaller than ``size``. Offsets are drawn uniformly from
    ``[0, H_padded - h]`` x ``[0, W_padded - w]``.

    Example:
        >>> from funcgrad.data.transforms import RandomCrop
        >>> import numpy as np
        >>> x = np.arange(16).reshape(4, 4)
        >>> RandomCrop(4, padding=1, seed=0)(x).shape
        (4, 4)
    """

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant",
                 channels_last=False, seed=None):
        self.size = _pair(size, "RandomCrop")
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"RandomCrop: padding_mode must be 'constant', 'edge', 'reflect' or "
                             f"'symmetric', got {padding_mode!r}")
        self.padding = self._parse_padding(padding)
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode
        self.channels_last = channels_last
        self.rng = _make_rng(seed, "RandomCrop")

    @staticmethod
    def _parse_padding(padding):
        if padding is None:
            return (0, 0, 0, 0)
        if isinstance(padding, numbers.Integral):
            p = int(padding)
            pads = (p, p, p, p)
        else:
            p = tuple(int(v) for v in padding)
            if len(p) == 2:
                pads = (p[0], p[1], p[0], p[1])
            elif len(p) == 4:
                pads = p
            else:
                raise ValueError(f"RandomCrop: padding must be an int or a 2- or 4-tuple, got "
                                 f"{padding!r}")
        if min(pads) < 0:
            raise ValueError(f"RandomCrop: padding must be >= 0, got {padding!r}")
        return pads

    def _pad(self, x, axes, left, top, right, bottom):
        if not (left or top or right or bottom):
            return x
        widths = [(0, 0)] * x.ndim
        widths[axes[0]] = (top, bottom)
        widths[axes[1]] = (left, right)
        if self.padding_mode == "constant":
            return np.pad(x, widths, mode="constant", constant_values=self.fill)
        return np.pad(x, widths, mode=self.padding_mode)

    def __call__(self, img):
        x = np.asarray(img)
        ax_h, ax_w = _spatial_axes(x, self.channels_last, "RandomCrop")
        h, w = self.size
        left, top, right, bottom = self.padding
        H0, W0 = x.shape[ax_h], x.shape[ax_w]
        if self.pad_if_needed:
            extra_h = max(0, h - (H0 + top + bottom))
            extra_w = max(0, w - (W0 + left + right))
            left, right, top, bottom = left + extra_w, right + extra_w, top + extra_h, \
                bottom + extra_h
        H, W = H0 + top + bottom, W0 + left + right
        if H < h or W < w:
            raise ValueError(f"RandomCrop: crop size {(h, w)} is larger than the (padded) image "
                             f"{(H, W)} of input shape {x.shape}; pass pad_if_needed=True or "
                             f"more padding")
        rng = self.rng if self.rng is not None else current_rng()
        i = int(rng.integers(0, H - h + 1))
        j = int(rng.integers(0, W - w + 1))
        # The window [i, i+h) x [j, j+w) of the padded image, without building the padded image.
        ys, ye = max(i, top), min(i + h, top + H0)
        xs, xe = max(j, left), min(j + w, left + W0)
        if (ys, ye, xs, xe) == (i, i + h, j, j + w):
            return x[_window(x.ndim, ax_h, ax_w, i - top, h, j - left, w)]
        if self.padding_mode != "constant":
            padded = self._pad(x, (ax_h, ax_w), left, top, right, bottom)
            return padded[_window(x.ndim, ax_h, ax_w, i, h, j, w)]
        shape = list(x.shape)
        shape[ax_h], shape[ax_w] = h, w
        out = np.full(shape, self.fill, dtype=x.dtype)
        if ys < ye and xs < xe:
            out[_window(x.ndim, ax_h, ax_w, ys - i, ye - ys, xs - j, xe - xs)] = \
                x[_window(x.ndim, ax_h, ax_w, ys - top, ye - ys, xs - left, xe - xs)]
        return out

    def __repr__(self):
        return f"RandomCrop(size={self.size}, padding={self.padding})"


class CenterCrop:
    """Cut the central ``size`` window (offsets rounded like ``(H - h) // 2``).

    Example:
        >>> from funcgrad.data.transforms import CenterCrop
        >>> import numpy as np
        >>> CenterCrop(2)(np.arange(16).reshape(4, 4)).tolist()
        [[5, 6], [9, 10]]
    """

    def __init__(self, size, channels_last=False):
        self.size = _pair(size, "CenterCrop")
        self.channels_last = channels_last

    def __call__(self, img):
        x = np.asarray(img)
        ax_h, ax_w = _spatial_axes(x, self.channels_last, "CenterCrop")
        h, w = self.size
        H, W = x.shape[ax_h], x.shape[ax_w]
        if H < h or W < w:
            raise ValueError(f"CenterCrop: crop size {(h, w)} is larger than the image {(H, W)}")
        i, j = (H - h) // 2, (W - w) // 2
        index = [slice(None)] * x.ndim
        index[ax_h] = slice(i, i + h)
        index[ax_w] = slice(j, j + w)
        return x[tuple(index)]


class RandomHorizontalFlip:
    """Mirror the image left-right with probability ``p``.

    Example:
        >>> from funcgrad.data.transforms import RandomHorizontalFlip
        >>> import numpy as np
        >>> RandomHorizontalFlip(p=1.0)(np.array([[1, 2, 3]])).tolist()
        [[3, 2, 1]]
    """

    def __init__(self, p=0.5, channels_last=False, seed=None):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: p must be in [0, 1], got {p}")
        self.p = p
        self.channels_last = channels_last
        self.rng = _make_rng(seed, "RandomHorizontalFlip")

    def __call__(self, img):
        x = np.asarray(img)
        _, ax_w = _spatial_axes(x, self.channels_last, "RandomHorizontalFlip")
        rng = self.rng if self.rng is not None else current_rng()
        if rng.random() < self.p:
            return np.flip(x, axis=ax_w)
        return x

    def __repr__(self):
        return f"RandomHorizontalFlip(p={self.p})"


def _resize_plan(n_in, n_out, mode):
    """Source indices (and weights for bilinear) along one axis, half-pixel centres."""
    scale = n_in / n_out
    centres = (np.arange(n_out, dtype=np.float64) + 0.5) * scale - 0.5
    if mode == "nearest":
        idx = np.floor((np.arange(n_out, dtype=np.float64) + 0.5) * scale).astype(np.int64)
        return np.minimum(idx, n_in - 1), None, None
    src = np.clip(centres, 0.0, None)
    lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    return lo, hi, frac


class Resize:
    """Resize the spatial axes to ``size`` with "bilinear" (default) or "nearest" interpolation.

    ``size``: (height, width), or an int for the shorter side (the other keeps the aspect
    ratio, rounded down). Both modes sample at half-pixel centres (``align_corners=False``);
    "nearest" takes source pixel ``floor((i + 0.5) * in / out)`` (PyTorch's "nearest-exact"),
    bilinear matches ``torch.nn.functional.interpolate(mode="bilinear", antialias=False)``.
    Integer images are rounded back to their type.

    Example:
        >>> from funcgrad.data.transforms import Resize
        >>> import numpy as np
        >>> Resize((2, 2), interpolation="nearest")(np.arange(16).reshape(4, 4)).tolist()
        [[5, 7], [13, 15]]
    """

    def __init__(self, size, interpolation="bilinear", channels_last=False):
        if interpolation not in ("bilinear", "nearest"):
            raise ValueError(f"Resize: interpolation must be 'bilinear' or 'nearest', got "
                             f"{interpolation!r}")
        if isinstance(size, numbers.Integral):
            if size <= 0:
                raise ValueError(f"Resize: size must be positive, got {size}")
            self.size = int(size)
        else:
            self.size = _pair(size, "Resize")
        self.interpolation = interpolation
        self.channels_last = channels_last
        self._plans = {}

    def _out_size(self, H, W):
        if isinstance(self.size, tuple):
            return self.size
        s = self.size
        if H <= W:
            return s, max(1, int(s * W / H))
        return max(1, int(s * H / W)), s

    def _plan(self, H, W, h, w):
        key = (H, W, h, w)
        if key not in self._plans:
            self._plans[key] = (_resize_plan(H, h, self.interpolation),
                                _resize_plan(W, w, self.interpolation))
        return self._plans[key]

    def __call__(self, img):
        x = np.asarray(img)
        ax_h, ax_w = _spatial_axes(x, self.channels_last, "Resize")
        H, W = x.shape[ax_h], x.shape[ax_w]
        h, w = self._out_size(H, W)
        if (h, w) == (H, W):
            return x
        (ylo, yhi, yf), (xlo, xhi, xf) = self._plan(H, W, h, w)
        if self.interpolation == "nearest":
            return np.take(np.take(x, ylo, axis=ax_h), xlo, axis=ax_w)
        work = x.astype(np.float32) if x.dtype.kind != "f" else x
        shape_h = [1] * x.ndim
        shape_h[ax_h] = h
        shape_w = [1] * x.ndim
        shape_w[ax_w] = w
        yf = yf.astype(work.dtype).reshape(shape_h)
        xf = xf.astype(work.dtype).reshape(shape_w)
        top = np.take(work, ylo, axis=ax_h)
        bot = np.take(work, yhi, axis=ax_h)
        rows = top + (bot - top) * yf
        left = np.take(rows, xlo, axis=ax_w)
        right = np.take(rows, xhi, axis=ax_w)
        out = left + (right - left) * xf
        if x.dtype.kind in "ui":
            info = np.iinfo(x.dtype)
            return np.clip(np.rint(out), info.min, info.max).astype(x.dtype)
        if x.dtype.kind == "b":
            return out >= 0.5
        return out

    def __repr__(self):
        return f"Resize(size={self.size}, interpolation={self.interpolation!r})"
