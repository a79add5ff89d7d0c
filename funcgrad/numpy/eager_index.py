"""Eager ``x[i]`` with a Python int ``i``: the row is read by one compiled program per array
type, the index being an operand. The general path (``indexing.getitem``) slices with the
index as a static parameter, which compiles one program per index value: reading an array
element by element (``[float(x[i]) for i in range(n)]``) would compile ``n`` programs.

Example:
    >>> x = jnp.arange(6).reshape(3, 2)
    >>> x[2], x[-1]
    (Array([4, 5], dtype=int32), Array([4, 5], dtype=int32))
"""
import numpy as np

from funcgrad import lax
from funcgrad.lowering import transfer_guard
from funcgrad.lowering.array import Array
from funcgrad.lowering.eager_jit import eager_operands, one_dispatch_when_eager
from funcgrad.numpy import indexing


@one_dispatch_when_eager
def _row(x, i):
    return lax.dynamic_index_in_dim(x, i, 0, keepdims=False)


def getitem(x, idx):
    """``x[idx]``: the fast path for an eager array and a Python int, else the general one."""
    # (the index travels as an operand: not while a transfer guard watches host copies, since
    # a static index is no transfer of the user's)
    if type(idx) is int and type(x) is Array and x.ndim and not transfer_guard.active[0] \
            and eager_operands(x):
        n = x.shape[0]
        if -n <= idx < n:
            return _row(x, np.int32(idx % n))
    # out-of-bounds ints clamp as JAX's (or raise under config.debug_checks) on the general path
    return indexing.getitem(x, idx)
