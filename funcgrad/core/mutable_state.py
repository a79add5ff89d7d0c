"""Mutable state that must leave a transformation: the writes log used by ``jit``.

Python objects such as ``funcgrad.nn.Module`` hold state (BatchNorm running statistics) that a
traced function may update. Inside a transformation such an update is a traced value; it is
recorded here with a *setter* that knows where the concrete value belongs. ``jit`` opens a log
around its trace, returns the recorded values as extra outputs of the compiled function and
calls the setters with the concrete results after each call, so a jitted step leaves objects
exactly as the eager step would.

The rule for a writer (``write(target, key, value, setter)``):
  * a concrete value is stored now (``setter(target, key, value)``);
  * a JVP tracer (``grad``/``jvp``) whose primal is concrete stores its primal now;
  * otherwise a staged value is recorded in the innermost open log (the enclosing ``jit``),
    which carries it out; with no log open (``make_jaxpr``), or for a batched value (``vmap``),
    the write is dropped from the original object and only the traced copy sees it.

Example:
    >>> from funcgrad.core.mutable_state import StateLog, collecting, write
    >>> class Counter:
    ...     count = 0
    >>> c = Counter()
    >>> write(c, "count", 1, setattr), c.count          # concrete: stored now
    (True, 1)
    >>> log = StateLog()
    >>> def step(x):
    ...     with collecting(log):
    ...         write(c, "count", x + 1, setattr)       # traced: recorded in the log
    ...     return x
    >>> _ = funcgrad.make_jaxpr(step)(1.0)
    >>> [key for _, key, _, _ in log.entries()], c.count
    (['count'], 1)
"""
import contextlib
import contextvars

from funcgrad.core.interpreters import Tracer

_log = contextvars.ContextVar("funcgrad_state_log", default=None)


class StateLog:
    """Pending writes of traced values: (target, key) -> (value, setter), in order."""

    __slots__ = ("writes",)

    def __init__(self):
        self.writes = {}

    def record(self, target, key, value, setter):
        self.writes[(id(target), key)] = (target, key, value, setter)

    def entries(self):
        return list(self.writes.values())


@contextlib.contextmanager
def collecting(log):
    """Open ``log`` as the innermost log for the duration of the block."""
    token = _log.set(log)
    try:
        yield log
    finally:
        _log.reset(token)


def current_log():
    return _log.get()


def concrete_primal(value):
    """``value`` with JVP layers stripped while their primal is known; else the tracer."""
    while isinstance(value, Tracer) and hasattr(value, "primal"):
        value = value.primal
    return value


def write(target, key, value, setter):
    """Store ``value`` into ``target[key]`` now if concrete, else record it in the open log.

    Returns True if the value was stored or recorded, False if it had nowhere to go.
    """
    v = concrete_primal(value)
    if not isinstance(v, Tracer):
        setter(target, key, v)
        return True
    log = _log.get()
    if log is None:
        return False
    from funcgrad.core.staging import StagingTracer
    if not isinstance(v, StagingTracer):
        # e.g. a vmap (batched) value: it has no single value to write back
        return False
    log.record(target, key, v, setter)
    return True
