"""Elementwise primitives: eager == jit == NumPy over a few shapes and dtypes."""
import numpy as np
import pytest

import funcgrad
from funcgrad import lax

from tests.lax.helpers import check, rand

SHAPES = [(), (5,), (2, 3)]
FLOATS = ["float32", "float16", "bfloat16"]


def _tol(dtype):
    return {"float16": 2e-3, "bfloat16": 2e-2}.get(str(np.dtype(dtype)), 2e-6)


UNARY_FLOAT = [
    ("exp", lax.exp, np.exp, None), ("log", lax.log, np.log, "pos"),
    ("log1p", lax.log1p, np.log1p, "pos"), ("expm1", lax.expm1, np.expm1, None),
    ("sin", lax.sin, np.sin, None), ("cos", lax.cos, np.cos, None), ("tan", lax.tan, np.tan, None),
    ("asin", lax.asin, np.arcsin, "unit"), ("acos", lax.acos, np.arccos, "unit"),
    ("atan", lax.atan, np.arctan, None), ("sinh", lax.sinh, np.sinh, None),
    ("cosh", lax.cosh, np.cosh, None), ("tanh", lax.tanh, np.tanh, None),
    ("asinh", lax.asinh, np.arcsinh, None), ("acosh", lax.acosh, np.arccosh, "gt1"),
    ("atanh", lax.atanh, np.arctanh, "unit"),
    ("logistic", lax.logistic, lambda x: 1 / (1 + np.exp(-x)), None),
    ("sqrt", lax.sqrt, np.sqrt, "pos"), ("rsqrt", lax.rsqrt, lambda x: 1 / np.sqrt(x), "pos"),
    ("cbrt", lax.cbrt, np.cbrt, None), ("abs", lax.abs, np.abs, None),
    ("sign", lax.sign, np.sign, None), ("floor", lax.floor, np.floor, None),
    ("ceil", lax.ceil, np.ceil, None), ("neg", lax.neg, np.negative, None),
]


def _domain(x, kind):
    if kind == "pos":
        return np.abs(x) + 0.1
    if kind == "unit":
        return np.tanh(x) * 0.9
    if kind == "gt1":
        return np.abs(x) + 1.1
    return x


@pytest.mark.parametrize("name,fn,ref,domain", UNARY_FLOAT, ids=[u[0] for u in UNARY_FLOAT])
@pytest.mark.parametrize("shape", [(), (2, 3)])
def test_unary_float32(name, fn, ref, domain, shape, rng):
    x = _domain(rand(rng, shape, "float32"), domain).astype(np.float32)
    check(fn, ref, [x], rtol=3e-6 if name not in ("tan", "logistic") else 1e-5)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["exp", "sin", "tanh", "sqrt", "logistic", "floor"])
def test_unary_low_precision(name, dtype, rng):
    _, fn, ref, domain = next(u for u in UNARY_FLOAT if u[0] == name)
    x = _domain(rand(rng, (7,), "float32"), domain).astype(dtype)
    check(fn, lambda a: ref(a.astype(np.float32)).astype(dtype), [x], rtol=_tol(dtype),
          atol=_tol(dtype))


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8"])
def test_integer_unary(dtype, rng):
    x = rand(rng, (6,), dtype)
    check(lax.neg, np.negative, [x])
    check(lax.bitwise_not, np.invert, [x])
    if dtype != "uint8":
        check(lax.abs, np.abs, [x])
        check(lax.sign, np.sign, [x])
    check(lax.population_count, lambda a: np.array(
        [bin(int(v) & ((1 << (8 * a.itemsize)) - 1)).count("1") for v in a.ravel()],
        a.dtype).reshape(a.shape), [x])


def test_complex_unary(rng):
    x = (rand(rng, (4,), "float32") + 1j * rand(rng, (4,), "float32")).astype(np.complex64)
    check(lax.exp, np.exp, [x], rtol=1e-5)
    check(lax.real, np.real, [x])
    check(lax.imag, np.imag, [x])
    check(lax.conj, np.conj, [x])
    check(lax.abs, np.abs, [x], rtol=1e-6)
    check(lax.sqrt, np.sqrt, [x], rtol=1e-5)


BINARY = [
    ("add", lax.add, np.add), ("sub", lax.sub, np.subtract), ("mul", lax.mul, np.multiply),
    ("max", lax.max, np.maximum), ("min", lax.min, np.minimum),
]


@pytest.mark.parametrize("name,fn,ref", BINARY, ids=[b[0] for b in BINARY])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bfloat16"])
def test_binary_arith(name, fn, ref, dtype, rng):
    x, y = rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype)
    check(fn, ref, [x, y], rtol=_tol(dtype))


def test_div_rem_pow(rng):
    x = rand(rng, (2, 3), "float32")
    y = np.abs(rand(rng, (2, 3), "float32")) + 0.5
    check(lax.div, np.divide, [x, y], rtol=1e-6)
    check(lax.rem, np.fmod, [x, y], rtol=1e-6)
    check(lax.pow, np.power, [y, x], rtol=1e-5)
    check(lax.atan2, np.arctan2, [x, y], rtol=1e-6)
    check(lax.nextafter, np.nextafter, [x, y])
    # Integer division truncates towards zero like C (lax semantics), rem keeps the dividend's sign.
    a = np.array([7, -7, 7, -7], np.int32)
    b = np.array([2, 2, -2, -2], np.int32)
    check(lax.div, lambda p, q: (np.trunc(p / q)).astype(np.int32), [a, b])
    check(lax.rem, np.fmod, [a, b])


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_comparisons(dtype, rng):
    x, y = rand(rng, (3, 4), dtype), rand(rng, (3, 4), dtype)
    y.flat[:3] = x.flat[:3]     # some ties
    for fn, ref in ((lax.eq, np.equal), (lax.ne, np.not_equal), (lax.lt, np.less),
                    (lax.le, np.less_equal), (lax.gt, np.greater), (lax.ge, np.greater_equal)):
        check(fn, ref, [x, y])


def test_comparisons_nan_and_unsigned():
    x = np.array([np.nan, 1.0, np.nan], np.float32)
    y = np.array([np.nan, np.nan, 0.0], np.float32)
    for fn, ref in ((lax.eq, np.equal), (lax.ne, np.not_equal), (lax.lt, np.less),
                    (lax.ge, np.greater_equal)):
        check(fn, ref, [x, y])
    a = np.array([0, 200, 255], np.uint8)
    b = np.array([1, 100, 0], np.uint8)
    check(lax.lt, np.less, [a, b])          # unsigned compare, not signed
    check(lax.gt, np.greater, [a, b])


@pytest.mark.parametrize("dtype", ["bool", "int32", "uint8", "int8"])
def test_logical_bitwise(dtype, rng):
    x, y = rand(rng, (5,), dtype), rand(rng, (5,), dtype)
    check(lax.bitwise_and, np.bitwise_and, [x, y])
    check(lax.bitwise_or, np.bitwise_or, [x, y])
    check(lax.bitwise_xor, np.bitwise_xor, [x, y])
    check(lax.bitwise_not, np.invert, [x])


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8"])
def test_shifts(dtype):
    info = np.iinfo(dtype)
    x = np.array([1, 3, info.max, info.min, 5, 17], dtype)
    s = np.array([0, 1, 2, 1, 3, 2], dtype)
    check(lax.shift_left, lambda a, b: np.left_shift(a, b).astype(dtype), [x, s])
    check(lax.shift_right_logical,
          lambda a, b: (a.view(f"u{a.itemsize}") >> b.astype(f"u{a.itemsize}")).view(dtype),
          [x, s])
    if dtype != "uint8":
        check(lax.shift_right_arithmetic, np.right_shift, [x, s])


@pytest.mark.parametrize("y", [0, 1, 2, 3, 5, -1, -2, 7])
def test_integer_pow(y, rng):
    x = np.abs(rand(rng, (2, 3), "float32")) + 0.5
    check(lambda a: lax.integer_pow(a, y), lambda a: np.power(a, float(y)).astype(np.float32),
          [x], rtol=3e-6)


def test_integer_pow_int():
    x = np.array([-3, -1, 0, 2, 5], np.int32)
    check(lambda a: lax.integer_pow(a, 3), lambda a: a ** 3, [x])
    check(lambda a: lax.integer_pow(a, 0), lambda a: np.ones_like(a), [x])


def test_round_methods():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.4, -2.6], np.float32)
    check(lambda a: lax.round(a, 0), lambda a: np.sign(a) * np.floor(np.abs(a) + 0.5), [x])
    check(lambda a: lax.round(a, 1), np.round, [x])


def test_is_finite():
    x = np.array([0.0, np.inf, -np.inf, np.nan, 1e30], np.float32)
    check(lax.is_finite, np.isfinite, [x])
    check(lax.is_finite, np.isfinite, [np.array([0.0, np.inf, np.nan, 6e4], np.float16)])


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_select_n(dtype, rng):
    p = rand(rng, (2, 3), "bool")
    a, b = rand(rng, (2, 3), dtype), rand(rng, (2, 3), dtype)
    check(lax.select_n, lambda w, x, y: np.where(w, y, x), [p, a, b])
    check(lax.select, lambda w, x, y: np.where(w, x, y), [p, a, b])
    which = np.array([[0, 1, 2], [2, 1, 0]], np.int32)
    c = rand(rng, (2, 3), dtype)
    check(lax.select_n, lambda w, x, y, z: np.choose(w, [x, y, z]), [which, a, b, c])
    # scalar predicate
    check(lax.select_n, lambda w, x, y: y if w else x, [np.bool_(True), a, b])
    many = [rand(rng, (4,), dtype) for _ in range(5)]
    w = np.array([4, 0, 3, 1], np.int32)
    check(lax.select_n, lambda w, *cs: np.choose(w, cs), [w, *many])


def test_clamp(rng):
    x = rand(rng, (10,), "float32")
    check(lambda a: lax.clamp(-0.5, a, 0.5), lambda a: np.clip(a, -0.5, 0.5), [x])
    lo, hi = rand(rng, (10,), "float32") - 1, rand(rng, (10,), "float32") + 1
    check(lax.clamp, lambda l, a, h: np.minimum(np.maximum(a, l), h), [lo, x, hi])
    xi = np.arange(-5, 5, dtype=np.int32)
    check(lambda a: lax.clamp(np.int32(-2), a, np.int32(3)), lambda a: np.clip(a, -2, 3), [xi])


CONVERSIONS = [("float32", "int32"), ("float32", "uint8"), ("int32", "float32"),
               ("float32", "bfloat16"), ("float32", "float16"), ("bool", "float32"),
               ("int32", "bool"), ("float32", "bool"), ("int8", "int32"), ("uint8", "int8"),
               ("complex64", "float32")]


@pytest.mark.parametrize("src,dst", CONVERSIONS)
def test_convert_element_type(src, dst, rng):
    x = rand(rng, (7,), src)
    if src.startswith("float") and dst in ("int32", "uint8"):
        x = np.abs(x) * 10     # stay in range (out-of-range conversion is implementation-defined)

    def ref(a):
        if np.iscomplexobj(a):
            a = a.real
        return a.astype(dst)
    check(lambda a: lax.convert_element_type(a, dst), ref, [x])


def test_convert_weak_type():
    x = funcgrad.numpy.ones(3)
    y = lax.convert_element_type(x, "float32", weak_type=True)
    assert y.weak_type and y.dtype == np.float32
    assert (y + np.ones(3, np.float16)).dtype == np.float16   # weak f32 adopts f16
    z = funcgrad.jit(lambda a: lax.convert_element_type(a, "int32"))(x)
    assert z.dtype == np.int32 and not z.weak_type


def test_bitcast_convert_type():
    x = np.array([1.0, -2.0, 0.5], np.float32)
    check(lambda a: lax.bitcast_convert_type(a, "int32"), lambda a: a.view(np.int32), [x])


def test_binary_scalar_operand_weak_typing():
    x = np.ones(3, np.float16)
    out = lax.add(x, 2.0)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(np.asarray(out), np.full(3, 3.0, np.float16))
    out = funcgrad.jit(lambda a: lax.mul(a, 3))(np.arange(3, dtype=np.int8))
    assert out.dtype == np.int8


def test_elementwise_errors():
    with pytest.raises(TypeError, match=r"lax\.add.*f32\[3\].*f32\[4\]"):
        lax.add(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError, match=r"lax\.add.*dtypes must match.*f32\[3\].*i32\[3\]"):
        lax.add(np.ones(3, np.float32), np.ones(3, np.int32))
    with pytest.raises(TypeError, match=r"lax\.exp.*inexact.*i32"):
        lax.exp(np.ones(3, np.int32))
    with pytest.raises(TypeError, match=r"lax\.bitwise_and|lax\.and.*f32"):
        lax.bitwise_and(np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"lax\.select_n"):
        lax.select_n(np.ones(2, bool), np.ones(3, np.float32), np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"lax\.clamp"):
        lax.clamp(np.zeros(2, np.float32), np.ones(3, np.float32), 1.0)
