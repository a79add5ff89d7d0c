"""Eager collectives across the processes of a run, for metrics, logging and agreement.

Each is one XLA program over the run's global devices (a ``pmap`` over ``funcgrad.devices()``
whose body calls ``lax.psum``, ``lax.pmax``, ``lax.pmin`` or ``lax.all_gather``), fed by this
process's local devices: the values travel through the platform's collectives (gloo over TCP on
the CPU), never through a transport of funcgrad's own. Every process must make the same calls
in the same order with values of the same shape and dtype. In a one-process run they compute
over the local devices alone.

Example:
    >>> import funcgrad.distributed as dist
    >>> dist.all_reduce(np.float32(3.0), op="max")   # one process: its own value
    Array(3., dtype=float32)
"""
import functools
import zlib

import numpy as np
from jaxlib import _jax

from funcgrad import lax
from funcgrad import numpy as jnp
from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.distributed.program_check import ProgramMismatchError
from funcgrad.distributed.runtime import DistributedError
from funcgrad.lowering import backend, sharding
from funcgrad.lowering.array import Array, _BufferAval, device_put, sharding_for
from funcgrad.transforms.pmap import pmap

_AXIS = "processes"
OPS = ("sum", "mean", "max", "min")


def _mean(v, axis_name, count):
    return jnp.true_divide(lax.psum(v, axis_name), count)


_BODIES = {"sum": lax.psum, "max": lax.pmax, "min": lax.pmin, "gather": lax.all_gather}


@functools.lru_cache(maxsize=None)
def _program(kind, devices):
    """The pmap over ``devices`` (cached) applying collective ``kind`` to each device's value.

    Neither the argument nor the result has a mapped axis (``in_axes=None``,
    ``out_axes=None``): each device's buffer is fed as it is (an Array's own buffer, no
    reshape to a row of a stacked array) and each device's result buffer is the whole result.
    The argument is not truly replicated (each device holds its own value): that is sound
    because ``pmap`` runs one replica per device (XLA's ``num_replicas``), each reading its own
    buffer, and the collective combines them; the result is."""
    if kind == "mean":
        count = len({d.process_index for d in devices})
        body = functools.partial(_mean, axis_name=_AXIS, count=count)
    else:
        body = functools.partial(_BODIES[kind], axis_name=_AXIS)
    # axis_size counts this process's entries (its devices); the collectives span all
    return pmap(body, axis_name=_AXIS, devices=devices, in_axes=None, out_axes=None,
                axis_size=len(sharding.addressable(devices)))


def _host_value(x, fn):
    value = np.asarray(x)
    if value.dtype == object:
        raise TypeError(f"funcgrad.distributed.{fn}: cannot send a {type(x).__name__} holding "
                        "Python objects; pass an array or a number")
    return value.astype(dtypes.canonicalize(value.dtype), copy=False)


@functools.lru_cache(maxsize=16)
def _zeros(shape, dtype, device):
    """A (cached) buffer of zeros on ``device``: what a process's other devices add to a sum."""
    return device_put(np.zeros(shape, dtype), device)._buf


def _buffers(x, local, first_only, fn):
    """(aval, {local device: buffer}, home device): ``x`` on its home device (an Array already
    on a local device is used as it is, never copied), and on the other local devices ``x``
    too, or zeros when ``first_only``."""
    if type(x) is Array and x.device in local:
        home, aval = x.device, ShapedArray(x.shape, x.dtype, False)
        bufs = {home: x._buf}
    else:
        value = _host_value(x, fn)
        home, aval = local[0], ShapedArray(value.shape, value.dtype, False)
        bufs = {home: device_put(value, home)._buf}
    for d in local:
        if d not in bufs:
            bufs[d] = _zeros(aval.shape, np.dtype(aval.dtype), d) if first_only else \
                device_put(Array(aval, bufs[home]), d)._buf
    return aval, bufs, home


def _collective(kind, fn, x, first_only):
    """Run collective ``kind`` over every device of the run. One local device (the one holding
    ``x``, or the first) holds ``x``; the other local devices hold ``x`` too, or zeros when
    ``first_only`` (so a sum counts each process once). Returns this process's result as an
    Array on that device, and the run's devices."""
    devices = tuple(backend.devices())
    me = backend.process_index()
    local = [d for d in devices if d.process_index == me]
    aval, bufs, home = _buffers(x, local, first_only, fn)
    arr = sharding.assemble(aval, sharding.mapped_sharding(devices, aval.ndim, None),
                            [bufs[d] for d in local])
    try:
        out = _program(kind, devices)(arr)
    except ProgramMismatchError as exc:   # named after the function the user called
        raise ProgramMismatchError(f"funcgrad.distributed.{fn}", exc.detail, exc.process,
                                   exc.mine, exc.theirs) from None
    except DistributedError:   # a lost process, a process that never reached this program
        raise
    except Exception as exc:
        raise DistributedError(
            f"funcgrad.distributed.{fn}: the collective over {len(devices)} devices of "
            f"{backend.process_count()} processes failed (value {aval.dtype}{list(aval.shape)}"
            f"; every process must call it with the same shape and dtype): {exc}") from exc
    # the result is replicated: each local device's buffer is the whole of it. With one local
    # device, the array is re-labelled as a single-device one (no new buffer); otherwise the
    # home device's shard is taken (jaxlib builds shards through a failing `import jax` while
    # the result is not ready yet, about 0.2 ms per call).
    result_aval = _BufferAval(out.aval)
    if len(local) == 1:
        mine = out._buf._rewrap_with_aval_and_sharding(result_aval, sharding_for(home))
    else:
        buf = out._buf._fully_replicated_shard()
        if buf._sharding._device != home:
            buf = out._buf._arrays[local.index(home)]   # the local devices' buffers, in order
        mine = _jax.ArrayImpl(result_aval, sharding_for(home), [buf], True, True)
    return Array(out.aval, mine), devices


def all_reduce(x, op="sum"):
    """``x`` reduced over the processes of the run: 'sum', 'mean', 'max' or 'min'. Every
    process passes a value of the same shape and dtype and gets the same result (a 'mean' of
    integers is a float, as ``jnp.mean`` gives).

    Example:
        >>> import funcgrad.distributed as dist
        >>> dist.all_reduce(np.array([1.0, 2.0], np.float32), op="sum")   # one process
        Array([1., 2.], dtype=float32)
    """
    if op not in OPS:
        raise ValueError(f"funcgrad.distributed.all_reduce: op must be one of {list(OPS)}, "
                         f"got {op!r}")
    result, _ = _collective(op, "all_reduce", x, first_only=op in ("sum", "mean"))
    return result


def process_allgather(x, tiled=False):
    """Every process's ``x``, stacked along a new leading axis in process order (or
    concatenated along axis 0 when ``tiled``), on every process.

    Example:
        >>> import funcgrad.distributed as dist
        >>> dist.process_allgather(np.array([5, 6], np.int32))   # one process
        Array([[5, 6]], dtype=int32)
    """
    value = _host_value(x, "process_allgather")
    gathered, devices = _collective("gather", "process_allgather", value, first_only=False)
    rows = np.asarray(gathered)
    firsts, seen = [], set()
    for i, d in enumerate(devices):   # one row per process: its first device's
        if d.process_index not in seen:
            seen.add(d.process_index)
            firsts.append((d.process_index, i))
    out = np.stack([rows[i] for _, i in sorted(firsts)])
    if tiled:
        if out.ndim < 2:
            raise ValueError("funcgrad.distributed.process_allgather: tiled=True needs values "
                             f"with at least one axis, got shape {value.shape}")
        out = out.reshape((-1,) + out.shape[2:])
    return jnp.asarray(out)


def broadcast_one_to_all(x, is_source=None):
    """The value ``x`` of the one source process (default: process 0), on every process. The
    others' ``x`` only gives the shape and dtype.

    Example:
        >>> import funcgrad.distributed as dist
        >>> dist.broadcast_one_to_all(np.array([1, 2], np.int32))   # one process: the source
        Array([1, 2], dtype=int32)
    """
    if is_source is None:
        is_source = backend.process_index() == 0
    value = _host_value(x, "broadcast_one_to_all")
    sources = int(all_reduce(np.int32(bool(is_source)), "sum"))
    if sources != 1:
        raise DistributedError(f"funcgrad.distributed.broadcast_one_to_all: {sources} processes "
                               "said is_source=True; exactly one must")
    sent = value if is_source else np.zeros_like(value)
    row, _ = _collective("sum", "broadcast_one_to_all", sent, first_only=True)
    return row


def sync_global_devices(name):
    """Wait until every process reached the call with this ``name``; a process that reached a
    call with a different name makes all of them raise DistributedError.

    Example:
        >>> import funcgrad.distributed as dist
        >>> dist.sync_global_devices("after loading")   # one process: returns at once
    """
    digest = np.array(zlib.crc32(str(name).encode()) & 0x7FFFFFFF, np.int32)
    low, _ = _collective("min", "sync_global_devices", digest, first_only=False)
    high, _ = _collective("max", "sync_global_devices", digest, first_only=False)
    if int(low) != int(high):
        raise DistributedError(f"funcgrad.distributed.sync_global_devices({name!r}): the "
                               "processes reached barriers of different names")
