"""Resampling modules: ``Upsample`` (and its fixed-mode variants), ``PixelShuffle`` and
``PixelUnshuffle``, each calling its ``nn.functional`` counterpart."""
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module


class Upsample(Module):
    """Resize by ``size`` or ``scale_factor`` with ``F.interpolate``'s modes.

    Example:
        >>> up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        >>> up(jnp.ones((1, 3, 4, 4))).shape
        (1, 3, 8, 8)
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
        >>> nn.UpsamplingBilinear2d(scale_factor=2)(jnp.arange(4.0).reshape(1, 1, 2, 2))
        Array([[[[0.        , 0.33333334, 0.6666667 , 1.        ],
                 [0.6666667 , 1.        , 1.3333334 , 1.6666666 ],
                 [1.3333334 , 1.6666666 , 2.        , 2.3333333 ],
                 [2.        , 2.3333333 , 2.6666665 , 3.        ]]]], dtype=float32)
    """

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", align_corners=True)


def _factor_module(name, fn, factor, doc):
    """A module applying ``fn(x, <factor>)`` with the integer ``factor`` stored under that
    name (PyTorch's attribute and repr)."""
    def __init__(self, value):
        Module.__init__(self)
        setattr(self, factor, int(value))

    cls = type(name, (Module,), {
        "__init__": __init__, "__doc__": doc,
        "forward": lambda self, x: fn(x, getattr(self, factor)),
        "extra_repr": lambda self: f"{factor}={getattr(self, factor)}"})
    cls.__module__ = __name__
    return cls


PixelShuffle = _factor_module(
    "PixelShuffle", F.pixel_shuffle, "upscale_factor",
    "(N, C*r*r, H, W) -> (N, C, H*r, W*r). Example: ``nn.PixelShuffle(2)``.")
PixelUnshuffle = _factor_module(
    "PixelUnshuffle", F.pixel_unshuffle, "downscale_factor",
    "(N, C, H*r, W*r) -> (N, C*r*r, H, W). Example: ``nn.PixelUnshuffle(2)``.")


class ChannelShuffle(Module):
    """``F.channel_shuffle`` as a module (ShuffleNet's channel interleaving).

    Example:
        >>> nn.ChannelShuffle(2)(jnp.arange(6.0).reshape(1, 6, 1))[0, :, 0]
        Array([0., 3., 1., 4., 2., 5.], dtype=float32)
    """

    def __init__(self, groups):
        super().__init__()
        self.groups = int(groups)

    def forward(self, x):
        return F.channel_shuffle(x, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"
