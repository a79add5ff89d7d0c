"""Searching: nonzero, argwhere, flatnonzero (static sizes under jit via ``size=``)."""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of


def nonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero elements, one array per axis.

    The result's length depends on the values, so under jit pass ``size=N`` (padded with
    ``fill_value``, default 0, or truncated).

    Example:
        >>> jnp.nonzero(jnp.array([0, 3, 0, 4]))
        (Array([1, 3], dtype=int32),)
    """
    from funcgrad.numpy.creation import asarray
    a = asarray(a)
    av = aval_of(a)
    if size is None:
        if isinstance(a, Tracer):
            raise TypeError("funcgrad.numpy.nonzero: the number of nonzero elements is not "
                            "known while tracing; pass size=N (and fill_value=) to use it "
                            "inside jit")
        host = np.nonzero(np.asarray(a))
        return tuple(asarray(h.astype(dtypes.default_int())) for h in host)
    from funcgrad.numpy.reductions import cumsum
    from funcgrad.numpy.indexing import scatter_update
    flat = lax.reshape(a, (av.size,))
    mask = lax.ne(flat, np.zeros((), av.dtype)) if av.dtype != dtypes.bool_ else flat
    rank = lax.sub(cumsum(mask), np.ones((), dtypes.default_int()))
    # position k of the output holds the flat index of the k-th nonzero element
    target = lax.select(mask, rank, lax.full((av.size,), size, dtypes.default_int()))
    idx = lax.iota(dtypes.default_int(), av.size)
    fill = 0 if fill_value is None else fill_value
    out = scatter_update(lax.full((size,), -1, dtypes.default_int()), (target,), idx, "set",
                         mode="drop")
    valid = lax.ge(out, np.zeros((), dtypes.default_int()))
    res = []
    rem = lax.select(valid, out, lax.full((size,), 0, dtypes.default_int()))
    strides = np.cumprod((av.shape[1:] + (1,))[::-1])[::-1] if av.ndim else ()
    for stride in strides:
        coord = lax.div(rem, lax.full((size,), int(stride), dtypes.default_int()))
        rem = lax.rem(rem, lax.full((size,), int(stride), dtypes.default_int()))
        res.append(lax.select(valid, coord, lax.full((size,), fill, dtypes.default_int())))
    return tuple(res)


def flatnonzero(a, *, size=None, fill_value=None):
    """Indices of nonzero elements of the flattened array. Example: ``jnp.flatnonzero(x)``."""
    from funcgrad.numpy.creation import asarray
    a = asarray(a)
    return nonzero(lax.reshape(a, (aval_of(a).size,)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """Indices of nonzero elements as rows (shape (N, ndim)). Example: ``jnp.argwhere(x > 0)``."""
    from funcgrad.numpy.shape_ops import stack
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=1)
