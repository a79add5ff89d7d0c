"""``scan``'s jvp and transpose rules (reverse mode through a loop). Under ``linearize`` the
jvp splits its body into a forward scan of the primal part, which saves per-step residuals, and
a tangent scan reading them; the transpose runs the transposed linear part as a reverse scan.
Both choose what to save, recompute and hoist out of the loops (docs/design.md)."""
import builtins

import numpy as np

from funcgrad.core.ad import jvp_jaxpr, transpose_jaxpr
from funcgrad.core.ad_util import Zero, instantiate, is_undefined_primal, tangent_aval
from funcgrad.core.avals import ShapedArray
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Var, eval_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax import shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow.common import (
    _groups, _inexact, _intern, _nonzero, _parts, _permute, _split_linearize,
    _zero_tangents_to_values)
from funcgrad.lax.control_flow.linear_split import linear_carry_outputs, split_known_linear
from funcgrad.lax.control_flow.scans import scan, scan_p


# --- shared by both rules: residuals recomputed instead of saved ------------------------
# Cheap elementwise primitives whose per-step results the backward loop recomputes from
# another saved value rather than saving them too (e.g. 1 - t**2 from a saved t = tanh(x)).
# Transcendental functions (tanh, logistic, exp) are saved, not recomputed: XLA:CPU copies a
# recomputation into every fusion that reads it, which made LSTM steps ~7% slower.
_REMAT = frozenset(["add", "sub", "mul", "neg", "div", "max", "min",
                    "integer_pow", "square", "broadcast_in_dim", "convert_element_type",
                    "select_n", "abs", "sign"])


def _size(aval):
    return int(np.prod(aval.shape, dtype=np.int64))


def _remat_residuals(residuals, known_eqns, invariant):
    """Replace saved per-step residuals made by a cheap elementwise equation from at most one
    other per-step value (no bigger than it) by that value; returns (residuals, equations to
    recompute on the linear side, in program order)."""
    producer = {v: eqn for eqn in known_eqns for v in eqn.outvars}
    residuals, moved, moved_out = list(residuals), set(), set()
    changed = True
    while changed:
        changed = False
        res_set = set(residuals)
        for r in residuals:
            eqn = producer.get(r)
            if eqn is None or r in invariant or eqn.prim.name not in _REMAT \
                    or eqn.prim.multiple_results:
                continue
            ins = [a for a in eqn.invars
                   if type(a) is Var and a not in res_set and a not in moved_out]
            new = {a for a in ins if a not in invariant}
            if len(new) > 1 or builtins.any(_size(a.aval) > _size(r.aval) for a in new):
                continue
            residuals = [v for v in residuals if v is not r]
            for a in ins:
                if a not in residuals:
                    residuals.append(a)
            moved.add(id(eqn))
            moved_out.update(eqn.outvars)
            changed = True
            break
    return residuals, [e for e in known_eqns if id(e) in moved]


# --- jvp: under linearize, a known scan saving residuals and a tangent scan reading them --
def _carry_in_per_step(init, carry_outs, length, reverse):
    """The carry entering each step, stacked, from its initial value and the stacked carry
    leaving each step (step t starts from step t-1's result, or t+1's when reversed)."""
    dtype = aval_of(carry_outs).dtype
    first = shapes.expand_dims(init if aval_of(init).dtype == dtype
                               else ew.convert_element_type(init, dtype), (0,))
    if length == 1:
        return first
    if reverse:
        return shapes.concatenate([shapes.slice_in_dim(carry_outs, 1, length, axis=0), first], 0)
    return shapes.concatenate([first, shapes.slice_in_dim(carry_outs, 0, length - 1, axis=0)], 0)


def _scan_jvp_split(body, in_groups, out_groups, extra, consts, carry, xs, t_vals, length,
                    reverse, unroll):
    """Under linearize, split the jvp body into a known scan (primal outputs and the per-step
    values the tangent part reads, computed once) and a tangent scan that reads them as xs, so
    the forward loop does not run a second time. Returns (primal outs, tangent outs), or None
    when the body does not split cleanly (the caller then uses the plain rule)."""
    bj = body.jaxpr
    if body.consts or bj.constvars:
        return None
    e, pc, tc, pk, tk, px, tx = [[bj.invars[i] for i in g] for g in in_groups]
    ok, otk, oy, oty = [[bj.outvars[i] for i in g] for g in out_groups]
    known_eqns, lin_eqns, lin_vars = split_known_linear(bj.eqns, tc + tk + tx)
    if any(type(v) is Var and v in lin_vars for v in ok + oy):
        return None
    invariant, hoisted = set(e + pc), []
    for eqn in known_eqns:
        if all(type(a) is not Var or a in invariant for a in eqn.invars):
            hoisted.append(eqn)
            invariant.update(eqn.outvars)
    residuals, seen = [], set()
    for a in [a for eqn in lin_eqns for a in eqn.invars] + otk + oty:
        if type(a) is Var and a not in lin_vars and a not in seen:
            seen.add(a)
            residuals.append(a)
    residuals, remat = _remat_residuals(residuals, known_eqns, invariant)
    lin_eqns = remat + lin_eqns
    const_res = [v for v in residuals if v in invariant]
    px_set = set(px)
    xs_res = [v for v in residuals if v in px_set]
    iter_res = [v for v in residuals if v not in invariant and v not in px_set]
    # A residual that is a carry's value entering each step (an RNN's previous hidden state)
    # is the stacked carry leaving each step, shifted by one, when that is stacked anyway (a
    # primal ys output or another residual): one copy after the loop, one per-step output less.
    stacked_src = {v: ("y", i) for i, v in enumerate(oy) if type(v) is Var}
    stacked_src.update((v, ("r", v)) for v in iter_res if v not in stacked_src)
    shifted = {v: k for k, v in enumerate(pk)
               if v in set(iter_res) and length > 0 and type(ok[k]) is Var
               and ok[k] in stacked_src and ok[k] is not v}
    shifted = {v: k for v, k in shifted.items() if ok[k] not in shifted}
    scan_res = [v for v in iter_res if v not in shifted]
    known = ClosedJaxpr(Jaxpr([], e + pc + pk + px, known_eqns, ok + oy + scan_res), [])
    outs = scan_p.bind(*extra, *consts, *carry, *xs, jaxpr=_intern(known),
                       num_consts=len(e) + len(pc), num_carry=len(pk), length=length,
                       reverse=reverse, unroll=unroll)
    n_p = len(ok) + len(oy)
    p_out = outs[:n_p]
    env = dict(zip(scan_res, outs[n_p:]))
    for v, k in shifted.items():
        kind, where = stacked_src[ok[k]]
        src = p_out[len(ok) + where] if kind == "y" else env[where]
        env[v] = _carry_in_per_step(carry[k], src, length, reverse)
    stacked = [env[v] for v in iter_res]
    const_vals = eval_jaxpr(Jaxpr([], e + pc, hoisted, const_res), [], *extra, *consts) \
        if const_res else []
    xs_env = dict(zip(px, xs))
    lin = ClosedJaxpr(Jaxpr([], const_res + tc + tk + xs_res + iter_res + tx, lin_eqns,
                            otk + oty), [])
    t_out = scan_p.bind(*const_vals, *t_vals[0], *t_vals[1], *[xs_env[v] for v in xs_res],
                        *stacked, *t_vals[2], jaxpr=_intern(lin),
                        num_consts=len(const_res) + len(tc), num_carry=len(tk), length=length,
                        reverse=reverse, unroll=unroll)
    return list(p_out), list(t_out)


@scan_p.def_jvp
def _scan_jvp(primals, tangents, jaxpr, num_consts, num_carry, length, reverse, unroll):
    n_c, n_k = num_consts, num_carry
    n_x = len(primals) - n_c - n_k
    avals = [aval_of(p) for p in primals]
    nz = [_nonzero(t) and _inexact(a) for t, a in zip(tangents, avals)]
    for i in range(n_c, n_c + n_k):
        nz[i] = _inexact(avals[i])        # every float carry gets a tangent
    jvp_closed, _ = jvp_jaxpr(jaxpr, nz, instantiate_out=True)
    j, extra = _parts(jvp_closed)
    nz_c, nz_k, nz_x = nz[:n_c], nz[n_c:n_c + n_k], nz[n_c + n_k:]
    e, pc, pk, px, tc, tk, tx = _groups([len(extra), n_c, n_k, n_x, sum(nz_c), sum(nz_k),
                                         sum(nz_x)])
    y_avals = jaxpr.out_avals[n_k:]
    y_nz = [_inexact(a) for a in y_avals]
    ok, oy, otk, oty = _groups([n_k, len(y_avals), sum(nz_k), sum(y_nz)])
    body = _permute(j, e + pc + tc + pk + tk + px + tx, ok + otk + oy + oty)
    t_vals = [_zero_tangents_to_values(tangents[s], avals[s], nz[s]) for s in
              (builtins.slice(0, n_c), builtins.slice(n_c, n_c + n_k),
               builtins.slice(n_c + n_k, None))]
    consts, carry, xs = primals[:n_c], primals[n_c:n_c + n_k], primals[n_c + n_k:]
    if _split_linearize():
        split = _scan_jvp_split(body, _groups([len(g) for g in (e, pc, tc, pk, tk, px, tx)]),
                                _groups([len(g) for g in (ok, otk, oy, oty)]), extra,
                                consts, carry, xs, t_vals, length, reverse, unroll)
        if split is not None:
            p_out, t_lin = split
            t_carry_it = iter(t_lin[:sum(nz_k)])
            t_ys_it = iter(t_lin[sum(nz_k):])
            carry_avals = avals[n_c:n_c + n_k]
            t_out = [next(t_carry_it) if z else Zero(tangent_aval(a))
                     for a, z in zip(carry_avals, nz_k)]
            ys_full = [ShapedArray((length,) + a.shape, a.dtype, False, a.vma) for a in y_avals]
            t_out += [next(t_ys_it) if z else Zero(tangent_aval(a))
                      for a, z in zip(ys_full, y_nz)]
            return p_out, t_out
    outs = scan_p.bind(*extra, *consts, *t_vals[0], *carry, *t_vals[1], *xs, *t_vals[2],
                       jaxpr=_intern(body), num_consts=len(extra) + n_c + len(t_vals[0]),
                       num_carry=n_k + len(t_vals[1]), length=length, reverse=reverse,
                       unroll=unroll)
    p_carry = outs[:n_k]
    t_carry_it = iter(outs[n_k:n_k + sum(nz_k)])
    rest = outs[n_k + sum(nz_k):]
    p_ys, t_ys_it = rest[:len(y_avals)], iter(rest[len(y_avals):])
    carry_avals = avals[n_c:n_c + n_k]
    t_out = [next(t_carry_it) if z else Zero(tangent_aval(a))
             for a, z in zip(carry_avals, nz_k)]
    ys_full = [ShapedArray((length,) + a.shape, a.dtype, False, a.vma) for a in y_avals]
    t_out += [next(t_ys_it) if z else Zero(tangent_aval(a)) for a, z in zip(ys_full, y_nz)]
    p_out = list(p_carry) + list(p_ys)
    if _split_linearize():
        p_out = scan_p.bind(*primals, jaxpr=jaxpr, num_consts=n_c, num_carry=n_k,
                            length=length, reverse=reverse, unroll=unroll)
    return p_out, t_out


# --- transpose: a forward scan saving residuals, a reverse scan of the transposed body ---
def _recompute_carry_free(residuals, known_eqns, invariant, known_xs):
    """Residuals computed from known xs and loop invariants alone (no known carry) are
    recomputed in the reverse loop from those xs: the same work per step, but no forward scan
    and no stacked copy for them (e.g. the derivative coefficients a hand-written tangent scan
    derives from saved activations). Returns (residuals, equations to move, in order)."""
    free = set(known_xs) | set(invariant)
    free_eqns = []
    for eqn in known_eqns:
        if all(type(a) is not Var or a in free for a in eqn.invars):
            free.update(eqn.outvars)
            free_eqns.append(eqn)
    targets = [r for r in residuals if r in free and r not in invariant and r not in known_xs]
    if not targets:
        return residuals, []
    producer = {v: e for e in free_eqns for v in e.outvars}
    needed, stack = set(), list(targets)
    while stack:
        eqn = producer.get(stack.pop())
        if eqn is None or id(eqn) in needed:
            continue
        needed.add(id(eqn))
        stack.extend(a for a in eqn.invars
                     if type(a) is Var and a not in invariant and a not in known_xs)
    moved = [e for e in free_eqns if id(e) in needed]
    inputs = [a for e in moved for a in e.invars
              if type(a) is Var and (a in invariant or a in known_xs)]
    drop = set(targets)
    out = [r for r in residuals if r not in drop]
    for a in inputs:
        if a not in out:
            out.append(a)
    return out, moved


def _hoist_const_cts(jt, n_lc, n_lk, stacked_in):
    """For the backward body ``jt``: {const cotangent index: (eqn, operand vars, tail eqns)}
    for each const cotangent made by dot_general (no batch dims) or reduce_sum of per-step
    values, possibly followed by transposes, and read by nothing else in the body."""
    producer = {v: e for e in jt.eqns for v in e.outvars}
    uses = {}
    for e in jt.eqns:
        for a in e.invars:
            if type(a) is Var:
                uses[a] = uses.get(a, 0) + 1
    for a in jt.outvars:
        if type(a) is Var:
            uses[a] = uses.get(a, 0) + 1
    invars = set(jt.invars)
    per_step_in = set(stacked_in)
    out = {}
    for i in range(n_lc):
        v, tail = jt.outvars[i], []
        if type(v) is not Var or uses.get(v) != 1:
            continue
        while v in producer and producer[v].prim.name == "transpose" \
                and type(producer[v].invars[0]) is Var and uses.get(producer[v].invars[0]) == 1:
            tail.append(producer[v])
            v = producer[v].invars[0]
        e = producer.get(v)
        if e is None or uses.get(v) != 1:
            continue
        if e.prim.name == "dot_general" and e.params["dimension_numbers"][1] == ((), ()):
            ops = e.invars
        elif e.prim.name == "reduce_sum":
            ops = e.invars[:1]
        else:
            continue
        # Operands must vary per step: stacked inputs or values computed in the body from them.
        if not all(type(a) is Var and (a in per_step_in or a not in invars) for a in ops):
            continue
        if any(a not in per_step_in and a not in producer for a in ops):
            continue
        out[i] = (e, list(ops), tail[::-1])
    return out


def _apply_hoisted(h, env):
    """The sum over steps of a hoisted const cotangent, from the stacked operands in env."""
    eqn, ops, tail = h
    args = [env[v] for v in ops]
    if eqn.prim.name == "dot_general":
        (lc, rc), _ = eqn.params["dimension_numbers"]
        params = dict(eqn.params)
        params["dimension_numbers"] = (((0,) + tuple(d + 1 for d in lc),
                                        (0,) + tuple(d + 1 for d in rc)), ((), ()))
    else:
        params = dict(eqn.params)
        params["axes"] = (0,) + tuple(d + 1 for d in eqn.params["axes"])
    val = eqn.prim.bind(*args, **params)
    for t in tail:
        val = t.prim.bind(val, **t.params)
    return val


scan_p.def_rule("linear_outputs", lambda eqn, reads: linear_carry_outputs(
    eqn.params["jaxpr"].jaxpr, reads, eqn.params["num_consts"], eqn.params["num_carry"]))


@scan_p.def_transpose
def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    """Reverse mode through scan: a forward scan of the body's non-linear part saves the values
    the linear part needs (residuals); a reverse scan runs the transposed linear part."""
    n_c, n_k = num_consts, num_carry
    j = jaxpr.jaxpr
    undefined = [is_undefined_primal(a) for a in args]
    lin_in = list(undefined)
    ct_carry_in, ct_ys_in = list(cts[:n_k]), list(cts[n_k:])
    carry_out = j.outvars[:n_k]
    # Which body values depend on linear inputs. A carry whose update depends on them is linear
    # too, even when its initial value is known (an instantiated zero tangent): fixed point.
    while True:
        known_eqns, lin_eqns, lin_vars = split_known_linear(
            j.eqns, [v for v, lin in zip(j.invars, lin_in) if lin])
        changed = False
        for k in range(n_k):
            if type(carry_out[k]) is Var and carry_out[k] in lin_vars and not lin_in[n_c + k]:
                lin_in[n_c + k] = changed = True
        if not changed:
            break
    lin_outs = [i for i, v in enumerate(j.outvars)
                if (i < n_k and lin_in[n_c + i]) or (i >= n_k and type(v) is Var
                                                     and v in lin_vars)]
    # Residuals: known values read by the linear equations or returned as linear outputs.
    known_invars = [v for v, lin in zip(j.invars, lin_in) if not lin]
    const_known = set(v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if not lin)
    residuals, seen = [], set()

    def note(a):
        if type(a) is Var and a not in lin_vars and a not in seen:
            seen.add(a)
            residuals.append(a)

    for eqn in lin_eqns:
        for a in eqn.invars:
            note(a)
    for i in lin_outs:
        note(j.outvars[i])
    # Loop-invariant known values (computed from known consts only, e.g. a transposed weight)
    # are residuals computed once outside the loops, not stacked once per step.
    invariant, hoisted = set(const_known), []
    for eqn in known_eqns:
        if all(type(a) is not Var or a in invariant for a in eqn.invars):
            hoisted.append(eqn)
            invariant.update(eqn.outvars)
    residuals, remat = _remat_residuals(residuals, known_eqns, invariant)
    residuals, carry_free = _recompute_carry_free(
        residuals, known_eqns, invariant,
        set(v for v, lin in zip(j.invars[n_c + n_k:], lin_in[n_c + n_k:]) if not lin))
    moved = {id(e) for e in remat + carry_free}
    lin_eqns = [e for e in known_eqns if id(e) in moved] + lin_eqns
    const_res = [v for v in residuals if v in invariant]
    iter_res = [v for v in residuals if v not in invariant]
    # Forward scan of the known part: known carry -> known carry, residuals per step.
    k_consts = [a for a, lin in zip(args[:n_c], lin_in[:n_c]) if not lin]
    k_carry_idx = [k for k in range(n_k) if not lin_in[n_c + k]]
    k_carry = [args[n_c + k] for k in k_carry_idx]
    k_xs = [a for a, lin in zip(args[n_c + n_k:], lin_in[n_c + n_k:]) if not lin]
    # A residual that is a known xs input is that input's array: no forward scan restacks it.
    env_xs = dict(zip([v for v, lin in zip(j.invars[n_c + n_k:], lin_in[n_c + n_k:])
                       if not lin], k_xs))
    scan_res = [v for v in iter_res if v not in env_xs]
    known = ClosedJaxpr(Jaxpr([], known_invars, known_eqns,
                              [carry_out[k] for k in k_carry_idx] + scan_res), [])
    if scan_res:
        outs = scan_p.bind(*k_consts, *k_carry, *k_xs, jaxpr=_intern(known),
                           num_consts=len(k_consts), num_carry=len(k_carry), length=length,
                           reverse=reverse, unroll=unroll)
        env_scan = dict(zip(scan_res, outs[len(k_carry):]))
    else:
        env_scan = {}
    stacked_res = [env_xs[v] if v in env_xs else env_scan[v] for v in iter_res]
    env_const = dict(zip([v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if not lin],
                         k_consts))
    if any(v not in const_known for v in const_res):
        k_const_vars = [v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if not lin]
        const_res_vals = eval_jaxpr(Jaxpr([], k_const_vars, hoisted, const_res), [], *k_consts)
    else:
        const_res_vals = [env_const[v] for v in const_res]
    # The linear part: (const residuals, step residuals, linear consts, carry, xs) -> outputs.
    lin_c = [v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if lin]
    lin_k = [j.invars[n_c + k] for k in range(n_k) if lin_in[n_c + k]]
    lin_x = [v for v, lin in zip(j.invars[n_c + n_k:], lin_in[n_c + n_k:]) if lin]
    lin_out_vars = []
    for i in lin_outs:
        v = j.outvars[i]
        lin_out_vars.append(v)
    lin_jaxpr = ClosedJaxpr(Jaxpr([], const_res + iter_res + lin_c + lin_k + lin_x, lin_eqns,
                                  lin_out_vars), [])
    n_res = len(const_res) + len(iter_res)
    linear_mask = [False] * n_res + [True] * (len(lin_c) + len(lin_k) + len(lin_x))
    tr = transpose_jaxpr(lin_jaxpr, linear_mask, [True] * len(lin_outs))
    tr_j, tr_consts = _parts(tr)
    lin_carry_outs = [i for i in lin_outs if i < n_k]
    lin_y_outs = [i - n_k for i in lin_outs if i >= n_k]
    ct_carry = [instantiate(ct_carry_in[i]) for i in lin_carry_outs]
    y_avals = jaxpr.out_avals[n_k:]
    ct_ys = []
    for i in lin_y_outs:
        c = ct_ys_in[i]
        if not _nonzero(c):
            a = y_avals[i]
            c = shapes.full((length,) + a.shape, np.zeros((), a.dtype), a.dtype)
        ct_ys.append(c)
    acc0 = [shapes.full(v.aval.shape, np.zeros((), v.aval.dtype), v.aval.dtype) for v in lin_c]
    n_lc, n_lk = len(lin_c), len(lin_k)

    # A const's cotangent summed over the steps of dot_general(a_t, b_t) (a weight gradient)
    # or reduce_sum(b_t) (a bias gradient) is one op on the stacked a, b after the loop.
    jt = tr_j.jaxpr
    n_pre = len(tr_consts) + len(const_res_vals)
    stacked_in = dict(zip(jt.invars[n_pre:n_pre + len(iter_res)], stacked_res))
    stacked_in.update(zip(jt.invars[n_pre + len(iter_res) + n_lk:], ct_ys))
    hoist = _hoist_const_cts(jt, n_lc, n_lk, stacked_in)
    x_out_pos = {v: k for k, v in enumerate(jt.outvars[n_lc + n_lk:]) if type(v) is Var}
    extra = [v for v in dict.fromkeys(v for h in hoist.values() for v in h[1])
             if v not in stacked_in and v not in x_out_pos]
    # An operand concatenated in the body from values stacked anyway (the per-gate input
    # cotangents of an LSTM, joined for the recurrent weight's gradient) is joined once after
    # the loop instead of being stacked a second time.
    producer = {o: e for e in jt.eqns for o in e.outvars}
    joined = {v: producer[v] for v in extra
              if v in producer and producer[v].prim.name == "concatenate"
              and all(type(a) is Var and (a in stacked_in or a in x_out_pos)
                      for a in producer[v].invars)}
    extra = [v for v in extra if v not in joined]
    jt_run = Jaxpr(jt.constvars, jt.invars, jt.eqns, jt.outvars + extra) if extra else jt
    acc_idx = [i for i in range(n_lc) if i not in hoist]
    n_xo = len(jt.outvars) - n_lc - n_lk

    def body(carry, x):
        acc, ct_k = carry
        res_t, ct_y = x
        outs = eval_jaxpr(jt_run, [], *tr_consts, *const_res_vals, *res_t, *ct_k, *ct_y)
        ct_c_t, ct_k_new = outs[:n_lc], outs[n_lc:n_lc + n_lk]
        ct_x_t = outs[n_lc + n_lk:]
        acc = [ew.add(a, ct_c_t[i]) for a, i in zip(acc, acc_idx)]
        return (acc, list(ct_k_new)), list(ct_x_t)

    (acc_l, ct_k0), ct_xs = scan(body, ([acc0[i] for i in acc_idx], ct_carry),
                                 (list(stacked_res), ct_ys), length=length,
                                 reverse=not reverse, unroll=unroll)
    stacked_env = dict(stacked_in)
    stacked_env.update(zip(extra, ct_xs[n_xo:]))
    stacked_env.update((v, ct_xs[k]) for v, k in x_out_pos.items())
    for v, e in joined.items():
        stacked_env[v] = shapes.concatenate([stacked_env[a] for a in e.invars],
                                            e.params["dimension"] + 1)
    ct_xs = ct_xs[:n_xo]
    acc, acc_l = [None] * n_lc, iter(acc_l)
    for i in range(n_lc):
        if i in hoist:
            acc[i] = _apply_hoisted(hoist[i], stacked_env)
        else:
            acc[i] = next(acc_l)
    acc_it, k_it, x_it = iter(acc), iter(ct_k0), iter(ct_xs)
    result = []
    for i, lin in enumerate(lin_in):
        if not lin:
            result.append(None)
        elif not undefined[i]:
            next(k_it)     # a known carry start (a zero tangent): no cotangent to return
            result.append(None)
        elif i < n_c:
            result.append(next(acc_it))
        elif i < n_c + n_k:
            result.append(next(k_it))
        else:
            result.append(next(x_it))
    return result
