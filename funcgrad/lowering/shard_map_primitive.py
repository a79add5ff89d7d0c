"""The ``shard_map`` primitive: a function of per-device blocks over a device mesh, one equation
that every transformation knows how to transform.

``shard_map_p.bind(*operands, jaxpr=body, mesh=, in_specs=, out_specs=, manual_axes=,
check_rep=, name=)``. ``body`` (a ClosedJaxpr without consts) computes one device's output
blocks from its operand blocks: each operand's block is its global shape with every dimension
divided by the sizes of the ``manual_axes`` its ``PartitionSpec`` names; an output's global
shape is its block's multiplied the same way by its out spec. Mesh axes a spec does not name
replicate the value over them.

- lowering, in a program partitioned over the mesh (``jit`` with shardings, or the eager
  call): a manual region, as XLA's SPMD partitioner expects it. Each operand goes through
  ``custom_call @Sharding`` (its spec's sharding) and ``@SPMDFullToShardShape`` (manual
  sharding: from here every partition holds its block); the body is lowered inline with the
  manual axes bound (``lax.mesh_axes.MeshAxisEnv``: collectives over them address the
  partitions of the mesh with device-id groups); each output goes back through
  ``@Sharding`` (manual) and ``@SPMDShardToFullShape`` (its out spec's sharding).
- lowering into a single-device program (a loop body of a ``jit`` split in pieces by a
  ``pmap``): the same values computed on that device, the body batched over each manual axis
  as ``vmap`` with its name.
- impl (eager): a jitted program over the mesh with the specs' shardings (``spmd_dispatch``). A
  plain ``jit`` holding the equation (loop and branch bodies included) is one program over
  the mesh (``program_mesh``); only beside a ``pmap`` does it run as a program of its own
  (``own_program``, as ``pmap``).
- types (``check_rep``/``check_vma=True``): the body's values are typed by the manual axes
  they vary over (``aval.vma``, ``core/vma.py``; the body's operands by the axes their specs
  name), with ``pvary`` where a replicated operand meets a varying one; every rule below
  stages its bodies typed the same way.
- jvp: two shard_maps, the known half of the body's JVP (primal outputs and residuals, each
  device's residual a block of a value split over the manual axes it varies over) and the
  linear half.
- transpose: a shard_map of the transposed body. Typed: the cotangents cross the boundary as
  they are (inside, ``pvary`` transposes to ``psum`` and ``psum`` to ``pvary``), as JAX's
  ``check_vma=True``. Unchecked: an output replicated over manual axes hands each device its
  cotangent divided by their size, and an operand replicated over manual axes gets the
  ``psum`` of the devices' cotangents over them, as JAX's ``check_vma=False``.
- batch (``vmap`` of ``shard_map``): the vmap axis becomes a leading dimension no mesh axis
  splits (``None`` prepended to the specs), the body is batched.
- dce: unused outputs (then operands) of the body are pruned.

Example:
    >>> from funcgrad.sharding import P
    >>> mesh = funcgrad.make_mesh((1,), ("x",), devices=funcgrad.local_devices()[:1])
    >>> f = funcgrad.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
    ...                        out_specs=P())
    >>> print(funcgrad.make_jaxpr(f)(jnp.ones(2)))
    { lambda ; a:f32[2]. let
        b:f32[2] = shard_map[jaxpr=
            { lambda ; a:f32[2]{V:x}. let
                b:f32[2] = psum[axis_name=('x',)] a
              in (b,) } mesh=Mesh('x': 1) in_specs=(PartitionSpec('x'),) out_specs=(PartitionSpec(),) manual_axes=('x',) check_rep=True name='<lambda>'] a
      in (b,) }
"""
import contextlib
import math
import weakref

import numpy as np

from funcgrad.core import ad, batching, dtypes, vma
from funcgrad.core.ad_util import Zero
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching_util import batch_size, bdim_to_front, not_mapped
from funcgrad.core.jaxpr import Literal, consts_as_args
from funcgrad.core.primitive import Primitive
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.lax import _hlo
from funcgrad.lax import elementwise as ew
from funcgrad.lax import shapes
from funcgrad.lax.mesh_axes import is_partitioned, spmd_custom_call
from funcgrad.lax.parallel import psum_p
from funcgrad.lowering import mlir
from funcgrad.lowering.dispatch import _linearize_body
from funcgrad.lowering.mesh import NamedSharding, PartitionSpec, spec_hlo_sharding
from funcgrad.lowering.shard_map_replication import replicated_axes, replication_env
from funcgrad.lowering.pmap_primitive import (body_dce_rule, bound_axis, transpose_flags,
                                              transposed_call)

P = PartitionSpec


# --- blocks and global shapes ----------------------------------------------------------------
def manual_splits(mesh, spec, manual, ndim):
    """Per dimension, into how many blocks the manual axes ``spec`` names split it.

    Example:
        >>> from funcgrad.lowering.shard_map_primitive import manual_splits
        >>> from funcgrad.sharding import Mesh, P
        >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]).reshape(1, 1), ("a", "b"))
        >>> manual_splits(mesh, P(("a", "b"), None), ("a", "b"), 3)
        [1, 1, 1]
    """
    sizes = mesh.shape
    return [math.prod(sizes[a] for a in spec.axes_of(d) if a in manual) for d in range(ndim)]


def block_aval(aval, mesh, spec, manual, typed=False):
    """The aval of one device's block of a value of ``aval`` laid out by ``spec`` (the
    inverse of ``global_aval``); ``typed``: varying over the manual axes ``spec`` names
    (its type in a body with ``check_vma=True``)."""
    splits = manual_splits(mesh, spec, manual, aval.ndim)
    return ShapedArray(tuple(s // n for s, n in zip(aval.shape, splits)), aval.dtype,
                       aval.weak_type, spec_named(spec, manual) if typed else frozenset())


def global_aval(aval, mesh, spec, manual):
    """The aval of the whole value whose blocks have ``aval``, laid out by ``spec``."""
    splits = manual_splits(mesh, spec, manual, aval.ndim)
    return ShapedArray(tuple(s * n for s, n in zip(aval.shape, splits)), aval.dtype,
                       aval.weak_type)


def bind_mesh_axes(mesh, manual, typed=False):
    """A context manager binding each manual axis name to its size (for ``lax.axis_size``
    and the collectives while a body is staged or transformed), values typed by the manual
    axes they vary over if ``typed`` (``check_vma=True``; ``core/vma.py``)."""
    stack = contextlib.ExitStack()
    for a in mesh.axis_names:
        if a in manual:
            stack.enter_context(bound_axis(a, mesh.shape[a]))
    stack.enter_context(vma.typing(manual if typed else ()))
    return stack


def spec_unnamed(spec, manual):
    """The manual axes ``spec`` does not name: those the value is replicated over.

    Example:
        >>> from funcgrad.lowering.shard_map_primitive import spec_unnamed
        >>> from funcgrad.sharding import P
        >>> spec_unnamed(P(None, "model"), ("data", "model"))
        ('data',)
    """
    named = {a for d in range(len(spec)) for a in spec.axes_of(d)}
    return tuple(a for a in manual if a not in named)


def spec_named(spec, manual):
    """The manual axes ``spec`` names, as a frozenset: the axes such a block varies over."""
    return frozenset(manual) - frozenset(spec_unnamed(spec, manual))


# --- the primitive ---------------------------------------------------------------------------
shard_map_p = Primitive("shard_map", multiple_results=True)


@shard_map_p.def_abstract_eval
def _abstract(*avals, jaxpr, mesh, in_specs, out_specs, manual_axes, check_rep, name):
    for i, (a, s, want) in enumerate(zip(avals, in_specs, jaxpr.in_avals)):
        got = block_aval(a, mesh, s, manual_axes)
        if got.shape != want.shape or got.dtype != want.dtype:
            raise TypeError(f"shard_map({name}): operand {i} {a.str_short()} with spec {s} has "
                            f"blocks {got.str_short()} over {mesh}, but the body takes "
                            f"{want.str_short()}")
    return [global_aval(a, mesh, s, manual_axes) for a, s in zip(jaxpr.out_avals, out_specs)]


def _bind_like(params, operands, jaxpr, in_specs, out_specs, name=None):
    return shard_map_p.bind(*operands, jaxpr=jaxpr, mesh=params["mesh"],
                            in_specs=tuple(in_specs), out_specs=tuple(out_specs),
                            manual_axes=params["manual_axes"], check_rep=params["check_rep"],
                            name=name or params["name"])


def stage_body(fun, in_avals, mesh, manual, name, typed=False):
    """``fun`` (flat blocks -> flat blocks) staged with the manual axes bound (values typed
    by their varying axes if ``typed``; the avals' ``vma`` gives the inputs'): (body,
    consts)."""
    with bind_mesh_axes(mesh, manual, typed):
        closed, _ = trace_to_jaxpr(fun, list(in_avals), debug_name=name)
    return consts_as_args(closed)


# --- impl: a program over the mesh -----------------------------------------------------------
_programs = weakref.WeakKeyDictionary()     # body -> {(mesh, specs...): JitFunction}


@shard_map_p.def_impl
def _impl(*args, **params):
    from funcgrad.lowering.dispatch import JitFunction
    body = params["jaxpr"]
    per_body = _programs.setdefault(body, {})
    key = tuple(sorted((k, v) for k, v in params.items() if k != "jaxpr"))
    program = per_body.get(key)
    if program is None:
        mesh = params["mesh"]
        in_specs = params["in_specs"] or (P(),)     # the jitted program takes one argument

        def run(*xs):
            return shard_map_p.bind(*xs[:len(params["in_specs"])], **params)
        run.__name__ = f"shard_map_{params['name']}"
        program = per_body[key] = JitFunction(
            run, in_shardings=tuple(NamedSharding(mesh, s) for s in in_specs),
            out_shardings=tuple(NamedSharding(mesh, s) for s in params["out_specs"]))
    return program(*(args or (np.int32(0),)))


# --- lowering --------------------------------------------------------------------------------
def _lower_region(ctx, args, jaxpr, mesh, in_specs, out_specs, manual_axes, name):
    env = ctx.axis_env
    mesh_ids = tuple(d.id for d in mesh.devices.flat)
    if env.device_ids is not None and env.device_ids != mesh_ids:
        raise ValueError(f"shard_map({name}): its mesh {mesh} has devices {list(mesh_ids)} (in "
                         f"mesh order), but the program it is part of runs on devices "
                         f"{list(env.device_ids)}: use one mesh for the jit's shardings and "
                         f"the shard_map")
    inner = env.with_manual(mesh.axis_names, mesh.axis_sizes, manual_axes)
    partial = len(manual_axes) < len(mesh.axis_names)
    trivial = math.prod(mesh.shape[a] for a in manual_axes) == 1
    ins = []
    for x, a_in, block, spec in zip(args, ctx.avals_in, jaxpr.in_avals, in_specs):
        if not trivial:
            free = list(range(a_in.ndim)) if partial else []
            x = spmd_custom_call("Sharding", x, _hlo.ir_type(a_in),
                                 spec_hlo_sharding(mesh, spec, a_in.ndim), free)
            x = spmd_custom_call("SPMDFullToShardShape", x, _hlo.ir_type(block),
                                 inner.manual_sharding(a_in.ndim), free)
        ins.append(x)
    outs = mlir.lower_jaxpr_inline(ctx.module, jaxpr.jaxpr, [], ins, ctx.platform, inner,
                                   ctx.host_callbacks)
    if trivial:
        return outs
    results = []
    for y, block, a_out, spec in zip(outs, jaxpr.out_avals, ctx.avals_out, out_specs):
        free = list(range(a_out.ndim)) if partial else []
        y = spmd_custom_call("Sharding", y, _hlo.ir_type(block),
                             inner.manual_sharding(block.ndim), free)
        results.append(spmd_custom_call("SPMDShardToFullShape", y, _hlo.ir_type(a_out),
                                        spec_hlo_sharding(mesh, spec, a_out.ndim), free))
    return results


def _emulated(ctx, args, jaxpr, mesh, in_specs, out_specs, manual_axes, name):
    """The region's values on one device: the body batched over every manual axis (as vmap
    with the axis's name), operands cut into their blocks and outputs put back together."""
    axes = [a for a in mesh.axis_names if a in manual_axes]
    sizes = mesh.shape

    with bind_mesh_axes(mesh, manual_axes):
        batched = jaxpr
        for a in reversed(axes):        # the innermost axis first
            dims = [0 if a in _named(s) else None for s in in_specs]
            batched, _ = batching.batch_jaxpr(batched, sizes[a], dims, 0, axis_name=a)

    def split(x, spec, block):
        # (..., d, ...) -> (axes named by spec, in mesh order) + block shape
        shape, lead = [], []
        for d, n in enumerate(block.shape):
            for a in spec.axes_of(d):
                if a in manual_axes:
                    lead.append((a, len(shape)))
                    shape.append(sizes[a])
            shape.append(n)
        x = shapes.reshape(x, shape)
        lead.sort(key=lambda t: axes.index(t[0]))
        front = [i for _, i in lead]
        return shapes.transpose(x, front + [i for i in range(len(shape)) if i not in front])

    def join(y, spec, block):
        # (every manual axis, in mesh order) + block shape -> the global value
        k = len(axes)
        keep = [a for a in axes if a in _named(spec)]
        y = shapes.transpose(y, [axes.index(a) for a in axes if a not in keep]
                             + [axes.index(a) for a in keep] + list(range(k, k + block.ndim)))
        for _ in range(k - len(keep)):      # replicated over these axes: device 0's value
            y = shapes.index_in_dim(y, 0, 0, keepdims=False)
        perm, shape = [], []
        for d, n in enumerate(block.shape):
            order = [a for a in spec.axes_of(d) if a in manual_axes]
            perm += [keep.index(a) for a in order] + [len(keep) + d]
            shape.append(n * math.prod(sizes[a] for a in order))
        return shapes.reshape(shapes.transpose(y, perm), shape)

    def fn(*xs):
        blocks = [split(x, s, b) for x, s, b in zip(xs, in_specs, jaxpr.in_avals)]
        outs = batched(*blocks)
        return [join(y, s, b) for y, s, b in zip(outs, out_specs, jaxpr.out_avals)]

    return ctx.lower_fun(fn, args, name=f"shard_map_{name}")


def _named(spec):
    return {a for d in range(len(spec)) for a in spec.axes_of(d)}


@shard_map_p.def_lowering
def _lowering(ctx, *args, jaxpr, mesh, in_specs, out_specs, manual_axes, check_rep, name):
    if is_partitioned(ctx.axis_env):
        return _lower_region(ctx, args, jaxpr, mesh, in_specs, out_specs, manual_axes, name)
    return _emulated(ctx, args, jaxpr, mesh, in_specs, out_specs, manual_axes, name)


# --- jvp: the known and the linear halves ----------------------------------------------------
_jvp_cache = weakref.WeakKeyDictionary()


def _residual_specs(known, n_consts, in_specs, n_out, manual, typed):
    """The spec of each residual of ``known`` (given a leading unit dimension): split over
    the manual axes it varies over (its type where ``typed``), so that the linear half knows
    it is replicated over the others (and nothing is stored twice)."""
    if typed:
        varying = [a.vma for a in known.out_avals[n_out:]]
    else:
        in_reps = [frozenset(manual)] * n_consts + [frozenset(spec_unnamed(s, manual))
                                                    for s in in_specs]
        reps = replicated_axes(known.jaxpr, in_reps, manual)[n_out:]
        varying = [frozenset(manual) - r for r in reps]
    return tuple(P(tuple(a for a in manual if a in v) or None) for v in varying)


def _expand_residuals(known, n_out, mesh, manual, name, typed):
    """``known`` with each residual (a per-device block) given a leading unit dimension, so
    that it leaves the region as one block of a value split over the axes it varies over."""
    def fun(*xs):
        outs = known(*xs)
        return list(outs[:n_out]) + [shapes.expand_dims(r, (0,)) for r in outs[n_out:]]
    body, consts = stage_body(fun, known.in_avals, mesh, manual, f"jvp_known({name})", typed)
    assert not consts
    return body


def _squeeze_residuals(linear, n_static, n_res, mesh, manual, name, typed):
    in_avals = list(linear.in_avals)
    for i in range(n_static, n_static + n_res):
        a = in_avals[i]
        in_avals[i] = a.update(shape=(1,) + tuple(a.shape))

    def fun(*xs):
        xs = list(xs)
        for i in range(n_static, n_static + n_res):
            xs[i] = shapes.squeeze(xs[i], (0,))
        return linear(*xs)
    body, consts = stage_body(fun, in_avals, mesh, manual, f"jvp_linear({name})", typed)
    assert not consts
    return body


def _jvp(primals, tangents, **params):
    jaxpr, in_specs, out_specs, name = (params["jaxpr"], params["in_specs"],
                                        params["out_specs"], params["name"])
    mesh, manual, typed = params["mesh"], params["manual_axes"], params["check_rep"]
    in_nz = tuple(type(t) is not Zero and dtypes.is_inexact(a.dtype)
                  for t, a in zip(tangents, jaxpr.in_avals))
    per_body = _jvp_cache.setdefault(jaxpr, {})    # the residuals' specs depend on the specs
    key = (in_nz, in_specs, mesh, manual, typed)
    entry = per_body.get(key)
    if entry is None:
        with bind_mesh_axes(mesh, manual, typed):
            known, known_consts, n_out, linear, static_vals, out_nz, t_avals = \
                _linearize_body(jaxpr, in_nz)
        n_res = len(known.out_avals) - n_out
        res_specs = _residual_specs(known, len(known_consts), in_specs, n_out, manual, typed)
        known = _expand_residuals(known, n_out, mesh, manual, name, typed)
        linear = _squeeze_residuals(linear, len(static_vals), n_res, mesh, manual, name,
                                    typed)
        entry = per_body[key] = (known, known_consts, n_out, res_specs, linear, static_vals,
                                   out_nz, t_avals)
    known, known_consts, n_out, res_specs, linear, static_vals, out_nz, t_avals = entry
    outs = _bind_like(params, [*known_consts, *primals], known,
                      (P(),) * len(known_consts) + in_specs, out_specs + res_specs)
    primal_outs, res = outs[:n_out], outs[n_out:]
    zeros = [Zero(global_aval(a, mesh, s, manual)) for a, s in zip(t_avals, out_specs)]
    if not any(out_nz):
        return primal_outs, zeros
    nz_tangents = [ad.cast_like(t, a) for t, a, nz in zip(tangents, jaxpr.in_avals, in_nz) if nz]
    lin_in = ((P(),) * len(static_vals) + res_specs
              + tuple(s for s, nz in zip(in_specs, in_nz) if nz))
    lin_out = tuple(s for s, nz in zip(out_specs, out_nz) if nz)
    t_outs = iter(_bind_like(params, [*static_vals, *res, *nz_tangents], linear, lin_in, lin_out,
                             f"jvp({name})"))
    return primal_outs, [next(t_outs) if nz else z for nz, z in zip(out_nz, zeros)]


shard_map_p.def_jvp(_jvp)


# --- transpose -------------------------------------------------------------------------------
_transpose_cache = weakref.WeakKeyDictionary()


def _transposed_body(jaxpr, linear, cts_nz, in_specs, out_specs, mesh, manual, name, typed):
    """The body of the transposed shard_map. Unchecked (as JAX's ``check_vma=False``): an
    output replicated over manual axes hands each device its cotangent divided by their
    size, and an operand replicated over some gets the ``psum`` of the devices' cotangents.
    Typed: the cotangents are taken as they are (the body's ``pvary``/``psum`` transposes
    did the sums), except over axes an output's type varies over that its spec does not
    name (a value replicated without the type saying so, e.g. from ``all_gather``)."""
    with bind_mesh_axes(mesh, manual, typed):
        t = ad.transpose_jaxpr(jaxpr, linear, cts_nz)
    n_nonlin = sum(not lin for lin in linear)
    ct_specs = [s for s, nz in zip(out_specs, cts_nz) if nz]
    ct_types = [a.vma for a, nz in zip(jaxpr.out_avals, cts_nz) if nz]
    lin_specs = [s for s, lin in zip(in_specs, linear) if lin]

    def fun(*args):
        cts = []
        for c, s, v in zip(args[n_nonlin:], ct_specs, ct_types):
            rep = [a for a in spec_unnamed(s, manual) if not typed or a in v]
            n = math.prod(mesh.shape[a] for a in rep)
            c = c if n == 1 else ew.mul(c, np.asarray(1 / n, c.dtype))
            if typed:   # an output stacked over axes its value does not vary over
                stacked = tuple(a for a in manual if a in spec_named(s, manual) - v)
                c = vma.vary(psum_p.bind(c, axis_name=stacked) if stacked else c, v)
            cts.append(c)
        outs = t(*args[:n_nonlin], *cts)
        res = []
        for o, s in zip(outs, lin_specs):
            rep = tuple(a for a in spec_unnamed(s, manual)
                        if not typed or a in vma.vma_of(o))
            o = psum_p.bind(o, axis_name=rep) if rep else o
            res.append(vma.vary(o, spec_named(s, manual)) if typed else o)
        return res

    in_avals = list(t.in_avals)
    if typed:   # the non-linear operands and the cotangents typed by their specs
        specs = [s for s, lin in zip(in_specs, linear) if not lin] + ct_specs
        in_avals = [a.update(vma=spec_named(s, manual)) for a, s in zip(in_avals, specs)]
    body, consts = stage_body(fun, in_avals, mesh, manual, f"transpose({name})", typed)
    if typed:
        return body, consts
    specs = ([P()] * len(consts) + [s for s, lin in zip(in_specs, linear) if not lin]
             + ct_specs)
    return _psums_of_replicated_values(body, specs, mesh, manual), consts


def _psums_of_replicated_values(body, specs, mesh, manual):
    """``body`` with each ``psum`` of a value already replicated over its axes replaced by a
    multiplication by their size (the same number, no communication). Transposed bodies
    have such psums wherever the forward pass summed into a replicated value: the cotangent
    of that value is split over the devices and the transposed ``psum`` adds the parts."""
    in_reps = [frozenset(spec_unnamed(s, manual)) for s in specs]
    reps = replication_env(body.jaxpr, in_reps, manual)
    redundant = {id(e) for e in body.jaxpr.eqns
                 if e.prim is psum_p and type(e.invars[0]) is not Literal
                 and set(e.params["axis_name"]) <= reps.get(e.invars[0], frozenset())}
    if not redundant:
        return body

    def fun(*args):
        env = dict(zip(body.jaxpr.invars, args))

        def read(atom):
            return atom.val if type(atom) is Literal else env[atom]
        for eqn in body.jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            if id(eqn) in redundant:
                n = math.prod(mesh.shape[a] for a in eqn.params["axis_name"])
                outs = [ew.mul(ins[0], float(n) if dtypes.is_inexact(eqn.invars[0].aval.dtype)
                               else n)]
            else:
                outs = eqn.prim.bind(*ins, **eqn.params)
                outs = outs if eqn.prim.multiple_results else [outs]
            env.update(zip(eqn.outvars, outs))
        return [read(v) for v in body.jaxpr.outvars]

    new, consts = stage_body(fun, body.in_avals, mesh, manual, "transpose")
    assert not consts
    return new


def _transpose(cts, *args, **params):
    jaxpr, in_specs, out_specs = params["jaxpr"], params["in_specs"], params["out_specs"]
    mesh, manual, typed = params["mesh"], params["manual_axes"], params["check_rep"]
    per_body = _transpose_cache.setdefault(jaxpr, {})    # per specs, then per flags
    linear, cts_nz, entry = transpose_flags(
        per_body, (in_specs, out_specs, mesh, manual, typed), cts, args,
        lambda lin, nz: _transposed_body(jaxpr, lin, nz, in_specs, out_specs, mesh, manual,
                                         params["name"], typed))
    if entry is None:
        return [Zero(a.aval) if lin else None for a, lin in zip(args, linear)]
    body, consts = entry
    ct_avals = [global_aval(a, mesh, s, manual) for a, s in zip(jaxpr.out_avals, out_specs)]
    operands, t_in, t_out = transposed_call(cts, args, linear, cts_nz, consts, ct_avals,
                                            in_specs, out_specs, P())
    outs = iter(_bind_like(params, operands, body, t_in, t_out,
                           f"transpose({params['name']})"))
    return [next(outs) if lin else None for lin in linear]


shard_map_p.def_transpose(_transpose)


# --- batch: vmap of shard_map ----------------------------------------------------------------
def _shift(spec):
    return P(None, *spec)


def _batch(args, dims, **params):
    jaxpr, in_specs, out_specs = params["jaxpr"], params["in_specs"], params["out_specs"]
    mesh, manual = params["mesh"], params["manual_axes"]
    size = batch_size(args, dims)
    moved = [a if d is not_mapped else bdim_to_front(a, d) for a, d in zip(args, dims)]
    body_dims = [None if d is not_mapped else 0 for d in dims]
    with bind_mesh_axes(mesh, manual, params["check_rep"]):
        _, natural = batching.batch_jaxpr(jaxpr, size, body_dims)
        forced = [None if d is None else 0 for d in natural]
        batched, out_dims = batching.batch_jaxpr(jaxpr, size, body_dims, forced)
    body, consts = consts_as_args(batched)
    new_in = (P(),) * len(consts) + tuple(s if d is not_mapped else _shift(s)
                                          for s, d in zip(in_specs, dims))
    new_out = tuple(s if d is None else _shift(s) for s, d in zip(out_specs, out_dims))
    outs = _bind_like(params, [*consts, *moved], body, new_in, new_out)
    return outs, [not_mapped if d is None else 0 for d in out_dims]


shard_map_p.def_batch(_batch)


# --- dce: unused outputs, then unread operands, pruned ----------------------------------------
shard_map_p.def_rule("dce", body_dce_rule(("in_specs",), ("out_specs",)))
# A plain jit holding a shard_map (at its top level, or in a nested jit) is compiled as one
# program partitioned over its mesh (``spmd.program_mesh``); where that jit also holds a pmap,
# the shard_map runs as its own program over its mesh, as a pmap does (``spmd.split_program``).
shard_map_p.def_rule("program_mesh",
                     lambda eqn: [(eqn.params["mesh"], f"shard_map({eqn.params['name']})")])
shard_map_p.def_rule("own_program", lambda eqn: True)

__all__ = ["shard_map_p", "block_aval", "global_aval", "manual_splits",
           "stage_body", "bind_mesh_axes", "spec_unnamed", "spec_named"]
