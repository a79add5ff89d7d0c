"""``checkpoint`` (a.k.a. ``remat``): trade compute for memory in reverse mode.

A checkpointed function is bound as the ``remat`` primitive. Its jvp rule emits two ``remat``
applications: one for the primal outputs, and one that recomputes the primal *inside* the
tangent computation (its body is the function's JVP, pruned to the tangent outputs). Under
``linearize`` that second application is staged whole, so the linear program keeps only the
function's inputs as residuals; its transpose rule runs the body's backward pass, which first
recomputes the forward values it needs.
"""
import functools
import weakref

from funcgrad import tree_util
from funcgrad.core import batching, batching_util, dtypes, interpreters
from funcgrad.core.ad_util import Zero, tangent_aval
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Var, consts_as_args, eval_jaxpr
from funcgrad.core.primitive import Primitive
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of

# ``tangent_src``: with a saving policy, the body the JVP differentiates (it takes the saved
# values as its last operands too, and uses them as the primal values of the saved
# equations while still forming their tangents); None: ``jaxpr`` itself.
remat_p = Primitive("remat", multiple_results=True)
remat_p.def_abstract_eval(lambda *avals, jaxpr, prevent_cse, tangent_src=None:
                          list(jaxpr.out_avals))
remat_p.def_impl(lambda *args, jaxpr, prevent_cse, tangent_src=None:
                 eval_jaxpr(jaxpr.jaxpr, [], *args))


def _remat_lowering(ctx, *args, jaxpr, prevent_cse, tangent_src=None):
    if prevent_cse and args:
        # The inputs pass an optimization barrier, so XLA cannot merge the recomputation with
        # the forward pass it duplicates (common-subexpression elimination would undo remat).
        from jaxlib.mlir.dialects import stablehlo
        res = stablehlo.optimization_barrier(list(args))
        args = [res] if len(args) == 1 and not isinstance(res, (list, tuple)) and \
            not hasattr(res, "__len__") else list(res)
    return ctx.lower_jaxpr(jaxpr, [], args)


remat_p.def_lowering(_remat_lowering)

_jvp_cache = weakref.WeakKeyDictionary()   # body -> {in_nz: (tangent body, out_nz)}


def _tangent_body(jaxpr, in_nz):
    from funcgrad.core.ad import jvp_jaxpr
    per_body = _jvp_cache.get(jaxpr)
    if per_body is None:
        per_body = _jvp_cache[jaxpr] = {}
    entry = per_body.get(in_nz)
    if entry is None:
        jvp_closed, out_nz = jvp_jaxpr(jaxpr, list(in_nz))
        n_out = len(jaxpr.out_avals)
        used = [False] * n_out + [True] * sum(out_nz)
        pruned, _ = dce_closed_jaxpr(jvp_closed, used)
        body, consts = consts_as_args(pruned)
        entry = per_body[in_nz] = (body, consts, out_nz)
    return entry


def _remat_jvp(primals, tangents, jaxpr, prevent_cse, tangent_src=None):
    n_ops = len(jaxpr.in_avals) - _n_saved(tangent_src)
    # the saved operands' tangents are formed inside ``tangent_src`` from the others'
    in_nz = tuple(i < n_ops and type(t) is not Zero and dtypes.is_inexact(a.dtype)
                  for i, (t, a) in enumerate(zip(tangents, jaxpr.in_avals)))
    # only the recomputing application needs the barrier
    outs = remat_p.bind(*primals, jaxpr=jaxpr, prevent_cse=False, tangent_src=tangent_src)
    body, consts, out_nz = _tangent_body(tangent_src or jaxpr, in_nz)
    out_avals = [tangent_aval(a) for a in jaxpr.out_avals]
    if not any(out_nz):
        return outs, [Zero(a) for a in out_avals]
    from funcgrad.core.ad import cast_like
    nz_ts = [cast_like(t, a) for t, a, nz in zip(tangents, jaxpr.in_avals, in_nz) if nz]
    t_outs = iter(remat_p.bind(*consts, *primals, *nz_ts, jaxpr=body, prevent_cse=prevent_cse))
    return outs, [next(t_outs) if nz else Zero(a) for nz, a in zip(out_nz, out_avals)]


_transpose_cache = weakref.WeakKeyDictionary()   # body -> {(linear, cts_nz): (body, consts)}


def _remat_transpose(cts, *args, jaxpr, prevent_cse, tangent_src=None):
    """The backward pass of the body, itself bound as ``remat``: it recomputes the forward
    values it needs (behind the optimization barrier) right where the cotangents are formed."""
    from funcgrad.core.ad import transpose_call
    return transpose_call(jaxpr, cts, args, _transpose_cache,
                          lambda operands, body: remat_p.bind(*operands, jaxpr=body,
                                                              prevent_cse=prevent_cse))


remat_p.def_jvp(_remat_jvp)
remat_p.def_transpose(_remat_transpose)


# --- saving policies -------------------------------------------------------------------------
# ``saved_value(r, y)`` is ``r`` (a value saved in the forward pass) standing for ``y`` (the
# equation that computed it, recomputable): its value is r, its tangent y's. After the JVP only
# y's tangent is used, so the equation computing y's primal value is pruned away.
saved_value_p = Primitive("saved_value")
saved_value_p.def_abstract_eval(lambda r, y: y)
saved_value_p.def_impl(lambda r, y: r)
saved_value_p.def_lowering(lambda ctx, r, y: r)
saved_value_p.def_jvp(lambda primals, tangents: (primals[0], tangents[1]))
def _saved_value_batch(args, dims):
    size = batching_util.batch_size(args, dims)
    r, y = batching_util.all_to_front(args, dims, size)
    return saved_value_p.bind(r, y), 0


saved_value_p.def_batch(_saved_value_batch)


def _n_saved(tangent_src):
    """How many trailing operands of a ``remat`` application are saved values."""
    if tangent_src is None:
        return 0
    return sum(e.prim is saved_value_p for e in tangent_src.jaxpr.eqns)


def split_by_policy(body, policy):
    """Split ``body`` (a ClosedJaxpr without consts) by ``policy(prim, *avals, **params)``:
    returns None when no equation is saveable, else ``(forward, body_saved, tangent_src)``:
    ``forward`` computes the saveable equations' outputs from the operands; ``body_saved``
    computes the outputs from the operands and those saved values (recomputing the rest);
    ``tangent_src`` is the whole body over the same operands, the saved equations' values
    taken from the saved operands (for the tangents)."""
    j = body.jaxpr
    saved_eqns = [e for e in j.eqns
                  if policy(e.prim, *[v.aval for v in e.invars], **e.params)]
    if not saved_eqns:
        return None
    saved_set = set(map(id, saved_eqns))
    saved_vars = [v for e in saved_eqns for v in e.outvars]
    forward, _ = dce_closed_jaxpr(ClosedJaxpr(Jaxpr([], j.invars, j.eqns, saved_vars), []))
    kept = [e for e in j.eqns if id(e) not in saved_set]
    body_saved, _ = dce_closed_jaxpr(
        ClosedJaxpr(Jaxpr([], list(j.invars) + saved_vars, kept, j.outvars), []))
    stand_ins = [Var(v.aval) for v in saved_vars]
    eqns, it = [], iter(stand_ins)
    for e in j.eqns:
        if id(e) not in saved_set:
            eqns.append(e)
            continue
        recomputed = [Var(v.aval) for v in e.outvars]
        eqns.append(Eqn(e.prim, e.invars, e.params, recomputed, e.source_info, e.name_stack))
        eqns.extend(Eqn(saved_value_p, [next(it), y], {}, [v], e.source_info, e.name_stack)
                    for y, v in zip(recomputed, e.outvars))
    tangent_src = ClosedJaxpr(Jaxpr([], list(j.invars) + stand_ins, eqns, j.outvars), [])
    return forward, body_saved, tangent_src


def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=()):
    """Make reverse mode recompute ``fun``'s intermediate values in the backward pass instead
    of storing them (less memory, more compute). ``policy`` (one of
    ``funcgrad.checkpoint_policies``, or ``policy(prim, *avals, **params) -> bool``) names the
    intermediate values to save from the forward pass instead of recomputing them, as
    ``jax.checkpoint``'s: ``checkpoint_policies.dots_saveable`` keeps matrix products.

    Example:
        >>> @funcgrad.checkpoint
        ... def layer(w, x):
        ...     return jnp.tanh(x @ w)
        >>> w, x = jnp.zeros((2, 2)), jnp.ones((3, 2))
        >>> funcgrad.grad(lambda w: jnp.sum(layer(w, x)))(w)
        Array([[3., 3.],
               [3., 3.]], dtype=float32)
    """
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums)
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static_argnums = tuple(static_argnums)

    @functools.wraps(fun)
    def remat_fun(*args, **kwargs):
        if interpreters.is_eager():
            return fun(*args, **kwargs)       # nothing is stored outside transformations
        static = {i: args[i] for i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        box = []

        def flat_fun(*flat):
            d, kw = tree_util.tree_unflatten(in_tree, flat)
            it = iter(d)
            full = [static[i] if i in static else next(it) for i in range(len(args))]
            o_leaves, o_tree = tree_util.tree_flatten(fun(*full, **kw))
            box.append(o_tree)
            return o_leaves

        closed, _ = trace_to_jaxpr(flat_fun, [aval_of(x) for x in leaves],
                                   debug_name=getattr(fun, "__name__", None))
        body, consts = consts_as_args(closed)
        split = split_by_policy(body, policy) if policy is not None else None
        if split is None:
            outs = remat_p.bind(*consts, *leaves, jaxpr=body, prevent_cse=bool(prevent_cse))
        else:
            forward, body_saved, tangent_src = split
            # the saved values are computed once, outside the recomputed region; this
            # application's JVP ignores their tangents and forms them in ``tangent_src`` from
            # the inputs' (outer transformations still differentiate them as usual)
            saved = eval_jaxpr(forward.jaxpr, [], *consts, *leaves)
            outs = remat_p.bind(*consts, *leaves, *saved, jaxpr=body_saved,
                                prevent_cse=bool(prevent_cse), tangent_src=tangent_src)
        return tree_util.tree_unflatten(box[0], outs)

    return remat_fun


remat = checkpoint


# --- batching rules ---
def _remat_batch(args, dims, jaxpr, prevent_cse, tangent_src=None):
    size = batching_util.batch_size(args, dims)
    batched, out_dims = batching.batch_jaxpr(jaxpr, size, dims)
    body, consts = consts_as_args(batched)
    src = None
    if tangent_src is not None:
        # the same operands as ``body`` (its hoisted consts first, unused here)
        sj = batching.batch_jaxpr(tangent_src, size, dims)[0]
        unused = [Var(aval_of(c)) for c in consts]
        src = ClosedJaxpr(Jaxpr(sj.jaxpr.constvars, unused + list(sj.jaxpr.invars),
                                sj.jaxpr.eqns, sj.jaxpr.outvars), sj.consts)
    outs = remat_p.bind(*consts, *args, jaxpr=body, prevent_cse=prevent_cse, tangent_src=src)
    return outs, out_dims


remat_p.def_batch(_remat_batch)
_ = ClosedJaxpr
