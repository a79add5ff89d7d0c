"""Elementwise primitives: arithmetic, math functions, comparisons, logic, select, conversion.

Binary primitives take operands of one shape and one dtype (``funcgrad.numpy`` broadcasts and
promotes before binding). Python scalars given to the ``lax`` functions adopt the other
operand's dtype, as in ``jax.lax``.
"""
import numpy as np
from jaxlib.mlir.dialects import chlo, stablehlo

from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import PYTHON_SCALARS, aval_of
from funcgrad.lax import _hlo

# --- dtype classes that each operation accepts --------------------------------------------
_ANY = "any"
_NUM = "number"        # not bool
_INEXACT = "inexact"   # float or complex
_FLOAT = "float"
_INT_BOOL = "integer or bool"
_INT = "integer"
_COMPLEX = "complex"


def _accepts(cls, dtype):
    if cls == _ANY:
        return True
    if cls == _NUM:
        return dtype != dtypes.bool_
    if cls == _INEXACT:
        return dtypes.is_inexact(dtype)
    if cls == _FLOAT:
        return dtypes.is_float(dtype)
    if cls == _INT_BOOL:
        return dtypes.is_integer(dtype) or dtype == dtypes.bool_
    if cls == _INT:
        return dtypes.is_integer(dtype)
    if cls == _COMPLEX:
        return dtypes.is_complex(dtype)
    raise ValueError(cls)


def _check_dtype(name, cls, aval):
    if not _accepts(cls, aval.dtype):
        raise TypeError(f"lax.{name}: expected a {cls} operand, got {aval.str_short()}")


def _same_type_avals(name, *avals):
    shape, dtype = avals[0].shape, avals[0].dtype
    for a in avals[1:]:
        if a.shape != shape:
            raise TypeError(f"lax.{name}: operand shapes must match, got "
                            f"{', '.join(x.str_short() for x in avals)}; use funcgrad.numpy "
                            f"for broadcasting")
        if a.dtype != dtype:
            raise TypeError(f"lax.{name}: operand dtypes must match, got "
                            f"{', '.join(x.str_short() for x in avals)}; convert with "
                            f"lax.convert_element_type or use funcgrad.numpy for promotion")
    return shape, dtype, all(a.weak_type for a in avals)


# --- primitive factories --------------------------------------------------------------------
def unary(name, hlo_fn, accepts=_NUM, out_dtype=None):
    """An elementwise one-operand primitive. ``out_dtype(dtype)`` maps the result dtype."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract(x, **params):
        _check_dtype(name, accepts, x)
        dt = out_dtype(x.dtype) if out_dtype else x.dtype
        return ShapedArray(x.shape, dt, x.weak_type)

    prim.def_lowering(lambda ctx, x, **params: hlo_fn(x))
    return prim


def binary(name, hlo_fn, accepts=_NUM, out_dtype=None):
    """An elementwise two-operand primitive over operands of one shape and dtype."""
    prim = Primitive(name)

    @prim.def_abstract_eval
    def _abstract(x, y, **params):
        shape, dt, weak = _same_type_avals(name, x, y)
        _check_dtype(name, accepts, x)
        return ShapedArray(shape, out_dtype(dt) if out_dtype else dt, weak)

    prim.def_lowering(lambda ctx, x, y, **params: hlo_fn(x, y))
    return prim


def _to_bool(dtype):
    return dtypes.bool_


# --- unary math ------------------------------------------------------------------------------
neg_p = unary("neg", stablehlo.negate)
sign_p = unary("sign", stablehlo.sign)
floor_p = unary("floor", stablehlo.floor, _FLOAT)
ceil_p = unary("ceil", stablehlo.ceil, _FLOAT)
is_finite_p = unary("is_finite", stablehlo.is_finite, _FLOAT, _to_bool)
exp_p = unary("exp", stablehlo.exponential, _INEXACT)
log_p = unary("log", stablehlo.log, _INEXACT)
log1p_p = unary("log1p", stablehlo.log_plus_one, _INEXACT)
expm1_p = unary("expm1", stablehlo.exponential_minus_one, _INEXACT)
tanh_p = unary("tanh", stablehlo.tanh, _INEXACT)
logistic_p = unary("logistic", stablehlo.logistic, _INEXACT)
sin_p = unary("sin", stablehlo.sine, _INEXACT)
cos_p = unary("cos", stablehlo.cosine, _INEXACT)
tan_p = unary("tan", stablehlo.tan, _INEXACT)
asin_p = unary("asin", chlo.asin, _INEXACT)
acos_p = unary("acos", chlo.acos, _INEXACT)
atan_p = unary("atan", chlo.atan, _INEXACT)
sinh_p = unary("sinh", chlo.sinh, _INEXACT)
cosh_p = unary("cosh", chlo.cosh, _INEXACT)
asinh_p = unary("asinh", chlo.asinh, _INEXACT)
acosh_p = unary("acosh", chlo.acosh, _INEXACT)
atanh_p = unary("atanh", chlo.atanh, _INEXACT)
sqrt_p = unary("sqrt", stablehlo.sqrt, _INEXACT)
rsqrt_p = unary("rsqrt", stablehlo.rsqrt, _INEXACT)
cbrt_p = unary("cbrt", stablehlo.cbrt, _FLOAT)
not_p = unary("not", stablehlo.not_, _INT_BOOL)
population_count_p = unary("population_count", stablehlo.popcnt, _INT)
clz_p = unary("clz", stablehlo.count_leading_zeros, _INT)
real_p = unary("real", stablehlo.real, _COMPLEX, dtypes.real_dtype)
imag_p = unary("imag", stablehlo.imag, _COMPLEX, dtypes.real_dtype)
conj_p = unary("conj", chlo.conj, _COMPLEX)
abs_p = unary("abs", stablehlo.abs, _NUM, dtypes.real_dtype)

# round: rounding_method 0 = away from zero (lax default), 1 = to nearest even (NumPy's)
round_p = unary("round", None, _FLOAT)
round_p.def_lowering(lambda ctx, x, rounding_method=0:
                     stablehlo.round_nearest_even(x) if rounding_method == 1
                     else stablehlo.round_nearest_afz(x))

# integer_pow: x ** y for a static Python int y, by repeated squaring.
integer_pow_p = unary("integer_pow", None, _NUM)


def _integer_pow_lowering(ctx, x, y):
    aval = ctx.avals_in[0]
    if y == 0:
        return _hlo.constant(1, aval.dtype, aval.shape)
    is_reciprocal = y < 0
    n = -y if is_reciprocal else y
    acc, base = None, x
    while n:
        if n & 1:
            acc = base if acc is None else stablehlo.multiply(acc, base)
        n >>= 1
        if n:
            base = stablehlo.multiply(base, base)
    if is_reciprocal:
        acc = stablehlo.divide(_hlo.constant(1, aval.dtype, aval.shape), acc)
    return acc


integer_pow_p.def_lowering(_integer_pow_lowering)

# convert_element_type: to new_dtype, weak_type says whether the result is weakly typed.
convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_abstract(x, new_dtype, weak_type=False):
    return ShapedArray(x.shape, new_dtype, weak_type)


convert_element_type_p.def_lowering(
    lambda ctx, x, new_dtype, weak_type=False: _hlo.convert(x, ctx.avals_in[0], new_dtype))

# --- binary ------------------------------------------------------------------------------
add_p = binary("add", stablehlo.add, _ANY)
sub_p = binary("sub", stablehlo.subtract)
mul_p = binary("mul", stablehlo.multiply, _ANY)
div_p = binary("div", stablehlo.divide)
rem_p = binary("rem", stablehlo.remainder)
pow_p = binary("pow", stablehlo.power, _INEXACT)
max_p = binary("max", stablehlo.maximum, _ANY)
min_p = binary("min", stablehlo.minimum, _ANY)
atan2_p = binary("atan2", stablehlo.atan2, _FLOAT)
nextafter_p = binary("nextafter", chlo.next_after, _FLOAT)
and_p = binary("and", stablehlo.and_, _INT_BOOL)
or_p = binary("or", stablehlo.or_, _INT_BOOL)
xor_p = binary("xor", stablehlo.xor, _INT_BOOL)
shift_left_p = binary("shift_left", stablehlo.shift_left, _INT)
shift_right_arithmetic_p = binary("shift_right_arithmetic", stablehlo.shift_right_arithmetic,
                                  _INT)
shift_right_logical_p = binary("shift_right_logical", stablehlo.shift_right_logical, _INT)
complex_p = binary("complex", stablehlo.complex, _FLOAT, dtypes.complex_dtype)


def _comparison(name, direction):
    prim = binary(name, None, _ANY, _to_bool)
    prim.def_lowering(lambda ctx, x, y: _hlo.compare(x, y, direction, ctx.avals_in[0].dtype))
    return prim


eq_p = _comparison("eq", "EQ")
ne_p = _comparison("ne", "NE")
lt_p = _comparison("lt", "LT")
le_p = _comparison("le", "LE")
gt_p = _comparison("gt", "GT")
ge_p = _comparison("ge", "GE")

# --- select_n and clamp ------------------------------------------------------------------------
select_n_p = Primitive("select_n")


@select_n_p.def_abstract_eval
def _select_n_abstract(which, *cases):
    if not cases:
        raise TypeError("lax.select_n: needs at least one case")
    shape, dt, weak = _same_type_avals("select_n", *cases)
    if which.shape not in ((), shape):
        raise TypeError(f"lax.select_n: the selector {which.str_short()} must be a scalar or "
                        f"have the cases' shape {shape}")
    if which.dtype != dtypes.bool_ and not dtypes.is_integer(which.dtype):
        raise TypeError(f"lax.select_n: the selector must be bool or int32, got "
                        f"{which.str_short()}")
    if which.dtype == dtypes.bool_ and len(cases) > 2:
        raise TypeError(f"lax.select_n: a bool selector picks between 2 cases, got {len(cases)}")
    return ShapedArray(shape, dt, weak)


def _select_n_lowering(ctx, which, *cases):
    which_aval, case_aval = ctx.avals_in[0], ctx.avals_in[1]
    if which_aval.shape != case_aval.shape:
        which = _hlo.broadcast_to(which, which_aval, case_aval.shape)
        which_aval = which_aval.update(shape=case_aval.shape)
    if len(cases) == 1:
        return cases[0]
    if which_aval.dtype == dtypes.bool_:
        return stablehlo.select(which, cases[1], cases[0])
    # Binary search over the case index: which < mid picks from the lower half.
    def pick(lo, hi):
        if hi - lo == 1:
            return cases[lo]
        mid = (lo + hi) // 2
        pred = _hlo.compare(which, _hlo.constant(mid, which_aval.dtype, which_aval.shape), "LT",
                            which_aval.dtype)
        return stablehlo.select(pred, pick(lo, mid), pick(mid, hi))
    return pick(0, len(cases))


select_n_p.def_lowering(_select_n_lowering)

clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_abstract(lo, x, hi):
    for bound, which in ((lo, "min"), (hi, "max")):
        if bound.dtype != x.dtype or bound.shape not in ((), x.shape):
            raise TypeError(f"lax.clamp: {which} {bound.str_short()} must be a scalar or match "
                            f"the operand {x.str_short()} in shape and dtype")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


clamp_p.def_lowering(lambda ctx, lo, x, hi: stablehlo.clamp(lo, x, hi))


# --- the lax functions -----------------------------------------------------------------------
def _match_scalar(x, like):
    """A Python scalar operand as a 0-d NumPy value of ``like``'s dtype (JAX's weak typing)."""
    if isinstance(x, PYTHON_SCALARS) and not isinstance(like, PYTHON_SCALARS):
        like_aval, own = aval_of(like), aval_of(x)
        if like_aval.weak_type and own.dtype == like_aval.dtype:
            return x
        return np.asarray(x, like_aval.dtype)
    return x


def binary_operands(x, y):
    """The operands of a two-operand lax function: Python scalars take the other operand's
    dtype and a rank-0 operand is broadcast to the other's shape, as in ``jax.lax``."""
    x, y = _match_scalar(x, y), _match_scalar(y, x)
    ax, ay = aval_of(x), aval_of(y)
    if ax.shape != ay.shape:
        from funcgrad.lax.shapes import broadcast_in_dim
        if not ax.shape:
            x = broadcast_in_dim(x, ay.shape, ())
        elif not ay.shape:
            y = broadcast_in_dim(y, ax.shape, ())
    return x, y


def _binary_fn(prim):
    def fn(x, y):
        return prim.bind(*binary_operands(x, y))
    fn.__name__ = prim.name
    fn.prim = prim    # lets funcgrad.numpy bind directly when operands already match
    fn.__doc__ = (f"Elementwise ``{prim.name}`` of two arrays of one shape and dtype "
                  f"(scalars broadcast).\n\nExample:\n    >>> lax.{prim.name}(x, y)\n")
    return fn


def _unary_fn(prim):
    def fn(x):
        return prim.bind(x)
    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}``.\n\nExample:\n    >>> lax.{prim.name}(x)\n"
    return fn


neg, sign, floor, ceil, is_finite = map(_unary_fn, (neg_p, sign_p, floor_p, ceil_p, is_finite_p))
exp, log, log1p, expm1, tanh, logistic = map(_unary_fn, (exp_p, log_p, log1p_p, expm1_p, tanh_p,
                                                        logistic_p))
sin, cos, tan, asin, acos, atan = map(_unary_fn, (sin_p, cos_p, tan_p, asin_p, acos_p, atan_p))
sinh, cosh, asinh, acosh, atanh = map(_unary_fn, (sinh_p, cosh_p, asinh_p, acosh_p, atanh_p))
sqrt, rsqrt, cbrt, abs, bitwise_not = map(_unary_fn, (sqrt_p, rsqrt_p, cbrt_p, abs_p, not_p))
population_count, clz, real, imag, conj = map(_unary_fn, (population_count_p, clz_p, real_p,
                                                          imag_p, conj_p))
add, sub, mul, div, rem, pow, max, min = map(_binary_fn, (add_p, sub_p, mul_p, div_p, rem_p,
                                                         pow_p, max_p, min_p))
atan2, nextafter, bitwise_and, bitwise_or, bitwise_xor = map(
    _binary_fn, (atan2_p, nextafter_p, and_p, or_p, xor_p))
shift_left, shift_right_arithmetic, shift_right_logical = map(
    _binary_fn, (shift_left_p, shift_right_arithmetic_p, shift_right_logical_p))
eq, ne, lt, le, gt, ge = map(_binary_fn, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))
complex = _binary_fn(complex_p)


def round(x, rounding_method=0):
    """Round to integral values: method 0 rounds halves away from zero, 1 to nearest even.

    Example:
        >>> lax.round(x, rounding_method=1)
    """
    return round_p.bind(x, rounding_method=int(rounding_method))


def integer_pow(x, y):
    """``x ** y`` for a static Python int ``y`` (negative too, for inexact x).

    Example:
        >>> lax.integer_pow(x, 3)
    """
    y = int(y)
    if y < 0 and not dtypes.is_inexact(aval_of(x).dtype):
        raise TypeError(f"lax.integer_pow: integers cannot be raised to a negative power, got "
                        f"{aval_of(x).str_short()} ** {y}; convert the base to a float first")
    return integer_pow_p.bind(x, y=y)


def square(x):
    """``x * x``. Example: ``lax.square(x)``."""
    return integer_pow(x, 2)


def reciprocal(x):
    """``1 / x``. Example: ``lax.reciprocal(x)``."""
    return integer_pow(x, -1)


def convert_element_type(x, new_dtype, weak_type=False):
    """Convert ``x`` to ``new_dtype`` (canonicalized: float64 -> float32 unless x64 is on).

    Example:
        >>> lax.convert_element_type(x, "int32")
    """
    new_dtype = dtypes.canonicalize(new_dtype)
    aval = aval_of(x)
    if aval.dtype == new_dtype and aval.weak_type == weak_type and not isinstance(
            x, PYTHON_SCALARS + (np.ndarray, np.generic)):
        return x
    if isinstance(x, PYTHON_SCALARS + (np.generic,)) or (isinstance(x, np.ndarray)):
        # Host values convert on the host: no device round trip for constants.
        value = np.asarray(x)
        if dtypes.is_complex(value.dtype) and not dtypes.is_complex(new_dtype):
            value = value.real
        return _host_constant(value.astype(new_dtype), weak_type)
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


def _host_constant(value, weak_type):
    if weak_type:
        return convert_element_type_p.bind(value, new_dtype=value.dtype, weak_type=True)
    return value


def select_n(which, *cases):
    """Pick elementwise from ``cases`` by ``which`` (bool: False->cases[0]; int: an index).

    Example:
        >>> lax.select_n(x > 0, -x, x)      # abs
    """
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false``. Example: ``lax.select(p, a, b)``."""
    return select_n_p.bind(pred, on_false, on_true)


def clamp(min, x, max):
    """Clip ``x`` to [min, max] (bounds are scalars or of x's shape).

    Example:
        >>> lax.clamp(0.0, x, 1.0)
    """
    min, max = _match_scalar(min, x), _match_scalar(max, x)
    return clamp_p.bind(min, x, max)


# --- bitcast_convert_type ------------------------------------------------------------------------
bitcast_convert_type_p = Primitive("bitcast_convert_type")


@bitcast_convert_type_p.def_abstract_eval
def _bitcast_abstract(x, new_dtype):
    if np.dtype(new_dtype).itemsize != x.dtype.itemsize:
        raise TypeError(f"lax.bitcast_convert_type: {x.str_short()} and {new_dtype} differ in "
                        f"width; only same-width bitcasts are supported")
    return ShapedArray(x.shape, new_dtype)


bitcast_convert_type_p.def_lowering(
    lambda ctx, x, new_dtype: stablehlo.bitcast_convert(_hlo.ir_type(ctx.avals_out[0]), x))


def bitcast_convert_type(x, new_dtype):
    """Reinterpret the bits of ``x`` as ``new_dtype`` of the same width.

    Example:
        >>> lax.bitcast_convert_type(jnp.float32(1.0), "int32")
    """
    return bitcast_convert_type_p.bind(x, new_dtype=np.dtype(new_dtype))


# --- batching rules ---
# Every primitive of this family is elementwise: operands are aligned on one batch axis (or
# broadcast), scalar selectors/bounds stay scalars when unbatched.
def _def_elementwise_batching():
    from funcgrad.core.batching_util import broadcast_batcher
    for _value in list(globals().values()):
        if isinstance(_value, Primitive) and _value.batch is None:
            _value.def_batch(broadcast_batcher(_value))


_def_elementwise_batching()


# --- jvp and transpose rules ---------------------------------------------------------------------
def _def_elementwise_ad():
    from funcgrad.core.ad_util import (UndefinedPrimal, Zero, add_tangents, defjvp, defjvp_zero,
                                       deflinear, instantiate, is_undefined_primal, tangent_aval)

    def lin_none(ct, *args):
        return [None] * len(args)

    # linear unary ops
    deflinear(neg_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else neg(ct)])
    deflinear(conj_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else conj(ct)])
    deflinear(real_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else
                                     complex(ct, np.zeros((), ct.dtype))])
    deflinear(imag_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else
                                     complex(np.zeros((), ct.dtype), neg(ct))])

    def _complex_t(ct, x, y):
        if type(ct) is Zero:
            return [Zero(x.aval), Zero(y.aval)]
        return [real(ct) if is_undefined_primal(x) else None,
                neg(imag(ct)) if is_undefined_primal(y) else None]
    deflinear(complex_p, _complex_t)

    def _add_t(ct, x, y):
        if type(ct) is Zero:
            return [Zero(x.aval) if is_undefined_primal(x) else None,
                    Zero(y.aval) if is_undefined_primal(y) else None]
        return [ct if is_undefined_primal(x) else None, ct if is_undefined_primal(y) else None]

    def _sub_t(ct, x, y):
        if type(ct) is Zero:
            return _add_t(ct, x, y)
        return [ct if is_undefined_primal(x) else None,
                neg(ct) if is_undefined_primal(y) else None]

    def _add_like_jvp(prim, combine):
        def rule(primals, tangents):
            x, y = primals
            out = prim.bind(x, y)
            tx, ty = tangents
            if type(tx) is Zero:
                if type(ty) is Zero:
                    return out, Zero(tangent_aval(out.aval if hasattr(out, "aval") else
                                                  aval_of(out)))
                return out, ty if prim is add_p else neg(ty)
            if type(ty) is Zero:
                return out, tx
            return out, combine(tx, ty)
        return rule

    add_p.def_jvp(_add_like_jvp(add_p, add))
    add_p.def_transpose(_add_t)
    sub_p.def_jvp(_add_like_jvp(sub_p, sub))
    sub_p.def_transpose(_sub_t)

    def _mul_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        out = mul(x, y)
        t = Zero(tangent_aval(aval_of(out)))
        if type(tx) is not Zero:
            t = mul(tx, y)
        if type(ty) is not Zero:
            t = add_tangents(t, mul(x, ty))
        return out, t

    def _mul_t(ct, x, y):
        if is_undefined_primal(x) and is_undefined_primal(y):
            raise TypeError("transpose of mul: both operands are linear (the product of two "
                            "tangents is not linear)")
        if is_undefined_primal(x):
            return [Zero(x.aval) if type(ct) is Zero else mul(ct, y), None]
        return [None, Zero(y.aval) if type(ct) is Zero else mul(x, ct)]

    mul_p.def_jvp(_mul_jvp)
    mul_p.def_transpose(_mul_t)

    def _div_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        out = div(x, y)
        t = Zero(tangent_aval(aval_of(out)))
        if type(tx) is not Zero:
            t = div(tx, y)
        if type(ty) is not Zero:
            t = add_tangents(t, neg(div(mul(ty, out), y)))
        return out, t

    def _div_t(ct, x, y):
        if is_undefined_primal(y):
            raise TypeError("transpose of div: the divisor is linear (division by a tangent is "
                            "not linear)")
        return [Zero(x.aval) if type(ct) is Zero else div(ct, y), None]

    div_p.def_jvp(_div_jvp)
    div_p.def_transpose(_div_t)

    def _convert_jvp(primals, tangents, new_dtype, weak_type=False):
        (x,), (t,) = primals, tangents
        out = convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=weak_type)
        if type(t) is Zero or not dtypes.is_inexact(new_dtype) or \
                not dtypes.is_inexact(aval_of(x).dtype):
            return out, Zero(tangent_aval(aval_of(out)))
        return out, convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)

    def _convert_t(ct, x, new_dtype, weak_type=False):
        if type(ct) is Zero:
            return [Zero(x.aval)]
        return [convert_element_type_p.bind(ct, new_dtype=x.aval.dtype,
                                            weak_type=x.aval.weak_type)]

    convert_element_type_p.def_jvp(_convert_jvp)
    convert_element_type_p.def_transpose(_convert_t)

    # non-differentiable: zero (float0 for integer/bool outputs) tangents
    for p in (sign_p, floor_p, ceil_p, round_p, is_finite_p, not_p, population_count_p, clz_p,
              nextafter_p, and_p, or_p, xor_p, shift_left_p, shift_right_arithmetic_p,
              shift_right_logical_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p,
              bitcast_convert_type_p):
        defjvp_zero(p)

    # unary math: g * f'(x)
    defjvp(exp_p, lambda g, ans, x: mul(g, ans))
    defjvp(log_p, lambda g, ans, x: div(g, x))
    defjvp(log1p_p, lambda g, ans, x: div(g, add(x, 1.0)))
    defjvp(expm1_p, lambda g, ans, x: mul(g, add(ans, 1.0)))
    defjvp(tanh_p, lambda g, ans, x: mul(g, sub(1.0, mul(ans, ans))))
    defjvp(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(1.0, ans))))
    defjvp(sin_p, lambda g, ans, x: mul(g, cos(x)))
    defjvp(cos_p, lambda g, ans, x: neg(mul(g, sin(x))))
    defjvp(tan_p, lambda g, ans, x: mul(g, add(1.0, mul(ans, ans))))
    defjvp(asin_p, lambda g, ans, x: mul(g, rsqrt(sub(1.0, mul(x, x)))))
    defjvp(acos_p, lambda g, ans, x: neg(mul(g, rsqrt(sub(1.0, mul(x, x))))))
    defjvp(atan_p, lambda g, ans, x: div(g, add(1.0, mul(x, x))))
    defjvp(sinh_p, lambda g, ans, x: mul(g, cosh(x)))
    defjvp(cosh_p, lambda g, ans, x: mul(g, sinh(x)))
    defjvp(asinh_p, lambda g, ans, x: mul(g, rsqrt(add(mul(x, x), 1.0))))
    defjvp(acosh_p, lambda g, ans, x: mul(g, rsqrt(mul(sub(x, 1.0), add(x, 1.0)))))
    defjvp(atanh_p, lambda g, ans, x: div(g, mul(add(1.0, x), sub(1.0, x))))
    defjvp(sqrt_p, lambda g, ans, x: div(mul(g, 0.5), ans))
    defjvp(rsqrt_p, lambda g, ans, x: mul(g, mul(-0.5, div(ans, x))))
    defjvp(cbrt_p, lambda g, ans, x: mul(g, mul(1.0 / 3.0, integer_pow(ans, -2))))

    def _abs_jvp(g, ans, x):
        if dtypes.is_complex(aval_of(x).dtype):
            safe = select(eq(ans, 0.0), full_like_scalar(ans, 1.0), ans)
            return real(div(mul(g, conj(x)), convert_element_type(safe, aval_of(x).dtype)))
        return mul(g, sign(x))
    defjvp(abs_p, _abs_jvp)

    def _integer_pow_jvp(g, ans, x, y):
        if y == 0:
            return Zero(tangent_aval(aval_of(ans)))
        if y == 1:
            return g
        return mul(g, mul(float(y), x if y == 2 else integer_pow(x, y - 1)))
    defjvp(integer_pow_p, _integer_pow_jvp)

    # binary math
    def _pow_jvp_x(g, ans, x, y):
        safe = select(eq(y, 0.0), full_like_scalar(y, 1.0), y)
        jac = mul(y, pow(x, sub(safe, 1.0)))
        return mul(g, select(eq(y, 0.0), full_like_scalar(jac, 0.0), jac))

    def _pow_jvp_y(g, ans, x, y):
        safe_x = select(eq(x, 0.0), full_like_scalar(x, 1.0), x)
        return mul(g, mul(log(safe_x), ans))
    defjvp(pow_p, _pow_jvp_x, _pow_jvp_y)

    def _balanced(x, y, strict):
        dt = aval_of(x).dtype
        return add(convert_element_type(strict(x, y), dt),
                   mul(0.5, convert_element_type(eq(x, y), dt)))
    defjvp(max_p, lambda g, ans, x, y: mul(g, _balanced(x, y, gt)),
           lambda g, ans, x, y: mul(g, _balanced(y, x, gt)))
    defjvp(min_p, lambda g, ans, x, y: mul(g, _balanced(x, y, lt)),
           lambda g, ans, x, y: mul(g, _balanced(y, x, lt)))
    defjvp(rem_p, lambda g, ans, x, y: g,
           lambda g, ans, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))
    defjvp(atan2_p, lambda g, ans, x, y: mul(g, div(y, add(mul(x, x), mul(y, y)))),
           lambda g, ans, x, y: mul(g, div(neg(x), add(mul(x, x), mul(y, y)))))

    # select_n: linear in the cases
    def _select_n_jvp(primals, tangents):
        which, *cases = primals
        out = select_n_p.bind(which, *cases)
        case_ts = tangents[1:]
        if all(type(t) is Zero for t in case_ts) or not dtypes.is_inexact(aval_of(out).dtype):
            return out, Zero(tangent_aval(aval_of(out)))
        return out, select_n_p.bind(which, *[instantiate(t) for t in case_ts])

    def _select_n_t(ct, which, *cases):
        if is_undefined_primal(which):
            raise TypeError("transpose of select_n: the selector cannot be linear")
        if type(ct) is Zero:
            return [None] + [Zero(c.aval) if is_undefined_primal(c) else None for c in cases]
        zeros = full_like_scalar(ct, 0.0)
        res = [None]
        for i, c in enumerate(cases):
            if not is_undefined_primal(c):
                res.append(None)
            elif len(cases) == 1:
                res.append(ct)
            else:
                res.append(select_n_p.bind(which, *[ct if j == i else zeros
                                                    for j in range(len(cases))]))
        return res

    select_n_p.def_jvp(_select_n_jvp)
    select_n_p.def_transpose(_select_n_t)

    def _clamp_jvp(primals, tangents):
        lo, x, hi = primals
        tlo, tx, thi = tangents
        out = clamp_p.bind(lo, x, hi)
        shape = aval_of(x).shape
        zeros = full_like_scalar(out, 0.0)
        t = Zero(tangent_aval(aval_of(out)))

        def bcast(v):
            if aval_of(v).shape != shape:
                from funcgrad.lax.shapes import broadcast_in_dim
                return broadcast_in_dim(v, shape, ())
            return v
        if type(tx) is not Zero:
            t = select(bitwise_and(gt(x, bcast(lo)), lt(x, bcast(hi))), tx, zeros)
        if type(tlo) is not Zero:
            t = add_tangents(t, select(gt(bcast(lo), x), bcast(tlo), zeros))
        if type(thi) is not Zero:
            t = add_tangents(t, select(lt(bcast(hi), x), bcast(thi), zeros))
        return out, t

    clamp_p.def_jvp(_clamp_jvp)
    del lin_none, UndefinedPrimal


def full_like_scalar(x, value):
    """An array shaped and typed like ``x`` filled with ``value`` (for rules)."""
    from funcgrad.lax.shapes import broadcast_in_dim
    aval = aval_of(x)
    v = np.asarray(value, aval.dtype)
    if not aval.shape:
        return v
    return broadcast_in_dim(v, aval.shape, ())


_def_elementwise_ad()
