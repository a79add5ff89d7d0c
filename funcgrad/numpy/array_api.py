"""The Python array API standard (2024.12) names that NumPy spells differently, its dtype
functions (``astype``, ``can_cast``, ``isdtype``) and its inspection API
(``__array_namespace_info__``).

Example:
    >>> import funcgrad.numpy as xp
    >>> xp.__array_api_version__
    '2024.12'
    >>> xp.isdtype(xp.float32, "real floating")
    True
"""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer, Value
from funcgrad.core.values import aval_of
from funcgrad.numpy import reductions, ufuncs as _uf
from funcgrad.numpy._util import (canonical_dtype, canonicalize_axis, check_arraylike,
                                  promote_dtypes)

__array_api_version__ = "2024.12"

# --- renamed elementwise functions ---------------------------------------------------------
acos, acosh, asin, asinh = _uf.arccos, _uf.arccosh, _uf.arcsin, _uf.arcsinh
atan, atan2, atanh = _uf.arctan, _uf.arctan2, _uf.arctanh
bitwise_left_shift, bitwise_right_shift = _uf.left_shift, _uf.right_shift
bitwise_invert = _uf.invert


# --- dtype functions -----------------------------------------------------------------------
_KINDS = {
    "bool": lambda d: d == dtypes.bool_,
    "signed integer": dtypes.is_signed,
    "unsigned integer": dtypes.is_unsigned,
    "integral": dtypes.is_integer,
    "real floating": dtypes.is_float,
    "complex floating": dtypes.is_complex,
    "numeric": lambda d: d != dtypes.bool_ and d in dtypes.SUPPORTED,
}


def _as_dtype(fname, d):
    if isinstance(d, Value) or isinstance(d, np.ndarray):
        return np.dtype(d.dtype)
    try:
        return np.dtype(d)
    except TypeError:
        raise TypeError(f"funcgrad.numpy.{fname}: {d!r} is not a dtype") from None


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``: a dtype, a kind name ("bool", "signed integer",
    "unsigned integer", "integral", "real floating", "complex floating", "numeric") or a tuple
    of these.

    Example:
        >>> jnp.isdtype(jnp.int8, ("integral", "bool"))
        True
    """
    dt = _as_dtype("isdtype", dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"funcgrad.numpy.isdtype: unknown kind {kind!r}; expected one of "
                             f"{sorted(_KINDS)}")
        return bool(_KINDS[kind](dt))
    return dt == _as_dtype("isdtype", kind)


def can_cast(from_, to, casting="safe"):
    """Whether ``from_`` (a dtype or an array) converts to ``to`` under ``casting`` rules.

    Example:
        >>> jnp.can_cast(jnp.int8, jnp.float32)
        True
    """
    src = _as_dtype("can_cast", from_)
    dst = _as_dtype("can_cast", to)
    return bool(np.can_cast(src, dst, casting=casting))


def astype(x, dtype, /, *, copy=True, device=None):
    """``x`` converted to ``dtype`` (complex to real keeps the real part; to bool tests != 0).

    Example:
        >>> jnp.astype(jnp.array([1.7, -2.2]), jnp.int32)
        Array([ 1, -2], dtype=int32)
    """
    check_arraylike("astype", x)
    x = promote_dtypes(x)[0]
    src = aval_of(x).dtype
    dst = canonical_dtype(dtype, "numpy.astype")
    if dst == src and not (isinstance(x, Value) and aval_of(x).weak_type):
        from funcgrad.numpy.creation import asarray
        out = asarray(x)
    elif dst == dtypes.bool_:
        out = lax.ne(x, np.zeros((), src))
    else:
        if dtypes.is_complex(src) and not dtypes.is_complex(dst):
            x = lax.real(x)
        out = lax.convert_element_type(x, dst)
    if device is not None:
        from funcgrad.lowering.array import device_put
        out = device_put(out, device)
    return out


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple.

    Example:
        >>> a, b = jnp.unstack(jnp.ones((2, 3)))
    """
    check_arraylike("unstack", x)
    x = promote_dtypes(x)[0]
    av = aval_of(x)
    if av.ndim == 0:
        raise ValueError("funcgrad.numpy.unstack: input must have at least one dimension")
    ax = canonicalize_axis("unstack", axis, av.ndim)
    return tuple(lax.index_in_dim(x, i, ax, keepdims=False) for i in range(av.shape[ax]))


def _cumulative(name, running, result):
    """The array API's ``cumulative_sum``/``cumulative_prod``: NumPy's ``running`` (``cumsum``
    or ``cumprod``) with the standard's axis rule and ``include_initial``."""
    def fn(x, /, *, axis=None, dtype=None, include_initial=False):
        check_arraylike(name, x)
        av = aval_of(x)
        if axis is None:
            if av.ndim > 1:
                raise ValueError(f"funcgrad.numpy.{name}: axis must be given for an array of "
                                 f"rank {av.ndim} ({av.str_short()})")
            axis = 0 if av.ndim else None    # a 0-d array runs as a 1-element one
        out = running(x, axis=axis, dtype=dtype)
        if include_initial:
            ax = canonicalize_axis(name, axis or 0, aval_of(out).ndim)
            init = 0 if name == "cumulative_sum" else 1
            shape = list(aval_of(out).shape)
            shape[ax] = 1
            out = lax.concatenate([lax.full(tuple(shape), init, aval_of(out).dtype), out], ax)
        return out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Running {name[11:]} along ``axis`` (array API: ``include_initial`` prepends "
                  f"the identity).\n\nExample:\n    >>> jnp.{name}(jnp.array([1, 2, 3]), "
                  f"include_initial=True)\n    {result}\n")
    return fn


cumulative_sum = _cumulative("cumulative_sum", reductions.cumsum,
                             "Array([0, 1, 3, 6], dtype=int32)")
cumulative_prod = _cumulative("cumulative_prod", reductions.cumprod,
                              "Array([1, 1, 2, 6], dtype=int32)")


class finfo:
    """Machine limits of a floating-point dtype (of the real part for complex dtypes).

    As ``numpy.finfo`` (bfloat16 and the other ml_dtypes included), with the array API's
    types: ``bits`` is an int; ``eps``, ``max``, ``min``, ``smallest_normal`` (and ``tiny``,
    ``resolution``, ``epsneg``) are Python floats; ``dtype`` is the real dtype.

    Example:
        >>> jnp.finfo(jnp.complex64).eps
        1.1920928955078125e-07
        >>> jnp.finfo(jnp.bfloat16).bits
        16
    """
    _FLOATS = ("eps", "epsneg", "max", "min", "smallest_normal", "tiny", "resolution")

    def __init__(self, dtype):
        dt = dtypes.real_dtype(_as_dtype("finfo", dtype))
        if not dtypes.is_float(dt):
            raise ValueError(f"funcgrad.numpy.finfo: {dt} is not a floating-point dtype; use "
                             f"iinfo for integers")
        self._info = dtypes.finfo(dt)
        self.dtype = np.dtype(dt)
        self.bits = int(self._info.bits)
        for name in self._FLOATS:
            setattr(self, name, float(getattr(self._info, name)))

    def __getattr__(self, name):      # the rest of numpy's finfo (nmant, maxexp, ...)
        if name == "_info":
            raise AttributeError(name)
        return getattr(self._info, name)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, "
                f"dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype: ``bits``, ``min``, ``max`` (Python ints) and ``dtype``.

    Example:
        >>> jnp.iinfo(jnp.int8).min
        -128
    """

    def __init__(self, dtype):
        dt = _as_dtype("iinfo", dtype)
        if not dtypes.is_integer(dt):
            raise ValueError(f"funcgrad.numpy.iinfo: {dt} is not an integer dtype; use finfo "
                             f"for floating-point types")
        info = np.iinfo(dt)
        self.dtype, self.bits = np.dtype(dt), int(info.bits)
        self.min, self.max, self.kind = int(info.min), int(info.max), info.kind

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# --- DLPack --------------------------------------------------------------------------------
def from_dlpack(x, /, *, device=None, copy=None):
    """An array from any object with ``__dlpack__`` (a NumPy array, a torch tensor, another
    funcgrad array), on ``device`` (default: where the producer's memory is).

    ``copy=None`` shares the producer's memory where it can (host memory aligned for XLA, a
    buffer on the same accelerator) and copies otherwise; ``copy=True`` always gives a new
    buffer; ``copy=False`` shares as ``None`` does (an unaligned host buffer is still copied
    by the CPU client).

    Example:
        >>> jnp.from_dlpack(np.arange(3.0), copy=True)
        Array([0., 1., 2.], dtype=float32)
    """
    if copy not in (None, True, False):
        raise ValueError(f"funcgrad.numpy.from_dlpack: copy must be None, True or False, got "
                         f"{copy!r}")
    from funcgrad.lowering.array import device_put, from_dlpack as _shared
    out = _shared(x, device)
    if copy:
        # a host round trip makes a fresh buffer whatever the producer was
        out = device_put(np.array(np.asarray(out), copy=True), out.device)
    return out


# --- unique_* ------------------------------------------------------------------------------
def _unique_host(fname, x):
    if isinstance(x, Tracer) and not hasattr(x, "_value"):
        raise TypeError(f"funcgrad.numpy.{fname}: the number of unique values is not known "
                        f"while tracing; use jnp.unique(x, size=N, ...) inside jit")
    from funcgrad.numpy.creation import asarray
    host = np.asarray(x)
    vals, index, inverse, counts = np.unique(host.ravel(), return_index=True,
                                             return_inverse=True, return_counts=True,
                                             equal_nan=False)
    it = dtypes.default_int()
    return (asarray(vals.astype(host.dtype)), asarray(index.astype(it)),
            asarray(inverse.reshape(host.shape).astype(it)), asarray(counts.astype(it)))


def _unique(fname, x, size, fill_value):
    check_arraylike(fname, x)
    if size is None:
        return _unique_host(fname, x)
    from funcgrad.numpy import sorting
    vals, index, inverse, counts = sorting.unique(
        x, return_index=True, return_inverse=True, return_counts=True, size=size,
        fill_value=fill_value)
    return vals, index, lax.reshape(inverse, aval_of(x).shape), counts


def unique_all(x, /, *, size=None, fill_value=None):
    """``(values, indices, inverse_indices, counts)`` of the unique elements of ``x``.

    ``size=`` (static) makes it usable under jit (needs ``jnp.unique``).

    Example:
        >>> v, i, inv, c = jnp.unique_all(jnp.array([3, 1, 3]))
    """
    r = _unique("unique_all", x, size, fill_value)
    return _UniqueAll(*r)


def unique_counts(x, /, *, size=None, fill_value=None):
    """``(values, counts)`` of the unique elements. Example: ``jnp.unique_counts(x)``."""
    r = _unique("unique_counts", x, size, fill_value)
    return _UniqueCounts(r[0], r[3])


def unique_inverse(x, /, *, size=None, fill_value=None):
    """``(values, inverse_indices)`` with ``values[inverse_indices] == x``.

    Example:
        >>> v, inv = jnp.unique_inverse(jnp.array([3, 1, 3]))
    """
    r = _unique("unique_inverse", x, size, fill_value)
    return _UniqueInverse(r[0], r[2])


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted unique elements of ``x``. Example: ``jnp.unique_values(x)``."""
    return _unique("unique_values", x, size, fill_value)[0]


def _namedtuple(name, fields):
    from collections import namedtuple
    return namedtuple(name, fields)


_UniqueAll = _namedtuple("UniqueAllResult", "values indices inverse_indices counts")
_UniqueCounts = _namedtuple("UniqueCountsResult", "values counts")
_UniqueInverse = _namedtuple("UniqueInverseResult", "values inverse_indices")


# --- inspection API ------------------------------------------------------------------------
class ArrayNamespaceInfo:
    """What ``funcgrad.numpy`` supports (the array API inspection object).

    Example:
        >>> info = jnp.__array_namespace_info__()
        >>> info.default_dtypes()["real floating"]
        dtype('float32')
    """

    def capabilities(self):
        """Optional features: boolean indexing and data-dependent shapes only work eagerly;
        arrays have at most 32 dimensions (the most that every path, NumPy's conversions
        included, takes)."""
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 32}

    def default_device(self):
        """The device new arrays go to."""
        from funcgrad.lowering.backend import devices
        return devices()[0]

    def devices(self):
        """All devices of the default backend."""
        from funcgrad.lowering.backend import devices
        return list(devices())

    def default_dtypes(self, *, device=None):
        """Default dtypes (they follow the x64 setting)."""
        return {"real floating": np.dtype(dtypes.default_float()),
                "complex floating": np.dtype(dtypes.default_complex()),
                "integral": np.dtype(dtypes.default_int()),
                "indexing": np.dtype(dtypes.default_int())}

    def dtypes(self, *, device=None, kind=None):
        """The supported dtypes, by name, optionally only those of ``kind`` (see isdtype)."""
        names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                 "uint64", "float32", "float64", "complex64", "complex128"]
        if not dtypes.x64_enabled():
            names = [n for n in names if n in ("complex64",) or
                     not (n.endswith("64") or n.endswith("128"))]
        out = {}
        for n in names:
            dt = np.dtype(n)
            if kind is None or isdtype(dt, kind):
                out[n] = dt
        return out


def __array_namespace_info__():
    """The array API inspection object. Example: ``jnp.__array_namespace_info__().devices()``."""
    return ArrayNamespaceInfo()
bool_dtype = np.dtype(np.bool_)
