"""Replication in ``shard_map`` bodies: over which mesh axes is each value of a body known to
be the same on every device, whatever the bodies' types (``core/vma.py``) say? The check of
``funcgrad.shard_map``'s out specs accepts an axis that this analysis or the output's type
finds replicated (``all_gather``'s result is typed varying but is replicated); in unchecked
bodies (``check_rep=False``, no types) the specs of the residuals a JVP passes between regions
and the transpose's ``psum`` of replicated values (a multiplication) read it.

A forward pass over the body's Jaxpr keeps, per value, the set of manual mesh axes it is
replicated over. An operand starts with the manual axes its in spec does not name; constants
and literals are replicated over every axis; an ordinary operation's result is replicated over
the axes all its operands are; ``psum``/``pmax``/``pmin``/``all_gather`` over some axes make
their result replicated over them too; ``axis_index``, ``ppermute``, ``psum_scatter``,
``all_to_all`` and ``pvary`` (a value typed varying, ``core/vma.py``) make it vary over theirs. Bodies of ``jit``, ``remat`` and custom-derivative
calls are followed; ``cond`` takes the axes every branch (and the index) agree on; the carries
of ``scan`` and ``while_loop`` keep the axes every iteration keeps (a fixed point); other
higher-order equations take what their operands share (pass ``check_rep=False`` where that is
too cautious).

Example:
    >>> from funcgrad.lowering.shard_map_replication import replicated_axes
    >>> from funcgrad.lowering.pmap_primitive import bound_axis
    >>> with bound_axis("x", 1):
    ...     closed = funcgrad.make_jaxpr(lambda a: (a * 2, lax.psum(a, "x")))(jnp.ones(2))
    >>> [sorted(r) for r in replicated_axes(closed.jaxpr, [frozenset()], ("x",))]
    [[], ['x']]
"""
from funcgrad.core.jaxpr import Literal, subjaxprs

_REPLICATING = frozenset({"psum", "pmax", "pmin", "all_gather"})
_VARYING = frozenset({"ppermute", "psum_scatter", "all_to_all", "pvary"})
_FOLLOWED = frozenset({"jit", "remat", "custom_jvp_call", "custom_vjp_call", "name"})


def replicated_axes(jaxpr, in_reps, manual):
    """Per output of ``jaxpr`` (a Jaxpr), the frozenset of ``manual`` axes it is replicated
    over, given that set per input (``in_reps``)."""
    env = replication_env(jaxpr, in_reps, manual)
    return [frozenset(manual) if type(v) is Literal else env.get(v, frozenset(manual))
            for v in jaxpr.outvars]


def replication_env(jaxpr, in_reps, manual):
    """``{var: frozenset of manual axes}`` for every variable of ``jaxpr`` (not its
    sub-Jaxprs), given the axes each input is replicated over."""
    everything = frozenset(manual)
    env = dict(zip(jaxpr.invars, in_reps))

    def read(atom):
        if type(atom) is Literal:
            return everything
        return env.get(atom, everything)        # constvars: the same on every device

    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        common = everything.intersection(*ins)
        name = eqn.prim.name
        names = frozenset(eqn.params.get("axis_name", ()) or ())
        if name in _REPLICATING:
            outs = [common | (names & everything)] * len(eqn.outvars)
        elif name in _VARYING:
            outs = [common - names] * len(eqn.outvars)
        elif name == "axis_index":
            outs = [everything - names]
        else:
            outs = _higher_order(eqn, ins, common, manual)
        env.update(zip(eqn.outvars, outs))
    return env


def _higher_order(eqn, ins, common, manual):
    subs = subjaxprs(eqn)
    n_out = len(eqn.outvars)
    if not subs:
        return [common] * n_out
    if eqn.prim.name in _FOLLOWED:
        sub = subs[0]
        if len(sub.invars) == len(ins) and len(sub.outvars) == n_out:
            return replicated_axes(sub, ins, manual)
    if eqn.prim.name == "cond" and all(len(s.invars) == len(ins) - 1 for s in subs):
        per_branch = [replicated_axes(s, ins[1:], manual) for s in subs]
        return [ins[0].intersection(*reps) for reps in zip(*per_branch)]
    if eqn.prim.name == "scan":
        consts, carry = eqn.params["num_consts"], eqn.params["num_carry"]
        body = eqn.params["jaxpr"].jaxpr
        head, xs = ins[:consts], ins[consts + carry:]
        carry_reps = _fixpoint(lambda c: replicated_axes(body, head + c + xs, manual)[:carry],
                               ins[consts:consts + carry])
        return replicated_axes(body, head + carry_reps + xs, manual)
    if eqn.prim.name == "while":
        nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
        body = eqn.params["body_jaxpr"].jaxpr
        cond = eqn.params["cond_jaxpr"].jaxpr
        head = ins[nc:nc + nb]
        carry = _fixpoint(lambda c: replicated_axes(body, head + c, manual), ins[nc + nb:])
        # a loop whose trip count varies over an axis makes every carry vary over it
        pred = replicated_axes(cond, ins[:nc] + carry, manual)[0]
        return [c & pred for c in carry]
    return [common] * n_out


def _fixpoint(step, reps):
    """The loop-carried replication: start from the initial values' and keep only the axes
    every iteration keeps."""
    reps = list(reps)
    while True:
        new = [r & o for r, o in zip(reps, step(reps))]
        if new == reps:
            return reps
        reps = new


__all__ = ["replicated_axes", "replication_env"]
