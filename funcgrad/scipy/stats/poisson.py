"""The Poisson distribution (as ``scipy.stats.poisson``).

Example:
    >>> from funcgrad.scipy.stats import poisson
    >>> poisson.logpmf(jnp.array(3), mu=2.0)
    Array(-1.7123188, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote


def logpmf(k, mu, loc=0):
    """The log probability of ``k`` events (-inf for non-integer or negative ``k``).

    Example:
        >>> from funcgrad.scipy.stats import poisson
        >>> poisson.logpmf(jnp.array([0, 1, 2]), 1.5)
        Array([-1.5000005, -1.0945349, -1.3822172], dtype=float32)
    """
    k, mu, loc = promote(k, mu, loc)
    x = k - loc
    ok = (x >= 0) & (x == jnp.floor(x))
    safe_x = jnp.where(ok, x, jnp.zeros_like(x))
    val = special.xlogy(safe_x, mu) - mu - special.gammaln(safe_x + 1.0)
    return jnp.where(ok, val, -jnp.inf)


def pmf(k, mu, loc=0):
    """The probability of ``k`` events. Example: ``poisson.pmf(2, 1.5)``."""
    return jnp.exp(logpmf(k, mu, loc))


def cdf(k, mu, loc=0):
    """``P(K <= k)``, the regularized upper incomplete gamma function of ``floor(k) + 1``.

    Example:
        >>> from funcgrad.scipy.stats import poisson
        >>> poisson.cdf(jnp.array(2.0), 1.5)
        Array(0.8088469, dtype=float32)
    """
    k, mu, loc = promote(k, mu, loc)
    x = jnp.floor(k - loc)
    safe_x = jnp.maximum(x, 0.0)
    return jnp.where(x < 0, 0.0, special.gammaincc(safe_x + 1.0, mu)).astype(k.dtype)


def entropy(mu, loc=0):
    """The entropy, summed over ``k`` up to far beyond ``mu`` (``mu`` concrete or traced;
    accurate for ``mu`` up to about 1e4).

    Example:
        >>> from funcgrad.scipy.stats import poisson
        >>> poisson.entropy(jnp.array(3.0))
        Array(1.9314696, dtype=float32)
    """
    mu = promote(mu)
    n = 20000
    ks = jnp.arange(n, dtype=mu.dtype)
    lp = logpmf(ks, mu[..., None])
    return -jnp.sum(jnp.exp(lp) * lp, axis=-1)
