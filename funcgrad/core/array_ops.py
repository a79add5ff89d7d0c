"""The few array operations that core's machinery applies but does not define.

Symbolic zeros become arrays, tangents add up, batch axes move: each of these is a primitive of
``funcgrad.lax``, a layer above core. ``lax`` registers them here when it is imported
(``register``, called at the end of ``lax/elementwise.py`` and ``lax/shapes.py``), so core uses
them without naming a primitive.

Example:
    >>> import funcgrad.numpy as jnp
    >>> from funcgrad.core import array_ops
    >>> array_ops.add(jnp.ones(2), jnp.ones(2))
    Array([2., 2.], dtype=float32)
"""
_OPS = {}

_NAMES = ("add", "convert_element_type", "zeros", "broadcast_in_dim", "transpose", "pvary",
          "psum")


def register(**fns):
    """Install the implementations of (some of) the operations in ``_NAMES``; done by
    ``funcgrad.lax``."""
    unknown = set(fns) - set(_NAMES)
    if unknown:
        raise ValueError(f"array_ops.register: unknown operations {sorted(unknown)}; "
                         f"core uses only {list(_NAMES)}")
    _OPS.update(fns)


def _op(name):
    try:
        return _OPS[name]
    except KeyError:
        raise RuntimeError(f"funcgrad.core needs the array operation '{name}', which "
                           f"funcgrad.lax registers on import: import funcgrad first") from None


def add(a, b):
    """``a + b`` (same shape and dtype)."""
    return _op("add")(a, b)


def convert_element_type(x, dtype, weak_type=False):
    """``x`` converted to ``dtype`` (weakly typed if ``weak_type``)."""
    return _op("convert_element_type")(x, dtype, weak_type)


def zeros(aval):
    """An array of zeros of ``aval`` (shape, dtype and weak type)."""
    return _op("zeros")(aval)


def broadcast_in_dim(x, shape, broadcast_dimensions):
    """``x`` broadcast to ``shape``, its axes landing at ``broadcast_dimensions``."""
    return _op("broadcast_in_dim")(x, tuple(shape), tuple(broadcast_dimensions))


def transpose(x, permutation):
    """``x`` with its axes permuted."""
    return _op("transpose")(x, tuple(permutation))


def pvary(x, axes):
    """``x`` typed as varying over the manual mesh ``axes`` too (the identity; see
    ``core/vma.py``)."""
    return _op("pvary")(x, tuple(axes))


def psum(x, axes):
    """``x`` summed over the devices along the named ``axes``."""
    return _op("psum")(x, tuple(axes))
