"""Splitting a loop body's equations into a known (primal) part and a linear (tangent) part,
for ``scan``'s reverse-mode rules (``scan_reverse.py``).

An equation that reads a linear value is linear, except a ``cond`` or a ``scan`` whose
body computes some outputs from known inputs alone: the JVP of a ``cond`` inside a loop body
is one ``cond`` returning the primal and the tangent outputs together, and the primal ones
(the loop's primal carry) must stay on the known side, or the known carry would be treated as
a tangent and its products could not be transposed. Such an equation is split in two: a
known copy with its linear inputs replaced by zeros (the outputs that do not depend on them
are unchanged by that) computes the known outputs, and the equation itself computes the
linear ones. Each output's dependence on the linear inputs is worked out through the
branches or the loop body (with a fixed point over a scan's carries).

Example:
    >>> from funcgrad.lax.control_flow.linear_split import split_known_linear
    >>> def body(c, x, t):
    ...     return lax.cond(x > 0, lambda v, u: (v * 2.0, u * 2.0), lambda v, u: (v, u), c, t)
    >>> j = funcgrad.make_jaxpr(body)(1.0, 1.0, 1.0).jaxpr
    >>> known, linear, lin_vars = split_known_linear(j.eqns, [j.invars[2]])
    >>> j.outvars[0] in lin_vars, j.outvars[1] in lin_vars
    (False, True)
"""
import numpy as np

from funcgrad.core.jaxpr import Eqn, Var, literal
from funcgrad.lax.shapes import broadcast_in_dim_p


def split_known_linear(eqns, linear_inputs):
    """(equations computing known values, equations computing linear ones, the set of linear
    vars): a value is linear when it depends on one of ``linear_inputs``."""
    lin_vars = set(linear_inputs)
    known_eqns, lin_eqns = [], []
    for eqn in eqns:
        reads = [type(a) is Var and a in lin_vars for a in eqn.invars]
        if not any(reads):
            known_eqns.append(eqn)
            continue
        flags = _linear_outputs(eqn, reads)
        if flags is None or all(flags):
            lin_eqns.append(eqn)
            lin_vars.update(eqn.outvars)
            continue
        zeros, known_copy, linear_rest = _split(eqn, reads, flags)
        known_eqns.extend(zeros)
        known_eqns.append(known_copy)
        lin_eqns.append(linear_rest)
        lin_vars.update(v for v, lin in zip(eqn.outvars, flags) if lin)
    return known_eqns, lin_eqns, lin_vars


def _linear_outputs(eqn, reads):
    """Per output of ``eqn``: whether it depends on the inputs flagged in ``reads``, from the
    primitive's ``linear_outputs`` rule (``cond`` and ``scan`` define one, next to their other
    rules); None without a rule (then every output counts as linear)."""
    rule = eqn.prim.get_rule("linear_outputs")
    return None if rule is None else rule(eqn, reads)


def linear_carry_outputs(jaxpr, reads, num_consts, num_carry):
    """Which outputs of a loop body ``jaxpr`` (consts, carry, xs -> carry, ys) depend on the
    inputs flagged in ``reads``: a carry updated from a linear value is linear (fixed point)."""
    lin_in = list(reads)
    while True:
        _, _, lin = split_known_linear(jaxpr.eqns,
                                       [v for v, r in zip(jaxpr.invars, lin_in) if r])
        grown = [k for k in range(num_carry) if not lin_in[num_consts + k]
                 and type(jaxpr.outvars[k]) is Var and jaxpr.outvars[k] in lin]
        if not grown:
            return [type(o) is Var and o in lin for o in jaxpr.outvars]
        for k in grown:
            lin_in[num_consts + k] = True


def linear_branch_outputs(branches, reads):
    """Which outputs of a ``cond`` with ``branches`` depend on the operands flagged in
    ``reads``: those that do in any branch."""
    flags = [False] * len(branches[0].jaxpr.outvars)
    for branch in branches:
        j = branch.jaxpr
        _, _, lin = split_known_linear(j.eqns, [v for v, r in zip(j.invars, reads) if r])
        flags = [f or (type(o) is Var and o in lin) for f, o in zip(flags, j.outvars)]
    return flags


def _split(eqn, reads, flags):
    """(equations making zeros, the known copy of ``eqn``, the linear rest of ``eqn``)."""
    zeros, invars = [], []
    for a, r in zip(eqn.invars, reads):
        if not r:
            invars.append(a)
        elif a.aval.shape == ():
            invars.append(literal(np.zeros((), a.aval.dtype)))
        else:
            z = Var(a.aval)
            zeros.append(Eqn(broadcast_in_dim_p, [literal(np.zeros((), a.aval.dtype))],
                             dict(shape=a.aval.shape, broadcast_dimensions=()), [z],
                             eqn.source_info, eqn.name_stack))
            invars.append(z)
    known_outs = [Var(v.aval) if lin else v for v, lin in zip(eqn.outvars, flags)]
    linear_outs = [v if lin else Var(v.aval) for v, lin in zip(eqn.outvars, flags)]
    known_copy = Eqn(eqn.prim, invars, eqn.params, known_outs, eqn.source_info, eqn.name_stack)
    linear_rest = Eqn(eqn.prim, eqn.invars, eqn.params, linear_outs, eqn.source_info,
                      eqn.name_stack)
    return zeros, known_copy, linear_rest


__all__ = ["split_known_linear", "linear_carry_outputs", "linear_branch_outputs"]
