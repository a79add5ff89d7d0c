"""Integer powers, floor division and remainders at the edges: negative exponents and zero
divisors (issue 23). Compared with JAX when it is installed, with NumPy's rules otherwise."""
import numpy as np
import pytest

import funcgrad.numpy as fnp
from funcgrad import jit, lax

INTS = [np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32]


def _jax():
    return pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8])
@pytest.mark.parametrize("spell", ["power", "operator", "lax"])
def test_negative_static_exponent_of_integers_raises(dtype, spell):
    x = fnp.asarray(np.array([1, 2, 3], dtype))
    call = {"power": lambda: fnp.power(x, -1), "operator": lambda: x ** -1,
            "lax": lambda: lax.integer_pow(x, -2)}[spell]
    with pytest.raises(TypeError, match="negative power"):
        call()
    with pytest.raises(TypeError, match="negative power"):
        jit(lambda v: v ** -3)(x)


def test_negative_static_exponent_raises_as_jax_does():
    jnp = _jax()
    with pytest.raises(TypeError):
        jnp.power(jnp.array([1, 2, 3]), -1)
    with pytest.raises(TypeError):
        fnp.power(fnp.array([1, 2, 3]), -1)


def test_negative_static_exponent_of_floats_still_works():
    np.testing.assert_allclose(np.asarray(fnp.asarray([2.0, 4.0]) ** -1), [0.5, 0.25])
    np.testing.assert_array_equal(np.asarray(fnp.asarray([2, 3]) ** 0), [1, 1])


def _reference_power(base, exp, dtype):
    """NumPy's integer power where it is defined (wrapping), the truncated reciprocal for
    negative exponents (1 for 1, +-1 for -1, 0 otherwise)."""
    out = []
    for b, e in zip(base.tolist(), exp.tolist()):
        if e >= 0:
            out.append(np.array(b, dtype) ** np.array(e, dtype))
        elif b == 1:
            out.append(1)
        elif b == -1:
            out.append(-1 if e % 2 else 1)
        else:
            out.append(0)
    return np.array(out).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32])
def test_integer_exponent_arrays(dtype, rng):
    signed = np.issubdtype(dtype, np.signedinteger)
    base = rng.integers(-4 if signed else 0, 5, size=60).astype(dtype)
    exp = rng.integers(-5 if signed else 0, 9, size=60).astype(dtype)
    base[:4] = [1, 0, 1, 2]
    if signed:
        base[4:8], exp[4:8] = [-1, -1, 0, 3], [-3, -2, -1, -1]
    want = _reference_power(base, exp, dtype)
    with np.errstate(over="ignore"):
        got = np.asarray(fnp.power(fnp.asarray(base), fnp.asarray(exp)))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.asarray(jit(fnp.power)(base, exp)), want)
    try:
        import jax.numpy as jnp
    except ImportError:
        return
    keep = exp >= 0         # JAX's values for negative exponents are undefined
    np.testing.assert_array_equal(got[keep], np.asarray(jnp.power(base, exp))[keep])


# JAX 0.10.2's results for a zero divisor (stored so that the test runs without JAX).
_JAX_FLOORDIV_BY_ZERO = {"signed": [-2, -2, -1, -2], "unsigned": "max"}
DIVIDENDS = [5, -5, 0, 7]


def _reference_floor_divide(a, b, dtype):
    out = np.floor_divide(a, np.where(b == 0, 1, b))
    if np.issubdtype(dtype, np.unsignedinteger):
        zero_case = np.full_like(a, np.iinfo(dtype).max)
    else:
        zero_case = np.where(a == 0, -1, -2).astype(dtype)
    return np.where(b == 0, zero_case, out).astype(dtype)


def _reference_remainder(a, b, dtype):
    return np.where(b == 0, 0, np.remainder(a, np.where(b == 0, 1, b))).astype(dtype)


@pytest.mark.parametrize("dtype", INTS)
def test_floor_divide_and_remainder_by_zero(dtype, rng):
    signed = np.issubdtype(dtype, np.signedinteger)
    a = np.array(DIVIDENDS if signed else [5, 0, 7, 1], dtype)
    zero = np.zeros_like(a)
    fa, fz = fnp.asarray(a), fnp.asarray(zero)
    q, r = np.asarray(fa // fz), np.asarray(fa % fz)
    if signed:
        np.testing.assert_array_equal(q, _JAX_FLOORDIV_BY_ZERO["signed"])
    else:
        np.testing.assert_array_equal(q, np.iinfo(dtype).max)
    np.testing.assert_array_equal(r, 0)
    np.testing.assert_array_equal(np.asarray(fnp.fmod(fa, fz)), 0)
    np.testing.assert_array_equal(np.asarray(fa // 0), q)
    np.testing.assert_array_equal(np.asarray(fa % 0), r)
    dq, dr = jit(fnp.divmod)(fa, fz)
    np.testing.assert_array_equal(np.asarray(dq), q)
    np.testing.assert_array_equal(np.asarray(dr), r)
    # mixed: zero and nonzero divisors, every sign combination
    lo = -9 if signed else 0
    x = rng.integers(lo, 10, size=200).astype(dtype)
    y = rng.integers(lo // 3, 4, size=200).astype(dtype)
    np.testing.assert_array_equal(np.asarray(fnp.floor_divide(x, y)),
                                  _reference_floor_divide(x, y, dtype))
    np.testing.assert_array_equal(np.asarray(fnp.remainder(x, y)),
                                  _reference_remainder(x, y, dtype))
    try:
        import jax.numpy as jnp
    except ImportError:
        return
    np.testing.assert_array_equal(np.asarray(fnp.floor_divide(x, y)),
                                  np.asarray(jnp.floor_divide(x, y)))
    np.testing.assert_array_equal(np.asarray(fnp.remainder(x, y)),
                                  np.asarray(jnp.remainder(x, y)))
    np.testing.assert_array_equal(np.asarray(fnp.fmod(x, y)), np.asarray(jnp.fmod(x, y)))
    np.testing.assert_array_equal(q, np.asarray(jnp.asarray(a) // jnp.asarray(zero)))
    np.testing.assert_array_equal(r, np.asarray(jnp.asarray(a) % jnp.asarray(zero)))
