"""Plain ``jit`` of arrays laid out over a mesh: the call is compiled for the mesh's devices by
XLA's SPMD partitioner.

``JitFunction`` (``dispatch.py``) sends a call here when an argument leaf (a parameter inside a
module or an optimizer counts) is an Array placed by a ``NamedSharding`` over a mesh,
or when the jit was given ``in_shardings``/``out_shardings`` together with options the
separate ``ShardedJitFunction`` does not take (static or donated arguments, modules). Each
leaf keeps the sharding it has (or the one ``in_shardings`` names); every other leaf is
replicated over the mesh. Outputs take ``out_shardings`` when given, else the shardings XLA's
propagation chose, read back from the compiled executable. The trace is the one
single-device ``jit`` makes (static arguments, donation, and the state a module or optimizer
writes, which is written back after the call), so a training step written for one device runs
unchanged on a mesh.

Example:
    >>> from funcgrad.sharding import NamedSharding, P
    >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("data",))
    >>> x = funcgrad.device_put(np.ones((8, 2), np.float32), NamedSharding(mesh, P("data")))
    >>> y = funcgrad.jit(lambda a: a * 2.0)(x)
    >>> y.sharding.mesh == mesh, float(y.sum())
    (True, 32.0)
"""
from funcgrad import tree_util
from funcgrad.core.primitive import current_policy
from funcgrad.core.values import aval_of
from funcgrad.lowering.mesh import NamedSharding
from funcgrad.lowering.sharding import ShardedArray, put_named
from funcgrad.lowering.spmd_jit import SpmdExecutable, _replicated

_PY_SCALARS = (float, int, bool)


def mesh_sharding_of(leaf):
    """The ``NamedSharding`` of ``leaf`` when it was placed over a mesh, else None."""
    if type(leaf) is ShardedArray:
        s = leaf._buf._sharding
        if isinstance(s, NamedSharding):
            return s
    return None


def routes_to_mesh(leaves):
    """Whether a plain ``jit`` call with these argument leaves runs over a mesh."""
    return ShardedArray in set(map(type, leaves)) and any(
        mesh_sharding_of(leaf) is not None for leaf in leaves)


class _SpmdEntry:
    __slots__ = ("program", "consts", "out_tree", "writeback", "shardings")


def call(jitted, args, kwargs, flat=None):
    """Run ``jitted`` (a ``JitFunction``) eagerly on the mesh its arguments lie on.

    ``flat``: ``(leaves, treedef, avals, static)`` when the caller already flattened."""
    if flat is None:
        dyn_args, dyn_kwargs, static = jitted._split(args, kwargs)
        leaves, treedef = tree_util.registry.flatten((dyn_args, dyn_kwargs))
        avals = tuple(aval_of(leaf) for leaf in leaves)
    else:
        leaves, treedef, avals, static = flat
    entry, shardings = _entry_for(jitted, args, kwargs, leaves, treedef, avals, static)
    bufs = list(entry.consts)
    for leaf, s in zip(leaves, shardings):
        t = type(leaf)
        if t is ShardedArray and leaf._buf._sharding is s:
            if leaf._buf.is_deleted():     # the runtime would crash on it, not raise
                _raise_deleted(jitted.__name__, leaves)
            bufs.append(leaf._buf)
        elif t in _PY_SCALARS:
            bufs.append(_scalar_buffer(leaf, s))
        else:
            bufs.append(put_named(leaf, s, f"jit({jitted.__name__})")._buf)
    from funcgrad.lowering import dispatch
    try:
        outs = entry.program(bufs)
    except Exception as exc:
        dispatch._raise_if_deleted(jitted.__name__, leaves, exc)
        raise
    if entry.writeback:
        outs = dispatch._write_back(entry.writeback, outs)
    return entry.out_tree.unflatten(outs)


def _entry_for(jitted, args, kwargs, leaves, treedef, avals, static):
    """(compiled entry, per-leaf shardings) for a call, compiling on the first one."""
    # Looked up first by the identity of each leaf's sharding object: a training step's
    # parameters come back with the executable's own output shardings, the same objects at
    # every call, so a repeated call skips building and comparing NamedShardings. The hit
    # holds those objects, so their ids cannot be reused while it lives.
    policy = current_policy()
    by_id = jitted._caches.spmd_by_id
    id_key = (treedef, static, policy, tuple([a.key for a in avals]),
              tuple([id(leaf._buf._sharding) if type(leaf) is ShardedArray else type(leaf)
                     for leaf in leaves]))
    hit = by_id.get(id_key)
    if hit is None:
        shardings = _leaf_shardings(jitted, args, kwargs, leaves, treedef, avals)
        key = (treedef, avals, static, tuple(shardings), policy)
        cache = jitted._caches.spmd
        entry = cache.get(key)
        if entry is None:
            entry = _compile(jitted, args, kwargs, static, treedef, avals, shardings)
            cache[key] = entry
        if len(by_id) >= 64:
            by_id.clear()
        hit = by_id[id_key] = (entry, shardings, [leaf._buf._sharding for leaf in leaves
                                                  if type(leaf) is ShardedArray])
    entry, shardings, _ = hit
    return entry, shardings


def _raise_deleted(name, leaves):
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, ShardedArray) and leaf._buf.is_deleted():
            raise RuntimeError(f"jit({name}): argument leaf {i} ({leaf.aval.str_short()}) was "
                               f"deleted (donated to an earlier jit call or deleted "
                               f"explicitly); pass a live array")


def _leaf_shardings(jitted, args, kwargs, leaves, treedef, avals):
    """One ``NamedSharding`` (of the leaf's rank) per argument leaf, all over one mesh."""
    where = f"jit({jitted.__name__})"
    given = _given_in_shardings(jitted, treedef, len(leaves))
    own = [mesh_sharding_of(leaf) for leaf in leaves]
    chosen = [g if g is not None else o for g, o in zip(given, own)]
    meshes = {s.mesh for s in chosen if s is not None}
    outs = jitted._out_shardings
    for s in (outs if isinstance(outs, (tuple, list)) else (outs,)):
        if isinstance(s, NamedSharding):
            meshes.add(s.mesh)
    if len(meshes) != 1:
        raise ValueError(f"{where}: the arguments lie on different meshes; a call runs on one "
                         f"mesh. Move them with funcgrad.device_put(x, NamedSharding(mesh, "
                         f"spec)) onto one mesh. Arguments: "
                         f"{_describe(args, kwargs, jitted, chosen, avals)}")
    mesh = meshes.pop()
    out = []
    for i, (s, g, a) in enumerate(zip(chosen, given, avals)):
        if s is None:
            out.append(_replicated(mesh).with_rank(a.ndim))
            continue
        s = s.with_rank(a.ndim, where)
        if g is not None:
            try:
                s.check_shape(a.shape, f"{where} argument leaf {i}")
            except ValueError as e:
                raise ValueError(f"{e} (in_shardings entry for "
                                 f"{_leaf_name(args, kwargs, jitted, i)})") from None
        out.append(s)
    return out


def _given_in_shardings(jitted, treedef, n):
    """Per leaf: the ``NamedSharding`` ``in_shardings`` names for it, or None."""
    given = jitted._in_shardings
    if given is None:
        return [None] * n
    where = f"jit({jitted.__name__})"
    dyn_args, dyn_kwargs = treedef.children()
    n_args = len(dyn_args.children())
    if dyn_kwargs.num_leaves:
        raise ValueError(f"{where}: with in_shardings pass the arguments by position (got "
                         f"keyword arguments), as in JAX")
    if isinstance(given, NamedSharding):
        return [given] * n
    if not isinstance(given, (tuple, list)) or len(given) != n_args:
        raise ValueError(f"{where}: in_shardings must be a NamedSharding or a tuple with one "
                         f"entry per non-static positional argument ({n_args}), got {given!r}")
    out = []
    for i, (sub, s) in enumerate(zip(dyn_args.children(), given)):
        if s is not None and not isinstance(s, NamedSharding):
            raise TypeError(f"{where}: in_shardings[{i}] must be a NamedSharding or None, got "
                            f"{s!r}")
        out.extend([s] * sub.num_leaves)
    return out


def _out_shardings(jitted, out_tree, n_outs):
    """Per output leaf: the ``NamedSharding`` ``out_shardings`` names, or None (XLA picks)."""
    given = jitted._out_shardings
    n = out_tree.num_leaves
    if given is None or isinstance(given, NamedSharding):
        per = [given] * n
    else:
        children = out_tree.children() if not tree_util.treedef_is_leaf(out_tree) else [out_tree]
        if not isinstance(given, (tuple, list)) or len(given) != len(children):
            raise ValueError(f"jit({jitted.__name__}): out_shardings must be a NamedSharding or "
                             f"a tuple with one entry per output ({len(children)}), got "
                             f"{given!r}")
        per = [s for s, sub in zip(given, children) for _ in range(sub.num_leaves)]
    return per + [None] * (n_outs - n)      # state written back: XLA picks


def _compile(jitted, args, kwargs, static, treedef, avals, shardings):
    donated = jitted._donated_flags(args, kwargs) if jitted._donate_argnums else ()
    closed, out_tree, writeback = jitted._trace(static, treedef, avals, donated)
    mesh = shardings[0].mesh
    outs = []
    for i, (s, a) in enumerate(zip(_out_shardings(jitted, out_tree, len(closed.out_avals)),
                                   closed.out_avals)):
        if s is not None:
            s = s.with_rank(a.ndim, f"jit({jitted.__name__}) output {i}")
            s.check_shape(a.shape, f"jit({jitted.__name__}) output {i}")
        outs.append(s)
    const_shardings = [_replicated(mesh).with_rank(v.aval.ndim) for v in closed.jaxpr.constvars]
    entry = _SpmdEntry()
    entry.program = SpmdExecutable(closed, mesh, const_shardings + list(shardings), outs,
                                   jitted.__name__, donated)
    entry.consts = [put_named(c, s)._buf for c, s in zip(closed.consts, const_shardings)]
    entry.out_tree, entry.writeback, entry.shardings = out_tree, writeback, shardings
    return entry


_scalar_buffers = {}      # (type, value, sharding) -> replicated buffer


def _scalar_buffer(value, sharding):
    """A Python scalar argument (a learning rate) replicated on the mesh, cached by value."""
    k = (type(value), value.hex() if type(value) is float else value, sharding)
    buf = _scalar_buffers.get(k)
    if buf is None:
        if len(_scalar_buffers) >= 512:
            _scalar_buffers.clear()
        buf = _scalar_buffers[k] = put_named(value, sharding)._buf
    return buf


def _leaf_name(args, kwargs, jitted, i):
    paths = tree_util.tree_flatten_with_path(jitted._split(args, kwargs)[:2])[0]
    return "argument " + _path_name(jitted, paths[i][0])


def _path_name(jitted, path):
    """``model.fc1.weight``-style name of an argument leaf, from its path in (args, kwargs)."""
    text = tree_util.keystr(path[1:])
    names = _positional_names(jitted)
    head = path[1] if len(path) > 1 else None
    index = getattr(head, "idx", None)
    if path and getattr(path[0], "idx", None) == 0 and index is not None and \
            index < len(names):
        return names[index] + tree_util.keystr(path[2:])
    return text or "?"


def _positional_names(jitted):
    import inspect
    try:
        params = inspect.signature(jitted._fun).parameters.values()
    except (TypeError, ValueError):
        return []
    static = set(jitted._static_argnums)
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [n for i, n in enumerate(names) if i not in static]


def _describe(args, kwargs, jitted, shardings, avals):
    paths = tree_util.tree_flatten_with_path(jitted._split(args, kwargs)[:2])[0]
    parts = []
    for (path, _), s, a in zip(paths, shardings, avals):
        if s is not None:
            parts.append(f"{_path_name(jitted, path)} {a.str_short()} on {s.mesh!r} "
                         f"({s.spec})")
    return "; ".join(parts)


def lower(jitted, args, kwargs, flat):
    """``jit(f).lower(*args)`` for arguments over a mesh: the program is compiled for the mesh
    (as the first call would), and ``LoweredOnMesh`` shows it."""
    leaves, treedef, avals, static = flat
    entry, shardings = _entry_for(jitted, args, kwargs, leaves, treedef, avals, static)
    return LoweredOnMesh(jitted, entry)


class LoweredOnMesh:
    """``jit(f).lower(*args)`` of arguments placed over a mesh: ``as_text()`` is the StableHLO
    module with an ``mhlo.sharding`` on each argument; ``compile()`` gives the partitioned
    program.

    Example:
        >>> from funcgrad.sharding import NamedSharding, P
        >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("data",))
        >>> x = funcgrad.device_put(np.ones((8, 2), np.float32), NamedSharding(mesh, P("data")))
        >>> lowered = funcgrad.jit(lambda a: a.sum()).lower(x)
        >>> "mhlo.sharding" in lowered.as_text()
        True
        >>> compiled = lowered.compile()
        >>> compiled.input_shardings[0].spec, compiled(x)
        (PartitionSpec('data'), Array(16., dtype=float32))
    """

    def __init__(self, jitted, entry):
        self._jitted, self._entry = jitted, entry

    def as_text(self):
        return self._entry.program.text

    def compile(self):
        return CompiledOnMesh(self._jitted, self._entry)


class CompiledOnMesh:
    """The partitioned program of ``LoweredOnMesh.compile()``: callable like the jitted
    function, with ``as_text()`` (the per-device HLO XLA compiled, with its collectives),
    ``cost_analysis()``, ``input_shardings`` and ``output_shardings`` (one per leaf)."""

    def __init__(self, jitted, entry):
        self._jitted, self._entry = jitted, entry

    def __call__(self, *args, **kwargs):
        return self._jitted(*args, **kwargs)

    def as_text(self):
        return self._entry.program.as_text()

    def cost_analysis(self):
        return self._entry.program.loaded.cost_analysis()

    @property
    def input_shardings(self):
        return list(self._entry.shardings)

    @property
    def output_shardings(self):
        program = self._entry.program
        return list(program.out_shardings[:len(program.out_shardings) -
                                          len(self._entry.writeback)])


__all__ = ["call", "lower", "routes_to_mesh", "mesh_sharding_of", "LoweredOnMesh",
           "CompiledOnMesh"]
