"""funcgrad.scipy.special: SciPy's special functions (as ``jax.scipy.special``), built on the
special-function primitives of ``funcgrad.lax`` and ``funcgrad.numpy``.

Every function works eagerly and under ``jit``, ``vmap`` and ``grad``. Integer inputs promote to
the default float dtype.

Example:
    >>> from funcgrad.scipy import special
    >>> special.gammaln(jnp.array([1.0, 5.0])).round(4)   # log(0!), log(4!)
    Array([0.    , 3.1781], dtype=float32)
"""
import math

import numpy as np

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.nn import log_softmax as _log_softmax, logsumexp, softmax as _softmax
from funcgrad.transforms.custom_derivatives import custom_jvp

__all__ = [
    "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "digamma", "erfcx", "entr", "erf", "erfc", "erfinv", "expit",
    "factorial", "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "i0", "i0e", "i1",
    "i1e", "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit", "logsumexp",
    "multigammaln", "ndtr", "ndtri", "poch", "polygamma", "rel_entr", "softmax", "xlog1py",
    "xlogy", "zeta",
]


def _floats(*args):
    """Arrays promoted to one inexact dtype (integers and bools to the default float)."""
    arrs = [jnp.asarray(a) for a in args]
    dt = jnp.result_type(*arrs)
    if not jnp.issubdtype(dt, jnp.inexact):
        dt = dtypes.default_float()
    out = [a.astype(dt) for a in arrs]
    return out[0] if len(out) == 1 else out


def _unary(lax_fn, name, doc):
    def fn(x):
        return lax_fn(_floats(x))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


gammaln = _unary(lax.lgamma, "gammaln", """``log|Gamma(x)|``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.gammaln(jnp.array([0.5, 10.0]))
        Array([ 0.5723648, 12.80183  ], dtype=float32)
    """)
loggamma = gammaln
digamma = _unary(lax.digamma, "digamma", """The digamma function ``d/dx log Gamma(x)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.digamma(jnp.array([1.0]))             # -Euler's gamma
        Array([-0.5772154], dtype=float32)
    """)
erf = _unary(lax.erf, "erf", """The error function.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.erf(jnp.array([0.5]))
        Array([0.5204999], dtype=float32)
    """)
erfc = _unary(lax.erfc, "erfc", """The complementary error function ``1 - erf(x)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.erfc(jnp.array([3.0]))
        Array([2.2090497e-05], dtype=float32)
    """)
erfinv = _unary(lax.erf_inv, "erfinv", """The inverse of ``erf`` on (-1, 1).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.erfinv(jnp.array([0.5]))
        Array([0.47693628], dtype=float32)
    """)
expit = _unary(lax.logistic, "expit", """The logistic sigmoid ``1 / (1 + exp(-x))``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.expit(jnp.array([0.0]))
        Array([0.5], dtype=float32)
    """)
i0e = _unary(lax.bessel_i0e, "i0e", """The exponentially scaled modified Bessel function of
    order 0, ``exp(-|x|) I0(x)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.i0e(jnp.array([1.0]))
        Array([0.46575963], dtype=float32)
    """)
i1e = _unary(lax.bessel_i1e, "i1e", """The exponentially scaled modified Bessel function of
    order 1, ``exp(-|x|) I1(x)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.i1e(jnp.array([1.0]))
        Array([0.20791042], dtype=float32)
    """)


def i0(x):
    """The modified Bessel function of order 0.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.i0(jnp.array([1.0]))
        Array([1.266066], dtype=float32)
    """
    x = _floats(x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i0e(x)


def i1(x):
    """The modified Bessel function of order 1.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.i1(jnp.array([1.0]))
        Array([0.5651591], dtype=float32)
    """
    x = _floats(x)
    return jnp.exp(jnp.abs(x)) * lax.bessel_i1e(x)


def logit(p):
    """``log(p / (1 - p))``, the inverse of ``expit``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.logit(jnp.array([0.25]))
        Array([-1.0986123], dtype=float32)
    """
    p = _floats(p)
    return jnp.log(p) - jnp.log1p(-p)


def gammasgn(x):
    """The sign of the gamma function (NaN at the negative integers; at 0 the sign of the
    zero, as SciPy).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.gammasgn(jnp.array([-0.5, 2.0]))
        Array([-1.,  1.], dtype=float32)
    """
    x = _floats(x)
    fl = jnp.floor(x)
    neg = jnp.where(jnp.remainder(fl, 2) == 0, 1.0, -1.0).astype(x.dtype)
    sign = jnp.where(x > 0, jnp.ones_like(x), neg)
    sign = jnp.where(x == 0, jnp.copysign(jnp.ones_like(x), x), sign)
    return jnp.where((x < 0) & (x == fl), jnp.nan, sign)


def gamma(x):
    """The gamma function.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.gamma(jnp.array([5.0, 0.5]))          # 4!, sqrt(pi)
        Array([24.000023 ,  1.7724535], dtype=float32)
    """
    x = _floats(x)
    return gammasgn(x) * jnp.exp(lax.lgamma(x))


def betaln(a, b):
    """``log|B(a, b)|``, the logarithm of the beta function.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.betaln(jnp.array(2.0), jnp.array(3.0))   # log(1/12)
        Array(-2.4849074, dtype=float32)
    """
    a, b = _floats(a, b)
    return lax.lgamma(a) + lax.lgamma(b) - lax.lgamma(a + b)


def beta(a, b):
    """The beta function ``Gamma(a) Gamma(b) / Gamma(a + b)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.beta(jnp.array(2.0), jnp.array(3.0))     # 1/12
        Array(0.08333327, dtype=float32)
    """
    a, b = _floats(a, b)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * jnp.exp(betaln(a, b))


def factorial(n, exact=False):
    """``n!`` as ``Gamma(n + 1)`` (0 for negative ``n``, as SciPy).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.factorial(jnp.array([0, 3, 5]))
        Array([  1.0000005,   6.0000052, 120.00012  ], dtype=float32)
    """
    if exact:
        raise ValueError("scipy.special.factorial: exact=True needs arbitrary-precision "
                         "integers; funcgrad computes with floats (exact=False)")
    n = _floats(n)
    return jnp.where(n < 0, 0.0, jnp.exp(lax.lgamma(n + 1))).astype(n.dtype)


def poch(z, m):
    """The Pochhammer symbol (rising factorial) ``Gamma(z + m) / Gamma(z)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.poch(jnp.array(3.0), jnp.array(2.0))      # 3 * 4
        Array(12.000009, dtype=float32)
    """
    z, m = _floats(z, m)
    sign = gammasgn(z + m) * gammasgn(z)
    return sign * jnp.exp(lax.lgamma(z + m) - lax.lgamma(z))


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension ``d`` (a Python int).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.multigammaln(jnp.array(3.0), 2)
        Array(1.5501953, dtype=float32)
    """
    d = int(d)
    if d < 1:
        raise ValueError(f"scipy.special.multigammaln: d must be a positive integer, got {d}")
    a = _floats(a)
    js = jnp.arange(d, dtype=a.dtype)
    terms = lax.lgamma(a[..., None] - js / 2)
    return jnp.sum(terms, axis=-1) + d * (d - 1) / 4 * math.log(math.pi)


def gammainc(a, x):
    """The regularized lower incomplete gamma function ``P(a, x)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.gammainc(jnp.array(2.0), jnp.array(1.0))
        Array(0.26424113, dtype=float32)
    """
    a, x = _floats(a, x)
    a, x = jnp.broadcast_arrays(a, x)
    return lax.igamma(a, x)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.gammaincc(jnp.array(2.0), jnp.array(1.0))
        Array(0.73575884, dtype=float32)
    """
    a, x = _floats(a, x)
    a, x = jnp.broadcast_arrays(a, x)
    return lax.igammac(a, x)


def polygamma(n, x):
    """The ``n``-th derivative of the digamma function.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.polygamma(1, jnp.array(1.0))           # pi**2 / 6
        Array(1.644934, dtype=float32)
    """
    n, x = _floats(n, x)
    n, x = jnp.broadcast_arrays(n, x)
    return lax.polygamma(n, x)


def zeta(x, q=None):
    """The Hurwitz zeta function ``sum_k (k + q) ** -x`` (Riemann's when ``q`` is None).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.zeta(jnp.array(2.0), jnp.array(1.0))   # pi**2 / 6
        Array(1.644934, dtype=float32)
    """
    if q is None:
        q = 1.0
    x, q = _floats(x, q)
    x, q = jnp.broadcast_arrays(x, q)
    return lax.zeta(x, q)


@custom_jvp
def _xlogy(x, y):
    safe_y = jnp.where(x == 0, jnp.ones_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log(safe_y))


@_xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlogy(x, y), tx * jnp.log(y) + ty * x / y


def xlogy(x, y):
    """``x * log(y)``, defined as 0 where ``x == 0`` (even for ``y == 0``).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.xlogy(jnp.array([0.0, 2.0]), jnp.array([0.0, 3.0]))
        Array([0.       , 2.1972246], dtype=float32)
    """
    x, y = jnp.broadcast_arrays(*_floats(x, y))
    return _xlogy(x, y)


@custom_jvp
def _xlog1py(x, y):
    safe_y = jnp.where(x == 0, jnp.zeros_like(y), y)
    return jnp.where(x == 0, jnp.zeros_like(x), x * jnp.log1p(safe_y))


@_xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (tx, ty) = primals, tangents
    return _xlog1py(x, y), tx * jnp.log1p(y) + ty * x / (1 + y)


def xlog1py(x, y):
    """``x * log1p(y)``, defined as 0 where ``x == 0``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.xlog1py(jnp.array([0.0, 2.0]), jnp.array([-1.0, 1.0]))
        Array([0.       , 1.3862944], dtype=float32)
    """
    x, y = jnp.broadcast_arrays(*_floats(x, y))
    return _xlog1py(x, y)


def entr(x):
    """Elementwise entropy ``-x log x`` (0 at 0, -inf for negative ``x``).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.entr(jnp.array([0.0, 0.5]))
        Array([-0.       ,  0.3465736], dtype=float32)
    """
    x = _floats(x)
    return jnp.where(x < 0, -jnp.inf, -xlogy(x, x))


def rel_entr(x, y):
    """Elementwise relative entropy ``x log(x / y)`` (0 for ``x == 0, y >= 0``; inf where the
    arguments are outside the domain).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.rel_entr(jnp.array([0.5]), jnp.array([0.25]))
        Array([0.3465736], dtype=float32)
    """
    x, y = jnp.broadcast_arrays(*_floats(x, y))
    ok = (x > 0) & (y > 0)
    safe_x = jnp.where(ok, x, jnp.ones_like(x))
    safe_y = jnp.where(ok, y, jnp.ones_like(y))
    val = safe_x * (jnp.log(safe_x) - jnp.log(safe_y))
    return jnp.where(ok, val, jnp.where((x == 0) & (y >= 0), 0.0, jnp.inf)).astype(x.dtype)


def kl_div(x, y):
    """Elementwise ``x log(x / y) - x + y`` (SciPy's ``kl_div``).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.kl_div(jnp.array([0.5]), jnp.array([0.25]))
        Array([0.09657359], dtype=float32)
    """
    x, y = jnp.broadcast_arrays(*_floats(x, y))
    r = rel_entr(x, y)
    return jnp.where(jnp.isinf(r), r, r - x + y)


_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def ndtr(x):
    """The standard normal CDF, accurate in both tails.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.ndtr(jnp.array([0.0, 1.0]))
        Array([0.5      , 0.8413447], dtype=float32)
    """
    x = _floats(x)
    return 0.5 * lax.erfc(-x / _SQRT2)


def _log_ndtr_lower_tail(x):
    """Asymptotic series of log(ndtr(x)) for very negative x (x <= -10)."""
    z = 1.0 / (x * x)
    # 1 - 1/x^2 + 3/x^4 - 15/x^6 + ... : (2k-1)!! (-1/x^2)^k
    series = jnp.ones_like(x)
    term = jnp.ones_like(x)
    for k in range(1, 8):
        term = term * (-(2 * k - 1)) * z
        series = series + term
    return -0.5 * x * x - jnp.log(-x) - _LOG_SQRT_2PI + jnp.log(series)


def log_ndtr(x):
    """``log(ndtr(x))``, accurate for very negative ``x`` (an asymptotic series below -10) and
    for positive ``x`` (``log1p(-ndtr(-x))``).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.log_ndtr(jnp.array([-30.0, 0.0, 10.0]))
        Array([-4.5432123e+02, -6.9314718e-01, -7.6198528e-24], dtype=float32)
    """
    x = _floats(x)
    lo, hi = -10.0, 0.0
    x_lo = jnp.minimum(x, lo)
    x_mid = jnp.clip(x, lo, hi)
    x_hi = jnp.maximum(x, hi)
    mid = jnp.log(ndtr(x_mid))
    upper = jnp.log1p(-ndtr(-x_hi))
    return jnp.where(x < lo, _log_ndtr_lower_tail(x_lo), jnp.where(x > hi, upper, mid))


def _ndtri_lower(q):
    """ndtri for q in (0, 0.5]: a rational start (Abramowitz & Stegun 26.2.23) refined by
    Newton steps on ndtr, with the step computed from logs so the tails do not overflow."""
    t = jnp.sqrt(-2.0 * jnp.log(q))
    x = -(t - (2.515517 + 0.802853 * t + 0.010328 * t * t)
          / (1.0 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t))
    logq = jnp.log(q)
    for _ in range(4):
        log_pdf = -0.5 * x * x - _LOG_SQRT_2PI
        # (ndtr(x) - q) / pdf(x) = (ndtr(x) / q - 1) * q / pdf(x)
        ratio = jnp.exp(log_ndtr(x) - logq)
        x = x - (ratio - 1.0) * jnp.exp(logq - log_pdf)
    return x


@custom_jvp
def _ndtri(p):
    q = jnp.minimum(p, 1.0 - p)
    safe_q = jnp.where((q > 0) & (q <= 0.5), q, jnp.full_like(q, 0.25))
    x = _ndtri_lower(safe_q)
    x = jnp.where(p > 0.5, -x, x)
    x = jnp.where(p == 0, -jnp.inf, jnp.where(p == 1, jnp.inf, x))
    return jnp.where((p < 0) | (p > 1) | jnp.isnan(p), jnp.nan, x)


@_ndtri.defjvp
def _ndtri_jvp(primals, tangents):
    (p,), (t,) = primals, tangents
    x = _ndtri(p)
    return x, t * jnp.exp(0.5 * x * x + _LOG_SQRT_2PI)


def ndtri(p):
    """The inverse of ``ndtr``: the standard normal quantile of ``p`` in [0, 1].

    Example:
        >>> from funcgrad.scipy import special
        >>> special.ndtri(jnp.array([0.5, 0.975]))
        Array([1.4308547e-08, 1.9599644e+00], dtype=float32)
    """
    return _ndtri(_floats(p))


def betainc(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)`` (``lax.betainc``: a continued
    fraction of a fixed number of terms, differentiable in ``a``, ``b`` and ``x``).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.betainc(jnp.array(2.0), jnp.array(3.0), jnp.array(0.4))
        Array(0.5247992, dtype=float32)
    """
    return lax.betainc(*jnp.broadcast_arrays(*_floats(a, b, x)))


def softmax(x, axis=None):
    """``exp(x) / sum(exp(x))`` over ``axis`` (SciPy's default: the whole array).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.softmax(jnp.array([1.0, 2.0, 3.0]))
        Array([0.09003057, 0.24472848, 0.66524094], dtype=float32)
    """
    return _softmax(_floats(x), axis=axis)


def log_softmax(x, axis=None):
    """``x - logsumexp(x)`` over ``axis`` (SciPy's default: the whole array).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.log_softmax(jnp.array([1.0, 2.0, 3.0]))
        Array([-2.407606  , -1.4076059 , -0.40760595], dtype=float32)
    """
    return _log_softmax(_floats(x), axis=axis)




def comb(N, k, *, exact=False, repetition=False):
    """The number of combinations of ``N`` things taken ``k`` at a time (0 where ``k > N``,
    ``k < 0`` or ``N < 0``); with ``repetition``, ``comb(N + k - 1, k)``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.comb(jnp.array(5.0), jnp.array(2.0))      # 10
        Array(9.999995, dtype=float32)
    """
    if exact:
        raise ValueError("scipy.special.comb: exact=True needs arbitrary-precision integers; "
                         "funcgrad computes with floats (exact=False)")
    n, k = jnp.broadcast_arrays(*_floats(N, k))
    if repetition:
        n = n + k - 1
    ok = (k >= 0) & (n >= 0) & (k <= n)
    safe_n = jnp.where(ok, n, jnp.ones_like(n))
    safe_k = jnp.where(ok, k, jnp.zeros_like(k))
    val = jnp.exp(lax.lgamma(safe_n + 1) - lax.lgamma(safe_k + 1)
                  - lax.lgamma(safe_n - safe_k + 1))
    return jnp.where(ok, val, 0.0).astype(n.dtype)


def boxcox(x, lmbda):
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log(x)`` at ``lmbda == 0``).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.boxcox(jnp.array([1.0, 2.0]), 0.5).round(4)
        Array([0.    , 0.8284], dtype=float32)
    """
    x, lmbda = jnp.broadcast_arrays(*_floats(x, lmbda))
    logx = jnp.log(x)
    safe = jnp.where(lmbda == 0, jnp.ones_like(lmbda), lmbda)
    return jnp.where(lmbda == 0, logx, jnp.expm1(safe * logx) / safe)


def boxcox1p(x, lmbda):
    """The Box-Cox transform of ``1 + x``, accurate for small ``x``.

    Example:
        >>> from funcgrad.scipy import special
        >>> special.boxcox1p(jnp.array([1e-8, 1.0]), 0.5).round(4)
        Array([0.    , 0.8284], dtype=float32)
    """
    x, lmbda = jnp.broadcast_arrays(*_floats(x, lmbda))
    logx = jnp.log1p(x)
    safe = jnp.where(lmbda == 0, jnp.ones_like(lmbda), lmbda)
    return jnp.where(lmbda == 0, logx, jnp.expm1(safe * logx) / safe)


def _erfcx_asymptotic(x):
    """exp(x^2) erfc(x) for large positive x: 1/(x sqrt(pi)) sum_k (-1)^k (2k-1)!! / (2x^2)^k."""
    z = 1.0 / (2.0 * x * x)
    series = jnp.ones_like(x)
    term = jnp.ones_like(x)
    for k in range(1, 9):
        term = term * (-(2 * k - 1)) * z
        series = series + term
    return series / (x * math.sqrt(math.pi))


def erfcx(x):
    """The scaled complementary error function ``exp(x**2) * erfc(x)``, finite for large
    positive ``x`` (an asymptotic series where ``erfc`` would underflow).

    Example:
        >>> from funcgrad.scipy import special
        >>> special.erfcx(jnp.array([0.0, 30.0]))
        Array([1.        , 0.01879589], dtype=float32)
    """
    x = _floats(x)
    switch = 25.0 if x.dtype == np.float64 else 8.0
    big = jnp.maximum(x, switch)
    small = jnp.minimum(x, switch)
    direct = jnp.exp(small * small) * lax.erfc(small)
    return jnp.where(x > switch, _erfcx_asymptotic(big), direct)
