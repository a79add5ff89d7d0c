"""Arrays split over several devices: shardings, the sharded ``Array`` and placing values.

A ``MappedSharding`` says how an array lies over a list of devices: split evenly along one
``axis`` (device ``i`` holds slice ``i``, of size 1 along that axis, as ``pmap`` makes them) or
replicated (every device holds the whole value, ``axis=None``). It is one of jaxlib's C++
``GSPMDSharding``s, so the runtime's ``ArrayImpl`` keeps one buffer per device under it and
executables take and return such arrays without any Python per shard.

``ShardedArray`` is the ``funcgrad.Array`` over such a buffer: NumPy conversion, printing and
operations outside ``pmap`` gather the shards; ``pmap`` over the same devices uses the shards in
place.

Example:
    >>> devs = funcgrad.local_devices()
    >>> x = funcgrad.device_put_sharded([np.full(3, i) for i in range(len(devs))], devs)
    >>> x.sharding.axis, [s.device for s in x.addressable_shards] == devs
    (0, True)
    >>> x.addressable_shards[0].index, x.addressable_shards[0].data
    ((slice(0, 1, None), slice(None, None, None)), Array([[0, 0, 0]], dtype=int32))
"""
import contextlib
import itertools
import sys
import weakref

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.interpreters import Value
from funcgrad.lowering import backend
from funcgrad.lowering.array import (Array, Shard, _BufferAval, sharding_for,
                                     storage_dtype)


class MappedSharding(_jax.GSPMDSharding):
    """``devices`` holding an array split along ``axis`` (one slice each), or replicated when
    ``axis`` is None. Use ``mapped_sharding(devices, ndim, axis)``, which caches them."""

    @property
    def axis(self):
        return _axis_of(self)

    @property
    def _device_assignment(self):
        return tuple(self._devices)

    @property
    def device_set(self):
        return set(self._devices)

    @property
    def memory_kind(self):
        return None

    def _to_xla_hlo_sharding(self, ndim):
        return self._hlo_sharding

    def is_fully_replicated(self):
        return _axis_of(self) is None

    def is_fully_addressable(self):
        return len(addressable(self._devices)) == len(self._devices)

    @property
    def addressable_devices(self):
        return set(addressable(self._devices))

    def shard_shape(self, shape):
        axis = _axis_of(self)
        if axis is None:
            return tuple(shape)
        return tuple(1 if i == axis else d for i, d in enumerate(shape))

    def addressable_devices_indices_map(self, shape):
        """``devices_indices_map`` restricted to this process's devices."""
        return {d: index for d, index, _ in addressable_indices(self, shape)}

    def devices_indices_map(self, shape):
        axis = _axis_of(self)
        out = {}
        for i, d in enumerate(self._devices):
            index = [slice(None)] * len(shape)
            if axis is not None:
                index[axis] = slice(i, i + 1)
            out[d] = tuple(index)
        return out

    def __repr__(self):
        ids = [d.id for d in self._devices]
        return f"MappedSharding(devices={ids}, axis={_axis_of(self)})"


_axes = {}            # id(sharding) -> axis (C++ objects take no new attributes)
_shardings = {}       # (device ids, ndim, axis) -> MappedSharding


def _axis_of(sharding):
    return _axes[id(sharding)]


def shard_buffers(buf):
    """The single-device buffers of ``buf`` (a jaxlib ``ArrayImpl``) on this process's devices.

    In a multi-process run jaxlib tries to import the ``jax`` package while it splits an array
    into its shards: that would load JAX into a funcgrad program (where JAX is installed) or
    search the path for it on every array (where it is not). funcgrad never imports JAX, so
    unless the program loaded it already the attempt is made to fail at once.
    """
    if "jax" in sys.modules:
        return buf._arrays
    sys.modules["jax"] = None
    try:
        return buf._arrays
    finally:
        if sys.modules.get("jax", False) is None:
            del sys.modules["jax"]


def addressable(devices):
    """The devices of ``devices`` that this process drives, in their order (all of them in a
    one-process run)."""
    return [d for d in devices if d.process_index == d.client.process_index()]


def addressable_indices(sharding, shape):
    """``[(device, index, replica_id)]`` for the devices of ``sharding`` this process drives,
    in the sharding's device order: the block of an array of ``shape`` each holds, and how
    many devices before it (in that order) hold the same block."""
    index = sharding.devices_indices_map(tuple(shape))
    seen, out = {}, []
    for d in sharding._device_assignment:
        key = tuple((s.start, s.stop) for s in index[d])
        replica = seen.get(key, 0)
        seen[key] = replica + 1
        if d.process_index == d.client.process_index():
            out.append((d, index[d], replica))
    return out


def mapped_sharding(devices, ndim, axis):
    """The (cached) sharding of an ``ndim``-d array over ``devices`` split along ``axis`` (None:
    replicated)."""
    devices = tuple(devices)
    key = (tuple(d.id for d in devices), devices[0].platform, ndim, axis)
    s = _shardings.get(key)
    if s is None:
        if axis is None:
            hlo = xc.HloSharding.replicate()
        else:
            op = xc.OpSharding()
            op.type = xc.OpSharding.Type.OTHER
            dims = [1] * ndim
            dims[axis] = len(devices)
            op.tile_assignment_dimensions = dims
            op.tile_assignment_devices = list(range(len(devices)))
            hlo = xc.HloSharding.from_proto(op)
        s = MappedSharding(_jax.DeviceList(devices), hlo)
        _axes[id(s)] = axis
        _shardings[key] = s
    return s


_signatures = {}      # (aval key, id(sharding)) -> (number, sharding): the sharding held
_signature_numbers = itertools.count(1)


def layout_signature(aval, sharding):
    """A number standing for ``aval``'s shape and dtype (its key) and the very ``sharding``
    object: what the eager jit's fast table keys an argument by, one int per leaf where a pair
    would be built and hashed per call. Numbers are never reused and an Array never changes,
    so a number kept on an Array (``signature_of``) cannot go stale."""
    k = (aval.key, id(sharding))
    hit = _signatures.get(k)
    if hit is None:
        if len(_signatures) >= 4096:
            _signatures.clear()
        hit = _signatures[k] = (next(_signature_numbers), sharding)
    return hit[0]


def signature_of(a):
    """``layout_signature`` of the ShardedArray ``a``, computed once and kept on it."""
    try:
        return a._sig
    except AttributeError:
        sig = a._sig = layout_signature(a.aval, a._buf._sharding)
        return sig


class ShardedArray(Array):
    """A ``funcgrad.Array`` whose value lies over several devices (``pmap``'s outputs,
    ``device_put_sharded``, ``device_put_replicated``).

    Example:
        >>> n = funcgrad.local_device_count()
        >>> y = funcgrad.pmap(lambda v: v * 2)(np.arange(float(n)))
        >>> y.sharding.axis, len(y.addressable_shards) == n, y.is_fully_replicated
        (0, True, False)
        >>> np.array_equal(np.asarray(y), 2 * np.arange(n))
        True
    """

    __slots__ = ("_sig",)     # its layout_signature, once a jitted call has asked for it

    @property
    def device(self):
        raise ValueError(f"Array {self.aval.str_short()} lies on {len(self.devices())} devices "
                         f"({self.sharding}); use .devices() or .addressable_shards")

    def devices(self):
        return set(self._buf._sharding._devices)

    @property
    def is_fully_replicated(self):
        return self._buf._sharding.is_fully_replicated()

    @property
    def is_fully_addressable(self):
        """Whether this process drives every device holding a part of the value (False for an
        array over the devices of several processes)."""
        return self._buf._sharding.is_fully_addressable()

    @property
    def addressable_shards(self):
        """The ``Shard``s on this process's devices (``device``, ``index`` into the global
        array, ``data``, ``replica_id``), in the sharding's device order."""
        sharding = self._buf._sharding
        shape = sharding.shard_shape(self.aval.shape)
        aval = ShapedArray(shape, self.aval.dtype, self.aval.weak_type)
        out = []
        for (device, index, replica), buf in zip(
                addressable_indices(sharding, self.aval.shape), shard_buffers(self._buf)):
            own = _jax.ArrayImpl(_BufferAval(aval), sharding_for(device), [buf], True, True)
            out.append(Shard(device, index, Array(aval, own), replica))
        return out

    def addressable_data(self, i):
        """The data (an Array on one device) of the ``i``-th addressable shard."""
        return self.addressable_shards[i].data

    def _value(self):
        if self._buf.is_deleted():
            raise RuntimeError(f"Array {self.aval.str_short()} was deleted (donated or deleted "
                               f"explicitly); its value cannot be read")
        if self.aval.dtype == dtypes.float0:
            return np.zeros(self.aval.shape, dtypes.float0)
        shards = self.addressable_shards
        if self.is_fully_replicated:
            return shards[0].data._value()
        if not self.is_fully_addressable:
            raise RuntimeError(
                f"Array {self.aval.str_short()} lies on devices of other processes too "
                f"({self.sharding}); this process holds only its .addressable_shards. Use "
                f"funcgrad.distributed.process_allgather to gather the whole value, or read the "
                f"shards")
        out = np.empty(self.aval.shape, storage_dtype(self.aval.dtype))
        for s in shards:
            out[s.index] = s.data._value()
        return out


def _device_list(devices, fn):
    devices = list(devices) if devices is not None else backend.local_devices()
    if not devices:
        raise ValueError(f"{fn}: an empty list of devices")
    if len(set(devices)) != len(devices):
        raise ValueError(f"{fn}: devices {devices} repeat a device")
    return devices


def assemble(aval, sharding, shard_bufs):
    """A ShardedArray of global ``aval`` from per-device buffers (no copy)."""
    buf = _jax.ArrayImpl(_BufferAval(aval), sharding, list(shard_bufs), True, True)
    return ShardedArray(aval, buf)


def shard_value(x, devices, axis, fn="device_put_sharded"):
    """``x`` (NumPy value, Array or ShardedArray) split along ``axis`` over ``devices`` (None:
    replicated), reusing the buffers of a ShardedArray already laid out that way.

    When ``devices`` include other processes' devices, ``x`` is this process's part: one entry
    along ``axis`` per device of this process (or, with ``axis`` None, the whole value), as
    ``pmap`` takes it in a multi-process run."""
    devices = tuple(devices)
    if isinstance(x, ShardedArray):
        s = x._buf._sharding
        if tuple(s._devices) == devices and _axes.get(id(s), "other") == axis:
            return x
    local = addressable(devices)
    if len(local) != len(devices):
        return _process_part(x, devices, local, axis, fn)
    if axis is None and type(x) is Array and x.device in local:
        return _replicated_from(x, x.aval, devices, local)
    aval, host = host_value(x, fn)
    n = len(devices)
    if axis is None:
        pieces = [host] * n
    else:
        if aval.ndim <= axis or aval.shape[axis] != n:
            raise ValueError(f"{fn}: axis {axis} of an argument of shape {aval.shape} must have "
                             f"one entry per device ({n} devices)")
        pieces = [np.ascontiguousarray(p) for p in np.split(host, n, axis=axis)]
    return put_pieces(aval, mapped_sharding(devices, aval.ndim, axis), pieces, devices)


# A process's part of a multi-process program's output is the output's buffer re-wrapped over
# this process's devices; it remembers the global array it came from, so that the next program
# over the same devices takes it re-wrapped back instead of reading its shards (reading the
# shards of an array over several processes' devices, ``_arrays``, makes jaxlib try to import
# jax on every new array).
_parts = {}     # id(part's buffer) -> (weakref to it, global aval, global sharding)


def process_part(buf, aval, local_aval, local_sharding):
    """The ShardedArray ``local_aval`` over ``local_sharding`` (this process's devices) of the
    multi-process output buffer ``buf`` of global ``aval``."""
    part = buf._rewrap_with_aval_and_sharding(_BufferAval(local_aval), local_sharding)
    key = id(part)
    _parts[key] = (weakref.ref(part, lambda _, k=key: _parts.pop(k, None)), aval, buf._sharding)
    return ShardedArray(local_aval, part)


def _process_part(x, devices, local, axis, fn):
    """The global Array over ``devices`` whose shards on this process's ``local`` devices are
    the parts of ``x`` (its buffers when it is already split that way over ``local``)."""
    if isinstance(x, ShardedArray):
        entry = _parts.get(id(x._buf))
        if entry is not None and entry[0]() is x._buf and \
                entry[2] is mapped_sharding(devices, x.aval.ndim, axis):
            return ShardedArray(entry[1], x._buf._rewrap_with_aval_and_sharding(
                _BufferAval(entry[1]), entry[2]))
        s = x._buf._sharding
        if tuple(s._devices) == tuple(local) and _axes.get(id(s), "other") == axis:
            aval = x.aval
            return assemble(global_of(aval, axis, len(devices)),
                            mapped_sharding(devices, aval.ndim, axis), shard_buffers(x._buf))
    if type(x) is Array and x.device in local:
        if axis is None:
            return _replicated_from(x, x.aval, devices, local)
        if len(local) == 1 and axis < x.aval.ndim and x.aval.shape[axis] == 1:
            return assemble(global_of(x.aval, axis, len(devices)),
                            mapped_sharding(devices, x.aval.ndim, axis), [x._buf])
    aval, host = host_value(x, fn)
    if axis is None:
        pieces = [host] * len(local)
    else:
        if aval.ndim <= axis or aval.shape[axis] != len(local):
            raise ValueError(f"{fn}: axis {axis} of an argument of shape {aval.shape} must have "
                             f"one entry per device of this process ({len(local)} of the "
                             f"{len(devices)} devices of the run)")
        pieces = [np.ascontiguousarray(p) for p in np.split(host, len(local), axis=axis)]
    return put_pieces(global_of(aval, axis, len(devices)),
                      mapped_sharding(devices, aval.ndim, axis), pieces, local)


def _replicated_from(x, aval, devices, local):
    """Single-device Array ``x`` replicated over ``devices``: its own buffer on its device,
    copies on this process's other devices."""
    host, bufs = None, []
    for d in local:
        if d == x.device:
            bufs.append(x._buf)
            continue
        if host is None:
            host = np.asarray(x).astype(storage_dtype(aval.dtype), copy=False)
        bufs.append(put_pieces(aval, sharding_for(d), [host], [d])._buf)
    return assemble(aval, mapped_sharding(devices, aval.ndim, None), bufs)


def global_of(aval, axis, n):
    """``aval`` with ``n`` entries along ``axis`` (None: ``aval``)."""
    if axis is None:
        return aval
    shape = list(aval.shape)
    shape[axis] = n
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type)


def host_value(x, fn):
    """``(aval, NumPy value in its storage dtype)`` of ``x`` (NumPy value, scalar or Array)."""
    if isinstance(x, Value) and not isinstance(x, Array):
        raise TypeError(f"{fn}: cannot place a traced value {x.aval.str_short()} on devices "
                        f"inside a transformation")
    host = np.asarray(x)
    if isinstance(x, Array):
        aval = x.aval
    else:
        if host.dtype == object:
            raise TypeError(f"{fn}: cannot convert {type(x).__name__} holding Python objects "
                            f"to an array")
        aval = ShapedArray(host.shape, dtypes.canonicalize(host.dtype),
                           isinstance(x, (int, float, complex)) and not isinstance(x, bool))
    return aval, host.astype(storage_dtype(aval.dtype), copy=False)


def put_pieces(aval, sharding, pieces, devices):
    """A ShardedArray of global ``aval`` from host ``pieces``, one per device of ``devices``
    (the order of ``sharding``'s devices)."""
    with backend.wide_transfers() if aval.dtype.itemsize == 8 else contextlib.nullcontext():
        buf = _jax.batched_device_put(_BufferAval(aval), sharding, pieces, list(devices), True,
                                      False)
    return ShardedArray(aval, buf)


def put_named(x, sharding, fn="device_put"):
    """``x`` (NumPy value, scalar, Array or ShardedArray) laid out as ``sharding`` (a
    ``NamedSharding``): an Array already laid out that way is returned as is; otherwise its
    value is split on the host and each device's block copied to it."""
    if isinstance(x, ShardedArray) and x._buf._sharding == sharding:
        return x
    from funcgrad.lowering import reshard
    if reshard.can_reshard(x):        # already on devices: moved there, not via the host
        try:
            sharding = sharding.with_rank(x.aval.ndim, fn)
            sharding.check_shape(x.aval.shape, fn)
        except ValueError as e:
            raise ValueError(f"{e} (an argument of shape {x.aval.shape}, {x.aval.dtype})") \
                from None
        out = reshard.reshard(x, sharding)
        if out is not None:
            return out
    aval, host = host_value(x, fn)
    try:
        sharding = sharding.with_rank(aval.ndim, fn)
        index = sharding.devices_indices_map(aval.shape)
    except ValueError as e:
        raise ValueError(f"{e} (an argument of shape {aval.shape}, {aval.dtype})") from None
    devices = addressable(sharding._device_assignment)
    pieces = [np.array(host[index[d]], order="C") for d in devices]
    return put_pieces(aval, sharding, pieces, devices)


def device_put_sharded(shards, devices=None):
    """Stack ``shards`` (a list, one value or pytree per device) into one Array split along a
    new leading axis over ``devices`` (default: every local device). Arrays already on their
    device stay there (a reshape on that device, no trip through the host).

    Example:
        >>> devs = funcgrad.local_devices()
        >>> x = funcgrad.device_put_sharded([np.ones(2)] * len(devs), devs)
        >>> x.shape == (len(devs), 2), x.sharding.axis
        (True, 0)
    """
    from funcgrad import tree_util
    devices = _device_list(devices, "device_put_sharded")
    if len(shards) != len(devices):
        raise ValueError(f"device_put_sharded: {len(shards)} shards for {len(devices)} devices; "
                         f"give one per device")
    return tree_util.tree_map(lambda *xs: _stack_leaf(xs, devices), *shards)


def _stack_leaf(xs, devices):
    if all(type(x) is Array for x in xs) and all(
            x.device == d for x, d in zip(xs, devices)) and len({x.aval for x in xs}) == 1:
        one = xs[0].aval
        aval = ShapedArray((len(xs),) + one.shape, one.dtype, one.weak_type)
        sharding = mapped_sharding(devices, aval.ndim, 0)
        piece = ShapedArray((1,) + one.shape, one.dtype, one.weak_type)
        bufs = [_reshaped(x, piece) for x in xs]
        return assemble(aval, sharding, bufs)
    hosts = [np.asarray(x) for x in xs]
    shapes = {h.shape for h in hosts}
    if len(shapes) != 1:
        raise ValueError(f"device_put_sharded: shards must have one shape, got "
                         f"{[h.shape for h in hosts]}")
    return shard_value(np.stack(hosts), devices, 0)


def _reshaped(x, piece):
    from funcgrad.core import interpreters
    from funcgrad.lax.shapes import reshape
    with interpreters.using(interpreters.root()):
        return reshape(x, piece.shape)._buf


def device_put_replicated(x, devices=None):
    """``x`` (a value or pytree) copied to every one of ``devices``, as one replicated Array per
    leaf whose leading axis is the device axis (``pmap`` splits it back).

    Example:
        >>> devs = funcgrad.local_devices()
        >>> funcgrad.device_put_replicated(np.ones(3), devs).shape == (len(devs), 3)
        True
    """
    from funcgrad import tree_util
    devices = _device_list(devices, "device_put_replicated")
    return tree_util.tree_map(
        lambda leaf: shard_value(np.stack([np.asarray(leaf)] * len(devices)), devices, 0,
                                 "device_put_replicated"), x)


def put_tree(x, target):
    """``device_put(x, target)`` for ``target`` a list of devices (replicated on each), a
    ``NamedSharding``, a ``SingleDeviceSharding``, or a ``PartitionSpec`` inside ``with mesh:``."""
    from funcgrad import tree_util
    from funcgrad.lowering import mesh
    if isinstance(target, (list, tuple)) and not isinstance(target, mesh.PartitionSpec):
        return tree_util.tree_map(lambda leaf: replicate(leaf, target), x)
    if isinstance(target, _jax.SingleDeviceSharding):
        return tree_util.tree_map(lambda leaf: to_device(leaf, target._device), x)
    if isinstance(target, mesh.PartitionSpec):
        current = mesh.current_mesh()
        if current is None:
            raise ValueError(f"device_put: a bare {target} needs a mesh: use "
                             f"NamedSharding(mesh, spec), or call inside `with mesh:`")
        target = mesh.NamedSharding(current, target)
    if isinstance(target, mesh.NamedSharding):
        return tree_util.tree_map(lambda leaf: put_named(leaf, target), x)
    raise TypeError(f"device_put: expected a device, a list of devices or a sharding, got "
                    f"{type(target).__name__}: {target!r}")


def to_device(x, device):
    """``x`` on ``device`` alone; an Array already on devices moves there device to device."""
    from funcgrad.lowering import array, reshard
    if reshard.can_reshard(x):
        return reshard.reshard(x, array.sharding_for(device))
    return array.device_put(x, device)


def replicate(x, devices):
    """``x`` on every one of ``devices``, with the same (unstacked) shape: replicated."""
    return shard_value(x, devices, None, "device_put")


__all__ = ["MappedSharding", "ShardedArray", "Shard", "mapped_sharding", "shard_value",
           "assemble", "put_named", "addressable", "addressable_indices", "process_part", "shard_buffers", "put_pieces", "host_value", "device_put_sharded", "device_put_replicated", "replicate"]
