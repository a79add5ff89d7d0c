"""The current interpreter, and the base classes of interpreters, tracers and array values.

Every primitive application goes to ``current()``. Transformations install an interpreter for
the duration of a call (``using(interp)``); an interpreter hands applications whose arguments
hold none of its own tracers to its parent, so nested transformations compose.
"""
import contextlib
import contextvars
import threading

import numpy as np

from funcgrad.core import errors

_current = contextvars.ContextVar("funcgrad_interpreter")
# How many ``using`` blocks are open in any thread. While it is 0 the root interpreter is
# current everywhere, which hot dispatch paths check without touching the context variable.
entered = [0]
_entered_lock = threading.Lock()
_root = None


def current():
    """The interpreter that gives meaning to primitive applications right now."""
    return _current.get(_root)


def is_eager():
    """Whether primitives run now, on device arrays: no transformation is tracing here.

    Example:
        >>> import funcgrad
        >>> from funcgrad.core import interpreters
        >>> interpreters.is_eager()
        True
        >>> funcgrad.jit(lambda x: print(interpreters.is_eager()) or x)(1.0)
        False
        Array(1., dtype=float32, weak_type=True)
    """
    if not entered[0]:   # no ``using`` block is open anywhere: the root is current
        return True
    interp = _current.get(None)
    return interp is None or interp is _root


def nothing_staged():
    """Whether primitives applied here run now on device arrays: either eagerly, or through
    transformations that compute alongside the values (``jvp``, ``vmap``, the known forward
    pass of ``grad``/``linearize``) rather than staging a program for later (``jit``,
    ``make_jaxpr``, control-flow bodies). Library functions use it to run as one compiled call
    under an eager ``grad``, where the user's own code still runs op by op.

    Example:
        >>> import funcgrad
        >>> from funcgrad.core import interpreters
        >>> funcgrad.grad(lambda x: print(interpreters.nothing_staged()) or x)(1.0)
        True
        Array(1., dtype=float32)
        >>> funcgrad.jit(lambda x: print(interpreters.nothing_staged()) or x)(1.0)
        False
        Array(1., dtype=float32, weak_type=True)
    """
    if not entered[0]:
        return True
    interp = _current.get(None)
    while interp is not None and interp is not _root:
        if interp.stages:
            return False
        interp = interp.parent
    return True


def to_device(value):
    """``value`` (a NumPy array or Python scalar) as a concrete array on the default device:
    the root (eager) interpreter's ``device_put``. For rules that make values on the host (host
    callbacks) without importing ``funcgrad.lowering``, a layer above them."""
    return _root.device_put(value)


def set_root(interp):
    """Install the eager (device) interpreter; done by ``funcgrad.lowering`` on import."""
    global _root
    _root = interp


def root():
    return _root


@contextlib.contextmanager
def using(interp):
    """Make ``interp`` the current interpreter inside the ``with`` block."""
    token = _current.set(interp)
    with _entered_lock:
        entered[0] += 1
    try:
        yield interp
    finally:
        with _entered_lock:
            entered[0] -= 1
        _current.reset(token)


class Interpreter:
    """Base class: gives each primitive application a meaning.

    ``parent`` is the interpreter that was current when this one was created; values that are
    not this interpreter's tracers belong to it (or to one of its ancestors).
    """

    parent = None
    stages = False     # True for interpreters that record a program to run later (jit's)
    debug_name = None

    def process_primitive(self, prim, args, params):
        """Give ``prim`` applied to ``args`` its meaning; every interpreter overrides this."""
        raise TypeError(f"{type(self).__name__} does not define process_primitive")

    def forward_to_parent(self, prim, args, params):
        """Hand an application none of whose operands are this interpreter's to the parent."""
        parent = self.parent
        with using(parent):
            return parent.process_primitive(prim, args, params)

    def is_own(self, x):
        return isinstance(x, Tracer) and x._interp is self

    def depth(self):
        d, i = 0, self
        while i is not None:
            d, i = d + 1, i.parent
        return d


class Value:
    """Base of everything that acts like an array: device ``Array``s and tracers.

    ``funcgrad.numpy`` installs the arithmetic operators and array methods on this class.
    """

    __slots__ = ()
    __array_priority__ = 100

    @property
    def shape(self):
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def ndim(self):
        return len(self.aval.shape)

    @property
    def size(self):
        return self.aval.size

    @property
    def weak_type(self):
        return self.aval.weak_type

    def __len__(self):
        if not self.aval.shape:
            raise TypeError(f"len() of a 0-d array (shape {self.aval.shape})")
        return self.aval.shape[0]

    def __iter__(self):
        if not self.aval.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.aval.shape[0]))


class Tracer(Value):
    """A value standing for an array inside a transformation; owned by ``_interp``."""

    __slots__ = ("_interp",)

    def _concrete(self, operation):
        """The concrete value behind this tracer, or raise ConcretizationTypeError."""
        raise errors.concretization_error(self, operation)

    def __bool__(self):
        return bool(self._concrete("bool() (an if/while condition or `and`/`or`)"))

    def __int__(self):
        return int(self._concrete("int()"))

    def __float__(self):
        return float(self._concrete("float()"))

    def __complex__(self):
        return complex(self._concrete("complex()"))

    def __index__(self):
        return self._concrete("using an array as an index (__index__)").__index__()

    def item(self):
        return self._concrete("item()").item()

    def tolist(self):
        return self._concrete("tolist()").tolist()

    def __array__(self, dtype=None, copy=None):
        try:
            value = self._concrete("conversion to a NumPy array")
        except errors.ConcretizationTypeError as e:
            raise errors.TracerArrayConversionError(str(e)) from None
        return np.asarray(value, dtype=dtype)

    def __hash__(self):
        raise TypeError(f"unhashable type: traced array {self.aval.str_short()}")

    def __repr__(self):
        return f"Traced<{self.aval.str_short()}>({type(self._interp).__name__})"


def escaped_tracer_error(tracer, prim):
    """The error for a tracer used after the transformation that made it has finished."""
    return errors.UnexpectedTracerError(
        f"{prim.name if prim is not None else 'an output'}: got a traced value "
        f"{tracer.aval.str_short()} from a transformation that "
        f"has already finished ({type(tracer._interp).__name__}, tracing "
        f"{getattr(tracer._interp, 'debug_name', None) or 'a function'}). A traced value "
        f"escaped, e.g. stored in a global or a closure by a jitted function: return it "
        f"instead. Used at {errors.user_frame()}.")


class CompileTimeEvalInterpreter(Interpreter):
    """Inside ``ensure_compile_time_eval``: applications whose operands are all concrete (no
    tracer of any transformation) run now on the root (eager) interpreter; the others go to the
    interpreter that was current, so traced values are still staged."""

    debug_name = "ensure_compile_time_eval"

    def __init__(self, parent):
        self.parent = parent

    def process_primitive(self, prim, args, params):
        if any(isinstance(a, Tracer) for a in args):
            return self.forward_to_parent(prim, args, params)
        with using(_root):
            return _root.process_primitive(prim, args, params)


@contextlib.contextmanager
def ensure_compile_time_eval():
    """Within the ``with`` block, operations on concrete values run now, even while a ``jit``
    (or another transformation) is tracing: their results are concrete arrays, usable in
    Python control flow. Operations with a traced operand are still staged. As
    ``jax.ensure_compile_time_eval``.

    Example:
        >>> import funcgrad, funcgrad.numpy as jnp
        >>> @funcgrad.jit
        ... def f(x):
        ...     with funcgrad.ensure_compile_time_eval():
        ...         n = jnp.sum(jnp.arange(4))      # concrete: 6
        ...         y = x * 2                       # x is traced: still staged
        ...         big = bool(n > 5)               # Python control flow on a concrete value
        ...     return y + n if big else y - n
        >>> f(1.0)
        Array(8., dtype=float32, weak_type=True)
    """
    parent = current()
    if parent is _root:          # nothing is tracing: operations already run now
        yield
        return
    with using(CompileTimeEvalInterpreter(parent)):
        yield
