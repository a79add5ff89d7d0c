"""The ``pmap`` primitive: a function mapped over an axis, one slice per device, as a single
equation that every transformation knows how to transform.

``pmap_p.bind(*operands, jaxpr=body, axis_name=, axis_size=, devices=, in_axes=, out_axes=,
name=, donated=)``. ``body`` (a ClosedJaxpr without consts) computes one device's outputs from
one device's operands, with the mapped axis removed; ``in_axes``/``out_axes`` give, per operand
and per output, the axis of the whole value that is split over the devices (None: every device
gets the whole operand / every device computes the same output). ``devices`` is a tuple of
devices or None (the first ``axis_size`` local devices). The rules:

- impl: the body compiled once for ``num_replicas = axis_size`` and run in one call on all
  devices (``spmd.ReplicatedExecutable``); operands already split that way are used in place.
- jvp: two pmaps over the same devices, the known half of the body's JVP (primal outputs and
  residuals, which stay on their devices) and the linear half (residuals and tangents to output
  tangents). Under ``grad`` the first runs now and the second is staged, then transposed.
- transpose: a pmap of the transposed body over the same devices. Collectives transpose per
  device (``psum`` of cotangents, ``all_gather`` <-> ``psum_scatter``, ``ppermute`` <-> the
  inverse permutation, ``all_to_all`` with its axes swapped). A replicated output
  (``out_axes=None``) hands each device 1/N of its cotangent and a replicated operand's
  cotangent is the ``psum`` of the devices' cotangents, so ``psum`` followed by a replicated
  output transposes to a broadcast.
- batch (``vmap`` of ``pmap``): the vmap axis becomes an array axis of every device's operands
  (the body is batched, collectives over the vmap's name become array operations there).
- dce: unused outputs (and then operands) of the body are pruned.
- lowering: a pmap equation lowered into a larger program (inside another pmap's body, or in a
  loop or branch body under ``jit``) computes the same values as ``vmap`` with the axis name,
  on that program's device. At the top level of a jitted function (``own_program`` rule) it
  runs as its own multi-device program instead (``spmd.split_program``).

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> from funcgrad import lax
    >>> f = funcgrad.pmap(lambda x: x * lax.psum(x, "i"), axis_name="i")
    >>> print(funcgrad.make_jaxpr(f)(jnp.arange(2.0)))
    { lambda ; a:f32[2]. let
        b:f32[2] = pmap[jaxpr=
            { lambda ; a:f32[]. let
                b:f32[] = psum[axis_name=('i',)] a
                c:f32[] = mul a b
              in (c,) } axis_name='i' axis_size=2 devices=None in_axes=(0,) out_axes=(0,) name='<lambda>' donated=(False,)] a
      in (b,) }
"""
import contextlib
import weakref

import numpy as np

from funcgrad.core import ad, batching, dtypes, interpreters
from funcgrad.core.ad_util import Zero, is_undefined_primal
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching import AxisData
from funcgrad.core.batching_util import batch_size, not_mapped
from funcgrad.core.dce import dce_jaxpr
from funcgrad.core.interpreters import Interpreter
from funcgrad.core.jaxpr import ClosedJaxpr, Eqn, consts_as_args
from funcgrad.core.primitive import Primitive
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.lax import elementwise as ew
from funcgrad.lax.parallel import psum_p
from funcgrad.lax.shapes import expand_dims, index_in_dim, squeeze
from funcgrad.lowering import backend
from funcgrad.lowering.dispatch import _linearize_body, jit_p
from funcgrad.lowering.sharding import addressable, shard_value
from funcgrad.lowering.spmd import ReplicatedExecutable, runs_in_pieces


# --- the device axis while a body is staged or transformed ----------------------------------
class DeviceAxis(Interpreter):
    """Binds a pmap axis name while its body is staged or transformed: collectives find the
    axis size here (``lax.axis_size``); every primitive goes on to the interpreter below."""

    def __init__(self, parent, name, size):
        self.parent = parent
        self.axis = AxisData(name, size)
        self.debug_name = "pmap"

    def process_primitive(self, prim, args, params):
        return self.forward_to_parent(prim, args, params)


@contextlib.contextmanager
def bound_axis(name, size):
    """Bind the device axis ``name`` of ``size`` members inside the ``with`` block."""
    with interpreters.using(DeviceAxis(interpreters.current(), name, size)) as frame:
        yield frame


def unmapped_aval(aval, axis, size):
    """The aval of a whole value whose per-device part is ``aval`` (``axis`` None: the same)."""
    if axis is None:
        return aval
    shape = list(aval.shape)
    shape.insert(axis, size)
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type)


def resolve_devices(devices, size, name, backend_name=None):
    """The devices a pmap whose mapped axis has ``size`` entries in this process runs on.

    ``devices`` None: the first ``size`` local devices of ``backend_name`` (default: the
    default backend) and, in a multi-process run, the first ``size`` devices of every other
    process too, grouped by process (as JAX orders them): each process feeds its own ``size``
    entries. Given ``devices``, ``size`` must be the number of them that are this process's.
    """
    if devices is None:
        available = backend.local_devices(backend_name)
        if size > len(available):
            raise ValueError(
                f"pmap({name}): the mapped axis has size {size} but only {len(available)} "
                f"device(s) exist ({available}); set FUNCGRAD_CPU_DEVICES={size} (host CPU "
                f"devices) before funcgrad starts, or map over at most {len(available)} entries")
        if backend.distributed_runtime() is None:
            return tuple(available[:size])
        by_process = {}
        for d in backend.devices(backend_name):
            by_process.setdefault(d.process_index, []).append(d)
        return tuple(d for p in sorted(by_process) for d in by_process[p][:size])
    local = addressable(devices)
    if len(local) != size:
        mine = "" if len(local) == len(devices) else " of this process"
        raise ValueError(f"pmap({name}): the mapped axis has size {size} but devices= names "
                         f"{len(local)} device(s){mine}")
    return tuple(devices)


def axis_extent(params):
    """The number of members of a pmap equation's axis over all processes: the size of its
    collectives (its ``axis_size`` counts this process's entries only)."""
    devices = params["devices"]
    return len(devices) if devices is not None else params["axis_size"]


_operand_bodies = weakref.WeakKeyDictionary()     # ClosedJaxpr -> (body without consts, consts)


def as_operands(closed):
    """``consts_as_args(closed)``, cached per Jaxpr so that the body (the key of compiled
    programs) is the same object for every call."""
    entry = _operand_bodies.get(closed)
    if entry is None:
        entry = _operand_bodies[closed] = consts_as_args(closed)
    return entry


# --- the primitive ---------------------------------------------------------------------------
pmap_p = Primitive("pmap", multiple_results=True)


@pmap_p.def_abstract_eval
def _pmap_abstract(*avals, jaxpr, axis_name, axis_size, devices, in_axes, out_axes, name,
                   donated):
    for i, (a, ax, want) in enumerate(zip(avals, in_axes, jaxpr.in_avals)):
        if (ax is not None and (ax >= a.ndim or a.shape[ax] != axis_size)) or (
                ax is None and a.shape != want.shape) or (
                ax is not None and a.shape[:ax] + a.shape[ax + 1:] != want.shape):
            raise TypeError(f"pmap({name}): operand {i} {a.str_short()} with in_axes {ax} does "
                            f"not match the body's {want.str_short()} over {axis_size} devices")
    return [unmapped_aval(a, ax, axis_size) for a, ax in zip(jaxpr.out_avals, out_axes)]


def _bind_like(params, operands, jaxpr, in_axes, out_axes, name):
    """``pmap_p`` over the same axis and devices as ``params``, with a new body."""
    return pmap_p.bind(*operands, jaxpr=jaxpr, axis_name=params["axis_name"],
                       axis_size=params["axis_size"], devices=params["devices"],
                       in_axes=tuple(in_axes), out_axes=tuple(out_axes), name=name,
                       donated=(False,) * len(operands))


# --- impl: one program over the devices ------------------------------------------------------
_executables = weakref.WeakKeyDictionary()   # body -> {(devices, axes, donated): entry}


def executable_for(jaxpr, devices, in_axes, out_axes, axis_name, name, donated=()):
    """(ReplicatedExecutable, replicated const Arrays) running ``jaxpr`` (a per-device body)
    on ``devices``: the program takes each operand's size-1 slice along its in_axis and returns
    each output with a size-1 axis at its out_axis. Cached per body."""
    per_body = _executables.get(jaxpr)
    if per_body is None:
        per_body = _executables[jaxpr] = {}
    key = (devices, in_axes, out_axes, tuple(donated))
    entry = per_body.get(key)
    if entry is not None:
        return entry
    n = len(devices)
    slice_avals = [unmapped_aval(a, ax, 1) for a, ax in zip(jaxpr.in_avals, in_axes)]

    def per_device(*shards):
        vals = [s if ax is None else squeeze(s, (ax,)) for s, ax in zip(shards, in_axes)]
        outs = jaxpr(*vals)
        return [o if ax is None else expand_dims(o, (ax,)) for o, ax in zip(outs, out_axes)]

    with bound_axis(axis_name, n):
        closed, _ = trace_to_jaxpr(per_device, slice_avals, debug_name=name)
    consts = [shard_value(c, devices, None, f"pmap({name})") for c in closed.consts]
    flags = list(donated) if any(donated) else [False] * len(in_axes)
    exe = ReplicatedExecutable(closed, devices, [None] * len(consts) + list(in_axes),
                               list(out_axes), ((axis_name, n),), name=f"pmap_{name}",
                               donated=flags)
    entry = per_body[key] = (exe, consts)
    return entry


@pmap_p.def_impl
def _pmap_impl(*args, jaxpr, axis_name, axis_size, devices, in_axes, out_axes, name, donated):
    devices = resolve_devices(devices, axis_size, name)
    exe, consts = executable_for(jaxpr, devices, in_axes, out_axes, axis_name, name, donated)
    where = f"pmap({name})"
    bufs = [c._buf for c in consts]
    bufs.extend(shard_value(a, devices, ax, where)._buf for a, ax in zip(args, in_axes))
    return exe(bufs)


# --- jvp: the known and the linear halves, each a pmap ---------------------------------------
_jvp_cache = weakref.WeakKeyDictionary()      # body -> {in_nz: split JVP}


def _pmap_jvp(primals, tangents, **params):
    jaxpr, in_axes, out_axes, name = (params["jaxpr"], params["in_axes"], params["out_axes"],
                                      params["name"])
    n = params["axis_size"]
    in_nz = tuple(type(t) is not Zero and dtypes.is_inexact(a.dtype)
                  for t, a in zip(tangents, jaxpr.in_avals))
    per_body = _jvp_cache.setdefault(jaxpr, {})
    entry = per_body.get(in_nz)
    if entry is None:
        with bound_axis(params["axis_name"], axis_extent(params)):
            entry = per_body[in_nz] = _linearize_body(jaxpr, in_nz)
    known, known_consts, n_out, linear, static_vals, out_nz, t_avals = entry
    n_res = len(known.out_avals) - n_out
    outs = _bind_like(params, [*known_consts, *primals], known,
                      (None,) * len(known_consts) + in_axes, out_axes + (0,) * n_res, name)
    primal_outs, res = outs[:n_out], outs[n_out:]
    if not any(out_nz):
        return primal_outs, [Zero(unmapped_aval(a, ax, n)) for a, ax in zip(t_avals, out_axes)]
    nz_tangents = [ad.cast_like(t, a) for t, a, nz in zip(tangents, jaxpr.in_avals, in_nz) if nz]
    lin_in_axes = ((None,) * len(static_vals) + (0,) * n_res
                   + tuple(ax for ax, nz in zip(in_axes, in_nz) if nz))
    lin_out_axes = tuple(ax for ax, nz in zip(out_axes, out_nz) if nz)
    t_outs = iter(_bind_like(params, [*static_vals, *res, *nz_tangents], linear, lin_in_axes,
                             lin_out_axes, f"jvp({name})"))
    return primal_outs, [next(t_outs) if nz else Zero(unmapped_aval(a, ax, n))
                         for nz, a, ax in zip(out_nz, t_avals, out_axes)]


pmap_p.def_jvp(_pmap_jvp)


# --- transpose: a pmap of the transposed body -----------------------------------------------
_transpose_cache = weakref.WeakKeyDictionary()   # body -> {(linear, cts_nz, axes): entry}


def _transposed_body(jaxpr, linear, cts_nz, in_axes, out_axes, axis_name, n):
    """The per-device transpose of ``jaxpr``: takes (non-linear operands, nonzero cotangents),
    returns the cotangents of the linear operands; replicated outputs' cotangents are split
    over the devices and replicated operands' cotangents summed over them."""
    t = ad.transpose_jaxpr(jaxpr, linear, cts_nz)
    n_nonlin = sum(not lin for lin in linear)
    ct_axes = [ax for ax, nz in zip(out_axes, cts_nz) if nz]
    lin_axes = [ax for ax, lin in zip(in_axes, linear) if lin]

    def fun(*args):
        cts = [c if ax is not None else ew.mul(c, np.asarray(1 / n, c.dtype))
               for c, ax in zip(args[n_nonlin:], ct_axes)]
        outs = t(*args[:n_nonlin], *cts)
        return [o if ax is not None else psum_p.bind(o, axis_name=(axis_name,))
                for o, ax in zip(outs, lin_axes)]

    with bound_axis(axis_name, n):
        closed, _ = trace_to_jaxpr(fun, t.in_avals, debug_name="transpose")
    return consts_as_args(closed)


def transpose_flags(cache, key, cts, args, make_body):
    """For the transpose rule of a primitive mapping a body over devices: (``linear`` flags
    per operand, ``cts_nz`` flags per output, ``(body, consts)`` of the transposed body, made
    by ``make_body(linear, cts_nz)`` once per flags and ``key``, e.g. the body, in ``cache``);
    the last is None when every cotangent is zero."""
    linear = tuple(is_undefined_primal(a) for a in args)
    cts_nz = tuple(type(c) is not Zero for c in cts)
    if not any(cts_nz):
        return linear, cts_nz, None
    per_key = cache.setdefault(key, {})
    entry = per_key.get((linear, cts_nz))
    if entry is None:
        entry = per_key[(linear, cts_nz)] = make_body(linear, cts_nz)
    return linear, cts_nz, entry


def transposed_call(cts, args, linear, cts_nz, consts, ct_avals, in_entries, out_entries,
                    const_entry):
    """The operands of the transposed call (its consts, the non-linear operands, the nonzero
    cotangents cast to ``ct_avals``) and its per-operand and per-output entries (pmap's axes,
    shard_map's specs) taken from ``in_entries`` / ``out_entries`` (``const_entry`` for the
    consts)."""
    operands = list(consts) + [a for a, lin in zip(args, linear) if not lin] + [
        ad.cast_like(c, a) for c, a, nz in zip(cts, ct_avals, cts_nz) if nz]
    t_in = ((const_entry,) * len(consts) + tuple(e for e, lin in zip(in_entries, linear)
                                                 if not lin)
            + tuple(e for e, nz in zip(out_entries, cts_nz) if nz))
    return operands, t_in, tuple(e for e, lin in zip(in_entries, linear) if lin)


def _pmap_transpose(cts, *args, **params):
    jaxpr, in_axes, out_axes = params["jaxpr"], params["in_axes"], params["out_axes"]
    linear, cts_nz, entry = transpose_flags(
        _transpose_cache, jaxpr, cts, args, lambda lin, nz: _transposed_body(
            jaxpr, lin, nz, in_axes, out_axes, params["axis_name"], axis_extent(params)))
    if entry is None:
        return [Zero(a.aval) if lin else None for a, lin in zip(args, linear)]
    body, consts = entry
    operands, t_in_axes, t_out_axes = transposed_call(
        cts, args, linear, cts_nz, consts, jaxpr.out_avals, in_axes, out_axes, None)
    outs = iter(_bind_like(params, operands, body, t_in_axes, t_out_axes,
                           f"transpose({params['name']})"))
    return [next(outs) if lin else None for lin in linear]


pmap_p.def_transpose(_pmap_transpose)


# --- batch: vmap of pmap ---------------------------------------------------------------------
def _pmap_batch(args, dims, **params):
    jaxpr, in_axes, out_axes = params["jaxpr"], params["in_axes"], params["out_axes"]
    size = batch_size(args, dims)
    new_in_axes, body_dims = [], []
    for ax, d in zip(in_axes, dims):
        if d is not_mapped or ax is None:
            new_in_axes.append(ax)
            body_dims.append(None if d is not_mapped else d)
        else:       # the operand holds both axes: where each is once the other is removed
            split = ax if ax < d else ax + 1
            new_in_axes.append(split)
            body_dims.append(d if d < split else d - 1)
    with bound_axis(params["axis_name"], axis_extent(params)):
        _, natural = batching.batch_jaxpr(jaxpr, size, body_dims)
        forced = [None if d is None else 0 for d in natural]
        batched, out_dims = batching.batch_jaxpr(jaxpr, size, body_dims, forced)
    body, consts = as_operands(batched)
    new_out_axes = [ax if d is None or ax is None else ax + 1
                    for ax, d in zip(out_axes, out_dims)]
    outs = _bind_like(params, [*consts, *args], body, (None,) * len(consts) + tuple(new_in_axes),
                      new_out_axes, params["name"])
    return outs, [not_mapped if d is None else 0 for d in out_dims]


pmap_p.def_batch(_pmap_batch)


# --- dce: prune unused outputs of the body ---------------------------------------------------
def body_dce_rule(per_operand, per_output):
    """A dce rule for a primitive whose param ``jaxpr`` is a body without consts that maps the
    operands to the outputs one to one, and whose params named ``per_operand`` /
    ``per_output`` hold a tuple with one entry per operand / per output (pmap's axes,
    shard_map's specs): unused outputs, then the operands the body no longer reads, are
    pruned. Pruned bodies are cached per body."""
    cache = weakref.WeakKeyDictionary()      # body -> {used outputs: (body, used inputs)}

    def rule(eqn, used_outputs):
        params = eqn.params
        used = tuple(used_outputs)
        per_body = cache.setdefault(params["jaxpr"], {})
        entry = per_body.get(used)
        if entry is None:
            inner, used_in = dce_jaxpr(params["jaxpr"].jaxpr, list(used), prune_invars=True)
            entry = per_body[used] = (ClosedJaxpr(inner, []), used_in)
        body, used_in = entry
        new_params = dict(params, jaxpr=body)
        for key, flags in [(k, used_in) for k in per_operand] + [(k, used) for k in per_output]:
            new_params[key] = tuple(v for v, u in zip(params[key], flags) if u)
        return used_in, Eqn(eqn.prim, [v for v, u in zip(eqn.invars, used_in) if u],
                            new_params, [v for v, u in zip(eqn.outvars, used) if u],
                            eqn.source_info, eqn.name_stack)
    return rule


pmap_p.def_rule("dce", body_dce_rule(("in_axes", "donated"), ("out_axes",)))


# --- lowering into a larger program: the values of vmap --------------------------------------
def _pmap_lowering(ctx, *args, jaxpr, axis_name, axis_size, devices, in_axes, out_axes, name,
                   donated):
    def as_vmap(*xs):
        with bound_axis(axis_name, axis_size):
            batched, dims = batching.batch_jaxpr(jaxpr, axis_size, in_axes, list(out_axes),
                                                 axis_name=axis_name)
        outs = batched(*xs)
        # a replicated output is the same in every member: take member 0's
        return [o if ax is not None or d is None else index_in_dim(o, 0, d, keepdims=False)
                for o, ax, d in zip(outs, out_axes, dims)]
    return ctx.lower_fun(as_vmap, args, name=f"pmap_{name}")


pmap_p.def_lowering(_pmap_lowering)

# At the top level of a jitted function a pmap runs as its own program over its devices (and
# so does a nested jit holding one): see ``spmd.split_program``.
pmap_p.def_rule("own_program", lambda eqn: True)
jit_p.def_rule("own_program", lambda eqn: runs_in_pieces(eqn.params["jaxpr"]))

__all__ = ["pmap_p", "DeviceAxis", "bound_axis", "resolve_devices", "axis_extent",
           "executable_for", "unmapped_aval", "as_operands", "body_dce_rule", "transpose_flags",
           "transposed_call"]
