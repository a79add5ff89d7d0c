"""``shard_map``: write the per-device program yourself, over a mesh of devices.

``shard_map(f, mesh=mesh, in_specs=..., out_specs=...)(*args)`` calls ``f`` on each device's
**block** of the arguments (each dimension divided by the sizes of the mesh axes its
``PartitionSpec`` names); inside, ``lax.psum``/``pmean``/``all_gather``/``psum_scatter``/
``ppermute``/``all_to_all``/``axis_index`` work over the mesh's axis names. The outputs are
the devices' blocks put together as ``out_specs`` say (an output whose spec does not name a
mesh axis must be the same on every device along it). The staged function is one
``shard_map`` equation (``funcgrad.lowering.shard_map_primitive``), lowered to a manual region
of a program compiled by XLA's SPMD partitioner; see docs/parallel.md.
"""
import functools

from funcgrad import tree_util
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of
from funcgrad.lowering.mesh import Mesh, PartitionSpec, check_spec, current_mesh
from funcgrad.core.vma import vary
from funcgrad.lowering.shard_map_primitive import (block_aval, global_aval, manual_splits,
                                                   shard_map_p, spec_named, spec_unnamed,
                                                   stage_body)
from funcgrad.lowering.shard_map_replication import replicated_axes

P = PartitionSpec


def _is_spec(x):
    return x is None or isinstance(x, PartitionSpec)


def _spec_leaves(specs, tree, what, where):
    """One spec per leaf of ``tree`` from ``specs``, a pytree prefix of it whose leaves are
    PartitionSpecs (None: replicated)."""
    spec_leaves, spec_tree = tree_util.tree_flatten(specs, is_leaf=_is_spec)
    try:
        subtrees = spec_tree.flatten_up_to(tree)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: {what} {specs!r} is not a pytree prefix of the "
                         f"{'arguments' if what == 'in_specs' else 'outputs'} "
                         f"(structure {tree_util.tree_structure(tree)}): {exc}") from None
    out = []
    for s, sub in zip(spec_leaves, subtrees):
        if not _is_spec(s):
            raise TypeError(f"{where}: {what} entries must be PartitionSpecs "
                            f"(funcgrad.sharding.P), got {s!r}")
        out.extend([P() if s is None else s] * len(tree_util.tree_leaves(sub)))
    return out


def _labels(tree):
    return [tree_util.keystr(path) or "" for path, _ in tree_util.tree_leaves_with_path(tree)]


def _check_spec(mesh, spec, manual, shape, what, where):
    check_spec(mesh, spec, f"{where}: {what} spec {spec}")
    if len(spec) > len(shape):
        raise ValueError(f"{where}: {what} has spec {spec} with {len(spec)} entries, more "
                         f"than its {len(shape)} dimensions")
    for d in range(len(spec)):
        for a in spec.axes_of(d):
            if a not in manual:
                raise ValueError(f"{where}: {what} spec {spec} names mesh axis {a!r}, which "
                                 f"is not one of the manual axes {tuple(manual)} (axis_names=)")


class ShardMapFunction:
    """What ``shard_map`` returns; calling it binds one ``shard_map`` equation. The staged
    body is cached per argument structure, shapes and dtypes.

    Example:
        >>> from funcgrad.sharding import P
        >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("x",))
        >>> f = funcgrad.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("x"),
        ...                        out_specs=P("x"))
        >>> type(f).__name__, f.__name__, f(jnp.ones(funcgrad.local_device_count())).sum() > 0
        ('ShardMapFunction', '<lambda>', Array(True, dtype=bool))
    """

    def __init__(self, f, mesh, in_specs, out_specs, check_rep, manual):
        self.f, self.mesh = f, mesh
        self.in_specs, self.out_specs = in_specs, out_specs
        self.check_rep, self.manual = check_rep, manual
        self._traces = {}       # (argument tree, avals) -> what _trace returns
        self.__name__ = getattr(f, "__name__", type(f).__name__)
        self.__doc__ = getattr(f, "__doc__", None)
        functools.update_wrapper(self, f, updated=())

    def __call__(self, *args):
        where = f"shard_map({self.__name__})"
        mesh, manual = self.mesh, self.manual
        leaves, treedef = tree_util.tree_flatten(args)
        in_specs = _spec_leaves(self.in_specs, args, "in_specs", where)
        labels = [f"argument args{lab}" for lab in _labels(args)]
        avals = [aval_of(x) for x in leaves]
        for spec, aval, label in zip(in_specs, avals, labels):
            _check_spec(mesh, spec, manual, aval.shape, f"{label} of shape {aval.shape}", where)
            for d, n in enumerate(manual_splits(mesh, spec, manual, aval.ndim)):
                if aval.shape[d] % n:
                    raise ValueError(
                        f"{where}: {label} of shape {tuple(aval.shape)}: dimension {d} (size "
                        f"{aval.shape[d]}) is not divisible by {n}, the size of mesh axes "
                        f"{spec.axes_of(d)} of {mesh} that in spec {spec} splits it over")
        key = (treedef, tuple(avals))
        entry = self._traces.get(key)
        if entry is None:
            entry = self._trace(treedef, avals, in_specs, where)
            if not any(isinstance(c, Tracer) for c in entry[1]):
                self._traces[key] = entry
        body, consts, tree, out_specs = entry
        all_in = (P(),) * len(consts) + tuple(in_specs)
        outs = shard_map_p.bind(*consts, *leaves, jaxpr=body, mesh=mesh, in_specs=all_in,
                                out_specs=tuple(out_specs), manual_axes=manual,
                                check_rep=bool(self.check_rep), name=self.__name__)
        return tree_util.tree_unflatten(tree, list(outs))

    def _trace(self, treedef, avals, in_specs, where):
        """Stage the body for these blocks: (body, consts, output tree, out spec per leaf)."""
        mesh, manual, typed = self.mesh, self.manual, bool(self.check_rep)
        blocks = [block_aval(a, mesh, s, manual, typed) for a, s in zip(avals, in_specs)]
        out_tree = []

        def flat_body(*xs):
            out = self.f(*tree_util.tree_unflatten(treedef, xs))
            out_leaves, tree = tree_util.tree_flatten(out)
            out_tree.append((tree, out))
            if typed:   # an output stacked over an axis varies over it (as JAX types it)
                specs = _spec_leaves(self.out_specs, out, "out_specs", where)
                out_leaves = [vary(o, spec_named(s, manual)) if isinstance(s, P) else o
                              for o, s in zip(out_leaves, specs)]
            return out_leaves

        body, consts = stage_body(flat_body, blocks, mesh, manual, self.__name__, typed)
        tree, example = out_tree[0]
        out_specs = _spec_leaves(self.out_specs, example, "out_specs", where)
        out_labels = [f"output{lab}" for lab in _labels(example)]
        for spec, aval, label in zip(out_specs, body.out_avals, out_labels):
            _check_spec(mesh, spec, manual, aval.shape, f"{label} of block shape {aval.shape}",
                        where)
        if self.check_rep:
            self._check_replication(body, in_specs, out_specs, out_labels, where)
        return body, consts, tree, out_specs

    def _check_replication(self, body, in_specs, out_specs, out_labels, where):
        manual = self.manual
        n_consts = len(body.in_avals) - len(in_specs)
        in_reps = [frozenset(manual)] * n_consts + [frozenset(spec_unnamed(s, manual))
                                                     for s in in_specs]
        # an axis counts as replicated where the output's type does not vary over it, or
        # where its value is the same on every device anyway (all_gather's result, which
        # JAX types as varying)
        reps = replicated_axes(body.jaxpr, in_reps, manual)
        for spec, rep, aval, label in zip(out_specs, reps, body.out_avals, out_labels):
            missing = [a for a in spec_unnamed(spec, manual) if a not in rep and a in aval.vma]
            if missing:
                full = global_aval(aval, self.mesh, spec, manual)
                raise ValueError(
                    f"{where}: out_specs give {label} (global shape {full.shape}, block shape "
                    f"{aval.shape}) the spec {spec}, which claims it is the same on every "
                    f"device along mesh axes {tuple(missing)} of {self.mesh}, but the body's "
                    f"value varies over them. Name the axes in the spec (e.g. "
                    f"P({missing[0]!r})) to stack the blocks, reduce over them first "
                    f"(lax.psum / pmean / all_gather), or pass check_rep=False (check_vma=False) "
                    f"if you know the value is replicated")


def shard_map(f=None, mesh=None, in_specs=None, out_specs=None, check_rep=None, *,
              check_vma=None, axis_names=None, auto=None):
    """Map ``f`` over the blocks of its arguments on every device of ``mesh``: ``f`` sees
    each device's block (every dimension divided by the sizes of the mesh axes its
    ``PartitionSpec`` in ``in_specs`` names) and may use the collectives (``lax.psum``,
    ``pmean``, ``all_gather``, ``psum_scatter``, ``ppermute``, ``all_to_all``, ``axis_index``)
    over the mesh's axis names (one name or a tuple of them). ``out_specs`` says how the
    devices' output blocks form the results: a mesh axis an out spec does not name means the
    output is the same on every device along it, which ``check_rep`` (default True; JAX's newer
    name ``check_vma`` is accepted too) verifies when tracing: it types the body's values by
    the mesh axes they vary over (JAX 0.10's ``check_vma``; ``funcgrad.core.vma``), which also
    makes ``grad`` taken inside the body sum the devices' cotangents of replicated values
    (``pvary`` transposes to ``psum``, ``psum`` to ``pvary``). ``in_specs`` / ``out_specs`` are
    pytree prefixes of the arguments tuple / the outputs (a single ``P(...)`` applies to all).
    ``mesh`` defaults to the one of an enclosing ``with mesh:``; ``axis_names`` (a set of mesh
    axis names) makes only those axes manual, the others left to the partitioner (JAX's
    ``auto=`` gives the complement). Usable as a decorator (``@partial(shard_map, mesh=...)``
    or ``@shard_map(mesh=..., ...)``).

    Called eagerly it runs as one program over the mesh's devices (outputs are sharded
    Arrays laid out by ``out_specs``); under ``jit`` (with or without shardings), ``grad``,
    ``vmap`` and ``make_jaxpr`` it is one ``shard_map`` equation.

    Example:
        >>> from funcgrad.sharding import P
        >>> n = funcgrad.local_device_count()
        >>> mesh = funcgrad.make_mesh((n,), ("x",))
        >>> @funcgrad.shard_map(mesh=mesh, in_specs=P("x"), out_specs=(P("x"), P()))
        ... def normalize(block):
        ...     total = lax.psum(block.sum(), "x")
        ...     return block / total, total
        >>> y, total = normalize(jnp.arange(1.0, 4 * n + 1))
        >>> y.shape == (4 * n,), float(y.sum()), float(total) == 2 * n * (4 * n + 1)
        (True, 1.0, True)
        >>> y.sharding.spec, len(y.addressable_shards) == n
        (PartitionSpec('x'), True)
    """
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 check_rep=check_rep, check_vma=check_vma,
                                 axis_names=axis_names, auto=auto)
    name = getattr(f, "__name__", type(f).__name__)
    where = f"shard_map({name})"
    if not callable(f):
        raise TypeError(f"shard_map: expected a function, got {f!r}")
    if mesh is None:
        mesh = current_mesh()
        if mesh is None:
            raise ValueError(f"{where}: no mesh: pass mesh= (funcgrad.make_mesh(...)) or call "
                             f"it inside `with mesh:`")
    if not isinstance(mesh, Mesh):
        raise TypeError(f"{where}: mesh must be a funcgrad.sharding.Mesh, got {mesh!r}")
    if in_specs is None:
        raise TypeError(f"{where}: in_specs is required (a PartitionSpec, or a tuple of them "
                        f"with one per argument)")
    if out_specs is None:
        raise TypeError(f"{where}: out_specs is required (a PartitionSpec, or a pytree of "
                        f"them matching the outputs)")
    if check_rep is not None and check_vma is not None and bool(check_rep) != bool(check_vma):
        raise ValueError(f"{where}: check_rep={check_rep} and check_vma={check_vma} disagree "
                         f"(check_vma is JAX's newer name for check_rep); pass one")
    check = True if check_rep is None and check_vma is None else bool(
        check_rep if check_rep is not None else check_vma)
    manual = _manual_axes(mesh, axis_names, auto, where)
    return ShardMapFunction(f, mesh, in_specs, out_specs, check, manual)


def _manual_axes(mesh, axis_names, auto, where):
    if axis_names is not None and auto is not None:
        raise ValueError(f"{where}: pass axis_names= (the manual axes) or auto= (the others), "
                         f"not both")
    if axis_names is None and auto is None:
        return tuple(mesh.axis_names)
    given = axis_names if axis_names is not None else auto
    given = {given} if isinstance(given, str) else set(given)
    unknown = sorted(given - set(mesh.axis_names))
    if unknown:
        raise ValueError(f"{where}: {'axis_names' if axis_names is not None else 'auto'} "
                         f"names {unknown}, which {mesh} does not have (its axes: "
                         f"{mesh.axis_names})")
    if auto is not None:
        given = set(mesh.axis_names) - given
    if not given:
        raise ValueError(f"{where}: no mesh axis would be manual (axis_names={axis_names!r}, "
                         f"auto={auto!r})")
    return tuple(a for a in mesh.axis_names if a in given)


__all__ = ["shard_map", "ShardMapFunction"]
