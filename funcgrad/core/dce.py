"""Dead-code elimination: drop the equations of a Jaxpr whose results nothing uses.

Equations with effects are always kept: those of effectful primitives (``prim.effectful``, a
bool or a function of the equation's params) and those whose sub-Jaxprs (a nested ``jit``, a
loop body) hold such equations. Higher-order primitives
can register a ``dce`` rule (``prim.def_rule("dce", rule)``) to prune their own sub-Jaxprs (``jit`` does, so unused
outputs of a nested jitted call cost nothing).

Example:
    >>> from funcgrad.core.dce import dce_closed_jaxpr
    >>> closed = funcgrad.make_jaxpr(lambda x, y: (jnp.cos(x), jnp.sin(y)))(1.0, 2.0)
    >>> new, used_inputs = dce_closed_jaxpr(closed, [False, True])   # only the 2nd output
    >>> print(new)
    { lambda ; a:f32[]{weak} b:f32[]{weak}. let
        c:f32[]{weak} = sin b
      in (c,) }
    >>> used_inputs
    [False, True]
"""
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Var, subjaxprs
from funcgrad.core.primitive import rule_table

# prim -> rule(eqn, used_outputs: list[bool]) -> (used_inputs: list[bool], new_eqn or None)
dce_rules = rule_table("dce")


def has_effects(eqn):
    """Whether ``eqn`` must run even when its results are unused."""
    effectful = eqn.prim.effectful
    if effectful(eqn.params) if callable(effectful) else effectful:
        return True
    return any(has_effects(inner) for j in subjaxprs(eqn) for inner in j.eqns)


def dce_jaxpr(jaxpr, used_outputs=None, prune_invars=False):
    """(new Jaxpr, used_inputs): keep only what the used outputs (all by default) need.

    With ``prune_invars`` the unused invars are removed too (``used_inputs`` says which).
    Unused constvars are always removed.
    """
    if used_outputs is None:
        used_outputs = [True] * len(jaxpr.outvars)
    outvars = [v for v, u in zip(jaxpr.outvars, used_outputs) if u]
    live = {v for v in outvars if isinstance(v, Var)}
    new_eqns = []
    for eqn in reversed(jaxpr.eqns):
        used = [v in live for v in eqn.outvars]
        rule = dce_rules.get(eqn.prim)
        if not any(used) and not has_effects(eqn):
            continue
        if rule is not None:
            used_ins, new_eqn = rule(eqn, used)
            if new_eqn is None:
                continue
            for v, u in zip(eqn.invars, used_ins):   # used_ins refers to the original invars
                if u and isinstance(v, Var):
                    live.add(v)
            eqn = new_eqn
        else:
            for v in eqn.invars:
                if isinstance(v, Var):
                    live.add(v)
        new_eqns.append(eqn)
    new_eqns.reverse()
    constvars = [v for v in jaxpr.constvars if v in live]
    used_inputs = [v in live for v in jaxpr.invars]
    invars = [v for v, u in zip(jaxpr.invars, used_inputs) if u] if prune_invars else jaxpr.invars
    return Jaxpr(constvars, invars, new_eqns, outvars), used_inputs


def dce_closed_jaxpr(closed, used_outputs=None, prune_invars=False):
    """(ClosedJaxpr, used_inputs) with dead equations and unused constants removed."""
    jaxpr = closed.jaxpr
    new, used_inputs = dce_jaxpr(jaxpr, used_outputs, prune_invars)
    if len(new.eqns) == len(jaxpr.eqns) and len(new.constvars) == len(jaxpr.constvars) and \
            used_outputs is None and not (prune_invars and not all(used_inputs)):
        return closed, used_inputs
    kept = set(new.constvars)
    consts = [c for v, c in zip(jaxpr.constvars, closed.consts) if v in kept]
    return ClosedJaxpr(new, consts), used_inputs


def has_dead_code(jaxpr):
    """Whether some non-effectful equation of ``jaxpr`` computes only unused values."""
    new, _ = dce_jaxpr(jaxpr)
    return len(new.eqns) != len(jaxpr.eqns)
