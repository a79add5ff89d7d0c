"""funcgrad.random: known-answer cipher vectors, reproducibility, independence, statistics
(moments and Kolmogorov-Smirnov tests against SciPy), and composition with jit/vmap/grad."""
import numpy as np
import pytest
import scipy.stats as st

import funcgrad
import funcgrad.numpy as jnp
import funcgrad.random as random

N = 20000


def _np(x):
    return np.asarray(x)


def test_threefry_known_answers():
    # Random123's threefry2x32_20 known-answer vectors.
    cases = [((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
             ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
             ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    for k, x, want in cases:
        y0, y1 = random.threefry2x32(jnp.asarray(np.array(k, np.uint32)),
                                     np.array([x[0]], np.uint32), np.array([x[1]], np.uint32))
        assert (int(_np(y0)[0]), int(_np(y1)[0])) == want


def test_key_and_split():
    k = random.key(0)
    assert k.dtype == np.uint32 and k.shape == (2,)
    np.testing.assert_array_equal(_np(random.key(5)), [0, 5])
    # as JAX: without 64-bit types the seed is taken modulo 2**32
    np.testing.assert_array_equal(_np(random.PRNGKey(2**32 + 7)), [0, 7])
    with funcgrad.config.override("enable_x64", True):
        np.testing.assert_array_equal(_np(random.PRNGKey(2**32 + 7)), [1, 7])
        np.testing.assert_array_equal(_np(random.PRNGKey(-1)), [2**32 - 1, 2**32 - 1])
    s = _np(random.split(k, 3))
    assert s.shape == (3, 2) and len({tuple(r) for r in s}) == 3
    np.testing.assert_array_equal(_np(random.split(k)), _np(random.split(k)))
    assert not np.array_equal(_np(random.fold_in(k, 1)), _np(random.fold_in(k, 2)))
    with pytest.raises(TypeError, match="random.split"):
        random.split(jnp.zeros((3,), "uint32"))


def test_reproducible_eager_equals_jit():
    k = random.key(123)
    a = _np(random.normal(k, (7,)))
    np.testing.assert_array_equal(a, _np(random.normal(k, (7,))))
    np.testing.assert_array_equal(a, _np(funcgrad.jit(lambda kk: random.normal(kk, (7,)))(k)))
    u = funcgrad.jit(random.uniform, static_argnums=(1,))(k, (3, 2))
    np.testing.assert_array_equal(_np(u), _np(random.uniform(k, (3, 2))))


def test_split_keys_independent():
    k1, k2 = random.split(random.key(1))
    a = _np(random.normal(k1, (N,)))
    b = _np(random.normal(k2, (N,)))
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.03
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 0.03


def test_vmap_over_keys_matches_loop():
    keys = random.split(random.key(3), 4)
    out = _np(funcgrad.vmap(lambda k: random.uniform(k, (5,)))(keys))
    for i in range(4):
        np.testing.assert_array_equal(out[i], _np(random.uniform(keys[i], (5,))))
    outn = _np(funcgrad.vmap(lambda k: random.normal(k, (3,)))(keys))
    np.testing.assert_allclose(outn[2], _np(random.normal(keys[2], (3,))), rtol=1e-6)


def test_bits():
    b = _np(random.bits(random.key(0), (N,)))
    assert b.dtype == np.uint32
    assert abs(b.mean() / 2**32 - 0.5) < 0.01
    b8 = _np(random.bits(random.key(0), (N,), "uint8"))
    assert b8.dtype == np.uint8 and b8.max() > 250


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_uniform(dtype):
    u = _np(random.uniform(random.key(0), (N,), dtype, minval=-2.0, maxval=3.0))
    assert str(u.dtype) == dtype
    u = u.astype(np.float64)
    assert u.min() >= -2.0 and u.max() < 3.0 + 1e-6
    assert st.kstest(u, st.uniform(-2, 5).cdf).pvalue > 1e-3


def test_uniform_float64(x64):
    u = _np(random.uniform(random.key(0), (N,), "float64"))
    assert u.dtype == np.float64 and 0 <= u.min() and u.max() < 1
    assert len(np.unique(u)) == N
    assert st.kstest(u, "uniform").pvalue > 1e-3


def test_normal():
    z = _np(random.normal(random.key(0), (N,)))
    assert abs(z.mean()) < 0.03 and abs(z.std() - 1) < 0.03
    assert st.kstest(z, "norm").pvalue > 1e-3
    z = _np(random.normal(random.key(0), (2, 3), loc=5.0, scale=0.1))
    assert z.shape == (2, 3) and abs(z.mean() - 5) < 0.2


def test_truncated_normal():
    z = _np(random.truncated_normal(random.key(0), -1.0, 2.0, (N,)))
    assert z.min() > -1 and z.max() < 2
    assert st.kstest(z, st.truncnorm(-1, 2).cdf).pvalue > 1e-3


def test_discrete():
    k = random.key(7)
    b = _np(random.bernoulli(k, 0.3, (N,)))
    assert b.dtype == bool and abs(b.mean() - 0.3) < 0.02
    r = _np(random.randint(k, (N,), 3, 9))
    assert r.min() == 3 and r.max() == 8
    assert st.chisquare(np.bincount(r - 3)).pvalue > 1e-3
    r2 = _np(random.randint(k, (2, 3), jnp.array([0, 10, 100]), 105))
    assert (r2 >= np.array([0, 10, 100])).all() and (r2 < 105).all()
    c = _np(random.categorical(k, jnp.log(jnp.array([0.2, 0.3, 0.5])), shape=(N,)))
    np.testing.assert_allclose(np.bincount(c) / N, [0.2, 0.3, 0.5], atol=0.02)
    c2 = _np(random.categorical(k, jnp.array([[0.0, 10.0], [10.0, 0.0]]), axis=-1))
    np.testing.assert_array_equal(c2, [1, 0])


def test_permutation_and_choice():
    k = random.key(11)
    p = _np(random.permutation(k, 50))
    np.testing.assert_array_equal(np.sort(p), np.arange(50))
    assert not np.array_equal(p, np.arange(50))
    x = np.arange(12).reshape(3, 4)
    px = _np(random.permutation(k, x, axis=1))
    np.testing.assert_array_equal(np.sort(px, axis=1), x)
    pi = _np(random.permutation(k, np.tile(np.arange(20), (4, 1)), axis=1, independent=True))
    assert all(sorted(row) == list(range(20)) for row in pi)
    c = _np(random.choice(k, 10, (6,), replace=False))
    assert len(set(c)) == 6 and c.max() < 10
    cp = _np(random.choice(k, 3, (N,), p=jnp.array([0.1, 0.1, 0.8])))
    np.testing.assert_allclose(np.bincount(cp, minlength=3) / N, [0.1, 0.1, 0.8], atol=0.02)
    cnr = _np(random.choice(k, 5, (3,), replace=False, p=jnp.array([.1, .1, .1, .1, .6])))
    assert len(set(cnr)) == 3
    ca = _np(random.choice(k, jnp.array([10.0, 20.0, 30.0]), (2, 2)))
    assert ca.shape == (2, 2) and set(ca.ravel()) <= {10.0, 20.0, 30.0}
    with pytest.raises(ValueError, match="without replacement"):
        random.choice(k, 3, (4,), replace=False)


@pytest.mark.parametrize("a", [0.3, 1.0, 4.5])
def test_gamma(a):
    g = _np(random.gamma(random.key(2), a, (N,)))
    assert g.min() > 0
    assert st.kstest(g, st.gamma(a).cdf).pvalue > 1e-3


def test_beta_dirichlet():
    k = random.key(5)
    b = _np(random.beta(k, 2.0, 5.0, (N,)))
    assert st.kstest(b, st.beta(2, 5).cdf).pvalue > 1e-3
    d = _np(random.dirichlet(k, jnp.array([1.0, 2.0, 3.0]), (N,)))
    assert d.shape == (N, 3)
    np.testing.assert_allclose(d.sum(-1), 1, rtol=1e-5)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)


@pytest.mark.parametrize("name,dist", [("exponential", st.expon), ("laplace", st.laplace),
                                       ("logistic", st.logistic),
                                       ("gumbel", st.gumbel_r), ("cauchy", st.cauchy)])
def test_simple_continuous(name, dist):
    x = _np(getattr(random, name)(random.key(9), (N,)))
    assert np.isfinite(x).all()
    assert st.kstest(x, dist.cdf).pvalue > 1e-3


def test_poisson():
    for lam in (0.7, 4.0, 30.0):
        x = _np(random.poisson(random.key(4), lam, (N,)))
        assert abs(x.mean() - lam) < 0.05 * lam + 0.03
        assert abs(x.var() - lam) < 0.1 * lam + 0.05


def test_multivariate_normal():
    cov = np.array([[2.0, 0.6], [0.6, 1.0]], np.float32)
    mean = np.array([1.0, -1.0], np.float32)
    for method in ("cholesky", "eigh", "svd"):
        x = _np(random.multivariate_normal(random.key(0), mean, cov, (N,), method=method))
        assert x.shape == (N, 2)
        np.testing.assert_allclose(x.mean(0), mean, atol=0.05)
        np.testing.assert_allclose(np.cov(x.T), cov, atol=0.08)


def test_grad_through_samples():
    from funcgrad.transforms.ad import grad
    k = random.key(0)
    z = _np(random.normal(k, (5,)))
    g = grad(lambda mu, s: jnp.sum(random.normal(k, (5,), loc=mu, scale=s)), argnums=(0, 1))
    gmu, gs = g(1.0, 2.0)
    np.testing.assert_allclose(float(gmu), 5.0, rtol=1e-6)
    np.testing.assert_allclose(float(gs), z.sum(), rtol=1e-5)
    u = _np(random.uniform(k, (4,)))
    gmax = grad(lambda hi: jnp.sum(random.uniform(k, (4,), minval=0.0, maxval=hi)))(3.0)
    np.testing.assert_allclose(float(gmax), u.sum(), rtol=1e-5)
    cov = jnp.array([[2.0, 0.5], [0.5, 1.0]])
    gm = grad(lambda m: jnp.sum(random.multivariate_normal(k, m, cov, (3,))))(jnp.zeros(2))
    np.testing.assert_allclose(_np(gm), [3.0, 3.0], rtol=1e-6)


@pytest.mark.parametrize("a", [0.5, 3.0])
def test_gamma_implicit_gradient(a):
    # d sample / d a at a fixed quantile of the Gamma CDF, against SciPy's ppf
    from funcgrad.transforms.ad import grad
    k = random.key(0)
    g = float(grad(lambda aa: jnp.sum(random.gamma(k, aa, (4,))))(jnp.asarray(a, "float32")))
    x = _np(random.gamma(k, a, (4,))).astype(np.float64)
    u = st.gamma(a).cdf(x)
    h = 1e-4
    ref = ((st.gamma(a + h).ppf(u) - st.gamma(a - h).ppf(u)) / (2 * h)).sum()
    np.testing.assert_allclose(g, ref, rtol=1e-3)
    gb = grad(lambda aa: jnp.sum(random.beta(k, aa, 2.0, (4,))))(jnp.asarray(1.5, "float32"))
    assert np.isfinite(float(gb)) and float(gb) != 0.0


def test_more_distributions():
    k = random.key(21)
    n = 4000
    assert set(np.unique(_np(random.rademacher(k, (n,))))) == {-1, 1}
    x = _np(random.lognormal(k, 0.5, (n,)))
    assert st.kstest(x, st.lognorm(0.5).cdf).pvalue > 1e-3
    x = _np(random.chisquare(k, 3.0, (n,)))
    assert st.kstest(x, st.chi2(3).cdf).pvalue > 1e-3
    x = _np(random.t(k, 5.0, (n,)))
    assert st.kstest(x, st.t(5).cdf).pvalue > 1e-3
    x = _np(random.maxwell(k, (n,)))
    assert st.kstest(x, st.maxwell.cdf).pvalue > 1e-3
    x = _np(random.pareto(k, 3.0, (n,)))
    assert st.kstest(x, st.pareto(3.0).cdf).pvalue > 1e-3
    x = _np(random.weibull_min(k, 2.0, 1.5, (n,)))
    assert st.kstest(x, st.weibull_min(1.5, scale=2.0).cdf).pvalue > 1e-3
    b = _np(random.ball(k, 3, shape=(n,)))
    r = np.linalg.norm(b, axis=-1)
    assert r.max() <= 1 + 1e-6 and st.kstest(r ** 3, "uniform").pvalue > 1e-3
    q = _np(random.orthogonal(k, 4, (3,)))
    np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(4), (3, 4, 4)),
                               atol=1e-5)
