"""Abstract values: what tracing knows about an array (shape, dtype, weak type)."""
import math

import numpy as np


_keys = {}   # (shape, dtype, weak_type) -> int


class ShapeAndDtype:
    """``ndim`` and ``size`` for classes with a ``shape`` (ShapedArray, ShapeDtypeStruct)."""

    __slots__ = ()

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return math.prod(self.shape)     # Python ints: exact, and no NumPy call per use


class ShapedArray(ShapeAndDtype):
    """The abstract value of an array: a shape, a dtype, a weak-type flag and, inside a
    ``shard_map`` body, ``vma``: the manual mesh axes the value varies over (empty
    everywhere else; see ``core/vma.py``).

    Weakly typed values come from Python scalars and adopt the dtype of strong operands.

    Example:
        >>> from funcgrad.core.avals import ShapedArray
        >>> ShapedArray((2, 3), np.float32)
        f32[2,3]
        >>> ShapedArray((2,), np.float32, vma={"model", "data"})
        f32[2]{V:data,model}
    """

    __slots__ = ("shape", "dtype", "weak_type", "vma", "_hash", "key")

    def __init__(self, shape, dtype, weak_type=False, vma=frozenset()):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)
        self.vma = vma if type(vma) is frozenset else frozenset(vma)
        full = ((self.shape, self.dtype, self.weak_type, self.vma) if self.vma
                else (self.shape, self.dtype, self.weak_type))
        self._hash = hash(full)
        # ``key``: a small int naming (shape, dtype, weak_type), equal for equal avals. Dispatch
        # caches key on it: an int hashes and compares in C, an aval needs Python calls.
        key = _keys.get(full)
        if key is None:
            key = _keys.setdefault(full, len(_keys))
        self.key = key

    def __reduce__(self):
        # ``key`` is per process: rebuild it instead of pickling it.
        return (ShapedArray, (self.shape, self.dtype, self.weak_type, self.vma))

    def update(self, shape=None, dtype=None, weak_type=None, vma=None):
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype,
                           self.weak_type if weak_type is None else weak_type,
                           self.vma if vma is None else vma)

    def strip_weak(self):
        return self if not self.weak_type else ShapedArray(self.shape, self.dtype, False,
                                                           self.vma)

    def __eq__(self, other):
        return (type(other) is ShapedArray and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type
                and self.vma == other.vma)

    def __hash__(self):
        return self._hash

    def str_short(self):
        from funcgrad.core.dtypes import bfloat16
        names = {bfloat16: "bf16"}
        d = self.dtype
        name = names.get(d) or (d.kind.replace("i", "i").replace("b", "bool").replace("V", "float0")
                                + (str(d.itemsize * 8) if d.kind not in "bV" else ""))
        return (f"{name}[{','.join(map(str, self.shape))}]" + ("{weak}" if self.weak_type else "")
                + ("{V:" + ",".join(sorted(self.vma)) + "}" if self.vma else ""))

    __repr__ = str_short


def same_shape_dtype(a, b):
    return a.shape == b.shape and a.dtype == b.dtype
