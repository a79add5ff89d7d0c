"""What counts as an array-like input, and the abstract value of any of them."""
import numpy as np

from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.interpreters import Value

PYTHON_SCALARS = (bool, int, float, complex)


def is_arraylike(x):
    return isinstance(x, (Value, np.ndarray, np.generic) + PYTHON_SCALARS)


def aval_of(x):
    """The ShapedArray of an Array, tracer, NumPy value or Python scalar."""
    if isinstance(x, Value):
        return x.aval
    if isinstance(x, PYTHON_SCALARS):
        dt, weak = dtypes.python_scalar_dtype(x)
        return ShapedArray((), dt, weak)
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype), False)
    if hasattr(x, "__array__") or hasattr(x, "__array_interface__"):
        arr = np.asarray(x)
        return ShapedArray(arr.shape, dtypes.canonicalize(arr.dtype), False)
    raise TypeError(f"{type(x).__name__} is not a valid array type for funcgrad "
                    f"(expected an Array, a NumPy array or a Python scalar)")


def to_numpy_canonical(x, aval=None):
    """``x`` as a NumPy array of its canonical dtype (float64 -> float32 unless x64 is on)."""
    aval = aval or aval_of(x)
    return np.asarray(x, dtype=aval.dtype)
