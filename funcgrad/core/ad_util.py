"""Symbolic zeros and the vocabulary shared by jvp and transpose rules.

A tangent or cotangent that is known to be zero is represented by ``Zero(aval)`` instead of an
array of zeros, so work that would only multiply or add zeros is skipped. ``aval`` is the
*tangent* aval: for integer and boolean primals the tangent dtype is ``float0`` (no data).

In a transpose rule, the linear inputs (whose cotangent is wanted) arrive as
``UndefinedPrimal(aval)``.

Example:
    >>> from funcgrad.core.ad_util import Zero, instantiate, is_zero
    >>> from funcgrad.core.avals import ShapedArray
    >>> t = Zero(ShapedArray((3,), np.float32))
    >>> is_zero(t), instantiate(t).shape
    (True, (3,))
"""
import numpy as np

from funcgrad.core import array_ops, dtypes
from funcgrad.core.avals import ShapedArray


class Zero:
    """A symbolic zero tangent/cotangent of abstract value ``aval``.

    Example:
        >>> from funcgrad.core.ad_util import Zero
        >>> from funcgrad.core.avals import ShapedArray
        >>> Zero(ShapedArray((2,), np.float32)).aval
        f32[2]
    """

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    @staticmethod
    def from_primal_value(x):
        """The zero tangent of the primal ``x`` (float0 for integer/bool values)."""
        from funcgrad.core.values import aval_of
        return Zero(tangent_aval(aval_of(x)))

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


def is_zero(x):
    """Whether ``x`` is a symbolic zero."""
    return type(x) is Zero


def tangent_aval(aval):
    """The aval of a tangent of a primal of ``aval``: float0 for integer and bool dtypes."""
    dt = dtypes.tangent_dtype(aval.dtype)
    if dt == aval.dtype:
        return aval
    return ShapedArray(aval.shape, dt, False, aval.vma)


def float0_zeros(shape):
    """A NumPy array of float0 zeros (the value of an integer input's tangent)."""
    return np.zeros(shape, dtypes.float0)


def zeros_like_aval(aval):
    """An array of zeros of ``aval`` (float0 zeros on the host for a float0 aval).

    Example:
        >>> from funcgrad.core.ad_util import zeros_like_aval
        >>> from funcgrad.core.avals import ShapedArray
        >>> zeros_like_aval(ShapedArray((2,), np.float32))
        Array([0., 0.], dtype=float32)
    """
    if aval.dtype == dtypes.float0:
        return float0_zeros(aval.shape)
    return array_ops.zeros(aval)


def instantiate(t):
    """Materialize ``t``: a Zero becomes an array of zeros (float0 for int/bool avals);
    anything else is returned unchanged.

    Example:
        >>> from funcgrad.core.ad_util import Zero, instantiate
        >>> from funcgrad.core.avals import ShapedArray
        >>> instantiate(Zero(ShapedArray((3,), np.float32)))
        Array([0., 0., 0.], dtype=float32)
        >>> instantiate(jnp.ones(2))
        Array([1., 1.], dtype=float32)
    """
    if type(t) is not Zero:
        return t
    aval = t.aval
    if aval.dtype == dtypes.float0 or not dtypes.is_inexact(aval.dtype):
        return float0_zeros(aval.shape)
    return zeros_like_aval(aval)


def add_tangents(a, b):
    """``a + b`` where either may be a symbolic Zero (float0 tangents add to float0).

    Example:
        >>> from funcgrad.core.ad_util import Zero, add_tangents
        >>> t = jnp.ones(2)
        >>> add_tangents(Zero(t.aval), t) is t
        True
        >>> add_tangents(t, t)
        Array([2., 2.], dtype=float32)
    """
    if type(a) is Zero:
        return b
    if type(b) is Zero:
        return a
    if _is_float0(a) or _is_float0(b):
        return a
    return array_ops.add(a, b)


def _is_float0(x):
    dt = getattr(x, "dtype", None)
    return dt is not None and np.dtype(dt) == dtypes.float0


class UndefinedPrimal:
    """A linear input of a transpose rule: its value is unknown, its cotangent is wanted.

    Example:
        >>> from funcgrad.core.ad_util import UndefinedPrimal, is_undefined_primal
        >>> from funcgrad.core.avals import ShapedArray
        >>> x = UndefinedPrimal(ShapedArray((3,), np.float32))
        >>> is_undefined_primal(x), x.aval
        (True, f32[3])
    """

    __slots__ = ("aval",)

    def __init__(self, aval):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x):
    """Whether ``x`` is an UndefinedPrimal (a linear input of a transpose rule)."""
    return type(x) is UndefinedPrimal


# --- helpers for writing rules ------------------------------------------------------------------
def zero_tangent_of(x):
    """The symbolic zero tangent of primal value ``x``."""
    return Zero.from_primal_value(x)


def defjvp_zero(prim):
    """Give ``prim`` a jvp rule with zero tangent outputs (non-differentiable operations:
    comparisons, integer/bit ops, rounding...)."""
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if prim.multiple_results:
            return out, [zero_tangent_of(o) for o in out]
        return out, zero_tangent_of(out)
    prim.def_jvp(rule)
    return rule


def deflinear(prim, transpose_rule):
    """``prim`` is linear in all its operands: its jvp applies it to the tangents.

    ``transpose_rule(ct, *args, **params)`` gives the cotangent of each operand.
    """
    def rule(primals, tangents, **params):
        out = prim.bind(*primals, **params)
        if all(type(t) is Zero for t in tangents):
            if prim.multiple_results:
                return out, [zero_tangent_of(o) for o in out]
            return out, zero_tangent_of(out)
        return out, prim.bind(*[instantiate(t) for t in tangents], **params)
    prim.def_jvp(rule)
    prim.def_transpose(transpose_rule)
    return rule


def defjvp(prim, *jvp_fns):
    """jvp for a single-result primitive from per-operand rules ``fn(g, ans, *primals)``
    (``None`` for operands it does not depend on differentiably); contributions are summed."""
    def rule(primals, tangents, **params):
        ans = prim.bind(*primals, **params)
        out = Zero(tangent_aval(_aval(ans)))
        for fn, t in zip(jvp_fns, tangents):
            if fn is None or type(t) is Zero:
                continue
            out = add_tangents(out, fn(t, ans, *primals, **params))
        return ans, out
    prim.def_jvp(rule)
    return rule


def _aval(x):
    from funcgrad.core.values import aval_of
    return aval_of(x)
