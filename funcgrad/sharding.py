"""Meshes and shardings, as ``jax.sharding``: ``Mesh``, ``PartitionSpec`` (``P``),
``NamedSharding``, ``SingleDeviceSharding``; ``funcgrad.make_mesh`` and
``funcgrad.device_put(x, sharding)`` place arrays by them (docs/parallel.md).

Example:
    >>> from funcgrad.sharding import NamedSharding, PartitionSpec as P
    >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("data",))
    >>> x = funcgrad.device_put(np.zeros((8, 2)), NamedSharding(mesh, P("data")))
    >>> x.sharding.spec, x.sharding.shard_shape(x.shape)[0] * mesh.size
    (PartitionSpec('data'), 8)
"""
from funcgrad.lowering.array import DeviceSharding as SingleDeviceSharding
from funcgrad.lowering.mesh import Mesh, NamedSharding, P, PartitionSpec, make_mesh
from funcgrad.lowering.sharding import MappedSharding, Shard
from funcgrad.lowering import spmd_jit  # noqa: F401  (with_sharding_constraint's eager rule)

__all__ = ["Mesh", "PartitionSpec", "P", "NamedSharding", "SingleDeviceSharding",
           "MappedSharding", "Shard", "make_mesh"]
