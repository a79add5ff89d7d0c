"""Pooling layers: ``MaxPool1d/2d/3d``, ``AvgPool1d/2d/3d``, ``AdaptiveAvgPool1d/2d/3d``,
``AdaptiveMaxPool1d/2d/3d``, ``LPPool1d/2d/3d``, ``MaxUnpool1d/2d/3d``,
``FractionalMaxPool2d/3d``."""
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module


class _MaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x):
        return type(self)._fn(x, self.kernel_size, self.stride, self.padding, self.dilation,
                              self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-d max pooling. Example: ``nn.MaxPool1d(2)``."""
    _fn = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """2-d max pooling. Example: ``nn.MaxPool2d(2)(jnp.ones((1, 3, 8, 8))).shape == (1, 3, 4, 4)``."""
    _fn = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """3-d max pooling. Example: ``nn.MaxPool3d(2)``."""
    _fn = staticmethod(F.max_pool3d)


class AvgPool1d(Module):
    """1-d average pooling. Example: ``nn.AvgPool1d(2)``."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AvgPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x):
        return type(self)._fn(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                              self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(_AvgPoolNd):
    """2-d average pooling. Example: ``nn.AvgPool2d(2)``."""
    _fn = staticmethod(F.avg_pool2d)


class AvgPool3d(_AvgPoolNd):
    """3-d average pooling of (N, C, D, H, W) or (C, D, H, W) inputs, PyTorch's divisor rules
    (``count_include_pad``, ``divisor_override``, ``ceil_mode``).

    Example:
        >>> nn.AvgPool3d(2, stride=1)(jnp.ones((1, 2, 4, 4, 4))).shape
        (1, 2, 3, 3, 3)
    """
    _fn = staticmethod(F.avg_pool3d)


class AdaptiveAvgPool1d(Module):
    """Average pooling to a fixed length. Example: ``nn.AdaptiveAvgPool1d(4)``."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool2d(Module):
    """Average pooling to a fixed grid. Example: ``nn.AdaptiveAvgPool2d((1, 1))``."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _AdaptiveMaxPoolNd(Module):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x):
        return type(self)._fn(x, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed length (PyTorch's bins, any input length).

    Example:
        >>> nn.AdaptiveMaxPool1d(2)(jnp.array([[[1.0, 3.0, 2.0, 5.0, 4.0]]]))
        Array([[[3., 5.]]], dtype=float32)
    """
    _fn = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """Max pooling to a fixed grid. Example: ``nn.AdaptiveMaxPool2d(1)``."""
    _fn = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """Max pooling of (N, C, D, H, W) to a fixed grid; ``return_indices=True`` also returns
    the flat positions of the maxima.

    Example:
        >>> nn.AdaptiveMaxPool3d((1, 2, 2))(jnp.ones((1, 3, 4, 5, 5))).shape
        (1, 3, 1, 2, 2)
    """
    _fn = staticmethod(F.adaptive_max_pool3d)


class AdaptiveAvgPool3d(Module):
    """Average pooling of (N, C, D, H, W) to a fixed grid.

    Example:
        >>> nn.AdaptiveAvgPool3d(1)(jnp.ones((2, 3, 4, 5, 6))).shape
        (2, 3, 1, 1, 1)
    """

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool3d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, x):
        return type(self)._fn(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling, (sum of x^p over a window)^(1/p). Example: ``nn.LPPool1d(2, 3)``."""
    _fn = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """2-d power-average pooling.

    Example:
        >>> nn.LPPool2d(2, 2)(jnp.ones((1, 1, 4, 4)))
        Array([[[[2., 2.],
                 [2., 2.]]]], dtype=float32)
    """
    _fn = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """3-d power-average pooling. Example: ``nn.LPPool3d(2, 2)``."""
    _fn = staticmethod(F.lp_pool3d)


class _MaxUnpoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def forward(self, input, indices, output_size=None):
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool1d``. Example: ``nn.MaxUnpool1d(2)(y, indices)``."""
    _fn = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool2d``: values back at their indices, zeros elsewhere.

    Example:
        >>> pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
        >>> y, idx = pool(jnp.arange(16.0).reshape(1, 1, 4, 4))
        >>> unpool(y, idx).shape
        (1, 1, 4, 4)
    """
    _fn = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of ``MaxPool3d``. Example: ``nn.MaxUnpool3d(2)(y, indices)``."""
    _fn = staticmethod(F.max_unpool3d)


class _FractionalMaxPoolNd(Module):
    _fn = None

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        if (output_size is None) == (output_ratio is None):
            raise ValueError(f"{type(self).__name__}: give exactly one of output_size and "
                             f"output_ratio")
        self.kernel_size, self.output_size = kernel_size, output_size
        self.output_ratio, self.return_indices = output_ratio, return_indices
        self._random_samples = _random_samples

    def forward(self, x, key=None):
        return type(self)._fn(x, self.kernel_size, self.output_size, self.output_ratio,
                              self.return_indices, self._random_samples, key)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, output_size={self.output_size}, "
                f"output_ratio={self.output_ratio}")


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Fractional max pooling (``F.fractional_max_pool2d``); ``forward(x, key=None)``.

    Example:
        >>> nn.FractionalMaxPool2d(2, output_ratio=0.5)(jnp.ones((1, 3, 8, 8)), key=1).shape
        (1, 3, 4, 4)
    """
    _fn = staticmethod(F.fractional_max_pool2d)


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """3-d fractional max pooling. Example: ``nn.FractionalMaxPool3d(2, output_size=3)``."""
    _fn = staticmethod(F.fractional_max_pool3d)
