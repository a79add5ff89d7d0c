"""The Bernoulli distribution (as ``scipy.stats.bernoulli``).

Example:
    >>> from funcgrad.scipy.stats import bernoulli
    >>> bernoulli.pmf(jnp.array([0, 1]), 0.3)
    Array([0.7, 0.3], dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote


def logpmf(k, p, loc=0):
    """The log probability of ``k`` in {0, 1} (-inf elsewhere). Example:
    ``bernoulli.logpmf(1, 0.3)``."""
    k, p, loc = promote(k, p, loc)
    x = k - loc
    val = special.xlogy(x, p) + special.xlog1py(1.0 - x, -p)
    return jnp.where((x == 0) | (x == 1), val, -jnp.inf)


def pmf(k, p, loc=0):
    """The probability of ``k``. Example: ``bernoulli.pmf(1, 0.3)``."""
    return jnp.exp(logpmf(k, p, loc))


def cdf(k, p, loc=0):
    """``P(K <= k)``. Example: ``bernoulli.cdf(0.5, 0.3)``."""
    k, p, loc = promote(k, p, loc)
    x = k - loc
    return jnp.where(x < 0, 0.0, jnp.where(x < 1, 1.0 - p, 1.0)).astype(k.dtype)


def ppf(q, p):
    """The smallest ``k`` with ``cdf(k) >= q`` (-1 at ``q == 0`` and NaN outside [0, 1], as
    SciPy). Example: ``bernoulli.ppf(0.8, 0.3)``."""
    q, p = promote(q, p)
    out = jnp.where(q > 1.0 - p, 1.0, jnp.where(q == 0, -1.0, 0.0)).astype(q.dtype)
    return jnp.where((q < 0) | (q > 1), jnp.nan, out)
