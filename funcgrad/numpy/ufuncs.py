"""Elementwise functions with NumPy broadcasting and JAX's dtype promotion.

Eagerly, a function that must promote, convert or broadcast its operands runs as one compiled
call (``lowering.eager_jit.one_dispatch_when_eager``); under transformations it traces as usual."""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Value
from funcgrad.core.values import aval_of
from funcgrad.numpy._ufunc_examples import EXAMPLES
from funcgrad.numpy.complex_special import with_special_values as _special
from funcgrad.numpy._util import (check_arraylike, promote_and_broadcast, promote_dtypes,
                                  to_inexact)
from funcgrad.lowering.eager_jit import one_dispatch_when_eager


def _doc(name, what):
    args, result = EXAMPLES[name]
    return f"{what}\n\nExample:\n    >>> jnp.{name}({args})\n    {result}\n"


_INEXACT = frozenset(dtypes._FLOATS + dtypes._COMPLEX)


def _unary(name, lax_fn, what, inexact=False):
    def fn(x, /):
        if isinstance(x, Value) and (not inexact or x.aval.dtype in _INEXACT):
            return lax_fn(x)    # fast path: nothing to convert
        check_arraylike(name, x)
        x = promote_dtypes(x)[0]
        if inexact:
            x = to_inexact(x)
        out = lax_fn(x)
        if not isinstance(out, Value):  # identity paths (e.g. floor of ints) on NumPy input
            from funcgrad.numpy.creation import asarray
            out = asarray(out)
        return out
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _doc(name, what)
    return fn


def _binary(name, lax_fn, what, inexact=False):
    prim = getattr(lax_fn, "prim", None)

    def general(x1, x2, /):
        check_arraylike(name, x1, x2)
        a, b = promote_and_broadcast(name, x1, x2)
        if inexact:
            a, b = to_inexact(a), to_inexact(b)
        return lax_fn(a, b)
    general.__name__ = general.__qualname__ = name
    general = one_dispatch_when_eager(general)

    def fn(x1, x2, /):
        if prim is not None and isinstance(x1, Value) and isinstance(x2, Value):
            # Fast path: operands of one aval need no promotion or broadcasting.
            a1, a2 = x1.aval, x2.aval
            if (a1 is a2 or a1 == a2) and (not inexact or a1.dtype in _INEXACT):
                return prim.bind(x1, x2)
        return general(x1, x2)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _doc(name, what)
    return fn


# --- arithmetic ------------------------------------------------------------------------------
add = _binary("add", lax.add, "Elementwise ``x + y``.")
subtract = _binary("subtract", lax.sub, "Elementwise ``x - y``.")
multiply = _binary("multiply", lax.mul, "Elementwise ``x * y``.")
true_divide = divide = _binary("divide", lax.div, "Elementwise ``x / y`` (ints -> float).",
                               inexact=True)
maximum = _binary("maximum", lax.max, "Elementwise maximum (NaN propagates).")
minimum = _binary("minimum", lax.min, "Elementwise minimum (NaN propagates).")
arctan2 = _binary("arctan2", lax.atan2, "Elementwise ``atan(y / x)`` with quadrant.",
                  inexact=True)
nextafter = _binary("nextafter", lax.nextafter, "Next float after x towards y.")
bitwise_and = _binary("bitwise_and", lax.bitwise_and, "Elementwise ``x & y``.")
bitwise_or = _binary("bitwise_or", lax.bitwise_or, "Elementwise ``x | y``.")
bitwise_xor = _binary("bitwise_xor", lax.bitwise_xor, "Elementwise ``x ^ y``.")
left_shift = _binary("left_shift", lax.shift_left, "Elementwise ``x << y``.")
negative = _unary("negative", lax.neg, "Elementwise ``-x``.")
positive = _unary("positive", lambda x: x, "Elementwise ``+x``.")


def _lax_sign(x):
    dt = aval_of(x).dtype
    zero = lax.full(aval_of(x).shape, 0, dt)
    if dtypes.is_unsigned(dt):      # XLA's sign has no unsigned kernel
        return lax.convert_element_type(lax.gt(x, zero), dt)
    if dtypes.is_float(dt):         # sign(-0.0) is +0.0 (NumPy, the array API)
        return lax.select(lax.eq(x, zero), zero, lax.sign(x))
    return lax.sign(x)


sign = _unary("sign", _special("sign", _lax_sign), "Elementwise sign: -1, 0 or 1 (``x / |x|`` "
              "for complex ``x``).")
floor = _unary("floor", lambda x: x if dtypes.is_integer(aval_of(x).dtype) else lax.floor(x),
               "Round down.")
ceil = _unary("ceil", lambda x: x if dtypes.is_integer(aval_of(x).dtype) else lax.ceil(x),
              "Round up.")
trunc = _unary("trunc", lambda x: x if dtypes.is_integer(aval_of(x).dtype) else
               lax.select(lax.lt(x, 0), lax.ceil(x), lax.floor(x)), "Round towards zero.")
isfinite = _unary("isfinite", lambda x: lax.is_finite(x) if dtypes.is_float(aval_of(x).dtype)
                  else lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
                  if dtypes.is_complex(aval_of(x).dtype)
                  else lax.full(aval_of(x).shape, True, dtypes.bool_), "Not inf and not NaN.")
exp = _unary("exp", _special("exp", lax.exp), "Elementwise e**x.", inexact=True)
exp2 = _unary("exp2", lambda x: lax.exp(lax.mul(x, np.asarray(np.log(2), aval_of(x).dtype))),
              "Elementwise 2**x.", inexact=True)
log = _unary("log", _special("log", lax.log), "Natural logarithm.", inexact=True)
log2 = _unary("log2", lambda x: lax.div(lax.log(x), np.asarray(np.log(2), aval_of(x).dtype)),
              "Base-2 logarithm.", inexact=True)
log10 = _unary("log10", lambda x: lax.div(lax.log(x), np.asarray(np.log(10), aval_of(x).dtype)),
               "Base-10 logarithm.", inexact=True)
log1p = _unary("log1p", _special("log1p", lax.log1p), "``log(1 + x)``, accurate near 0.",
               inexact=True)
expm1 = _unary("expm1", _special("expm1", lax.expm1), "``exp(x) - 1``, accurate near 0.",
               inexact=True)
sqrt = _unary("sqrt", _special("sqrt", lax.sqrt), "Square root.", inexact=True)
cbrt = _unary("cbrt", lax.cbrt, "Cube root.", inexact=True)
sin = _unary("sin", lax.sin, "Sine.", inexact=True)
cos = _unary("cos", lax.cos, "Cosine.", inexact=True)
tan = _unary("tan", lax.tan, "Tangent.", inexact=True)
arcsin = _unary("arcsin", lax.asin, "Inverse sine.", inexact=True)
arccos = _unary("arccos", _special("arccos", lax.acos), "Inverse cosine.", inexact=True)
arctan = _unary("arctan", lax.atan, "Inverse tangent.", inexact=True)
sinh = _unary("sinh", _special("sinh", lax.sinh), "Hyperbolic sine.", inexact=True)
cosh = _unary("cosh", _special("cosh", lax.cosh), "Hyperbolic cosine.", inexact=True)
tanh = _unary("tanh", _special("tanh", lax.tanh), "Hyperbolic tangent.", inexact=True)
arcsinh = _unary("arcsinh", _special("arcsinh", lax.asinh), "Inverse hyperbolic sine.",
                 inexact=True)
arccosh = _unary("arccosh", _special("arccosh", lax.acosh), "Inverse hyperbolic cosine.",
                 inexact=True)
arctanh = _unary("arctanh", _special("arctanh", lax.atanh), "Inverse hyperbolic tangent.",
                 inexact=True)
real = _unary("real", lambda x: lax.real(x) if dtypes.is_complex(aval_of(x).dtype) else x,
              "Real part.")
imag = _unary("imag", lambda x: lax.imag(x) if dtypes.is_complex(aval_of(x).dtype) else
              lax.full(aval_of(x).shape, 0, aval_of(x).dtype), "Imaginary part.")
conjugate = conj = _unary("conjugate", lambda x: lax.conj(x) if dtypes.is_complex(
    aval_of(x).dtype) else x, "Complex conjugate.")
invert = bitwise_not = _unary("invert", lax.bitwise_not, "Bitwise NOT (logical NOT for bool).")
rint = _unary("rint", lambda x: x if dtypes.is_integer(aval_of(x).dtype) else
              lax.round(x, 1), "Round to nearest, halves to even.")


def abs(x, /):
    """Absolute value (the magnitude for complex input).

    Example:
        >>> jnp.abs(jnp.array([-1.5, 2.0]))
        Array([1.5, 2. ], dtype=float32)
    """
    check_arraylike("abs", x)
    x = promote_dtypes(x)[0]
    dt = aval_of(x).dtype
    if dtypes.is_unsigned(dt) or dt == dtypes.bool_:
        from funcgrad.numpy.creation import asarray
        return asarray(x)
    return lax.abs(x)


absolute = abs


def square(x, /):
    """``x * x``. Example: ``jnp.square(x)``."""
    check_arraylike("square", x)
    return lax.integer_pow(promote_dtypes(x)[0], 2)


def reciprocal(x, /):
    """``1 / x``. Example: ``jnp.reciprocal(x)``."""
    check_arraylike("reciprocal", x)
    return lax.integer_pow(to_inexact(promote_dtypes(x)[0]), -1)


@one_dispatch_when_eager
def right_shift(x1, x2, /):
    """Elementwise ``x >> y`` (arithmetic for signed, logical for unsigned).

    Example:
        >>> jnp.right_shift(jnp.array([8]), 2)
        Array([2], dtype=int32)
    """
    check_arraylike("right_shift", x1, x2)
    a, b = promote_and_broadcast("right_shift", x1, x2)
    if dtypes.is_unsigned(aval_of(a).dtype):
        return lax.shift_right_logical(a, b)
    return lax.shift_right_arithmetic(a, b)


def power(x1, x2, /):
    """Elementwise ``x ** y``; a static integer exponent uses repeated multiplication.

    An integer base with a static negative integer exponent raises ``TypeError`` (as JAX); with
    an integer exponent array, a negative exponent gives the truncated reciprocal: ``1`` for a
    base of 1, ``+-1`` for -1, ``0`` otherwise (``0`` for a base of 0 too).

    Example:
        >>> jnp.power(jnp.array([2.0, 3.0]), 2)
        Array([4., 9.], dtype=float32)
    """
    check_arraylike("power", x1, x2)
    if isinstance(x2, int) and not isinstance(x2, bool):
        x = promote_dtypes(x1)[0]
        dt = aval_of(x).dtype
        if x2 < 0 and not dtypes.is_inexact(dt):
            raise TypeError(f"funcgrad.numpy.power: integers cannot be raised to a negative "
                            f"power, got {aval_of(x).str_short()} ** {x2}; convert the base "
                            f"to a float first (x.astype(float) ** {x2})")
        if dt != dtypes.bool_:
            return lax.integer_pow(x, x2)
    return _power(x1, x2)


@one_dispatch_when_eager
def _power(x1, x2, /):
    a, b = promote_and_broadcast("power", x1, x2)
    dt = aval_of(a).dtype
    if dtypes.is_integer(dt):
        return _integer_power(a, b)
    if dt == dtypes.bool_:
        raise TypeError("funcgrad.numpy.power: bool ** bool is not supported")
    return lax.pow(a, b)


def _integer_power(x, y):
    # Square-and-multiply over the bits of y; a negative y gives the truncated reciprocal.
    dt = aval_of(x).dtype
    shape = aval_of(x).shape
    acc = lax.full(shape, 1, dt)
    base, exp = x, y
    for _ in range(dt.itemsize * 8):
        bit = lax.ne(lax.bitwise_and(exp, np.ones((), dt)), np.zeros((), dt))
        acc = lax.select(bit, lax.mul(acc, base), acc)
        base = lax.mul(base, base)
        exp = lax.shift_right_logical(exp, np.ones((), dt))
    if dtypes.is_unsigned(dt):
        return acc
    one, zero = lax.full(shape, 1, dt), lax.full(shape, 0, dt)
    odd = lax.ne(lax.bitwise_and(y, one), zero)
    minus_one = lax.neg(one)
    reciprocal = lax.select(lax.eq(x, one), one,
                            lax.select(lax.eq(x, minus_one),
                                       lax.select(odd, minus_one, one), zero))
    return lax.select(lax.lt(y, zero), reciprocal, acc)


pow = power


@one_dispatch_when_eager
def float_power(x1, x2, /):
    """``x ** y`` computed in the widest float type. Example: ``jnp.float_power(x, 0.5)``."""
    a, b = promote_and_broadcast("float_power", x1, x2)
    target = dtypes.canonicalize(dtypes.float64)
    a = lax.convert_element_type(a, target) if not dtypes.is_complex(aval_of(a).dtype) else a
    b = lax.convert_element_type(b, aval_of(a).dtype)
    return lax.pow(a, b)


@one_dispatch_when_eager
def floor_divide(x1, x2, /):
    """Elementwise ``x // y`` (rounding towards -inf, as NumPy). An integer division by zero
    gives what JAX gives: -1 for a zero dividend, -2 otherwise (the maximum for unsigned types).

    Example:
        >>> jnp.floor_divide(jnp.array([-7, 7]), 2)
        Array([-4,  3], dtype=int32)
    """
    check_arraylike("floor_divide", x1, x2)
    a, b = promote_and_broadcast("floor_divide", x1, x2)
    dt = aval_of(a).dtype
    if dtypes.is_integer(dt):
        # As JAX: XLA's quotient (-1, or the maximum of an unsigned type, for a zero divisor),
        # less one where the signs differ and the division is inexact.
        if dtypes.is_unsigned(dt):
            return lax.div(a, b)
        q = lax.div(a, b)
        zero = np.zeros((), dt)
        adjust = lax.bitwise_and(lax.ne(lax.rem(a, b), zero), lax.ne(lax.sign(a), lax.sign(b)))
        return lax.select(adjust, lax.sub(q, np.ones((), dt)), q)
    if dt == dtypes.bool_:
        raise TypeError("funcgrad.numpy.floor_divide: not supported for bool")
    return lax.floor(lax.div(a, b))


@one_dispatch_when_eager
def remainder(x1, x2, /):
    """Elementwise ``x % y`` with the sign of ``y`` (NumPy's mod); 0 for an integer ``y`` of 0.

    Example:
        >>> jnp.remainder(jnp.array([-7, 7]), 3)
        Array([2, 1], dtype=int32)
    """
    check_arraylike("remainder", x1, x2)
    a, b = promote_and_broadcast("remainder", x1, x2)
    dt = aval_of(a).dtype
    b = _nonzero_int_divisor(b)
    r = lax.rem(a, b)
    if dtypes.is_unsigned(dt):
        return r
    zero = np.zeros((), dt)
    adjust = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(b, zero)))
    out = lax.select(adjust, lax.add(r, b), r)
    if dtypes.is_float(dt):
        # array API: a zero remainder takes the sign of the divisor
        out = lax.select(lax.eq(out, zero), copysign(lax.full(aval_of(out).shape, 0, dt), b),
                         out)
    return out


mod = remainder


@one_dispatch_when_eager
def fmod(x1, x2, /):
    """Remainder with the sign of ``x`` (C's fmod). Example: ``jnp.fmod(x, 3)``."""
    a, b = promote_and_broadcast("fmod", x1, x2)
    return lax.rem(a, _nonzero_int_divisor(b))


def _nonzero_int_divisor(b):
    # An integer remainder by zero is 0 (as NumPy and JAX): divide by one there instead.
    dt = aval_of(b).dtype
    if not dtypes.is_integer(dt):
        return b
    shape = aval_of(b).shape
    return lax.select(lax.eq(b, lax.full(shape, 0, dt)), lax.full(shape, 1, dt), b)


def divmod(x1, x2, /):
    """``(x // y, x % y)``. Example: ``q, r = jnp.divmod(x, 3)``."""
    return floor_divide(x1, x2), remainder(x1, x2)


# --- comparisons and logic -----------------------------------------------------------------
def _comparison(name, lax_fn, symbol):
    return _binary(name, lax_fn, f"Elementwise ``x {symbol} y`` (bool result).")


equal = _comparison("equal", lax.eq, "==")
not_equal = _comparison("not_equal", lax.ne, "!=")
less = _comparison("less", lax.lt, "<")
less_equal = _comparison("less_equal", lax.le, "<=")
greater = _comparison("greater", lax.gt, ">")
greater_equal = _comparison("greater_equal", lax.ge, ">=")


def _to_bool(x):
    av = aval_of(x)
    return x if av.dtype == dtypes.bool_ else lax.ne(x, np.zeros((), av.dtype))


def _logical(name, lax_fn, symbol):
    def fn(x1, x2, /):
        check_arraylike(name, x1, x2)
        a, b = promote_and_broadcast(name, x1, x2)
        return lax_fn(_to_bool(a), _to_bool(b))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _doc(name, f"Elementwise logical {symbol} (truthiness of each element).")
    return one_dispatch_when_eager(fn)


logical_and = _logical("logical_and", lax.bitwise_and, "AND")
logical_or = _logical("logical_or", lax.bitwise_or, "OR")
logical_xor = _logical("logical_xor", lax.bitwise_xor, "XOR")


def logical_not(x, /):
    """Elementwise logical NOT. Example: ``jnp.logical_not(x > 0)``."""
    check_arraylike("logical_not", x)
    return lax.bitwise_not(_to_bool(promote_dtypes(x)[0]))


def isnan(x, /):
    """True where ``x`` is NaN. Example: ``jnp.isnan(x)``."""
    x = promote_dtypes(x)[0]
    if not dtypes.is_inexact(aval_of(x).dtype):
        return lax.full(aval_of(x).shape, False, dtypes.bool_)
    return lax.ne(x, x)


def isinf(x, /):
    """True where ``x`` is +-inf. Example: ``jnp.isinf(x)``."""
    x = promote_dtypes(x)[0]
    dt = aval_of(x).dtype
    if not dtypes.is_inexact(dt):
        return lax.full(aval_of(x).shape, False, dtypes.bool_)
    if dtypes.is_complex(dt):
        return logical_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return lax.eq(lax.abs(x), np.asarray(np.inf, dt))


def isposinf(x, /):
    """True where ``x`` is +inf."""
    x = promote_dtypes(x)[0]
    return equal(x, np.inf) if dtypes.is_float(aval_of(x).dtype) else \
        lax.full(aval_of(x).shape, False, dtypes.bool_)


def isneginf(x, /):
    """True where ``x`` is -inf."""
    x = promote_dtypes(x)[0]
    return equal(x, -np.inf) if dtypes.is_float(aval_of(x).dtype) else \
        lax.full(aval_of(x).shape, False, dtypes.bool_)


def signbit(x, /):
    """True where the sign bit is set (including -0.0). Example: ``jnp.signbit(x)``."""
    x = promote_dtypes(x)[0]
    dt = aval_of(x).dtype
    if dtypes.is_integer(dt):
        return lax.lt(x, np.zeros((), dt))
    if dt == dtypes.bool_:
        return lax.full(aval_of(x).shape, False, dtypes.bool_)
    from funcgrad.lax import bitcast_convert_type
    int_dt = np.dtype(f"int{dt.itemsize * 8}")
    return lax.lt(bitcast_convert_type(x, int_dt), np.zeros((), int_dt))


@one_dispatch_when_eager
def copysign(x1, x2, /):
    """``|x|`` with the sign of ``y``. Example: ``jnp.copysign(x, -1.0)``."""
    a, b = promote_and_broadcast("copysign", x1, x2)
    a, b = to_inexact(a), to_inexact(b)
    mag = lax.abs(a)
    return lax.select(signbit(b), lax.neg(mag), mag)


def fmax(x1, x2, /):
    """Maximum that ignores NaN. Example: ``jnp.fmax(x, y)``."""
    a, b = promote_and_broadcast("fmax", x1, x2)
    return lax.select(isnan(a), b, lax.select(isnan(b), a, lax.max(a, b)))


def fmin(x1, x2, /):
    """Minimum that ignores NaN. Example: ``jnp.fmin(x, y)``."""
    a, b = promote_and_broadcast("fmin", x1, x2)
    return lax.select(isnan(a), b, lax.select(isnan(b), a, lax.min(a, b)))


@one_dispatch_when_eager
def hypot(x1, x2, /):
    """``sqrt(x**2 + y**2)`` without overflow. Example: ``jnp.hypot(3.0, 4.0)``."""
    a, b = promote_and_broadcast("hypot", x1, x2)
    a, b = lax.abs(to_inexact(a)), lax.abs(to_inexact(b))
    big, small = lax.max(a, b), lax.min(a, b)
    dt = aval_of(big).dtype
    safe = lax.select(lax.eq(big, np.zeros((), dt)), lax.full(aval_of(big).shape, 1, dt), big)
    ratio = lax.div(small, safe)
    out = lax.mul(big, lax.sqrt(lax.add(np.ones((), dt), lax.mul(ratio, ratio))))
    # an infinite input gives +inf even when the other one is NaN (C99, array API)
    inf = np.asarray(np.inf, dt)
    return lax.select(lax.bitwise_or(lax.eq(a, inf), lax.eq(b, inf)),
                      lax.full(aval_of(out).shape, inf, dt), out)


@one_dispatch_when_eager
def logaddexp(x1, x2, /):
    """``log(exp(x) + exp(y))`` computed stably. Example: ``jnp.logaddexp(x, y)``."""
    a, b = promote_and_broadcast("logaddexp", x1, x2)
    a, b = to_inexact(a), to_inexact(b)
    m = lax.max(a, b)
    d = lax.neg(lax.abs(lax.sub(a, b)))
    out = lax.add(m, lax.log1p(lax.exp(d)))
    # inf + inf: keep inf rather than NaN from inf - inf
    return lax.select(lax.eq(a, b), lax.add(a, np.asarray(np.log(2), aval_of(a).dtype)), out)


def deg2rad(x, /):
    """Degrees to radians. Example: ``jnp.deg2rad(180.0)``."""
    x = to_inexact(promote_dtypes(x)[0])
    return lax.mul(x, np.asarray(np.pi / 180, aval_of(x).dtype))


def rad2deg(x, /):
    """Radians to degrees. Example: ``jnp.rad2deg(jnp.pi)``."""
    x = to_inexact(promote_dtypes(x)[0])
    return lax.mul(x, np.asarray(180 / np.pi, aval_of(x).dtype))


radians, degrees = deg2rad, rad2deg


def round(a, decimals=0):
    """Round to ``decimals`` places, halves to even (as NumPy).

    Example:
        >>> jnp.round(jnp.array([0.5, 1.5, 2.25]), 1)
        Array([0.5, 1.5, 2.2], dtype=float32)
    """
    a = promote_dtypes(a)[0]
    dt = aval_of(a).dtype
    if dtypes.is_complex(dt):
        return lax.complex(round(lax.real(a), decimals), round(lax.imag(a), decimals))
    if dtypes.is_integer(dt) or dt == dtypes.bool_:
        if decimals >= 0:
            from funcgrad.numpy.creation import asarray
            return asarray(a)
        # round half to even on multiples of 10**-decimals, as NumPy
        factor = np.asarray(10 ** -decimals, dt)
        q = floor_divide(a, factor)
        twice_r = lax.mul(lax.sub(a, lax.mul(q, factor)), np.asarray(2, dt))
        q_odd = lax.ne(remainder(q, np.asarray(2, dt)), np.zeros((), dt))
        up = lax.bitwise_or(lax.gt(twice_r, factor),
                            lax.bitwise_and(lax.eq(twice_r, factor), q_odd))
        return lax.mul(lax.select(up, lax.add(q, np.ones((), dt)), q), factor)
    if decimals == 0:
        return lax.round(a, 1)
    factor = np.asarray(10.0 ** decimals, dt)
    return lax.div(lax.round(lax.mul(a, factor), 1), factor)


around = round


def fix(x, /):
    """Round towards zero. Example: ``jnp.fix(-1.5)``."""
    return trunc(x)


def clip(a, /, min=None, max=None, *, a_min=None, a_max=None):
    """Limit values to [min, max] (either may be None; arrays broadcast).

    NumPy's ``a_min``/``a_max`` keywords are accepted too.

    Example:
        >>> jnp.clip(jnp.arange(5), 1, 3)
        Array([1, 1, 2, 3, 3], dtype=int32)
    """
    for old_name, old, new_name, new in (("a_min", a_min, "min", min),
                                         ("a_max", a_max, "max", max)):
        if old is not None and new is not None:
            raise TypeError(f"funcgrad.numpy.clip: got both {new_name} and {old_name}; "
                            f"pass one of them")
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    check_arraylike("clip", a)
    if lo is not None:
        a = maximum(a, lo)
    if hi is not None:
        a = minimum(a, hi)
    if not isinstance(a, Value):
        from funcgrad.numpy.creation import asarray
        a = asarray(a)
    return a


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """``x`` where ``condition`` else ``y``, broadcast together.

    With only ``condition``, the indices where it is true (``size=`` makes it jittable).

    Example:
        >>> jnp.where(jnp.array([True, False]), 1.0, 0.0)
        Array([1., 0.], dtype=float32, weak_type=True)
    """
    if x is None and y is None:
        from funcgrad.numpy.searching import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("funcgrad.numpy.where: give both x and y, or neither")
    return _where3(condition, x, y)


@one_dispatch_when_eager
def _where3(condition, x, y):
    check_arraylike("where", condition, x, y)
    from funcgrad.numpy._util import broadcast_shapes, broadcast_to_shape, shape_of
    x, y = promote_dtypes(x, y)
    shape = broadcast_shapes("where", shape_of(condition), shape_of(x), shape_of(y))
    cond = _to_bool(promote_dtypes(condition)[0])
    return lax.select(broadcast_to_shape(cond, shape), broadcast_to_shape(x, shape),
                      broadcast_to_shape(y, shape))


@one_dispatch_when_eager
def heaviside(x1, x2, /):
    """0 for x < 0, x2 for x == 0, 1 for x > 0. Example: ``jnp.heaviside(x, 0.5)``."""
    a, b = promote_and_broadcast("heaviside", x1, x2)
    a, b = to_inexact(a), to_inexact(b)
    dt = aval_of(a).dtype
    zero, one = np.zeros((), dt), np.ones((), dt)
    return where(lax.lt(a, zero), zero, where(lax.gt(a, zero), one, where(isnan(a), a, b)))


def sinc(x, /):
    """``sin(pi x) / (pi x)`` with sinc(0) = 1. Example: ``jnp.sinc(x)``."""
    x = to_inexact(promote_dtypes(x)[0])
    dt = aval_of(x).dtype
    pix = lax.mul(x, np.asarray(np.pi, dt))
    is_zero = lax.eq(x, np.zeros((), dt))
    safe = lax.select(is_zero, lax.full(aval_of(x).shape, 1, dt), pix)
    return lax.select(is_zero, lax.full(aval_of(x).shape, 1, dt), lax.div(lax.sin(safe), safe))


def angle(z, deg=False):
    """The argument of complex ``z``. Example: ``jnp.angle(1j)``."""
    z = to_inexact(promote_dtypes(z)[0])
    re, im = real(z), imag(z)
    out = lax.atan2(im, re)
    return rad2deg(out) if deg else out


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Replace NaN and infinities with finite numbers. Example: ``jnp.nan_to_num(x)``."""
    x = promote_dtypes(x)[0]
    dt = aval_of(x).dtype
    if not dtypes.is_float(dt):
        from funcgrad.numpy.creation import asarray
        return asarray(x)
    info = dtypes.finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    x = where(isnan(x), np.asarray(nan, dt), x)
    x = where(isposinf(x), np.asarray(posinf, dt), x)
    return where(isneginf(x), np.asarray(neginf, dt), x)


def gcd(x1, x2, /):
    """Greatest common divisor of integers. Example: ``jnp.gcd(12, 18)``."""
    a, b = promote_and_broadcast("gcd", x1, x2)
    a, b = abs(a), abs(b)
    dt = aval_of(a).dtype
    zero = np.zeros((), dt)
    for _ in range(dt.itemsize * 8 * 2):
        nonzero_b = lax.ne(b, zero)
        safe_b = lax.select(nonzero_b, b, lax.full(aval_of(b).shape, 1, dt))
        a, b = lax.select(nonzero_b, b, a), lax.select(nonzero_b, lax.rem(a, safe_b), b)
    return a


def lcm(x1, x2, /):
    """Least common multiple of integers. Example: ``jnp.lcm(4, 6)``."""
    a, b = promote_and_broadcast("lcm", x1, x2)
    g = gcd(a, b)
    dt = aval_of(g).dtype
    safe = lax.select(lax.eq(g, np.zeros((), dt)), lax.full(aval_of(g).shape, 1, dt), g)
    return abs(lax.mul(lax.div(a, safe), b))

