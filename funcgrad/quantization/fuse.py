"""``fuse_modules``: conv + batch norm folded into the convolution's weight and bias, and
conv / linear + ReLU made one module (``ConvReLU2d``, ``LinearReLU``) that quantization treats
as one product with a ReLU on its output, as PyTorch's eager-mode fusion.

Example:
    >>> from funcgrad.quantization import fuse_modules
    >>> model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU()).eval()
    >>> fused = fuse_modules(model, [["0", "1", "2"]])
    >>> fused
    Sequential(
      (0): ConvReLU2d(
        (0): Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1))
        (1): ReLU()
      )
      (1): Identity()
      (2): Identity()
    )
    >>> x = jnp.ones((1, 1, 5, 5))
    >>> bool(np.allclose(np.asarray(fused(x)), np.asarray(model(x)), atol=1e-5))
    True
"""
import copy

import numpy as np

from funcgrad import numpy as jnp
from funcgrad import nn
from funcgrad.nn.containers import Sequential


class LinearReLU(Sequential):
    """Linear then ReLU, one unit for quantization (``torch.ao.nn.intrinsic.LinearReLU``)."""


class ConvReLU1d(Sequential):
    """Conv1d then ReLU, one unit for quantization (``torch.ao.nn.intrinsic.ConvReLU1d``)."""


class ConvReLU2d(Sequential):
    """Conv2d then ReLU, one unit for quantization (``torch.ao.nn.intrinsic.ConvReLU2d``)."""


class ConvReLU3d(Sequential):
    """Conv3d then ReLU, one unit for quantization (``torch.ao.nn.intrinsic.ConvReLU3d``)."""


# each convolution with the batch norm that folds into it and its ReLU fusion
CONV_KINDS = {nn.Conv1d: (nn.BatchNorm1d, ConvReLU1d), nn.Conv2d: (nn.BatchNorm2d, ConvReLU2d),
              nn.Conv3d: (nn.BatchNorm3d, ConvReLU3d)}
CONV_RELU = tuple(relu for _, relu in CONV_KINDS.values())


def fuse_conv_bn_eval(conv, bn):
    """A copy of ``conv`` with the eval-mode batch norm ``bn`` folded in:
    ``w * gamma / sqrt(var + eps)`` and ``(b - mean) * gamma / sqrt(var + eps) + beta``.

    Example:
        >>> from funcgrad.quantization.fuse import fuse_conv_bn_eval
        >>> conv, bn = nn.Conv2d(1, 1, 1, bias=False), nn.BatchNorm2d(1).eval()
        >>> bn.running_var = jnp.array([4.0])
        >>> ratio = (np.asarray(fuse_conv_bn_eval(conv, bn).weight).ravel()[0] /
        ...          np.asarray(conv.weight).ravel()[0])
        >>> round(float(ratio), 5)      # 1 / sqrt(4 + eps)
        0.5
    """
    if bn.running_mean is None:
        raise ValueError("fuse_modules: the batch norm has no running statistics "
                         "(track_running_stats=False); it cannot be folded")
    fused = copy.deepcopy(conv)
    # in float32 and in PyTorch's order of operations, so that the folded weights (and the
    # integers quantized from them) are PyTorch's
    f32 = np.float32
    w = np.asarray(conv.weight, f32)
    mean = np.asarray(bn.running_mean, f32)
    inv = (f32(1.0) / np.sqrt(np.asarray(bn.running_var, f32) + f32(bn.eps))).astype(f32)
    gamma = np.asarray(bn.weight, f32) if bn.affine else np.ones_like(mean)
    beta = np.asarray(bn.bias, f32) if bn.affine else np.zeros_like(mean)
    b = np.asarray(conv.bias, f32) if conv.bias is not None else np.zeros_like(mean)
    shape = (-1,) + (1,) * (w.ndim - 1)
    fused.weight = nn.Parameter(jnp.asarray((w * (gamma * inv).reshape(shape)).astype(f32)))
    fused.bias = nn.Parameter(jnp.asarray(((b - mean) * inv * gamma + beta).astype(f32)))
    return fused


def _fuse(mods, names):
    kinds = tuple(type(m) for m in mods)
    conv, lin, relu = tuple(CONV_KINDS), nn.Linear, nn.ReLU
    bn = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
    if len(mods) >= 2 and isinstance(mods[1], bn):
        if mods[0].training or mods[1].training:
            raise ValueError(f"fuse_modules: folding {names[1]!r} into {names[0]!r} needs eval "
                             f"mode (call model.eval() first), as PyTorch's")
        wanted = CONV_KINDS[type(mods[0])][0] if type(mods[0]) in CONV_KINDS else \
            (nn.BatchNorm1d if isinstance(mods[0], lin) else None)
        if wanted is None or not isinstance(mods[1], wanted):
            raise ValueError(f"fuse_modules: cannot fold batch norm {names[1]!r} "
                             f"({kinds[1].__name__}) into a {kinds[0].__name__}")
        folded = fuse_conv_bn_eval(mods[0], mods[1])
        mods = [folded] + list(mods[2:])
    if len(mods) == 1 and isinstance(mods[0], (conv, lin)):
        return mods[0]
    if len(mods) == 2 and isinstance(mods[1], relu):
        if type(mods[0]) in CONV_KINDS:
            return CONV_KINDS[type(mods[0])][1](mods[0], mods[1])
        if isinstance(mods[0], lin):
            return LinearReLU(mods[0], mods[1])
    raise ValueError(f"fuse_modules: cannot fuse {list(names)} of types "
                     f"{[k.__name__ for k in kinds]}; supported: conv+bn, conv+bn+relu, "
                     f"conv+relu, linear+bn, linear+relu")


def _set(model, name, value):
    parent, _, leaf = name.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, leaf, value)


def fuse_modules(model, modules_to_fuse, inplace=False):
    """Fuse each list of submodule names (``[["conv1", "bn1", "relu1"], ["fc1", "relu2"]]``,
    or one list): the first becomes the fused module, the others ``Identity``. Returns the
    model (a copy unless ``inplace``).

    Example:
        >>> from funcgrad.quantization import fuse_modules
        >>> m = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
        >>> type(fuse_modules(m, ["0", "1"])[0]).__name__
        'LinearReLU'
    """
    if not inplace:
        model = copy.deepcopy(model)
    groups = modules_to_fuse
    if groups and all(isinstance(n, str) for n in groups):
        groups = [groups]
    for names in groups:
        try:
            mods = [model.get_submodule(n) for n in names]
        except AttributeError as e:
            raise ValueError(f"fuse_modules: {e}") from None
        _set(model, names[0], _fuse(mods, names))
        for n in names[1:]:
            _set(model, n, nn.Identity())
    return model
