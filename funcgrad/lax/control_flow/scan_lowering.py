"""``scan`` lowered to StableHLO: a ``while`` loop over a step counter whose body reads
``xs[t]`` with dynamic slices and writes ``ys[t]`` with dynamic updates, with the buffer and
layout choices that keep XLA from copying (docs/design.md, "Performance notes")."""
import builtins

import numpy as np

from funcgrad.core.avals import ShapedArray
from funcgrad.core.jaxpr import Eqn, Jaxpr, Var, eval_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax import indexing, shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow.loops import while_loop
from funcgrad.lax.control_flow.scans import scan_p


def _pretranspose_invariant_dot_operands(j, num_consts, consts):
    """Rewrite a loop body so that matrix products read loop constants in natural layout,
    transposed once before the loop: a ``transpose`` of a constant moves out of the body, and a
    product contracting a 2-d constant on its last axis (``x @ w.T`` as the autodiff transpose
    writes it) reads a transposed copy. XLA:CPU's in-loop product is faster on natural-layout
    operands, and it cannot fold a transpose made outside the loop back into the product.
    Returns (body, consts) with the new constants appended."""
    index = {v: i for i, v in enumerate(j.invars[:num_consts])}
    hoisted = []                  # (new body invar, const position, permutation)
    by_const = {}
    eqns = []
    for eqn in j.eqns:
        if eqn.prim.name == "transpose" and type(eqn.invars[0]) is Var \
                and eqn.invars[0] in index:
            hoisted.append((eqn.outvars[0], index[eqn.invars[0]], eqn.params["permutation"]))
            continue
        if eqn.prim.name == "dot_general":
            (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
            rhs = eqn.invars[1]
            if type(rhs) is Var and rhs in index and not lb and len(rhs.aval.shape) == 2 \
                    and tuple(rc) == (1,):
                if rhs not in by_const:
                    by_const[rhs] = Var(ShapedArray(rhs.aval.shape[::-1], rhs.aval.dtype))
                    hoisted.append((by_const[rhs], index[rhs], (1, 0)))
                params = dict(eqn.params, dimension_numbers=((tuple(lc), (0,)), ((), ())))
                eqn = Eqn(eqn.prim, [eqn.invars[0], by_const[rhs]], params, eqn.outvars,
                          eqn.source_info, eqn.name_stack)
        eqns.append(eqn)
    if not hoisted:
        return j, consts
    body = Jaxpr(j.constvars, j.invars[:num_consts] + [v for v, _, _ in hoisted]
                 + j.invars[num_consts:], eqns, j.outvars)
    return body, consts + [shapes.transpose(consts[i], tuple(perm)) for _, i, perm in hoisted]


def _reuse_xs_buffers(body, num_consts, num_carry, xs, length):
    """{ys index: xs index} pairing a per-step output y with an xs input x of the same stacked
    shape and dtype (each input at most once) when everything the body computes from x[t]
    goes into y[t], or reads x[t] only through y[t]. Step t then reads x[t] before it writes
    y[t] into the same buffer, and XLA sees that order from the data flow alone (whichever
    fusions it copies the read into), so the write is in place: no zero-filled buffer for the
    output and no copy per step. (Any pairing would be correct, as XLA copies a buffer whose
    reads it cannot order before the write; this rule picks the pairings where it need not.)"""
    producer = {v: e for e in body.eqns for v in e.outvars}
    readers = {}
    for e in body.eqns:
        for a in e.invars:
            if type(a) is Var:
                readers.setdefault(a, []).append(e)

    def walk(v, upstream):
        """{id: eqn} of the equations v is computed from (upstream) or that use it."""
        seen, stack = {}, [v]
        while stack:
            u = stack.pop()
            nxt = ([producer[u]] if u in producer else []) if upstream else readers.get(u, [])
            for e in nxt:
                if id(e) not in seen:
                    seen[id(e)] = e
                    stack.extend(a for a in (e.invars if upstream else e.outvars)
                                 if type(a) is Var)
        return seen

    outs = {v for v in body.outvars if type(v) is Var}
    x_vars = body.invars[num_consts + num_carry:]
    from_xs = {}                  # x var -> (equations computed from it, values they make)
    pairs, used = {}, set()
    for j, y in enumerate(body.outvars[num_carry:]):
        if type(y) is not Var or y not in producer:
            continue
        before_y, after_y = walk(y, True), walk(y, False)
        via_y = {y} | {v for e in after_y.values() for v in e.outvars}
        for i, (xv, x) in enumerate(zip(x_vars, xs)):
            x_aval = aval_of(x)
            if i in used or xv not in readers or xv in outs \
                    or x_aval.shape != (length,) + y.aval.shape or x_aval.dtype != y.aval.dtype:
                continue
            if xv not in from_xs:
                down = walk(xv, False)
                from_xs[xv] = (down, {xv} | {v for e in down.values() for v in e.outvars})
            from_x, x_vals = from_xs[xv]
            if all(k in before_y or (k in after_y and all(
                    a in via_y for a in e.invars if type(a) is Var and a in x_vals))
                   for k, e in from_x.items()):
                pairs[j] = i
                used.add(i)
                break
    return pairs


def _scan_via_while(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    """scan expressed with ``while`` and dynamic slices (traced to lower it).

    A per-step output with the stacked shape and dtype of an xs input is written into that
    input's buffer (``_reuse_xs_buffers``). When several other ys share a shape and dtype, the
    first step runs before the loop and each of their buffers starts as that step's output
    padded with zeros: distinct initial values, so XLA does not copy one shared zero broadcast
    into every loop-carried buffer (on CPU those copies can cost more than the loop).
    Otherwise the buffers start as zeros and the body is compiled once.
    """
    consts = list(args[:num_consts])
    carry = list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    zero = np.int32(0)
    body, consts = _pretranspose_invariant_dot_operands(jaxpr.jaxpr, num_consts, consts)
    y_avals = jaxpr.out_avals[num_carry:]
    reuse = _reuse_xs_buffers(body, len(consts), num_carry, xs, length) if length > 0 else {}
    x_from_y = {i: j for j, i in reuse.items()}

    def body_outputs(pos, carry, ys):
        x_t = [indexing.dynamic_index_in_dim(ys[x_from_y[i]] if i in x_from_y else x, pos, 0,
                                             keepdims=False) for i, x in enumerate(xs)]
        outs = eval_jaxpr(body, [], *consts, *carry, *x_t)
        return outs[:num_carry], [shapes.expand_dims(v, (0,)) for v in outs[num_carry:]]

    def write(ys, y_t, pos):
        return [indexing.dynamic_update_slice(y, v, [pos] + [zero] * (aval_of(v).ndim - 1))
                for y, v in zip(ys, y_t)]

    def step(t, carry, ys):
        # t: int32 step number (traced or static); reads xs[t'] and writes ys[t'].
        pos = ew.sub(np.int32(length - 1), t) if reverse else t
        carry, y_t = body_outputs(pos, carry, ys)
        return carry, write(ys, y_t, pos)

    kinds = [(a.shape, a.dtype) for j, a in enumerate(y_avals) if j not in reuse]
    peel = length > 0 and len(set(kinds)) < len(kinds)
    ys = [xs[reuse[j]] if j in reuse else None for j in range(len(y_avals))]
    if peel:
        first = length - 1 if reverse else 0
        carry, y_0 = body_outputs(np.int32(first), carry, ys)
        ys = [write([y], [v], np.int32(first))[0] if y is not None else
              shapes.pad(v, np.zeros((), aval_of(v).dtype),
                         [(first, length - 1 - first, 0)] + [(0, 0, 0)] * (aval_of(v).ndim - 1))
              for y, v in zip(ys, y_0)]
    else:
        ys = [y if y is not None else shapes.full((length,) + a.shape, np.zeros((), a.dtype),
                                                  a.dtype)
              for y, a in zip(ys, y_avals)]
    start = int(peel)
    u = builtins.max(1, builtins.min(int(unroll), builtins.max(length - start, 1)))
    n_iter = (length - start) // u

    if n_iter > 0:
        def cond_fn(state):
            return ew.lt(state[0], np.int32(n_iter))

        def body_fn(state):
            it, carry, ys = state
            for k in range(u):
                carry, ys = step(ew.add(ew.mul(it, np.int32(u)), np.int32(k + start)), carry,
                                 ys)
            return ew.add(it, np.int32(1)), carry, ys

        _, carry, ys = while_loop(cond_fn, body_fn, (np.int32(0), carry, ys))
    for t in range(n_iter * u + start, length):
        carry, ys = step(np.int32(t), carry, ys)
    return list(carry) + list(ys)


@scan_p.def_lowering
def _scan_lowering(ctx, *args, **params):
    return ctx.lower_fun(lambda *a: _scan_via_while(*a, **params), args, "scan")
