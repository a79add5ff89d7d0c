"""Special functions against SciPy across dtypes and special values, their derivatives (finite
differences in float64) and vmap."""
import numpy as np
import pytest

import funcgrad
from funcgrad import lax
from funcgrad.test_util import check_grads
from funcgrad.transforms.batching import vmap

sp = pytest.importorskip("scipy.special")

X = np.array([-3.0, -0.5, -0.0, 0.0, 0.3, 1.0, 2.5, 10.0, 30.0, np.inf, -np.inf, np.nan])
POS = np.array([1e-3, 0.3, 1.0, 2.5, 7.0, 30.0, 150.0, np.inf, np.nan])

CASES = [
    (lax.erf, sp.erf, X),
    (lax.erfc, sp.erfc, X),
    (lax.erf_inv, sp.erfinv, np.array([-1.0, -0.9, -0.3, 0.0, 0.2, 0.999, 1.0, 1.5, np.nan])),
    (lax.lgamma, sp.gammaln, np.array([-2.5, -0.5, 1e-3, 0.5, 1.0, 2.0, 7.5, 100.0, np.inf,
                                       np.nan])),
    (lax.digamma, sp.digamma, np.array([-2.5, -0.5, 1e-3, 0.5, 1.0, 2.0, 7.5, 100.0, np.inf,
                                        np.nan])),
    (lax.bessel_i1e, sp.i1e, X),
    (lax.bessel_i0e, sp.i0e, np.concatenate([X, [14.9, 15.0, 15.1, 600.0]])),
]


@pytest.mark.parametrize("fn,ref,xs", CASES, ids=[c[0].__name__ for c in CASES])
def test_special_matches_scipy_f64(fn, ref, xs, x64):
    got = np.asarray(fn(xs))
    np.testing.assert_allclose(got, ref(xs), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("fn,ref,xs", CASES, ids=[c[0].__name__ for c in CASES])
def test_special_matches_scipy_f32_and_jit(fn, ref, xs):
    x32 = xs.astype(np.float32)
    want = ref(x32.astype(np.float64))
    np.testing.assert_allclose(np.asarray(fn(x32)), want, rtol=2e-5, atol=1e-6)
    got = np.asarray(funcgrad.jit(fn)(x32))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)
    assert got.dtype == np.float32


def test_special_float16_and_int_error():
    x = np.array([0.1, 0.5, 1.5], np.float16)
    got = lax.erf(x)
    assert got.dtype == np.float16
    np.testing.assert_allclose(np.asarray(got, np.float32), sp.erf(x.astype(np.float64)),
                               rtol=2e-3)
    with pytest.raises(TypeError, match="lax.erf: expected a floating-point"):
        lax.erf(np.array([1, 2], np.int32))


def test_polygamma_zeta(x64):
    x = np.array([0.5, 1.0, 3.5])
    for n in (0.0, 1.0, 3.0):
        np.testing.assert_allclose(np.asarray(lax.polygamma(n, x)), sp.polygamma(int(n), x),
                                   rtol=1e-9)
    np.testing.assert_allclose(np.asarray(lax.zeta(2.0, x)), sp.zeta(2.0, x), rtol=1e-9)


def test_igamma_matches_scipy(x64):
    a = np.array([0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0])
    x = np.array([0.0, 0.01, 0.7, 1.0, 3.0, 12.0, 25.0, 90.0, 400.0, np.inf])
    A, Xg = np.meshgrid(a, x)
    np.testing.assert_allclose(np.asarray(lax.igamma(A, Xg)), sp.gammainc(A, Xg), atol=1e-12,
                               rtol=1e-9)
    np.testing.assert_allclose(np.asarray(lax.igammac(A, Xg)), sp.gammaincc(A, Xg),
                               atol=1e-12, rtol=1e-9)
    bad = lax.igamma(np.array([-1.0, 1.0, np.nan]), np.array([1.0, -1.0, 1.0]))
    assert np.isnan(np.asarray(bad)).all()


def test_igamma_float32():
    a = np.array([0.5, 2.0, 9.0], np.float32)
    x = np.array([0.3, 2.0, 11.0], np.float32)
    np.testing.assert_allclose(np.asarray(lax.igamma(a, x)), sp.gammainc(a, x), rtol=1e-5)


def test_log_helpers(x64):
    x = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf], [1000.0, 1000.0, -5.0],
                  [np.inf, 1.0, 2.0]])
    want = sp.logsumexp(x, axis=1)
    np.testing.assert_allclose(np.asarray(lax.logsumexp(x, (1,))), want)
    a = np.array([1000.0, -np.inf, 1.0, np.inf, -np.inf])
    b = np.array([1000.0, -np.inf, 2.0, 1.0, 3.0])
    np.testing.assert_allclose(np.asarray(lax.logaddexp(a, b)), np.logaddexp(a, b))
    y = np.log(np.arange(1.0, 6.0))
    np.testing.assert_allclose(np.exp(np.asarray(lax.cumlogsumexp(y))), np.cumsum(np.arange(1, 6)))
    np.testing.assert_allclose(np.exp(np.asarray(lax.cumlogsumexp(y, reverse=True))),
                               np.cumsum(np.arange(1, 6)[::-1])[::-1])
    big = np.array([[-1000.0, 1000.0, -np.inf, 999.0]])
    want = np.logaddexp.accumulate(big, axis=1)
    np.testing.assert_allclose(np.asarray(lax.cumlogsumexp(big, axis=1)), want)


@pytest.mark.parametrize("fn", [lax.erf, lax.erfc, lax.lgamma, lax.digamma, lax.bessel_i1e,
                                lax.bessel_i0e], ids=lambda f: f.__name__)
def test_special_grads(fn):
    check_grads(fn, (np.array([0.3, 1.2, 2.5, 20.0]),), order=2, rtol=1e-4)


def test_special_grads_binary_and_log_helpers():
    check_grads(lax.erf_inv, (np.array([-0.5, 0.1, 0.7]),), order=2)
    check_grads(lax.bessel_i1e, (np.array([0.0, -1.5]),), order=1)
    check_grads(lambda x: lax.polygamma(1.0, x), (np.array([0.5, 2.0]),), order=1)
    check_grads(lambda q: lax.zeta(3.0, q), (np.array([0.5, 2.0]),), order=1)
    with pytest.raises(TypeError, match="zeta.*not supported"):
        check_grads(lambda s: lax.zeta(s, 2.0), (np.array([3.0]),), order=1)


@pytest.mark.parametrize("fn", [lax.igamma, lax.igammac], ids=lambda f: f.__name__)
def test_igamma_grads(fn):
    check_grads(fn, (np.array([0.5, 2.0, 5.0]), np.array([0.7, 1.5, 8.0])), order=1,
                rtol=1e-4)


def test_log_helper_grads():
    v = np.array([0.5, 2.0, -1.0, 3.0])
    check_grads(lax.cumlogsumexp, (v,), order=2)
    check_grads(lambda x: lax.cumlogsumexp(x, reverse=True), (v,), order=1)
    check_grads(lambda x: lax.logsumexp(x, (0,)), (v,), order=2)
    check_grads(lambda x: lax.logaddexp(x, 2 * x), (v,), order=2)


def test_special_vmap(rng):
    xs = rng.uniform(0.1, 3.0, size=(3, 4)).astype(np.float32)
    for fn in (lax.erf, lax.lgamma, lax.bessel_i0e):
        np.testing.assert_allclose(np.asarray(vmap(fn)(xs)), np.asarray(fn(xs)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(vmap(lambda v: lax.cumlogsumexp(v), in_axes=1)(xs)),
                               np.asarray(lax.cumlogsumexp(xs.T, axis=1)), rtol=1e-6)
    got = vmap(lax.igamma, in_axes=(0, None))(xs, np.float32(1.0))
    np.testing.assert_allclose(np.asarray(got), sp.gammainc(xs, 1.0), rtol=1e-5)
