"""The eager interpreter: a primitive applied to concrete values runs right away on the device.

Each (primitive, params, input avals, device) compiles once to a single-operation executable
that is cached, so eager code and jitted code share one lowering and one semantics.
"""
import numpy as np

from funcgrad.core import dtypes, interpreters
from funcgrad.core.interpreters import Interpreter, Tracer
from funcgrad.core.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Var
from funcgrad.core.primitive import out_avals
from funcgrad.core.values import aval_of
from funcgrad.lax.callbacks import reraise_host_error
from funcgrad.lowering import backend, eager_partitioned, spmd
from funcgrad.lowering import transfer_guard as _guard
from funcgrad.lowering.array import Array, device_put, put_numpy, sharding_for, transfer
from funcgrad.lowering.executable import compile_closed_jaxpr

_op_cache = {}
_scalar_cache = {}
_SCALAR_CACHE_MAX = 4096


def hashable_params(params):
    """A hashable key for a params dict (lists become tuples, arrays become bytes)."""
    return tuple((k, _freeze(v)) for k, v in params.items())


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, tuple):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, np.ndarray):
        return ("ndarray", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


def single_op_jaxpr(prim, in_avals, params):
    invars = [Var(a) for a in in_avals]
    outvars = [Var(a) for a in out_avals(prim, in_avals, params)]
    return ClosedJaxpr(Jaxpr([], invars, [Eqn(prim, invars, params, outvars)], outvars), [])


def _scalar_array(x, device):
    key = (type(x), x, device, dtypes.x64_enabled())
    arr = _scalar_cache.get(key)
    if _guard.active[0] and arr is not None:     # a cached scalar still counts as a copy
        _guard.check("host_to_device", False, f"Python scalar {x!r}, device={device}")
    if arr is None:
        arr = put_numpy(x, device)
        if len(_scalar_cache) < _SCALAR_CACHE_MAX:
            _scalar_cache[key] = arr
    return arr


class EagerInterpreter(Interpreter):
    """The root interpreter: runs primitives now on device arrays."""

    debug_name = "eager"

    @staticmethod
    def device_put(value):
        """A host value as an Array on the default device (``interpreters.to_device``)."""
        return device_put(value)

    def process_primitive(self, prim, args, params):
        if prim.impl is not None:
            return prim.impl(*args, **params)
        # Fast path: every operand is an Array on one device (the common case in eager code).
        sharding = None
        bufs, avals, keys = [], [], []
        for a in args:
            if type(a) is not Array:
                break
            buf = a._buf
            s = buf._sharding
            if s is not sharding:
                if sharding is not None:
                    break
                sharding = s
            bufs.append(buf)
            avals.append(a.aval)
            keys.append(a.aval.key)
        else:
            if sharding is not None:
                return _run(prim, params, bufs, avals, keys, sharding, args)
        return self._process_general(prim, args, params)

    def _process_general(self, prim, args, params):
        """Operands that are NumPy values, Python scalars, or Arrays on several devices (one
        laid out over a mesh makes the operation a program over that mesh)."""
        if eager_partitioned.mesh_operand(args):
            return eager_partitioned.run_partitioned(prim, params, _params_key(params), args)
        device = None
        for a in args:
            if type(a) is Array:
                device = a._buf._sharding._device
                break
            if isinstance(a, Tracer):
                raise interpreters.escaped_tracer_error(a, prim)
        if device is None:
            device = backend.default_device()
        bufs, avals = [], []
        for a in args:
            if type(a) is Array:
                avals.append(a.aval)
                if a.device != device:
                    a = transfer(a, device)
                bufs.append(a._buf)
            else:
                if isinstance(a, Tracer):
                    raise interpreters.escaped_tracer_error(a, prim)
                arr = _scalar_array(a, device) if type(a) in (int, float, bool, complex) else \
                    put_numpy(a, device, aval_of(a))
                avals.append(arr.aval)
                bufs.append(arr._buf)
        return _run(prim, params, bufs, avals, [a.key for a in avals], sharding_for(device), args)


def _params_key(params):
    if not params:
        return ()
    key = tuple(params.items())
    try:
        hash(key)
    except TypeError:     # lists, NumPy arrays, dicts among the params
        return hashable_params(params)
    return key


_ON_MESH = object()     # _op_cache's value for an operation that runs over a mesh


def _run(prim, params, bufs, avals, keys, sharding, args):
    params_key = _params_key(params)
    key = (prim, params_key, tuple(keys), sharding)
    exe = _op_cache.get(key)
    if exe is None:
        closed = single_op_jaxpr(prim, avals, params)
        # a loop or branch whose body holds shard_maps runs over their mesh, as a plain jit
        # of the operation (spmd.meshes_in), as JAX runs it
        exe = _op_cache[key] = _ON_MESH if spmd.meshes_in(closed) else \
            compile_closed_jaxpr(closed, sharding._device, name=prim.name)
    if exe is _ON_MESH:
        return eager_partitioned.run_partitioned(prim, params, params_key, args)
    try:
        outs = exe.loaded.execute_sharded(bufs).consume_with_handlers(exe._handlers)
    except Exception as exc:
        reraise_host_error(exc)
        for i, a in enumerate(args):
            if type(a) is Array and a._buf.is_deleted():
                raise RuntimeError(f"{prim.name}: operand {i} ({a.aval.str_short()}) was "
                                   f"deleted (donated to a jit call or deleted explicitly); "
                                   f"its value cannot be used") from exc
        raise
    if prim.multiple_results:
        return [Array(a, b) for a, b in zip(exe.out_avals, outs)]
    return Array(exe.out_avals[0], outs[0])


eager_interpreter = EagerInterpreter()
interpreters.set_root(eager_interpreter)


def clear_caches():
    _op_cache.clear()
    _scalar_cache.clear()
    eager_partitioned.clear_caches()
