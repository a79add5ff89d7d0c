"""Index construction and functional array edits: tril/triu/diag indices, indices, ix_,
unravel_index, ravel_multi_index, put/put_along_axis, select, piecewise, choose, compress,
extract, place, fill_diagonal, apply_along_axis, apply_over_axes, vectorize, resize, append,
insert, delete, trim_zeros, diagflat, vander, fromfunction, mgrid/ogrid.

Arrays are immutable: the NumPy functions that write in place (``put``, ``place``,
``fill_diagonal``, ``put_along_axis``) return the updated array instead (pass ``inplace=False``
as in JAX; ``inplace=True`` raises).
"""
import builtins
import functools

import numpy as np

from funcgrad import lax
from funcgrad.core import batching, dtypes
from funcgrad.core.interpreters import Tracer, Value
from funcgrad.core.values import aval_of
from funcgrad.numpy import ufuncs as uf
from funcgrad.numpy._util import (broadcast_shapes, broadcast_to_shape, canonicalize_axis,
                                  check_arraylike, promote_dtypes, shape_of)


def _asarray(x, dtype=None):
    from funcgrad.numpy.creation import asarray
    return asarray(x, dtype)


def _is_concrete(x):
    return not isinstance(x, Tracer) or hasattr(x, "_value")


def _concrete(fname, x, why):
    if not _is_concrete(x):
        raise TypeError(f"funcgrad.numpy.{fname}: {why} must be concrete (not traced), since the "
                        f"result shape depends on it; got a tracer {aval_of(x).str_short()}")
    return np.asarray(x)


def _no_inplace(fname, inplace):
    if inplace:
        raise ValueError(f"funcgrad.numpy.{fname}: arrays are immutable; pass inplace=False and "
                         f"use the returned array")


def _int_arrays(*arrs):
    it = dtypes.default_int()
    return tuple(_asarray(np.asarray(a, it)) for a in arrs)


# --- index construction ------------------------------------------------------------------
def tril_indices(n, k=0, m=None):
    """Row and column indices of the lower triangle of an (n, m) array.

    Example:
        >>> rows, cols = jnp.tril_indices(3)
    """
    return _int_arrays(*np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    """Row and column indices of the upper triangle of an (n, m) array."""
    return _int_arrays(*np.triu_indices(n, k, m))


def tril_indices_from(arr, k=0):
    """tril_indices for the shape of a 2-D ``arr``. Example: ``x[jnp.tril_indices_from(x)]``."""
    s = shape_of(arr)
    if len(s) != 2:
        raise ValueError(f"funcgrad.numpy.tril_indices_from: input must be 2-D, got shape {s}")
    return tril_indices(s[0], k, s[1])


def triu_indices_from(arr, k=0):
    """triu_indices for the shape of a 2-D ``arr``."""
    s = shape_of(arr)
    if len(s) != 2:
        raise ValueError(f"funcgrad.numpy.triu_indices_from: input must be 2-D, got shape {s}")
    return triu_indices(s[0], k, s[1])


def diag_indices(n, ndim=2):
    """Indices of the main diagonal of an n x n x ... array. Example: ``jnp.diag_indices(3)``."""
    return _int_arrays(*np.diag_indices(n, ndim))


def diag_indices_from(arr):
    """diag_indices for a square ``arr``."""
    s = shape_of(arr)
    if len(s) < 2 or len(set(s)) != 1:
        raise ValueError(f"funcgrad.numpy.diag_indices_from: all dimensions of the input must be "
                         f"of equal length, got shape {s}")
    return diag_indices(s[0], len(s))


def mask_indices(n, mask_func, k=0):
    """Indices where ``mask_func(ones((n, n)), k)`` is nonzero. Example:
    ``jnp.mask_indices(3, jnp.triu)``."""
    from funcgrad.numpy.creation import ones
    m = np.asarray(mask_func(ones((n, n), dtypes.int32), k))
    return _int_arrays(*np.nonzero(m))


def indices(dimensions, dtype=None, sparse=False):
    """An array of grid coordinates (``sparse=True``: a tuple of broadcastable arrays).

    Example:
        >>> jnp.indices((2, 3))[1]
        Array([[0, 1, 2],
               [0, 1, 2]], dtype=int32)
    """
    dt = dtypes.canonicalize(dtype or dtypes.default_int())
    dims = tuple(int(d) for d in dimensions)
    outs = []
    for i, d in enumerate(dims):
        if sparse:
            shp = [1] * len(dims)
            shp[i] = d
            outs.append(lax.broadcasted_iota(dt, tuple(shp), i))
        else:
            outs.append(lax.broadcasted_iota(dt, dims, i))
    if sparse:
        return tuple(outs)
    if not outs:
        return lax.full((0,), 0, dt)
    from funcgrad.numpy.shape_ops import stack
    return stack(outs)


def ix_(*args):
    """Open mesh from 1-D sequences, for cross-product indexing: ``x[jnp.ix_(rows, cols)]``.

    Example:
        >>> jnp.ix_(jnp.array([0, 1]), jnp.array([2, 4]))[0].shape
        (2, 1)
    """
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = _asarray(a)
        if aval_of(a).ndim != 1:
            raise ValueError(f"funcgrad.numpy.ix_: cross index must be 1 dimensional, argument "
                             f"{i} is {aval_of(a).str_short()}")
        if aval_of(a).dtype == dtypes.bool_:
            a = _asarray(np.nonzero(_concrete("ix_", a, "a boolean argument"))[0]
                         .astype(dtypes.default_int()))
        shp = [1] * n
        shp[i] = aval_of(a).shape[0]
        out.append(lax.reshape(a, tuple(shp)))
    return tuple(out)


def unravel_index(indices, shape):
    """Flat indices to a tuple of coordinate arrays for ``shape`` (negative indices wrap once,
    as JAX; out-of-range ones clip).

    Example:
        >>> jnp.unravel_index(jnp.array([5, 7]), (3, 4))
        (Array([1, 1], dtype=int32), Array([1, 3], dtype=int32))
    """
    check_arraylike("unravel_index", indices)
    idx = promote_dtypes(indices)[0]
    dt = aval_of(idx).dtype
    if not dtypes.is_integer(dt):
        raise TypeError(f"funcgrad.numpy.unravel_index: indices must be integers, got "
                        f"{aval_of(idx).str_short()}")
    shape = tuple(int(s) for s in shape)
    total = int(np.prod(shape, dtype=np.int64))
    idx = uf.where(uf.less(idx, 0), uf.add(idx, total), idx)
    idx = uf.clip(idx, 0, builtins.max(total - 1, 0))
    out = []
    for s in reversed(shape):
        out.append(uf.remainder(idx, s) if s else idx)
        idx = uf.floor_divide(idx, s) if s else idx
    return tuple(reversed(out))


def ravel_multi_index(multi_index, dims, mode="raise", order="C"):
    """Coordinate arrays to flat indices (``mode``: 'raise' (needs concrete input), 'wrap' or
    'clip'; ``order``: 'C' or 'F').

    Example:
        >>> jnp.ravel_multi_index((jnp.array([1, 2]), jnp.array([3, 0])), (3, 4))
        Array([7, 8], dtype=int32)
    """
    dims = tuple(int(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"funcgrad.numpy.ravel_multi_index: got {len(multi_index)} index arrays "
                         f"for {len(dims)} dimensions")
    arrs = [promote_dtypes(_asarray(m))[0] for m in multi_index]
    for a in arrs:
        if not dtypes.is_integer(aval_of(a).dtype):
            raise TypeError(f"funcgrad.numpy.ravel_multi_index: only int indices permitted, got "
                            f"{aval_of(a).str_short()}")
    if mode == "raise":
        for a, d in zip(arrs, dims):
            if _is_concrete(a):
                host = np.asarray(a)
                if host.size and (host.min() < 0 or host.max() >= d):
                    raise ValueError(f"funcgrad.numpy.ravel_multi_index: invalid entry in "
                                     f"coordinates array (values must be in [0, {d}))")
            else:
                raise TypeError("funcgrad.numpy.ravel_multi_index: mode='raise' needs concrete "
                                "indices; use mode='clip' or 'wrap' inside jit")
    elif mode == "wrap":
        arrs = [uf.remainder(a, d) for a, d in zip(arrs, dims)]
    elif mode == "clip":
        arrs = [uf.clip(a, 0, d - 1) for a, d in zip(arrs, dims)]
    else:
        raise ValueError(f"funcgrad.numpy.ravel_multi_index: mode must be 'raise', 'wrap' or "
                         f"'clip', got {mode!r}")
    order_axes = range(len(dims)) if order == "C" else reversed(range(len(dims)))
    out = None
    for i in order_axes:
        out = arrs[i] if out is None else uf.add(uf.multiply(out, dims[i]), arrs[i])
    return out


class _Grid:
    def __init__(self, sparse):
        self.sparse = sparse

    def __getitem__(self, key):
        from funcgrad.numpy.creation import arange, linspace
        single = not isinstance(key, tuple)
        keys = (key,) if single else key
        axes = []
        for k in keys:
            if not isinstance(k, slice):
                raise TypeError("mgrid/ogrid take slices, e.g. jnp.mgrid[0:3, 0:5:2]")
            start = 0 if k.start is None else k.start
            step = 1 if k.step is None else k.step
            if isinstance(step, complex):
                axes.append(linspace(start, k.stop, int(abs(step))))
            else:
                axes.append(arange(start, k.stop, step))
        if single:
            return axes[0]
        from funcgrad.numpy.creation import meshgrid
        grids = meshgrid(*axes, indexing="ij", sparse=self.sparse)
        if self.sparse:
            return list(grids)
        from funcgrad.numpy.shape_ops import stack
        return stack(promote_dtypes(*grids))


mgrid = _Grid(sparse=False)
ogrid = _Grid(sparse=True)


# --- functional writes ---------------------------------------------------------------------
def put(a, ind, v, mode=None, *, inplace=False):
    """``a`` with ``a.flat[ind] = v`` (``v`` repeated to the length of ``ind``); ``mode``:
    'clip' (default, as JAX), 'wrap' or 'drop'.

    Example:
        >>> jnp.put(jnp.zeros(4), jnp.array([0, 2]), 1.0, inplace=False)
        Array([1., 0., 1., 0.], dtype=float32)
    """
    _no_inplace("put", inplace)
    from funcgrad.numpy.shape_ops import ravel, reshape
    a = _asarray(a)
    ind = ravel(_asarray(ind))
    v = ravel(_asarray(v))
    n = aval_of(ind).shape[0]
    m = aval_of(v).shape[0]
    if m != n and m > 0:
        from funcgrad.numpy.shape_ops import tile
        v = lax.slice(tile(v, (n + m - 1) // m), [0], [n])
    size = aval_of(a).size
    if mode is None:
        mode = "clip"  # as JAX (NumPy's default, 'raise', cannot work on traced indices)
    elif mode == "fill":
        mode = "drop"
    if mode == "wrap":
        ind, mode = uf.remainder(ind, size), "drop"
    elif mode == "raise":
        raise ValueError("funcgrad.numpy.put: mode='raise' is not supported; use 'clip', 'wrap' "
                         "or 'drop'")
    flat = ravel(a)
    out = flat.at[ind].set(lax.convert_element_type(v, aval_of(a).dtype), mode=mode)
    return reshape(out, shape_of(a))


def put_along_axis(arr, indices, values, axis, inplace=False, mode=None):
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (as
    ``np.put_along_axis``, returning the result).

    Example:
        >>> x = jnp.zeros((2, 3))
        >>> jnp.put_along_axis(x, jnp.array([[1], [2]]), 5.0, axis=1, inplace=False)
        Array([[0., 5., 0.],
               [0., 0., 5.]], dtype=float32)
    """
    _no_inplace("put_along_axis", inplace)
    arr = _asarray(arr)
    av = aval_of(arr)
    idx = promote_dtypes(_asarray(indices))[0]
    if axis is None:
        return put(arr, idx, values, mode=mode)
    axis = canonicalize_axis("put_along_axis", axis, av.ndim)
    if aval_of(idx).ndim != av.ndim:
        raise ValueError(f"funcgrad.numpy.put_along_axis: indices {aval_of(idx).str_short()} "
                         f"must have the rank of arr {av.str_short()}")
    ishape = tuple(av.shape[d] if d != axis else aval_of(idx).shape[d] for d in range(av.ndim))
    ishape = broadcast_shapes("put_along_axis", ishape, aval_of(idx).shape)
    idx = broadcast_to_shape(idx, ishape)
    full_idx = tuple(idx if d == axis else lax.broadcasted_iota(dtypes.int32, ishape, d)
                     for d in range(av.ndim))
    vals = broadcast_to_shape(lax.convert_element_type(_asarray(values), av.dtype), ishape)
    return arr.at[full_idx].set(vals, mode=mode)


def place(arr, mask, vals, *, inplace=False):
    """``arr`` with the elements where ``mask`` is true replaced by ``vals`` in order (repeated
    as needed). The mask must be concrete.

    Example:
        >>> jnp.place(jnp.arange(5), jnp.arange(5) > 2, jnp.array([9]), inplace=False)
        Array([0, 1, 2, 9, 9], dtype=int32)
    """
    _no_inplace("place", inplace)
    arr = _asarray(arr)
    m = _concrete("place", _asarray(mask), "the mask").astype(bool)
    m = np.broadcast_to(m, shape_of(arr))
    positions = np.flatnonzero(m)
    if positions.size == 0:
        return arr
    return put(arr, _asarray(positions.astype(np.int32)), vals)


def putmask(a, mask, values, *, inplace=False):
    """``a`` with ``a.flat[i] = values.flat[i % len(values)]`` where ``mask`` is true.

    Example:
        >>> jnp.putmask(jnp.arange(4), jnp.arange(4) > 1, 0, inplace=False)
        Array([0, 1, 0, 0], dtype=int32)
    """
    _no_inplace("putmask", inplace)
    from funcgrad.numpy.shape_ops import ravel, reshape, tile
    a = _asarray(a)
    size = aval_of(a).size
    v = ravel(lax.convert_element_type(_asarray(values), aval_of(a).dtype))
    m = aval_of(v).shape[0]
    if m != size:
        v = lax.slice(tile(v, (size + m - 1) // m), [0], [size])
    v = reshape(v, shape_of(a))
    return uf.where(broadcast_to_shape(_asarray(mask), shape_of(a)), v, a)


def fill_diagonal(a, val, wrap=False, *, inplace=False):
    """``a`` with its main diagonal set to ``val`` (cycled), as ``np.fill_diagonal`` but
    returning the result.

    Example:
        >>> jnp.fill_diagonal(jnp.zeros((3, 3)), 1.0, inplace=False)
        Array([[1., 0., 0.],
               [0., 1., 0.],
               [0., 0., 1.]], dtype=float32)
    """
    _no_inplace("fill_diagonal", inplace)
    from funcgrad.numpy.shape_ops import ravel, reshape
    a = _asarray(a)
    s = shape_of(a)
    if len(s) < 2:
        raise ValueError(f"funcgrad.numpy.fill_diagonal: array must be at least 2-d, got {s}")
    if len(s) > 2 and len(set(s)) != 1:
        raise ValueError(f"funcgrad.numpy.fill_diagonal: all dimensions of input must be of "
                         f"equal length, got {s}")
    if len(s) == 2:
        step = s[1] + 1
        end = s[1] * s[1] if not wrap else s[0] * s[1]
        end = builtins.min(end, s[0] * s[1])
    else:
        step = 1 + int(np.cumprod(s[:-1]).sum())
        end = int(np.prod(s))
    pos = np.arange(0, end, step, dtype=np.int32)
    flat = ravel(a)
    v = ravel(lax.convert_element_type(_asarray(val), aval_of(a).dtype))
    n, m = len(pos), aval_of(v).shape[0]
    if m != n and n:
        from funcgrad.numpy.shape_ops import tile
        v = lax.slice(tile(v, (n + m - 1) // m), [0], [n])
    if n == 0:
        return a
    return reshape(flat.at[_asarray(pos)].set(v), s)


# --- selection -------------------------------------------------------------------------------
def select(condlist, choicelist, default=0):
    """Elementwise: the choice of the first true condition, else ``default``.

    Example:
        >>> x = jnp.arange(5)
        >>> jnp.select([x < 2, x > 3], [x, x * 10], -1)
        Array([ 0,  1, -1, -1, 40], dtype=int32)
    """
    if len(condlist) != len(choicelist):
        raise ValueError(f"funcgrad.numpy.select: condlist and choicelist must have the same "
                         f"length, got {len(condlist)} and {len(choicelist)}")
    if not condlist:
        raise ValueError("funcgrad.numpy.select: condlist must not be empty")
    choices = promote_dtypes(*[_asarray(c) if not isinstance(c, (int, float, complex))
                               else c for c in choicelist], default)
    out = choices[-1]
    for cond, choice in reversed(list(zip(condlist, choices[:-1]))):
        cond = _asarray(cond)
        if aval_of(cond).dtype != dtypes.bool_:
            raise TypeError(f"funcgrad.numpy.select: condlist entries must be boolean, got "
                            f"{aval_of(cond).str_short()}")
        out = uf.where(cond, choice, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """Evaluate ``funclist[i](x)`` where ``condlist[i]`` holds (one extra function is the
    default); every function is evaluated on the whole array.

    Example:
        >>> x = jnp.linspace(-2, 2, 5)
        >>> jnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2])
        Array([2., 1., 0., 1., 4.], dtype=float32)
    """
    x = _asarray(x)
    if isinstance(condlist, Value) or isinstance(condlist, np.ndarray) and condlist.dtype == bool:
        condlist = [condlist]
    n = len(condlist)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"funcgrad.numpy.piecewise: with {n} condition(s), {n} or {n + 1} "
                         f"functions are needed, got {len(funclist)}")
    dt = aval_of(x).dtype

    def value(f):
        if callable(f):
            return lax.convert_element_type(_asarray(f(x, *args, **kw)), dt)
        return _asarray(np.asarray(f, dt))
    out = value(funclist[n]) if len(funclist) == n + 1 else lax.full(shape_of(x), 0, dt)
    out = broadcast_to_shape(out, shape_of(x))
    # later conditions win, as in NumPy
    for cond, f in zip(condlist, funclist[:n]):
        out = uf.where(_asarray(cond), value(f), out)
    return out


def choose(a, choices, out=None, mode="raise"):
    """``choices[a[i]][i]`` elementwise (``mode``: 'raise' (concrete ``a``), 'wrap', 'clip').

    Example:
        >>> jnp.choose(jnp.array([0, 1, 0]), [jnp.array([1, 2, 3]), jnp.array([10, 20, 30])])
        Array([ 1, 20,  3], dtype=int32)
    """
    a = _asarray(a)
    n = len(choices)
    if mode == "raise":
        if _is_concrete(a):
            host = np.asarray(a)
            if host.size and (host.min() < 0 or host.max() >= n):
                raise ValueError("funcgrad.numpy.choose: invalid entry in choice array")
        else:
            raise TypeError("funcgrad.numpy.choose: mode='raise' needs a concrete index array; "
                            "use mode='clip' or 'wrap' inside jit")
    elif mode == "wrap":
        a = uf.remainder(a, n)
    elif mode == "clip":
        a = uf.clip(a, 0, n - 1)
    else:
        raise ValueError(f"funcgrad.numpy.choose: mode must be 'raise', 'wrap' or 'clip', got "
                         f"{mode!r}")
    chs = promote_dtypes(*[_asarray(c) for c in choices])
    shape = broadcast_shapes("choose", shape_of(a), *[shape_of(c) for c in chs])
    out_ = broadcast_to_shape(chs[0], shape)
    a = broadcast_to_shape(a, shape)
    for i, c in enumerate(chs[1:], 1):
        out_ = uf.where(uf.equal(a, i), broadcast_to_shape(c, shape), out_)
    return out_


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """Slices of ``a`` along ``axis`` where ``condition`` is true (a concrete condition, or
    ``size=`` for a static result length padded with ``fill_value``).

    Example:
        >>> jnp.compress(jnp.array([True, False, True]), jnp.arange(3))
        Array([0, 2], dtype=int32)
    """
    from funcgrad.numpy.indexing import take
    from funcgrad.numpy.shape_ops import ravel
    a = _asarray(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = canonicalize_axis("compress", axis, aval_of(a).ndim)
    cond = _asarray(condition)
    if aval_of(cond).ndim != 1:
        raise ValueError(f"funcgrad.numpy.compress: condition must be 1-D, got "
                         f"{aval_of(cond).str_short()}")
    n = aval_of(a).shape[axis]
    if size is None:
        c = _concrete("compress", cond, "the condition (or pass size=)").astype(bool)
        if c.shape[0] > n and c[n:].any():
            raise ValueError(f"funcgrad.numpy.compress: condition has true entries beyond "
                             f"axis {axis} of length {n}")
        idx = np.flatnonzero(c[:n]).astype(np.int32)
        return take(a, _asarray(idx), axis=axis, mode="clip")
    from funcgrad.numpy.searching import nonzero
    cond = lax.slice(cond, [0], [builtins.min(n, aval_of(cond).shape[0])])
    (idx,) = nonzero(cond, size=size, fill_value=n)
    return take(a, idx, axis=axis, mode="fill", fill_value=fill_value)


def extract(condition, arr, *, size=None, fill_value=0):
    """Elements of ``arr`` where ``condition`` is true, flattened (``size=`` under jit).

    Example:
        >>> jnp.extract(jnp.arange(5) % 2 == 0, jnp.arange(5))
        Array([0, 2, 4], dtype=int32)
    """
    from funcgrad.numpy.shape_ops import ravel
    return compress(ravel(_asarray(condition)), ravel(_asarray(arr)), size=size,
                    fill_value=fill_value)


# --- applying functions over axes ----------------------------------------------------------
def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` applied to the 1-D slices of ``arr`` along ``axis`` (with ``vmap``).

    Example:
        >>> jnp.apply_along_axis(jnp.sum, 1, jnp.ones((2, 3)))
        Array([3., 3.], dtype=float32)
    """
    from funcgrad.numpy.shape_ops import moveaxis
    arr = _asarray(arr)
    nd = aval_of(arr).ndim
    axis = canonicalize_axis("apply_along_axis", axis, nd)
    f = lambda x: func1d(x, *args, **kwargs)  # noqa: E731
    moved = moveaxis(arr, axis, -1)
    batch_shape = shape_of(moved)[:-1]
    for _ in range(nd - 1):
        f = batching.map_leading_axis(f, "apply_along_axis")
    out = _asarray(f(moved))
    # result axes of func1d replace the applied axis
    extra = aval_of(out).ndim - len(batch_shape)
    perm = list(range(axis)) + list(range(len(batch_shape), len(batch_shape) + extra)) + \
        list(range(axis, len(batch_shape)))
    return lax.transpose(out, perm) if perm != sorted(perm) else out


def apply_over_axes(func, a, axes):
    """Apply ``func(a, axis)`` repeatedly over ``axes``, keeping dimensions.

    Example:
        >>> jnp.apply_over_axes(jnp.sum, jnp.ones((2, 3, 4)), [0, 2]).shape
        (1, 3, 1)
    """
    a = _asarray(a)
    nd = aval_of(a).ndim
    for ax in ([axes] if isinstance(axes, int) else axes):
        ax = canonicalize_axis("apply_over_axes", ax, nd)
        r = _asarray(func(a, ax))
        if aval_of(r).ndim == nd - 1:
            r = lax.expand_dims(r, (ax,))
        elif aval_of(r).ndim != nd:
            raise ValueError("funcgrad.numpy.apply_over_axes: function is not returning an "
                             "array of the correct shape")
        a = r
    return a


def vectorize(pyfunc, *, excluded=frozenset(), signature=None):
    """Make a function of scalars (or of core shapes given by ``signature``, e.g.
    ``"(n),(n)->()"``) broadcast over leading axes, using ``vmap``.

    Example:
        >>> f = jnp.vectorize(lambda a, b: a * b + 1)
        >>> f(jnp.arange(3), 2)
        Array([1, 3, 5], dtype=int32)
    """
    in_core, out_core = _parse_signature(signature) if signature else (None, None)

    @functools.wraps(pyfunc)
    def wrapped(*args, **kwargs):
        args = list(args)
        static = {i for i in range(len(args)) if i in excluded}
        dyn = [i for i in range(len(args)) if i not in static]
        arrs = [_asarray(args[i]) for i in dyn]
        cores = in_core if in_core is not None else [()] * len(arrs)
        if len(cores) != len(arrs):
            raise TypeError(f"funcgrad.numpy.vectorize: signature {signature!r} names "
                            f"{len(cores)} inputs, got {len(arrs)}")
        core_nd = [len(c) for c in cores]
        batch_shapes = [shape_of(a)[:aval_of(a).ndim - k] for a, k in zip(arrs, core_nd)]
        bshape = broadcast_shapes("vectorize", *batch_shapes)
        arrs = [broadcast_to_shape(a, bshape + shape_of(a)[aval_of(a).ndim - k:])
                for a, k in zip(arrs, core_nd)]

        def call(*dyn_vals):
            full = list(args)
            for i, v in zip(dyn, dyn_vals):
                full[i] = v
            return pyfunc(*full, **kwargs)
        f = call
        for _ in range(len(bshape)):
            f = batching.map_leading_axis(f, "vectorize")
        return f(*arrs)
    return wrapped


def _parse_signature(sig):
    import re
    ins, outs = sig.replace(" ", "").split("->")

    def parse(part):
        return [tuple(d for d in grp.split(",") if d) for grp in re.findall(r"\(([^)]*)\)", part)]
    return parse(ins), parse(outs)


# --- shape editing ---------------------------------------------------------------------------
def resize(a, new_shape):
    """Array of ``new_shape`` filled by repeating the flattened ``a`` (as ``np.resize``).

    Example:
        >>> jnp.resize(jnp.array([1, 2, 3]), (2, 4))
        Array([[1, 2, 3, 1],
               [2, 3, 1, 2]], dtype=int32)
    """
    from funcgrad.numpy.shape_ops import ravel, reshape, tile
    a = _asarray(a)
    new_shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
    total = int(np.prod(new_shape, dtype=np.int64))
    flat = ravel(a)
    n = aval_of(flat).shape[0]
    if total == 0 or n == 0:
        return lax.full(new_shape, 0, aval_of(a).dtype)
    reps = (total + n - 1) // n
    return reshape(lax.slice(tile(flat, reps), [0], [total]), new_shape)


def append(arr, values, axis=None):
    """``arr`` with ``values`` concatenated at the end (flattened when ``axis`` is None).

    Example:
        >>> jnp.append(jnp.array([1, 2]), jnp.array([3]))
        Array([1, 2, 3], dtype=int32)
    """
    from funcgrad.numpy.shape_ops import concatenate, ravel
    arr, values = _asarray(arr), _asarray(values)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis=axis)


def _static_indices(fname, obj, n):
    if isinstance(obj, slice):
        return np.arange(n)[obj]
    if isinstance(obj, (Value,)):
        return _concrete(fname, obj, "the index")
    return np.asarray(obj)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """``arr`` without the entries ``obj`` (ints, a slice or a concrete index/bool array) along
    ``axis``.

    Example:
        >>> jnp.delete(jnp.arange(5), jnp.array([0, 2]))
        Array([1, 3, 4], dtype=int32)
    """
    from funcgrad.numpy.indexing import take
    from funcgrad.numpy.shape_ops import ravel
    arr = _asarray(arr)
    if axis is None:
        arr = ravel(arr)
        axis = 0
    axis = canonicalize_axis("delete", axis, aval_of(arr).ndim)
    n = shape_of(arr)[axis]
    idx = _static_indices("delete", obj, n)
    keep = np.ones(n, bool)
    if idx.dtype == bool:
        if idx.shape != (n,):
            raise ValueError(f"funcgrad.numpy.delete: boolean array argument obj to delete "
                             f"must be one dimensional and match the axis length of {n}")
        keep = ~idx
    else:
        idx = idx.astype(np.int64).ravel()
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"funcgrad.numpy.delete: index out of bounds for axis {axis} with "
                             f"size {n}")
        keep[idx % n if n else idx] = False
    return take(arr, _asarray(np.flatnonzero(keep).astype(np.int32)), axis=axis, mode="clip")


def insert(arr, obj, values, axis=None):
    """``arr`` with ``values`` inserted before the given indices along ``axis`` (indices are
    static or concrete).

    Example:
        >>> jnp.insert(jnp.array([1, 2, 3]), 1, 9)
        Array([1, 9, 2, 3], dtype=int32)
    """
    from funcgrad.numpy.shape_ops import moveaxis, ravel
    arr = _asarray(arr)
    if axis is None:
        arr = ravel(arr)
        axis = 0
    axis = canonicalize_axis("insert", axis, aval_of(arr).ndim)
    n = shape_of(arr)[axis]
    scalar_obj = isinstance(obj, (int, np.integer)) or (
        not isinstance(obj, slice) and np.ndim(_static_indices("insert", obj, n)) == 0)
    idx = _static_indices("insert", obj, n).astype(np.int64)
    idx = np.where(idx < 0, idx + n, idx)
    if idx.size and (idx.min() < 0 or idx.max() > n):
        raise IndexError(f"funcgrad.numpy.insert: index out of bounds for axis {axis} with size "
                         f"{n}")
    values = lax.convert_element_type(_asarray(values), aval_of(arr).dtype)
    moved = moveaxis(arr, axis, 0)
    nd = aval_of(arr).ndim
    v = _asarray(values)
    if scalar_obj:
        # NumPy: values get ndim leading-padded axes; their first axis gives the count
        v = lax.reshape(v, (1,) * (nd - aval_of(v).ndim) + shape_of(v)) \
            if aval_of(v).ndim < nd else v
        k = shape_of(v)[0]
        v = broadcast_to_shape(v, (k,) + shape_of(moved)[1:])
        idx = np.full(k, int(idx))
    else:
        # values broadcast to arr's shape with k entries along axis (original layout)
        idx = idx.ravel()
        k = idx.size
        target = list(shape_of(arr))
        target[axis] = k
        v = moveaxis(broadcast_to_shape(v, tuple(target)), axis, 0)
    order = np.argsort(idx, kind="stable")
    new_pos = idx[order] + np.arange(k)
    total = n + k
    is_new = np.zeros(total, bool)
    is_new[new_pos] = True
    src = np.empty(total, np.int64)
    src[~is_new] = np.arange(n)
    src[new_pos] = n + order
    from funcgrad.numpy.shape_ops import concatenate
    from funcgrad.numpy.indexing import take
    both = concatenate([moved, v], axis=0)
    out = take(both, _asarray(src.astype(np.int32)), axis=0, mode="clip")
    return moveaxis(out, 0, axis)


def trim_zeros(filt, trim="fb"):
    """1-D ``filt`` without leading ('f') and/or trailing ('b') zeros (needs concrete input).

    Example:
        >>> jnp.trim_zeros(jnp.array([0, 1, 2, 0]))
        Array([1, 2], dtype=int32)
    """
    filt = _asarray(filt)
    host = _concrete("trim_zeros", filt, "the input")
    nz = np.flatnonzero(host)
    if nz.size == 0:
        return lax.slice(filt, [0], [0])
    start = nz[0] if "f" in trim.lower() else 0
    stop = nz[-1] + 1 if "b" in trim.lower() else host.shape[0]
    return lax.slice(filt, [int(start)], [int(stop)])


def diagflat(v, k=0):
    """2-D array with the flattened ``v`` on diagonal ``k``. Example: ``jnp.diagflat([1, 2])``."""
    from funcgrad.numpy.creation import diag
    from funcgrad.numpy.shape_ops import ravel
    return diag(ravel(_asarray(v)), k)


def vander(x, N=None, increasing=False):
    """Vandermonde matrix: columns are powers of ``x``. Example: ``jnp.vander(jnp.array([1, 2, 3]))``."""
    from funcgrad.numpy.shape_ops import stack
    x = promote_dtypes(_asarray(x))[0]
    if aval_of(x).ndim != 1:
        raise ValueError(f"funcgrad.numpy.vander: x must be 1-D, got {aval_of(x).str_short()}")
    n = aval_of(x).shape[0] if N is None else int(N)
    powers = range(n) if increasing else reversed(range(n))
    cols = [lax.integer_pow(x, p) if p else lax.full(shape_of(x), 1, aval_of(x).dtype)
            for p in powers]
    if not cols:
        return lax.full((aval_of(x).shape[0], 0), 0, aval_of(x).dtype)
    return stack(cols, axis=1)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """``function(*coordinate_arrays)`` over a grid of ``shape``.

    Example:
        >>> jnp.fromfunction(lambda i, j: i + j, (2, 3), dtype=jnp.int32)
        Array([[0, 1, 2],
               [1, 2, 3]], dtype=int32)
    """
    coords = indices(shape, dtype=dtype)
    return function(*[coords[i] for i in range(len(shape))], **kwargs)
