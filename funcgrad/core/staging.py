"""The staging interpreter: records primitive applications as equations of a Jaxpr.

With ``forward_known=True`` it stages only applications that touch its own tracers and hands
the rest to its parent: this partial evaluation is how ``linearize`` splits a JVP into the
primal computation (done now) and the linear tangent computation (recorded).
"""
import numpy as np

from funcgrad.core import interpreters, vma
from funcgrad.core.interpreters import Interpreter, Tracer, Value
from funcgrad.core.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Var, literal
from funcgrad.core.primitive import out_avals
from funcgrad.core.source_info import here
from funcgrad.core.values import PYTHON_SCALARS, aval_of


class StagingTracer(Tracer):
    __slots__ = ("aval", "var")

    def __init__(self, interp, aval, var):
        self._interp, self.aval, self.var = interp, aval, var


class StagingInterpreter(Interpreter):
    """Records equations; every value that is not its own tracer becomes a constant."""

    def __init__(self, parent, forward_known=False, debug_name=None):
        self.parent = parent
        self.forward_known = forward_known
        self.stages = not forward_known
        self.debug_name = debug_name
        self.eqns = []
        self.constvars = {}   # id(value) -> (var, value)
        self._current_prim = None

    def new_arg(self, aval):
        return StagingTracer(self, aval, Var(aval))

    def to_atom(self, x):
        if isinstance(x, StagingTracer) and x._interp is self:
            return x.var
        if isinstance(x, PYTHON_SCALARS):
            return literal(x)
        if isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):
            aval = aval_of(x)
            return literal(np.asarray(x, aval.dtype)[()], aval.dtype)
        entry = self.constvars.get(id(x))
        if entry is None:
            if isinstance(x, Tracer) and not self._is_ancestor(x._interp):
                # A tracer of a transformation that is not running any more: it escaped.
                raise interpreters.escaped_tracer_error(x, self._current_prim)
            entry = self.constvars[id(x)] = (Var(aval_of(x).strip_weak()
                                                 if not isinstance(x, Value) else x.aval), x)
        return entry[0]

    def _is_ancestor(self, interp):
        i = self.parent
        while i is not None:
            if i is interp:
                return True
            i = i.parent
        return False

    def process_primitive(self, prim, args, params):
        if self.forward_known and not any(self.is_own(a) for a in args):
            return self.forward_to_parent(prim, args, params)
        self._current_prim = prim
        typed = vma.typed_axes()
        if typed:       # inside a checked shard_map body: values are typed by their vma
            args, out_vmas = vma.match_operands(prim, args, params)
            self._current_prim = prim
        atoms = [self.to_atom(a) for a in args]
        avals = out_avals(prim, [a.aval for a in atoms], params)
        if typed:
            avals = vma.typed_avals(prim, avals, params, out_vmas)
        outvars = [Var(a) for a in avals]
        self.eqns.append(Eqn(prim, atoms, params, outvars, here(2)))
        outs = [StagingTracer(self, v.aval, v) for v in outvars]
        return outs if prim.multiple_results else outs[0]

    def finish(self, invars, outs):
        """Build the ClosedJaxpr of the recorded equations with outputs ``outs``."""
        outvars = [self.to_atom(o) for o in outs]
        constvars = [var for var, _ in self.constvars.values()]
        consts = [value for _, value in self.constvars.values()]
        return ClosedJaxpr(Jaxpr(constvars, invars, self.eqns, outvars), consts)


def trace_to_jaxpr(fun, in_avals, forward_known=False, debug_name=None):
    """Stage ``fun`` (taking and returning flat lists of values) at ``in_avals``.

    Returns (ClosedJaxpr, outs) where ``outs`` are the traced outputs as ``fun`` returned them.
    """
    parent = interpreters.current()
    interp = StagingInterpreter(parent, forward_known,
                                debug_name or getattr(fun, "__name__", None))
    args = [interp.new_arg(a) for a in in_avals]
    with interpreters.using(interp):
        outs = fun(*args)
    return interp.finish([a.var for a in args], outs), outs
