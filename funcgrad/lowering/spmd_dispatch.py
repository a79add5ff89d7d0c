"""``jit`` over a mesh: the one SPMD call path of ``JitFunction`` (``dispatch.py``).

A call runs here when the jit was given ``in_shardings``/``out_shardings``, when an argument
leaf (a parameter inside a module or an optimizer counts) is an Array placed by a
``NamedSharding``, or when the trace of a plain jit holds shard_maps (``spmd.program_mesh``:
the program runs over their mesh, compiled from that trace). Each leaf takes the sharding
``in_shardings`` names for it (a pytree prefix of each positional argument), else the one it
has, else it is replicated over the mesh.
Outputs take ``out_shardings`` (a pytree prefix of the output, or one per output leaf) where
given, else the shardings XLA's propagation chose, read back from the compiled program
(``SpmdExecutable``, ``spmd_jit.py``). The trace is ``JitFunction``'s (static arguments,
donation, the state a module or optimizer writes, written back after the call), so a training
step written for one device runs unchanged on a mesh.

Eager calls: a call whose leaves are sharded Arrays (and Python scalars) with sharding objects
seen before is one flatten, one dictionary lookup (``call_fast``: the tree structure and, per
leaf, its ``layout_signature``, a number for its aval key and sharding object) and the launch; other calls resolve
each leaf's sharding, place what is laid out otherwise and fill that table. Under a
transformation a jit with shardings binds one ``jit`` equation whose body constrains its
arguments and results to those shardings (``bind``), so ``grad``, ``vmap``, control flow and
an enclosing ``jit`` keep them; run eagerly, such a body is compiled over the mesh
(``spmd_jit.constrained_program``).

Example:
    >>> from funcgrad.sharding import NamedSharding, P
    >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("data",))
    >>> x = funcgrad.device_put(np.ones((8, 2), np.float32), NamedSharding(mesh, P("data")))
    >>> y = funcgrad.jit(lambda a: a * 2.0)(x)
    >>> y.sharding.mesh == mesh, float(y.sum())
    (True, 32.0)
"""
from funcgrad import tree_util
from funcgrad.core.interpreters import Tracer
from funcgrad.core.jaxpr import consts_as_args
from funcgrad.core.primitive import current_policy
from funcgrad.core.values import aval_of
from funcgrad.lax.sharding import sharding_constraint_p
from funcgrad.lowering import dispatch, mlir, spmd
from funcgrad.lowering.mesh import NamedSharding
from funcgrad.lowering.sharding import ShardedArray, put_named, signature_of
from funcgrad.lowering.spmd_jit import SpmdExecutable, _replicated

_PY_SCALARS = (float, int, bool)
_donating = mlir.donating
_FAST_ENTRIES = 64    # fast-table entries per function (new sharding objects each call: bounded)


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


# --- eager calls -----------------------------------------------------------------------------
def call_fast(jitted, args, leaves, treedef):
    """An eager call without keyword or static arguments (``leaves``, ``treedef``: ``args``
    flattened): the launch, when the fast table knows these leaves; else the general path."""
    key, bufs = _fast_key(treedef, leaves)
    fast = jitted._caches.spmd_fast.get(key) if key is not None else None
    if fast is None:
        return jitted._call_slow(args, {})
    return _launch(jitted, fast[0], _with_scalars(fast, bufs), leaves)


_ONE_LEAF = tree_util.registry.flatten((0,))[1]     # the structure of ``(x,)``


def call_one(jitted, a):
    """An eager call whose one argument is the sharded Array ``a``: ``call_fast`` without the
    flatten and the loop (the time between one step's end and the next launch is what a
    program waiting on its devices' threads pays for most)."""
    buf = a._buf
    fast = jitted._caches.spmd_fast.get((_ONE_LEAF, signature_of(a)))
    if fast is None or (_donating[0] and buf.is_deleted()):
        args = (a,)
        return call_fast(jitted, args, [a], _ONE_LEAF)
    return _launch(jitted, fast[0], [buf], (a,))


def _fast_key(prefix, leaves):
    """(the fast table's key: ``prefix`` and, per leaf, its ``layout_signature`` (its aval key
    and sharding object), a Python scalar its type; the leaves' buffers and scalars), or
    (None, None) when a leaf is something else or a donated buffer."""
    key = [prefix]
    bufs = []
    add_key, add_buf = key.append, bufs.append     # (this loop runs once per leaf per call)
    donating = _donating[0]
    for leaf in leaves:
        t = type(leaf)
        if t is ShardedArray:
            buf = leaf._buf
            if donating and buf.is_deleted():   # the runtime would crash on a donated buffer
                return None, None               # the general path names it
            try:                # signature_of, inlined: this runs per leaf per call
                add_key(leaf._sig)
            except AttributeError:
                add_key(signature_of(leaf))
            add_buf(buf)
        elif t in _PY_SCALARS:
            add_key(t)
            add_buf(leaf)
        else:
            return None, None
    return tuple(key), bufs


def _with_scalars(fast, bufs):
    """The argument buffers of a fast-table hit, Python scalars replaced by their device copies
    (the record keeps each scalar's last object and copy: an optimizer's hyper-parameters are
    the same objects call after call, so the usual case is one identity test)."""
    entry, scalars, last = fast
    for j, i in enumerate(scalars):
        value = bufs[i]
        seen = last[j]
        if seen is not None and seen[0] is value:
            bufs[i] = seen[1]
        else:
            buf = bufs[i] = _scalar_buffer(value, entry.shardings[i])
            last[j] = (value, buf)
    return bufs


def _launch(jitted, entry, bufs, leaves):
    if entry.consts:
        bufs = entry.consts + bufs
    try:
        outs = entry.program(bufs)
    except Exception as exc:      # a deleted (donated) argument, a failed host callback
        dispatch._raise_if_deleted(jitted.__name__, leaves, exc)
        raise
    if entry.writeback:
        outs = dispatch.store_results(entry.writeback, outs)
    return entry.out_tree.unflatten(outs)


def call(jitted, args, kwargs, flat, traced=None):
    """Run ``jitted`` (a ``JitFunction``) eagerly over the mesh of its shardings or arguments,
    or (``traced``: the single-device trace of a plain jit holding shard_maps) of its
    shard_maps.

    ``flat``: ``(leaves, treedef, avals, static)``, the flattened dynamic arguments."""
    leaves, treedef, avals, static = flat
    table = jitted._caches.spmd_fast
    key = None
    if not dispatch._slow_only[0] and current_policy() is None:
        # keyed as call_fast keys it when the call has no keyword or static arguments
        prefix = treedef.children()[0] if not kwargs and not static else (treedef, static)
        key, bufs = _fast_key(prefix, leaves)
        fast = table.get(key) if key is not None else None
        if fast is not None:
            return _launch(jitted, fast[0], _with_scalars(fast, bufs), leaves)
    entry = _entry_for(jitted, args, kwargs, leaves, treedef, avals, static, traced)
    where = f"jit({jitted.__name__})"
    bufs, scalars, placed = [], [], True
    for leaf, s in zip(leaves, entry.shardings):
        t = type(leaf)
        if t in _PY_SCALARS:
            scalars.append(len(bufs))
            bufs.append(_scalar_buffer(leaf, s))
            continue
        if t is ShardedArray and leaf._buf.is_deleted():
            dispatch.raise_deleted(jitted.__name__, leaves)
        buf = put_named(leaf, s, where)._buf
        placed = placed and t is ShardedArray and buf is leaf._buf
        bufs.append(buf)
    out = _launch(jitted, entry, bufs, leaves)
    if key is not None and placed:
        # every argument was laid out as the program wants: later calls with these sharding
        # objects (their layout signatures) take the fast path
        if len(table) >= _FAST_ENTRIES:
            table.clear()
        table[key] = (entry, tuple(scalars), [None] * len(scalars))
    return out


def _entry_for(jitted, args, kwargs, leaves, treedef, avals, static, traced=None):
    """The compiled entry for a call, compiling on the first one; ``traced``: see ``call``
    (its trace is compiled, not traced again)."""
    shardings = _leaf_shardings(jitted, args, kwargs, leaves, treedef, avals,
                                traced.mesh if traced is not None else None)
    key = (treedef, avals, static, tuple(shardings), current_policy())
    cache = jitted._caches.spmd
    entry = cache.get(key)
    if entry is None:
        entry = cache[key] = _compile(jitted, args, kwargs, static, treedef, avals, shardings,
                                      traced)
    return entry


def _compile(jitted, args, kwargs, static, treedef, avals, shardings, traced=None):
    donated = jitted._donated_flags(args, kwargs) if jitted._donate_argnums else ()
    mesh = shardings[0].mesh if shardings else \
        traced.mesh if traced is not None else _mesh_of_outputs(jitted)
    traces = jitted._caches.spmd_traces
    trace_key = (treedef, avals, static, current_policy())
    if traced is not None:
        trace = traced.closed, traced.out_tree, traced.writeback
    else:
        trace = traces.get(trace_key) or jitted._trace(static, treedef, avals, donated)
        # the shard_maps it holds must run over the devices of the arguments' mesh; the
        # program runs over the shard_maps' (its outputs are laid out over it, as in JAX)
        given = mesh
        mesh = spmd.program_mesh(trace[0], jitted.__name__, given,
                                 lambda: _placed_on(jitted, args, kwargs, shardings, given))
    traces[trace_key] = trace
    closed, out_tree, writeback = trace
    outs = [None if s is None else _with_rank(s, a, _output_where(jitted, i))
            for i, (s, a) in enumerate(zip(_out_shardings(jitted, out_tree,
                                                          len(closed.out_avals)),
                                           closed.out_avals))]
    const_shardings = [_replicated(mesh).with_rank(v.aval.ndim) for v in closed.jaxpr.constvars]
    entry = _SpmdEntry()
    entry.program = SpmdExecutable(closed, mesh, const_shardings + list(shardings), outs,
                                   jitted.__name__, donated)
    entry.consts = [put_named(c, s)._buf for c, s in zip(closed.consts, const_shardings)]
    entry.out_tree, entry.writeback, entry.shardings = out_tree, writeback, shardings
    return entry


# --- under transformations -------------------------------------------------------------------
def bind(jitted, args, kwargs):
    """A jit with shardings called under a transformation: one ``jit`` equation whose body lays
    its arguments and results out as the shardings say (``with_sharding_constraint``)."""
    dyn_args, dyn_kwargs, static = jitted._split(args, kwargs)
    leaves, treedef = tree_util.registry.flatten((dyn_args, dyn_kwargs))
    avals = tuple(aval_of(leaf) for leaf in leaves)
    shardings = _leaf_shardings(jitted, args, kwargs, leaves, treedef, avals)
    key = (treedef, avals, static, tuple(shardings), current_policy())
    bodies = jitted._caches.spmd_bodies
    entry = bodies.get(key)
    if entry is None:
        closed, out_tree, writeback = jitted._trace(static, treedef, avals, (), shardings)
        entry = consts_as_args(closed) + (out_tree, writeback)
        if not any(isinstance(c, Tracer) for c in closed.consts):
            bodies[key] = entry
    body, consts, out_tree, writeback = entry
    outs = dispatch.jit_p.bind(*consts, *leaves, jaxpr=body, name=jitted.__name__,
                               donated=(False,) * (len(consts) + len(leaves)))
    if writeback:
        outs = dispatch._write_back(writeback, outs)
    return out_tree.unflatten(outs)


def constrain_arguments(leaves, shardings):
    """The traced argument leaves laid out as ``shardings`` say."""
    return [sharding_constraint_p.bind(x, sharding=s) for x, s in zip(leaves, shardings)]


def constrain_outputs(jitted, outs, out_tree):
    """The traced output leaves laid out as ``out_shardings`` says (None: left to XLA)."""
    specs = _out_shardings(jitted, out_tree, len(outs))
    return [o if s is None else sharding_constraint_p.bind(
        o, sharding=_with_rank(s, aval_of(o), _output_where(jitted, i)))
        for i, (o, s) in enumerate(zip(outs, specs))]


# --- shardings -------------------------------------------------------------------------------
def _leaf_shardings(jitted, args, kwargs, leaves, treedef, avals, default_mesh=None):
    """One ``NamedSharding`` (of the leaf's rank) per argument leaf, all over one mesh: the
    one ``in_shardings`` names, else the leaf's own, else replicated (over ``default_mesh``,
    the shard_maps' mesh, when nothing else names one)."""
    given = _given_in_shardings(jitted, treedef)
    chosen = [g if g is not None else mesh_sharding_of(leaf) for g, leaf in zip(given, leaves)]
    outs = [s for s in tree_util.tree_leaves(jitted._out_shardings, is_leaf=_is_sharding_leaf)
            if isinstance(s, NamedSharding)]
    meshes = {s.mesh for s in chosen if s is not None} | {s.mesh for s in outs}
    if not meshes and default_mesh is not None:
        meshes = {default_mesh}
    if len(meshes) != 1:
        _raise_mesh_error(jitted, args, kwargs, chosen, given, avals, outs)
    mesh = meshes.pop()
    out = []
    for i, (s, g, a) in enumerate(zip(chosen, given, avals)):
        if s is None:
            out.append(_replicated(mesh).with_rank(a.ndim))
        elif g is None:
            out.append(s.with_rank(a.ndim))
        else:
            try:
                s = s.with_rank(a.ndim)
                s.check_shape(a.shape, "")
            except ValueError:
                s = _with_rank(g, a, f"jit({jitted.__name__}): argument "
                                     f"{_leaf_name(jitted, args, kwargs, i)} of shape {a.shape} "
                                     f"({a.dtype})")
            out.append(s)
    return out


def _output_where(jitted, i):
    return f"jit({jitted.__name__}) output {i}"


def _with_rank(s, aval, where):
    """``s`` for a value of ``aval``'s rank, checked against its shape; errors say ``where``."""
    s = s.with_rank(aval.ndim, where)
    s.check_shape(aval.shape, where)
    return s


def _given_in_shardings(jitted, treedef):
    """Per leaf: the ``NamedSharding`` ``in_shardings`` names for it (a pytree prefix of each
    positional argument), or None."""
    given = jitted._in_shardings
    n = treedef.num_leaves
    if given is None:
        return [None] * n
    where = f"jit({jitted.__name__})"
    dyn_args, dyn_kwargs = treedef.children()
    if dyn_kwargs.num_leaves:
        raise ValueError(f"{where}: with in_shardings pass the arguments by position (got "
                         f"keyword arguments), as in JAX")
    if isinstance(given, NamedSharding):
        return [given] * n
    subtrees = dyn_args.children()
    if not isinstance(given, (tuple, list)) or len(given) != len(subtrees):
        raise ValueError(f"{where}: in_shardings must be a NamedSharding or a tuple with one "
                         f"entry per non-static positional argument ({len(subtrees)}), got "
                         f"{given!r}")
    out = []
    for i, (prefix, sub) in enumerate(zip(given, subtrees)):
        out += _broadcast_prefix(prefix, sub, f"{where}: in_shardings[{i}]")
    return out


def _out_shardings(jitted, out_tree, n_outs):
    """Per output leaf: the ``NamedSharding`` ``out_shardings`` names (a pytree prefix of the
    output, one per output, or one per output leaf), or None (XLA chooses); state written
    back (the outputs past the function's own) is left to XLA too."""
    given = jitted._out_shardings
    n = out_tree.num_leaves
    if isinstance(given, (tuple, list)) and len(given) == n and \
            all(_is_sharding_leaf(s) for s in given):
        specs = list(given)       # one per output leaf, whatever the output's structure
    elif isinstance(given, (tuple, list)) and not tree_util.treedef_is_leaf(out_tree) and \
            len(given) == len(out_tree.children()):
        specs = [s for prefix, sub in zip(given, out_tree.children()) for s in
                 _broadcast_prefix(prefix, sub, f"jit({jitted.__name__}): out_shardings")]
    else:
        specs = _broadcast_prefix(given, out_tree, f"jit({jitted.__name__}): out_shardings")
    return specs + [None] * (n_outs - n)


def _mesh_of_outputs(jitted):
    return next(s.mesh for s in tree_util.tree_leaves(jitted._out_shardings,
                                                      is_leaf=_is_sharding_leaf)
                if isinstance(s, NamedSharding))


def _is_sharding_leaf(s):
    return s is None or isinstance(s, NamedSharding)


def _broadcast_prefix(prefix, treedef, where):
    """Per leaf of the structure ``treedef``: the entry (a NamedSharding or None) of ``prefix``
    (a pytree prefix of it whose leaves are NamedShardings or None) covering it."""
    specs, spec_tree = tree_util.tree_flatten(prefix, is_leaf=_is_sharding_leaf)
    for s in specs:
        if not _is_sharding_leaf(s):
            raise TypeError(f"{where}: expected NamedShardings or None, got {s!r}")
    try:
        subtrees = spec_tree.flatten_up_to(treedef.unflatten(range(treedef.num_leaves)))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: the shardings' structure {spec_tree} is not a prefix of "
                         f"the value's structure {treedef} ({e})") from None
    out = []
    for s, sub in zip(specs, subtrees):
        out += [s] * len(tree_util.tree_leaves(sub))
    return out


def _raise_mesh_error(jitted, args, kwargs, chosen, given, avals, outs):
    where = f"jit({jitted.__name__})"
    if all(s is None for s in chosen) and not outs:
        raise ValueError(f"{where}: no mesh: give in_shardings or out_shardings "
                         f"(NamedShardings), or arguments placed with a NamedSharding")
    parts = []
    for i, (s, g, a) in enumerate(zip(chosen, given, avals)):
        if s is not None:
            how = "in_shardings" if g is not None else "its own sharding"
            parts.append(f"argument {_leaf_name(jitted, args, kwargs, i)} ({how}) of shape "
                         f"{a.shape} lies on {s.mesh} as {s.spec}")
    parts += [f"out_shardings lie on {s.mesh} as {s.spec}" for s in outs]
    first = parts[0]
    other = next(p for p, m in zip(parts, [s.mesh for s in chosen if s is not None] +
                                   [s.mesh for s in outs])
                 if m != ([s for s in chosen if s is not None] + outs)[0].mesh)
    raise ValueError(f"{where}: the arguments and out_shardings must lie on one mesh (a call "
                     f"runs on one mesh), but {first} and {other}. Move them onto one mesh "
                     f"with funcgrad.device_put(x, NamedSharding(mesh, spec))")


def _placed_on(jitted, args, kwargs, shardings, mesh):
    """Names of the argument leaves that ``shardings`` lays out over ``mesh`` otherwise than
    replicated (those an error about that mesh is about)."""
    return [_leaf_name(jitted, args, kwargs, i) for i, s in enumerate(shardings)
            if s.mesh == mesh and any(s.spec)] or ["every argument replicated"]


def _leaf_name(jitted, args, kwargs, i):
    paths = tree_util.tree_flatten_with_path(jitted._split(args, kwargs)[:2])[0]
    return _path_name(jitted, paths[i][0])


_scalar_buffers = {}      # (type, value, id(sharding)) -> (replicated buffer, sharding)


def _scalar_buffer(value, sharding):
    """A Python scalar argument (a learning rate) replicated on the mesh, cached by value (a
    float by its bits where equality would confuse them: 0.0 and -0.0, NaN) and by the
    sharding object, which the entry holds so that its id stays its own."""
    t = type(value)
    k = (t, value.hex() if t is float and (value == 0.0 or value != value) else value,
         id(sharding))
    hit = _scalar_buffers.get(k)
    if hit is None:
        if len(_scalar_buffers) >= 512:
            _scalar_buffers.clear()
        hit = _scalar_buffers[k] = (put_named(value, sharding)._buf, sharding)
    return hit[0]


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


def lower(jitted, args, kwargs, flat, traced=None):
    """``jit(f).lower(*args)`` over a mesh (shardings given, arguments placed over one, or
    shard_maps in the trace ``traced``): the program is compiled for the mesh (as the first
    call would), and ``LoweredOnMesh`` shows it."""
    leaves, treedef, avals, static = flat
    return LoweredOnMesh(jitted, _entry_for(jitted, args, kwargs, leaves, treedef, avals, static,
                                            traced))


class LoweredOnMesh:
    """``jit(f).lower(*args)`` over a mesh: ``as_text()`` is the StableHLO module with a
    sharding on each argument (Shardy's ``sdy.sharding``; ``mhlo.sharding`` for a program
    partitioned by GSPMD); ``compile()`` gives the partitioned program.

    Example:
        >>> from funcgrad.sharding import NamedSharding, P
        >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("data",))
        >>> x = funcgrad.device_put(np.ones((8, 2), np.float32), NamedSharding(mesh, P("data")))
        >>> lowered = funcgrad.jit(lambda a: a.sum()).lower(x)
        >>> "sdy.sharding" in lowered.as_text()
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
