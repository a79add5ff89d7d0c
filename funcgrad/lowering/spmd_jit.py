"""Programs partitioned by XLA's SPMD partitioner over a mesh's devices: ``SpmdExecutable``.

A program (staged for the *global* shapes) is lowered with a sharding on every argument and
result of its StableHLO ``main`` (``sdy.sharding`` for Shardy, ``mhlo.sharding`` for GSPMD:
the ``NamedSharding`` each value has) and compiled with ``num_replicas=1``,
``num_partitions=N`` and ``use_spmd_partitioning``: XLA splits the computation and inserts
the collectives. One ``execute_sharded`` call takes one multi-device buffer per argument and
returns the outputs as sharded Arrays. ``jit`` over a mesh (``spmd_dispatch.py``), eager
``shard_map`` calls, on-device resharding (``reshard.py``) and the bodies of sharded ``jit``
equations run eagerly (``constrained_program``) all compile through it.
"""
import re
import weakref

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy

from funcgrad.core.jaxpr import Literal
from funcgrad.lax.mesh_axes import MeshAxisEnv
from funcgrad.lax.sharding import sharding_constraint_p, shardy_meshes
from funcgrad.lowering import backend, mlir
from funcgrad.lowering.array import _BufferAval
from funcgrad.lowering.executable import _option_overrides
from funcgrad.lowering.jaxlib_compat import array_result_handler
from funcgrad.lowering.mesh import NamedSharding, PartitionSpec, named_sharding_from_hlo
from funcgrad.lowering import spmd
from funcgrad.lowering.sharding import ShardedArray, layout_signature, put_named


_new_sharded = ShardedArray.__new__

# an eager with_sharding_constraint places the value
sharding_constraint_p.def_impl(lambda x, sharding: put_named(x, sharding,
                                                             "with_sharding_constraint"))


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
                        meshes=None):
    """Put ``mhlo.sharding`` (``sdy.sharding`` for Shardy: ``meshes`` maps each mesh to its
    symbol) on every argument and result of ``main``."""
    main = next(op for op in module.body.operations
                if ir.StringAttr(op.attributes["sym_name"]).value == "main")

    def attrs(shardings, avals, old):
        out = []
        for i, (s, a) in enumerate(zip(shardings, avals)):
            entries = {k.name: k.attr for k in ir.DictAttr(old[i])} if old is not None else {}
            if s is None:        # XLA's sharding propagation chooses
                pass
            elif meshes is not None:
                entries["sdy.sharding"] = ir.Attribute.parse(
                    s._to_sdy_text(a.ndim, meshes[s.mesh]))
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
        meshes = None
        if shardy:      # arguments may lie on other meshes of the same devices
            meshes = {mesh: "mesh"}
            for s in list(in_shardings) + list(out_shardings):
                if s is not None and s.mesh not in meshes:
                    meshes[s.mesh] = f"mesh_{len(meshes)}"
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
                                    closed.out_avals, meshes)
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
        # the outputs carry these aval and sharding objects: their signatures, known now
        self._out_sigs = [layout_signature(a, s) for a, s in zip(self.out_avals, out_shardings)]

    def __call__(self, bufs):
        if self._collective:
            # one launch with collectives in flight at a time (spmd.py's docstring: XLA:CPU
            # partitions waiting in a collective hold threads the others need; two unawaited
            # steps of a partitioned training step deadlock JAX's jit the same way). A program
            # without collectives never waits in a rendezvous, so it runs unserialised.
            outs = spmd.launch_serialised(self._execute, bufs, self._handlers)
        else:
            outs = self._execute(bufs).consume_with_handlers(self._handlers)
        out = []
        for aval, sig, buf in zip(self.out_avals, self._out_sigs, outs):
            a = _new_sharded(ShardedArray)     # no __init__ call: this is the hot path
            a.aval = aval
            a._buf = buf
            a._sig = sig
            out.append(a)
        return out

    def as_text(self):
        """The partitioned HLO XLA compiled (per-device shapes, inserted collectives)."""
        return self.loaded.hlo_modules()[0].to_string()


__all__ = ["SpmdExecutable", "constrained_program", "has_collectives"]
