"""Elementwise primitives: arithmetic, math functions, comparisons, logic, select, conversion.

Binary primitives take operands of one shape and one dtype (``funcgrad.numpy`` broadcasts and
promotes before binding). Python scalars given to the ``lax`` functions adopt the other
operand's dtype, as in ``jax.lax``.

Each primitive is followed by its rules (jvp/transpose, batching) and the function that binds
it. Every primitive here batches with ``broadcast_batcher``.
"""
import numpy as np
from jaxlib.mlir.dialects import chlo, stablehlo

from funcgrad.core import array_ops, dtypes
from funcgrad.core.ad_util import (Zero, add_tangents, defjvp, defjvp_zero, deflinear,
                                   instantiate, is_undefined_primal, tangent_aval)
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching_util import broadcast_batcher
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import PYTHON_SCALARS, aval_of
from funcgrad.lax import _hlo
from funcgrad.lax._doc_examples import example_section
from funcgrad.lax import shapes   # a module object: shapes imports this module too

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


# --- the thin lax functions over a primitive -------------------------------------------------
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
        if not ax.shape:
            x = shapes.broadcast_in_dim(x, ay.shape, ())
        elif not ay.shape:
            y = shapes.broadcast_in_dim(y, ax.shape, ())
    return x, y





def _binary_fn(prim):
    def fn(x, y):
        return prim.bind(*binary_operands(x, y))
    fn.__name__ = prim.name
    fn.prim = prim    # lets funcgrad.numpy bind directly when operands already match
    fn.__doc__ = (f"Elementwise ``{prim.name}`` of two arrays of one shape and dtype "
                  f"(scalars broadcast).\n\n{example_section(prim.name)}")
    return fn


def _unary_fn(prim):
    def fn(x):
        return prim.bind(x)
    fn.__name__ = prim.name
    fn.__doc__ = f"Elementwise ``{prim.name}``.\n\n{example_section(prim.name)}"
    return fn


def full_like_scalar(x, value):
    """An array shaped and typed like ``x`` filled with ``value`` (for rules)."""
    aval = aval_of(x)
    v = np.asarray(value, aval.dtype)
    if not aval.shape:
        return v
    return shapes.broadcast_in_dim(v, aval.shape, ())


# --- unary math ------------------------------------------------------------------------------
# linear ones: jvp applies the primitive to the tangent, transpose below
neg_p = unary("neg", stablehlo.negate)
deflinear(neg_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else neg(ct)])
neg_p.def_batch(broadcast_batcher(neg_p))
neg = _unary_fn(neg_p)

# non-differentiable ones (defjvp_zero): zero (float0 for integer/bool outputs) tangents
sign_p = unary("sign", stablehlo.sign)
defjvp_zero(sign_p)
sign_p.def_batch(broadcast_batcher(sign_p))
sign = _unary_fn(sign_p)

floor_p = unary("floor", stablehlo.floor, _FLOAT)
defjvp_zero(floor_p)
floor_p.def_batch(broadcast_batcher(floor_p))
floor = _unary_fn(floor_p)

ceil_p = unary("ceil", stablehlo.ceil, _FLOAT)
defjvp_zero(ceil_p)
ceil_p.def_batch(broadcast_batcher(ceil_p))
ceil = _unary_fn(ceil_p)

is_finite_p = unary("is_finite", stablehlo.is_finite, _FLOAT, _to_bool)
defjvp_zero(is_finite_p)
is_finite_p.def_batch(broadcast_batcher(is_finite_p))
is_finite = _unary_fn(is_finite_p)

# unary math: g * f'(x)
exp_p = unary("exp", stablehlo.exponential, _INEXACT)
defjvp(exp_p, lambda g, ans, x: mul(g, ans))
exp_p.def_batch(broadcast_batcher(exp_p))
exp = _unary_fn(exp_p)

log_p = unary("log", stablehlo.log, _INEXACT)
defjvp(log_p, lambda g, ans, x: div(g, x))
log_p.def_batch(broadcast_batcher(log_p))
log = _unary_fn(log_p)

log1p_p = unary("log1p", stablehlo.log_plus_one, _INEXACT)
defjvp(log1p_p, lambda g, ans, x: div(g, add(x, 1.0)))
log1p_p.def_batch(broadcast_batcher(log1p_p))
log1p = _unary_fn(log1p_p)

expm1_p = unary("expm1", stablehlo.exponential_minus_one, _INEXACT)
defjvp(expm1_p, lambda g, ans, x: mul(g, add(ans, 1.0)))
expm1_p.def_batch(broadcast_batcher(expm1_p))
expm1 = _unary_fn(expm1_p)

tanh_p = unary("tanh", stablehlo.tanh, _INEXACT)
defjvp(tanh_p, lambda g, ans, x: mul(g, sub(1.0, mul(ans, ans))))
tanh_p.def_batch(broadcast_batcher(tanh_p))
tanh = _unary_fn(tanh_p)

logistic_p = unary("logistic", stablehlo.logistic, _INEXACT)
defjvp(logistic_p, lambda g, ans, x: mul(g, mul(ans, sub(1.0, ans))))
logistic_p.def_batch(broadcast_batcher(logistic_p))
logistic = _unary_fn(logistic_p)

sin_p = unary("sin", stablehlo.sine, _INEXACT)
defjvp(sin_p, lambda g, ans, x: mul(g, cos(x)))
sin_p.def_batch(broadcast_batcher(sin_p))
sin = _unary_fn(sin_p)

cos_p = unary("cos", stablehlo.cosine, _INEXACT)
defjvp(cos_p, lambda g, ans, x: neg(mul(g, sin(x))))
cos_p.def_batch(broadcast_batcher(cos_p))
cos = _unary_fn(cos_p)

tan_p = unary("tan", stablehlo.tan, _INEXACT)
defjvp(tan_p, lambda g, ans, x: mul(g, add(1.0, mul(ans, ans))))
tan_p.def_batch(broadcast_batcher(tan_p))
tan = _unary_fn(tan_p)

asin_p = unary("asin", chlo.asin, _INEXACT)
defjvp(asin_p, lambda g, ans, x: mul(g, rsqrt(sub(1.0, mul(x, x)))))
asin_p.def_batch(broadcast_batcher(asin_p))
asin = _unary_fn(asin_p)

acos_p = unary("acos", chlo.acos, _INEXACT)
defjvp(acos_p, lambda g, ans, x: neg(mul(g, rsqrt(sub(1.0, mul(x, x))))))
acos_p.def_batch(broadcast_batcher(acos_p))
acos = _unary_fn(acos_p)

atan_p = unary("atan", chlo.atan, _INEXACT)
defjvp(atan_p, lambda g, ans, x: div(g, add(1.0, mul(x, x))))
atan_p.def_batch(broadcast_batcher(atan_p))
atan = _unary_fn(atan_p)

sinh_p = unary("sinh", chlo.sinh, _INEXACT)
defjvp(sinh_p, lambda g, ans, x: mul(g, cosh(x)))
sinh_p.def_batch(broadcast_batcher(sinh_p))
sinh = _unary_fn(sinh_p)

cosh_p = unary("cosh", chlo.cosh, _INEXACT)
defjvp(cosh_p, lambda g, ans, x: mul(g, sinh(x)))
cosh_p.def_batch(broadcast_batcher(cosh_p))
cosh = _unary_fn(cosh_p)

asinh_p = unary("asinh", chlo.asinh, _INEXACT)
defjvp(asinh_p, lambda g, ans, x: mul(g, rsqrt(add(mul(x, x), 1.0))))
asinh_p.def_batch(broadcast_batcher(asinh_p))
asinh = _unary_fn(asinh_p)

acosh_p = unary("acosh", chlo.acosh, _INEXACT)
defjvp(acosh_p, lambda g, ans, x: mul(g, rsqrt(mul(sub(x, 1.0), add(x, 1.0)))))
acosh_p.def_batch(broadcast_batcher(acosh_p))
acosh = _unary_fn(acosh_p)

atanh_p = unary("atanh", chlo.atanh, _INEXACT)
defjvp(atanh_p, lambda g, ans, x: div(g, mul(add(1.0, x), sub(1.0, x))))
atanh_p.def_batch(broadcast_batcher(atanh_p))
atanh = _unary_fn(atanh_p)

sqrt_p = unary("sqrt", stablehlo.sqrt, _INEXACT)
defjvp(sqrt_p, lambda g, ans, x: div(mul(g, 0.5), ans))
sqrt_p.def_batch(broadcast_batcher(sqrt_p))
sqrt = _unary_fn(sqrt_p)

rsqrt_p = unary("rsqrt", stablehlo.rsqrt, _INEXACT)
defjvp(rsqrt_p, lambda g, ans, x: mul(g, mul(-0.5, div(ans, x))))
rsqrt_p.def_batch(broadcast_batcher(rsqrt_p))
rsqrt = _unary_fn(rsqrt_p)

cbrt_p = unary("cbrt", stablehlo.cbrt, _FLOAT)
defjvp(cbrt_p, lambda g, ans, x: mul(g, mul(1.0 / 3.0, integer_pow(ans, -2))))
cbrt_p.def_batch(broadcast_batcher(cbrt_p))
cbrt = _unary_fn(cbrt_p)

not_p = unary("not", stablehlo.not_, _INT_BOOL)
defjvp_zero(not_p)
not_p.def_batch(broadcast_batcher(not_p))
bitwise_not = _unary_fn(not_p)

population_count_p = unary("population_count", stablehlo.popcnt, _INT)
defjvp_zero(population_count_p)
population_count_p.def_batch(broadcast_batcher(population_count_p))
population_count = _unary_fn(population_count_p)

clz_p = unary("clz", stablehlo.count_leading_zeros, _INT)
defjvp_zero(clz_p)
clz_p.def_batch(broadcast_batcher(clz_p))
clz = _unary_fn(clz_p)

real_p = unary("real", stablehlo.real, _COMPLEX, dtypes.real_dtype)
deflinear(real_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else
                                 complex(ct, np.zeros((), ct.dtype))])
real_p.def_batch(broadcast_batcher(real_p))
real = _unary_fn(real_p)

imag_p = unary("imag", stablehlo.imag, _COMPLEX, dtypes.real_dtype)
deflinear(imag_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else
                                 complex(np.zeros((), ct.dtype), neg(ct))])
imag_p.def_batch(broadcast_batcher(imag_p))
imag = _unary_fn(imag_p)

conj_p = unary("conj", chlo.conj, _COMPLEX)
deflinear(conj_p, lambda ct, x: [Zero(x.aval) if type(ct) is Zero else conj(ct)])
conj_p.def_batch(broadcast_batcher(conj_p))
conj = _unary_fn(conj_p)

abs_p = unary("abs", stablehlo.abs, _NUM, dtypes.real_dtype)


def _abs_jvp(g, ans, x):
    if dtypes.is_complex(aval_of(x).dtype):
        safe = select(eq(ans, 0.0), full_like_scalar(ans, 1.0), ans)
        return real(div(mul(g, conj(x)), convert_element_type(safe, aval_of(x).dtype)))
    return mul(g, sign(x))


defjvp(abs_p, _abs_jvp)
abs_p.def_batch(broadcast_batcher(abs_p))
abs = _unary_fn(abs_p)

# round: rounding_method 0 = away from zero (lax default), 1 = to nearest even (NumPy's)
round_p = unary("round", None, _FLOAT)
round_p.def_lowering(lambda ctx, x, rounding_method=0:
                     stablehlo.round_nearest_even(x) if rounding_method == 1
                     else stablehlo.round_nearest_afz(x))
defjvp_zero(round_p)
round_p.def_batch(broadcast_batcher(round_p))


def round(x, rounding_method=0):
    """Round to integral values: method 0 rounds halves away from zero, 1 to nearest even.

    Example:
        >>> x = jnp.array([-1.5, 0.5, 2.5])
        >>> lax.round(x), lax.round(x, rounding_method=1)
        (Array([-2.,  1.,  3.], dtype=float32), Array([-2.,  0.,  2.], dtype=float32))
    """
    return round_p.bind(x, rounding_method=int(rounding_method))


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


def _integer_pow_jvp(g, ans, x, y):
    if y == 0:
        return Zero(tangent_aval(aval_of(ans)))
    if y == 1:
        return g
    return mul(g, mul(float(y), x if y == 2 else integer_pow(x, y - 1)))


defjvp(integer_pow_p, _integer_pow_jvp)
integer_pow_p.def_batch(broadcast_batcher(integer_pow_p))


def integer_pow(x, y):
    """``x ** y`` for a static Python int ``y`` (negative too, for inexact x).

    Example:
        >>> lax.integer_pow(jnp.array([2.0, -1.0]), 3)
        Array([ 8., -1.], dtype=float32)
        >>> lax.integer_pow(jnp.array([2.0, 4.0]), -1)
        Array([0.5 , 0.25], dtype=float32)
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


# convert_element_type: to new_dtype, weak_type says whether the result is weakly typed.
convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_abstract(x, new_dtype, weak_type=False):
    return ShapedArray(x.shape, new_dtype, weak_type)


convert_element_type_p.def_lowering(
    lambda ctx, x, new_dtype, weak_type=False: _hlo.convert(x, ctx.avals_in[0], new_dtype))


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
convert_element_type_p.def_batch(broadcast_batcher(convert_element_type_p))


def convert_element_type(x, new_dtype, weak_type=False):
    """Convert ``x`` to ``new_dtype`` (canonicalized: float64 -> float32 unless x64 is on).

    Example:
        >>> lax.convert_element_type(jnp.array([1.7, -2.5]), "int32")
        Array([ 1, -2], dtype=int32)
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


# --- binary ------------------------------------------------------------------------------
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


def _add_like_jvp(prim):
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
        return out, (add if prim is add_p else sub)(tx, ty)
    return rule


add_p = binary("add", stablehlo.add, _ANY)
add_p.def_jvp(_add_like_jvp(add_p))
add_p.def_transpose(_add_t)
add_p.def_batch(broadcast_batcher(add_p))
add = _binary_fn(add_p)

sub_p = binary("sub", stablehlo.subtract)
sub_p.def_jvp(_add_like_jvp(sub_p))
sub_p.def_transpose(_sub_t)
sub_p.def_batch(broadcast_batcher(sub_p))
sub = _binary_fn(sub_p)

mul_p = binary("mul", stablehlo.multiply, _ANY)


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
mul_p.def_batch(broadcast_batcher(mul_p))
mul = _binary_fn(mul_p)

div_p = binary("div", stablehlo.divide)


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
div_p.def_batch(broadcast_batcher(div_p))
div = _binary_fn(div_p)

rem_p = binary("rem", stablehlo.remainder)
defjvp(rem_p, lambda g, ans, x, y: g,
       lambda g, ans, x, y: mul(neg(g), mul(sign(div(x, y)), floor(abs(div(x, y))))))
rem_p.def_batch(broadcast_batcher(rem_p))
rem = _binary_fn(rem_p)

pow_p = binary("pow", stablehlo.power, _INEXACT)


def _pow_jvp_x(g, ans, x, y):
    safe = select(eq(y, 0.0), full_like_scalar(y, 1.0), y)
    jac = mul(y, pow(x, sub(safe, 1.0)))
    return mul(g, select(eq(y, 0.0), full_like_scalar(jac, 0.0), jac))


def _pow_jvp_y(g, ans, x, y):
    safe_x = select(eq(x, 0.0), full_like_scalar(x, 1.0), x)
    return mul(g, mul(log(safe_x), ans))


defjvp(pow_p, _pow_jvp_x, _pow_jvp_y)
pow_p.def_batch(broadcast_batcher(pow_p))
pow = _binary_fn(pow_p)


def _balanced(x, y, strict):
    dt = aval_of(x).dtype
    return add(convert_element_type(strict(x, y), dt),
               mul(0.5, convert_element_type(eq(x, y), dt)))


max_p = binary("max", stablehlo.maximum, _ANY)
defjvp(max_p, lambda g, ans, x, y: mul(g, _balanced(x, y, gt)),
       lambda g, ans, x, y: mul(g, _balanced(y, x, gt)))
max_p.def_batch(broadcast_batcher(max_p))
max = _binary_fn(max_p)

min_p = binary("min", stablehlo.minimum, _ANY)
defjvp(min_p, lambda g, ans, x, y: mul(g, _balanced(x, y, lt)),
       lambda g, ans, x, y: mul(g, _balanced(y, x, lt)))
min_p.def_batch(broadcast_batcher(min_p))
min = _binary_fn(min_p)

atan2_p = binary("atan2", stablehlo.atan2, _FLOAT)
defjvp(atan2_p, lambda g, ans, x, y: mul(g, div(y, add(mul(x, x), mul(y, y)))),
       lambda g, ans, x, y: mul(g, div(neg(x), add(mul(x, x), mul(y, y)))))
atan2_p.def_batch(broadcast_batcher(atan2_p))
atan2 = _binary_fn(atan2_p)

nextafter_p = binary("nextafter", chlo.next_after, _FLOAT)
defjvp_zero(nextafter_p)
nextafter_p.def_batch(broadcast_batcher(nextafter_p))
nextafter = _binary_fn(nextafter_p)

and_p = binary("and", stablehlo.and_, _INT_BOOL)
defjvp_zero(and_p)
and_p.def_batch(broadcast_batcher(and_p))
bitwise_and = _binary_fn(and_p)

or_p = binary("or", stablehlo.or_, _INT_BOOL)
defjvp_zero(or_p)
or_p.def_batch(broadcast_batcher(or_p))
bitwise_or = _binary_fn(or_p)

xor_p = binary("xor", stablehlo.xor, _INT_BOOL)
defjvp_zero(xor_p)
xor_p.def_batch(broadcast_batcher(xor_p))
bitwise_xor = _binary_fn(xor_p)

shift_left_p = binary("shift_left", stablehlo.shift_left, _INT)
defjvp_zero(shift_left_p)
shift_left_p.def_batch(broadcast_batcher(shift_left_p))
shift_left = _binary_fn(shift_left_p)

shift_right_arithmetic_p = binary("shift_right_arithmetic", stablehlo.shift_right_arithmetic,
                                  _INT)
defjvp_zero(shift_right_arithmetic_p)
shift_right_arithmetic_p.def_batch(broadcast_batcher(shift_right_arithmetic_p))
shift_right_arithmetic = _binary_fn(shift_right_arithmetic_p)

shift_right_logical_p = binary("shift_right_logical", stablehlo.shift_right_logical, _INT)
defjvp_zero(shift_right_logical_p)
shift_right_logical_p.def_batch(broadcast_batcher(shift_right_logical_p))
shift_right_logical = _binary_fn(shift_right_logical_p)

complex_p = binary("complex", stablehlo.complex, _FLOAT, dtypes.complex_dtype)


def _complex_t(ct, x, y):
    if type(ct) is Zero:
        return [Zero(x.aval), Zero(y.aval)]
    return [real(ct) if is_undefined_primal(x) else None,
            neg(imag(ct)) if is_undefined_primal(y) else None]


deflinear(complex_p, _complex_t)
complex_p.def_batch(broadcast_batcher(complex_p))
complex = _binary_fn(complex_p)


# --- comparisons: non-differentiable, bool results ------------------------------------------
def _comparison(name, direction):
    prim = binary(name, None, _ANY, _to_bool)
    prim.def_lowering(lambda ctx, x, y: _hlo.compare(x, y, direction, ctx.avals_in[0].dtype))
    return prim


eq_p = _comparison("eq", "EQ")
defjvp_zero(eq_p)
eq_p.def_batch(broadcast_batcher(eq_p))
eq = _binary_fn(eq_p)

ne_p = _comparison("ne", "NE")
defjvp_zero(ne_p)
ne_p.def_batch(broadcast_batcher(ne_p))
ne = _binary_fn(ne_p)

lt_p = _comparison("lt", "LT")
defjvp_zero(lt_p)
lt_p.def_batch(broadcast_batcher(lt_p))
lt = _binary_fn(lt_p)

le_p = _comparison("le", "LE")
defjvp_zero(le_p)
le_p.def_batch(broadcast_batcher(le_p))
le = _binary_fn(le_p)

gt_p = _comparison("gt", "GT")
defjvp_zero(gt_p)
gt_p.def_batch(broadcast_batcher(gt_p))
gt = _binary_fn(gt_p)

ge_p = _comparison("ge", "GE")
defjvp_zero(ge_p)
ge_p.def_batch(broadcast_batcher(ge_p))
ge = _binary_fn(ge_p)

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
# a scalar selector stays a scalar when unbatched
select_n_p.def_batch(broadcast_batcher(select_n_p))


def select_n(which, *cases):
    """Pick elementwise from ``cases`` by ``which`` (bool: False->cases[0]; int: an index).

    Example:
        >>> x = jnp.array([-2.0, 0.5, 3.0])
        >>> lax.select_n(x > 0, -x, x)      # abs
        Array([2. , 0.5, 3. ], dtype=float32)
    """
    return select_n_p.bind(which, *cases)


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` else ``on_false``. Example: ``lax.select(p, a, b)``."""
    return select_n_p.bind(pred, on_false, on_true)


clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_abstract(lo, x, hi):
    for bound, which in ((lo, "min"), (hi, "max")):
        if bound.dtype != x.dtype or bound.shape not in ((), x.shape):
            raise TypeError(f"lax.clamp: {which} {bound.str_short()} must be a scalar or match "
                            f"the operand {x.str_short()} in shape and dtype")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


clamp_p.def_lowering(lambda ctx, lo, x, hi: stablehlo.clamp(lo, x, hi))


def _clamp_jvp(primals, tangents):
    lo, x, hi = primals
    tlo, tx, thi = tangents
    out = clamp_p.bind(lo, x, hi)
    shape = aval_of(x).shape
    zeros = full_like_scalar(out, 0.0)
    t = Zero(tangent_aval(aval_of(out)))

    def bcast(v):
        if aval_of(v).shape != shape:
            return shapes.broadcast_in_dim(v, shape, ())
        return v
    if type(tx) is not Zero:
        t = select(bitwise_and(gt(x, bcast(lo)), lt(x, bcast(hi))), tx, zeros)
    if type(tlo) is not Zero:
        t = add_tangents(t, select(gt(bcast(lo), x), bcast(tlo), zeros))
    if type(thi) is not Zero:
        t = add_tangents(t, select(lt(bcast(hi), x), bcast(thi), zeros))
    return out, t


clamp_p.def_jvp(_clamp_jvp)
# scalar bounds stay scalars when unbatched
clamp_p.def_batch(broadcast_batcher(clamp_p))


def clamp(min, x, max):
    """Clip ``x`` to [min, max] (bounds are scalars or of x's shape).

    Example:
        >>> lax.clamp(0.0, jnp.array([-2.0, 0.5, 3.0]), 1.0)
        Array([0. , 0.5, 1. ], dtype=float32)
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
defjvp_zero(bitcast_convert_type_p)
bitcast_convert_type_p.def_batch(broadcast_batcher(bitcast_convert_type_p))


def bitcast_convert_type(x, new_dtype):
    """Reinterpret the bits of ``x`` as ``new_dtype`` of the same width.

    Example:
        >>> lax.bitcast_convert_type(jnp.float32(1.0), "int32")
        Array(1065353216, dtype=int32)
    """
    return bitcast_convert_type_p.bind(x, new_dtype=np.dtype(new_dtype))


# --- what core's machinery applies without naming a primitive (core/array_ops.py) -------------
array_ops.register(add=lambda a, b: add_p.bind(a, b), convert_element_type=convert_element_type)
