"""Global Arrays from each process's pieces: ``make_array_from_single_device_arrays``,
``make_array_from_callback`` and ``make_array_from_process_local_data``, as JAX's.

In a multi-process run an Array laid out by a sharding over every process's devices (a
``NamedSharding`` over a mesh of ``funcgrad.devices()``) is made by each process for its own
devices only: every process calls the same function with the same sharding and global shape,
and gives the blocks that its devices hold. The result is one global Array whose
``addressable_shards`` are this process's blocks; a sharded ``jit`` over that mesh takes it as
it is. In a one-process run these are ordinary ways to build a sharded Array.

Example:
    >>> from funcgrad.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = funcgrad.make_mesh((funcgrad.device_count(),), ("data",))
    >>> s = NamedSharding(mesh, P("data"))
    >>> x = funcgrad.make_array_from_process_local_data(s, np.arange(8.0).reshape(4, 2) * 0 + 1)
    >>> x.shape, float(x.sum())
    ((4, 2), 8.0)
"""
import math

import numpy as np

from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.lowering import backend
from funcgrad.lowering.array import Array, DeviceSharding, device_put
from funcgrad.lowering.mesh import NamedSharding
from funcgrad.lowering.sharding import (MappedSharding, addressable,
                                        addressable_indices, assemble)


def _with_rank(sharding, ndim, fn):
    if isinstance(sharding, NamedSharding):
        return sharding.with_rank(ndim, fn)
    if isinstance(sharding, (MappedSharding, DeviceSharding)):
        return sharding
    raise TypeError(f"{fn}: expected a NamedSharding, a MappedSharding or a "
                    f"SingleDeviceSharding, got {type(sharding).__name__}: {sharding!r}")


def _shape(shape, fn):
    try:
        return tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"{fn}: the shape must be a tuple of ints, got {shape!r}") from None


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """The global Array of ``shape`` laid out as ``sharding`` whose block on each of this
    process's devices is the one of ``arrays`` (single-device Arrays) on that device. Give one
    array per device of ``sharding`` that this process drives, each of the block's shape.

    Example:
        >>> from funcgrad.sharding import NamedSharding, PartitionSpec as P
        >>> mesh = funcgrad.make_mesh((funcgrad.device_count(),), ("data",))
        >>> s = NamedSharding(mesh, P("data"))
        >>> rows = len(mesh.local_devices)
        >>> parts = [funcgrad.device_put(np.full((1, 3), i, np.float32), d)
        ...          for i, d in enumerate(mesh.local_devices)]
        >>> x = funcgrad.make_array_from_single_device_arrays((rows, 3), s, parts)
        >>> x.shape == (rows, 3), np.asarray(x)[:, 0].tolist() == list(range(rows))
        (True, True)
        >>> x.addressable_shards[0].data
        Array([[0., 0., 0.]], dtype=float32)
    """
    fn = "make_array_from_single_device_arrays"
    shape = _shape(shape, fn)
    sharding = _with_rank(sharding, len(shape), fn)
    arrays = list(arrays)
    bad = [type(a).__name__ for a in arrays if type(a) is not Array]
    if bad:
        raise TypeError(f"{fn}: expected single-device funcgrad Arrays (funcgrad.device_put(x, "
                        f"device)), got {bad[0]}")
    if isinstance(sharding, NamedSharding):
        sharding.check_shape(shape, fn)
    wanted = addressable_indices(sharding, shape)
    by_device = {}
    for a in arrays:
        if a.device in by_device:
            raise ValueError(f"{fn}: two arrays lie on {a.device}; give one per device")
        by_device[a.device] = a
    if set(by_device) != {d for d, _, _ in wanted}:
        raise ValueError(f"{fn}: the arrays lie on devices {sorted(d.id for d in by_device)} "
                         f"but this process's devices of {sharding} are "
                         f"{[d.id for d, _, _ in wanted]}; give one array on each")
    block = wanted and tuple(len(range(*s.indices(n))) for s, n in zip(wanted[0][1], shape))
    for a in arrays:
        if a.shape != block:
            raise ValueError(f"{fn}: an array of shape {a.shape} on {a.device}, but each "
                             f"device's block of a {shape} array laid out as {sharding} has "
                             f"shape {block}")
    kinds = {a.dtype for a in arrays}
    if dtype is None:
        if len(kinds) != 1:
            raise ValueError(f"{fn}: the arrays have dtypes {sorted(map(str, kinds))}; give "
                             f"them one dtype")
        dtype = kinds.pop()
    elif kinds != {np.dtype(dtype)}:
        raise ValueError(f"{fn}: dtype={np.dtype(dtype)} but the arrays have dtypes "
                         f"{sorted(map(str, kinds))}")
    aval = ShapedArray(shape, dtypes.canonicalize(np.dtype(dtype)), False)
    if isinstance(sharding, DeviceSharding):
        return Array(aval, arrays[0]._buf)
    return assemble(aval, sharding, [by_device[d]._buf for d, _, _ in wanted])


def make_array_from_callback(shape, sharding, data_callback):
    """The global Array of ``shape`` laid out as ``sharding``, each block of this process's
    devices filled with ``data_callback(index)`` (``index``: the block's tuple of slices into
    the global array; the callback returns a NumPy value of the block's shape).

    Example:
        >>> from funcgrad.sharding import NamedSharding, PartitionSpec as P
        >>> mesh = funcgrad.make_mesh((funcgrad.device_count(),), ("data",))
        >>> whole = np.arange(12.0).reshape(mesh.size * 3, -1)
        >>> x = funcgrad.make_array_from_callback(whole.shape, NamedSharding(mesh, P("data")),
        ...                                       lambda index: whole[index])
        >>> np.array_equal(np.asarray(x), whole)
        True
    """
    fn = "make_array_from_callback"
    shape = _shape(shape, fn)
    sharding = _with_rank(sharding, len(shape), fn)
    if isinstance(sharding, NamedSharding):
        sharding.check_shape(shape, fn)
    parts = [device_put(np.asarray(data_callback(index)), device)
             for device, index, _ in addressable_indices(sharding, shape)]
    return make_array_from_single_device_arrays(shape, sharding, parts)


def _blocks(sharding, ndim):
    """Per dimension, into how many blocks ``sharding`` splits an ``ndim``-d array."""
    if isinstance(sharding, NamedSharding):
        return [math.prod(sharding.mesh.shape[a] for a in sharding.spec.axes_of(d))
                for d in range(ndim)]
    if isinstance(sharding, MappedSharding) and sharding.axis is not None:
        return [len(sharding._devices) if d == sharding.axis else 1 for d in range(ndim)]
    return [1] * ndim


def _local_blocks(sharding, blocks):
    """Per dimension, the sorted block numbers this process's devices hold."""
    mine = addressable(sharding._device_assignment)
    index = sharding.devices_indices_map(tuple(blocks))
    return [sorted({index[d][k].start or 0 for d in mine}) for k in range(len(blocks))]


def global_shape_of(sharding, local_shape):
    """The global shape whose blocks on this process's devices, put side by side, have shape
    ``local_shape`` (each process holding its own part of every split dimension)."""
    fn = "make_array_from_process_local_data"
    sharding = _with_rank(sharding, len(local_shape), fn)
    blocks = _blocks(sharding, len(local_shape))
    local = _local_blocks(sharding, blocks)
    out = []
    for k, (size, n, held) in enumerate(zip(local_shape, blocks, local)):
        if size % len(held):
            raise ValueError(f"{fn}: dimension {k} of the local data (shape {local_shape}) has "
                             f"{size} entries, not divisible by the {len(held)} blocks of it "
                             f"this process's devices hold under {sharding}")
        out.append(size // len(held) * n)
    return tuple(out)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """The global Array laid out as ``sharding`` made from this process's part of it.

    ``local_data`` (a NumPy value) holds the blocks of this process's devices side by side:
    along a dimension the sharding splits, the process's blocks in order (e.g. its share of
    the batch); along a dimension it does not split, or where ``global_shape`` equals the local
    size, the whole extent. ``global_shape`` defaults to the shape implied by every process
    holding an equal share. In a one-process run this is ``device_put(local_data, sharding)``.

    Example:
        >>> from funcgrad.sharding import NamedSharding, PartitionSpec as P
        >>> mesh = funcgrad.make_mesh((funcgrad.device_count(),), ("data",))
        >>> batch = np.ones((2 * len(mesh.local_devices), 5), np.float32)  # this process's rows
        >>> x = funcgrad.make_array_from_process_local_data(NamedSharding(mesh, P("data")), batch)
        >>> x.shape == (2 * funcgrad.device_count(), 5)
        True
    """
    fn = "make_array_from_process_local_data"
    data = np.asarray(local_data)
    sharding = _with_rank(sharding, data.ndim, fn)
    if global_shape is not None:
        global_shape = _shape(global_shape, fn)
        if len(global_shape) != data.ndim:
            raise ValueError(f"{fn}: global_shape {global_shape} has {len(global_shape)} "
                             f"dimensions, the local data (shape {data.shape}) {data.ndim}")
    if backend.distributed_runtime() is None or (
            isinstance(sharding, (NamedSharding, MappedSharding))
            and sharding.is_fully_addressable()):
        if global_shape is not None and global_shape != data.shape:
            raise ValueError(f"{fn}: every device of {sharding} is this process's, so the "
                             f"local data is the whole array: global_shape {global_shape} must "
                             f"be its shape {data.shape} (or None)")
        return make_array_from_callback(data.shape, sharding, lambda index: data[index])
    if global_shape is None:
        global_shape = global_shape_of(sharding, data.shape)
    blocks = _blocks(sharding, data.ndim)
    local = _local_blocks(sharding, blocks)
    full = []
    for k, (size, whole, n, held) in enumerate(zip(data.shape, global_shape, blocks, local)):
        full.append(size == whole)
        if size != whole and whole // n * len(held) != size:
            raise ValueError(f"{fn}: dimension {k} of the local data has {size} entries; it "
                             f"must be the global size {whole} or this process's share of it, "
                             f"{whole // n * len(held)} ({len(held)} of the {n} blocks of "
                             f"{sharding})")

    def local_part(index):
        out = []
        for k, s in enumerate(index):
            if full[k] or blocks[k] == 1:
                out.append(s)
                continue
            step = global_shape[k] // blocks[k]
            at = local[k].index((s.start or 0) // step) * step
            out.append(slice(at, at + step))
        return data[tuple(out)]

    return make_array_from_callback(global_shape, sharding, local_part)


__all__ = ["make_array_from_single_device_arrays", "make_array_from_callback",
           "make_array_from_process_local_data", "global_shape_of"]
