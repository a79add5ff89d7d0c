"""math_extra: frexp/ldexp/i0/isclose/diff/gradient/convolve/interp/cross/kron... vs NumPy."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

from tests.numpy._helpers import J


def test_frexp_ldexp_roundtrip(rng):
    x = (rng.standard_normal(20) * 10.0 ** rng.integers(-30, 30, 20)).astype(np.float32)
    m, e = jnp.frexp(x)
    em, ee = np.frexp(x)
    np.testing.assert_array_equal(m, em)
    np.testing.assert_array_equal(e, ee)
    np.testing.assert_array_equal(jnp.ldexp(m, e), x)


def test_frexp_subnormal_and_float16():
    x = np.array([1e-40, -3e-42, 6e-8, 65504.0], np.float32)
    m, e = jnp.frexp(x)
    em, ee = np.frexp(x)
    np.testing.assert_array_equal(m, em)
    np.testing.assert_array_equal(e, ee)
    h = np.array([1e-5, 0.3, -7.0, 1e4], np.float16)
    m, e = J(jnp.frexp)(h)
    assert m.dtype == np.float16
    np.testing.assert_array_equal(m, np.frexp(h)[0])
    np.testing.assert_array_equal(e, np.frexp(h)[1])


def test_ldexp_large_exponents():
    x = np.array([1.0, 1.5, 3.0, 1.0, 2.0 ** -100], np.float32)
    k = np.array([127, -126, 200, -200, 227], np.int32)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(J(jnp.ldexp)(x, k), np.ldexp(x, k))
    with pytest.raises(TypeError, match="integer"):
        jnp.ldexp(1.0, 2.0)


def test_i0(x64):
    x = np.array([0.0, 0.3, 1.0, 4.0, 9.9, 14.9, 15.1, 30.0, 100.0, 700.0, -2.0])
    np.testing.assert_allclose(J(jnp.i0)(x), np.i0(x), rtol=1e-13)
    np.testing.assert_allclose(J(jnp.i0)(x.astype(np.float32)), np.i0(x).astype(np.float32),
                               rtol=2e-6)


def test_i0_float32():
    x = np.linspace(-20, 20, 41).astype(np.float32)
    np.testing.assert_allclose(J(jnp.i0)(x), np.i0(x.astype(np.float64)), rtol=3e-6)


def test_logaddexp2_fabs_bitwise_count():
    a = np.array([0.0, 1.0, -np.inf, 50.0], np.float32)
    b = np.array([0.0, 3.0, -np.inf, -50.0], np.float32)
    np.testing.assert_allclose(J(jnp.logaddexp2)(a, b), np.logaddexp2(a, b), rtol=1e-6)
    np.testing.assert_array_equal(jnp.fabs(np.array([-1, 2], np.int32)), np.fabs([-1, 2]))
    x = np.array([0, 7, -1, 255, -128], np.int32)
    out = jnp.bitwise_count(x)
    np.testing.assert_array_equal(out, np.bitwise_count(x))
    assert out.dtype == np.uint8


def test_complex_predicates():
    z = np.array([1 + 0j, 1 + 1e-9j, 2j], np.complex64)
    np.testing.assert_array_equal(jnp.iscomplex(z), np.iscomplex(z))
    np.testing.assert_array_equal(jnp.isreal(z), np.isreal(z))
    np.testing.assert_array_equal(jnp.iscomplex(np.ones(2)), [False, False])
    assert jnp.iscomplexobj(z) and not jnp.iscomplexobj(1.0)
    assert jnp.isrealobj(np.ones(2)) and not jnp.isrealobj(jnp.asarray(z))
    r = jnp.real_if_close(jnp.array([1 + 1e-10j, 2 + 0j], jnp.complex64))
    assert r.dtype == np.float32
    r = jnp.real_if_close(jnp.array([1 + 1e-3j], jnp.complex64))
    assert r.dtype == np.complex64


@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_allclose(equal_nan):
    a = np.array([1.0, np.nan, np.inf, np.inf, 1e-9, 100.0, -np.inf], np.float32)
    b = np.array([1.0 + 1e-7, np.nan, np.inf, -np.inf, 0.0, 100.001, -np.inf], np.float32)
    np.testing.assert_array_equal(J(jnp.isclose, equal_nan=equal_nan)(a, b),
                                  np.isclose(a, b, equal_nan=equal_nan))
    assert bool(jnp.allclose(a[:1], b[:1])) == np.allclose(a[:1], b[:1])
    np.testing.assert_array_equal(jnp.isclose(np.arange(3), np.array([0, 1, 3])),
                                  np.isclose(np.arange(3), np.array([0, 1, 3])))


def test_array_equal_equiv():
    a = jnp.array([1.0, jnp.nan])
    assert not bool(jnp.array_equal(a, a))
    assert bool(jnp.array_equal(a, a, equal_nan=True))
    assert not bool(jnp.array_equal(jnp.ones(2), jnp.ones(3)))
    assert bool(jnp.array_equiv(jnp.ones((2, 3)), 1.0))
    assert not bool(jnp.array_equiv(jnp.ones((2, 3)), jnp.ones(2)))


@pytest.mark.parametrize("n,axis", [(1, -1), (2, 0), (3, 1)])
def test_diff(n, axis, rng):
    x = rng.standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(J(jnp.diff, n=n, axis=axis)(x), np.diff(x, n=n, axis=axis),
                               rtol=1e-5, atol=1e-5)


def test_diff_prepend_append_bool():
    x = np.array([1, 4, 9, 16])
    np.testing.assert_array_equal(jnp.diff(x, prepend=0, append=np.array([20])),
                                  np.diff(x, prepend=0, append=np.array([20])))
    b = np.array([True, False, False, True])
    np.testing.assert_array_equal(jnp.diff(b), np.diff(b))
    np.testing.assert_array_equal(jnp.ediff1d(x, to_begin=np.array([-1, -2]), to_end=99),
                                  np.ediff1d(x, to_begin=[-1, -2], to_end=99))


def test_trapezoid(rng):
    y = rng.standard_normal((3, 7)).astype(np.float32)
    x = np.sort(rng.standard_normal(7)).astype(np.float32)
    np.testing.assert_allclose(J(jnp.trapezoid)(y), np.trapezoid(y), rtol=1e-5)
    np.testing.assert_allclose(J(jnp.trapezoid, dx=0.5, axis=0)(y), np.trapezoid(y, dx=0.5, axis=0),
                               rtol=1e-5)
    np.testing.assert_allclose(J(jnp.trapezoid)(y, x), np.trapezoid(y, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("edge_order", [1, 2])
def test_gradient(edge_order, rng):
    f = rng.standard_normal((6, 5)).astype(np.float32)
    for got, want in zip(J(jnp.gradient, edge_order=edge_order)(f),
                         np.gradient(f, edge_order=edge_order)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    x = np.cumsum(rng.uniform(0.5, 1.5, 6)).astype(np.float32)
    np.testing.assert_allclose(J(jnp.gradient, axis=0, edge_order=edge_order)(f, x),
                               np.gradient(f, x, axis=0, edge_order=edge_order),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(J(jnp.gradient, 2.0, axis=1)(f), np.gradient(f, 2.0, axis=1),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", [(5, 3), (3, 5)])
def test_convolve_correlate(mode, n, m, rng):
    a = rng.standard_normal(n).astype(np.float32)
    v = rng.standard_normal(m).astype(np.float32)
    np.testing.assert_allclose(J(jnp.convolve, mode)(a, v), np.convolve(a, v, mode),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(J(jnp.correlate, mode)(a, v), np.correlate(a, v, mode),
                               rtol=1e-5, atol=1e-5)


def test_correlate_complex_and_int():
    a = np.array([1 + 1j, 2, 3 - 1j], np.complex64)
    v = np.array([0.5j, 1], np.complex64)
    np.testing.assert_allclose(J(jnp.correlate, "full")(a, v), np.correlate(a, v, "full"),
                               rtol=1e-6)
    np.testing.assert_array_equal(jnp.convolve(np.array([1, 2, 3]), np.array([1, 1])),
                                  np.convolve([1, 2, 3], [1, 1]))


def test_interp(rng):
    xp = np.array([0.0, 1.0, 1.0, 3.0, 7.0], np.float32)
    fp = np.array([0.0, 10.0, 20.0, 30.0, -5.0], np.float32)
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 6.0, 7.0, 9.0, np.nan], np.float32)
    np.testing.assert_allclose(J(jnp.interp)(x, xp, fp), np.interp(x, xp, fp), rtol=1e-6)
    np.testing.assert_allclose(J(jnp.interp, left=-1, right=99)(x, xp, fp),
                               np.interp(x, xp, fp, left=-1, right=99), rtol=1e-6)
    xs = rng.uniform(-10, 10, 8).astype(np.float32)
    xq = np.array([0.0, 1.0, 2.0, 3.0], np.float32)
    fq = np.array([5.0, 6.0, 8.0, 0.0], np.float32)
    np.testing.assert_allclose(J(jnp.interp, period=4.0)(xs, xq, fq),
                               np.interp(xs, xq, fq, period=4.0), rtol=1e-5, atol=1e-5)


def test_unwrap():
    p = np.array([0.0, 3.0, 6.5, -1.0, 12.0, 2.0])
    np.testing.assert_allclose(J(jnp.unwrap)(p), np.unwrap(p), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(J(jnp.unwrap, period=4.0)(p), np.unwrap(p, period=4.0), rtol=1e-5,
                               atol=1e-5)


def _cross_ref(a, b):
    """np.cross, with 2-vectors read as 3-vectors in the plane (NumPy 2.5 refuses them): the
    cross product of two 2-vectors is the z component alone."""
    both_2d = a.shape[-1] == 2 and b.shape[-1] == 2
    pad = lambda v: np.concatenate([v, np.zeros(v.shape[:-1] + (1,), v.dtype)], -1) \
        if v.shape[-1] == 2 else v
    out = np.cross(pad(a), pad(b))
    return out[..., 2] if both_2d else out


def test_cross(rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(J(jnp.cross)(a, b), np.cross(a, b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(J(jnp.cross)(a[:, :2], b[:, :2]), _cross_ref(a[:, :2], b[:, :2]),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(J(jnp.cross)(a[:, :2], b), _cross_ref(a[:, :2], b), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(J(jnp.cross, axis=0)(a.T, b.T), np.cross(a.T, b.T, axis=0),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="dimension must be 2 or 3"):
        jnp.cross(jnp.ones(4), jnp.ones(4))


def test_kron_trace():
    a = np.arange(6).reshape(2, 3)
    b = np.array([[1, -1], [2, 0]])
    np.testing.assert_array_equal(J(jnp.kron)(a, b), np.kron(a, b))
    np.testing.assert_array_equal(J(jnp.kron)(np.arange(3), b), np.kron(np.arange(3), b))
    x = np.arange(24).reshape(2, 3, 4)
    np.testing.assert_array_equal(J(jnp.trace, 1, 1, 2)(x), np.trace(x, 1, 1, 2))
    np.testing.assert_array_equal(jnp.trace(np.eye(3)), 3.0)


def test_math_extra_under_jit():
    f = funcgrad.jit(lambda x, y: (jnp.frexp(x)[0], jnp.isclose(x, y), jnp.diff(x),
                                   jnp.convolve(x, y), jnp.interp(x, jnp.sort(y) if hasattr(
                                       jnp, "sort") else y, y), J(jnp.i0)(x)))
    x = np.array([0.5, 1.5, 3.0], np.float32)
    y = np.array([0.0, 1.0, 2.0], np.float32)
    out = f(x, y)
    np.testing.assert_array_equal(out[0], np.frexp(x)[0])
    np.testing.assert_array_equal(out[1], np.isclose(x, y))
    np.testing.assert_allclose(out[3], np.convolve(x, y), rtol=1e-6)
    np.testing.assert_allclose(out[4], np.interp(x, y, y), rtol=1e-6)
    np.testing.assert_allclose(out[5], np.i0(x), rtol=2e-6)
