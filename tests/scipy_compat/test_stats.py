"""funcgrad.scipy.stats against scipy.stats (float64), with jit/vmap/grad spot checks."""
import numpy as np
import pytest
import scipy.stats as st

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.scipy import stats

RNG = np.random.default_rng(1)
X = np.linspace(-3.0, 4.0, 9)
POSX = np.linspace(0.05, 6.0, 9)
UNITX = np.linspace(0.01, 0.99, 9)

CONTINUOUS = [
    # (module name, function names, x, args, scipy args)
    ("norm", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"], X, (0.5, 1.7)),
    ("t", ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"], X, (3.5, 0.2, 1.3)),
    ("gamma", ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"], POSX, (2.3, 0.01, 1.5)),
    ("beta", ["logpdf", "pdf", "cdf", "sf", "logcdf", "logsf"], UNITX, (2.5, 0.8)),
]


@pytest.mark.parametrize("dist,fns,x,args", CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
def test_continuous_match_scipy(x64, dist, fns, x, args):
    mod, ref = getattr(stats, dist), getattr(st, dist)
    for fn in fns:
        got = np.asarray(getattr(mod, fn)(jnp.asarray(x), *args))
        np.testing.assert_allclose(got, getattr(ref, fn)(x, *args), rtol=1e-9, atol=1e-14,
                                   err_msg=f"{dist}.{fn}")


def test_norm_quantiles_and_tails(x64):
    q = np.array([1e-20, 0.01, 0.5, 0.9, 1 - 1e-9])
    np.testing.assert_allclose(np.asarray(stats.norm.ppf(q, 1.0, 2.0)), st.norm.ppf(q, 1.0, 2.0),
                               rtol=1e-10)
    np.testing.assert_allclose(np.asarray(stats.norm.isf(q, 1.0, 2.0)), st.norm.isf(q, 1.0, 2.0),
                               rtol=1e-8)
    x = np.array([-40.0, 40.0])
    np.testing.assert_allclose(np.asarray(stats.norm.logcdf(x)), st.norm.logcdf(x), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(stats.norm.logsf(x)), st.norm.logsf(x), rtol=1e-12)
    assert np.isnan(float(stats.norm.logpdf(0.0, 0.0, -1.0)))


def test_support_edges(x64):
    assert float(stats.gamma.logpdf(-1.0, 2.0)) == -np.inf
    assert float(stats.beta.logpdf(1.5, 2.0, 2.0)) == -np.inf
    np.testing.assert_allclose(np.asarray(stats.beta.cdf(jnp.array([-1.0, 2.0]), 2.0, 3.0)),
                               [0.0, 1.0])
    np.testing.assert_allclose(float(stats.gamma.cdf(-1.0, 2.0)), 0.0)


def test_discrete_match_scipy(x64):
    k = np.arange(-1, 9).astype(np.float64)
    for fn in ("logpmf", "pmf", "cdf"):
        np.testing.assert_allclose(np.asarray(getattr(stats.poisson, fn)(k, 2.7)),
                                   getattr(st.poisson, fn)(k, 2.7), rtol=1e-10, atol=1e-300)
        np.testing.assert_allclose(np.asarray(getattr(stats.bernoulli, fn)(k, 0.3)),
                                   getattr(st.bernoulli, fn)(k, 0.3), rtol=1e-12)
    np.testing.assert_allclose(float(stats.poisson.entropy(3.5)), st.poisson.entropy(3.5),
                               rtol=1e-10)
    q = np.array([0.0, 0.5, 0.7, 0.71, 1.0])
    np.testing.assert_array_equal(np.asarray(stats.bernoulli.ppf(q, 0.3)),
                                  st.bernoulli.ppf(q, 0.3))
    np.testing.assert_allclose(float(stats.poisson.pmf(2.5, 1.0)), st.poisson.pmf(2.5, 1.0))


def test_categorical_matches_numpy(x64):
    p = RNG.dirichlet(np.ones(4), size=3)
    k = np.array([0, 3, 2])
    np.testing.assert_allclose(np.asarray(stats.categorical.logpmf(k, p)),
                               np.log(p[np.arange(3), k]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(stats.categorical.pmf(jnp.array([[1], [2]]), p[0])),
                               p[0][[[1], [2]]], rtol=1e-12)
    assert float(stats.categorical.logpmf(4, p[0])) == -np.inf
    # the same as a one-trial multinomial in SciPy
    np.testing.assert_allclose(float(stats.categorical.pmf(1, p[0])),
                               st.multinomial.pmf([0, 1, 0, 0], 1, p[0]), rtol=1e-12)


def test_dirichlet_matches_scipy(x64):
    alpha = np.array([1.5, 2.0, 0.7])
    x = RNG.dirichlet(alpha, size=5).T
    np.testing.assert_allclose(np.asarray(stats.dirichlet.logpdf(x, alpha)),
                               st.dirichlet.logpdf(x, alpha), rtol=1e-10)
    np.testing.assert_allclose(float(stats.dirichlet.pdf(x[:, 0], alpha)),
                               st.dirichlet.pdf(x[:, 0], alpha), rtol=1e-10)
    with pytest.raises(ValueError, match="dirichlet.logpdf: x must have shape"):
        stats.dirichlet.logpdf(jnp.ones(4) / 4, jnp.ones(3))


def test_multivariate_normal_matches_scipy(x64):
    d = 3
    a = RNG.normal(size=(d, d))
    cov = a @ a.T + d * np.eye(d)
    mean = RNG.normal(size=d)
    x = RNG.normal(size=(6, d))
    np.testing.assert_allclose(np.asarray(stats.multivariate_normal.logpdf(x, mean, cov)),
                               st.multivariate_normal.logpdf(x, mean, cov), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(stats.multivariate_normal.pdf(x[0], mean, cov)),
                               st.multivariate_normal.pdf(x[0], mean, cov), rtol=1e-10)
    diag = np.array([0.5, 2.0, 1.5])
    np.testing.assert_allclose(np.asarray(stats.multivariate_normal.logpdf(x, mean, diag)),
                               st.multivariate_normal.logpdf(x, mean, np.diag(diag)), rtol=1e-10)
    with pytest.raises(ValueError, match="does not match the dimension"):
        stats.multivariate_normal.logpdf(x, mean, np.eye(2))


def test_transforms(x64):
    f = funcgrad.jit(funcgrad.vmap(lambda x, s: stats.norm.logpdf(x, 0.0, s)))
    xs, ss_ = np.array([0.1, 0.5]), np.array([1.0, 2.0])
    np.testing.assert_allclose(np.asarray(f(xs, ss_)), st.norm.logpdf(xs, 0.0, ss_), rtol=1e-12)
    # d/dx of the t CDF is its density
    g = funcgrad.grad(lambda x: stats.t.cdf(x, 4.0))(0.7)
    np.testing.assert_allclose(float(g), st.t.pdf(0.7, 4.0), rtol=1e-8)
    g = funcgrad.grad(lambda x: stats.gamma.cdf(x, 2.5))(1.1)
    np.testing.assert_allclose(float(g), st.gamma.pdf(1.1, 2.5), rtol=1e-8)
    cov = np.array([[2.0, 0.3], [0.3, 1.0]])
    gm = funcgrad.grad(lambda m: stats.multivariate_normal.logpdf(jnp.array([0.5, -0.2]), m,
                                                                  cov))(jnp.zeros(2))
    np.testing.assert_allclose(np.asarray(gm), np.linalg.solve(cov, [0.5, -0.2]), rtol=1e-10)
    ga = funcgrad.grad(lambda a: stats.beta.logpdf(0.3, a, 2.0))(1.5)
    eps = 1e-6
    fd = (st.beta.logpdf(0.3, 1.5 + eps, 2.0) - st.beta.logpdf(0.3, 1.5 - eps, 2.0)) / (2 * eps)
    np.testing.assert_allclose(float(ga), fd, rtol=1e-6)
