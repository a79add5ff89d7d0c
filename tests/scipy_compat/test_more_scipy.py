"""The simpler extras of funcgrad.scipy against SciPy (float64): more stats distributions
(uniform, expon, laplace, logistic, cauchy, chi2, geom), special.comb/boxcox/boxcox1p/erfcx and
linalg's structured matrices."""
import numpy as np
import pytest
import scipy.linalg as sl
import scipy.special as ss
import scipy.stats as st

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.scipy import linalg, special, stats

X = np.linspace(-3.0, 6.0, 13)
CASES = [
    ("uniform", ["logpdf", "pdf", "cdf"], X, (0.5, 2.5)),
    ("expon", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, (-0.5, 1.7)),
    ("laplace", ["logpdf", "pdf", "cdf"], X, (0.3, 1.4)),
    ("logistic", ["logpdf", "pdf", "cdf", "sf"], X, (0.3, 1.4)),
    ("cauchy", ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"], X, (0.3, 1.4)),
    ("chi2", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], np.abs(X) + 0.1, (3.5,)),
    ("pareto", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, (2.5, -1.0, 1.5)),
    ("gumbel_r", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, (0.3, 1.4)),
    ("gumbel_l", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, (0.3, 1.4)),
]


@pytest.mark.parametrize("dist,fns,x,args", CASES, ids=[c[0] for c in CASES])
def test_distributions_match_scipy(x64, dist, fns, x, args):
    for fn in fns:
        got = np.asarray(getattr(getattr(stats, dist), fn)(x, *args))
        np.testing.assert_allclose(got, getattr(getattr(st, dist), fn)(x, *args), rtol=1e-10,
                                   atol=1e-14, err_msg=f"{dist}.{fn}")


def test_quantiles_and_geom(x64):
    q = np.array([0.01, 0.3, 0.5, 0.99])
    for dist, args in (("uniform", (1.0, 2.0)), ("expon", (0.5, 2.0)), ("logistic", (0.5, 2.0)),
                       ("cauchy", (0.5, 2.0)), ("pareto", (2.5, 0.0, 1.5)),
                       ("gumbel_r", (0.5, 2.0)), ("gumbel_l", (0.5, 2.0))):
        np.testing.assert_allclose(np.asarray(getattr(stats, dist).ppf(q, *args)),
                                   getattr(st, dist).ppf(q, *args), rtol=1e-10, err_msg=dist)
    for dist in ("logistic", "cauchy"):
        np.testing.assert_allclose(np.asarray(getattr(stats, dist).isf(q)),
                                   getattr(st, dist).isf(q), rtol=1e-10, err_msg=dist)
    k = np.arange(-1, 8).astype(float)
    for fn in ("logpmf", "pmf", "cdf"):
        np.testing.assert_allclose(np.asarray(getattr(stats.geom, fn)(k, 0.35)),
                                   getattr(st.geom, fn)(k, 0.35), rtol=1e-12)
    k = np.arange(-1, 12).astype(float)
    for fn in ("logpmf", "pmf"):
        np.testing.assert_allclose(np.asarray(getattr(stats.binom, fn)(k, 10, 0.3)),
                                   getattr(st.binom, fn)(k, 10, 0.3), rtol=1e-11)
        np.testing.assert_allclose(np.asarray(getattr(stats.nbinom, fn)(k, 3.5, 0.4)),
                                   getattr(st.nbinom, fn)(k, 3.5, 0.4), rtol=1e-11)
    g = funcgrad.grad(lambda x: stats.expon.cdf(x, 0.0, 2.0))(1.3)
    np.testing.assert_allclose(float(g), st.expon.pdf(1.3, 0.0, 2.0), rtol=1e-12)


def test_special_extras(x64):
    n = np.array([5.0, 10.0, 3.0, 2.0, -1.0])
    k = np.array([2.0, 3.0, 4.0, 2.0, 1.0])
    np.testing.assert_allclose(np.asarray(special.comb(n, k)), ss.comb(n, k), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(special.comb(n[:3], k[:3], repetition=True)),
                               ss.comb(n[:3], k[:3], repetition=True), rtol=1e-12)
    x = np.array([1e-9, 0.5, 1.0, 3.0])
    for lm in (0.0, 0.5, -1.5):
        np.testing.assert_allclose(np.asarray(special.boxcox(x, lm)), ss.boxcox(x, lm),
                                   rtol=1e-12)
        np.testing.assert_allclose(np.asarray(special.boxcox1p(x, lm)), ss.boxcox1p(x, lm),
                                   rtol=1e-12)
    z = np.array([-3.0, -0.5, 0.0, 1.0, 5.0, 24.0, 26.0, 40.0, 1e4])
    np.testing.assert_allclose(np.asarray(special.erfcx(z)), ss.erfcx(z), rtol=1e-12)


def test_erfcx_float32():
    z32 = np.array([0.5, 5.0, 7.9, 8.1, 30.0], np.float32)
    np.testing.assert_allclose(np.asarray(special.erfcx(z32)), ss.erfcx(z32.astype(float)),
                               rtol=2e-5)


def test_structured_matrices(x64):
    c, r = np.array([1.0, 2.0, 3.0]), np.array([9.0, 4.0, 5.0, 6.0])
    np.testing.assert_array_equal(np.asarray(linalg.toeplitz(c, r)), sl.toeplitz(c, r))
    cc = np.array([1.0 + 2j, 3.0, 4.0 - 1j])
    np.testing.assert_array_equal(np.asarray(linalg.toeplitz(cc)), sl.toeplitz(cc))
    np.testing.assert_array_equal(np.asarray(linalg.hankel(c, r)), sl.hankel(c, r))
    np.testing.assert_array_equal(np.asarray(linalg.hankel(c)), sl.hankel(c))
    np.testing.assert_array_equal(np.asarray(linalg.circulant(c)), sl.circulant(c))
    np.testing.assert_array_equal(np.asarray(linalg.hadamard(8)), sl.hadamard(8))
    np.testing.assert_allclose(np.asarray(linalg.hilbert(4)), sl.hilbert(4), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(linalg.helmert(5)), sl.helmert(5), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(linalg.helmert(5, full=True)),
                               sl.helmert(5, full=True), rtol=1e-14)
    a = np.array([2.0, -10.0, 31.0, -30.0])
    np.testing.assert_allclose(np.asarray(linalg.companion(a)), sl.companion(a), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(linalg.dft(5, "sqrtn")), sl.dft(5, "sqrtn"),
                               atol=1e-15)
    f, s = np.array([0.1, 2.0, 1.0, 0.1]), np.array([0.2, 0.8, 0.7])
    np.testing.assert_allclose(np.asarray(linalg.leslie(f, s)), sl.leslie(f, s))
    g = funcgrad.grad(lambda v: jnp.sum(linalg.toeplitz(v) ** 2))(jnp.asarray(c))
    np.testing.assert_allclose(np.asarray(g), 2 * c * np.array([3, 4, 2]))
    with pytest.raises(ValueError, match="hadamard: n must be a positive power of 2"):
        linalg.hadamard(6)
    with pytest.raises(ValueError, match="leslie: s must have"):
        linalg.leslie(f, s[:2])
