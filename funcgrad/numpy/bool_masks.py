"""Boolean-mask indices that the general path of ``indexing.getitem`` (masks turned into the
integer arrays of their True positions, then one gather) does not cover: the shape check of a
mask against the axes it indexes, a 0-d mask (``x[True]``, ``x[mask0d]``: a new axis of size 1
or 0, as NumPy) and masks of zero-size arrays (no gather to emit).

Example:
    >>> jnp.arange(3)[jnp.asarray(True)].shape
    (1, 3)
    >>> jnp.zeros((0, 2))[jnp.zeros(0, bool)].shape
    (0, 2)
"""
import numpy as np

from funcgrad import lax
from funcgrad.core.interpreters import Tracer, Value
from funcgrad.core.values import aval_of


def _is_mask(i):
    if isinstance(i, (bool, np.bool_)):
        return True
    dt = getattr(i, "dtype", None)
    if dt is None and isinstance(i, list):
        if any(isinstance(e, Value) for e in i):     # a list of index arrays
            return False
        try:
            dt = np.asarray(i).dtype
        except (ValueError, TypeError):      # ragged, or holding traced arrays: not a mask
            return False
    return dt is not None and np.dtype(dt) == np.bool_


def _ndim(i):
    return aval_of(i).ndim if isinstance(i, Value) else np.ndim(i)


def _consumed(i):
    """How many axes of the indexed array the index entry ``i`` stands for."""
    if i is None or i is Ellipsis:
        return 0
    return _ndim(i) if _is_mask(i) else 1


def check_mask_shapes(fname, idx, shape):
    """An IndexError if a boolean mask in ``idx`` does not have the shape of the axes of an
    array of ``shape`` that it indexes (NumPy's rule; no broadcasting)."""
    entries = idx if isinstance(idx, tuple) else (idx,)
    ell = next((k for k, e in enumerate(entries) if e is Ellipsis), None)
    for k, e in enumerate(entries):
        if not _is_mask(e) or _ndim(e) == 0:
            continue
        if ell is not None and k > ell:
            start = len(shape) - sum(_consumed(f) for f in entries[k:])
        else:
            start = sum(_consumed(f) for f in entries[:k])
        mshape = tuple(aval_of(e).shape if isinstance(e, Value) else np.shape(e))
        if start < 0 or tuple(shape[start:start + len(mshape)]) != mshape:
            raise IndexError(f"{fname}: boolean index of shape {mshape} does not match the "
                             f"indexed axes {tuple(shape[max(start, 0):][:len(mshape)])} of an "
                             f"array of shape {tuple(shape)}")


def _concrete(i):
    return not isinstance(i, Tracer) or hasattr(i, "_value")


def special_getitem(x, idx):
    """``x[idx]`` for a 0-d mask as the whole index or a concretely indexed zero-size ``x``;
    None when the general path applies."""
    from funcgrad.numpy.creation import zeros
    key = idx[0] if isinstance(idx, tuple) and len(idx) == 1 else idx
    if _is_mask(key) and _ndim(key) == 0 and _concrete(key):
        out = lax.expand_dims(x, (0,))
        return out if bool(np.asarray(key)) else lax.slice_in_dim(out, 0, 0, axis=0)
    av = aval_of(x)
    entries = idx if isinstance(idx, tuple) else (idx,)
    if av.size == 0 and any(_is_mask(e) for e in entries):
        if all(_concrete(e) for e in entries):
            host = tuple(np.asarray(e) if isinstance(e, Value) else e for e in entries)
            # NumPy decides the result shape and the errors of indexing nothing
            return zeros(np.empty(av.shape, np.bool_)[host].shape, av.dtype)
    return None
