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
import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc
from jaxlib.mlir import ir

from funcgrad import tree_util
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax.sharding import sharding_constraint_p
from funcgrad.lowering import backend, mlir
from funcgrad.lowering.array import _BufferAval
from funcgrad.lowering.executable import _option_overrides
from funcgrad.lowering.jaxlib_compat import array_result_handler
from funcgrad.lowering.mesh import NamedSharding, PartitionSpec
from funcgrad.lowering import spmd
from funcgrad.lowering.sharding import ShardedArray, put_named


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
        self.__name__ = getattr(fun, "__name__", "jitted")
        self.__doc__ = getattr(fun, "__doc__", None)

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError(f"jit({self.__name__}) with shardings: pass arguments by position "
                            f"(got keyword arguments {sorted(kwargs)})")
        leaves, treedef = tree_util.tree_flatten(args)
        shardings = self._arg_shardings(args)
        avals = tuple(aval_of(x) for x in leaves)
        key = (treedef, avals, tuple(shardings))
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = self._compile(treedef, avals, shardings)
        program, consts, out_tree = entry
        bufs = [put_named(x, s.with_rank(a.ndim, f"jit({self.__name__})"), f"jit({self.__name__})")._buf
                for x, s, a in zip(leaves, shardings, avals)]
        return tree_util.tree_unflatten(out_tree, program(consts + bufs))

    # --- shardings --------------------------------------------------------------------------
    def _arg_shardings(self, args):
        where = f"jit({self.__name__})"
        given = self._in
        if given is None or isinstance(given, NamedSharding):
            given = (given,) * len(args)
        if not isinstance(given, (tuple, list)) or len(given) != len(args):
            raise ValueError(f"{where}: in_shardings must be a NamedSharding or a tuple with one "
                             f"per positional argument ({len(args)}), got {self._in!r}")
        per_leaf = []
        for i, (arg, s) in enumerate(zip(args, given)):
            if s is not None and not isinstance(s, NamedSharding):
                raise TypeError(f"{where}: in_shardings[{i}] must be a NamedSharding or None, "
                                f"got {s!r}")
            for leaf in tree_util.tree_leaves(arg):
                own = leaf.sharding if isinstance(leaf, ShardedArray) else None
                per_leaf.append(s if s is not None else
                                own if isinstance(own, NamedSharding) else None)
        meshes = {s.mesh for s in per_leaf if s is not None}
        outs = self._out if isinstance(self._out, (tuple, list)) else (self._out,)
        meshes |= {s.mesh for s in outs if isinstance(s, NamedSharding)}
        if len(meshes) != 1:
            raise ValueError(f"{where}: the arguments and out_shardings must lie on one mesh, got "
                             f"{sorted(map(repr, meshes)) or 'none'}")
        replicated = _replicated(meshes.pop())
        return [s if s is not None else replicated for s in per_leaf]

    def _out_shardings(self, n, mesh):
        where = f"jit({self.__name__})"
        given = self._out
        if given is None or isinstance(given, NamedSharding):
            given = (given,) * n
        if len(given) != n:
            raise ValueError(f"{where}: out_shardings has {len(given)} entries for {n} outputs")
        return [s if s is not None else _replicated(mesh) for s in given]

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
                             self._out_shardings(len(closed.out_avals), mesh), closed.out_avals))]
        for i, (s, a) in enumerate(zip(out_shardings, closed.out_avals)):
            s.check_shape(a.shape, f"jit({self.__name__}) output {i}")
        const_shardings = [_replicated(mesh).with_rank(v.aval.ndim)
                           for v in closed.jaxpr.constvars]
        program = SpmdExecutable(closed, mesh, const_shardings + list(shardings),
                                 out_shardings, self.__name__)
        consts = [put_named(c, s)._buf for c, s in zip(closed.consts, const_shardings)]
        return program, consts, out_tree[0]


_replicated_on = {}     # mesh -> NamedSharding(mesh, P()): made once (a C++ object)


def _replicated(mesh):
    s = _replicated_on.get(mesh)
    if s is None:
        s = _replicated_on[mesh] = NamedSharding(mesh, PartitionSpec())
    return s


def _set_sharding_attrs(module, in_shardings, in_avals, out_shardings, out_avals):
    """Put ``mhlo.sharding`` on every argument and result of ``main``."""
    main = next(op for op in module.body.operations
                if ir.StringAttr(op.attributes["sym_name"]).value == "main")

    def attrs(shardings, avals, old):
        out = []
        for i, (s, a) in enumerate(zip(shardings, avals)):
            entries = {k.name: k.attr for k in ir.DictAttr(old[i])} if old is not None else {}
            entries["mhlo.sharding"] = ir.StringAttr.get(str(s._to_xla_hlo_sharding(a.ndim)))
            out.append(ir.DictAttr.get(entries))
        return ir.ArrayAttr.get(out)

    old_args = main.attributes["arg_attrs"] if "arg_attrs" in main.attributes else None
    main.attributes["arg_attrs"] = attrs(in_shardings, in_avals, old_args)
    main.attributes["res_attrs"] = attrs(out_shardings, out_avals, None)


class SpmdExecutable:
    """``closed`` (global shapes) compiled for ``mesh``'s devices by the SPMD partitioner."""

    def __init__(self, closed, mesh, in_shardings, out_shardings, name):
        devices = list(mesh.devices.flat)    # every process's: one program over all of them
        in_avals = [v.aval for v in closed.jaxpr.constvars] + list(closed.in_avals)
        module, ctx = mlir.lower_closed_jaxpr(closed, name=name,
                                              platform=backend.platform_of(devices[0]))
        options = xc.CompileOptions()
        options.num_replicas = 1
        options.num_partitions = len(devices)
        options.executable_build_options.use_spmd_partitioning = True
        options.device_assignment = xc.DeviceAssignment.create(
            np.array([[d.id for d in devices]]))
        overrides = _option_overrides(devices[0])
        if overrides:
            options.env_option_overrides = overrides
        with ctx:
            _set_sharding_attrs(module, in_shardings, in_avals, out_shardings,
                                closed.out_avals)
            self.text = str(module)
            self.loaded = devices[0].client.compile_and_load(
                self.text, _jax.DeviceList(tuple(devices)), options)
        self.out_avals = list(closed.out_avals)
        self._handlers = [array_result_handler(_BufferAval(a), s)
                          for a, s in zip(self.out_avals, out_shardings)]

    def __call__(self, bufs):
        # one multi-device launch in flight at a time, as for pmap (spmd.py's docstring: XLA:CPU
        # partitions waiting in a collective hold the threads the others need)
        spmd.wait_for_previous_launch()
        outs = self.loaded.execute_sharded(bufs).consume_with_handlers(self._handlers)
        spmd._last[0] = outs
        return [ShardedArray(a, b) for a, b in zip(self.out_avals, outs)]

    def as_text(self):
        """The partitioned HLO XLA compiled (per-device shapes, inserted collectives)."""
        return self.loaded.hlo_modules()[0].to_string()


__all__ = ["ShardedJitFunction", "SpmdExecutable"]
