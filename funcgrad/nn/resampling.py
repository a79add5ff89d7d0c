"""Resampling modules: ``Upsample`` (and its fixed-mode variants), ``PixelShuffle`` and
``PixelUnshuffle``, each calling its ``nn.functional`` counterpart."""
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module


class Upsample(Module):
    """Resize by ``size`` or ``scale_factor`` with ``F.interpolate``'s modes.

    Example:
        >>> up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
    """

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             self.recompute_scale_factor)

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else \
            f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """``Upsample`` with mode "nearest". Example: ``nn.UpsamplingNearest2d(scale_factor=2)``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """``Upsample`` with mode "bilinear" and ``align_corners=True`` (as PyTorch's).

    Example:
        >>> nn.UpsamplingBilinear2d(scale_factor=2)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


class PixelShuffle(Module):
    """(N, C*r*r, H, W) -> (N, C, H*r, W*r). Example: ``nn.PixelShuffle(2)``."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = int(upscale_factor)

    def forward(self, x):
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(N, C, H*r, W*r) -> (N, C*r*r, H, W). Example: ``nn.PixelUnshuffle(2)``."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = int(downscale_factor)

    def forward(self, x):
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"
