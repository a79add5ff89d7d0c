"""Dispatch of jitted functions: trace once per input signature, compile with XLA, cache, and
call fast.

``JitFunction`` is what ``funcgrad.jit`` returns (``funcgrad.transforms.jit`` is the user API):
its caches and the fast paths of ``__call__`` keep a call of a compiled function to a lookup, a
flatten and the execute. Under another transformation a jitted function binds the ``jit``
primitive, whose params carry the staged Jaxpr, so every transformation sees one equation it
knows how to transform; its rules (impl, lowering, batch, jvp, transpose, dce) are here too.
Single operations run eagerly are dispatched by ``lowering/eager.py``.

Example:
    >>> from funcgrad.lowering.dispatch import JitFunction
    >>> f = JitFunction(lambda x: x * 2.0)
    >>> f(jnp.ones(2)), f.trace_count
    (Array([2., 2.], dtype=float32), 1)
    >>> f(jnp.zeros(2)), f.trace_count       # same signature: no new trace
    (Array([0., 0.], dtype=float32), 1)
"""
import functools
import inspect
import weakref

from jaxlib import _profiler

from funcgrad import tree_util
from funcgrad.core import batching, batching_util, interpreters, mutable_state
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.jaxpr import ClosedJaxpr, consts_as_args, eval_jaxpr
from funcgrad.core.interpreters import Tracer
from funcgrad.core.interpreters import _current as _current_var
from funcgrad.core.primitive import Primitive, current_policy, policies_open
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax.callbacks import reraise_host_error
from funcgrad.lowering import backend, mlir, nan_checks, spmd, spmd_dispatch, spmd_jit
from funcgrad.config import config
from funcgrad.lowering import array as _array_mod
from funcgrad.lowering.array import Array, sharding_for
from funcgrad.lowering.executable import compile_closed_jaxpr, to_buffer
from funcgrad.lowering.sharding import ShardedArray

_current_interp = _current_var.get   # None when the eager (root) interpreter is current
_entered = interpreters.entered
_new_array = Array.__new__            # builds an Array without an __init__ call (hot path)

# --- the jit primitive ---------------------------------------------------------------------
jit_p = Primitive("jit", multiple_results=True)
jit_p.def_abstract_eval(lambda *avals, jaxpr, name, donated: list(jaxpr.out_avals))

_compiled_jaxprs = weakref.WeakKeyDictionary()   # ClosedJaxpr -> {device: Executable}


def _executable_for(closed, device, name, donated):
    per_device = _compiled_jaxprs.get(closed)
    if per_device is None:
        per_device = _compiled_jaxprs[closed] = {}
    exe = per_device.get((device, donated))
    if exe is None:
        compile_ = spmd.split_program if spmd.runs_in_pieces(closed) else compile_closed_jaxpr
        exe = per_device[(device, donated)] = compile_(closed, device, name, donated)
    return exe


def _device_of(args):
    for a in args:
        if type(a) is Array:
            return a.device
    return backend.default_device()


@jit_p.def_impl
def _jit_impl(*args, jaxpr, name, donated):
    # a body laying values out over a mesh (a sharded jit under a transformation) runs there
    run = spmd_jit.constrained_program(jaxpr, name)
    if run is not None:
        return run(list(args))
    # a body holding shard_maps runs as one program over their mesh (a plain jit of it)
    program = _mesh_body_program(jaxpr, name)
    if program is not None:
        return program(*args)
    device = _device_of(args)
    exe = _executable_for(jaxpr, device, name, donated if any(donated) else ())
    return exe(list(jaxpr.consts) + list(args))


_mesh_bodies = weakref.WeakKeyDictionary()   # jit body -> JitFunction over its mesh, or None


def _mesh_body_program(closed, name):
    """For the body of a ``jit`` equation run eagerly (``grad(jit(f))`` called eagerly): when
    it holds shard_maps, a plain ``jit`` of it, which runs over their mesh; else None."""
    try:
        return _mesh_bodies[closed]
    except KeyError:
        pass
    program = None
    if spmd.program_mesh(closed, name) is not None:
        jaxpr, consts = closed.jaxpr, closed.consts    # (not ``closed``: the key stays weak)

        def body(*args):
            return eval_jaxpr(jaxpr, consts, *args)
        body.__name__ = name
        program = JitFunction(body)
    _mesh_bodies[closed] = program
    return program


def _jit_lowering(ctx, *args, jaxpr, name, donated):
    return ctx.lower_jaxpr(jaxpr, [], args)


jit_p.def_lowering(_jit_lowering)
# a nested jit holding shard_maps runs over their mesh with the jit around it (spmd.meshes_in)
jit_p.def_rule("program_mesh", lambda eqn: spmd.meshes_in(eqn.params["jaxpr"]))


# --- jit ---------------------------------------------------------------------------------
def _normalize_static(fun, static_argnums, static_argnames):
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    static_argnums = tuple(static_argnums or ())
    static_argnames = tuple(static_argnames or ())
    if not static_argnums and not static_argnames:
        return (), ()
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return static_argnums, static_argnames
    params = list(sig.parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = set(static_argnames)
    nums = set(static_argnums)
    for i in static_argnums:
        if 0 <= i < len(positional):
            names.add(positional[i])
    for n in static_argnames:
        if n in positional:
            nums.add(positional.index(n))
    return tuple(sorted(nums)), tuple(sorted(names))


def _callable_name(fun):
    """A name for messages and debug info: ``__name__``, else that of a partial's function,
    else the callable's type."""
    name = getattr(fun, "__name__", None)
    if isinstance(name, str):
        return name
    if isinstance(fun, functools.partial):
        return _callable_name(fun.func)
    return type(fun).__name__


class _Caches:
    """The traces and compiled entries of one wrapped function under one set of jit options,
    shared by every ``jit(f)`` of that function (``_caches_for``)."""

    __slots__ = ("cache", "fast", "fast_sole", "fast_tree", "spmd", "spmd_bodies", "spmd_fast",
                 "spmd_traces", "traces")

    def __init__(self):
        self.cache = {}
        self.fast = {}      # (aval keys of Array args..., sharding) -> compiled _CacheEntry
        self.fast_sole = {}    # one-device process, one Array argument: aval key -> entry.fast
        # pytree arguments whose leaves are all Arrays on one device (lists/dicts of params,
        # modules): (treedef, leaf aval keys..., sharding) -> compiled _CacheEntry
        self.fast_tree = {}
        self.spmd = {}      # calls over a mesh (spmd_dispatch.py): key -> compiled entry
        self.spmd_bodies = {}   # the same under transformations: key -> constrained body
        # eager calls over a mesh: (tree, leaf aval keys and ids of sharding objects) -> entry
        self.spmd_fast = {}
        # the traces mesh calls compiled: (tree, avals, static, policy) -> (closed, out tree,
        # write-back), so that arguments laid out otherwise compile again without a retrace
        self.spmd_traces = {}
        self.traces = 0

    def clear(self):
        self.cache.clear()
        self.spmd.clear()
        self.spmd_bodies.clear()
        self.spmd_traces.clear()
        self.clear_fast()

    def clear_fast(self):
        for entry in self.cache.values():
            entry.single = None       # so that _call_slow fills the fast tables again
        self.fast.clear()
        self.fast_sole.clear()
        self.fast_tree.clear()
        self.spmd_fast.clear()


# The caches live with the wrapped function, as JAX keys its cache: inline ``jit(f)(x)``,
# ``jit(f).lower(x)`` and a re-run notebook cell trace once, and the entries die with ``f``.
# A callable that cannot be weakly referenced or hashed gets caches of its own.
_shared_caches = weakref.WeakKeyDictionary()   # function -> {jit options: _Caches}


def _caches_for(fun, options):
    try:
        per_fun = _shared_caches.get(fun)
        if per_fun is None:
            per_fun = _shared_caches[fun] = {}
    except TypeError:
        return _Caches()
    caches = per_fun.get(options)
    if caches is None:
        caches = per_fun[options] = _Caches()
    return caches


class _CacheEntry:
    __slots__ = ("closed", "out_tree", "exe", "consts_bufs", "out_avals", "handlers", "bindable",
                 "writeback", "single", "execute", "handlers_out", "fast", "mesh")


_MESH_UNKNOWN = object()     # _CacheEntry.mesh before the trace's shard_maps were looked at


class Lowered:
    """The result of ``jit(f).lower(*args)``: StableHLO text and a way to compile it."""

    def __init__(self, jitted, closed, device, donated, signature=None):
        self._jitted, self.jaxpr, self._device, self._donated = jitted, closed, device, donated
        self._signature = signature     # (treedef, weak-stripped avals, static args)

    def as_text(self):
        """The StableHLO module, as text.

        Example:
            >>> print(funcgrad.jit(jnp.sin).lower(jnp.ones(2)).as_text())
            module @funcgrad_sin {
              func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
                %0 = stablehlo.sine %arg0 : tensor<2xf32>
                return %0 : tensor<2xf32>
              }
            }
        """
        module, ctx = mlir.lower_closed_jaxpr(self.jaxpr, name=self._jitted.__name__,
                                              platform=backend.platform_of(self._device),
                                              donated=self._donated, host_callbacks=[])
        with ctx:
            return str(module)

    def compile(self):
        """Compile for the device; returns a ``Compiled`` (callable like the jitted function
        with arguments of the lowered signature, with ``cost_analysis()``,
        ``memory_analysis()`` and ``as_text()``)."""
        exe = _executable_for(self.jaxpr, self._device, self._jitted.__name__, self._donated)
        return Compiled(self._jitted, self._signature, exe)


class Compiled:
    """A function compiled for one signature (``jit(f).lower(*args).compile()``).

    Example:
        >>> compiled = funcgrad.jit(lambda x, y: x @ y).lower(jnp.ones((2, 3)),
        ...                                                     jnp.ones((3, 2))).compile()
        >>> compiled(jnp.ones((2, 3)), jnp.full((3, 2), 2.0))
        Array([[6., 6.],
               [6., 6.]], dtype=float32)
        >>> compiled.cost_analysis()["flops"], compiled.memory_analysis().output_size_in_bytes
        (24.0, 16)
    """

    def __init__(self, jitted, signature, executable):
        self._jitted, self._signature, self.executable = jitted, signature, executable

    def __call__(self, *args, **kwargs):
        dyn_args, dyn_kwargs, static = self._jitted._split(args, kwargs)
        leaves, treedef = tree_util.registry.flatten((dyn_args, dyn_kwargs))
        avals = tuple(aval_of(leaf).strip_weak() for leaf in leaves)
        if (treedef, avals, static) != self._signature:
            want = ", ".join(a.str_short() for a in self._signature[1])
            got = ", ".join(a.str_short() for a in avals)
            raise TypeError(f"jit({self._jitted.__name__}).lower(...).compile(): compiled for "
                            f"arguments ({want}), called with ({got}); lower again for "
                            f"these arguments")
        return self._jitted(*args, **kwargs)

    def cost_analysis(self):
        """XLA's cost estimates (``Executable.cost_analysis``)."""
        return self.executable.cost_analysis()

    def memory_analysis(self):
        """XLA's buffer sizes (``Executable.memory_analysis``)."""
        return self.executable.memory_analysis()

    def as_text(self):
        """The optimized HLO module that XLA compiled."""
        return self.executable.as_text()


class JitFunction:
    """A function compiled by XLA on first call for each input signature.

    Example:
        >>> f = funcgrad.jit(lambda x, y: x @ y + 1.0)
        >>> f(jnp.ones((2, 3)), jnp.ones((3, 4))).shape
        (2, 4)
    """

    def __init__(self, fun, static_argnums=(), static_argnames=(), donate_argnums=(),
                 in_shardings=None, out_shardings=None):
        if not callable(fun):
            raise TypeError(f"jit: expected a callable, got {type(fun).__name__} {fun!r}")
        functools.update_wrapper(self, fun)   # __name__, __doc__, ... where fun has them
        if not isinstance(self.__dict__.get("__name__"), str):
            self.__name__ = _callable_name(fun)
        self._fun = fun
        self._static_argnums, self._static_argnames = _normalize_static(
            fun, static_argnums, static_argnames)
        if isinstance(donate_argnums, int):
            donate_argnums = (donate_argnums,)
        self._donate_argnums = tuple(donate_argnums or ())
        # with shardings every call runs over their mesh (spmd_dispatch.py)
        self._in_shardings, self._out_shardings = in_shardings, out_shardings
        self._on_mesh = in_shardings is not None or out_shardings is not None
        options = (self._static_argnums, self._static_argnames, self._donate_argnums)
        if self._on_mesh:
            options += (_hashable_shardings(in_shardings), _hashable_shardings(out_shardings))
        caches = self._caches = _caches_for(fun, options)
        self._cache, self._fast = caches.cache, caches.fast
        self._fast_sole, self._fast_tree = caches.fast_sole, caches.fast_tree
        self._simple = not (self._static_argnums or self._static_argnames
                            or self._donate_argnums or self._on_mesh)
        # eager calls over a mesh without static arguments take spmd_dispatch's fast table
        self._mesh_fast = not (self._static_argnums or self._static_argnames)
        _all_jitted.add(self)

    @property
    def trace_count(self):
        """How many times the function was traced for this jit configuration (shared by
        every ``jit`` of the same function)."""
        return self._caches.traces

    def call_unjitted(self, *args, **kwargs):
        """Run the Python function itself, eagerly (what ``disable_jit`` makes calls do)."""
        return self._fun(*args, **kwargs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    # --- argument handling ----------------------------------------------------------------
    def _split(self, args, kwargs):
        """(dynamic args, dynamic kwargs, hashable static key)."""
        if self._simple:
            return args, kwargs, ()
        static = []
        dyn_args = []
        for i, a in enumerate(args):
            if i in self._static_argnums:
                static.append((i, _hashable_static(self, i, a)))
            else:
                dyn_args.append(a)
        dyn_kwargs = {}
        for k, v in kwargs.items():
            if k in self._static_argnames:
                static.append((k, _hashable_static(self, k, v)))
            else:
                dyn_kwargs[k] = v
        return tuple(dyn_args), dyn_kwargs, tuple(static)

    def _rebuild(self, static, dyn_args, dyn_kwargs):
        static = dict(static)
        args, it = [], iter(dyn_args)
        total = len(dyn_args) + sum(1 for k in static if isinstance(k, int))
        for i in range(total):
            args.append(static[i] if i in static else next(it))
        kwargs = dict(dyn_kwargs)
        kwargs.update({k: v for k, v in static.items() if isinstance(k, str)})
        return args, kwargs

    def _donated_flags(self, args, kwargs):
        if not self._donate_argnums:
            return ()
        flags = []
        dyn_index = 0
        for i, a in enumerate(args):
            if i in self._static_argnums:
                continue
            n = len(tree_util.tree_leaves(a))
            flags.extend([i in self._donate_argnums] * n)
            dyn_index += 1
        flags.extend([False] * len(tree_util.tree_leaves(kwargs)))
        return tuple(flags)

    # --- tracing ----------------------------------------------------------------------------
    def _trace(self, static, treedef, in_avals, donated, shardings=None):
        """(closed jaxpr, output tree, write-back targets); with ``shardings`` (one per leaf,
        for a call with shardings under a transformation) the arguments and the outputs
        ``out_shardings`` names are constrained to their layouts."""
        self._caches.traces += 1
        out_tree = []
        writeback = []

        def flat_fun(*leaves):
            if shardings is not None:
                leaves = spmd_dispatch.constrain_arguments(leaves, shardings)
            dyn_args, dyn_kwargs = treedef.unflatten(leaves)
            args, kwargs = self._rebuild(static, dyn_args, dyn_kwargs)
            # Object state written while traced (nn.Module buffers) leaves as extra outputs.
            log = mutable_state.StateLog()
            with mutable_state.collecting(log):
                out = self._fun(*args, **kwargs)
            out_leaves, tree = tree_util.tree_flatten(out)
            out_tree.append(tree)
            if shardings is not None:
                out_leaves = spmd_dispatch.constrain_outputs(self, out_leaves, tree)
            extra = []
            for target, key, value, setter in log.entries():
                writeback.append((target, key, setter))
                extra.append(value)
            return out_leaves + extra

        closed, _ = trace_to_jaxpr(flat_fun, in_avals, debug_name=self.__name__)
        closed, _ = dce_closed_jaxpr(closed)   # e.g. the unused primal value under grad
        return closed, out_tree[0], tuple(writeback)

    def _entry(self, args, kwargs, mesh_ok=False):
        """(entry, leaves, device); with ``mesh_ok``, (None, flat arguments, traced) for a call
        that runs over a mesh (``spmd_dispatch.call`` takes the flat arguments): ``traced``
        is None when the arguments or shardings name the mesh, else the entry of a trace
        holding shard_maps, whose mesh (``traced.mesh``) the call runs over."""
        dyn_args, dyn_kwargs, static = self._split(args, kwargs)
        leaves, treedef = tree_util.registry.flatten((dyn_args, dyn_kwargs))
        try:
            avals = tuple([leaf.aval if type(leaf) is Array else aval_of(leaf) for leaf in leaves])
        except TypeError as exc:
            raise TypeError(f"jit({self.__name__}): argument leaves must be arrays or scalars: "
                            f"{exc}. Mark non-array arguments static with static_argnums / "
                            f"static_argnames.") from None
        if mesh_ok and (self._on_mesh or spmd_dispatch.routes_to_mesh(leaves)):
            return None, (leaves, treedef, avals, static), None
        device = _device_of(leaves)
        # an open autocast policy changes the trace: it is part of the key
        policy = current_policy()
        key = (treedef, avals, static, device, policy)
        entry = self._cache.get(key)
        if entry is None:
            donated = self._donated_flags(args, kwargs) if self._donate_argnums else ()
            # a call over a mesh may have traced it already (spmd_dispatch._compile)
            closed, out_tree, writeback = self._caches.spmd_traces.get(
                (treedef, avals, static, policy)) or self._trace(static, treedef, avals, donated)
            entry = _CacheEntry()
            entry.closed, entry.out_tree = closed, out_tree
            entry.writeback = writeback
            entry.exe = None
            entry.consts_bufs = None
            entry.handlers = donated
            entry.bindable = None
            entry.single = None
            entry.mesh = _MESH_UNKNOWN
            # A trace that closed over another transformation's tracers belongs to that
            # transformation only: it must not be reused from the cache later.
            if not any(isinstance(c, Tracer) for c in closed.consts):
                self._cache[key] = entry
        if mesh_ok:
            # a trace holding shard_maps runs as one program over their mesh, as JAX's jit
            if entry.mesh is _MESH_UNKNOWN:
                entry.mesh = spmd.program_mesh(entry.closed, self.__name__)
            if entry.mesh is not None:
                return None, (leaves, treedef, avals, static), entry
        return entry, leaves, device

    def __call__(self, *args, **kwargs):
        # Fast path: every argument is an Array on one device, no keywords, called eagerly.
        # The tables hold only functions without static or donated arguments (see
        # _call_slow), keyed by the arguments' aval keys and sharding (the pytree structure is
        # implied), so the per-call work is a dict lookup and the execute call.
        # (The fast tables hold traces made without an autocast policy.)
        if not kwargs and (not _entered[0] or _current_interp(None) is None) \
                and not policies_open[0]:
            if len(args) == 1:     # the commonest signature, without the loop below
                a = args[0]
                if type(a) is Array:
                    buf = a._buf
                    if _array_mod.sole_sharding is not None:
                        fast = self._fast_sole.get(a.aval.key)
                    else:
                        fast = self._fast.get((a.aval.key, buf._sharding))
                        fast = fast and fast.fast
                    if fast is not None:
                        execute, handlers, consts, aval0, entry = fast
                        try:
                            outs = execute(consts + [buf] if consts else [buf]
                                           ).consume_with_handlers(handlers)
                        except Exception as exc:
                            _raise_if_deleted(self.__name__, args, exc)
                            raise
                        if aval0 is not None:
                            out = _new_array(Array)
                            out.aval, out._buf = aval0, outs[0]
                            return out
                        return entry.out_tree.unflatten(
                            [Array(a, b) for a, b in zip(entry.out_avals, outs)])
                elif type(a) is ShardedArray and self._mesh_fast:
                    return spmd_dispatch.call_one(self, a)
                return self._call_slow(args, kwargs)
            sole = _array_mod.sole_sharding
            sharding = None
            key = []
            bufs = []
            for a in args:
                if type(a) is not Array:
                    break
                buf = a._buf
                if sole is None:
                    s = buf._sharding
                    if s is not sharding:
                        if sharding is not None:
                            break
                        sharding = s
                key.append(a.aval.key)
                bufs.append(buf)
            else:
                key.append(sole or sharding)
                entry = self._fast.get(tuple(key))
                if entry is not None:
                    if entry.consts_bufs:
                        bufs = entry.consts_bufs + bufs
                    try:
                        outs = entry.execute(bufs).consume_with_handlers(entry.handlers_out)
                    except Exception as exc:
                        _raise_if_deleted(self.__name__, args, exc)
                        raise
                    if entry.single:
                        return Array(entry.out_avals[0], outs[0])
                    return entry.out_tree.unflatten(
                        [Array(a, b) for a, b in zip(entry.out_avals, outs)])
            if self._simple:
                return self._call_tree(args)
            if self._mesh_fast:
                return self._call_mesh(args)
        return self._call_slow(args, kwargs)

    def _call_mesh(self, args):
        """Eager call without keyword or static arguments, over a mesh when the arguments or
        the shardings say so: one flatten, then ``spmd_dispatch.call_fast``."""
        leaves, treedef = tree_util.registry.flatten(args)
        return spmd_dispatch.call_fast(self, args, leaves, treedef)

    def _call_tree(self, args):
        """Eager call with pytree arguments: one flatten and one dict lookup when every leaf is
        an Array on one device or a Python scalar (an optimizer's learning rate); anything
        else (or a first call) takes the general path."""
        leaves, treedef = tree_util.registry.flatten(args)
        key = [treedef]
        bufs = []
        scalars = []
        sharding = None
        for leaf in leaves:
            t = type(leaf)
            if t is not Array:
                if t is ShardedArray:      # over a mesh: its own fast table
                    return spmd_dispatch.call_fast(self, args, leaves, treedef)
                if t not in _PY_SCALARS:
                    return self._call_slow(args, {})
                key.append(t)
                scalars.append(len(bufs))
                bufs.append(leaf)
                continue
            buf = leaf._buf
            s = buf._sharding
            if s is not sharding:
                if sharding is not None:
                    return self._call_slow(args, {})
                sharding = s
            key.append(leaf.aval.key)
            bufs.append(buf)
        if sharding is None:
            return self._call_slow(args, {})
        key.append(sharding)
        key = tuple(key)
        entry = self._fast_tree.get(key)
        if entry is None:
            out = self._call_slow(args, {})
            if _slow_only[0]:     # NaN/Inf checks, profiling: every call takes _call_slow
                return out
            entry, _, device = self._entry(args, {})
            # Only a cached entry for arrays on the device's own sharding can be reused (one
            # that closed over another transformation's tracers is not cached); others are
            # remembered as False, so later calls go straight to the general path.
            usable = entry.exe is not None and sharding is sharding_for(device) and \
                any(e is entry for e in self._cache.values())
            self._fast_tree[key] = entry if usable else False
            return out
        if entry is False:
            return self._call_slow(args, {})
        if scalars:
            in_avals, device = entry.closed.in_avals, sharding._device
            for i in scalars:
                bufs[i] = _scalar_buffer(bufs[i], in_avals[i], device)
        if entry.consts_bufs:
            bufs = entry.consts_bufs + bufs
        try:
            outs = entry.exe.loaded.execute_sharded(bufs).consume_with_handlers(
                entry.exe._handlers)
        except Exception as exc:
            _raise_if_deleted(self.__name__, leaves, exc)
            raise
        outs = [Array(a, b) for a, b in zip(entry.out_avals, outs)]
        if entry.writeback:
            outs = store_results(entry.writeback, outs)
        return entry.out_tree.unflatten(outs)

    def _call_slow(self, args, kwargs):
        eager = interpreters.is_eager()
        if not eager and self._on_mesh:      # a jit with shardings under a transformation
            return spmd_dispatch.bind(self, args, kwargs)
        entry, leaves, device = self._entry(args, kwargs, mesh_ok=eager)
        if entry is None:     # arguments or shard_maps over a mesh: one program for its devices
            return spmd_dispatch.call(self, args, kwargs, leaves, traced=device)
        if not eager:
            if entry.bindable is None:
                entry.bindable = consts_as_args(entry.closed)
            jaxpr, consts = entry.bindable
            donated = (False,) * len(consts) + (entry.handlers or (False,) * len(leaves))
            outs = jit_p.bind(*consts, *leaves, jaxpr=jaxpr, name=self.__name__, donated=donated)
            if entry.writeback:
                outs = _write_back(entry.writeback, outs)
            return entry.out_tree.unflatten(outs)
        exe = entry.exe
        if exe is None:
            exe = entry.exe = _executable_for(entry.closed, device, self.__name__,
                                              entry.handlers or ())
            entry.consts_bufs = [to_buffer(c, device, v.aval) for c, v in
                                 zip(entry.closed.consts, entry.closed.jaxpr.constvars)]
            entry.out_avals = exe.out_avals
        bufs = list(entry.consts_bufs)
        for leaf, aval in zip(leaves, entry.closed.in_avals):
            bufs.append(leaf._buf if type(leaf) is Array and leaf._buf._sharding._device is device
                        else to_buffer(leaf, device, aval))
        try:
            if _slow_only[0] and _profiling[0]:
                with _profiler.TraceMe(f"jit({self.__name__})"):
                    outs = exe.loaded.execute_sharded(bufs).consume_with_handlers(
                        exe._handlers)
            else:
                outs = exe.loaded.execute_sharded(bufs).consume_with_handlers(exe._handlers)
        except Exception as exc:
            _raise_if_deleted(self.__name__, leaves, exc)
            raise
        if _slow_only[0]:
            outs = [Array(a, b) for a, b in zip(entry.out_avals, outs)]
            if nan_checks.enabled():
                nan_checks.check_jit_outputs(self.__name__, entry.closed, leaves, outs)
            if entry.writeback:
                outs = store_results(entry.writeback, outs)
            return entry.out_tree.unflatten(outs)
        if (self._simple and not kwargs and not entry.writeback and entry.single is None
                and len(leaves) == len(args) and args and current_policy() is None
                and all(type(a) is Array and a._buf._sharding is sharding_for(device)
                        for a in args)):
            # Each argument is one Array leaf: later calls with these avals take the fast path.
            entry.single = entry.out_tree.num_nodes == 1 and entry.out_tree.num_leaves == 1
            entry.execute, entry.handlers_out = exe.loaded.execute_sharded, exe._handlers
            entry.fast = (exe.loaded.execute_sharded, exe._handlers, entry.consts_bufs,
                          entry.out_avals[0] if entry.single else None, entry)
            if len(args) == 1 and _array_mod.sole_sharding is sharding_for(device):
                self._fast_sole[args[0].aval.key] = entry.fast
            self._fast[tuple([a.aval.key for a in args]) + (sharding_for(device),)] = entry
        if entry.writeback:
            return entry.out_tree.unflatten(store_results(
                entry.writeback, [Array(a, b) for a, b in zip(entry.out_avals, outs)]))
        return entry.out_tree.unflatten([Array(a, b) for a, b in zip(entry.out_avals, outs)])

    def lower(self, *args, **kwargs):
        """Trace and lower for these arguments without running.

        Example:
            >>> lowered = funcgrad.jit(jnp.sin).lower(jnp.ones(2))
            >>> lowered.as_text()[:6]
            'module'
        """
        entry, leaves, device = self._entry(args, kwargs, mesh_ok=True)
        if entry is None:       # arguments or shard_maps over a mesh: the partitioned program
            return spmd_dispatch.lower(self, args, kwargs, leaves, traced=device)
        dyn_args, dyn_kwargs, static = self._split(args, kwargs)
        _, treedef = tree_util.registry.flatten((dyn_args, dyn_kwargs))
        signature = (treedef, tuple(aval_of(leaf).strip_weak() for leaf in leaves), static)
        return Lowered(self, entry.closed, device, entry.handlers or (), signature)

    def clear_cache(self):
        """Forget this function's traces and compiled code (for every ``jit`` of it with
        these options)."""
        self._caches.clear()

    def __repr__(self):
        return f"<jit({self.__name__})>"


_PY_SCALARS = (float, int, bool)
_scalar_buffers = {}          # (type, value, dtype, device) -> device buffer


def _scalar_buffer(value, aval, device):
    """The device buffer of a Python scalar argument, cached by value: hyperparameters passed
    on every call (a learning rate) are copied to the device once, not per call."""
    k = (type(value), value.hex() if type(value) is float else value, aval.dtype, device)
    buf = _scalar_buffers.get(k)
    if buf is None:
        if len(_scalar_buffers) >= 512:
            _scalar_buffers.clear()
        buf = _scalar_buffers[k] = to_buffer(value, device, aval)
    return buf


def _write_back(writeback, outs):
    """Hand the trailing state outputs to their setters; returns the function's own outputs.
    ``outs`` may be traced (a bound ``jit`` equation): traced values go to the staging log."""
    n = len(outs) - len(writeback)
    for (target, key, setter), value in zip(writeback, outs[n:]):
        mutable_state.write(target, key, value, setter)
    return outs[:n]


def store_results(writeback, outs):
    """``_write_back`` for an executed program's outputs, which are concrete: each state
    output goes straight to its setter (this runs on every call of a training step)."""
    n = len(outs) - len(writeback)
    for (target, key, setter), value in zip(writeback, outs[n:]):
        setter(target, key, value)
    return outs[:n]


def _raise_if_deleted(name, args, exc):
    """Turn the runtime's error for a deleted (donated) input into one that says so, and one
    reporting a failed host callback (a ``debug_checks`` check) into the callback's error."""
    reraise_host_error(exc)
    raise_deleted(name, args, exc)


def raise_deleted(name, args, cause=None):
    """Raise, naming it, if an argument leaf is a deleted Array."""
    for i, a in enumerate(args):
        if isinstance(a, Array) and a._buf.is_deleted():
            raise RuntimeError(f"jit({name}): argument leaf {i} ({a.aval.str_short()}) was "
                               f"deleted (donated to an earlier jit call or deleted "
                               f"explicitly); pass a live array") from cause


def clear_jit_caches():
    """Forget every jitted function's traces and compiled code."""
    for per_fun in list(_shared_caches.values()):
        for caches in per_fun.values():
            caches.clear()


# Traces depend on global switches (64-bit types, the default matmul precision, run-time
# checks, the random generator's counter layout, numpy's dtype and rank promotion modes):
# drop every cached trace when they change.
# Caches that are not shared (callables that cannot be weakly referenced) are dropped by their
# jit objects.
_all_jitted = weakref.WeakSet()


def _forget_traces(name, value):
    if name in ("enable_x64", "default_matmul_precision", "debug_checks",
                "threefry_partitionable", "numpy_dtype_promotion", "numpy_rank_promotion"):
        clear_jit_caches()
        for f in list(_all_jitted):
            f.clear_cache()


config.on_change(_forget_traces)

# NaN/Inf checks and profiling: while one is on, calls skip the fast tables (emptied here, not
# refilled), so that _call_slow checks every output and names each execution in the trace;
# with both off the fast paths cost nothing more.
_checking = [nan_checks.apply_config()]
_profiling = [False]
_slow_only = [_checking[0]]


def _update_slow_only():
    _slow_only[0] = _checking[0] or _profiling[0]
    if _slow_only[0]:
        for per_fun in list(_shared_caches.values()):
            for caches in per_fun.values():
                caches.clear_fast()
        for f in list(_all_jitted):
            f._caches.clear_fast()


def set_profiling(on):
    """Name every jitted call in profiler traces (``funcgrad.profiler`` turns this on while a
    trace runs); off, calls take the fast paths again."""
    _profiling[0] = bool(on)
    _update_slow_only()


def _set_checks(name, value):
    if name in ("debug_nans", "debug_infs"):
        _checking[0] = nan_checks.apply_config()
        _update_slow_only()


config.on_change(_set_checks)


def _hashable_shardings(shardings):
    """A cache key for ``in_shardings``/``out_shardings`` (pytree prefixes: dicts, lists...)."""
    leaves, tree = tree_util.tree_flatten(shardings, is_leaf=lambda s: s is None)
    return tree, tuple(leaves)


def _hashable_static(jitted, where, value):
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"jit({jitted.__name__}): static argument {where!r} must be hashable, "
                        f"got {type(value).__name__} {value!r}; pass a tuple instead of a "
                        f"list, or make it a non-static array argument") from None
    return value


# --- batching rules ---
_batched_bodies = weakref.WeakKeyDictionary()   # batched ClosedJaxpr -> (body, consts)


def _jit_batch(args, dims, jaxpr, name, donated):
    """Batch the staged body and bind ``jit`` again, so the batched computation stays one
    compiled executable (the batched Jaxpr is cached per body, batch axes and size)."""
    size = batching_util.batch_size(args, dims)
    batched, out_dims = batching.batch_jaxpr(jaxpr, size, dims)
    entry = _batched_bodies.get(batched)
    if entry is None:
        entry = _batched_bodies[batched] = consts_as_args(batched)
    body, consts = entry
    donated = (False,) * len(consts) + tuple(donated)
    outs = jit_p.bind(*consts, *args, jaxpr=body, name=name, donated=donated)
    return outs, out_dims


jit_p.def_batch(_jit_batch)


# --- jvp and transpose rules ---
# jvp of a jitted call = two jitted calls: the "known" one computes the primal outputs and the
# residuals, the "linear" one maps residuals and tangents to output tangents. Under linearize
# only the linear call is staged, so reverse mode of a jitted function transposes just it.
_jit_jvp_cache = weakref.WeakKeyDictionary()        # body -> {in_nz: entry}
_jit_transpose_cache = weakref.WeakKeyDictionary()  # body -> {(linear, cts_nz): (jaxpr, consts)}


def _linearize_body(closed, in_nz):
    from funcgrad.core.jaxpr import Jaxpr
    from funcgrad.core import ad
    box = []

    def known_fun(*primals):
        staging = interpreters.current()

        def f_sub(*nz_primals):
            it = iter(nz_primals)
            full = [next(it) if nz else p for p, nz in zip(primals, in_nz)]
            return closed(*full)

        outs, lin = ad.linearize_flat(f_sub, [p for p, nz in zip(primals, in_nz) if nz],
                                      "jvp")
        consts = lin.closed.consts
        is_res = [staging.is_own(c) for c in consts]
        box.append((lin, is_res))
        return list(outs) + [c for c, r in zip(consts, is_res) if r]

    known, _ = trace_to_jaxpr(known_fun, list(closed.in_avals), debug_name="jvp_known")
    lin, is_res = box[0]
    lj = lin.closed.jaxpr
    static_vars = [v for v, r in zip(lj.constvars, is_res) if not r]
    static_vals = [c for c, r in zip(lin.closed.consts, is_res) if not r]
    res_vars = [v for v, r in zip(lj.constvars, is_res) if r]
    linear = ClosedJaxpr(Jaxpr([], static_vars + res_vars + lj.invars, lj.eqns, lj.outvars), [])
    known_body, known_consts = consts_as_args(known)
    n_out = len(lin.out_nz)
    return known_body, known_consts, n_out, linear, static_vals, lin.out_nz, lin.out_avals


def _jit_jvp(primals, tangents, jaxpr, name, donated):
    from funcgrad.core.ad_util import Zero
    from funcgrad.core import dtypes
    from funcgrad.core import ad as _ad
    per_body = _jit_jvp_cache.get(jaxpr)
    if per_body is None:
        # the key None holds which inputs can carry a tangent at all (inexact dtypes)
        per_body = _jit_jvp_cache[jaxpr] = {
            None: tuple(dtypes.is_inexact(a.dtype) for a in jaxpr.in_avals)}
    in_nz = tuple([type(t) is not Zero and inexact
                   for t, inexact in zip(tangents, per_body[None])])
    entry = per_body.get(in_nz)
    if entry is None:
        entry = per_body[in_nz] = _linearize_body(jaxpr, in_nz)
    known, known_consts, n_out, linear, static_vals, out_nz, out_avals = entry
    outs = jit_p.bind(*known_consts, *primals, jaxpr=known, name=name,
                      donated=(False,) * (len(known_consts) + len(primals)))
    primal_outs, res = outs[:n_out], outs[n_out:]
    nz_tangents = [_ad.cast_like(t, a) for t, a, nz in zip(tangents, jaxpr.in_avals, in_nz)
                   if nz]
    if any(out_nz):
        args = list(static_vals) + list(res) + nz_tangents
        t_outs = iter(jit_p.bind(*args, jaxpr=linear, name=f"jvp({name})",
                                 donated=(False,) * len(args)))
    else:
        t_outs = iter(())
    return primal_outs, [next(t_outs) if nz else Zero(a) for nz, a in zip(out_nz, out_avals)]


def _jit_transpose(cts, *args, jaxpr, name, donated):
    from funcgrad.core import ad
    return ad.transpose_call(
        jaxpr, cts, args, _jit_transpose_cache,
        lambda operands, body: jit_p.bind(*operands, jaxpr=body, name=f"transpose({name})",
                                          donated=(False,) * len(operands)))


jit_p.def_jvp(_jit_jvp)
jit_p.def_transpose(_jit_transpose)

_jit_dce_cache = weakref.WeakKeyDictionary()   # body -> {used_outputs: (body, used_inputs)}


def _jit_dce(eqn, used_outputs):
    """Prune the unused outputs (and then inputs) of a nested jitted call."""
    from funcgrad.core.dce import dce_jaxpr
    from funcgrad.core.jaxpr import Eqn
    body = eqn.params["jaxpr"]
    used = tuple(used_outputs)
    per_body = _jit_dce_cache.get(body)
    if per_body is None:
        per_body = _jit_dce_cache[body] = {}
    entry = per_body.get(used)
    if entry is None:
        # (None, used_in) when nothing is pruned: the equation stays as it is. Cached per body
        # and used outputs, so an eager grad's backward pass does not re-run DCE on every
        # nested body at every step.
        inner, used_in = dce_jaxpr(body.jaxpr, list(used), prune_invars=True)
        if all(used) and all(used_in):
            entry = per_body[used] = (None, used_in)
        else:
            entry = per_body[used] = (ClosedJaxpr(inner, []), used_in)
    new_body, used_in = entry
    if new_body is None:
        return [True] * len(eqn.invars), eqn
    donated = eqn.params["donated"]
    params = dict(eqn.params, jaxpr=new_body,
                  donated=tuple(d for d, u in zip(donated, used_in) if u) if donated else donated)
    new = Eqn(eqn.prim, [v for v, u in zip(eqn.invars, used_in) if u], params,
              [v for v, u in zip(eqn.outvars, used) if u], eqn.source_info, eqn.name_stack)
    return used_in, new


jit_p.def_rule("dce", _jit_dce)
