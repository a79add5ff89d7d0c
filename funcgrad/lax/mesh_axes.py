"""The axis environment of a program partitioned over a device mesh (XLA's SPMD partitioner,
``num_partitions`` = the mesh's size), as the collectives' lowerings read it.

A lowering rule's ``ctx.axis_env`` is a tuple of ``(name, size)`` pairs: the named device axes
collectives may use there. In a ``pmap`` program (one replica per device) that is the pmap's
axis and the collectives address replicas. In a partitioned program it is a ``MeshAxisEnv``:
the same pairs for the mesh axes a ``shard_map`` made manual (none outside one), plus the
whole mesh's shape, so that a collective over some of its axes can name the **devices** (the
partition ids, i.e. the positions in the mesh's row-major device order) that take part in each
group, with a channel handle and ``use_global_device_ids`` as XLA expects of collectives
between partitions.

Example:
    >>> from funcgrad.lax.mesh_axes import MeshAxisEnv
    >>> env = MeshAxisEnv(("data", "model"), (2, 2), manual=("data", "model"))
    >>> env.device_groups(("model",)).tolist(), env.device_groups(("data",)).tolist()
    ([[0, 1], [2, 3]], [[0, 2], [1, 3]])
"""
import math

import numpy as np
from jaxlib import xla_client as xc
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import dtypes
from funcgrad.lax import _hlo

# Collectives between partitions need a channel id (> 0); the SPMD partitioner assigns its
# own, so every collective may carry the same one. Type 1 is DEVICE_TO_DEVICE.
_CHANNEL_ID, _DEVICE_TO_DEVICE = 1, 1


class MeshAxisEnv(tuple):
    """``ctx.axis_env`` of a partitioned program: ``(name, size)`` pairs of the ``manual``
    mesh axes, with the whole mesh's ``axis_names`` and ``axis_sizes`` and the ids of the
    program's devices in partition order (``device_ids``) as attributes."""

    def __new__(cls, axis_names, axis_sizes, manual=(), device_ids=None):
        sizes = dict(zip(axis_names, axis_sizes))
        self = super().__new__(cls, tuple((n, sizes[n]) for n in axis_names if n in manual))
        self.axis_names, self.axis_sizes = tuple(axis_names), tuple(axis_sizes)
        self.manual = frozenset(manual)
        self.device_ids = None if device_ids is None else tuple(device_ids)
        return self

    @classmethod
    def for_mesh(cls, mesh, manual=()):
        """The environment of a program partitioned over ``mesh``'s devices (a
        ``funcgrad.sharding.Mesh``), in its row-major device order."""
        return cls(mesh.axis_names, mesh.axis_sizes, manual,
                   [d.id for d in mesh.devices.flat])

    def with_manual(self, axis_names, axis_sizes, manual):
        """The environment inside a ``shard_map`` region over a mesh of these ``axis_names``
        and ``axis_sizes`` (on this program's devices, in this order) that makes ``manual``
        axes manual; axes already manual here stay so when the mesh is the same."""
        if (tuple(axis_names), tuple(axis_sizes)) == (self.axis_names, self.axis_sizes):
            manual = self.manual | frozenset(manual)
        return MeshAxisEnv(axis_names, axis_sizes, manual, self.device_ids)

    def device_groups(self, names):
        """The partition ids of each group of a collective over ``names``: one row per
        position along the other mesh axes, the members ordered by ``names`` (first major)."""
        ids = np.arange(math.prod(self.axis_sizes)).reshape(self.axis_sizes)
        axes = [self.axis_names.index(n) for n in names]
        rest = [i for i in range(len(self.axis_sizes)) if i not in axes]
        size = math.prod(self.axis_sizes[i] for i in axes)
        return ids.transpose(rest + axes).reshape(-1, size)

    def permute_pairs(self, names, perm):
        """``(source, target)`` partition ids of a ``ppermute`` over ``names`` (members
        numbered as in ``device_groups``), in every group."""
        return np.array([(row[s], row[d]) for row in self.device_groups(names)
                         for s, d in perm], np.int64).reshape(-1, 2)

    def manual_sharding(self, ndim):
        """The HLO sharding of an ``ndim``-d value inside the region: manual over the manual
        axes, replicated over the others (which the partitioner handles)."""
        if self.manual == frozenset(self.axis_names):
            return xc.HloSharding.manual()
        auto = [i for i, a in enumerate(self.axis_names) if a not in self.manual]
        man = [i for i, a in enumerate(self.axis_names) if a in self.manual]
        sizes = self.axis_sizes
        return xc.HloSharding.iota_tile(
            dims=[1] * ndim + [math.prod(sizes[i] for i in auto),
                               math.prod(sizes[i] for i in man)],
            reshape_dims=list(sizes), transpose_perm=auto + man,
            subgroup_types=[xc.OpSharding.Type.REPLICATED, xc.OpSharding.Type.MANUAL])

    def axis_index(self, names):
        """This partition's position along mesh axes ``names`` (the first major), an int32
        StableHLO value."""
        pid = stablehlo.PartitionIdOp().result
        idx, scale = None, 1
        for name in reversed(names):
            pos = self.axis_names.index(name)
            div = _hlo.constant(np.uint32(math.prod(self.axis_sizes[pos + 1:])), dtypes.uint32)
            mod = _hlo.constant(np.uint32(self.axis_sizes[pos]), dtypes.uint32)
            term = stablehlo.remainder(stablehlo.divide(pid, div), mod)
            if scale != 1:
                term = stablehlo.multiply(term, _hlo.constant(np.uint32(scale), dtypes.uint32))
            idx = term if idx is None else stablehlo.add(idx, term)
            scale *= self.axis_sizes[pos]
        idx = stablehlo.convert(_hlo.tensor_type((), dtypes.int32), idx)
        if self.manual == frozenset(self.axis_names):
            return idx
        # where some axes are left to the partitioner, partition_id means nothing to it: read
        # it in a region manual over every axis, handed back as a value of this region
        scalar = _hlo.tensor_type((), dtypes.int32)
        idx = spmd_custom_call("Sharding", idx, scalar, xc.HloSharding.manual())
        return spmd_custom_call("SPMDShardToFullShape", idx, scalar, self.manual_sharding(0))


def spmd_custom_call(target, x, result_type, sharding, free_dims=()):
    """``custom_call @target(x)`` with an ``mhlo.sharding`` (XLA's SPMD partitioner reads
    ``Sharding``, ``SPMDFullToShardShape`` and ``SPMDShardToFullShape``); ``free_dims``: the
    dimensions the automatic axes may still split (partial manual regions)."""
    op = stablehlo.CustomCallOp([result_type], [x], target)
    op.attributes["mhlo.sharding"] = ir.StringAttr.get(str(sharding))
    if free_dims:
        op.attributes["backend_config"] = ir.StringAttr.get(
            "unspecified_dims=[" + ",".join(map(str, free_dims)) + "]")
    return op.results[0]


def is_partitioned(axis_env):
    return isinstance(axis_env, MeshAxisEnv)


def groups_attr(groups):
    return ir.DenseElementsAttr.get(np.ascontiguousarray(groups, np.int64))


def channel_handle():
    return stablehlo.ChannelHandle.get(_CHANNEL_ID, _DEVICE_TO_DEVICE)


__all__ = ["MeshAxisEnv", "is_partitioned", "groups_attr", "channel_handle", "spmd_custom_call"]
