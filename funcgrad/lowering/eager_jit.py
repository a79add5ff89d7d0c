"""``jit_when_eager``: run a multi-operation library function as one cached executable when it
is called eagerly, and trace it inline under any transformation.

Eagerly, every primitive compiles (once per shape) and runs as its own executable; a library
function built from dozens of primitives (a sampler in ``funcgrad.random``, ``det`` or
``lstsq`` in ``funcgrad.numpy.linalg``) then pays dozens of compilations and dispatches. Wrapped
with ``jit_when_eager``, an eager call compiles the whole function once per (shapes, dtypes,
static options) instead. Under ``jit``/``grad``/``vmap`` the wrapper calls the function
directly, so transformations see its primitives as usual.

``one_dispatch_when_eager`` is the lean form for elementwise functions of positional operands
(the ``funcgrad.numpy`` binary functions): no signature binding, Python scalars passed as
runtime arguments.

Example:
    >>> from funcgrad.lowering.eager_jit import jit_when_eager
    >>> def norm(x, ord=2):
    ...     return jnp.sum(jnp.abs(x) ** ord) ** (1.0 / ord)
    >>> fast_norm = jit_when_eager(norm, static=("ord",))
    >>> fast_norm(jnp.array([3.0, 4.0])), fast_norm(jnp.array([3.0, 4.0]), ord=1)
    (Array(5., dtype=float32), Array(7., dtype=float32))
"""
import functools
import inspect

import numpy as np

from funcgrad.core import interpreters
from funcgrad.core.interpreters import Value
from funcgrad.lowering.array import Array
from funcgrad.lowering.dispatch import JitFunction


def _is_static_value(v):
    if isinstance(v, (Value, np.ndarray, np.generic)):
        return False
    if isinstance(v, (list, tuple)) and any(isinstance(x, (Value, np.ndarray)) for x in v):
        return False
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _freeze(v):
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def jit_when_eager(fun, static=()):
    """Wrap ``fun``: eager calls go through a cached ``jit`` with the arguments named in
    ``static`` (when hashable) marked static; other calls run ``fun`` directly.

    Arguments that are lists/tuples holding arrays (``multi_dot``'s list) or other
    non-array values not listed in ``static`` make the call run directly.

    Example:
        >>> from funcgrad.lowering.eager_jit import jit_when_eager
        >>> def norm(x, ord=2):
        ...     return jnp.sum(jnp.abs(x) ** ord) ** (1.0 / ord)
        >>> fast_norm = jit_when_eager(norm, static=("ord",))
        >>> fast_norm(jnp.array([3.0, 4.0]), ord=1)     # one executable per ord
        Array(7., dtype=float32)
        >>> funcgrad.grad(fast_norm)(jnp.array([3.0, 4.0]))     # traced inline under grad
        Array([0.6, 0.8], dtype=float32)
    """

    sig = inspect.signature(fun)
    jitted = {}
    static = tuple(static)
    layouts = {}     # (number of positional args, keyword names) -> _call_layout(...)

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        if not interpreters.nothing_staged():
            return fun(*args, **kwargs)
        shape = (len(args), tuple(kwargs))
        layout = layouts.get(shape)
        if layout is None:
            layout = layouts[shape] = _call_layout(sig, args, kwargs)
        if layout is False:      # a binding error (raised by fun itself) or *args/**kwargs
            return fun(*args, **kwargs)
        kw = {name: (args[i] if i is not None else kwargs[name]) for name, i in layout}
        names = []
        for name, v in kw.items():
            if name in static:
                v = kw[name] = _freeze(v)
                if _is_static_value(v):
                    names.append(name)
                    continue
            if not _is_array_leaf(v):
                return fun(*args, **kwargs)
        names = tuple(names)
        f = jitted.get(names)
        if f is None:
            f = jitted[names] = JitFunction(fun, static_argnames=names)
        return f(**kw)

    wrapper.__wrapped__ = fun
    return wrapper


def _call_layout(sig, args, kwargs):
    """How a call with this many positional arguments and these keyword names binds to
    ``sig``: ((parameter name, index into args or None for a keyword), ...) in signature
    order, or False when it does not bind or reaches ``*args``/``**kwargs``. It depends only
    on the call's shape, so it is worked out once per shape, not per call."""
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return False
    positional = [p.name for p in sig.parameters.values()]
    layout = []
    for name in bound.arguments:
        param = sig.parameters[name]
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return False
        layout.append((name, None if name in kwargs else positional.index(name)))
    return tuple(layout)


def jit_when_eager_in(namespace, static_by_name):
    """Replace each function named in ``static_by_name`` in ``namespace`` (a module's
    ``globals()``) by ``jit_when_eager(function, static)``, ``static`` being its entry.

    Example:
        >>> from funcgrad.lowering.eager_jit import jit_when_eager_in
        >>> def mean(x, axis=0):
        ...     return jnp.sum(x, axis=axis) / x.shape[axis]
        >>> jit_when_eager_in(globals(), {"mean": ("axis",)})
        >>> mean.__wrapped__.__name__, mean(jnp.arange(6.0).reshape(2, 3), axis=1)
        ('mean', Array([1., 4.], dtype=float32))
    """
    for name, static in static_by_name.items():
        namespace[name] = jit_when_eager(namespace[name], static)


def _is_array_leaf(v):
    return v is None or isinstance(v, (Value, np.ndarray, np.generic, bool, int, float,
                                       complex))


_INT32_RANGE = (-2 ** 31, 2 ** 31)


def eager_operands(*args):
    """Whether a call with these operands runs eagerly on concrete arrays (at least one
    device Array, the rest Arrays or Python scalars that fit their default dtype)."""
    if not interpreters.is_eager():
        return False
    seen = False
    for a in args:
        t = type(a)
        if t is Array:
            seen = True
        elif t is int:
            if not _INT32_RANGE[0] <= a < _INT32_RANGE[1]:
                return False
        elif t is not float and t is not bool:
            return False
    return seen


def one_dispatch_when_eager(fn):
    """Wrap an elementwise function of positional operands: called eagerly on arrays and
    Python scalars (``eager_operands``), it runs as one cached ``jit`` executable, so dtype
    promotion, scalar conversion and broadcasting do not each dispatch (``x * 2.0`` is one
    call, not a transfer, a broadcast and a multiply); otherwise ``fn`` runs as it is. Only
    for functions whose result does not depend on operand values being concrete.

    Example:
        >>> from funcgrad.lowering.eager_jit import one_dispatch_when_eager
        >>> def axpy(a, x, y):
        ...     return a * x + y
        >>> fast_axpy = one_dispatch_when_eager(axpy)
        >>> fast_axpy(2.0, jnp.array([1.0, 2.0]), 1)   # one executable, not one per operation
        Array([3., 5.], dtype=float32)
    """
    compiled = []

    @functools.wraps(fn)
    def wrapper(*args):
        if eager_operands(*args):
            if not compiled:
                            compiled.append(JitFunction(fn))
            return compiled[0](*args)
        return fn(*args)
    wrapper.__wrapped__ = fn
    return wrapper
