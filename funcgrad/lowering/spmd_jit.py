"""``jit(f, in_shardings=..., out_shardings=...)``: one program partitioned by XLA's SPMD
partitioner over a mesh's devices.

The function is staged once per argument signature for the *global* shapes; its StableHLO
``main`` carries an ``mhlo.sharding`` attribute on every argument and result (the
``HloSharding`` of its ``NamedSharding``), and it is compiled with ``num_replicas=1``,
``num_partitions=N`` and ``use_spmd_partitioning``: XLA splits the computation and inserts
the collectives. One ``execute_sharded`` call takes one multi-device buffer per argument and
returns the outputs as sharded Arrays. This path is separate from single-device ``jit``
(``dispatch.py``), whose fast paths it leaves untouched.
"""
import re
import weakref

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy

from funcgrad import tree_util
from funcgrad.core import interpreters
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.jaxpr import Literal
from funcgrad.core.interpreters import _current as _current_var
from funcgrad.core.interpreters import entered as _entered
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax.mesh_axes import MeshAxisEnv
from funcgrad.lax.sharding import sharding_constraint_p, shardy_meshes
from funcgrad.lowering import backend, mlir
from funcgrad.lowering.array import _BufferAval
from funcgrad.lowering.executable import _option_overrides
from funcgrad.lowering.jaxlib_compat import array_result_handler
from funcgrad.lowering.mesh import NamedSharding, PartitionSpec, named_sharding_from_hlo
from funcgrad.lowering import spmd
from funcgrad.lowering.sharding import ShardedArray, put_named


_flatten = tree_util.registry.flatten
_new_sharded = ShardedArray.__new__
_current_interp = _current_var.get   # None when the eager (root) interpreter is current
_FAST_ENTRIES = 64     # fast-path entries per function (new sharding objects each call: bounded)

# an eager with_sharding_constraint places the value
sharding_constraint_p.def_impl(lambda x, sharding: put_named(x, sharding,
                                                             "with_sharding_constraint"))


class ShardedJitFunction:
    """What ``jit`` returns when given ``in_shardings`` or ``out_shardings``.

    ``in_shardings``: one ``NamedSharding`` for every argument, or a tuple with one entry per
    positional argument (a ``NamedSharding`` for all the leaves of that argument, or None: the
    sharding of a NamedSharding-placed Array, else replicated). ``out_shardings``: one
    ``NamedSharding`` or a tuple with one per output (None or absent: replicated).
    """

    def __init__(self, fun, in_shardings=None, out_shardings=None):
        self._fun = fun
        self._in = in_shardings
        self._out = out_shardings
        self._cache = {}
        self._bodies = {}   # key -> (constrained body, consts, out tree): under transformations
        self._fast = {}     # (treedef, aval key and id(sharding) per leaf...) -> entry
        self.trace_count = 0
        self.__name__ = getattr(fun, "__name__", "jitted")
        self.__doc__ = getattr(fun, "__doc__", None)

    def __call__(self, *args, **kwargs):
        # Fast path: called eagerly with every leaf a ShardedArray whose sharding object was
        # seen before for these avals: one flatten, one dict lookup, the launch.
        if not kwargs and (not _entered[0] or _current_interp(None) is None):
            leaves, treedef = _flatten(args)
            key = [treedef]
            bufs = []
            for leaf in leaves:
                if type(leaf) is not ShardedArray:
                    break
                buf = leaf._buf
                key.append(leaf.aval.key)
                key.append(id(buf._sharding))
                bufs.append(buf)
            else:
                fast = self._fast.get(tuple(key))
                if fast is not None:
                    program, consts, out_tree, _ = fast
                    try:
                        outs = program(consts + bufs if consts else bufs)
                    except Exception:       # e.g. a deleted argument: the general path says so
                        return self._call_slow(args, kwargs)
                    return out_tree.unflatten(outs)
        return self._call_slow(args, kwargs)

    def _call_slow(self, args, kwargs):
        if kwargs:
            raise TypeError(f"jit({self.__name__}) with shardings: pass arguments by position "
                            f"(got keyword arguments {sorted(kwargs)})")
        leaves, treedef = tree_util.tree_flatten(args)
        shardings = self._arg_shardings(args)
        avals = tuple(aval_of(x) for x in leaves)
        key = (treedef, avals, tuple(shardings))
        if not interpreters.is_eager():
            if key not in self._bodies:
                self._check_args(args, shardings, avals)
            return self._bind(key, leaves)
        entry = self._cache.get(key)
        if entry is None:
            self._check_args(args, shardings, avals)
            entry = self._cache[key] = self._compile(treedef, avals, shardings)
            self.trace_count += 1
        program, consts, out_tree = entry
        where = f"jit({self.__name__})"
        bufs = [put_named(x, s.with_rank(a.ndim, where), where)._buf
                for x, s, a in zip(leaves, shardings, avals)]
        outs = tree_util.tree_unflatten(out_tree, program(consts + bufs))
        if all(type(x) is ShardedArray and x._buf is b for x, b in zip(leaves, bufs)):
            # every argument was already laid out as the program wants: remember its sharding
            # objects (held by the entry, so their ids stay theirs) for the fast path
            if len(self._fast) >= _FAST_ENTRIES:
                self._fast.clear()
            held = tuple(b._sharding for b in bufs)
            fast_key = [treedef]
            for x, s in zip(leaves, held):
                fast_key.append(x.aval.key)
                fast_key.append(id(s))
            self._fast[tuple(fast_key)] = (program, consts, out_tree, held)
        return outs

    def _check_args(self, args, shardings, avals):
        """Raise, naming the argument (position and path), its shape, the mesh and the spec,
        if an argument cannot be laid out as its sharding says."""
        for j, (s, a) in enumerate(zip(shardings, avals)):
            try:
                s.with_rank(a.ndim).check_shape(a.shape, "")
            except ValueError:
                path = tree_util.tree_flatten_with_path(args)[0][j][0]
                where = (f"jit({self.__name__}): argument {path[0].idx}"
                         f"{tree_util.keystr(path[1:])} of shape {a.shape} ({a.dtype})")
                s.with_rank(a.ndim, where).check_shape(a.shape, where)

    def _bind(self, key, leaves):
        """Under a transformation: one ``jit`` equation whose body lays its arguments and
        results out as the shardings say (``with_sharding_constraint``), so ``grad``, ``vmap``,
        control flow and an enclosing sharded ``jit`` keep them; run eagerly, such a body is
        compiled over the mesh (``constrained_program``)."""
        from funcgrad.core.jaxpr import consts_as_args
        from funcgrad.lowering.dispatch import jit_p
        entry = self._bodies.get(key)
        if entry is None:
            treedef, avals, shardings = key
            out_tree = []
            where = f"jit({self.__name__})"

            def constrained(*xs):
                xs = [sharding_constraint_p.bind(x, sharding=s.with_rank(a.ndim, where))
                      for x, s, a in zip(xs, shardings, avals)]
                out = self._fun(*tree_util.tree_unflatten(treedef, xs))
                outs, tree = tree_util.tree_flatten(out)
                out_tree.append(tree)
                specs = self._out_shardings(tree, shardings[0].mesh)
                return [sharding_constraint_p.bind(o, sharding=s.with_rank(
                    aval_of(o).ndim, f"{where} output {i}")) for i, (o, s) in
                    enumerate(zip(outs, specs))]
            closed, _ = trace_to_jaxpr(constrained, list(avals), debug_name=self.__name__)
            body, consts = consts_as_args(closed)
            entry = self._bodies[key] = (body, consts, out_tree[0])
            self.trace_count += 1
        body, consts, out_tree = entry
        outs = jit_p.bind(*consts, *leaves, jaxpr=body, name=self.__name__,
                          donated=(False,) * (len(consts) + len(leaves)))
        return tree_util.tree_unflatten(out_tree, outs)

    # --- shardings --------------------------------------------------------------------------
    def _arg_shardings(self, args):
        """One NamedSharding per argument leaf: from ``in_shardings`` (a pytree prefix of each
        argument), else the leaf's own NamedSharding, else replicated; all on one mesh."""
        where = f"jit({self.__name__})"
        given = self._in
        if given is None or isinstance(given, NamedSharding):
            given = (given,) * len(args)
        if not isinstance(given, (tuple, list)) or len(given) != len(args):
            raise ValueError(f"{where}: in_shardings must be a NamedSharding or a tuple with one "
                             f"per positional argument ({len(args)}), got {self._in!r}")
        per_leaf, named = [], []     # named: (sharding, where it came from, leaf's shape)
        for i, (arg, prefix) in enumerate(zip(args, given)):
            paths_leaves = tree_util.tree_flatten_with_path(arg)[0]
            specs = _broadcast_prefix(prefix, arg, f"{where}: in_shardings[{i}]")
            for (path, leaf), s in zip(paths_leaves, specs):
                what = f"argument {i}{tree_util.keystr(path)}"
                if s is None:
                    own = leaf.sharding if isinstance(leaf, ShardedArray) else None
                    if isinstance(own, NamedSharding):
                        s, what = own, f"{what} (its own sharding)"
                else:
                    what = f"{what} (in_shardings[{i}])"
                per_leaf.append(s)
                if s is not None:
                    named.append((s, what, getattr(leaf, "shape", ())))
        outs = tree_util.tree_leaves(self._out, is_leaf=_is_sharding_leaf)
        named += [(s, "out_shardings", None) for s in outs if isinstance(s, NamedSharding)]
        if not named:
            raise ValueError(f"{where}: no mesh: give in_shardings or out_shardings "
                             f"(NamedShardings), or arguments placed with a NamedSharding")
        first = named[0]
        for other in named[1:]:
            if other[0].mesh != first[0].mesh:
                raise ValueError(f"{where}: the arguments and out_shardings must lie on one "
                                 f"mesh, but {_describe(*first)} and {_describe(*other)}")
        replicated = _replicated(first[0].mesh)
        return [s if s is not None else replicated for s in per_leaf]

    def _out_shardings(self, out_tree, mesh):
        """One NamedSharding per output leaf, from ``out_shardings`` (a pytree prefix of the
        output, or a flat sequence with one entry per output leaf)."""
        where = f"jit({self.__name__})"
        n = out_tree.num_leaves
        given = self._out
        flat = tree_util.tree_leaves(given, is_leaf=_is_sharding_leaf)
        if isinstance(given, (tuple, list)) and len(given) == n and len(flat) == n and \
                all(_is_sharding_leaf(s) for s in given):
            specs = list(given)       # one per output leaf, whatever the output's structure
        else:
            specs = _broadcast_prefix(given, out_tree.unflatten([0] * n),
                                      f"{where}: out_shardings")
        return [s if s is not None else _replicated(mesh) for s in specs]

    # --- compiling --------------------------------------------------------------------------
    def _compile(self, treedef, avals, shardings):
        out_tree = []

        def flat_fun(*leaves):
            out = self._fun(*tree_util.tree_unflatten(treedef, leaves))
            out_leaves, tree = tree_util.tree_flatten(out)
            out_tree.append(tree)
            return out_leaves

        closed, _ = trace_to_jaxpr(flat_fun, list(avals), debug_name=self.__name__)
        closed, _ = dce_closed_jaxpr(closed)
        mesh = shardings[0].mesh if shardings else self._out.mesh
        out_shardings = [s.with_rank(a.ndim, f"jit({self.__name__}) output {i}")
                         for i, (s, a) in enumerate(zip(
                             self._out_shardings(out_tree[0], mesh), closed.out_avals))]
        for i, (s, a) in enumerate(zip(out_shardings, closed.out_avals)):
            s.check_shape(a.shape, f"jit({self.__name__}) output {i}")
        const_shardings = [_replicated(mesh).with_rank(v.aval.ndim)
                           for v in closed.jaxpr.constvars]
        program = SpmdExecutable(closed, mesh, const_shardings + list(shardings),
                                 out_shardings, self.__name__)
        consts = [put_named(c, s)._buf for c, s in zip(closed.consts, const_shardings)]
        return program, consts, out_tree[0]


_constrained = weakref.WeakKeyDictionary()   # jit body -> (SpmdExecutable, shardings) or None


def constrained_program(closed, name):
    """For the body of a ``jit`` equation run eagerly: when its top level lays out arguments or
    results with ``with_sharding_constraint`` (a sharded ``jit`` under ``grad``/``vmap``...,
    whose derived bodies keep the constraints), ``run(args)`` running it over the mesh with
    those layouts (others replicated); else None (the single-device path)."""
    try:
        entry = _constrained[closed]
    except KeyError:
        entry = _constrained[closed] = _compile_constrained(closed, name)
    if entry is None:
        return None
    program, in_shardings = entry

    def run(args):
        where = f"jit({name})"
        return program([put_named(x, s, where)._buf for x, s in zip(args, in_shardings)])
    return run


def _compile_constrained(closed, name):
    jaxpr = closed.jaxpr
    if closed.consts or not any(e.prim is sharding_constraint_p for e in jaxpr.eqns):
        return None
    produced = {}
    first_use = {}
    for e in jaxpr.eqns:
        if e.prim is sharding_constraint_p:
            produced[e.outvars[0]] = e.params["sharding"]
            if e.invars[0] in jaxpr.invars:
                first_use.setdefault(e.invars[0], e.params["sharding"])
    known = list(produced.values())
    if any(s.mesh != known[0].mesh for s in known):
        return None
    mesh = known[0].mesh
    ins = [first_use.get(v) or _replicated(mesh).with_rank(v.aval.ndim) for v in jaxpr.invars]
    outs = [produced.get(v) if not isinstance(v, Literal) and v in produced else
            _replicated(mesh).with_rank(v.aval.ndim) for v in jaxpr.outvars]
    return SpmdExecutable(closed, mesh, ins, outs, name), ins


def _is_sharding_leaf(s):
    return s is None or isinstance(s, NamedSharding)


def _broadcast_prefix(prefix, tree, where):
    """Per leaf of ``tree``: the entry (a NamedSharding or None) of ``prefix`` (a pytree
    prefix of ``tree`` whose leaves are NamedShardings or None) covering it."""
    specs, spec_tree = tree_util.tree_flatten(prefix, is_leaf=_is_sharding_leaf)
    for s in specs:
        if not _is_sharding_leaf(s):
            raise TypeError(f"{where}: expected NamedShardings or None, got {s!r}")
    try:
        subtrees = spec_tree.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: the shardings' structure {spec_tree} is not a prefix of "
                         f"the value's structure {tree_util.tree_structure(tree)} ({e})") from None
    out = []
    for s, sub in zip(specs, subtrees):
        out += [s] * len(tree_util.tree_leaves(sub))
    return out


def _describe(sharding, what, shape):
    shape = "" if shape is None else f" of shape {tuple(shape)}"
    return f"{what}{shape} lies on {sharding.mesh} as {sharding.spec}"


_replicated_on = {}     # mesh -> NamedSharding(mesh, P()): made once (a C++ object)


def _replicated(mesh):
    s = _replicated_on.get(mesh)
    if s is None:
        s = _replicated_on[mesh] = NamedSharding(mesh, PartitionSpec())
    return s


def _add_sdy_meshes(module, meshes, devices, name):
    """An ``sdy.mesh`` symbol for each mesh the program's shardings name (the program's own
    first; others must hold the same devices, given in the program's device order)."""
    position = {d: i for i, d in enumerate(devices)}
    with ir.InsertionPoint.at_block_begin(module.body):
        for mesh, symbol in meshes.items():
            mesh_devices = list(mesh.devices.flat)
            if set(mesh_devices) != set(devices):
                raise ValueError(f"jit({name}): a sharding over {mesh} (devices "
                                 f"{[d.id for d in mesh_devices]}) inside a program over "
                                 f"devices {[d.id for d in devices]}: constrain values to "
                                 f"meshes of the program's own devices")
            ids = [position[d] for d in mesh_devices]
            sdy.MeshOp(symbol, ir.Attribute.parse(mesh._sdy_text(ids)), loc=ir.Location.unknown())


def _set_sharding_attrs(module, in_shardings, in_avals, out_shardings, out_avals,
                        shardy=False):
    """Put ``mhlo.sharding`` (``sdy.sharding`` for Shardy) on every argument and result of
    ``main``."""
    main = next(op for op in module.body.operations
                if ir.StringAttr(op.attributes["sym_name"]).value == "main")

    def attrs(shardings, avals, old):
        out = []
        for i, (s, a) in enumerate(zip(shardings, avals)):
            entries = {k.name: k.attr for k in ir.DictAttr(old[i])} if old is not None else {}
            if s is None:        # XLA's sharding propagation chooses
                pass
            elif shardy:
                entries["sdy.sharding"] = ir.Attribute.parse(s._to_sdy_text(a.ndim))
            else:
                hlo = s._to_xla_hlo_sharding(a.ndim) if hasattr(s, "_to_xla_hlo_sharding") \
                    else s._hlo_sharding       # a plain GSPMDSharding (resharding programs)
                entries["mhlo.sharding"] = ir.StringAttr.get(str(hlo))
            out.append(ir.DictAttr.get(entries))
        return ir.ArrayAttr.get(out)

    old_args = main.attributes["arg_attrs"] if "arg_attrs" in main.attributes else None
    main.attributes["arg_attrs"] = attrs(in_shardings, in_avals, old_args)
    main.attributes["res_attrs"] = attrs(out_shardings, out_avals, None)


_COLLECTIVE_OPS = re.compile(r"\b(all-reduce|all-gather|all-to-all|ragged-all-to-all|"
                             r"reduce-scatter|collective-permute|collective-broadcast)"
                             r"(-start)?\(")


def has_collectives(hlo_text):
    """Whether a partitioned HLO module (text) holds a collective operation."""
    return _COLLECTIVE_OPS.search(hlo_text) is not None


# what only GSPMD's partitioner reads: sharding custom calls and manual-region markers
_GSPMD_ONLY = re.compile(r"custom_call @(Sharding|SPMDFullToShardShape|SPMDShardToFullShape)\b")


def _lower(closed, name, device, meshes, donated, mesh):
    """``closed`` as StableHLO; ``meshes`` ({mesh: symbol}, or None for GSPMD) is what
    ``with_sharding_constraint``'s lowering reads to emit Shardy's constraint."""
    token = shardy_meshes.set(meshes)
    try:
        return mlir.lower_closed_jaxpr(closed, name=name, platform=backend.platform_of(device),
                                       donated=donated, axis_env=MeshAxisEnv.for_mesh(mesh))
    finally:
        shardy_meshes.reset(token)


class SpmdExecutable:
    """``closed`` (global shapes) compiled for ``mesh``'s devices by the SPMD partitioner.

    An ``out_shardings`` entry None lets XLA choose that output's sharding; the chosen one is
    read back from the compiled executable (``self.out_shardings``). ``donated``: one flag
    per argument of ``closed`` (not its consts), as for single-device ``jit``.
    """

    def __init__(self, closed, mesh, in_shardings, out_shardings, name, donated=()):
        devices = list(mesh.devices.flat)    # every process's: one program over all of them
        in_avals = [v.aval for v in closed.jaxpr.constvars] + list(closed.in_avals)
        # Shardy partitions a program whose layouts are all mesh shardings (as JAX's jit does:
        # from the same program it places fewer collectives than GSPMD's propagation);
        # resharding programs, whose source layout is a plain device tiling, use GSPMD
        shardy = all(s is None or isinstance(s, NamedSharding)
                     for s in list(in_shardings) + list(out_shardings))
        meshes = {mesh: "mesh"} if shardy else None
        module, ctx = _lower(closed, name, devices[0], meshes, donated, mesh)
        if shardy and _GSPMD_ONLY.search(str(module)):
            # a lowering that only speaks GSPMD (a sharding custom call, a manual region):
            # the whole program goes to GSPMD's partitioner instead
            shardy, meshes = False, None
            module, ctx = _lower(closed, name, devices[0], None, donated, mesh)
        options = xc.CompileOptions()
        options.num_replicas = 1
        options.num_partitions = len(devices)
        options.executable_build_options.use_spmd_partitioning = True
        options.executable_build_options.use_shardy_partitioner = shardy
        options.device_assignment = xc.DeviceAssignment.create(
            np.array([[d.id for d in devices]]))
        overrides = _option_overrides(devices[0])
        if overrides:
            options.env_option_overrides = overrides
        self.out_avals = list(closed.out_avals)
        with ctx:
            if shardy:
                _add_sdy_meshes(module, meshes, devices, name)
            for _ in range(2):
                # outputs without a sharding take the one XLA's propagation gives them
                options.executable_build_options.allow_spmd_sharding_propagation_to_output = \
                    [s is None for s in out_shardings]
                _set_sharding_attrs(module, in_shardings, in_avals, out_shardings,
                                    closed.out_avals, shardy)
                self.text = str(module)
                self.loaded = devices[0].client.compile_and_load(
                    self.text, _jax.DeviceList(tuple(devices)), options)
                if all(s is not None for s in out_shardings):
                    break
                chosen = self.loaded.get_output_shardings()   # None for one device
                if chosen is None:
                    chosen = [xc.HloSharding.replicate().to_proto()] * len(out_shardings)
                out_shardings = [s if s is not None else named_sharding_from_hlo(
                    mesh, xc.HloSharding.from_proto(op), a.ndim)
                    for s, op, a in zip(out_shardings, chosen, self.out_avals)]
                if all(s is not None for s in out_shardings):
                    break
                # a layout no PartitionSpec over the mesh describes: compile once more with
                # those outputs replicated, so every output is a NamedSharding
                out_shardings = [s if s is not None else _replicated(mesh).with_rank(a.ndim)
                                 for s, a in zip(out_shardings, self.out_avals)]
        backend.check_program(name, self.text, in_avals, devices)
        self.out_shardings = out_shardings
        self._execute = self.loaded.execute_sharded
        self._collective = has_collectives(self.as_text())
        self._handlers = [array_result_handler(_BufferAval(a), s)
                          for a, s in zip(self.out_avals, out_shardings)]

    def __call__(self, bufs):
        if self._collective:
            # one launch with collectives in flight at a time (spmd.py's docstring: XLA:CPU
            # partitions waiting in a collective hold threads the others need; two unawaited
            # steps of a partitioned training step deadlock JAX's jit the same way). A program
            # without collectives never waits in a rendezvous, so it runs unserialised.
            spmd.wait_for_previous_launch()
            outs = self._execute(bufs).consume_with_handlers(self._handlers)
            spmd._last[0] = outs
        else:
            outs = self._execute(bufs).consume_with_handlers(self._handlers)
        out = []
        for aval, buf in zip(self.out_avals, outs):
            a = _new_sharded(ShardedArray)     # no __init__ call: this is the hot path
            a.aval = aval
            a._buf = buf
            out.append(a)
        return out

    def as_text(self):
        """The partitioned HLO XLA compiled (per-device shapes, inserted collectives)."""
        return self.loaded.hlo_modules()[0].to_string()


__all__ = ["ShardedJitFunction", "SpmdExecutable"]
