"""``jit_when_eager``: run a multi-operation library function as one cached executable when it
is called eagerly, and trace it inline under any transformation.

Eagerly, every primitive compiles (once per shape) and runs as its own executable; a library
function built from dozens of primitives (a sampler in ``funcgrad.random``, ``det`` or
``lstsq`` in ``funcgrad.numpy.linalg``) then pays dozens of compilations and dispatches. Wrapped
with ``jit_when_eager``, an eager call compiles the whole function once per (shapes, dtypes,
static options) instead. Under ``jit``/``grad``/``vmap`` the wrapper calls the function
directly, so transformations see its primitives as usual.

Example:
    >>> norm = jit_when_eager(_norm, static=("ord", "axis", "keepdims"))
"""
import functools
import inspect

import numpy as np

from funcgrad.core import interpreters
from funcgrad.core.interpreters import Value


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
        >>> det = jit_when_eager(_det)
    """
    from funcgrad.transforms.jit import jit

    sig = inspect.signature(fun)
    jitted = {}
    static = tuple(static)

    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        if interpreters.current() is not interpreters.root():
            return fun(*args, **kwargs)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return fun(*args, **kwargs)
        kw = dict(bound.arguments)
        names = []
        for name, v in kw.items():
            param = sig.parameters[name]
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                return fun(*args, **kwargs)
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
            f = jitted[names] = jit(fun, static_argnames=names)
        return f(**kw)

    wrapper.__wrapped__ = fun
    return wrapper


def jit_when_eager_in(namespace, static_by_name):
    """Replace each function named in ``static_by_name`` in ``namespace`` (a module's
    ``globals()``) by ``jit_when_eager(function, static)``, ``static`` being its entry.

    Example:
        >>> jit_when_eager_in(globals(), {"mean": ("axis", "keepdims")})
    """
    for name, static in static_by_name.items():
        namespace[name] = jit_when_eager(namespace[name], static)


def _is_array_leaf(v):
    return v is None or isinstance(v, (Value, np.ndarray, np.generic, bool, int, float,
                                       complex))
