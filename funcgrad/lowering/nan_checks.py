"""NaN and Inf checks (``config.update("debug_nans", True)``, ``"debug_infs"``): a computation
that produces a NaN (or an infinity) raises ``FloatingPointError`` naming the primitive and the
user's source line.

How, as in JAX: while a check is on, the root interpreter is ``CheckingInterpreter``, which
looks at the outputs of every operation run eagerly (so under ``grad`` and ``vmap`` the
operation that made the NaN is caught as it runs, and the Python stack gives the line), and
``jit`` checks the outputs of each compiled call. When a compiled function (a jitted function,
a ``scan``, a ``while`` loop, ``cond``) produced a bad value, its Jaxpr is run again one
equation at a time, stepping into the bodies of nested calls and loops, and the first equation
whose outputs are bad is reported with the source line recorded when it was staged
(``Eqn.source_info``). With both checks off nothing of this runs: the root interpreter is the
plain eager one and jit's fast paths are untouched (``dispatch`` clears them while a check is
on).

Example:
    >>> with funcgrad.config.override("debug_nans", True):
    ...     try:
    ...         funcgrad.jit(lambda x: jnp.log(x) * 2.0)(jnp.array([-1.0, 1.0]))
    ...     except FloatingPointError as e:
    ...         print(str(e).splitlines()[0])
    invalid value (nan) encountered in log
"""
import numpy as np

from funcgrad.config import config
from funcgrad.core import dtypes, interpreters, source_info
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Literal
from funcgrad.lowering.array import Array, device_put
from funcgrad.lowering.eager import EagerInterpreter, eager_interpreter

# [nans, infs]: which checks are on (read on the slow paths of dispatch only)
state = [False, False]


def enabled():
    """Whether a NaN or Inf check is on."""
    return state[0] or state[1]


def _bad_kind(values):
    """'nan' or 'inf' when one of ``values`` (Arrays; other values are skipped) holds a value a
    check that is on looks for, else None."""
    for v in values:
        if type(v) is not Array or not dtypes.is_inexact(v.aval.dtype):
            continue
        x = np.asarray(v)
        if state[0] and np.isnan(x).any():
            return "nan"
        if state[1] and np.isinf(x).any():
            return "inf"
    return None


def _error(kind, what, where, note=""):
    name = "invalid value (nan)" if kind == "nan" else "divide by zero or overflow (inf)"
    option = "debug_nans" if kind == "nan" else "debug_infs"
    return FloatingPointError(
        f"{name} encountered in {what}\n  at {source_info.describe(where)}{note}\n"
        f"(funcgrad.config.{option} is on; turn it off to let the value through)")


def _as_list(prim, outs):
    return list(outs) if prim.multiple_results else [outs]


def _bodies(params):
    """(Jaxpr, consts) of each sub-Jaxpr in ``params``, in order."""
    found = []

    def visit(v):
        if isinstance(v, ClosedJaxpr):
            found.append((v.jaxpr, v.consts))
        elif isinstance(v, Jaxpr):
            found.append((v, []))
        elif isinstance(v, (tuple, list)):
            for x in v:
                visit(x)
    for value in params.values():
        visit(value)
    return found


def _slice(x, i):
    return device_put(np.asarray(x)[i])


def _locate_inside(prim, args, params):
    """Re-run a higher-order operation's bodies on ``args`` one equation at a time; raises
    ``FloatingPointError`` at the first bad equation inside, returns when none is found."""
    name = prim.name
    if name == "scan":
        body, consts = _bodies({"j": params["jaxpr"]})[0]
        n_c, n_k = params["num_consts"], params["num_carry"]
        fixed, carry, xs = list(args[:n_c]), list(args[n_c:n_c + n_k]), args[n_c + n_k:]
        steps = range(params["length"])
        for i in (reversed(steps) if params["reverse"] else steps):
            outs = run_checked(body, consts, fixed + carry + [_slice(x, i) for x in xs])
            carry = outs[:n_k]
        return
    if name == "while":
        n_c, n_b = params["cond_nconsts"], params["body_nconsts"]
        (cond, cconsts), = _bodies({"c": params["cond_jaxpr"]})
        (body, bconsts), = _bodies({"b": params["body_jaxpr"]})
        cargs, bargs, carry = list(args[:n_c]), list(args[n_c:n_c + n_b]), list(args[n_c + n_b:])
        while bool(np.asarray(run_checked(cond, cconsts, cargs + carry)[0])):
            carry = run_checked(body, bconsts, bargs + carry)
        return
    if name == "cond":
        branches = _bodies({"b": params["branches"]})
        index = int(np.clip(np.asarray(args[0]), 0, len(branches) - 1))
        body, consts = branches[index]
        run_checked(body, consts, list(args[1:]))
        return
    # jit, remat, custom_jvp/custom_vjp calls...: the body that takes the operands as they are
    for body, consts in _bodies(params):
        if [v.aval.shape for v in body.invars] == [getattr(a, "shape", ()) for a in args]:
            run_checked(body, consts, list(args))
            return


def run_checked(jaxpr, consts, args):
    """Evaluate ``jaxpr`` eagerly one equation at a time, checking every output; raises
    ``FloatingPointError`` naming the first equation (and its source line) that produced a bad
    value. Returns the outputs."""
    env = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    def read(atom):
        return atom.val if isinstance(atom, Literal) else env[atom]
    run = EagerInterpreter.process_primitive     # without the check: done here
    for eqn in jaxpr.eqns:
        ins = [read(a) for a in eqn.invars]
        outs = _as_list(eqn.prim, run(eager_interpreter, eqn.prim, ins, eqn.params))
        kind = _bad_kind(outs)
        if kind is not None:
            if _bodies(eqn.params):
                _locate_inside(eqn.prim, ins, eqn.params)
            raise _error(kind, eqn.prim.name, eqn.source_info)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def check_jit_outputs(name, closed, args, outs):
    """After a compiled call of ``jit(name)`` on ``args`` returned ``outs``: when a check is on
    and an output is bad, re-run ``closed`` op by op to name the primitive that made it (or
    blame the call itself)."""
    kind = _bad_kind(outs)
    if kind is None:
        return
    if any(type(a) is Array and a._buf.is_deleted() for a in args):
        raise _error(kind, f"jit({name})", source_info.user_frame(2),
                     "\n  (its donated arguments are gone, so it cannot be re-run one "
                     "operation at a time to find the operation; call it without "
                     "donate_argnums to find it)")
    run_checked(closed.jaxpr, closed.consts, list(args))
    raise _error(kind, f"jit({name})", source_info.user_frame(2),
                 "\n  (re-running it one operation at a time produced no bad value: the "
                 "compiled program's fused arithmetic differs)")


class CheckingInterpreter(EagerInterpreter):
    """The root interpreter while a NaN/Inf check is on: eager execution plus a look at the
    outputs of every operation."""

    debug_name = "eager (checking for NaN/Inf)"

    def process_primitive(self, prim, args, params):
        outs = EagerInterpreter.process_primitive(self, prim, args, params)
        kind = _bad_kind(_as_list(prim, outs))
        if kind is not None:
            if _bodies(params):
                _locate_inside(prim, args, params)
            raise _error(kind, prim.name, source_info.here(2))
        return outs


checking_interpreter = CheckingInterpreter()


def apply_config():
    """Read ``config.debug_nans`` / ``debug_infs`` and install the matching root interpreter;
    returns whether a check is on."""
    state[0], state[1] = bool(config.debug_nans), bool(config.debug_infs)
    root = checking_interpreter if enabled() else eager_interpreter
    if interpreters.root() is not root:
        interpreters.set_root(root)
    return enabled()
