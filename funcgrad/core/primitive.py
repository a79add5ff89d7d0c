"""Primitives: named operations with a table of rules, one per kind of interpretation.

A rule kind is a name. The kinds every interpreter of core uses (``abstract_eval``,
``lowering``, ``jvp``, ``transpose``, ``batch``, ``impl``) are slots on the primitive, read on
hot paths; any other kind (``dce``, ``collective``, a platform's lowering ``lowering:cuda``, and
whatever a new transformation needs) lives in a per-kind table that any module may add to with
``prim.def_rule(kind, rule)``, without editing core. ``rule_table(kind)`` is that table.

Example:
    >>> import numpy as np
    >>> from funcgrad.core.primitive import Primitive, rule_table
    >>> twice_p = Primitive("twice_example", internal=True)
    >>> _ = twice_p.def_abstract_eval(lambda x: x)
    >>> _ = twice_p.def_rule("my_transform", lambda x: 2 * x)
    >>> rule_table("my_transform")[twice_p](3)
    6
"""
import contextlib
import contextvars
import sys
import threading

from funcgrad.core import errors
from funcgrad.core import interpreters

_current_get = interpreters._current.get

#: The rule kinds stored as attributes of every primitive.
SLOT_KINDS = ("abstract_eval", "lowering", "jvp", "transpose", "batch", "impl")

_tables = {}          # kind -> {Primitive: rule}, for kinds that are not slots
_primitives = []      # every primitive made, in order (internal ones left out)


def rule_table(kind):
    """{primitive: rule} for rule ``kind``: the live table for a non-slot kind (``dce``,
    ``collective``, ``lowering:<platform>``, ...), a fresh dict built from the slots otherwise.

    Example:
        >>> from funcgrad.core.primitive import rule_table
        >>> from funcgrad.lax.elementwise import exp_p
        >>> rule_table("jvp")[exp_p] is exp_p.jvp
        True
    """
    if kind in SLOT_KINDS:
        return {p: getattr(p, kind) for p in _primitives if getattr(p, kind) is not None}
    return _tables.setdefault(kind, {})


def all_primitives():
    """Every primitive defined so far (by ``funcgrad.lax``, the call-like primitives of ``jit``,
    ``checkpoint``, ``custom_jvp``/``custom_vjp``, ...), in definition order. Internal
    primitives (those no transformation sees) are left out.

    Example:
        >>> from funcgrad.core.primitive import all_primitives
        >>> "exp" in {p.name for p in all_primitives()}
        True
    """
    return list(_primitives)


class Primitive:
    """An operation known to every interpreter through its rules.

    Rules (set with ``def_rule(kind, fn)`` or its shorthands ``def_*``):
      abstract_eval(*avals, **params) -> aval, or a list of avals if ``multiple_results``
      lowering(ctx, *mlir_values, **params) -> mlir value or list of values
      jvp(primals, tangents, **params) -> (primal_out, tangent_out); tangents may be ``Zero``
      transpose(cts, *args, **params) -> cotangent per argument (``None`` for non-linear ones)
      batch(args, dims, **params) -> (out, out_dim), dims are ints or ``None`` (not batched)
      impl(*args, **params): optional eager implementation (used by higher-order primitives)
      dce(eqn, used_outputs) -> (used_inputs, new eqn or None): prunes a higher-order equation
      collective(axis_data, args, dims, /, **params) -> (out, out_dim): a collective over a
        vmap axis it names
      lowering:<platform>: a lowering used on that platform instead of ``lowering``

    ``internal=True`` keeps a primitive out of ``all_primitives()`` (one that only ever
    appears inside another rule, such as the linear half of a ``custom_vjp``).
    """

    __slots__ = ("name", "multiple_results") + SLOT_KINDS + ("effectful", "defined_in",
                                                             "__weakref__")

    def __init__(self, name, multiple_results=False, internal=False):
        self.name = name
        self.multiple_results = multiple_results
        self.defined_in = sys._getframe(1).f_globals.get("__name__")   # for messages
        self.abstract_eval = self.lowering = self.jvp = self.transpose = None
        self.batch = self.impl = None
        self.effectful = False
        if not internal:
            _primitives.append(self)

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        if policies_open[0]:
            policy = _policy.get()
            if policy is not None:
                return _bind_under_policy(self, policy, args, params)
        # interpreters.current(), inlined: this is on every operation's path
        interp = _current_get(None)
        if interp is None:
            interp = interpreters._root
        return interp.process_primitive(self, args, params)

    def def_rule(self, kind, rule):
        """Register ``rule`` for ``kind``; returns ``rule`` (usable as a decorator)."""
        if kind in SLOT_KINDS:
            setattr(self, kind, rule)
        else:
            _tables.setdefault(kind, {})[self] = rule
        return rule

    def get_rule(self, kind):
        """The rule of ``kind`` for this primitive, or None."""
        if kind in SLOT_KINDS:
            return getattr(self, kind)
        table = _tables.get(kind)
        return None if table is None else table.get(self)

    def lowering_for(self, platform):
        """The lowering rule for ``platform``: its own ``lowering:<platform>`` rule if one is
        registered, else the generic ``lowering``."""
        table = _tables.get("lowering:" + platform)
        rule = None if table is None else table.get(self)
        return self.lowering if rule is None else rule

    def def_abstract_eval(self, rule):
        return self.def_rule("abstract_eval", rule)

    def def_lowering(self, rule, platform=None):
        """The StableHLO lowering, for every platform or (``platform="cpu"``...) for one."""
        return self.def_rule("lowering" if platform is None else "lowering:" + platform, rule)

    def def_jvp(self, rule):
        return self.def_rule("jvp", rule)

    def def_transpose(self, rule):
        return self.def_rule("transpose", rule)

    def def_batch(self, rule):
        return self.def_rule("batch", rule)

    def def_impl(self, rule):
        return self.def_rule("impl", rule)


# --- bind policies ---------------------------------------------------------------------------
# A policy (``funcgrad.amp.autocast``) rewrites the applications that user and library code
# makes while it is open, before any interpreter sees them: ``policy.rules`` maps a primitive
# to ``rule(policy, prim, args, params)``. The policy is off while a rule, an interpreter or
# the machinery of a transformation (the backward pass, lowering) applies primitives of its
# own, so it changes only the operations the program itself asks for.
_policy = contextvars.ContextVar("funcgrad_bind_policy", default=None)
policies_open = [0]     # policy blocks open in any thread; while 0, bind reads only this
_policies_lock = threading.Lock()


def current_policy():
    """The bind policy in force here (an ``autocast`` state), or None.

    Example:
        >>> from funcgrad.core.primitive import current_policy
        >>> current_policy() is None
        True
        >>> with funcgrad.amp.autocast("cpu", dtype=jnp.bfloat16):
        ...     print(current_policy() is not None)
        True
    """
    return _policy.get() if policies_open[0] else None


@contextlib.contextmanager
def policy_scope(policy):
    """Make ``policy`` (None: no policy) the bind policy inside the ``with`` block.

    Example:
        >>> from funcgrad.core.primitive import current_policy, policy_scope
        >>> with funcgrad.amp.autocast("cpu", dtype=jnp.bfloat16):
        ...     with policy_scope(None):      # the backward pass of autocast code runs so
        ...         print(current_policy())
        None
    """
    if policy is None and not policies_open[0]:
        yield
        return
    token = _policy.set(policy)
    with _policies_lock:
        policies_open[0] += 1
    try:
        yield
    finally:
        with _policies_lock:
            policies_open[0] -= 1
        _policy.reset(token)


def _bind_under_policy(prim, policy, args, params):
    token = _policy.set(None)
    try:
        rule = policy.rules.get(prim)
        if rule is None:
            return prim.bind(*args, **params)
        return rule(policy, prim, args, params)
    finally:
        _policy.reset(token)


def out_avals(prim, avals, params):
    """The output avals of ``prim`` as a list, whatever ``multiple_results`` is."""
    if prim.abstract_eval is None:
        raise errors.MissingRuleError(f"primitive {prim.name} has no abstract evaluation rule")
    out = prim.abstract_eval(*avals, **params)
    return list(out) if prim.multiple_results else [out]
