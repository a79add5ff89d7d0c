"""funcgrad.scipy.special against scipy.special (float64), with jit, vmap and grad (grad
against float64 finite differences)."""
import numpy as np
import pytest
import scipy.special as ss

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.scipy import special as S

RNG = np.random.default_rng(0)
POS = np.linspace(0.15, 7.5, 11)
REAL = np.linspace(-4.0, 4.0, 11)
UNIT = np.linspace(0.02, 0.98, 11)

UNARY = [
    ("gammaln", POS), ("digamma", POS), ("erf", REAL), ("erfc", REAL),
    ("erfinv", 2 * UNIT - 1), ("expit", REAL), ("logit", UNIT), ("ndtr", REAL),
    ("ndtri", UNIT), ("log_ndtr", REAL), ("i0", REAL), ("i0e", REAL), ("i1", REAL),
    ("i1e", REAL), ("gamma", np.concatenate([POS, [-0.5, -1.5, -2.7]])),
    ("gammasgn", np.array([-2.5, -1.5, -0.5, 0.5, 3.0])), ("entr", np.concatenate([UNIT, [0.0]])),
]


@pytest.mark.parametrize("name,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_scipy(x64, name, x):
    got = np.asarray(getattr(S, name)(jnp.asarray(x)))
    np.testing.assert_allclose(got, getattr(ss, name)(x), rtol=1e-10, atol=1e-13)
    jitted = np.asarray(funcgrad.jit(funcgrad.vmap(getattr(S, name)))(jnp.asarray(x)))
    np.testing.assert_allclose(jitted, got, rtol=1e-12, atol=1e-14)


BINARY = [
    ("betaln", POS, POS[::-1]), ("beta", POS, POS[::-1] / 3), ("xlogy", REAL, POS),
    ("xlog1py", REAL, UNIT - 0.5), ("gammainc", POS, POS[::-1]), ("gammaincc", POS, POS[::-1]),
    ("poch", POS, UNIT * 3), ("rel_entr", UNIT, UNIT[::-1]), ("kl_div", UNIT, UNIT[::-1]),
    ("zeta", POS + 1.1, UNIT), ("polygamma", np.array([0, 1, 2, 3] * 3)[:11], POS),
]


@pytest.mark.parametrize("name,a,b", BINARY, ids=[u[0] for u in BINARY])
def test_binary_matches_scipy(x64, name, a, b):
    got = np.asarray(getattr(S, name)(jnp.asarray(a), jnp.asarray(b)))
    np.testing.assert_allclose(got, getattr(ss, name)(a, b), rtol=1e-9, atol=1e-13)


def test_edge_values_match_scipy(x64):
    x, y = np.array([0.0, 0.0, 1.0]), np.array([0.0, 2.0, 0.0])
    np.testing.assert_array_equal(np.asarray(S.xlogy(x, y)), ss.xlogy(x, y))
    tails = np.array([-60.0, -30.0, -12.0, -9.0, 0.5, 8.0, 30.0])
    np.testing.assert_allclose(np.asarray(S.log_ndtr(tails)), ss.log_ndtr(tails), rtol=1e-12)
    p = np.array([0.0, 1e-300, 1e-30, 1e-8, 0.5, 1 - 1e-10, 1.0])
    np.testing.assert_allclose(np.asarray(S.ndtri(p)), ss.ndtri(p), rtol=1e-10, atol=1e-15)
    assert np.isnan(np.asarray(S.ndtri(jnp.array([-0.1, 1.5])))).all()
    np.testing.assert_allclose(np.asarray(S.factorial(jnp.array([0, 3, 5, -1]))),
                               ss.factorial(np.array([0, 3, 5, -1])), rtol=1e-12)
    np.testing.assert_allclose(float(S.multigammaln(4.5, 3)), ss.multigammaln(4.5, 3),
                               rtol=1e-12)
    np.testing.assert_allclose(float(S.zeta(3.0)), ss.zeta(3.0), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(S.gammasgn(jnp.array([0.0, -0.0, -1.0]))),
                                  ss.gammasgn(np.array([0.0, -0.0, -1.0])))


@pytest.mark.parametrize("a,b", [(0.5, 0.5), (2.0, 3.0), (2.5, 0.7), (50.0, 80.0),
                                 (0.1, 10.0)])
def test_betainc_matches_scipy(x64, a, b):
    x = np.array([0.0, 1e-4, 0.05, 0.3, 0.5, 0.77, 0.999, 1.0])
    np.testing.assert_allclose(np.asarray(S.betainc(a, b, x)), ss.betainc(a, b, x),
                               rtol=1e-9, atol=1e-14)


def test_logsumexp_b_and_return_sign(x64):
    a = RNG.normal(size=(3, 4))
    b = RNG.normal(size=(3, 4))
    for axis in (None, 0, 1, (0, 1)):
        out, sign = S.logsumexp(jnp.asarray(a), axis=axis, b=jnp.asarray(b), return_sign=True)
        w_out, w_sign = ss.logsumexp(a, axis=axis, b=b, return_sign=True)
        np.testing.assert_allclose(np.asarray(out), w_out, rtol=1e-12)
        np.testing.assert_array_equal(np.asarray(sign), w_sign)
    np.testing.assert_allclose(np.asarray(S.logsumexp(jnp.asarray(a), axis=1, keepdims=True)),
                               ss.logsumexp(a, axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(S.softmax(jnp.asarray(a))), ss.softmax(a), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(S.log_softmax(jnp.asarray(a), axis=0)),
                               ss.log_softmax(a, axis=0), rtol=1e-12)


def _fd(f, x, eps=1e-6):
    return (f(x + eps) - f(x - eps)) / (2 * eps)


GRADS = [
    ("gammaln", 2.3), ("digamma", 1.7), ("erfinv", 0.4), ("ndtri", 0.03), ("ndtri", 0.8),
    ("log_ndtr", -15.0), ("log_ndtr", -2.0), ("log_ndtr", 3.0), ("logit", 0.3), ("i0", 1.2),
    ("i1", -0.7), ("gamma", 3.3), ("entr", 0.4),
]


@pytest.mark.parametrize("name,x", GRADS, ids=[f"{g[0]}@{g[1]}" for g in GRADS])
def test_grad_matches_finite_differences(x64, name, x):
    fn = getattr(S, name)
    g = float(funcgrad.grad(fn)(x))
    ref = _fd(lambda v: float(getattr(ss, name)(v)), x)
    np.testing.assert_allclose(g, ref, rtol=1e-6)


def test_grad_of_binary_functions(x64):
    gx = funcgrad.grad(lambda x: S.betainc(2.0, 3.0, x))(0.4)
    np.testing.assert_allclose(float(gx), 0.4 * 0.6 ** 2 / ss.beta(2, 3), rtol=1e-9)
    ga = funcgrad.grad(lambda a: S.betainc(a, 3.0, 0.4))(2.0)
    np.testing.assert_allclose(float(ga), _fd(lambda a: ss.betainc(a, 3.0, 0.4), 2.0), rtol=1e-5)
    gy = funcgrad.grad(lambda y: S.xlogy(2.0, y))(3.0)
    np.testing.assert_allclose(float(gy), 2.0 / 3.0, rtol=1e-12)
    # x == 0 gives a finite value and a finite gradient in y
    assert float(funcgrad.grad(lambda y: S.xlogy(0.0, y))(0.5)) == 0.0
    gb = funcgrad.grad(lambda a: S.betaln(a, 2.0))(1.5)
    np.testing.assert_allclose(float(gb), _fd(lambda a: ss.betaln(a, 2.0), 1.5), rtol=1e-6)
    gg = funcgrad.grad(lambda x: S.gammainc(2.0, x))(1.3)
    np.testing.assert_allclose(float(gg), _fd(lambda x: ss.gammainc(2.0, x), 1.3), rtol=1e-6)


def test_float32_defaults():
    x = S.ndtri(jnp.array([0.1, 0.9], jnp.float32))
    assert x.dtype == np.float32
    np.testing.assert_allclose(np.asarray(x), ss.ndtri([0.1, 0.9]), rtol=1e-5)
    assert S.gammaln(jnp.array([1, 2, 3])).dtype == np.float32
    with pytest.raises(ValueError, match="multigammaln: d must be a positive"):
        S.multigammaln(2.0, 0)
