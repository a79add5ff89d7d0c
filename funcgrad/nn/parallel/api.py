"""``parallelize_module`` (tensor parallelism by a plan of styles, as
``torch.distributed.tensor.parallel.parallelize_module``) and ``fully_shard`` (every
parameter split over a data axis, as PyTorch's FSDP2 ``fully_shard``).

Both only place arrays: parameters get a ``NamedSharding`` over the mesh (``device_put``),
so the model's code is unchanged and a plain ``funcgrad.jit`` training step runs over the
mesh, partitioned by XLA (``docs/parallel.md``, "Tensor and fully sharded parallelism").

Example:
    >>> from funcgrad.sharding import Mesh
    >>> from funcgrad.nn.parallel import fully_shard
    >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]), ("data",))
    >>> model = fully_shard(nn.Linear(4, 2), mesh)
    >>> model.weight.sharding.mesh == mesh
    True
"""
import fnmatch
import math
import warnings

from funcgrad.nn.parallel.placement import Replicate, Shard
from funcgrad.nn.parallel.style import ParallelStyle, place_parameter
from funcgrad.sharding import NamedSharding, PartitionSpec
from funcgrad.lowering.mesh import current_mesh


def _mesh_and_axis(mesh, axis, where, default_first=False):
    if mesh is None:
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"{where}: no mesh given and none is current; pass "
                             f"funcgrad.make_mesh(...) or call inside `with mesh:`")
    names = mesh.axis_names
    if axis is None:
        if len(names) == 1 or default_first:
            axis = names[0]
        else:
            raise ValueError(f"{where}: {mesh!r} has several axes {names}; say which one the "
                             f"plan splits over with axis=")
    if axis not in names:
        raise ValueError(f"{where}: axis {axis!r} is not an axis of {mesh!r} (its axes: "
                         f"{names})")
    return mesh, axis


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, axis=None):
    """Apply a tensor-parallel plan to ``module`` over mesh axis ``axis`` of ``device_mesh``
    (default: the mesh's only axis) and return it.

    ``parallelize_plan`` is one ``ParallelStyle`` for ``module`` itself, or a dict from
    submodule paths to styles, where each dotted component may be an ``fnmatch`` pattern
    (``"layers.*.mlp.fc1"``) and ``""`` names ``module``. Parameters and buffers the plan
    does not place are replicated over the mesh, so every array of the model lies on it.

    Example:
        >>> from funcgrad.sharding import Mesh
        >>> from funcgrad.nn.parallel import ColwiseParallel, RowwiseParallel
        >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]), ("model",))
        >>> mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
        >>> mlp = funcgrad.nn.parallel.parallelize_module(
        ...     mlp, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        >>> mlp[0].weight.sharding.spec, mlp[2].weight.sharding.spec
        (PartitionSpec('model', None), PartitionSpec(None, 'model'))
    """
    where = "parallelize_module"
    mesh, axis = _mesh_and_axis(device_mesh, axis, where)
    if parallelize_plan is None:
        raise ValueError(f"{where}: give a parallelize_plan (a ParallelStyle or a dict from "
                         f"submodule names to styles)")
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan._apply(module, mesh, axis, f"{where}({type(module).__name__})")
    elif isinstance(parallelize_plan, dict):
        for path, style in parallelize_plan.items():
            if not isinstance(style, ParallelStyle):
                raise TypeError(f"{where}: the plan entry {path!r} must be a ParallelStyle, got "
                                f"{style!r}")
            matches = _matching(module, path)
            if not matches:
                warnings.warn(f"{where}: plan key {path!r} matches no submodule of "
                              f"{type(module).__name__}; the entry is skipped", stacklevel=2)
            for name, sub in matches:
                style._apply(sub, mesh, axis, f"{where}({name or type(module).__name__})")
    else:
        raise TypeError(f"{where}: parallelize_plan must be a ParallelStyle or a dict of "
                        f"them, got {type(parallelize_plan).__name__}")
    _replicate_rest(module, mesh)
    return module


def _matching(module, path):
    """(dotted name, submodule) pairs whose names match ``path`` component by component."""
    if path == "":
        return [("", module)]
    found = [("", module)]
    for token in path.split("."):
        found = [(f"{name}.{child}" if name else child, sub)
                 for name, mod in found for child, sub in mod.named_children()
                 if fnmatch.fnmatchcase(child, token)]
    return found


def _on_mesh(x, mesh):
    s = getattr(x, "sharding", None)
    return isinstance(s, NamedSharding) and s.mesh == mesh


def _replicate_rest(module, mesh):
    from funcgrad.lowering.array import device_put
    replicated = NamedSharding(mesh, PartitionSpec())
    for mod in module.modules():
        for name, box in mod._parameters.items():
            if box is not None and not _on_mesh(box.data, mesh):
                box.data = device_put(box.data, replicated)
        for name, buf in list(mod._buffers.items()):
            if buf is not None and not _on_mesh(buf, mesh):
                mod._buffers[name] = device_put(buf, replicated)


def fully_shard(module, mesh=None, *, axis=None, shard_placement_fn=None, ignored_params=None):
    """Split every parameter of ``module`` over mesh axis ``axis`` (default: the mesh's first
    axis, the data axis of a ``("data", "model")`` mesh), FSDP-style, and return ``module``.

    Each parameter is split along its largest dimension that the axis size divides (a
    parameter already split by a tensor-parallel plan on the same mesh keeps that split and
    gains this one); one with no such dimension stays replicated. ``shard_placement_fn(param)``
    may return ``Shard(dim)`` to choose the dimension instead (``Shard(0)`` everywhere is
    PyTorch's default), or None for the rule above; ``ignored_params`` (parameters, as
    ``model.parameters()`` gives them) are not split, only replicated over the mesh. XLA
    gathers each parameter where the jitted step uses it and sums its gradient into each
    device's block, so the model's code and the training step are unchanged. Buffers are
    replicated over the mesh.

    Example:
        >>> from funcgrad.sharding import Mesh
        >>> from funcgrad.nn.parallel import Shard
        >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]), ("data",))
        >>> model = funcgrad.nn.parallel.fully_shard(nn.Linear(3, 8), mesh)
        >>> model.weight.sharding.spec, model.bias.sharding.spec
        (PartitionSpec('data', None), PartitionSpec('data'))
        >>> model = funcgrad.nn.parallel.fully_shard(
        ...     nn.Linear(8, 4), mesh, shard_placement_fn=lambda p: Shard(p.ndim - 1))
        >>> model.weight.sharding.spec, model.bias.sharding.spec
        (PartitionSpec(None, 'data'), PartitionSpec('data'))
    """
    where = "fully_shard"
    mesh, axis = _mesh_and_axis(mesh, axis, where, default_first=True)
    ignored = {id(p) for p in (ignored_params or ())}
    for mod in module.modules():
        for name, box in mod._parameters.items():
            if box is None or id(box) in ignored:
                continue
            chosen = shard_placement_fn(box) if shard_placement_fn is not None else None
            if chosen is not None and not isinstance(chosen, Shard):
                raise TypeError(f"{where}: shard_placement_fn must return Shard(dim) or None, "
                                f"got {chosen!r} for parameter {name!r} of "
                                f"{type(mod).__name__}")
            dim = None
            if chosen is not None:
                dim = chosen.dim + box.ndim if chosen.dim < 0 else chosen.dim
                if not 0 <= dim < box.ndim:
                    raise ValueError(f"{where}: shard_placement_fn gave {chosen} for parameter "
                                     f"{name!r} of {type(mod).__name__}, of shape "
                                     f"{box.shape}")
            spec = fsdp_spec(box.data, mesh, axis, dim)
            place_parameter(mod, name, mesh, spec, where)
    _replicate_rest(module, mesh)
    return module


def fsdp_spec(x, mesh, axis, dim=None):
    """The ``PartitionSpec`` that adds ``axis`` to ``x``'s current split on ``mesh`` along
    ``dim``, or (None) along the largest dimension it divides (the current spec unchanged when
    none does, or when ``axis`` already splits ``x``)."""
    shape = tuple(x.shape)
    current = _current_axes(x, mesh)
    if any(axis in axes for axes in current):
        return _spec(current)
    if dim is None:
        best = None
        for d, size in enumerate(shape):
            split = math.prod(mesh.shape[n] for n in current[d]) * mesh.shape[axis]
            if size % split == 0 and (best is None or size // split > best[1]):
                best = (d, size // split)
        if best is None:
            return _spec(current)
        dim = best[0]
    current[dim] = current[dim] + (axis,)
    return _spec(current)


def _current_axes(x, mesh):
    """Per dimension of ``x``: the tuple of ``mesh``'s axes splitting it now."""
    s = getattr(x, "sharding", None)
    spec = s.spec if isinstance(s, NamedSharding) and s.mesh == mesh else PartitionSpec()
    return [spec.axes_of(d) for d in range(len(x.shape))]


def _spec(axes):
    return PartitionSpec(*[None if not a else a[0] if len(a) == 1 else a for a in axes])


def distribute_tensor(tensor, device_mesh=None, placements=None):
    """``tensor`` placed over ``device_mesh`` as PyTorch's ``distribute_tensor`` does: one
    placement per mesh axis, ``Shard(dim)`` (that axis splits dimension ``dim``; several axes
    on one dimension split it in mesh order, the first the major) or ``Replicate()`` (the
    default for every axis). Returns the sharded Array (funcgrad's arrays are global, so it
    plays the part of a DTensor).

    Example:
        >>> from funcgrad.sharding import Mesh
        >>> from funcgrad.nn.parallel import Replicate, Shard, distribute_tensor
        >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]).reshape(1, 1), ("dp", "tp"))
        >>> x = distribute_tensor(jnp.ones((4, 6)), mesh, [Replicate(), Shard(1)])
        >>> x.sharding.spec
        PartitionSpec(None, 'tp')
    """
    from funcgrad.lowering.array import device_put
    where = "distribute_tensor"
    mesh, _ = _mesh_and_axis(device_mesh, None, where, default_first=True)
    placements = list(placements) if placements is not None else \
        [Replicate()] * len(mesh.axis_names)
    if len(placements) != len(mesh.axis_names):
        raise ValueError(f"{where}: {mesh!r} has {len(mesh.axis_names)} axes, so give one "
                         f"placement per axis; got {placements}")
    ndim = len(tensor.shape)
    axes = [()] * ndim
    for name, p in zip(mesh.axis_names, placements):
        if isinstance(p, Shard):
            d = p.dim + ndim if p.dim < 0 else p.dim
            if not 0 <= d < ndim:
                raise ValueError(f"{where}: {p} for a tensor of shape {tuple(tensor.shape)}")
            axes[d] = axes[d] + (name,)
        elif not isinstance(p, Replicate):
            raise TypeError(f"{where}: placements must be Shard(dim) or Replicate(), got {p!r}")
    return device_put(tensor, NamedSharding(mesh, _spec(axes)))


__all__ = ["parallelize_module", "fully_shard", "fsdp_spec", "distribute_tensor"]
