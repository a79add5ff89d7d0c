"""Moving an Array that is already on devices to another layout without a trip through the host.

``device_put(x, sharding)`` (and a sharded ``jit`` given an argument laid out differently) uses
``reshard(x, target)`` when ``x`` is on devices:

- onto a ``NamedSharding`` over the same devices (another spec, or another mesh of those
  devices in any order): one compiled identity program whose argument has ``x``'s layout and
  whose result has the target's; XLA's SPMD partitioner turns it into local slicing and the
  collectives it needs. ``x``'s layout is first re-expressed over the target's device order
  (its per-device buffers reordered to match, nothing copied), since an SPMD program has one
  device order for all its arguments and results;
- from one device onto a ``NamedSharding``: the buffer copied to each device of the target
  (device to device), then sliced by the same identity program;
- onto one device: a replicated copy (the identity program, unless ``x`` is replicated
  already) of which the target device's buffer is kept; a device outside ``x``'s devices gets
  a device-to-device copy of one replica.

Programs are cached per (aval, layouts), so resharding the same way twice compiles once.

Example:
    >>> from funcgrad.sharding import NamedSharding, P
    >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("d",))
    >>> x = funcgrad.device_put(np.arange(4.0), NamedSharding(mesh, P("d")))
    >>> y = funcgrad.device_put(x, NamedSharding(mesh, P()))
    >>> y.sharding.spec, np.asarray(y).tolist()
    (PartitionSpec(), [0.0, 1.0, 2.0, 3.0])
"""
import math

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.core import dtypes
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.lowering.array import Array, _BufferAval, sharding_for

_programs = {}      # (aval, source layout, target sharding) -> SpmdExecutable
_remaps = {}        # (source sharding, shape, target device ids) -> GSPMDSharding


def can_reshard(x):
    """Whether ``x`` (an Array) can move on devices (float0 values have no device buffers)."""
    return isinstance(x, Array) and x.aval.dtype != dtypes.float0 and not x._buf.is_deleted()


def reshard(x, target):
    """``x`` (an Array on one or several devices) laid out as ``target`` (a ``NamedSharding``
    of ``x``'s rank, or a ``SingleDeviceSharding``), computed on the devices."""
    from funcgrad.lowering.sharding import ShardedArray
    if isinstance(target, _jax.SingleDeviceSharding):
        return _to_one_device(x, target._device)
    devices = target.mesh.local_devices
    src = x._buf._sharding
    if type(x) is Array:
        source = _replicated_over(devices)
        bufs = _copies(x._buf, devices)
        if target.is_fully_replicated():
            return ShardedArray(x.aval, _assemble(x.aval, target, bufs))
    else:
        if set(src._devices) != set(devices):
            return None        # other devices: the caller goes through the host
        source = _remapped(src, x.aval.shape, devices)
        by_device = dict(zip(src._devices, x._buf._arrays))
        bufs = [by_device[d] for d in devices]
    arg = _assemble(x.aval, source, bufs)
    return _program(x.aval, source, target)([arg])[0]


def _to_one_device(x, device):
    if type(x) is Array:
        if x.device == device:
            return x
        buf, = _copies(x._buf, [device])
        return Array(x.aval, buf)
    src = x._buf._sharding
    devices = list(src._devices)
    if src.is_fully_replicated():
        arrays = x._buf._arrays
    else:
        from funcgrad.lowering.mesh import Mesh, NamedSharding, PartitionSpec
        mesh = Mesh(np.array(devices, dtype=object), ("_reshard",))
        replicated = NamedSharding(mesh, PartitionSpec()).with_rank(x.aval.ndim)
        source = _remapped(src, x.aval.shape, devices)
        full = _program(x.aval, source, replicated)([_assemble(x.aval, source,
                                                               x._buf._arrays)])[0]
        arrays = full._buf._arrays
    one = arrays[devices.index(device)] if device in devices else _copies(arrays[0],
                                                                          [device])[0]
    return Array(x.aval, _jax.ArrayImpl(_BufferAval(x.aval), sharding_for(device), [one], True,
                                        True))


def _copies(buf, devices):
    """Single-device copies of single-device ``buf`` on each of ``devices`` (device to
    device)."""
    return _jax.batched_copy_array_to_devices_with_sharding(
        [buf] * len(devices), [_jax.DeviceList((d,)) for d in devices],
        [sharding_for(d) for d in devices], [_jax.ArrayCopySemantics.REUSE_INPUT] * len(devices))


def _assemble(aval, sharding, bufs):
    return _jax.ArrayImpl(_BufferAval(aval), sharding, list(bufs), True, True)


_replicated_cache = {}


def _replicated_over(devices):
    key = tuple(devices)
    s = _replicated_cache.get(key)
    if s is None:
        s = _replicated_cache[key] = _jax.GSPMDSharding(_jax.DeviceList(key),
                                                        xc.HloSharding.replicate())
    return s


def _remapped(sharding, shape, devices):
    """``sharding`` (any sharding over the set ``devices``) as a ``GSPMDSharding`` over
    ``devices`` in their given order: the same block on every device."""
    key = (sharding, tuple(shape), tuple(d.id for d in devices))
    s = _remaps.get(key)
    if s is not None:
        return s
    index = sharding.devices_indices_map(tuple(shape))
    block = sharding.shard_shape(tuple(shape))
    splits = [n // b if b else 1 for n, b in zip(shape, block)]
    tiles = {}            # block coordinates -> positions (in ``devices``) holding that block
    for pos, d in enumerate(devices):
        coords = tuple((ix.indices(n)[0] // b if b else 0)
                       for ix, n, b in zip(index[d], shape, block))
        tiles.setdefault(coords, []).append(pos)
    replicas = len(devices) // math.prod(splits)
    if replicas == len(devices):
        hlo = xc.HloSharding.replicate()
    else:
        assignment = np.empty(splits + [replicas], dtype=np.int64)
        for coords, positions in tiles.items():
            assignment[coords] = positions
        op = xc.OpSharding()
        op.type = xc.OpSharding.Type.OTHER
        op.tile_assignment_dimensions = list(assignment.shape)
        op.tile_assignment_devices = [int(p) for p in assignment.flat]
        if replicas > 1:
            op.replicate_on_last_tile_dim = True
        else:
            op.tile_assignment_dimensions = splits
        hlo = xc.HloSharding.from_proto(op)
    s = _remaps[key] = _jax.GSPMDSharding(_jax.DeviceList(tuple(devices)), hlo)
    return s


def _program(aval, source, target):
    from funcgrad.lowering.spmd_jit import SpmdExecutable
    key = (aval, str(source._hlo_sharding), tuple(d.id for d in source._devices),
           target)
    program = _programs.get(key)
    if program is None:
        closed, _ = trace_to_jaxpr(lambda a: [a], [aval], debug_name="reshard")
        program = _programs[key] = SpmdExecutable(closed, target.mesh, [source], [target],
                                                  "reshard")
    return program


__all__ = ["reshard", "can_reshard"]
