"""Jaxpr -> StableHLO module, with each equation lowered by its primitive's lowering rule."""

import numpy as np

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _chlo, _jax_mlir_ext, _stablehlo
from jaxlib.mlir.dialects import func as func_dialect
from jaxlib.mlir.dialects import sdy as _sdy
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core.jaxpr import ClosedJaxpr, Literal
from funcgrad.lax import _hlo

_registry = ir.DialectRegistry()
_jax_mlir_ext.register_dialects(_registry)   # func, arith and the other upstream dialects


def new_context():
    ctx = ir.Context()
    ctx.append_dialect_registry(_registry)
    ctx.load_all_available_dialects()
    _stablehlo.register_dialect(ctx, load=True)
    _chlo.register_dialect(ctx, load=True)
    _sdy.register_dialect(ctx)       # Shardy's ops, for programs partitioned over a mesh
    return ctx


class LoweringError(TypeError):
    """A primitive could not be lowered to StableHLO."""


class LoweringRuleContext:
    """What a lowering rule may know besides its operands.

    ``avals_in``/``avals_out``: the equation's abstract values; ``module``: the module being
    built (for rules that need to add functions); ``lower_jaxpr(jaxpr, consts, args)`` lowers a
    sub-jaxpr inline at the current insertion point and returns its output values.
    """

    __slots__ = ("module", "avals_in", "avals_out", "platform", "axis_env", "host_callbacks")

    def __init__(self, module, avals_in, avals_out, platform, axis_env, host_callbacks=None):
        self.module, self.avals_in, self.avals_out = module, avals_in, avals_out
        self.platform, self.axis_env = platform, axis_env
        self.host_callbacks = host_callbacks

    def lower_jaxpr(self, jaxpr, consts, args):
        if isinstance(jaxpr, ClosedJaxpr):
            jaxpr = jaxpr.jaxpr
        return lower_jaxpr_inline(self.module, jaxpr, consts, args, self.platform, self.axis_env,
                                  self.host_callbacks)

    def add_host_callback(self, fn):
        """Register Python function ``fn`` for the executable being built; returns the index a
        host-callback custom call names it by."""
        if self.host_callbacks is None:
            raise LoweringError("a host callback needs a lowering made for compilation (this "
                                "lowering keeps no callbacks)")
        self.host_callbacks.append(fn)
        return len(self.host_callbacks) - 1

    def lower_fun(self, fn, args, name="lowered"):
        """Lower lax code in place of the rule's operation: ``fn`` takes values of
        ``avals_in`` and returns a list of outputs; values it closes over become constants.
        Returns the output values."""
        from funcgrad.core.staging import trace_to_jaxpr
        from funcgrad.core.values import aval_of
        from funcgrad.core.primitive import policy_scope
        with policy_scope(None):      # a lowering's own operations, not the program's
            closed, _ = trace_to_jaxpr(fn, list(self.avals_in), debug_name=name)
        consts = [_hlo.constant(np.asarray(c), aval_of(c).dtype) for c in closed.consts]
        return self.lower_jaxpr(closed.jaxpr, consts, list(args))


def _literal_value(lit):
    return _hlo.constant(lit.val, lit.aval.dtype)


def lower_jaxpr_inline(module, jaxpr, consts, args, platform="cpu", axis_env=(),
                       host_callbacks=None):
    """Emit ``jaxpr``'s equations at the current insertion point; returns output values."""
    env = {}
    for var, val in zip(jaxpr.constvars, consts):
        env[var] = val
    for var, val in zip(jaxpr.invars, args):
        env[var] = val

    def read(atom):
        if isinstance(atom, Literal):
            return _literal_value(atom)
        return env[atom]

    for eqn in jaxpr.eqns:
        rule = eqn.prim.lowering_for(platform)
        if rule is None:
            raise LoweringError(f"primitive {eqn.prim.name} has no lowering rule (for "
                                f"platform {platform})")
        ctx = LoweringRuleContext(module, [a.aval for a in eqn.invars],
                                  [v.aval for v in eqn.outvars], platform, axis_env,
                                  host_callbacks)
        try:
            outs = rule(ctx, *[read(a) for a in eqn.invars], **eqn.params)
        except LoweringError:
            raise
        except Exception as exc:
            shapes = ", ".join(a.aval.str_short() for a in eqn.invars)
            raise LoweringError(f"lowering {eqn.prim.name}({shapes}) with params "
                                f"{eqn.params} failed: {exc}") from exc
        if not eqn.prim.multiple_results:
            outs = [outs]
        outs = list(outs)
        if len(outs) != len(eqn.outvars):
            raise LoweringError(f"lowering rule of {eqn.prim.name} returned {len(outs)} values, "
                                f"expected {len(eqn.outvars)}")
        for var, val in zip(eqn.outvars, outs):
            env[var] = val
    return [read(v) for v in jaxpr.outvars]


# Whether a program donating an argument was ever lowered: until one is, no buffer can have
# been donated, and fast dispatch paths skip asking each argument whether it was (a donated
# buffer given to a program crashes the runtime instead of raising).
donating = [False]


def lower_closed_jaxpr(closed, name="main", platform="cpu", donated=(), consts_as_args=True,
                       axis_env=(), host_callbacks=None):
    """A StableHLO module whose ``main`` takes (consts..., args...) and returns the outputs.

    Returns (module, context). ``donated`` flags (one per non-const argument) let XLA reuse
    those input buffers for outputs. Python functions that host-callback custom calls name are
    appended to the list ``host_callbacks`` (the compiler must be given them).
    """
    jaxpr = closed.jaxpr
    ctx = new_context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        in_avals = [v.aval for v in jaxpr.constvars] + [v.aval for v in jaxpr.invars]
        in_types = [_hlo.ir_type(a) for a in in_avals]
        out_types = [_hlo.ir_type(v.aval) for v in jaxpr.outvars]
        with ir.InsertionPoint(module.body):
            ftype = ir.FunctionType.get(in_types, out_types)
            fn = func_dialect.FuncOp("main", ftype)
            fn.attributes["sym_visibility"] = ir.StringAttr.get("public")
            if any(donated):
                donating[0] = True
                n_consts = len(jaxpr.constvars)
                attrs = []
                for i in range(len(in_types)):
                    d = i >= n_consts and donated[i - n_consts]
                    attrs.append(ir.DictAttr.get(
                        {"jax.buffer_donor": ir.BoolAttr.get(True)} if d else {}))
                fn.arg_attrs = ir.ArrayAttr.get(attrs)
            block = fn.add_entry_block()
            with ir.InsertionPoint(block):
                n = len(jaxpr.constvars)
                outs = lower_jaxpr_inline(module, jaxpr, block.arguments[:n],
                                          block.arguments[n:], platform, axis_env,
                                          host_callbacks)
                func_dialect.ReturnOp(outs)
        module.operation.attributes["sym_name"] = ir.StringAttr.get("funcgrad_" + _sanitize(name))
    return module, ctx


def _sanitize(name):
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "fn"


def module_text(module):
    return str(module)


# Keeps stablehlo imported for rules that want ``from funcgrad.lowering.mlir import stablehlo``.
__all__ = ["lower_closed_jaxpr", "lower_jaxpr_inline", "LoweringRuleContext", "LoweringError",
           "stablehlo", "new_context"]
