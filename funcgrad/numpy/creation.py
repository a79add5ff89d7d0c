"""Array creation: asarray, zeros, ones, full, arange, linspace, eye and friends."""
import builtins
import math

import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Value
from funcgrad.core.values import PYTHON_SCALARS, aval_of
from funcgrad.numpy._util import canonical_dtype


def _shape_tuple(fname, shape):
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"funcgrad.numpy.{fname}: shape must be an int or a sequence of ints, "
                        f"got {shape!r}") from None
    if builtins.any(s < 0 for s in out):
        raise ValueError(f"funcgrad.numpy.{fname}: negative dimensions are not allowed: {out}")
    return out


def _on_device(out, device):
    """``out`` on ``device`` (the array API's ``device=`` argument; None: where it is)."""
    if device is None:
        return out
    from funcgrad.lowering.array import device_put
    return device_put(out, device)


def _stack_nested(fname, obj, dtype):
    """Turn a (nested) list/tuple that may hold funcgrad arrays into one array."""
    from funcgrad.numpy.shape_ops import stack
    items = [array(o, dtype=dtype) for o in obj]
    if not items:
        return asarray(np.asarray(obj, dtype=dtype or dtypes.default_float()))
    return stack(items)


def array(object, dtype=None, copy=True, ndmin=0):
    """An array from a NumPy array, a (nested) list, a scalar or another array.

    Python floats become float32 (float64 with x64 enabled), as in JAX.

    Example:
        >>> jnp.array([[1, 2], [3, 4]])
        Array([[1, 2],
               [3, 4]], dtype=int32)
    """
    dtype = canonical_dtype(dtype, "numpy.array")
    if isinstance(object, Value):
        out = object if dtype is None else lax.convert_element_type(object, dtype)
        if aval_of(out).weak_type:
            out = lax.convert_element_type(out, aval_of(out).dtype, False)
    elif isinstance(object, (list, tuple)) and _holds_values(object):
        out = _stack_nested("array", object, dtype)
    else:
        if isinstance(object, PYTHON_SCALARS) and dtype is None:
            dtype = dtypes.python_scalar_dtype(object)[0]
        host = np.asarray(object, dtype=dtype)
        if host.dtype == object_dtype:
            raise TypeError(f"funcgrad.numpy.array: cannot make an array from "
                            f"{type(object).__name__} holding Python objects")
        if dtype is None and host.dtype.kind == "f" and not isinstance(object, np.ndarray) \
                and not isinstance(object, np.generic):
            host = host.astype(dtypes.default_float())
        from funcgrad.lowering.array import device_put
        out = device_put(host.astype(dtypes.canonicalize(host.dtype), copy=False))
    if ndmin and aval_of(out).ndim < ndmin:
        out = lax.broadcast_to_rank(out, ndmin)
    return out


object_dtype = np.dtype(object)


def _holds_values(obj):
    for o in obj:
        if isinstance(o, Value):
            return True
        if isinstance(o, (list, tuple)) and _holds_values(o):
            return True
    return False


def asarray(a, dtype=None, copy=None, *, device=None):
    """Like ``array`` but returns funcgrad arrays of the right dtype unchanged.

    ``copy`` is accepted for the array API: arrays are immutable, so a copy and the original
    cannot be told apart. ``device`` places the result.

    Example:
        >>> jnp.asarray(np.arange(3)).dtype
        dtype('int32')
    """
    dtype = canonical_dtype(dtype, "numpy.asarray")
    if isinstance(a, Value) and (dtype is None or aval_of(a).dtype == dtype):
        return _on_device(a, device)
    return _on_device(array(a, dtype=dtype), device)


def full(shape, fill_value, dtype=None, *, device=None):
    """An array of ``shape`` filled with ``fill_value``.

    Example:
        >>> jnp.full((2,), 7.0)
        Array([7., 7.], dtype=float32)
    """
    shape = _shape_tuple("full", shape)
    if dtype is None:
        dtype = dtypes.result_type(fill_value)
    fill = lax.convert_element_type(fill_value, canonical_dtype(dtype, "numpy.full"))
    from funcgrad.numpy._util import broadcast_to_shape
    out = broadcast_to_shape(fill, shape) if aval_of(fill).shape else lax.broadcast(fill, shape)
    return _on_device(out, device)


def zeros(shape, dtype=None, *, device=None):
    """Zeros of ``shape`` (float32 by default). Example: ``jnp.zeros((2, 3))``."""
    return full(shape, 0, canonical_dtype(dtype, "numpy.zeros") or dtypes.default_float(),
                device=device)


def ones(shape, dtype=None, *, device=None):
    """Ones of ``shape``. Example: ``jnp.ones(3)``."""
    return full(shape, 1, canonical_dtype(dtype, "numpy.ones") or dtypes.default_float(),
                device=device)


def empty(shape, dtype=None, *, device=None):
    """Zeros: funcgrad arrays are never uninitialized. Example: ``jnp.empty(3)``."""
    return zeros(shape, dtype, device=device)


def _like(fname, fill):
    def fn(a, dtype=None, shape=None, *, device=None):
        return full_like(a, fill, dtype, shape, device=device)
    fn.__name__ = fname
    fn.__doc__ = (f"An array like ``a`` (shape and dtype) filled with {fill}.\n\n"
                  f"Example:\n    >>> jnp.{fname}(jnp.array([[1, 2, 3]]))\n"
                  f"    Array([[{fill}, {fill}, {fill}]], dtype=int32)\n")
    return fn


zeros_like = _like("zeros_like", 0)
ones_like = _like("ones_like", 1)
empty_like = _like("empty_like", 0)


def full_like(a, fill_value, dtype=None, shape=None, *, device=None):
    """An array like ``a`` filled with ``fill_value``. Example: ``jnp.full_like(x, 2.0)``."""
    av = aval_of(a)
    return full(av.shape if shape is None else shape, fill_value,
                av.dtype if dtype is None else dtype, device=device)


def arange(start, stop=None, step=None, dtype=None, *, device=None):
    """Evenly spaced values in [start, stop) (static bounds).

    Example:
        >>> jnp.arange(5)
        Array([0, 1, 2, 3, 4], dtype=int32)
    """
    for v in (start, stop, step):
        if isinstance(v, Value) and not hasattr(v, "_value"):
            raise TypeError("funcgrad.numpy.arange: start/stop/step must be concrete (the "
                            "result's length must be known when tracing)")
    conc = [np.asarray(v).item() if isinstance(v, Value) else v for v in (start, stop, step)]
    start, stop, step = conc
    if stop is None and step is None:
        if dtype is None:
            dtype = dtypes.result_type(start)
        n = builtins.max(int(math.ceil(start)), 0)
        return _on_device(lax.iota(canonical_dtype(dtype, "numpy.arange"), n), device)
    host = np.arange(start, stop, step if step is not None else 1)
    if dtype is None:
        dtype = dtypes.result_type(*[v for v in (start, stop, step) if v is not None])
    return _on_device(array(host, dtype=dtype), device)


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """``num`` evenly spaced values from ``start`` to ``stop``.

    Example:
        >>> jnp.linspace(0.0, 1.0, 5)
        Array([0.  , 0.25, 0.5 , 0.75, 1.  ], dtype=float32)
    """
    from funcgrad.numpy import ufuncs
    num = int(num)
    dt = canonical_dtype(dtype, "numpy.linspace") or dtypes.result_type(start, stop, 1.0)
    start_a = lax.convert_element_type(start, dtypes.default_float() if not
                                       dtypes.is_inexact(dt) else dt)
    stop_a = lax.convert_element_type(stop, aval_of(start_a).dtype)
    div = (num - 1) if endpoint else num
    step = ufuncs.divide(ufuncs.subtract(stop_a, start_a), builtins.max(div, 1))
    idx = lax.iota(aval_of(start_a).dtype, num)
    from funcgrad.numpy._util import broadcast_to_shape
    shape_tail = aval_of(step).shape
    if shape_tail:
        idx = lax.broadcast_in_dim(idx, (num,) + shape_tail, (0,))
    out = ufuncs.add(start_a, ufuncs.multiply(idx, step))
    if endpoint and num > 1:
        last = broadcast_to_shape(stop_a, (1,) + shape_tail) if shape_tail else \
            lax.broadcast(stop_a, (1,))
        out = lax.concatenate([lax.slice_in_dim(out, 0, num - 1), last], 0)
    if axis != 0 and shape_tail:
        from funcgrad.numpy.shape_ops import moveaxis
        out = moveaxis(out, 0, axis)
    out = lax.convert_element_type(out, dt) if aval_of(out).dtype != dt else out
    out = _on_device(out, device)
    return (out, step) if retstep else out


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """``base ** linspace(start, stop)``. Example: ``jnp.logspace(0, 2, 3)``."""
    from funcgrad.numpy import ufuncs
    out = ufuncs.power(base, linspace(start, stop, num, endpoint, axis=axis))
    return out if dtype is None else lax.convert_element_type(out, dtype)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """Geometric progression from ``start`` to ``stop``. Example: ``jnp.geomspace(1, 100, 3)``."""
    from funcgrad.numpy import ufuncs
    lo, hi = ufuncs.log10(asarray(start)), ufuncs.log10(asarray(stop))
    return logspace(lo, hi, num, endpoint, 10.0, dtype, axis)


def eye(N, M=None, k=0, dtype=None, *, device=None):
    """A 2-d array with ones on the ``k``-th diagonal.

    Example:
        >>> jnp.eye(2)
        Array([[1., 0.],
               [0., 1.]], dtype=float32)
    """
    M = N if M is None else M
    dtype = canonical_dtype(dtype, "numpy.eye") or dtypes.default_float()
    k = builtins.max(builtins.min(int(k), M), -N)   # beyond the corners: no ones (any int k)
    rows = lax.broadcasted_iota(dtypes.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (N, M), 1)
    mask = lax.eq(lax.add(rows, np.int32(k)), cols)
    return _on_device(lax.convert_element_type(mask, dtype), device)


def identity(n, dtype=None):
    """The n x n identity. Example: ``jnp.identity(3)``."""
    return eye(n, dtype=dtype)


def tri(N, M=None, k=0, dtype=None):
    """Ones at and below the ``k``-th diagonal. Example: ``jnp.tri(3)``."""
    M = N if M is None else M
    rows = lax.broadcasted_iota(dtypes.int32, (N, M), 0)
    cols = lax.broadcasted_iota(dtypes.int32, (N, M), 1)
    return lax.convert_element_type(lax.ge(lax.add(rows, np.int32(k)), cols),
                                    canonical_dtype(dtype, "numpy.tri") or dtypes.default_float())


def tril(m, k=0):
    """Lower triangle of the last two axes. Example: ``jnp.tril(x)``."""
    from funcgrad.numpy.ufuncs import where
    av = aval_of(m)
    mask = tri(av.shape[-2], av.shape[-1], k, dtypes.bool_)
    return where(mask, m, zeros_like(m))


def triu(m, k=0):
    """Upper triangle of the last two axes. Example: ``jnp.triu(x)``."""
    from funcgrad.numpy.ufuncs import where
    av = aval_of(m)
    mask = tri(av.shape[-2], av.shape[-1], k - 1, dtypes.bool_)
    return where(mask, zeros_like(m), m)


def diag(v, k=0):
    """The ``k``-th diagonal of a matrix, or a matrix with vector ``v`` on it.

    Example:
        >>> jnp.diag(jnp.array([1, 2]))
        Array([[1, 0],
               [0, 2]], dtype=int32)
    """
    v = asarray(v)
    av = aval_of(v)
    if av.ndim == 1:
        n = av.shape[0] + builtins.abs(k)
        from funcgrad.numpy.ufuncs import where
        padded = lax.pad(v, np.zeros((), av.dtype), [(builtins.max(k, 0) if k >= 0 else 0,
                                                      builtins.max(-k, 0), 0)])
        rows = lax.broadcasted_iota(dtypes.int32, (n, n), 0)
        cols = lax.broadcasted_iota(dtypes.int32, (n, n), 1)
        mask = lax.eq(lax.add(rows, np.int32(k)), cols)
        if k >= 0:
            vals = lax.broadcast_in_dim(padded, (n, n), (1,))
        else:
            vals = lax.broadcast_in_dim(lax.pad(v, np.zeros((), av.dtype), [(0, -k, 0)]),
                                        (n, n), (1,))
        return where(mask, vals, zeros((n, n), av.dtype))
    if av.ndim == 2:
        return diagonal(v, k)
    raise ValueError(f"funcgrad.numpy.diag: input must be 1-d or 2-d, got {av.str_short()}")


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The ``offset`` diagonal over ``axis1``/``axis2`` (moved to the end).

    Example:
        >>> jnp.diagonal(jnp.eye(3))
        Array([1., 1., 1.], dtype=float32)
    """
    from funcgrad.numpy.shape_ops import moveaxis
    a = moveaxis(asarray(a), (axis1, axis2), (-2, -1))
    av = aval_of(a)
    n, m = av.shape[-2:]
    offset = int(offset)
    row0, col0 = (0, offset) if offset >= 0 else (-offset, 0)
    length = builtins.max(0, builtins.min(n - row0, m - col0))
    # In the row-major flattening of the last two axes the diagonal is a strided slice.
    flat = lax.reshape(a, av.shape[:-2] + (n * m,))
    batch = len(av.shape) - 2
    start = row0 * m + col0 if length else 0
    limit = start + (length - 1) * (m + 1) + 1 if length else 0
    return lax.slice(flat, (0,) * batch + (start,), av.shape[:-2] + (limit,),
                     (1,) * batch + (m + 1,))


def meshgrid(*xi, indexing="xy", sparse=False, copy=True):
    """Coordinate arrays from 1-d coordinate vectors. Example: ``X, Y = jnp.meshgrid(x, y)``."""
    from funcgrad.numpy._util import broadcast_to_shape
    xs = [asarray(x).reshape(-1) for x in xi]
    shape = [aval_of(x).shape[0] for x in xs]
    if indexing == "xy" and len(xs) >= 2:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        axis = i
        if indexing == "xy" and len(xs) >= 2 and i < 2:
            axis = 1 - i
        view = [1] * len(xs)
        view[axis] = aval_of(x).shape[0]
        x = lax.reshape(x, view)
        out.append(x if sparse else broadcast_to_shape(x, tuple(shape)))
    return out
