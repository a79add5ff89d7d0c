"""Eager operations on arrays placed over a mesh: ``x * 2`` for an ``x`` laid out by a
``NamedSharding`` runs as one program over the mesh's devices, partitioned by XLA like
``jit``'s, and returns an array laid out over the same devices (the layout XLA chose,
normally the operand's), as JAX's eager operations do. Gathering such an array onto one
device, which every other eager operation does with its operands, would cost a copy of the
whole array and lose its layout.

Each (primitive, parameters) pair gets one jitted function binding it, so repeated operations
reuse compiled programs through ``jit``'s caches (one per operand signature and layout).

Example:
    >>> import numpy as np, funcgrad
    >>> from funcgrad.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = funcgrad.make_mesh((1,), ("data",))
    >>> x = funcgrad.device_put(np.arange(4.0), NamedSharding(mesh, P("data")))
    >>> y = x * 2
    >>> y.sharding.mesh == mesh, np.asarray(y).tolist()
    (True, [0.0, 2.0, 4.0, 6.0])
"""
import threading

from funcgrad.lowering.array import Array
from funcgrad.lowering.mesh import NamedSharding

_ops = {}
_ops_lock = threading.Lock()


def mesh_operand(args):
    """Whether an operand is an Array laid out by a ``NamedSharding`` (over a mesh)."""
    for a in args:       # (scalars, the common other operands, fail the first test cheaply)
        if isinstance(a, Array) and isinstance(a._buf._sharding, NamedSharding):
            return True
    return False


def run_partitioned(prim, params, params_key, args):
    """``prim.bind(*args, **params)`` as a program partitioned over the operands' mesh."""
    key = (prim, params_key)
    fn = _ops.get(key)
    if fn is None:
        from funcgrad.lowering.dispatch import JitFunction

        def bind(*operands):
            return prim.bind(*operands, **params)
        bind.__name__ = bind.__qualname__ = prim.name
        with _ops_lock:
            fn = _ops.setdefault(key, JitFunction(bind))
    return fn(*args)


def clear_caches():
    _ops.clear()
