"""Convolution layers: ``Conv1d``, ``Conv2d``, ``Conv3d``, ``ConvTranspose1d``,
``ConvTranspose2d``, ``ConvTranspose3d`` with PyTorch's weight layouts and default initialization."""
import math

from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.module import Module, Parameter, host_zeros


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _n = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None,
                 output_padding=0):
        super().__init__()
        n = self._n
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"{type(self).__name__}: in_channels ({in_channels}) and "
                             f"out_channels ({out_channels}) must be divisible by groups "
                             f"({groups})")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"{type(self).__name__}: unknown padding_mode {padding_mode!r}")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation = _ntuple(dilation, n)
        self.output_padding = _ntuple(output_padding, n)
        self.groups = int(groups)
        self.padding_mode = padding_mode
        dt = dtype or "float32"
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(host_zeros(shape, dt))
        if bias:
            self.bias = Parameter(host_zeros((out_channels,), dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        w = self.get_parameter("weight")
        init.kaiming_uniform_(w, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(w)
            if fan_in:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.get_parameter("bias"), -bound, bound)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else \
                f", padding={self.padding}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self._transposed and self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _padded(self, x):
        """Explicit non-zero padding modes pad first and convolve without padding."""
        if self.padding_mode == "zeros" or isinstance(self.padding, str):
            return x, self.padding
        pads = []
        for p in reversed(self.padding):
            pads += [p, p]
        return F.pad(x, pads, mode=self.padding_mode), 0


class _ConvTransposeNd(_ConvNd):
    """PyTorch's argument order for transposed convolutions: output_padding comes before
    groups, and dilation after bias."""
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f"{type(self).__name__}: only padding_mode='zeros' is supported "
                             f"for transposed convolutions, got {padding_mode!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, output_padding)


class Conv1d(_ConvNd):
    """1-d convolution over (N, C, L). Example: ``nn.Conv1d(3, 8, 5, padding=2)``."""
    _n = 1

    def forward(self, x):
        x, pad = self._padded(x)
        return F.conv1d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-d convolution over (N, C, H, W); weight (out, in/groups, kh, kw).

    Example:
        >>> nn.Conv2d(3, 16, 3, padding=1)(jnp.ones((2, 3, 32, 32))).shape
        (2, 16, 32, 32)
    """
    _n = 2

    def forward(self, x):
        x, pad = self._padded(x)
        return F.conv2d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class Conv3d(_ConvNd):
    """3-d convolution over (N, C, D, H, W). Example: ``nn.Conv3d(1, 4, 3)``."""
    _n = 3

    def forward(self, x):
        x, pad = self._padded(x)
        return F.conv3d(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class ConvTranspose1d(_ConvTransposeNd):
    """1-d transposed convolution; weight (in, out/groups, k). Example: ``nn.ConvTranspose1d(4, 2, 3, stride=2)``."""
    _n = 1

    def forward(self, x):
        return F.conv_transpose1d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """2-d transposed convolution; weight (in, out/groups, kh, kw) as PyTorch.

    Example:
        >>> nn.ConvTranspose2d(8, 4, 2, stride=2)(jnp.ones((1, 8, 5, 5))).shape
        (1, 4, 10, 10)
    """
    _n = 2

    def reset_parameters(self):
        # PyTorch computes fan_in from weight.shape[1] * receptive field for transposed convs too.
        super().reset_parameters()

    def forward(self, x):
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """3-d transposed convolution of (N, C, D, H, W); weight (in, out/groups, kd, kh, kw).

    Example:
        >>> nn.ConvTranspose3d(4, 2, 2, stride=2)(jnp.ones((1, 4, 3, 3, 3))).shape
        (1, 2, 6, 6, 6)
    """
    _n = 3

    def forward(self, x):
        return F.conv_transpose3d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)
