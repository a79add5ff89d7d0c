"""The machinery of automatic differentiation: the JVP interpreter, linearization, transposition.

* The JVP interpreter carries (primal, tangent) pairs through each primitive's jvp rule.
* ``linearize_flat`` runs the JVP with the tangents as staged values of a partially evaluating
  staging interpreter: primal operations run now (on the parent interpreter), tangent operations
  are recorded into a linear Jaxpr.
* ``backward_pass`` transposes a linear Jaxpr with each primitive's transpose rule, walking its
  equations backwards (reverse mode is linearize + transpose).
* ``jvp_jaxpr``, ``transpose_jaxpr`` and ``transpose_call`` transform staged bodies, for the
  rules of higher-order primitives (jit, remat, control flow).

The user API (``jvp``, ``grad``, ``vjp``, ``jacfwd``, ...) is ``funcgrad.transforms.ad``.
Tangents and cotangents may be symbolic zeros (``ad_util.Zero``): no work is done for them.
Rules bind primitives under the parent interpreter, so derivatives of derivatives, derivatives
under ``jit`` and of ``jit`` all nest.

Example:
    >>> import funcgrad.numpy as jnp
    >>> from funcgrad.core import ad
    >>> outs, lin = ad.linearize_flat(lambda x: [jnp.sin(x)], [jnp.array(0.0)])
    >>> lin.jvp([jnp.array(2.0)])
    [Array(2., dtype=float32)]
"""
import numpy as np

from funcgrad import tree_util
from funcgrad.core import array_ops, dtypes, errors, interpreters, primitive, source_info, vma
from funcgrad.core.ad_util import (UndefinedPrimal, Zero, add_tangents, instantiate,
                                   is_undefined_primal, tangent_aval)
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.interpreters import Interpreter, Tracer
from funcgrad.core.jaxpr import Literal, Var, consts_as_args
from funcgrad.core.staging import StagingInterpreter, trace_to_jaxpr
from funcgrad.core.values import aval_of


# --- the JVP interpreter -------------------------------------------------------------------
class JVPTracer(Tracer):
    """A value inside ``jvp``: its primal and its tangent (never a Zero: those are dropped)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, interp, primal, tangent):
        self._interp, self.primal, self.tangent = interp, primal, tangent

    @property
    def aval(self):
        return aval_of(self.primal)

    def _concrete(self, operation):
        p = self.primal
        if isinstance(p, Tracer):
            return p._concrete(operation)
        return np.asarray(p)


class JVPInterpreter(Interpreter):
    """Applies jvp rules to applications that involve its own tracers."""

    def __init__(self, parent, debug_name=None):
        self.parent = parent
        self.debug_name = debug_name

    def new(self, primal, tangent):
        if type(tangent) is Zero:
            return primal
        return JVPTracer(self, primal, tangent)

    def process_primitive(self, prim, args, params):
        primals, tangents, own = [], [], False
        for a in args:
            if type(a) is JVPTracer and a._interp is self:
                own = True
                primals.append(a.primal)
                tangents.append(a.tangent)
            else:
                primals.append(a)
                tangents.append(None)
        parent = self.parent
        if not own:
            return self.forward_to_parent(prim, primals, params)
        rule = prim.jvp
        if rule is None:
            raise errors.MissingRuleError(
                f"differentiation of primitive {prim.name} is not implemented: it has no jvp "
                f"rule (inputs {', '.join(aval_of(p).str_short() for p in primals)})")
        tangents = [Zero(tangent_aval(aval_of(p))) if t is None else t
                    for p, t in zip(primals, tangents)]
        with interpreters.using(parent):
            out, tout = rule(primals, tangents, **params)
        if prim.multiple_results:
            return [self.new(o, t) for o, t in zip(out, tout)]
        return self.new(out, tout)

    def split(self, x):
        """(primal, tangent) of a value seen at the end of the traced function."""
        if type(x) is JVPTracer and x._interp is self:
            return x.primal, x.tangent
        return x, Zero(tangent_aval(aval_of(x)))


def jvp_flat(fun, primals, tangents):
    """Forward mode on flat lists; tangents may be Zero. Returns (primal outs, tangent outs)
    where tangent outs may be Zero."""
    interp = JVPInterpreter(interpreters.current(), getattr(fun, "__name__", None))
    args = [interp.new(p, t) for p, t in zip(primals, tangents)]
    with interpreters.using(interp):
        outs = fun(*args)
    pairs = [interp.split(o) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def strip_tracers(interp, tree):
    return tree_util.tree_map(lambda x: interp.split(x)[0] if isinstance(x, Tracer) else x, tree)


# --- linearize: jvp + partial evaluation ---------------------------------------------------
class LinearFunction:
    """A linear Jaxpr mapping the nonzero input tangents to the nonzero output tangents.

    ``in_nz[i]``/``out_nz[j]``: whether input i / output j has a (possibly) nonzero tangent;
    ``in_avals``/``out_avals``: tangent avals of every input / output.
    """

    __slots__ = ("closed", "in_nz", "out_nz", "in_avals", "out_avals", "interp")

    def __init__(self, closed, in_nz, out_nz, in_avals, out_avals, interp=None):
        self.closed, self.in_nz, self.out_nz = closed, in_nz, out_nz
        self.in_avals, self.out_avals = in_avals, out_avals
        self.interp = interp    # the JVP interpreter that ran (to strip tracers from aux data)

    def primal_only(self, tree):
        """``tree`` (aux data) with the linearization's tracers replaced by their primals."""
        return strip_tracers(self.interp, tree)

    def jvp(self, tangents):
        """Push tangents (one per input; Zero allowed) forward."""
        args = [instantiate(t) for t, nz in zip(tangents, self.in_nz) if nz]
        outs = iter(self.closed(*args)) if self.closed.jaxpr.outvars else iter(())
        return [next(outs) if nz else Zero(a) for nz, a in zip(self.out_nz, self.out_avals)]

    def transpose(self, cts):
        """Pull cotangents (one per output; Zero allowed) back to the inputs (Zero or array)."""
        cts_nz = [ct for ct, nz in zip(cts, self.out_nz) if nz]
        j = self.closed.jaxpr
        args = [UndefinedPrimal(v.aval) for v in j.invars]
        in_cts = iter(backward_pass(j, self.closed.consts, args, cts_nz))
        return [next(in_cts) if nz else Zero(a) for nz, a in zip(self.in_nz, self.in_avals)]


def linearize_flat(fun, primals, debug_name=None):
    """(primal outs, LinearFunction) for ``fun`` on flat lists at ``primals``."""
    parent = interpreters.current()
    staging = StagingInterpreter(parent, forward_known=True, debug_name=debug_name)
    jvp_interp = JVPInterpreter(staging, debug_name)
    in_avals = [tangent_aval(aval_of(p)) for p in primals]
    in_nz = [dtypes.is_inexact(a.dtype) for a in in_avals]
    tangent_args = [staging.new_arg(a) for a, nz in zip(in_avals, in_nz) if nz]
    it = iter(tangent_args)
    args = [jvp_interp.new(p, next(it)) if nz else p for p, nz in zip(primals, in_nz)]
    with interpreters.using(jvp_interp):
        outs = fun(*args)
    pairs = [jvp_interp.split(o) for o in outs]
    primal_outs = []
    for p, _ in pairs:
        if staging.is_own(p):
            raise TypeError(f"linearize({debug_name or 'fun'}): a primal output depends on a "
                            f"tangent; some jvp rule mixes them up")
        primal_outs.append(p)
    out_avals = [tangent_aval(aval_of(p)) for p in primal_outs]
    out_nz, tangent_outs = [], []
    for (_, t), a in zip(pairs, out_avals):
        nz = type(t) is not Zero and getattr(t, "dtype", None) != dtypes.float0 and \
            dtypes.is_inexact(a.dtype)
        out_nz.append(nz)
        if nz:
            tangent_outs.append(t)
    closed = staging.finish([t.var for t in tangent_args], tangent_outs)
    closed, _ = dce_closed_jaxpr(closed)
    return primal_outs, LinearFunction(closed, in_nz, out_nz, in_avals, out_avals, jvp_interp)


# --- transposition ----------------------------------------------------------------------------
def backward_pass(jaxpr, consts, args, cts):
    """Transpose ``jaxpr`` with respect to its ``UndefinedPrimal`` arguments.

    ``args``: one per invar, a value (non-linear input) or an ``UndefinedPrimal``;
    ``cts``: one cotangent per outvar (Zero allowed). Equations that do not depend on a linear
    input are evaluated forwards first (this is where rematerialized values are recomputed).
    Returns one cotangent per invar: Zero or an array for linear ones, None for the others.
    """
    if primitive.current_policy() is not None:     # the backward pass follows the forward dtypes
        with primitive.policy_scope(None):
            return backward_pass(jaxpr, consts, args, cts)
    env = {}
    linear = set()
    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        if is_undefined_primal(a):
            linear.add(v)
        else:
            env[v] = a

    def read(atom):
        return atom.val if type(atom) is Literal else env[atom]

    lin_eqns = []
    interp = interpreters.current()
    # what rules stage or run is attributed to the user line of the equation (NaN checks)
    evaluating = source_info.evaluating
    saved = evaluating[0]
    try:
        return _backward_pass_eqns(jaxpr, linear, lin_eqns, read, env, interp, cts, evaluating)
    finally:
        evaluating[0] = saved


def _backward_pass_eqns(jaxpr, linear, lin_eqns, read, env, interp, cts, evaluating):
    for eqn in jaxpr.eqns:
        evaluating[0] = eqn.source_info
        if any(type(x) is Var and x in linear for x in eqn.invars):
            lin_eqns.append(eqn)
            linear.update(eqn.outvars)
        else:
            outs = interp.process_primitive(eqn.prim, [read(x) for x in eqn.invars], eqn.params)
            if not eqn.prim.multiple_results:
                outs = [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o

    ct_env = {}

    typed = vma.typed_axes()

    def add_ct(v, ct):
        if type(v) is Var and v in linear and ct is not None and type(ct) is not Zero:
            if typed:       # in a typed shard_map body (core/vma.py)
                ct = vma.summed_like(ct, v.aval)
            prev = ct_env.get(v)
            ct_env[v] = ct if prev is None else add_tangents(prev, ct)

    for v, ct in zip(jaxpr.outvars, cts):
        add_ct(v, ct)
    for eqn in reversed(lin_eqns):
        evaluating[0] = eqn.source_info
        cts_out = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(c is None for c in cts_out):
            continue
        cts_out = [Zero(v.aval) if c is None else c for v, c in zip(eqn.outvars, cts_out)]
        rule = eqn.prim.transpose
        if rule is None:
            raise errors.MissingRuleError(
                f"transpose of primitive {eqn.prim.name} is not implemented: it has no "
                f"transpose rule (reverse-mode differentiation needs one for every primitive "
                f"applied to a tangent)")
        eargs = [UndefinedPrimal(x.aval) if type(x) is Var and x in linear else read(x)
                 for x in eqn.invars]
        cts_in = rule(cts_out if eqn.prim.multiple_results else cts_out[0], *eargs,
                      **eqn.params)
        for x, ct in zip(eqn.invars, cts_in):
            add_ct(x, ct)
    out = []
    for v in jaxpr.invars:
        if v in linear:
            ct = ct_env.get(v)
            out.append(Zero(v.aval) if ct is None else ct)
        else:
            out.append(None)
    return out


# --- Jaxpr-level helpers for higher-order primitives (jit, remat, control flow) -----------------
def cast_like(x, aval):
    """A (co)tangent converted to the dtype a staged body expects (weak scalars...)."""
    x = instantiate(x)
    if aval_of(x).dtype != aval.dtype and aval.dtype != dtypes.float0:
        x = array_ops.convert_element_type(x, aval.dtype)
    return x


def transpose_call(jaxpr, cts, args, cache, bind_body):
    """The transpose rule of a call-like primitive carrying ``jaxpr`` (jit, remat).

    Stages the transposed body once per (linear inputs, nonzero cotangents) in ``cache`` (a
    WeakKeyDictionary keyed by the body) and binds it with ``bind_body(operands, body)``;
    returns one cotangent per argument (None for non-linear ones).
    """
    linear = tuple(is_undefined_primal(a) for a in args)
    cts_nz = tuple(type(c) is not Zero for c in cts)
    if not any(cts_nz):
        return [Zero(a.aval) if lin else None for a, lin in zip(args, linear)]
    per_body = cache.get(jaxpr)
    if per_body is None:
        per_body = cache[jaxpr] = {}
    entry = per_body.get((linear, cts_nz))
    if entry is None:
        entry = per_body[(linear, cts_nz)] = consts_as_args(
            transpose_jaxpr(jaxpr, linear, cts_nz))
    body, consts = entry
    operands = list(consts) + [a for a, lin in zip(args, linear) if not lin] + [
        cast_like(c, a) for c, a, nz in zip(cts, jaxpr.out_avals, cts_nz) if nz]
    outs = iter(bind_body(operands, body))
    return [next(outs) if lin else None for lin in linear]


def jvp_jaxpr(closed, in_nz, instantiate_out=False):
    """Stage the JVP of ``closed``: (ClosedJaxpr taking primals + nonzero tangents and returning
    primal outs + nonzero tangent outs, out_nz)."""
    in_avals = closed.in_avals
    out_nz_box = []

    def fun(*args):
        primals = args[:len(in_avals)]
        it = iter(args[len(in_avals):])
        tangents = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, in_nz)]
        p_out, t_out = jvp_flat(lambda *xs: closed(*xs), primals, tangents)
        nz = [type(t) is not Zero and dtypes.is_inexact(aval_of(p).dtype)
              for p, t in zip(p_out, t_out)]
        if instantiate_out is True:
            nz = [dtypes.is_inexact(aval_of(p).dtype) for p in p_out]
        out_nz_box.append(nz)
        return list(p_out) + [instantiate(t) for t, n in zip(t_out, nz) if n]

    tangent_avals = [tangent_aval(a) for a, nz in zip(in_avals, in_nz) if nz]
    jaxpr, _ = trace_to_jaxpr(fun, list(in_avals) + tangent_avals, debug_name="jvp")
    return jaxpr, out_nz_box[0]


def transpose_jaxpr(closed, linear, cts_nz):
    """Stage the transpose of ``closed`` w.r.t. the inputs flagged ``linear``: a ClosedJaxpr
    taking (non-linear inputs, nonzero cotangents) and returning the cotangent of every linear
    input (instantiated as zeros when symbolic)."""
    j = closed.jaxpr
    in_avals = closed.in_avals
    nonlin_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    ct_avals = [a for a, nz in zip(closed.out_avals, cts_nz) if nz]

    def fun(*args):
        it = iter(args[:len(nonlin_avals)])
        eargs = [UndefinedPrimal(a) if lin else next(it) for a, lin in zip(in_avals, linear)]
        cit = iter(args[len(nonlin_avals):])
        cts = [next(cit) if nz else Zero(a) for a, nz in zip(closed.out_avals, cts_nz)]
        res = backward_pass(j, closed.consts, eargs, cts)
        return [instantiate(c) for c, lin in zip(res, linear) if lin]

    jaxpr, _ = trace_to_jaxpr(fun, nonlin_avals + ct_avals, debug_name="transpose")
    return jaxpr
