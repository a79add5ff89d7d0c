"""Varying manual axes: the type that says over which mesh axes a ``shard_map`` value varies.

Inside the body of a ``shard_map`` with ``check_vma=True`` (``check_rep``, the default) every
value's aval carries ``vma``, the frozenset of manual mesh axes it may differ over from device
to device (as JAX 0.10's ``check_vma``): an operand's are the axes its in spec names,
constants' and literals' none, and each primitive says what its result's are (``vma`` rules,
``prim.def_rule("vma", rule)``; the collectives of ``lax/parallel.py`` have theirs). Where
the operands of an ordinary operation differ, the staging interpreter first applies ``pvary``
(the identity, typed varying) to those that vary over fewer axes. The types change no value;
they decide what reverse mode does: the transpose of ``pvary`` is a ``psum`` (the devices'
cotangents of a replicated value add up) and the transpose of a ``psum`` of a varying value
into a replicated one is ``pvary`` (no communication). Outside such bodies every ``vma`` is
empty and nothing here runs.

A ``vma`` rule takes the operands' vmas (and the equation's params) and returns ``(needed,
outs)``: per operand the axes it must vary over (``None``: as they are) and per result its
vma (or one frozenset for all). Primitives without one: results vary over the union of the operands' axes, which every
operand is made to vary over; higher-order ones (``jit``, ``remat``, custom rules...) take
their bodies' output types, whose operands were typed when the bodies were staged (``cond``
and ``while`` have rules that add their index's or predicate's type: a varying one makes
every result vary).

Example:
    >>> from funcgrad.core import vma
    >>> from funcgrad.core.avals import ShapedArray
    >>> with vma.typing(("x",)):
    ...     closed = funcgrad.make_jaxpr(lambda a, b: a * b)(
    ...         ShapedArray((2,), np.float32, vma={"x"}), ShapedArray((2,), np.float32))
    >>> [e.prim.name for e in closed.eqns]
    ['pvary', 'mul']
    >>> closed.out_avals
    [f32[2]{V:x}]
"""
import contextlib
import contextvars

from funcgrad.core import array_ops
from funcgrad.core.jaxpr import ClosedJaxpr, Eqn, Jaxpr, subjaxprs
from funcgrad.core.primitive import rule_table

_NONE = frozenset()
_typed = contextvars.ContextVar("funcgrad_vma_axes", default=_NONE)
_RULES = rule_table("vma")


def typed_axes():
    """The manual mesh axes values are typed over here (empty outside checked shard_maps)."""
    return _typed.get()


@contextlib.contextmanager
def typing(axes):
    """Type values by the ``axes`` they vary over inside the ``with`` block (a shard_map body
    with ``check_vma=True`` being staged or transformed)."""
    token = _typed.set(frozenset(axes))
    try:
        yield
    finally:
        _typed.reset(token)


def vma_of(x):
    """The vma of ``x`` (empty for concrete values and anything not typed)."""
    aval = getattr(x, "aval", None)
    return getattr(aval, "vma", _NONE)


def vary(x, axes):
    """``x`` made to vary over ``axes`` too (``pvary`` over the typed ones it lacks)."""
    missing = (frozenset(axes) - vma_of(x)) & typed_axes()
    return array_ops.pvary(x, tuple(sorted(missing))) if missing else x


def summed_like(ct, aval):
    """A cotangent that varies over typed axes its primal (of ``aval``) does not, summed over
    them: the primal is the same on every device, so the devices' parts of its cotangent add
    up (what a ``pvary`` would have transposed to; a ``custom_vjp`` backward rule, for one,
    can return such a cotangent)."""
    extra = (vma_of(ct) - aval.vma) & typed_axes()
    return array_ops.psum(ct, tuple(sorted(extra))) if extra else ct


def _default_rule(prim, in_vmas, params):
    if subjaxprs_of(prim, params):
        return None, None
    union = _NONE.union(*in_vmas)
    return [union] * len(in_vmas), union


def subjaxprs_of(prim, params):
    """The bodies an equation of ``prim`` with ``params`` would carry."""
    return subjaxprs(Eqn(prim, [], params, [], None)) if _has_jaxpr_param(params) else []


def _has_jaxpr_param(params):
    for v in params.values():
        if isinstance(v, (ClosedJaxpr, Jaxpr)):
            return True
        if isinstance(v, (tuple, list)) and v and isinstance(v[0], (ClosedJaxpr, Jaxpr)):
            return True
    return False


def match_operands(prim, args, params):
    """``args`` with ``pvary`` applied where ``prim``'s vma rule asks for more varying axes,
    and the results' vmas (one frozenset for every result; None: take the bodies' types)."""
    in_vmas = [vma_of(a) for a in args]
    rule = _RULES.get(prim)
    if rule is None:
        needed, outs = _default_rule(prim, in_vmas, params)
    else:
        needed, outs = rule(in_vmas, **params)
    if needed is not None:
        args = [a if want is None or want <= have else vary(a, want)
                for a, have, want in zip(args, in_vmas, needed)]
    return args, outs


def typed_avals(prim, avals, params, outs):
    """The output avals of an equation with their vmas set."""
    if outs is None:     # a higher-order primitive: its bodies' output types
        outs = _body_out_vmas(prim, params, len(avals))
        if outs is None:
            return avals
    if isinstance(outs, frozenset):
        outs = [outs] * len(avals)
    return [a if a.vma == v else a.update(vma=v) for a, v in zip(avals, outs)]


def out_vmas(jaxprs):
    """Per output, the union of the vmas of that output of each of ``jaxprs`` (Jaxprs or
    ClosedJaxprs with the same number of outputs): a ``cond``'s branches, a loop's body."""
    found = None
    for j in jaxprs:
        vmas = [vma_of(v) for v in getattr(j, "jaxpr", j).outvars]
        found = vmas if found is None else [a | b for a, b in zip(found, vmas)]
    return found


def _body_out_vmas(prim, params, n_out):
    bodies = [j for j in subjaxprs_of(prim, params) if len(j.outvars) == n_out]
    return out_vmas(bodies) if bodies else None


__all__ = ["typed_axes", "typing", "vma_of", "vary", "summed_like", "match_operands",
           "typed_avals", "out_vmas"]
