"""Dtypes: canonicalization (32-bit unless x64 is on), weak types and the promotion lattice.

Promotion follows JAX's lattice rather than NumPy's value-based rules: ``int8 + uint8 ->
int16``, ``int32 + float16 -> float16``, and a Python scalar is *weakly typed*: it takes the
other operand's type within its kind (``float16_array * 2.0`` stays float16).
"""
import functools

import ml_dtypes
import numpy as np

from funcgrad.config import config

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)
# The tangent type of integer and boolean values: carries no data.
float0 = np.dtype([("float0", np.void, 0)])

_SIGNED = (int8, int16, int32, int64)
_UNSIGNED = (uint8, uint16, uint32, uint64)
_FLOATS = (bfloat16, float16, float32, float64)
_COMPLEX = (complex64, complex128)
SUPPORTED = (bool_,) + _SIGNED + _UNSIGNED + _FLOATS + _COMPLEX

_NARROW = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def x64_enabled():
    return config.enable_x64


def canonicalize(dtype):
    """The dtype funcgrad stores for ``dtype``: 64-bit kinds narrow to 32 bits unless x64 is on."""
    dtype = np.dtype(dtype)
    if not config.enable_x64:
        return _NARROW.get(dtype, dtype)
    return dtype


def check_user_dtype(dtype, fname):
    """``canonicalize(dtype)`` for a dtype the user asked for by name in ``fname``, warning (as
    JAX does) when a 64-bit type is narrowed because x64 is off. Python's ``int``, ``float``
    and ``complex`` mean the default types and never warn.

    Example:
        >>> import warnings
        >>> from funcgrad.core import dtypes
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")       # x64 off: float32 and a UserWarning
        ...     dtypes.check_user_dtype(np.float64, "zeros")
        dtype('float32')
    """
    out = canonicalize(dtype)
    if out.itemsize != np.dtype(dtype).itemsize and not (
            isinstance(dtype, type) and dtype in (bool, int, float, complex)):
        import warnings
        warnings.warn(f"funcgrad.{fname}: dtype {np.dtype(dtype)} was requested but 64-bit "
                      f"types are off, so {out} is used instead. Enable them before creating "
                      f"arrays with funcgrad.config.update('enable_x64', True) (JAX's name "
                      f"'jax_enable_x64' works too) or FUNCGRAD_ENABLE_X64=1.",
                      UserWarning, stacklevel=3)
    return out


def default_int():
    return int64 if config.enable_x64 else int32


def default_uint():
    return uint64 if config.enable_x64 else uint32


def default_float():
    return float64 if config.enable_x64 else float32


def default_complex():
    return complex128 if config.enable_x64 else complex64


def is_float(dtype):
    return np.dtype(dtype) in _FLOATS


def is_complex(dtype):
    return np.dtype(dtype) in _COMPLEX


def is_inexact(dtype):
    return is_float(dtype) or is_complex(dtype)


def is_integer(dtype):
    dtype = np.dtype(dtype)
    return dtype in _SIGNED or dtype in _UNSIGNED


def is_signed(dtype):
    return np.dtype(dtype) in _SIGNED


def is_unsigned(dtype):
    return np.dtype(dtype) in _UNSIGNED


def is_bool(dtype):
    return np.dtype(dtype) == bool_


def finfo(dtype):
    return ml_dtypes.finfo(dtype)


def iinfo(dtype):
    return ml_dtypes.iinfo(dtype) if np.dtype(dtype) != bool_ else None


def real_dtype(dtype):
    """float32 for complex64, float64 for complex128, the dtype itself otherwise."""
    dtype = np.dtype(dtype)
    return {complex64: float32, complex128: float64}.get(dtype, dtype)


def complex_dtype(dtype):
    dtype = np.dtype(dtype)
    return complex128 if dtype == float64 or dtype == complex128 else complex64


def tangent_dtype(dtype):
    """The dtype of a derivative with respect to a value of ``dtype``: float0 for ints and bools."""
    return np.dtype(dtype) if is_inexact(dtype) else float0


# --- The promotion lattice ---------------------------------------------------------------------
# Nodes are dtypes plus three weak kinds ("i*", "f*", "c*") that stand for Python scalars.
_WEAK_INT, _WEAK_FLOAT, _WEAK_COMPLEX = "i*", "f*", "c*"
_EDGES = {
    bool_: [_WEAK_INT],
    _WEAK_INT: [uint8, int8],
    uint8: [int16, uint16], uint16: [int32, uint32], uint32: [int64, uint64], uint64: [_WEAK_FLOAT],
    int8: [int16], int16: [int32], int32: [int64], int64: [_WEAK_FLOAT],
    _WEAK_FLOAT: [bfloat16, float16, _WEAK_COMPLEX],
    bfloat16: [float32], float16: [float32], float32: [float64, complex64], float64: [complex128],
    _WEAK_COMPLEX: [complex64], complex64: [complex128], complex128: [],
}


def _upper_set(node):
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(_EDGES[n])
    return frozenset(seen)


_UPPER = {n: _upper_set(n) for n in _EDGES}


@functools.lru_cache(maxsize=None)
def _join(a, b):
    common = _UPPER[a] & _UPPER[b]
    for candidate in common:
        if _UPPER[candidate] == common:
            return candidate
    raise TypeError(f"no common type for {a} and {b}")


_WEAK_NODE = {"i": _WEAK_INT, "u": _WEAK_INT, "f": _WEAK_FLOAT, "c": _WEAK_COMPLEX}


def _node(dtype, weak):
    if weak:
        return _WEAK_NODE.get(np.dtype(dtype).kind, bool_)
    return np.dtype(dtype)


def _dtype_of_node(node):
    if node == _WEAK_INT:
        return default_int(), True
    if node == _WEAK_FLOAT:
        return default_float(), True
    if node == _WEAK_COMPLEX:
        return default_complex(), True
    return node, False


def python_scalar_dtype(value):
    """(dtype, weak) of a Python scalar: bools are strong, ints/floats/complex are weak."""
    if isinstance(value, bool):
        return bool_, False
    if isinstance(value, int):
        return default_int(), True
    if isinstance(value, float):
        return default_float(), True
    if isinstance(value, complex):
        return default_complex(), True
    raise TypeError(f"{type(value).__name__} is not a Python scalar")


def dtype_and_weak(x):
    """(dtype, weak_type) of an array, tracer, NumPy value or Python scalar."""
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval.dtype, aval.weak_type
    if isinstance(x, (bool, int, float, complex)):
        return python_scalar_dtype(x)
    if isinstance(x, (np.ndarray, np.generic)):
        return canonicalize(x.dtype), False
    if isinstance(x, (np.dtype, type, str)):
        return canonicalize(np.dtype(x)), False
    dtype = getattr(x, "dtype", None)
    if dtype is not None:
        return canonicalize(dtype), False
    raise TypeError(f"cannot interpret {type(x).__name__} as an array or a dtype")


@functools.lru_cache(maxsize=4096)
def _promote_pair(a, b):
    return _join(a, b)


def promote_types(a, b):
    """The common dtype of two (strong) dtypes under funcgrad's lattice.

    Example:
        >>> from funcgrad.core.dtypes import promote_types
        >>> promote_types("int8", "uint8")
        dtype('int16')
    """
    node = _promote_pair(np.dtype(a), np.dtype(b))
    return canonicalize(_dtype_of_node(node)[0])


class TypePromotionError(TypeError, ValueError):
    """Operands of different dtypes under ``numpy_dtype_promotion("strict")``."""


_strict_promotion = [False]    # config.numpy_dtype_promotion == "strict", read on every promotion


def _on_config_change(name, value):
    if name == "numpy_dtype_promotion":
        _strict_promotion[0] = value == "strict"


config.on_change(_on_config_change)
_on_config_change("numpy_dtype_promotion", config.numpy_dtype_promotion)


def _category(dtype):
    """0 bool, 1 integer, 2 floating, 3 complex: the kinds a weak scalar may join upwards."""
    if dtype == bool_:
        return 0
    if is_complex(dtype):
        return 3
    return 2 if is_inexact(dtype) else 1


def check_strict_promotion(args):
    """Under ``numpy_dtype_promotion("strict")``: every strongly typed operand has one dtype,
    and a weakly typed one (a Python scalar) is of the same kind or a lower one (an int with
    floats, not a float with ints); raise ``TypePromotionError`` naming the dtypes otherwise.

    Example:
        >>> from funcgrad.core.dtypes import check_strict_promotion
        >>> check_strict_promotion([np.float32(1), 2])          # an int scalar joins floats
        >>> check_strict_promotion([np.float32(1), np.int32(2)])
        Traceback (most recent call last):
        ...
        funcgrad.core.dtypes.TypePromotionError: Input dtypes ('float32', 'int32') have no implicit dtype promotion path under numpy_dtype_promotion='strict': cast the inputs explicitly (x.astype(...)) or use funcgrad.numpy_dtype_promotion('standard').
    """
    strong, weak = [], []
    for arg in args:
        dtype, is_weak = dtype_and_weak(arg)
        (weak if is_weak else strong).append(np.dtype(dtype))
    distinct = list(dict.fromkeys(strong))
    bad = len(distinct) > 1 or (distinct and any(
        _category(w) > _category(distinct[0]) or _category(distinct[0]) == 0 for w in weak))
    if bad:
        names = [str(d) for d in distinct] + [f"weak {_WEAK_NAME[_category(w)]}" for w in weak]
        raise TypePromotionError(
            f"Input dtypes {tuple(names)} have no implicit dtype promotion path under "
            f"numpy_dtype_promotion='strict': cast the inputs explicitly (x.astype(...)) or use "
            f"funcgrad.numpy_dtype_promotion('standard').")


_WEAK_NAME = {0: "bool", 1: "int", 2: "float", 3: "complex"}


def result_type_and_weak(*args):
    """(dtype, weak) that an operation on ``args`` produces, JAX-style.

    Python scalars (and weakly typed arrays) adopt the dtype of strong operands of their kind.
    """
    if not args:
        return default_float(), False
    if _strict_promotion[0] and len(args) > 1:
        check_strict_promotion(args)
    node = None
    for arg in args:
        dtype, weak = dtype_and_weak(arg)
        n = _node(dtype, weak)
        node = n if node is None else _promote_pair(node, n)
    if isinstance(node, str):
        # Every operand was weak: keep the widest concrete weak dtype seen (e.g. weak float64
        # under x64 stays float64) by default-typing the node.
        dtype, _ = _dtype_of_node(node)
        return canonicalize(dtype), True
    return canonicalize(node), False


def result_type(*args):
    """The dtype that an operation on ``args`` produces.

    Example:
        >>> from funcgrad.core.dtypes import result_type
        >>> result_type(np.float16, 2.0), result_type(np.int8, np.uint8)
        (dtype('float16'), dtype('int16'))
    """
    return result_type_and_weak(*args)[0]
