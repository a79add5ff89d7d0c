"""The negative binomial distribution: failures before the ``n``-th success (as
``scipy.stats.nbinom``).

Example:
    >>> from funcgrad.scipy.stats import nbinom
    >>> nbinom.pmf(jnp.array(2), n=3, p=0.5)
    Array(0.18750009, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote


def logpmf(k, n, p, loc=0):
    """The log probability of ``k`` failures (-inf off the non-negative integers). Example:
    ``nbinom.logpmf(2, 3, 0.5)``."""
    k, n, p, loc = promote(k, n, p, loc)
    x = k - loc
    ok = (x >= 0) & (x == jnp.floor(x))
    safe = jnp.where(ok, x, jnp.zeros_like(x))
    log_comb = special.gammaln(n + safe) - special.gammaln(safe + 1.0) - special.gammaln(n)
    val = log_comb + special.xlogy(n, p) + special.xlog1py(safe, -p)
    return jnp.where(ok, val, -jnp.inf)


def pmf(k, n, p, loc=0):
    """The probability of ``k``. Example: ``nbinom.pmf(2, 3, 0.5)``."""
    return jnp.exp(logpmf(k, n, p, loc))
