"""``cond`` and ``switch``: the ``cond`` primitive (an index picks one of several branch
Jaxprs, lowered to ``stablehlo.case``), its rules and the functions that bind it."""
import builtins

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad import tree_util
from funcgrad.core import batching_util as bu
from funcgrad.core import dtypes, vma
from funcgrad.core.ad import jvp_jaxpr, transpose_jaxpr
from funcgrad.core.ad_util import Zero, is_undefined_primal, tangent_aval
from funcgrad.core.batching import batch_jaxpr
from funcgrad.core.interpreters import Tracer
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Var
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax.control_flow.linear_split import linear_branch_outputs
from funcgrad.lax import _hlo, shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow.common import (
    _abstractify, _inexact, _intern, _nonzero, _parts, _same_types, _split_linearize, _trace,
    _types_str)


cond_p = Primitive("cond", multiple_results=True)


@cond_p.def_abstract_eval
def _cond_abstract(index, *ops, branches):
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got "
                        f"{index.str_short()}")
    for i, br in enumerate(branches):
        if not _same_types(br.in_avals, list(ops)):
            raise TypeError(f"cond: branch {i} takes {_types_str(br.in_avals)} but the operands "
                            f"are {_types_str(ops)}")
    outs = branches[0].out_avals
    weak = [all(br.out_avals[k].weak_type for br in branches) for k in range(len(outs))]
    return [a.update(weak_type=w) for a, w in zip(outs, weak)]


@cond_p.def_lowering
def _cond_lowering(ctx, index, *ops, branches):
    out_types = [_hlo.ir_type(a) for a in ctx.avals_out]
    if len(branches) == 1:
        return ctx.lower_jaxpr(branches[0], [], ops)
    case = stablehlo.CaseOp(out_types, index, len(branches))
    for i, br in enumerate(branches):
        block = case.regions[i].blocks.append()
        with ir.InsertionPoint(block):
            stablehlo.return_(list(ctx.lower_jaxpr(br, [], ops)))
    return list(case.results)


def _share_consts(branches, n_args):
    """Give branches that close over different constants one operand list.

    ``branches`` holds, per branch, (ClosedJaxpr taking (its consts..., args...), its consts),
    the last ``n_args`` inputs being the operands every branch shares. Returns (the branches,
    each taking (every branch's consts..., args...) and ignoring the other branches' consts;
    every branch's consts, in branch order), ready for one ``cond_p.bind``.
    """
    const_avals = [[aval_of(c) for c in consts] for _, consts in branches]
    padded = []
    for i, (closed, _) in enumerate(branches):
        j = closed.jaxpr
        n_own = len(j.invars) - n_args
        before = [Var(a) for avs in const_avals[:i] for a in avs]
        after = [Var(a) for avs in const_avals[i + 1:] for a in avs]
        invars = before + j.invars[:n_own] + after + j.invars[n_own:]
        padded.append(ClosedJaxpr(Jaxpr([], invars, j.eqns, j.outvars), []))
    return padded, [c for _, consts in branches for c in consts]


@cond_p.def_jvp
def _cond_jvp(primals, tangents, branches):
    index, ops = primals[0], list(primals[1:])
    op_avals = [aval_of(o) for o in ops]
    in_nz = [_nonzero(t) and _inexact(a) for t, a in zip(tangents[1:], op_avals)]
    jvps = [_parts(jvp_jaxpr(br, in_nz, instantiate_out=True)[0]) for br in branches]
    # Every branch takes (all branches' consts..., primals..., nonzero tangents...).
    padded, all_consts = _share_consts(jvps, len(ops) + sum(in_nz))
    t_in = [t for t, nz in zip(tangents[1:], in_nz) if nz]
    outs = cond_p.bind(index, *all_consts, *ops, *t_in,
                       branches=tuple(_intern(br) for br in padded))
    out_avals = branches[0].out_avals
    n = len(out_avals)
    it = iter(outs[n:])
    t_out = [next(it) if _inexact(a) else Zero(tangent_aval(a)) for a in out_avals]
    p_out = outs[:n]
    if _split_linearize():
        p_out = cond_p.bind(index, *ops, branches=branches)
    return p_out, t_out


# the branch index must be known; the outputs are linear when any branch makes them so
# in a typed shard_map body (core/vma.py): a result varies over the axes it varies over in any
# branch, and over the index's (devices taking different branches)
cond_p.def_rule("vma", lambda in_vmas, branches: (
    None, [v | in_vmas[0] for v in vma.out_vmas(branches)]))
cond_p.def_rule("linear_outputs", lambda eqn, reads: None if reads[0] else
                linear_branch_outputs(eqn.params["branches"], reads[1:]))


@cond_p.def_transpose
def _cond_transpose(cts, index, *ops, branches):
    if is_undefined_primal(index):
        raise TypeError("cond: cannot transpose with respect to the branch index")
    linear = [is_undefined_primal(o) for o in ops]
    cts_nz = [_nonzero(c) for c in cts]
    trs = [_parts(transpose_jaxpr(br, linear, cts_nz)) for br in branches]
    nonlin = [o for o, lin in zip(ops, linear) if not lin]
    padded, all_consts = _share_consts(trs, len(nonlin) + sum(cts_nz))
    ct_args = [c for c in cts if _nonzero(c)]
    res = iter(cond_p.bind(index, *all_consts, *nonlin, *ct_args, branches=tuple(padded)))
    return [None] + [next(res) if lin else None for lin in linear]


@cond_p.def_batch
def _cond_batch(args, dims, branches):
    index, ops = args[0], list(args[1:])
    idx_dim, op_dims = dims[0], list(dims[1:])
    size = bu.batch_size(args, dims)
    if idx_dim is not None:
        # A batched predicate: every branch runs on the whole batch, then select per lane.
        ops = [bu.bdim_to_front(o, d) if d is not None else o for o, d in zip(ops, op_dims)]
        in_dims = [0 if d is not None else None for d in op_dims]
        outs_per_branch = []
        for br in branches:
            bj, _ = batch_jaxpr(br, size, in_dims, out_dims=0)
            outs_per_branch.append(bj(*ops))
        idx = bu.bdim_to_front(index, idx_dim)
        outs = []
        for k in range(len(outs_per_branch[0])):
            cases = [o[k] for o in outs_per_branch]
            shape = aval_of(cases[0]).shape
            which = shapes.broadcast_in_dim(idx, shape, (0,))
            if len(cases) == 2:
                which = ew.convert_element_type(which, dtypes.bool_)
            outs.append(ew.select_n(which, *cases))
        return outs, [0] * len(outs)
    # Find which outputs are batched in any branch, then force those to axis 0 everywhere.
    out_batched = [False] * len(branches[0].out_avals)
    for br in branches:
        _, od = batch_jaxpr(br, size, op_dims)
        out_batched = [a or d is not None for a, d in zip(out_batched, od)]
    forced = [0 if b else None for b in out_batched]
    padded, all_consts = _share_consts(
        [_parts(batch_jaxpr(br, size, op_dims, out_dims=forced)[0]) for br in branches], len(ops))
    outs = cond_p.bind(index, *all_consts, *ops, branches=tuple(padded))
    return outs, forced


def _branch_error(name, i, tree_i, avals_i, tree_0, avals_0):
    return TypeError(
        f"{name}: branch {i} returns {tree_i} with types {_types_str(avals_i)} but branch 0 "
        f"returns {tree_0} with types {_types_str(avals_0)}; every branch must return the same "
        f"structure with the same shapes and dtypes")


def _bind_cond(name, index, branches, operands):
    leaves, in_tree = tree_util.tree_flatten(tuple(operands))
    in_avals = _abstractify(leaves)
    traced = []
    for i, fn in enumerate(branches):
        jaxpr, consts, out_tree = _trace(lambda *ops, fn=fn: fn(*ops), in_tree, in_avals,
                                         f"{name} branch {i}")
        traced.append((jaxpr, consts, out_tree))
    tree0, avals0 = traced[0][2], traced[0][0].out_avals
    for i, (jaxpr, _, tree) in enumerate(traced[1:], 1):
        if tree != tree0 or not _same_types(jaxpr.out_avals, avals0):
            raise _branch_error(name, i, tree, jaxpr.out_avals, tree0, avals0)
    if vma.typed_axes():
        traced = _typed_alike(name, index, branches, traced, in_tree, in_avals)
    # Every branch takes (all branches' consts..., operands...).
    padded, all_consts = _share_consts([(jaxpr, consts) for jaxpr, consts, _ in traced],
                                       len(leaves))
    outs = cond_p.bind(index, *all_consts, *leaves,
                       branches=tuple(_intern(br) for br in padded))
    return tree_util.tree_unflatten(tree0, outs)


def _typed_alike(name, index, branches, traced, in_tree, in_avals):
    """In a typed ``shard_map`` body (``core/vma.py``): every branch's outputs made to vary
    over the axes any branch's (or the index) varies over, so that reverse mode sums the
    devices' cotangents of a branch's replicated result (JAX asks for a ``pcast``)."""
    want = [vma.vma_of(index).union(*(j.out_avals[k].vma for j, _, _ in traced))
            for k in range(len(traced[0][0].out_avals))]
    out = []
    for i, (fn, entry) in enumerate(zip(branches, traced)):
        if [a.vma for a in entry[0].out_avals] == want:
            out.append(entry)
            continue

        def widened(*ops, fn=fn):
            leaves, tree = tree_util.tree_flatten(fn(*ops))
            return tree_util.tree_unflatten(tree, [vma.vary(x, w)
                                                   for x, w in zip(leaves, want)])
        out.append(_trace(widened, in_tree, in_avals, f"{name} branch {i}"))
    return out


def _scalar_index(name, x, n):
    """``x`` as an int32 scalar clamped to [0, n-1] (bool: False -> 0, True -> 1)."""
    aval = aval_of(x)
    if aval.shape != ():
        raise TypeError(f"{name}: the predicate/index must be a scalar, got {aval.str_short()}")
    if not (aval.dtype == dtypes.bool_ or dtypes.is_integer(aval.dtype)):
        raise TypeError(f"{name}: the predicate/index must be a bool or integer scalar, got "
                        f"{aval.str_short()}")
    if not isinstance(x, Tracer) and not hasattr(x, "_buf"):
        return np.int32(builtins.min(builtins.max(int(x), 0), n - 1))
    x = ew.convert_element_type(x, np.int32)
    if n == 2 and aval.dtype == dtypes.bool_:
        return x
    return ew.clamp(np.int32(0), x, np.int32(n - 1))


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, staged as one op.

    Both branches are traced; they must return the same pytree of shapes and dtypes.

    Example:
        >>> x = jnp.float32(1.5)
        >>> lax.cond(x > 0, lambda v: v * 2.0, lambda v: -v, x)
        Array(3., dtype=float32)
        >>> lax.cond(-x > 0, lambda v: v * 2.0, lambda v: -v, x)
        Array(-1.5, dtype=float32)
    """
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun must be callable (signature "
                        "cond(pred, true_fun, false_fun, *operands))")
    aval = aval_of(pred)
    if aval.shape != ():
        raise TypeError(f"cond: pred must be a scalar, got {aval.str_short()}; use "
                        f"funcgrad.numpy.where for elementwise selection")
    if aval.dtype != dtypes.bool_:
        if isinstance(pred, Tracer) or hasattr(pred, "_buf"):
            pred = ew.ne(pred, np.zeros((), aval.dtype))
        else:
            pred = bool(pred)
    index = _scalar_index("cond", pred, 2)
    return _bind_cond("cond", index, (false_fun, true_fun), operands)


def switch(index, branches, *operands):
    """``branches[index](*operands)`` with ``index`` clamped to ``[0, len(branches) - 1]``.

    Example:
        >>> branches, x = [lambda v: v, lambda v: v * 2.0, jnp.sin], jnp.float32(1.5)
        >>> lax.switch(1, branches, x), lax.switch(7, branches, x)    # 7 is clamped to 2
        (Array(3., dtype=float32), Array(0.99749..., dtype=float32))
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("switch: branches must be a non-empty sequence of callables")
    idx = _scalar_index("switch", index, len(branches))
    return _bind_cond("switch", idx, branches, operands)
