"""Padding modules with PyTorch's names: ``ZeroPad{1,2,3}d``, ``ConstantPad{1,2,3}d``,
``ReflectionPad{1,2,3}d``, ``ReplicationPad{1,2,3}d`` and ``CircularPad{1,2,3}d``, each
calling ``F.pad`` on the last 1, 2 or 3 axes."""
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module

_PYTORCH_MODE = {"Zero": "constant", "Constant": "constant", "Reflection": "reflect",
                 "Replication": "replicate", "Circular": "circular"}


class _Pad(Module):
    mode, dims = "constant", 1

    def __init__(self, padding, value=0.0):
        super().__init__()
        n = 2 * self.dims
        pads = (int(padding),) * n if isinstance(padding, int) else tuple(int(p) for p in padding)
        if len(pads) != n:
            raise ValueError(f"{type(self).__name__}: padding must be an int or {n} ints "
                             f"(left, right, top, bottom, ...), got {padding}")
        self.padding, self.value = pads, float(value)

    def forward(self, x):
        if x.ndim not in (self.dims + 1, self.dims + 2):
            raise ValueError(f"{type(self).__name__}: expected a {self.dims + 1}-d or "
                             f"{self.dims + 2}-d input, got shape {tuple(x.shape)}")
        return F.pad(x, self.padding, self.mode, self.value)

    def extra_repr(self):
        extra = f", value={self.value}" if type(self).__name__.startswith("Constant") else ""
        return f"{self.padding}{extra}"


def _pad_class(kind, dims):
    name = f"{kind}Pad{dims}d"
    if kind == "Constant":
        init = lambda self, padding, value: _Pad.__init__(self, padding, value)  # noqa: E731
    else:
        init = lambda self, padding: _Pad.__init__(self, padding)  # noqa: E731
    doc = (f"Pad the last {dims} axes with ``F.pad(mode={_PYTORCH_MODE[kind]!r})``. "
           f"Example: ``nn.{name}({'1, 0.5' if kind == 'Constant' else '1'})(x)``.")
    cls = type(name, (_Pad,), {"mode": _PYTORCH_MODE[kind], "dims": dims, "__init__": init,
                               "__doc__": doc})
    cls.__module__ = __name__
    return cls


for _kind in _PYTORCH_MODE:
    for _dims in (1, 2, 3):
        globals()[f"{_kind}Pad{_dims}d"] = _pad_class(_kind, _dims)
del _kind, _dims

__all__ = [f"{k}Pad{d}d" for k in _PYTORCH_MODE for d in (1, 2, 3)]
