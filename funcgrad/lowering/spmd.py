"""One XLA program over several devices: compile a per-device Jaxpr for N replicas, run it.

``pmap`` stages its function for one device's slice of the data; that Jaxpr is lowered once
(collectives over the mapped axis name become ``all_reduce``/``all_gather``/... over every
replica, see ``axis_env``) and compiled with ``num_replicas=N``: XLA runs the same program on
each device of ``devices``, and one ``execute_sharded`` call takes one multi-device buffer per
argument and returns one per output (``lowering/sharding.py``'s ``ShardedArray``).

XLA:CPU runs each replica as a task of one thread pool; a replica that waits in a collective
holds its thread, so several multi-device launches in flight at once can leave no thread for
the replicas they wait for. The executable therefore waits for its previous launch before the
next one (``_last``: the launch's token, which is ready once every device finished it, one
wait however many outputs it has): launches stay asynchronous with respect to Python, one
deep. A program
with one replica in this process (one device per process of a multi-process run) holds one
thread at a time, so its launches are queued without that wait (PjRt's CPU client runs
collective launches one at a time, in order).

A jitted function whose Jaxpr holds a ``pmap`` equation at its top level (or a nested ``jit``
holding one) is compiled in pieces (``split_program``): the runs of equations between them as
single-device programs, each ``pmap`` as its own program over its devices. One holding
``shard_map`` equations instead (there, or in loop and branch bodies) runs as one program
partitioned over their mesh (``program_mesh`` finds it; ``spmd_dispatch.py`` compiles and
runs it).
"""
import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, Var, subjaxprs
from funcgrad.core.primitive import rule_table
from funcgrad.lowering import backend, mlir
from funcgrad.lowering.array import Array, _BufferAval
from funcgrad.lowering.executable import (Executable, _option_overrides, compile_closed_jaxpr,
                                          to_buffer)
from funcgrad.lowering.jaxlib_compat import array_result_handler as _result_handler
from funcgrad.lowering.sharding import (ShardedArray, addressable, global_of, mapped_sharding,
                                       process_part, shard_buffers)

_last = [None]     # the token of the latest multi-device launch (see the module docstring)


def wait_for_previous_launch():
    """Wait until every device has finished the latest multi-device launch with collectives."""
    prev = _last[0]
    if prev is not None:
        _last[0] = None
        prev.block_until_ready()


def launch_serialised(execute, bufs, handlers):
    """``execute(bufs)``'s outputs (``consume_with_handlers(handlers)``) once the previous
    launch has finished; this launch becomes the one the next waits for."""
    wait_for_previous_launch()
    results = execute(bufs, True)        # with its token
    _last[0] = results.consume_token()
    return results.consume_with_handlers(handlers)


class ReplicatedExecutable:
    """``closed`` compiled to run once on each of ``devices``. ``in_axes``/``out_axes``: per
    flat input (its consts first, as leading arguments) and output, the axis along which it is split over the devices (size 1 in
    ``closed``'s avals) or None (replicated)."""

    __slots__ = ("loaded", "devices", "in_shardings", "out_avals", "_handlers", "text",
                 "_parts", "_serial")

    def __init__(self, closed, devices, in_axes, out_axes, axis_env, name="pmap", donated=()):
        devices = tuple(devices)
        n = len(devices)
        callbacks = []
        module, ctx = mlir.lower_closed_jaxpr(
            closed, name=name, platform=backend.platform_of(devices[0]), donated=donated,
            axis_env=tuple(axis_env), host_callbacks=callbacks)
        options = xc.CompileOptions()
        options.num_replicas = n
        options.num_partitions = 1
        options.device_assignment = xc.DeviceAssignment.create(
            np.array([[d.id] for d in devices]))
        overrides = _option_overrides(devices[0])
        if overrides:
            options.env_option_overrides = overrides
        device_list = _jax.DeviceList(devices)
        with ctx:
            self.text = str(module)
            if callbacks:
                self.loaded = devices[0].client.compile_and_load(
                    module, device_list, compile_options=options, host_callbacks=callbacks)
            else:
                self.loaded = devices[0].client.compile_and_load(self.text, device_list, options)
        self.devices = devices
        in_avals = [v.aval for v in closed.jaxpr.constvars] + list(closed.in_avals)
        backend.check_program(name, self.text,
                              [global_of(a, ax, n) for a, ax in zip(in_avals, in_axes)], devices)
        self.in_shardings = [mapped_sharding(devices, a.ndim, ax)
                             for a, ax in zip(in_avals, in_axes)]
        # Over several processes' devices each process gets back its own part, as from JAX's
        # pmap: outputs are wrapped over this process's devices directly (reading the buffers
        # of an array over other processes' devices makes jaxlib try to import jax each time).
        mine = addressable(devices)
        # one replica in this process holds one thread at most: its launches need no wait
        # (PjRt's CPU client runs collective launches one at a time, in order)
        self._serial = len(mine) > 1
        self.out_avals = [global_of(a, ax, n) for a, ax in zip(closed.out_avals, out_axes)]
        self._handlers = [_result_handler(_BufferAval(a), mapped_sharding(devices, a.ndim, ax))
                          for a, ax in zip(self.out_avals, out_axes)]
        self._parts = None if len(mine) == n else [
            (global_of(a, ax, len(mine)), mapped_sharding(mine, a.ndim, ax))
            for a, ax in zip(closed.out_avals, out_axes)]

    def __call__(self, bufs):
        """Run on multi-device buffers (one per input, laid out as ``in_shardings``); returns
        ShardedArrays (this process's part when the devices span several processes)."""
        if self._serial:
            outs = launch_serialised(self.loaded.execute_sharded, bufs, self._handlers)
        else:
            outs = self.loaded.execute_sharded(bufs).consume_with_handlers(self._handlers)
        if self._parts is not None:     # as JAX's pmap: each process gets its own part back
            return [process_part(b, a, *part)
                    for b, a, part in zip(outs, self.out_avals, self._parts)]
        return [ShardedArray(a, b) for a, b in zip(self.out_avals, outs)]

    def as_text(self):
        """The optimized HLO that XLA compiled."""
        return self.loaded.hlo_modules()[0].to_string()


# --- jitted functions that hold pmaps: compiled in pieces --------------------------------------
# prim -> rule(eqn) -> bool: whether the equation must run as its own program when it appears at
# the top level of a jitted function (``pmap``; ``jit`` when its body holds such an equation)
own_program_rules = rule_table("own_program")


def runs_in_pieces(closed):
    """Whether a jitted ``closed`` holds, at its top level, an equation that runs as its own
    (multi-device) program."""
    for eqn in closed.jaxpr.eqns:
        rule = own_program_rules.get(eqn.prim)
        if rule is not None and rule(eqn):
            return True
    return False


class _Outputs:
    """What ``execute_sharded`` returns, for a program run in pieces."""

    __slots__ = ("bufs",)

    def __init__(self, bufs):
        self.bufs = bufs

    def consume_with_handlers(self, handlers):
        return self.bufs


class _Pieces:
    """Stands in for a loaded executable: runs a Jaxpr as single-device programs (the runs of
    equations between the ones that run alone) and those equations (pmaps, by their impl)."""

    def __init__(self, closed, device, name):
        jaxpr = closed.jaxpr
        self.device, self.jaxpr = device, jaxpr
        self.in_vars = list(jaxpr.constvars) + list(jaxpr.invars)
        groups = []                 # [alone?, [eqns]]
        for eqn in jaxpr.eqns:
            rule = own_program_rules.get(eqn.prim)
            alone = rule is not None and rule(eqn)
            if alone or not groups or groups[-1][0]:
                groups.append([alone, [eqn]])
            else:
                groups[-1][1].append(eqn)
        needed = {v for v in jaxpr.outvars if type(v) is Var}
        steps = []
        for index, (alone, eqns) in reversed(list(enumerate(groups))):
            if alone:
                steps.append((eqns[0], None, None))
                needed.update(v for v in eqns[0].invars if type(v) is Var)
                continue
            defined = {v for e in eqns for v in e.outvars}
            outs = [v for e in eqns for v in e.outvars if v in needed]
            ins, seen = [], set()
            for e in eqns:
                for v in e.invars:
                    if type(v) is Var and v not in defined and v not in seen:
                        seen.add(v)
                        ins.append(v)
            piece = ClosedJaxpr(Jaxpr([], ins, eqns, outs), [])
            steps.append((compile_closed_jaxpr(piece, device, f"{name}_part{index}"),
                          ins, outs))
            needed.update(ins)
        steps.reverse()
        self.steps = steps

    def hlo_modules(self):
        """The HLO modules of the single-device pieces, in order (each pmap's own program is
        made when it first runs)."""
        return [m for exe, ins, _ in self.steps if ins is not None
                for m in exe.loaded.hlo_modules()]

    def _on_device(self, x):
        """A pmap's output that lies whole on this program's device (a one-device part of a
        multi-process pmap) as a single-device Array, without a trip through the host."""
        if type(x) is ShardedArray:
            s = x._buf._sharding
            if len(s._device_assignment) == 1 and s._device_assignment[0] == self.device:
                return Array(x.aval, shard_buffers(x._buf)[0])
        return x

    def execute_sharded(self, bufs):
        env = {v: Array(v.aval, b) for v, b in zip(self.in_vars, bufs)}

        def read(atom):
            return atom.val if type(atom) is Literal else env[atom]

        for exe, ins, outs in self.steps:
            if ins is None:       # an equation that runs alone
                eqn = exe
                res = eqn.prim.bind(*[read(v) for v in eqn.invars], **eqn.params)
                outs, res = eqn.outvars, res if eqn.prim.multiple_results else [res]
            else:
                res = exe([self._on_device(read(v)) for v in ins])
            env.update(zip(outs, res))
        return _Outputs([to_buffer(read(v), self.device, v.aval) for v in self.jaxpr.outvars])


def split_program(closed, device, name="main", donated=()):
    """``closed`` (a jitted Jaxpr that ``runs_in_pieces``) as an ``Executable`` on ``device``
    whose pmaps run as their own programs over their devices; outputs come back to
    ``device``."""
    in_avals = [v.aval for v in closed.jaxpr.constvars] + closed.in_avals
    return Executable(_Pieces(closed, device, name), device, in_avals, closed.out_avals,
                      str(closed), ())


# --- jitted functions that hold shard_maps: one program over the mesh -------------------------
# prim -> rule(eqn) -> [(mesh, what)] or None: the meshes over whose devices an equation at the
# top level of a plain jit must run (``shard_map``: its own; ``jit``: its body's, None when its
# body runs in pieces). Other equations are searched through the Jaxprs their params carry.
program_mesh_rules = rule_table("program_mesh")


def meshes_in(closed):
    """``[(mesh, what)]`` for the equations of ``closed`` that run over a mesh, wherever they
    lie (at its top level, inside a nested ``jit``, a ``scan``/``while``/``cond`` body, a
    ``remat`` or ``custom_jvp``/``custom_vjp`` body), ``what`` naming each
    (``shard_map(body)``); None when an equation at its top level (or inside a nested ``jit``
    there) runs as its own program without a mesh (a ``pmap``: the jit runs in pieces).

    Example:
        >>> from funcgrad.lowering.spmd import meshes_in
        >>> from funcgrad.sharding import P
        >>> mesh = funcgrad.make_mesh((1,), ("x",), devices=funcgrad.local_devices()[:1])
        >>> sm = funcgrad.shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("x"),
        ...                         out_specs=P("x"))
        >>> def loop(a):
        ...     return lax.fori_loop(0, 3, lambda i, c: sm(c), a)
        >>> meshes_in(funcgrad.make_jaxpr(loop)(jnp.ones(2)))
        [(Mesh('x': 1), 'shard_map(<lambda>)')]
    """
    found = []
    for eqn in closed.jaxpr.eqns:
        rule = program_mesh_rules.get(eqn.prim)
        if rule is not None:
            inner = rule(eqn)
            if inner is None:
                return None
            found += inner
            continue
        alone = own_program_rules.get(eqn.prim)
        if alone is not None and alone(eqn):
            return None
        found += _nested_meshes(eqn)
    return found


def _nested_meshes(eqn):
    """The shard_maps' meshes inside the Jaxprs ``eqn`` carries (loop and branch bodies...),
    which are lowered into the program around them: a ``pmap`` (or a ``jit`` holding one)
    there is computed in it as ``vmap``, so it does not make the program run in pieces."""
    found = []
    for sub in subjaxprs(eqn):
        for inner in sub.eqns:
            rule = program_mesh_rules.get(inner.prim)
            meshes = rule(inner) if rule is not None else None
            found += _nested_meshes(inner) if meshes is None else meshes
    return found


def _mesh_text(mesh):
    return f"{mesh} (devices {[d.id for d in mesh.devices.flat]})"


def program_mesh(closed, name, mesh=None, placed=None):
    """The mesh over which a plain ``jit`` of ``closed`` runs as one partitioned program: that
    of its shard_maps (``meshes_in``), else ``mesh`` (None when there is none, or when it
    holds a ``pmap``: then it runs in pieces). ``mesh``: the arguments' mesh, when they lie
    on one (``placed()`` names them); the shard_maps' must have its devices in its order, as
    must each other's. Errors name the jitted function ``name``, the shard_maps, the meshes and the
    arguments."""
    found = meshes_in(closed)
    if not found:
        return mesh
    order = tuple(found[0][0].devices.flat)
    for m, what in found:
        if tuple(m.devices.flat) != order:
            raise ValueError(
                f"jit({name}): one jitted program runs over one mesh's devices, but "
                f"{found[0][1]} runs over {_mesh_text(found[0][0])} and {what} over "
                f"{_mesh_text(m)}: use one mesh (or meshes of the same devices in the same "
                f"order) for every shard_map of the function")
    if mesh is not None and tuple(mesh.devices.flat) != order:
        raise ValueError(
            f"jit({name}): {found[0][1]} runs over {_mesh_text(found[0][0])}, but the "
            f"arguments lie on {_mesh_text(mesh)} ({', '.join(placed())}); one jitted program "
            f"runs over one mesh's devices: place the arguments on the shard_map's mesh "
            f"(funcgrad.device_put(x, NamedSharding(mesh, spec))) or pass them unplaced")
    return found[0][0]      # outputs come back on the shard_maps' mesh, as in JAX
