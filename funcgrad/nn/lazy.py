"""Lazy modules: ``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d`` and ``LazyInstanceNorm1d/2d/3d`` infer their input size from the
first call, as PyTorch's do.

Until that call they have no parameters; the call builds the full module with the inferred
size (initialized exactly as the eager class would be, from ``funcgrad.manual_seed``'s
generator) and the object *becomes* that class (``type(m) is nn.Linear`` afterwards), so it
flattens, saves and loads as the ordinary module. As PyTorch recommends, make that first call
(a "dry run" on one batch) before creating the optimizer and before ``jit``/``grad``/``vmap``:
a lazy module called for the first time on traced values raises an error that says so.

Example:
    >>> import funcgrad.nn as nn
    >>> m = nn.LazyLinear(4)
    >>> len(list(m.parameters()))
    0
    >>> m(jnp.ones((2, 3))).shape          # in_features = 3, inferred
    (2, 4)
    >>> type(m).__name__, m.weight.shape
    ('Linear', (4, 3))
"""
from funcgrad.core.interpreters import Tracer
from funcgrad.nn import conv, linear, normalization
from funcgrad.nn.module import Module

__all__ = ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]

_KEEP = ("training", "_forward_pre_hooks", "_forward_hooks")


class LazyModuleMixin:
    """Shared machinery: ``cls_to_become`` is built from the inferred size, ``_args`` and
    ``_kwargs`` (the constructor arguments after the inferred one)."""

    cls_to_become = None
    _spatial = 0          # spatial axes of a batched input (0: features are the last axis)

    def _lazy_init(self, *args, **kwargs):
        Module.__init__(self)
        d = self.__dict__
        d["_lazy_args"], d["_lazy_kwargs"] = args, kwargs

    def has_uninitialized_params(self):
        """True until the first call has built the parameters."""
        return "_lazy_args" in self.__dict__

    def _infer_size(self, x):
        shape = getattr(x, "shape", None)
        if shape is None:
            raise TypeError(f"{type(self).__name__}: expected an array input, got "
                            f"{type(x).__name__}")
        if not self._spatial:
            if len(shape) < 1:
                raise ValueError(f"{type(self).__name__}: cannot infer in_features from a "
                                 f"0-d input")
            return int(shape[-1])
        batched = len(shape) == self._spatial + 2
        if not batched and len(shape) != self._spatial + 1:
            raise ValueError(f"{type(self).__name__}: expected a {self._spatial + 1}-d or "
                             f"{self._spatial + 2}-d input, got shape {tuple(shape)}")
        return int(shape[1] if batched else shape[0])

    def initialize_parameters(self, x):
        """Build the parameters for input ``x`` and become ``cls_to_become``."""
        if not self.has_uninitialized_params():
            return
        if isinstance(x, Tracer):
            raise TypeError(
                f"{type(self).__name__}: the first call of a lazy module infers its parameter "
                f"shapes and must run eagerly, but it got a traced input of shape "
                f"{tuple(x.shape)} (inside jit/grad/vmap). Call the module once on a sample "
                f"batch before transforming it (and before creating the optimizer)")
        d = self.__dict__
        full = self.cls_to_become(self._infer_size(x), *d["_lazy_args"], **d["_lazy_kwargs"])
        keep = {k: d[k] for k in _KEEP if k in d}
        d.clear()
        d.update(full.__dict__)
        d.update(keep)
        object.__setattr__(self, "__class__", self.cls_to_become)
        self._changed()

    def forward(self, x, *args, **kwargs):
        self.initialize_parameters(x)
        return self.forward(x, *args, **kwargs)

    def extra_repr(self):
        shown = [repr(a) for a in self.__dict__["_lazy_args"]]
        shown += [f"{k}={v!r}" for k, v in self.__dict__["_lazy_kwargs"].items()]
        return ", ".join(["0"] + shown)


class LazyLinear(LazyModuleMixin, Module):
    """``nn.Linear`` whose ``in_features`` is the last axis of the first input.

    Example:
        >>> m = nn.LazyLinear(2, bias=False)
        >>> m(jnp.ones((5, 7))).shape, m.in_features
        ((5, 2), 7)
    """
    cls_to_become = linear.Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        self._lazy_init(out_features, bias=bias, dtype=dtype)


class _LazyConv(LazyModuleMixin, Module):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        self._lazy_init(out_channels, kernel_size, stride=stride, padding=padding,
                        dilation=dilation, groups=groups, bias=bias, padding_mode=padding_mode,
                        dtype=dtype)


class _LazyConvTranspose(LazyModuleMixin, Module):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                 dtype=None):
        self._lazy_init(out_channels, kernel_size, stride=stride, padding=padding,
                        output_padding=output_padding, groups=groups, bias=bias,
                        dilation=dilation, padding_mode=padding_mode, dtype=dtype)


class LazyConv1d(_LazyConv):
    """``nn.Conv1d`` with ``in_channels`` from the first input. Example: ``nn.LazyConv1d(8, 3)``."""
    cls_to_become, _spatial = conv.Conv1d, 1


class LazyConv2d(_LazyConv):
    """``nn.Conv2d`` with ``in_channels`` from the first input (N, C, H, W) or (C, H, W).

    Example:
        >>> m = nn.LazyConv2d(8, 3, padding=1)
        >>> m(jnp.ones((2, 3, 5, 5))).shape, m.weight.shape
        ((2, 8, 5, 5), (8, 3, 3, 3))
    """
    cls_to_become, _spatial = conv.Conv2d, 2


class LazyConv3d(_LazyConv):
    """``nn.Conv3d`` with ``in_channels`` from the first input. Example: ``nn.LazyConv3d(8, 3)``."""
    cls_to_become, _spatial = conv.Conv3d, 3


class LazyConvTranspose1d(_LazyConvTranspose):
    """``nn.ConvTranspose1d`` with ``in_channels`` from the first input. Example: ``nn.LazyConvTranspose1d(4, 2)``."""
    cls_to_become, _spatial = conv.ConvTranspose1d, 1


class LazyConvTranspose2d(_LazyConvTranspose):
    """``nn.ConvTranspose2d`` with ``in_channels`` from the first input.

    Example:
        >>> nn.LazyConvTranspose2d(2, 2, stride=2)(jnp.ones((1, 3, 4, 4))).shape
        (1, 2, 8, 8)
    """
    cls_to_become, _spatial = conv.ConvTranspose2d, 2


class LazyConvTranspose3d(_LazyConvTranspose):
    """``nn.ConvTranspose3d`` with ``in_channels`` from the first input. Example: ``nn.LazyConvTranspose3d(4, 2)``."""
    cls_to_become, _spatial = conv.ConvTranspose3d, 3


class _LazyNorm(LazyModuleMixin, Module):
    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None):
        self._lazy_init(eps=eps, momentum=momentum, affine=affine,
                        track_running_stats=track_running_stats, dtype=dtype)


class _LazyInstanceNorm(_LazyNorm):
    def __init__(self, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None):
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)


class LazyBatchNorm1d(_LazyNorm):
    """``nn.BatchNorm1d`` with ``num_features`` from the first (N, C) or (N, C, L) input.

    Example:
        >>> m = nn.LazyBatchNorm1d()
        >>> m(jnp.ones((4, 6))).shape, m.running_mean.shape
        ((4, 6), (6,))
    """
    cls_to_become = normalization.BatchNorm1d

    def _infer_size(self, x):
        if len(getattr(x, "shape", ())) not in (2, 3):
            raise ValueError(f"LazyBatchNorm1d: expected a 2-d or 3-d input, got shape "
                             f"{tuple(getattr(x, 'shape', ()))}")
        return int(x.shape[1])


class LazyBatchNorm2d(_LazyNorm):
    """``nn.BatchNorm2d`` with ``num_features`` from the first input. Example: ``nn.LazyBatchNorm2d()``."""
    cls_to_become, _spatial = normalization.BatchNorm2d, 2


class LazyBatchNorm3d(_LazyNorm):
    """``nn.BatchNorm3d`` with ``num_features`` from the first input. Example: ``nn.LazyBatchNorm3d()``."""
    cls_to_become, _spatial = normalization.BatchNorm3d, 3


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """``nn.InstanceNorm1d`` with ``num_features`` from the first input. Example: ``nn.LazyInstanceNorm1d()``."""
    cls_to_become, _spatial = normalization.InstanceNorm1d, 1


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """``nn.InstanceNorm2d`` with ``num_features`` from the first input.

    Example:
        >>> m = nn.LazyInstanceNorm2d(affine=True)
        >>> m(jnp.ones((2, 5, 3, 3))).shape, m.weight.shape
        ((2, 5, 3, 3), (5,))
    """
    cls_to_become, _spatial = normalization.InstanceNorm2d, 2


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """``nn.InstanceNorm3d`` with ``num_features`` from the first input. Example: ``nn.LazyInstanceNorm3d()``."""
    cls_to_become, _spatial = normalization.InstanceNorm3d, 3
