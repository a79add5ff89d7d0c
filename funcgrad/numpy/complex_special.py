"""Special values of complex elementwise functions (C99 Annex G, as the array API standard
states them) where XLA's complex kernels give other results: mostly inputs with an infinite
or NaN part, and the sign of a zero imaginary part.

``with_special_values(name, fn)`` wraps the lax function ``fn`` of ``funcgrad.numpy.<name>``:
real inputs pass through untouched; for complex inputs the kernel's result is kept everywhere
except on the listed special inputs, where a ``select`` puts the standard's value (so the
results of ordinary inputs, and their derivatives, are the kernel's).

Example:
    >>> import numpy as np
    >>> import funcgrad.numpy as jnp
    >>> jnp.exp(jnp.array(complex(-np.inf, np.inf), jnp.complex64))
    Array(0.+0.j, dtype=complex64)
"""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.lowering.eager_jit import one_dispatch_when_eager


class _Parts:
    """The real part ``a`` and imaginary part ``b`` of a complex array, with the predicates
    the special-value tables are written in."""

    def __init__(self, z):
        self.a, self.b = lax.real(z), lax.imag(z)
        av = aval_of(self.a)
        self.shape, self.dtype = av.shape, av.dtype

    def const(self, v):
        return lax.full(self.shape, v, self.dtype)

    @staticmethod
    def isnan(v):
        return lax.ne(v, v)

    @staticmethod
    def finite(v):
        return lax.is_finite(v)

    def isinf(self, v):
        return lax.eq(lax.abs(v), self.const(np.inf))

    def eq(self, v, c):
        return lax.eq(v, self.const(c))

    def copysign(self, mag, sign_of):
        """``|mag|`` with the sign bit of ``sign_of`` (zeros and NaNs included)."""
        it = {4: dtypes.uint32, 8: dtypes.uint64}[np.dtype(self.dtype).itemsize]
        top = np.asarray(1 << (8 * np.dtype(self.dtype).itemsize - 1), it)
        m = lax.bitcast_convert_type(mag, it)
        s = lax.bitcast_convert_type(sign_of, it)
        full_top = lax.full(self.shape, top, it)
        bits = lax.bitwise_or(lax.bitwise_and(m, lax.bitwise_not(full_top)),
                              lax.bitwise_and(s, full_top))
        return lax.bitcast_convert_type(bits, self.dtype)


def _and(*preds):
    out = preds[0]
    for p in preds[1:]:
        out = lax.bitwise_and(out, p)
    return out


def _or(*preds):
    out = preds[0]
    for p in preds[1:]:
        out = lax.bitwise_or(out, p)
    return out


def _put(p, out, cond, re, im):
    """``out`` with ``re + im j`` where ``cond`` (``re``/``im``: arrays or Python floats)."""
    re = p.const(re) if isinstance(re, (int, float)) else re
    im = p.const(im) if isinstance(im, (int, float)) else im
    return lax.select(cond, lax.complex(re, im), out)


def _keep_zero_imag(p, out):
    """``f(a ± 0j) = f(a) ± 0j`` for functions real on the real axis (exp, sinh, ...)."""
    return _put(p, out, p.eq(p.b, 0.0), lax.real(out), p.b)


def _exp(shift):
    def fix(p, out):
        out = _keep_zero_imag(p, out)
        not_finite_b = lax.bitwise_not(p.finite(p.b))
        out = _put(p, out, _and(p.eq(p.a, -np.inf), not_finite_b), shift, 0.0)
        return _put(p, out, _and(p.eq(p.a, np.inf), not_finite_b), np.inf, np.nan)
    return fix


def _sinh(p, out):
    out = _keep_zero_imag(p, out)
    cond = _and(_or(p.eq(p.a, 0.0), p.isinf(p.a)), lax.bitwise_not(p.finite(p.b)))
    return _put(p, out, cond, p.a, np.nan)


def _cosh(p, out):
    not_finite_b = lax.bitwise_not(p.finite(p.b))
    out = _put(p, out, _and(p.eq(p.a, 0.0), not_finite_b), np.nan, 0.0)
    return _put(p, out, _and(p.isinf(p.a), not_finite_b), np.inf, np.nan)


def _tanh(p, out):
    cond = _and(p.eq(p.a, 0.0), lax.bitwise_not(p.finite(p.b)))
    return _put(p, out, cond, p.a, np.nan)


def _sqrt(p, out):
    # sqrt(conj(z)) = conj(sqrt(z)): the imaginary part has the sign of b, -0 included
    out = _put(p, out, lax.bitwise_not(p.isnan(p.b)), lax.real(out),
               p.copysign(lax.imag(out), p.b))
    nan_b = p.isnan(p.b)
    out = _put(p, out, _and(p.eq(p.a, -np.inf), nan_b), np.nan, np.inf)
    out = _put(p, out, _and(p.eq(p.a, np.inf), nan_b), np.inf, np.nan)
    return _put(p, out, p.isinf(p.b), np.inf, p.b)


def _log(p, out):
    cond = _or(_and(p.isinf(p.a), p.isnan(p.b)), _and(p.isnan(p.a), p.isinf(p.b)))
    return _put(p, out, cond, np.inf, np.nan)


def _acos(p, out):
    cond = _and(p.isnan(p.b), p.finite(p.a))
    re = lax.select(p.eq(p.a, 0.0), p.const(np.pi / 2), p.const(np.nan))
    return _put(p, out, cond, re, np.nan)


def _acosh(p, out):
    # finite a, NaN b: NaN + NaN j, but NaN ± πj/2 for a = ±0
    im = lax.select(p.eq(p.a, 0.0), p.const(np.pi / 2), p.const(np.nan))
    return _put(p, out, _and(p.finite(p.a), p.isnan(p.b)), np.nan, im)


def _asinh(p, out):
    out = _put(p, out, _and(p.finite(p.a), p.isnan(p.b)), np.nan, np.nan)
    # NaN a, finite b: NaN + NaN j, but NaN ± 0j for b = ±0
    im = lax.select(p.eq(p.b, 0.0), p.b, p.const(np.nan))
    return _put(p, out, _and(p.isnan(p.a), p.finite(p.b)), np.nan, im)




def _atanh(p, out):
    nan_b = p.isnan(p.b)
    # a = ±0 keeps its sign, a = ±inf gives ±0, other finite a gives NaN
    re = lax.select(p.eq(p.a, 0.0), p.a,
                    lax.select(p.isinf(p.a), p.copysign(p.const(0.0), p.a), p.const(np.nan)))
    out = _put(p, out, _and(nan_b, lax.bitwise_not(p.isnan(p.a))), re, np.nan)
    out = _put(p, out, _and(p.isnan(p.a), lax.bitwise_not(p.isinf(p.b))), np.nan, np.nan)
    return _put(p, out, _and(p.isnan(p.a), p.isinf(p.b)), 0.0,
                p.copysign(p.const(np.pi / 2), p.b))


def _sign(p, out):
    out = _put(p, out, _and(p.eq(p.a, 0.0), p.eq(p.b, 0.0)), 0.0, 0.0)
    return _put(p, out, _or(p.isnan(p.a), p.isnan(p.b)), np.nan, np.nan)


_FIXES = {
    "exp": _exp(0.0), "expm1": _exp(-1.0), "sinh": _sinh, "cosh": _cosh, "tanh": _tanh,
    "sqrt": _sqrt, "log": _log, "log1p": _log, "arccos": _acos, "arccosh": _acosh,
    "arcsinh": _asinh, "arctanh": _atanh, "sign": _sign,
}


def with_special_values(name, fn):
    """``fn`` (a lax function of one array) with the complex special values of
    ``funcgrad.numpy.<name>`` put right; real inputs go to ``fn`` unchanged."""
    fix = _FIXES[name]

    @one_dispatch_when_eager        # eagerly: the kernel and its fix-up in one executable
    def fixed(x):
        return fix(_Parts(x), fn(x))

    def wrapped(x):
        if dtypes.is_complex(aval_of(x).dtype):
            return fixed(x)
        return fn(x)
    wrapped.__name__ = wrapped.__qualname__ = getattr(fn, "__name__", name)
    return wrapped
