"""Shape manipulation: reshape, transpose, moveaxis, squeeze, concatenate, stack, split, tile..."""
import builtins
import math

import numpy as np

from funcgrad import lax
from funcgrad.core.errors import AxisError
from funcgrad.core.interpreters import Value
from funcgrad.core.values import aval_of
from funcgrad.numpy._util import (broadcast_shapes, broadcast_to_shape, canonicalize_axes,
                                  canonicalize_axis, check_arraylike, promote_dtypes)
from funcgrad.numpy.creation import asarray


def _resolve_shape(fname, newshape, size):
    if isinstance(newshape, (int, np.integer)):
        newshape = (int(newshape),)
    newshape = [int(d) for d in newshape]
    unknown = [i for i, d in enumerate(newshape) if d == -1]
    if len(unknown) > 1:
        raise ValueError(f"funcgrad.numpy.{fname}: can only specify one unknown dimension, got "
                         f"{tuple(newshape)}")
    if unknown:
        known = math.prod(d for d in newshape if d != -1)
        if known == 0 or size % known:
            raise ValueError(f"funcgrad.numpy.{fname}: cannot reshape an array of size {size} "
                             f"into shape {tuple(newshape)}")
        newshape[unknown[0]] = size // known
    if math.prod(newshape) != size:
        raise ValueError(f"funcgrad.numpy.{fname}: cannot reshape an array of size {size} into "
                         f"shape {tuple(newshape)}")
    return tuple(newshape)


def _as_array(x):
    # lax shape functions hand back their input when there is nothing to do; a NumPy input must
    # still come back as a funcgrad array
    if isinstance(x, Value):
        return x
    from funcgrad.numpy.creation import asarray
    return asarray(x)


def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    """Give ``a`` a new shape (one entry may be -1), row-major order.

    ``copy`` is accepted for the array API (arrays are immutable: no copy is observable).

    Example:
        >>> jnp.reshape(jnp.arange(6), (2, -1)).shape
        (2, 3)
    """
    shape = newshape if shape is None else shape
    check_arraylike("reshape", a)
    if order not in ("C", "F"):
        raise ValueError(f"funcgrad.numpy.reshape: order must be 'C' or 'F', got {order!r}")
    av = aval_of(a)
    shape = _resolve_shape("reshape", shape, av.size)
    if order == "F":
        rev_in = lax.transpose(a, tuple(reversed(range(av.ndim))))
        out = lax.reshape(rev_in, tuple(reversed(shape)))
        return lax.transpose(out, tuple(reversed(range(len(shape)))))
    return _as_array(lax.reshape(a, shape))


def ravel(a, order="C"):
    """Flatten to 1-d. Example: ``jnp.ravel(x)``."""
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    """Permute axes (reverse them when ``axes`` is None).

    Example:
        >>> jnp.transpose(jnp.ones((2, 3))).shape
        (3, 2)
    """
    check_arraylike("transpose", a)
    ndim = aval_of(a).ndim
    if axes is None:
        axes = tuple(reversed(range(ndim)))
    axes = tuple(canonicalize_axis("transpose", x, ndim) for x in axes)
    if sorted(axes) != list(range(ndim)):
        raise ValueError(f"funcgrad.numpy.transpose: axes {axes} are not a permutation of the "
                         f"{ndim} axes")
    return _as_array(lax.transpose(a, axes))


def permute_dims(a, axes):
    """Array-API name of ``transpose``. Example: ``jnp.permute_dims(x, (1, 0))``."""
    return transpose(a, axes)


def matrix_transpose(x):
    """Swap the last two axes. Example: ``jnp.matrix_transpose(x)``."""
    ndim = aval_of(x).ndim
    if ndim < 2:
        raise ValueError(f"funcgrad.numpy.matrix_transpose: needs rank >= 2, got {ndim}")
    return lax.transpose(x, tuple(range(ndim - 2)) + (ndim - 1, ndim - 2))


def swapaxes(a, axis1, axis2):
    """Exchange two axes. Example: ``jnp.swapaxes(x, 0, 1)``."""
    ndim = aval_of(a).ndim
    perm = list(range(ndim))
    i, j = canonicalize_axis("swapaxes", axis1, ndim), canonicalize_axis("swapaxes", axis2, ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, perm)


def moveaxis(a, source, destination):
    """Move axes ``source`` to positions ``destination``.

    Example:
        >>> jnp.moveaxis(jnp.ones((2, 3, 4)), 0, -1).shape
        (3, 4, 2)
    """
    ndim = aval_of(a).ndim
    src = canonicalize_axes("moveaxis", source if isinstance(source, (tuple, list)) else
                            (source,), ndim)
    dst = canonicalize_axes("moveaxis", destination if isinstance(destination, (tuple, list))
                            else (destination,), ndim)
    if len(src) != len(dst):
        raise ValueError("funcgrad.numpy.moveaxis: source and destination need the same length")
    rest = [i for i in range(ndim) if i not in src]
    perm = [None] * ndim
    for s, d in zip(src, dst):
        perm[d] = s
    it = iter(rest)
    perm = [p if p is not None else next(it) for p in perm]
    return lax.transpose(a, perm)


def rollaxis(a, axis, start=0):
    """Roll ``axis`` backwards until it lies before ``start``."""
    ndim = aval_of(a).ndim
    axis = canonicalize_axis("rollaxis", axis, ndim)
    start = start % (ndim + 1) if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


def squeeze(a, axis=None):
    """Remove size-1 axes (all of them when ``axis`` is None).

    Example:
        >>> jnp.squeeze(jnp.ones((1, 3, 1))).shape
        (3,)
    """
    av = aval_of(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(av.shape) if d == 1)
    else:
        axes = canonicalize_axes("squeeze", axis, av.ndim)
        for ax in axes:
            if av.shape[ax] != 1:
                raise ValueError(f"funcgrad.numpy.squeeze: cannot select axis {ax} of shape "
                                 f"{av.shape}: its size is not 1")
    return _as_array(lax.squeeze(a, axes))


def expand_dims(a, axis):
    """Insert size-1 axes at ``axis`` (int or tuple) of the result.

    Example:
        >>> jnp.expand_dims(jnp.ones(3), 0).shape
        (1, 3)
    """
    av = aval_of(a)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out_ndim = av.ndim + len(axes)
    try:
        axes = canonicalize_axes("expand_dims", axes, out_ndim)
    except AxisError as e:    # an IndexError too, as NumPy's AxisError and the array API say
        raise _AxisIndexError(str(e)) from None
    return lax.expand_dims(a, axes)


class _AxisIndexError(AxisError, IndexError):
    """An out-of-bounds axis of ``expand_dims``: NumPy's AxisError is an IndexError."""


def broadcast_to(array, shape):
    """Broadcast ``array`` to ``shape``. Example: ``jnp.broadcast_to(x, (4, 3))``."""
    check_arraylike("broadcast_to", array)
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    av = aval_of(array)
    if broadcast_shapes("broadcast_to", av.shape, shape) != shape:
        raise ValueError(f"funcgrad.numpy.broadcast_to: cannot broadcast {av.shape} to {shape}")
    return broadcast_to_shape(array if not isinstance(array, (int, float, bool, complex))
                              else asarray(array), shape)


def broadcast_arrays(*args):
    """Broadcast arrays against each other. Example: ``a, b = jnp.broadcast_arrays(x, y)``."""
    shape = broadcast_shapes("broadcast_arrays", *[aval_of(a).shape for a in args])
    return [broadcast_to_shape(asarray(a), shape) for a in args]


def broadcast_shapes_(*shapes):
    return broadcast_shapes("broadcast_shapes", *shapes)


def concatenate(arrays, axis=0, dtype=None):
    """Join arrays along an existing ``axis`` (flattened first when None).

    Example:
        >>> jnp.concatenate([jnp.ones(2), jnp.zeros(3)]).shape
        (5,)
    """
    arrays = [asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("funcgrad.numpy.concatenate: need at least one array")
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    arrays = promote_dtypes(*arrays)
    if dtype is not None:
        arrays = [lax.convert_element_type(a, dtype) for a in arrays]
    ndim = aval_of(arrays[0]).ndim
    if ndim == 0:
        raise ValueError("funcgrad.numpy.concatenate: zero-dimensional arrays cannot be "
                         "concatenated")
    ax = canonicalize_axis("concatenate", axis, ndim)
    shapes = [aval_of(a).shape for a in arrays]
    for s in shapes[1:]:
        if len(s) != ndim or builtins.any(x != y for i, (x, y) in enumerate(zip(s, shapes[0]))
                                          if i != ax):
            raise ValueError(f"funcgrad.numpy.concatenate: shapes {shapes} differ outside axis "
                             f"{ax}")
    return lax.concatenate(arrays, ax)


concat = concatenate


def stack(arrays, axis=0, dtype=None):
    """Join arrays along a new ``axis``.

    Example:
        >>> jnp.stack([jnp.ones(3), jnp.zeros(3)]).shape
        (2, 3)
    """
    arrays = [asarray(a) for a in arrays]
    if not arrays:
        raise ValueError("funcgrad.numpy.stack: need at least one array")
    shapes = {aval_of(a).shape for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"funcgrad.numpy.stack: all input arrays must have the same shape, "
                         f"got {sorted(shapes)}")
    ndim = aval_of(arrays[0]).ndim + 1
    ax = canonicalize_axis("stack", axis, ndim)
    return concatenate([lax.expand_dims(a, (ax,)) for a in arrays], ax, dtype)


def atleast_1d(*arys):
    """Promote scalars to 1-d. Example: ``jnp.atleast_1d(1.0)``."""
    out = [asarray(a) if aval_of(asarray(a)).ndim >= 1 else lax.reshape(asarray(a), (1,))
           for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    """Promote to at least 2-d (new axes in front). Example: ``jnp.atleast_2d(x)``."""
    out = [lax.broadcast_to_rank(asarray(a), 2) for a in arys]
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys):
    """Promote to at least 3-d as NumPy does (1-d -> (1, n, 1), 2-d -> (m, n, 1))."""
    res = []
    for a in arys:
        a = asarray(a)
        nd = aval_of(a).ndim
        if nd == 0:
            a = lax.reshape(a, (1, 1, 1))
        elif nd == 1:
            a = lax.reshape(a, (1, aval_of(a).shape[0], 1))
        elif nd == 2:
            a = lax.reshape(a, aval_of(a).shape + (1,))
        res.append(a)
    return res[0] if len(res) == 1 else res


def hstack(tup, dtype=None):
    """Stack horizontally (axis 1, or 0 for 1-d). Example: ``jnp.hstack([a, b])``."""
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, 0 if aval_of(arrs[0]).ndim == 1 else 1, dtype)


def vstack(tup, dtype=None):
    """Stack vertically (as rows). Example: ``jnp.vstack([a, b])``."""
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


row_stack = vstack


def dstack(tup, dtype=None):
    """Stack along the third axis. Example: ``jnp.dstack([a, b])``."""
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def column_stack(tup):
    """Stack 1-d arrays as columns. Example: ``jnp.column_stack([a, b])``."""
    arrs = [asarray(a) for a in tup]
    arrs = [lax.reshape(a, (aval_of(a).shape[0], 1)) if aval_of(a).ndim == 1 else a for a in arrs]
    return concatenate(arrs, 1)


def split(ary, indices_or_sections, axis=0):
    """Split into equal sections or at indices along ``axis``.

    Example:
        >>> [p.shape for p in jnp.split(jnp.arange(6), 3)]
        [(2,), (2,), (2,)]
    """
    av = aval_of(ary)
    ax = canonicalize_axis("split", axis, av.ndim)
    n = av.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ValueError(f"funcgrad.numpy.split: array split does not result in an equal "
                             f"division ({n} into {sections} along axis {ax})")
        points = [i * (n // sections) for i in range(1, sections)]
    else:
        points = [int(i) for i in indices_or_sections]
    return _split_at(ary, points, ax, n)


def _split_at(ary, points, ax, n):
    bounds = [0] + [builtins.min(builtins.max(p, 0), n) for p in points] + [n]
    if all(lo <= hi for lo, hi in zip(bounds[:-1], bounds[1:])):
        # consecutive pieces: one split (whose transpose is a concatenate)
        return lax.split(ary, [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])], ax)
    return [lax.slice_in_dim(ary, lo, builtins.max(lo, hi), axis=ax)
            for lo, hi in zip(bounds[:-1], bounds[1:])]


def array_split(ary, indices_or_sections, axis=0):
    """Like ``split`` but sections may differ in size by one. Example: ``jnp.array_split(x, 3)``."""
    av = aval_of(ary)
    ax = canonicalize_axis("array_split", axis, av.ndim)
    n = av.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        size, extra = divmod(n, k)
        sizes = [size + 1] * extra + [size] * (k - extra)
        points = list(np.cumsum(sizes)[:-1])
    else:
        points = list(indices_or_sections)
    return _split_at(ary, points, ax, n)


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, axis=1 if aval_of(ary).ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, axis=0)


def flip(m, axis=None):
    """Reverse the order of elements along ``axis`` (all axes when None).

    Example:
        >>> jnp.flip(jnp.arange(3))
        Array([2, 1, 0], dtype=int32)
    """
    av = aval_of(m)
    return lax.rev(m, canonicalize_axes("flip", axis, av.ndim))


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def tile(A, reps):
    """Repeat the whole array ``reps`` times per axis. Example: ``jnp.tile(x, (2, 1))``."""
    A = asarray(A)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    av = aval_of(A)
    ndim = builtins.max(len(reps), av.ndim)
    A = lax.broadcast_to_rank(A, ndim)
    reps = (1,) * (ndim - len(reps)) + reps
    shape = aval_of(A).shape
    expanded = []
    for r, d in zip(reps, shape):
        expanded += [r, d]
    out = lax.broadcast_in_dim(A, expanded, tuple(range(1, 2 * ndim, 2)))
    return lax.reshape(out, tuple(r * d for r, d in zip(reps, shape)))


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Repeat each element ``repeats`` times (static repeats).

    Example:
        >>> jnp.repeat(jnp.array([1, 2]), 2)
        Array([1, 1, 2, 2], dtype=int32)
    """
    a = asarray(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    av = aval_of(a)
    ax = canonicalize_axis("repeat", axis, av.ndim)
    if not isinstance(repeats, (int, np.integer)) and np.ndim(repeats) == 0:
        repeats = int(np.asarray(repeats))   # a 0-d array counts as an int
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        if r < 0:
            raise ValueError(f"funcgrad.numpy.repeat: repeats must be >= 0, got {r}")
        shape = list(av.shape)
        new_shape = shape[:ax + 1] + [r] + shape[ax + 1:]
        out = lax.broadcast_in_dim(a, new_shape, tuple(i for i in range(len(new_shape))
                                                       if i != ax + 1))
        shape[ax] *= r
        return lax.reshape(out, shape)
    reps = np.asarray(repeats)
    if reps.ndim != 1 or reps.shape[0] not in (1, av.shape[ax]):
        raise ValueError(f"funcgrad.numpy.repeat: repeats of shape {reps.shape} do not match "
                         f"axis {ax} of size {av.shape[ax]}")
    if (reps < 0).any():
        raise ValueError(f"funcgrad.numpy.repeat: repeats must be >= 0, got {reps.tolist()}")
    index = np.repeat(np.arange(av.shape[ax]), np.broadcast_to(reps, (av.shape[ax],)))
    if index.size == 0 or av.size == 0:     # nothing to gather
        shape = list(av.shape)
        shape[ax] = index.size
        return lax.full(tuple(shape), 0, av.dtype)
    from funcgrad.numpy.indexing import take
    return take(a, asarray(index.astype(np.int32)), axis=ax, mode="clip")


def roll(a, shift, axis=None):
    """Rotate elements by ``shift`` along ``axis`` (flattened when None).

    Example:
        >>> jnp.roll(jnp.arange(4), 1)
        Array([3, 0, 1, 2], dtype=int32)
    """
    a = asarray(a)
    if axis is None:
        av = aval_of(a)
        return reshape(roll(ravel(a), shift, 0), av.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    for s, ax in zip(shifts, axes):
        av = aval_of(a)
        ax = canonicalize_axis("roll", ax, av.ndim)
        n = av.shape[ax]
        if n == 0:
            continue
        s = int(s) % n
        if s:
            a = lax.concatenate([lax.slice_in_dim(a, n - s, n, axis=ax),
                                 lax.slice_in_dim(a, 0, n - s, axis=ax)], ax)
    return a


def rot90(m, k=1, axes=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``axes``. Example: ``jnp.rot90(x)``."""
    k = k % 4
    a0, a1 = axes
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    if k == 1:
        return swapaxes(flip(m, a1), a0, a1)
    return flip(swapaxes(m, a0, a1), a1)


def pad(array, pad_width, mode="constant", constant_values=0):
    """Pad with a constant (or 'edge'/'reflect'/'wrap'), as ``numpy.pad``.

    Example:
        >>> jnp.pad(jnp.ones(2), 1)
        Array([0., 1., 1., 0.], dtype=float32)
    """
    array = asarray(array)
    av = aval_of(array)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64).reshape(-1, 2)
                         if np.ndim(pad_width) else np.full((1, 2), pad_width),
                         (av.ndim, 2))
    if mode == "constant":
        value = lax.convert_element_type(constant_values, av.dtype)
        return lax.pad(array, value, [(int(lo), int(hi), 0) for lo, hi in pw])
    out = array
    for ax, (lo, hi) in enumerate(pw):
        lo, hi = int(lo), int(hi)
        n = aval_of(out).shape[ax]
        parts = []
        if mode == "edge":
            parts = [lax.concatenate([lax.slice_in_dim(out, 0, 1, axis=ax)] * lo, ax)] if lo else []
            parts.append(out)
            if hi:
                parts.append(lax.concatenate([lax.slice_in_dim(out, n - 1, n, axis=ax)] * hi, ax))
        elif mode == "wrap":
            idx = np.arange(-lo, n + hi) % n
            from funcgrad.numpy.indexing import take
            out = take(out, asarray(idx.astype(np.int32)), axis=ax, mode="clip")
            continue
        elif mode in ("reflect", "symmetric"):
            idx = np.pad(np.arange(n), (lo, hi), mode=mode)
            from funcgrad.numpy.indexing import take
            out = take(out, asarray(idx.astype(np.int32)), axis=ax, mode="clip")
            continue
        else:
            raise ValueError(f"funcgrad.numpy.pad: unsupported mode {mode!r}")
        out = lax.concatenate(parts, ax) if len(parts) > 1 else parts[0]
    return out


def shape(a):
    """The shape of ``a``. Example: ``jnp.shape(x)``."""
    return aval_of(a).shape


def ndim(a):
    """The rank of ``a``. Example: ``jnp.ndim(x)``."""
    return aval_of(a).ndim


def size(a, axis=None):
    """Number of elements (along ``axis``). Example: ``jnp.size(x)``."""
    av = aval_of(a)
    return av.size if axis is None else av.shape[axis]
