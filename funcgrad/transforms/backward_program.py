"""Eager reverse mode as one compiled program per recurring tape.

An eager ``grad``/``vjp`` records the forward pass as a linear Jaxpr (the "tape"; each library
function such as ``F.conv2d`` is one nested ``jit`` equation) and then transposes it equation
by equation, each transposed equation running as its own executable. A training loop records
the same tape at every step, only with new residual values. ``transpose`` recognises a tape
it has seen before by its structure (primitives, parameters, wiring and avals, not the
values), and from the second sighting on runs the whole backward pass as one compiled program
taking the residuals and cotangents as arguments: one dispatch instead of one per equation,
and XLA fuses across the equations' boundaries.

Only the backward pass is fused: the user's forward code still runs operation by operation,
so Python control flow on values, printing and errors at the user's line are unchanged. A tape
seen once (a one-off structure) is transposed equation by equation as before, so it compiles
nothing new; NaN/Inf checks, autocast policies and effectful equations keep that path too.

Example:
    >>> from funcgrad.transforms import backward_program
    >>> f = lambda w: jnp.sum(jnp.tanh(w) ** 2)
    >>> g1 = funcgrad.grad(f)(jnp.ones(3))           # first sighting: op by op
    >>> g2 = funcgrad.grad(f)(jnp.full(3, 2.0))      # same tape: one compiled backward
    >>> backward_program.stats()["fused_runs"] >= 1, g2.round(4)
    (True, Array([0.1362, 0.1362, 0.1362], dtype=float32))
"""
import collections

from funcgrad.core import interpreters
from funcgrad.core.ad import UndefinedPrimal, backward_pass
from funcgrad.core.ad_util import Zero
from funcgrad.core.dce import has_effects
from funcgrad.core.jaxpr import Literal, Var
from funcgrad.core.primitive import current_policy
from funcgrad.core.values import aval_of
from funcgrad.lowering import nan_checks

_MAX_TAPES = 64          # structures remembered (least recently used dropped first)
_SEEN = object()         # a structure seen once: not compiled yet
_UNFUSABLE = object()    # a structure that keeps the equation-by-equation path
_programs = collections.OrderedDict()   # structure key -> _SEEN | _UNFUSABLE | _Program
_counts = {"fused_runs": 0, "compiled": 0}


class _Program:
    """The jitted backward pass of one tape structure."""

    __slots__ = ("run", "out_nz")

    def __init__(self, jaxpr, ct_nz):
        from funcgrad.transforms.jit import jit
        self.out_nz = None

        def backward(consts, cts):
            it = iter(cts)
            full = [next(it) if nz else Zero(v.aval) for v, nz in zip(jaxpr.outvars, ct_nz)]
            args = [UndefinedPrimal(v.aval) for v in jaxpr.invars]
            res = backward_pass(jaxpr, consts, args, full)
            self.out_nz = [type(r) is not Zero for r in res]
            return [r for r in res if type(r) is not Zero]
        backward.__name__ = "backward"
        self.run = jit(backward)


def _structure_key(jaxpr, cts):
    """A hashable key equal for tapes that differ only in their residual values (None when
    some parameter or literal cannot be hashed)."""
    ids = {}
    for v in jaxpr.constvars:
        ids[v] = len(ids)
    for v in jaxpr.invars:
        ids[v] = len(ids)
    parts = [tuple([v.aval.key for v in jaxpr.constvars]),
             tuple([v.aval.key for v in jaxpr.invars])]
    for eqn in jaxpr.eqns:
        ins = tuple([ids[x] if type(x) is Var else (x.val, x.aval.key) for x in eqn.invars])
        for v in eqn.outvars:
            ids[v] = len(ids)
        parts.append((eqn.prim, tuple(eqn.params.items()), ins))
    parts.append(tuple([ids[x] if type(x) is Var else (x.val, x.aval.key)
                        for x in jaxpr.outvars]))
    parts.append(tuple([None if type(c) is Zero else aval_of(c).key for c in cts]))
    key = tuple(parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _fusable(jaxpr):
    return not any(has_effects(eqn) for eqn in jaxpr.eqns) and \
        not any(isinstance(x, Literal) for x in jaxpr.outvars)


def transpose(lin, cts):
    """``lin.transpose(cts)`` (a ``core.ad.LinearFunction``; one cotangent per output, Zero
    allowed), run as one compiled program when called eagerly on a tape structure seen
    before.

    Example:
        >>> from funcgrad.transforms import backward_program
        >>> from funcgrad.core.ad import linearize_flat
        >>> outs, lin = linearize_flat(lambda x: [jnp.sin(x) * 2.0], [jnp.zeros(2)])
        >>> backward_program.transpose(lin, [jnp.ones(2)])
        [Array([2., 2.], dtype=float32)]
    """
    if not interpreters.is_eager() or nan_checks.enabled() or current_policy() is not None:
        return lin.transpose(cts)
    jaxpr = lin.closed.jaxpr
    cts_nz = [ct for ct, nz in zip(cts, lin.out_nz) if nz]
    key = _structure_key(jaxpr, cts_nz)
    if key is None:
        return lin.transpose(cts)
    entry = _programs.get(key)
    if entry is None:
        _programs[key] = _SEEN
        if len(_programs) > _MAX_TAPES:
            _programs.popitem(last=False)
        return lin.transpose(cts)
    _programs.move_to_end(key)
    if entry is _UNFUSABLE:
        return lin.transpose(cts)
    if entry is _SEEN:
        if not _fusable(jaxpr):
            _programs[key] = _UNFUSABLE
            return lin.transpose(cts)
        entry = _programs[key] = _Program(jaxpr, [type(c) is not Zero for c in cts_nz])
        _counts["compiled"] += 1
    outs = iter(entry.run(list(lin.closed.consts), [c for c in cts_nz if type(c) is not Zero]))
    _counts["fused_runs"] += 1
    in_cts = iter([next(outs) if nz else Zero(v.aval)
                   for v, nz in zip(jaxpr.invars, entry.out_nz)])
    return [next(in_cts) if nz else Zero(a) for nz, a in zip(lin.in_nz, lin.in_avals)]


def stats():
    """Counters: ``compiled`` (backward programs made) and ``fused_runs`` (backward passes
    run as one program), plus ``tapes`` (structures remembered).

    Example:
        >>> from funcgrad.transforms import backward_program
        >>> sorted(backward_program.stats())
        ['compiled', 'fused_runs', 'tapes']
    """
    return dict(_counts, tapes=len(_programs))


def clear():
    """Forget every remembered tape structure and its compiled backward program, and reset
    the ``stats`` counters.

    Example:
        >>> from funcgrad.transforms import backward_program
        >>> backward_program.clear(); backward_program.stats()["tapes"]
        0
    """
    _programs.clear()
    for k in _counts:
        _counts[k] = 0
