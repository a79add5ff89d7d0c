"""Placements of an activation along a plan's mesh axis, as ``torch.distributed.tensor``'s
``Shard(dim)`` and ``Replicate()``, and the sharding constraint one of them stands for.

funcgrad's arrays are always global (there is no local tensor), so a placement only says how
XLA should lay the value out: ``Shard(d)`` splits dimension ``d`` over the plan's axis,
``Replicate()`` splits nothing along it. The other mesh axes (the data axes of a 2-d mesh)
keep splitting dimension 0, the batch, so a constraint never undoes data parallelism.

Example:
    >>> from funcgrad.nn.parallel import Shard, Replicate
    >>> Shard(-1), Replicate(), Shard(1) == Shard(1)
    (Shard(dim=-1), Replicate(), True)
"""
import math

from funcgrad.sharding import NamedSharding, PartitionSpec


class Placement:
    """Base class of ``Shard`` and ``Replicate``."""

    __slots__ = ()


class Shard(Placement):
    """Dimension ``dim`` (negative counts from the end) split over the plan's mesh axis.

    Example:
        >>> funcgrad.nn.parallel.Shard(0).dim
        0
    """

    __slots__ = ("dim",)

    def __init__(self, dim):
        if not isinstance(dim, int):
            raise TypeError(f"Shard: dim must be an int, got {dim!r}")
        self.dim = dim

    def __eq__(self, other):
        return isinstance(other, Shard) and other.dim == self.dim

    def __hash__(self):
        return hash(("Shard", self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class Replicate(Placement):
    """Nothing split over the plan's mesh axis.

    Example:
        >>> funcgrad.nn.parallel.Replicate() == funcgrad.nn.parallel.Replicate()
        True
    """

    __slots__ = ()

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("Replicate")

    def __repr__(self):
        return "Replicate()"


def activation_sharding(mesh, axis, placement, shape, where):
    """The ``NamedSharding`` of an activation of ``shape`` placed as ``placement`` along mesh
    axis ``axis``; the mesh's other axes split dimension 0 when it divides."""
    if not isinstance(placement, Placement):
        raise TypeError(f"{where}: a layout must be Shard(dim) or Replicate(), got "
                        f"{placement!r}")
    ndim = len(shape)
    spec = [None] * ndim
    if isinstance(placement, Shard):
        d = placement.dim + ndim if placement.dim < 0 else placement.dim
        if not 0 <= d < ndim:
            raise ValueError(f"{where}: {placement} for an activation of shape {tuple(shape)}")
        spec[d] = axis
    others = tuple(n for n in mesh.axis_names if n != axis and mesh.shape[n] > 1)
    if others and ndim and spec[0] is None and shape[0] % math.prod(
            mesh.shape[n] for n in others) == 0:
        spec[0] = others if len(others) > 1 else others[0]
    return NamedSharding(mesh, PartitionSpec(*spec))


def constrain(x, mesh, axis, placement, where):
    """``x`` laid out as ``placement`` (``lax.with_sharding_constraint``)."""
    from funcgrad import lax
    return lax.with_sharding_constraint(
        x, activation_sharding(mesh, axis, placement, x.shape, where))


__all__ = ["Placement", "Shard", "Replicate", "activation_sharding", "constrain"]
