"""``nn.Unfold`` and ``nn.Fold``: sliding blocks of an image as columns (im2col) and back
(col2im), wrapping ``F.unfold`` and ``F.fold`` with PyTorch's arguments."""
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module


class Unfold(Module):
    """(N, C, H, W) -> (N, C * kh * kw, L): each column one sliding block (``F.unfold``).

    Example:
        >>> nn.Unfold(kernel_size=(2, 3))(jnp.ones((2, 5, 3, 4))).shape
        (2, 30, 4)
    """

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """(N, C * kh * kw, L) -> (N, C, *output_size), summing overlapping blocks (``F.fold``).

    Example:
        >>> nn.Fold(output_size=(4, 5), kernel_size=(2, 2))(jnp.ones((1, 12, 12))).shape
        (1, 3, 4, 5)
    """

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
