"""Operators and NumPy-style methods of arrays and tracers (installed on ``Value``)."""

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Value
from funcgrad.numpy import (bit_views, creation, eager_index, index_tricks, indexing,
                            math_extra, misc, products, reductions, shape_ops, sorting, ufuncs)


def _swap(fn):
    return lambda self, other: fn(other, self)


_OTHER_OPERANDS = (np.ndarray, np.generic, bool, int, float, complex)


def _defer_unknown(fn):
    """Binary operator that returns NotImplemented for operands funcgrad cannot handle."""
    def op(self, other):
        if isinstance(other, Value) or isinstance(other, _OTHER_OPERANDS):
            return fn(self, other)
        return NotImplemented
    return op


def _reshape(self, *shape, order="C"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return shape_ops.reshape(self, shape, order)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = axes[0]
    return shape_ops.transpose(self, axes or None)


def _astype(self, dtype, copy=False):
    return lax.convert_element_type(self, dtypes.check_user_dtype(dtype, "Array.astype"))


def _matrix_transpose(self):
    return shape_ops.matrix_transpose(self)


_BINARY = {
    "__add__": ufuncs.add, "__sub__": ufuncs.subtract, "__mul__": ufuncs.multiply,
    "__truediv__": ufuncs.divide, "__floordiv__": ufuncs.floor_divide,
    "__mod__": ufuncs.remainder, "__pow__": ufuncs.power, "__matmul__": products.matmul,
    "__and__": ufuncs.bitwise_and, "__or__": ufuncs.bitwise_or, "__xor__": ufuncs.bitwise_xor,
    "__lshift__": ufuncs.left_shift, "__rshift__": ufuncs.right_shift,
    "__divmod__": ufuncs.divmod,
}
_COMPARE = {
    "__eq__": ufuncs.equal, "__ne__": ufuncs.not_equal, "__lt__": ufuncs.less,
    "__le__": ufuncs.less_equal, "__gt__": ufuncs.greater, "__ge__": ufuncs.greater_equal,
}
_METHODS = {
    "sum": reductions.sum, "prod": reductions.prod, "max": reductions.max,
    "min": reductions.min, "mean": reductions.mean, "var": reductions.var,
    "std": reductions.std, "all": reductions.all, "any": reductions.any,
    "argmax": reductions.argmax, "argmin": reductions.argmin, "cumsum": reductions.cumsum,
    "cumprod": reductions.cumprod, "ptp": reductions.ptp,
    "ravel": shape_ops.ravel, "flatten": shape_ops.ravel, "squeeze": shape_ops.squeeze,
    "swapaxes": shape_ops.swapaxes, "repeat": shape_ops.repeat, "clip": ufuncs.clip,
    "round": ufuncs.round, "conj": ufuncs.conjugate, "conjugate": ufuncs.conjugate,
    "dot": products.dot, "take": indexing.take, "diagonal": creation.diagonal,
    "nonzero": lambda self, **kw: __import__("funcgrad.numpy.searching",
                                             fromlist=["x"]).nonzero(self, **kw),
    "view": bit_views.view, "byteswap": bit_views.byteswap,
}


def install():
    for name, fn in _BINARY.items():
        setattr(Value, name, _defer_unknown(fn))
        setattr(Value, "__r" + name[2:], _defer_unknown(_swap(fn)))
    for name, fn in _COMPARE.items():
        setattr(Value, name, _defer_unknown(fn))
    Value.__neg__ = lambda self: ufuncs.negative(self)
    Value.__pos__ = lambda self: self
    Value.__abs__ = lambda self: ufuncs.abs(self)
    Value.__invert__ = lambda self: ufuncs.invert(self)
    Value.__getitem__ = eager_index.getitem
    Value.__round__ = lambda self, ndigits=None: ufuncs.round(self, ndigits or 0)
    Value.at = property(lambda self: indexing._AtIndexer(self))
    Value.T = property(lambda self: shape_ops.transpose(self))
    Value.mT = property(_matrix_transpose)
    Value.real = property(lambda self: ufuncs.real(self))
    Value.imag = property(lambda self: ufuncs.imag(self))
    Value.reshape = _reshape
    Value.transpose = _transpose
    Value.astype = _astype
    Value.__array_namespace__ = _array_namespace
    Value.to_device = _to_device
    Value.__setitem__ = _setitem_error
    for name, fn in _METHODS.items():
        setattr(Value, name, fn)
    for name, fn in _NUMPY_METHODS.items():
        setattr(Value, name, fn)
    Value.itemsize = property(lambda self: self.aval.dtype.itemsize)
    Value.flat = property(lambda self: _FlatView(self))


def _sort(self, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """A sorted copy along ``axis``. Example: ``jnp.array([3, 1, 2]).sort()``."""
    return sorting.sort(self, axis, kind=kind, order=order, stable=stable, descending=descending)


def _argsort(self, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    """Indices that sort along ``axis``. Example: ``jnp.array([3, 1, 2]).argsort()``."""
    return sorting.argsort(self, axis, kind=kind, order=order, stable=stable,
                           descending=descending)


def _searchsorted(self, v, side="left", sorter=None, *, method="scan"):
    """Insertion indices of ``v`` into this sorted 1-D array. Example:
    ``jnp.array([1, 3, 5]).searchsorted(4)``."""
    return sorting.searchsorted(self, v, side=side, sorter=sorter, method=method)


def _argpartition(self, kth, axis=-1):
    """Indices partitioning around ``kth``. Example: ``jnp.array([3, 1, 2]).argpartition(1)``."""
    return sorting.argpartition(self, kth, axis)


def _trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Sum along a diagonal. Example: ``jnp.eye(3).trace()``."""
    return math_extra.trace(self, offset, axis1, axis2, dtype, out)


def _copy(self, order=None):
    """A copy of this array. Example: ``y = x.copy()``."""
    return misc.copy(self, order)


def _compress(self, condition, axis=None, *, size=None, fill_value=0, out=None):
    """Slices where ``condition`` is true. Example:
    ``jnp.arange(3).compress(jnp.array([True, False, True]))``."""
    return index_tricks.compress(condition, self, axis, size=size, fill_value=fill_value,
                                 out=out)


def _choose(self, choices, out=None, mode="raise"):
    """``choices[self[i]][i]`` elementwise. Example:
    ``jnp.array([0, 1]).choose([jnp.zeros(2), jnp.ones(2)])``."""
    return index_tricks.choose(self, choices, out=out, mode=mode)


_NUMPY_METHODS = {
    "sort": _sort, "argsort": _argsort, "searchsorted": _searchsorted,
    "argpartition": _argpartition, "trace": _trace, "copy": _copy, "compress": _compress,
    "choose": _choose,
}


class _FlatView:
    """``x.flat``: the elements of ``x`` in row-major order, read-only (funcgrad arrays are
    immutable). Example: ``x.flat[3]``, ``list(x.flat)``."""

    __slots__ = ("base",)

    def __init__(self, base):
        self.base = base

    def __len__(self):
        return self.base.size

    def __iter__(self):
        flat = shape_ops.ravel(self.base)
        return (flat[i] for i in range(self.base.size))

    def __getitem__(self, index):
        return indexing.getitem(shape_ops.ravel(self.base), index)

    def __setitem__(self, index, value):
        raise TypeError("funcgrad arrays are immutable: instead of x.flat[i] = y use "
                        "x = x.ravel().at[i].set(y).reshape(x.shape)")

    def __array__(self, dtype=None, copy=None):
        return np.asarray(shape_ops.ravel(self.base), dtype)



_API_VERSIONS = (None, "2021.12", "2022.12", "2023.12", "2024.12")


def _array_namespace(self, /, *, api_version=None):
    """``funcgrad.numpy`` (the array API namespace of funcgrad arrays)."""
    if api_version not in _API_VERSIONS:
        raise ValueError(f"funcgrad.numpy supports array API versions "
                         f"{', '.join(_API_VERSIONS[1:])}; got api_version={api_version!r}")
    return __import__("funcgrad.numpy", fromlist=["x"])


def _to_device(self, device, /, *, stream=None):
    """This array on ``device`` (array API). Example: ``x.to_device(funcgrad.devices()[0])``."""
    if stream is not None:
        raise ValueError("Array.to_device: stream is not supported")
    from funcgrad.lowering.array import device_put
    return device_put(self, device)


def _setitem_error(self, index, value):
    raise TypeError(f"funcgrad arrays are immutable: instead of x[idx] = y use "
                    f"x = x.at[idx].set(y) (got an assignment to a {self.aval.str_short()})")

