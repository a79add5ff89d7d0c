"""``while_loop`` and ``fori_loop``: the ``while`` primitive (lowered to ``stablehlo.while``;
forward mode and batching only, as its trip count is dynamic), its rules, and ``fori_loop``,
which is a ``scan`` when its bounds are static and a ``while_loop`` otherwise."""
import builtins

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad import tree_util
from funcgrad.core import batching_util as bu
from funcgrad.core import dtypes, vma
from funcgrad.core.ad import jvp_jaxpr
from funcgrad.core.ad_util import Zero, tangent_aval
from funcgrad.core.batching import batch_jaxpr
from funcgrad.core.interpreters import Tracer
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo, reductions, shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow.common import (
    _abstractify, _carry_avals, _check_carry, _groups, _inexact, _intern, _nonzero, _parts,
    _permute, _split_linearize, _strong, _to_strong, _trace, _types_str,
    _widen_carry, _zero_tangents_to_values)
from funcgrad.lax.control_flow.scans import scan


while_p = Primitive("while", multiple_results=True)


@while_p.def_abstract_eval
def _while_abstract(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    carry = args[cond_nconsts + body_nconsts:]
    return [_strong(a) for a in carry]


# in a typed shard_map body (core/vma.py): the body's output types, and the predicate's (a
# predicate that varies lets devices stop at different steps)
while_p.def_rule("vma", lambda in_vmas, cond_jaxpr, body_jaxpr, **_: (
    None, [v | vma.out_vmas([cond_jaxpr])[0] for v in vma.out_vmas([body_jaxpr])]))


@while_p.def_lowering
def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    types = [_hlo.ir_type(a) for a in ctx.avals_in]
    op = stablehlo.WhileOp(types, list(args))
    nc = cond_nconsts + body_nconsts
    cond_block = op.cond.blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        a = list(cond_block.arguments)
        pred, = ctx.lower_jaxpr(cond_jaxpr, [], a[:cond_nconsts] + a[nc:])
        stablehlo.return_([pred])
    body_block = op.body.blocks.append(*types)
    with ir.InsertionPoint(body_block):
        a = list(body_block.arguments)
        new = ctx.lower_jaxpr(body_jaxpr, [], a[cond_nconsts:nc] + a[nc:])
        stablehlo.return_(a[:nc] + list(new))
    return list(op.results)[nc:]


@while_p.def_jvp
def _while_jvp(primals, tangents, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nc = cond_nconsts
    cconsts, bconsts = primals[:nc], primals[nc:nc + body_nconsts]
    carry = primals[nc + body_nconsts:]
    bconst_t = tangents[nc:nc + body_nconsts]
    carry_t = tangents[nc + body_nconsts:]
    carry_avals = [aval_of(c) for c in carry]
    bc_nz = [_nonzero(t) and _inexact(aval_of(c)) for t, c in zip(bconst_t, bconsts)]
    c_nz = [_inexact(a) for a in carry_avals]   # every float carry gets a tangent
    jvp_closed, _ = jvp_jaxpr(body_jaxpr, bc_nz + c_nz, instantiate_out=True)
    j, extra = _parts(jvp_closed)
    n_e, n_bc, n_c = len(extra), len(bconsts), len(carry)
    e, pb, pc, tb, tc = _groups([n_e, n_bc, n_c, sum(bc_nz), sum(c_nz)])
    body = _permute(j, e + pb + tb + pc + tc, list(range(len(j.jaxpr.outvars))))
    t_carry_avals = [tangent_aval(a) for a, nz in zip(carry_avals, c_nz) if nz]
    # The predicate ignores the tangent carries.
    cj = cond_jaxpr.jaxpr
    cond_new = ClosedJaxpr(Jaxpr([], cj.invars + [Var(a) for a in t_carry_avals], cj.eqns,
                                 cj.outvars), [])
    t_b = _zero_tangents_to_values(bconst_t, [aval_of(b) for b in bconsts], bc_nz)
    t_c = _zero_tangents_to_values(carry_t, carry_avals, c_nz)
    outs = while_p.bind(*cconsts, *extra, *bconsts, *t_b, *carry, *t_c,
                        cond_jaxpr=_intern(cond_new), body_jaxpr=_intern(body),
                        cond_nconsts=nc, body_nconsts=n_e + n_bc + len(t_b))
    p_out = outs[:n_c]
    it = iter(outs[n_c:])
    t_out = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(carry_avals, c_nz)]
    if _split_linearize():
        p_out = while_p.bind(*cconsts, *bconsts, *carry, cond_jaxpr=cond_jaxpr,
                             body_jaxpr=body_jaxpr, cond_nconsts=nc, body_nconsts=body_nconsts)
    return p_out, t_out


@while_p.def_transpose
def _while_transpose(cts, *args, **params):
    raise TypeError("while_loop: reverse-mode differentiation (grad/vjp) of a while_loop is not "
                    "supported because its trip count is dynamic; use lax.fori_loop with static "
                    "bounds or lax.scan, or forward mode (jvp/jacfwd)")


@while_p.def_batch
def _while_batch(args, dims, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    size = bu.batch_size(args, dims)
    nc, nb = cond_nconsts, body_nconsts
    cconsts, bconsts, carry = args[:nc], args[nc:nc + nb], list(args[nc + nb:])
    cdims, bdims, carry_dims = dims[:nc], dims[nc:nc + nb], list(dims[nc + nb:])
    cconsts = [bu.bdim_to_front(c, d) if d is not None else c for c, d in zip(cconsts, cdims)]
    bconsts = [bu.bdim_to_front(c, d) if d is not None else c for c, d in zip(bconsts, bdims)]
    cdims = [0 if d is not None else None for d in cdims]
    bdims = [0 if d is not None else None for d in bdims]
    batched = [d is not None for d in carry_dims]
    # Fixed point: a carry is batched if it starts batched or the body makes it so; the
    # predicate being batched makes every carry batched (lanes stop at different times).
    while True:
        cin = [0 if b else None for b in batched]
        _, pd = batch_jaxpr(cond_jaxpr, size, cdims + cin)
        pred_batched = pd[0] is not None
        if pred_batched:
            new_batched = [True] * len(batched)
        else:
            _, od = batch_jaxpr(body_jaxpr, size, bdims + cin)
            new_batched = [b or d is not None for b, d in zip(batched, od)]
        if new_batched == batched:
            break
        batched = new_batched
    cin = [0 if b else None for b in batched]
    carry = [bu.bdim_to_front(c, d, size) if b else c
             for c, d, b in zip(carry, carry_dims, batched)]
    cond_b, _ = batch_jaxpr(cond_jaxpr, size, cdims + cin, out_dims=[0 if pred_batched else None])
    body_b, _ = batch_jaxpr(body_jaxpr, size, bdims + cin, out_dims=cin)

    if not pred_batched:
        def cond_fn(c):
            return eval_jaxpr(cond_b.jaxpr, cond_b.consts, *cconsts, *c)[0]

        def body_fn(c):
            return list(eval_jaxpr(body_b.jaxpr, body_b.consts, *bconsts, *c))
    else:
        def cond_fn(c):
            pred = eval_jaxpr(cond_b.jaxpr, cond_b.consts, *cconsts, *c)[0]
            return reductions.reduce_or(pred, (0,))

        def body_fn(c):
            pred = eval_jaxpr(cond_b.jaxpr, cond_b.consts, *cconsts, *c)[0]
            new = eval_jaxpr(body_b.jaxpr, body_b.consts, *bconsts, *c)
            out = []
            for old, n in zip(c, new):
                p = shapes.broadcast_in_dim(pred, aval_of(old).shape, (0,))
                out.append(ew.select(p, n, old))
            return out

    outs = while_loop(cond_fn, body_fn, list(carry))
    return list(outs), cin


def while_loop(cond_fun, body_fun, init_val):
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``; returns the final ``val``.

    ``val`` is any pytree; ``body_fun`` must keep its structure, shapes and dtypes. Forward-mode
    differentiable (jvp) and batchable; use ``fori_loop`` with static bounds or ``scan`` for
    reverse mode.

    Example:
        >>> lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.0), (0, 1.0))
        (Array(10, dtype=int32), Array(1024., dtype=float32))
    """
    leaves, tree = tree_util.tree_flatten(init_val)
    avals = _carry_avals(leaves)
    leaves = [_to_strong(x, a) for x, a in zip(leaves, _abstractify(leaves))]
    wrapped = tree_util.tree_structure((tree_util.tree_unflatten(tree, leaves),))
    cond_jaxpr, cond_consts, cond_tree = _trace(cond_fun, wrapped, avals, "while_loop cond_fun")
    outs = cond_jaxpr.out_avals
    if len(outs) != 1 or outs[0].shape != () or outs[0].dtype != dtypes.bool_:
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got "
                        f"{cond_tree} with types {_types_str(outs)}")
    while True:
        body_jaxpr, body_consts, body_tree = _trace(body_fun, wrapped, avals,
                                                    "while_loop body_fun")
        wider = _widen_carry(leaves, avals, body_jaxpr.out_avals)
        if wider is None:
            break
        leaves, avals = wider
        cond_jaxpr, cond_consts, cond_tree = _trace(cond_fun, wrapped, avals,
                                                    "while_loop cond_fun")
    _check_carry("while_loop", "body_fun's output", tree, avals, body_tree,
                 body_jaxpr.out_avals)
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond_jaxpr=_intern(cond_jaxpr),
                        body_jaxpr=_intern(body_jaxpr), cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts))
    return tree_util.tree_unflatten(tree, outs)


def _static_int(x):
    """``x`` as a Python int if it is concrete (not a tracer), else None."""
    if isinstance(x, Tracer):
        return None
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``for i in range(lower, upper): val = body_fun(i, val)``; returns ``val``.

    With static bounds this is a ``scan`` (differentiable in reverse mode); with traced bounds
    a ``while_loop`` (forward mode only).

    Example:
        >>> lax.fori_loop(0, 5, lambda i, s: s + i, 0)
        Array(10, dtype=int32)
    """
    lo_aval, hi_aval = aval_of(lower), aval_of(upper)
    for b, a in (("lower", lo_aval), ("upper", hi_aval)):
        if a.shape != () or not dtypes.is_integer(a.dtype):
            raise TypeError(f"fori_loop: {b} must be an integer scalar, got {a.str_short()}")
    idx_dtype = dtypes.promote_types(lo_aval.dtype, hi_aval.dtype) if not (
        lo_aval.weak_type and hi_aval.weak_type) else lo_aval.dtype
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is not None and hi is not None:
        n = builtins.max(hi - lo, 0)

        def step(carry, _):
            i, val = carry
            return (i + np.asarray(1, idx_dtype), body_fun(i, val)), None

        (_, out), _ = scan(step, (np.asarray(lo, idx_dtype), init_val), None, length=n,
                           unroll=unroll or 1)
        return out
    if unroll not in (None, 1):
        raise ValueError("fori_loop: unroll needs static lower and upper bounds")
    lower = ew.convert_element_type(lower, idx_dtype)
    upper = ew.convert_element_type(upper, idx_dtype)

    def cond_fn(c):
        return ew.lt(c[0], c[1])

    def body_fn(c):
        i, u, val = c
        return ew.add(i, np.asarray(1, idx_dtype)), u, body_fun(i, val)

    return while_loop(cond_fn, body_fn, (lower, upper, init_val))[2]
