"""Primitives: named operations with a table of rules, one per interpreter that needs one.

Example:
    >>> exp_p = Primitive("exp")
    >>> exp_p.def_abstract_eval(lambda x: x)
    >>> exp_p.bind(x)          # dispatches to the current interpreter
"""
from funcgrad.core import errors
from funcgrad.core import interpreters

_current_get = interpreters._current.get


class Primitive:
    """An operation known to every interpreter through its rules.

    Rules (set with the ``def_*`` methods or assigned directly):
      abstract_eval(*avals, **params) -> aval, or a list of avals if ``multiple_results``
      lowering(ctx, *mlir_values, **params) -> mlir value or list of values
      jvp(primals, tangents, **params) -> (primal_out, tangent_out); tangents may be ``Zero``
      transpose(cts, *args, **params) -> cotangent per argument (``None`` for non-linear ones)
      batch(args, dims, **params) -> (out, out_dim), dims are ints or ``None`` (not batched)
      impl(*args, **params): optional eager implementation (used by higher-order primitives)
    """

    __slots__ = ("name", "multiple_results", "abstract_eval", "lowering", "jvp", "transpose",
                 "batch", "impl", "effectful", "__weakref__")

    def __init__(self, name, multiple_results=False):
        self.name = name
        self.multiple_results = multiple_results
        self.abstract_eval = self.lowering = self.jvp = self.transpose = None
        self.batch = self.impl = None
        self.effectful = False

    def __repr__(self):
        return self.name

    def bind(self, *args, **params):
        # interpreters.current(), inlined: this is on every operation's path
        interp = _current_get(None)
        if interp is None:
            interp = interpreters._root
        return interp.process_primitive(self, args, params)

    def def_abstract_eval(self, rule):
        self.abstract_eval = rule
        return rule

    def def_lowering(self, rule):
        self.lowering = rule
        return rule

    def def_jvp(self, rule):
        self.jvp = rule
        return rule

    def def_transpose(self, rule):
        self.transpose = rule
        return rule

    def def_batch(self, rule):
        self.batch = rule
        return rule

    def def_impl(self, rule):
        self.impl = rule
        return rule


def out_avals(prim, avals, params):
    """The output avals of ``prim`` as a list, whatever ``multiple_results`` is."""
    if prim.abstract_eval is None:
        raise errors.MissingRuleError(f"primitive {prim.name} has no abstract evaluation rule")
    out = prim.abstract_eval(*avals, **params)
    return list(out) if prim.multiple_results else [out]
