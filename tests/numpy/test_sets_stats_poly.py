"""Set operations, statistics (cov, corrcoef, bincount, digitize, histograms), polynomials."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

from tests.numpy._helpers import J

A = np.array([5, 1, 3, 3, 9, 1, 7], np.int32)
B = np.array([3, 4, 5, 5, 0], np.int32)


def test_isin_in1d():
    x = A.reshape(7, 1)
    np.testing.assert_array_equal(J(jnp.isin)(x, B), np.isin(x, B))
    np.testing.assert_array_equal(J(jnp.isin, invert=True)(A, B), np.isin(A, B, invert=True))
    np.testing.assert_array_equal(jnp.in1d(x, B), np.isin(x.ravel(), B))
    np.testing.assert_array_equal(jnp.isin(A, np.array([], np.int32)), np.zeros(7, bool))


@pytest.mark.parametrize("name", ["union1d", "intersect1d", "setdiff1d", "setxor1d"])
def test_set_ops_eager_and_sized(name):
    expected = getattr(np, name)(A, B)
    np.testing.assert_array_equal(getattr(jnp, name)(A, B), expected)
    size = len(expected) + 2
    got = funcgrad.jit(lambda a, b: getattr(jnp, name)(a, b, size=size, fill_value=-1))(A, B)
    np.testing.assert_array_equal(got, np.concatenate([expected, [-1, -1]]))
    # the default fill is the smallest value
    got = getattr(jnp, name)(A, B, size=size)
    np.testing.assert_array_equal(got, np.concatenate([expected, [expected.min()] * 2]))
    got = getattr(jnp, name)(A, B, size=1)
    np.testing.assert_array_equal(got, expected[:1])


def test_set_ops_need_size_under_jit():
    with pytest.raises(TypeError, match="size=N"):
        funcgrad.jit(jnp.union1d)(A, B)


def test_intersect1d_return_indices():
    v, ia, ib = jnp.intersect1d(A, B, return_indices=True)
    ev, eia, eib = np.intersect1d(A, B, return_indices=True)
    np.testing.assert_array_equal(v, ev)
    np.testing.assert_array_equal(ia, eia)
    np.testing.assert_array_equal(ib, eib)


def test_cov_corrcoef(rng):
    m = rng.standard_normal((3, 8)).astype(np.float32)
    y = rng.standard_normal(8).astype(np.float32)
    f = J(lambda m, y: (jnp.cov(m), jnp.cov(m, bias=True), jnp.cov(m.T, rowvar=False),
                        jnp.cov(m, y), jnp.cov(m, ddof=2), jnp.corrcoef(m), jnp.cov(y)))
    got = f(m, y)
    want = (np.cov(m), np.cov(m, bias=True), np.cov(m.T, rowvar=False), np.cov(m, y),
            np.cov(m, ddof=2), np.corrcoef(m), np.cov(y))
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_cov_weights(rng):
    m = rng.standard_normal((2, 6)).astype(np.float32)
    fw = np.array([1, 2, 1, 3, 1, 1])
    aw = rng.uniform(0.5, 2, 6).astype(np.float32)
    np.testing.assert_allclose(jnp.cov(m, fweights=fw), np.cov(m, fweights=fw), rtol=1e-4)
    np.testing.assert_allclose(jnp.cov(m, aweights=aw), np.cov(m, aweights=aw), rtol=1e-4)
    np.testing.assert_allclose(jnp.cov(m, fweights=fw, aweights=aw, ddof=0),
                               np.cov(m, fweights=fw, aweights=aw, ddof=0), rtol=1e-4)


def test_bincount():
    x = np.array([0, 1, 1, 3, 2, 1, 7])
    w = np.linspace(0, 1, 7).astype(np.float32)
    np.testing.assert_array_equal(jnp.bincount(x), np.bincount(x))
    np.testing.assert_allclose(jnp.bincount(x, w), np.bincount(x, w), rtol=1e-6)
    np.testing.assert_array_equal(jnp.bincount(x, minlength=10), np.bincount(x, minlength=10))
    got = funcgrad.jit(lambda x: jnp.bincount(x, length=5))(x)
    np.testing.assert_array_equal(got, np.bincount(x)[:5])
    with pytest.raises(TypeError, match="length=N"):
        funcgrad.jit(jnp.bincount)(x)


@pytest.mark.parametrize("right", [False, True])
def test_digitize(right):
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.5, 4.0, 10.0], np.float32)
    inc = np.array([0.0, 1.0, 2.5, 4.0], np.float32)
    np.testing.assert_array_equal(J(jnp.digitize, right=right)(x, inc),
                                  np.digitize(x, inc, right=right))
    np.testing.assert_array_equal(jnp.digitize(x, inc[::-1].copy(), right=right),
                                  np.digitize(x, inc[::-1], right=right))


def test_histograms(rng):
    a = rng.standard_normal(50).astype(np.float32)
    w = rng.uniform(size=50).astype(np.float32)
    f = J(lambda a, w: (jnp.histogram(a, 7), jnp.histogram(a, 5, range=(-1, 1), weights=w),
                        jnp.histogram(a, np.array([-2.0, 0.0, 0.5, 3.0], np.float32),
                                      density=True)))
    got = f(a, w)
    want = (np.histogram(a, 7), np.histogram(a, 5, range=(-1, 1), weights=w),
            np.histogram(a, np.array([-2.0, 0.0, 0.5, 3.0], np.float32), density=True))
    for (gh, ge), (wh, we) in zip(got, want):
        np.testing.assert_allclose(gh, wh, rtol=1e-5)
        np.testing.assert_allclose(ge, we, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jnp.histogram_bin_edges(a, 4), np.histogram_bin_edges(a, 4),
                               rtol=1e-5)
    x, y = a[:25], a[25:]
    H, xe, ye = J(jnp.histogram2d, bins=3)(x, y)
    eH, exe, eye_ = np.histogram2d(x, y, bins=3)
    np.testing.assert_allclose(H, eH)
    np.testing.assert_allclose(xe, exe, rtol=1e-5)
    np.testing.assert_allclose(ye, eye_, rtol=1e-5)
    s = rng.standard_normal((30, 3)).astype(np.float32)
    h, edges = J(jnp.histogramdd, bins=(2, 3, 4))(s)
    eh, eedges = np.histogramdd(s, bins=(2, 3, 4))
    np.testing.assert_allclose(h, eh)


def test_polynomials():
    p = np.array([2.0, -3.0, 0.5, 1.0], np.float32)
    q = np.array([1.0, 4.0], np.float32)
    x = np.linspace(-2, 2, 5).astype(np.float32)
    f = J(lambda p, q, x: (jnp.polyval(p, x), jnp.polyadd(p, q), jnp.polysub(q, p),
                           jnp.polymul(p, q), jnp.polyder(p), jnp.polyder(p, 2), jnp.polyint(p),
                           jnp.polyint(p, 2, k=[1.0, 2.0]), jnp.polydiv(p, q)))
    got = f(p, q, x)
    want = (np.polyval(p, x), np.polyadd(p, q), np.polysub(q, p), np.polymul(p, q),
            np.polyder(p), np.polyder(p, 2), np.polyint(p), np.polyint(p, 2, k=[1.0, 2.0]),
            np.polydiv(p, q))
    for g, w in zip(got[:-1], want[:-1]):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[-1][0], want[-1][0], rtol=1e-5)
    np.testing.assert_allclose(got[-1][1][-1], want[-1][1][-1], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(jnp.poly(np.array([1.0, 2.0, -3.0])), np.poly([1.0, 2.0, -3.0]))


def test_polyfit_roots_with_linalg():
    pytest.importorskip("funcgrad.numpy.linalg")
    from funcgrad.numpy import linalg
    x = np.linspace(0, 1, 10).astype(np.float32)
    y = (3 * x ** 2 - x + 0.5).astype(np.float32)
    if hasattr(linalg, "lstsq"):
        np.testing.assert_allclose(jnp.polyfit(x, y, 2), [3.0, -1.0, 0.5], rtol=1e-3, atol=1e-3)
    if hasattr(linalg, "eigvals"):
        r = np.sort_complex(np.asarray(jnp.roots(np.array([1.0, -3.0, 2.0, 0.0]))))
        np.testing.assert_allclose(r, np.sort_complex(np.roots([1.0, -3.0, 2.0, 0.0])),
                                   atol=1e-5)
