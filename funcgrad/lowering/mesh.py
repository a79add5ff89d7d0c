"""Named device meshes and the shardings over them: ``Mesh``, ``PartitionSpec``,
``NamedSharding``.

A ``Mesh`` is an n-d NumPy array of devices whose axes have names (``('data', 'model')``). A
``PartitionSpec`` says, per dimension of an array, which mesh axes split it (``None``: not
split; a tuple of names: split over several axes, the first the major one); mesh axes a spec
does not name replicate the array. ``NamedSharding(mesh, spec)`` is one of jaxlib's C++
``GSPMDSharding``s (jaxlib's own ``NamedSharding`` needs the ``jax`` package), holding the
mesh's devices in row-major order and the XLA ``HloSharding`` the spec describes, so the
runtime's ``ArrayImpl`` keeps one buffer per device under it.

Example:
    >>> from funcgrad.sharding import Mesh, NamedSharding, PartitionSpec as P
    >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]).reshape(1, 1), ("x", "y"))
    >>> s = NamedSharding(mesh, P("x", None))
    >>> s.shard_shape((4, 6)), s.is_fully_replicated()
    ((4, 6), True)
"""
import math
import threading

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc


class PartitionSpec(tuple):
    """How each dimension of an array is split over mesh axes: an entry per leading dimension,
    each ``None`` (not split), a mesh axis name, or a tuple of names (split over their product,
    the first the major one). Dimensions past the spec's length are not split.

    Example:
        >>> funcgrad.sharding.P("data", None, ("x", "y"))
        PartitionSpec('data', None, ('x', 'y'))
    """

    __slots__ = ()

    def __new__(cls, *partitions):
        partitions = tuple(tuple(p) if isinstance(p, list) else p for p in partitions)
        for p in partitions:
            names = p if isinstance(p, tuple) else (p,)
            if p is not None and not all(isinstance(n, str) for n in names):
                raise TypeError(f"PartitionSpec: each entry must be None, a mesh axis name "
                                f"(str) or a tuple of names, got {p!r} in {partitions}")
        return super().__new__(cls, partitions)

    def axes_of(self, dim):
        """The mesh axis names splitting dimension ``dim`` (a tuple, empty if none)."""
        p = self[dim] if dim < len(self) else None
        return () if p is None else p if isinstance(p, tuple) else (p,)

    def __repr__(self):
        return f"PartitionSpec({', '.join(repr(p) for p in self)})"

    def __reduce__(self):
        return (PartitionSpec, tuple(self))


P = PartitionSpec

_mesh_stack = threading.local()


class Mesh:
    """``devices`` (an n-d NumPy array of devices, or nested lists) with a name per axis.

    ``with mesh:`` makes it the current mesh: there, a bare ``PartitionSpec`` given to
    ``funcgrad.device_put`` means ``NamedSharding(mesh, spec)``.

    Example:
        >>> devs = funcgrad.local_devices()
        >>> mesh = funcgrad.sharding.Mesh(np.array(devs[:1]).reshape(1, 1), ("data", "model"))
        >>> mesh
        Mesh('data': 1, 'model': 1)
        >>> mesh.shape, mesh.size, mesh.axis_names
        ({'data': 1, 'model': 1}, 1, ('data', 'model'))
    """

    def __init__(self, devices, axis_names):
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        axis_names = tuple(axis_names)
        devices = np.array(devices, dtype=object)
        if devices.size == 0:
            raise ValueError("Mesh: no devices given")
        if not all(isinstance(n, str) for n in axis_names):
            raise TypeError(f"Mesh: axis names must be str, got {axis_names}")
        if len(set(axis_names)) != len(axis_names):
            raise ValueError(f"Mesh: axis names {axis_names} repeat a name")
        if devices.ndim != len(axis_names):
            raise ValueError(f"Mesh: a device array of shape {devices.shape} needs "
                             f"{devices.ndim} axis names, got {len(axis_names)}: {axis_names}")
        flat = tuple(devices.flat)
        if len(set(flat)) != len(flat):
            raise ValueError(f"Mesh: devices repeat a device: {[d.id for d in flat]}")
        self.devices = devices
        self.axis_names = axis_names
        self._flat = flat
        self._device_list = _jax.DeviceList(flat)
        self._id = (axis_names, devices.shape, tuple(d.id for d in flat), flat[0].platform)
        self._hash = hash(self._id)

    @property
    def shape(self):
        """``{axis name: size}``, in mesh order."""
        return dict(zip(self.axis_names, self.devices.shape))

    @property
    def axis_sizes(self):
        return tuple(self.devices.shape)

    @property
    def size(self):
        return self.devices.size

    @property
    def device_ids(self):
        """The devices' ids, as an array of the mesh's shape."""
        return np.vectorize(lambda d: d.id, otypes=[int])(self.devices)

    @property
    def local_devices(self):
        """The mesh's devices that this process drives, in mesh order."""
        return [d for d in self._flat if d.process_index == d.client.process_index()]

    def _sdy_text(self, device_ids=None):
        """This mesh as a Shardy ``#sdy.mesh`` attribute (text); ``device_ids``: the program's
        device positions of its devices, when they are not in the program's order."""
        axes = ", ".join(f'"{n}"={s}' for n, s in zip(self.axis_names, self.axis_sizes))
        ids = "" if device_ids is None or list(device_ids) == list(range(self.size)) else \
            f", device_ids=[{', '.join(str(i) for i in device_ids)}]"
        return f"#sdy.mesh<[{axes}]{ids}>"

    def __eq__(self, other):
        return isinstance(other, Mesh) and (self is other or self._id == other._id)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Mesh({', '.join(f'{n!r}: {s}' for n, s in self.shape.items())})"

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False


def _stack():
    if not hasattr(_mesh_stack, "meshes"):
        _mesh_stack.meshes = []
    return _mesh_stack.meshes


def current_mesh():
    """The mesh of the innermost ``with mesh:`` block, or None."""
    meshes = _stack()
    return meshes[-1] if meshes else None


def make_mesh(axis_shapes, axis_names, devices=None):
    """A ``Mesh`` of shape ``axis_shapes`` over ``devices`` (default: every device of the run,
    ``funcgrad.devices()``, all processes' in a multi-process run, whose count must be the
    product of the shape), in device order.

    Example:
        >>> funcgrad.make_mesh((1,), ("data",))
        Mesh('data': 1)
    """
    from funcgrad.lowering import backend
    axis_shapes = tuple(int(s) for s in np.atleast_1d(axis_shapes))
    devices = list(devices) if devices is not None else backend.devices()
    if math.prod(axis_shapes) != len(devices):
        raise ValueError(f"make_mesh: a mesh of shape {axis_shapes} needs "
                         f"{math.prod(axis_shapes)} devices, but {len(devices)} are given")
    return Mesh(np.array(devices, dtype=object).reshape(axis_shapes), axis_names)


def check_spec(mesh, spec, where="NamedSharding"):
    """Raise if ``spec`` names an axis ``mesh`` lacks or names one axis twice."""
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{where}: expected a funcgrad.sharding.Mesh, got {type(mesh).__name__}")
    if not isinstance(spec, PartitionSpec):
        raise TypeError(f"{where}: expected a PartitionSpec (funcgrad.sharding.P), got "
                        f"{spec!r}")
    used = [n for d in range(len(spec)) for n in spec.axes_of(d)]
    for n in used:
        if n not in mesh.axis_names:
            raise ValueError(f"{where}: {spec} names axis {n!r}, which {mesh} does not have "
                             f"(its axes: {mesh.axis_names})")
    if len(set(used)) != len(used):
        raise ValueError(f"{where}: {spec} uses a mesh axis of {mesh} more than once")


def spec_hlo_sharding(mesh, spec, ndim):
    """The XLA ``HloSharding`` of an ``ndim``-d array laid out by ``spec`` over ``mesh``."""
    sizes = mesh.shape
    tiles = [math.prod(sizes[n] for n in spec.axes_of(d)) for d in range(ndim)]
    used = [n for d in range(ndim) for n in spec.axes_of(d)]
    rest = [n for n in mesh.axis_names if n not in used]
    replicas = math.prod(sizes[n] for n in rest)
    if math.prod(tiles) == 1:
        return xc.HloSharding.replicate()
    order = [mesh.axis_names.index(n) for n in used + rest]
    dims = tiles + ([replicas] if replicas > 1 else [])
    return xc.HloSharding.iota_tile(
        dims=dims, reshape_dims=list(mesh.axis_sizes), transpose_perm=order,
        subgroup_types=[xc.OpSharding.Type.REPLICATED] if replicas > 1 else [])


class NamedSharding(_jax.GSPMDSharding):
    """An array laid out over ``mesh`` as ``spec`` (a ``PartitionSpec``) says.

    Example:
        >>> from funcgrad.sharding import Mesh, NamedSharding, P
        >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]), ("data",))
        >>> NamedSharding(mesh, P("data"))
        NamedSharding(mesh=Mesh('data': 1), spec=PartitionSpec('data'))
    """

    def __init__(self, mesh, spec, *, _ndim=None):
        check_spec(mesh, spec)
        self.mesh, self.spec = mesh, spec
        self._ndim = len(spec) if _ndim is None else _ndim
        self._by_rank = {}
        # (mesh and spec never change: hashed once, since runtime calls hash it per argument)
        self._hash = hash((mesh, _normalized(spec)))
        super().__init__(mesh._device_list, spec_hlo_sharding(mesh, spec, self._ndim))

    def with_rank(self, ndim, where="device_put"):
        """This sharding for an ``ndim``-d array (the C++ sharding records the rank)."""
        if ndim < len(self.spec):
            raise ValueError(f"{where}: {self.spec} (over {self.mesh}) has {len(self.spec)} "
                             f"entries, more than the {ndim} dimensions of the array")
        if ndim == self._ndim:
            return self
        s = self._by_rank.get(ndim)
        if s is None:
            s = self._by_rank[ndim] = NamedSharding(self.mesh, self.spec, _ndim=ndim)
        return s

    @property
    def num_devices(self):
        return self.mesh.size

    @property
    def _device_assignment(self):
        return self.mesh._flat

    @property
    def device_set(self):
        return set(self.mesh._flat)

    @property
    def addressable_devices(self):
        """The devices of the mesh that this process drives."""
        return set(self.mesh.local_devices)

    @property
    def memory_kind(self):
        return None

    def _to_xla_hlo_sharding(self, ndim):
        return spec_hlo_sharding(self.mesh, self.spec, ndim)

    def _to_sdy_text(self, ndim, mesh_name="mesh"):
        """This layout of an ``ndim``-d array as a Shardy ``#sdy.sharding`` attribute (text)
        over the module's mesh named ``mesh_name``: every dimension closed."""
        dims = ", ".join("{" + ", ".join(f'"{a}"' for a in self.spec.axes_of(d)) + "}"
                         for d in range(ndim))
        return f"#sdy.sharding<@{mesh_name}, [{dims}]>"

    def is_fully_replicated(self):
        return all(self.mesh.shape[n] == 1 for d in range(len(self.spec))
                   for n in self.spec.axes_of(d))

    def is_fully_addressable(self):
        return len(self.mesh.local_devices) == self.mesh.size

    def _splits(self, shape, where):
        """Per dimension of ``shape``: into how many blocks it is split (checked to divide)."""
        self.with_rank(len(shape), where)
        splits = []
        for d, size in enumerate(shape):
            n = math.prod(self.mesh.shape[a] for a in self.spec.axes_of(d))
            if size % n:
                raise ValueError(f"{where}: dimension {d} of shape {tuple(shape)} (size {size}) "
                                 f"is not divisible by {n}, the size of mesh axes "
                                 f"{self.spec.axes_of(d)} of {self.mesh} that {self.spec} "
                                 f"splits it over")
            splits.append(n)
        return splits

    def check_shape(self, shape, where):
        """Raise, naming ``where``, if an array of ``shape`` cannot be laid out this way."""
        self._splits(shape, where)

    def shard_shape(self, shape):
        """The shape of each device's block of an array of ``shape``."""
        return tuple(s // n for s, n in zip(shape, self._splits(shape, "shard_shape")))

    def addressable_devices_indices_map(self, shape):
        """``devices_indices_map`` restricted to the devices this process drives."""
        mine = set(self.mesh.local_devices)
        return {d: i for d, i in self.devices_indices_map(shape).items() if d in mine}

    def devices_indices_map(self, shape):
        """``{device: tuple of slices}``: the block of an array of ``shape`` each device holds."""
        splits = self._splits(shape, "devices_indices_map")
        sizes = self.mesh.shape
        out = {}
        for coords in np.ndindex(*self.mesh.axis_sizes):
            at = dict(zip(self.mesh.axis_names, coords))
            index = []
            for d, (size, n) in enumerate(zip(shape, splits)):
                if n == 1:
                    index.append(slice(None))
                    continue
                block = 0
                for a in self.spec.axes_of(d):
                    block = block * sizes[a] + at[a]
                step = size // n
                index.append(slice(block * step, (block + 1) * step))
            out[self.mesh.devices[coords]] = tuple(index)
        return out

    def __eq__(self, other):
        return self is other or (isinstance(other, NamedSharding) and self.mesh == other.mesh
                                 and _normalized(self.spec) == _normalized(other.spec))

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"NamedSharding(mesh={self.mesh!r}, spec={self.spec!r})"


def named_sharding_from_hlo(mesh, hlo, ndim):
    """The ``NamedSharding`` over ``mesh`` of an ``ndim``-d array that XLA laid out as ``hlo``
    (an ``HloSharding``, e.g. read back from a compiled executable), or None when no
    ``PartitionSpec`` over ``mesh`` gives that layout."""
    if hlo.is_replicated():
        return NamedSharding(mesh, PartitionSpec(), _ndim=ndim)
    if not hlo.is_tiled():
        return None
    tiles = list(hlo.tile_assignment_dimensions())[:ndim]
    want = (list(hlo.tile_assignment_dimensions()), list(hlo.tile_assignment_devices()))
    sizes = mesh.shape
    # only axes longer than 1 split anything; try every ordered choice of them per dimension
    # whose sizes multiply to that dimension's tile count
    axes = [n for n in mesh.axis_names if sizes[n] > 1]

    def choices(d, free):
        if d == ndim:
            yield []
            return
        for group in _ordered_groups(free, tiles[d], sizes):
            rest = [n for n in free if n not in group]
            for tail in choices(d + 1, rest):
                yield [group] + tail

    for parts in choices(0, axes):
        spec = PartitionSpec(*[None if not g else g[0] if len(g) == 1 else tuple(g)
                               for g in parts])
        got = spec_hlo_sharding(mesh, spec, ndim)
        if got.is_tiled() and (list(got.tile_assignment_dimensions()),
                               list(got.tile_assignment_devices())) == want:
            return NamedSharding(mesh, PartitionSpec(*_normalized(spec)), _ndim=ndim)
    return None


def _ordered_groups(free, count, sizes):
    """Ordered tuples of distinct names from ``free`` whose sizes multiply to ``count``."""
    if count == 1:
        yield ()
        return
    for i, n in enumerate(free):
        if count % sizes[n] == 0:
            for rest in _ordered_groups(free[:i] + free[i + 1:], count // sizes[n], sizes):
                yield (n,) + rest


def _normalized(spec):
    """``spec`` without trailing Nones (they split nothing)."""
    parts = list(spec)
    while parts and parts[-1] is None:
        parts.pop()
    return tuple(parts)


__all__ = ["Mesh", "PartitionSpec", "P", "NamedSharding", "make_mesh", "current_mesh",
           "check_spec", "spec_hlo_sharding", "named_sharding_from_hlo"]
