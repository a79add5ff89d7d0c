"""The binomial distribution (as ``scipy.stats.binom``).

Example:
    >>> from funcgrad.scipy.stats import binom
    >>> binom.pmf(jnp.array(3), n=10, p=0.3)
    Array(0.26682812, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote


def logpmf(k, n, p, loc=0):
    """The log probability of ``k`` successes in ``n`` trials (-inf off 0..n). Example:
    ``binom.logpmf(3, 10, 0.3)``."""
    k, n, p, loc = promote(k, n, p, loc)
    x = k - loc
    ok = (x >= 0) & (x <= n) & (x == jnp.floor(x))
    safe = jnp.where(ok, x, jnp.zeros_like(x))
    log_comb = (special.gammaln(n + 1.0) - special.gammaln(safe + 1.0)
                - special.gammaln(n - safe + 1.0))
    val = log_comb + special.xlogy(safe, p) + special.xlog1py(n - safe, -p)
    return jnp.where(ok, val, -jnp.inf)


def pmf(k, n, p, loc=0):
    """The probability of ``k``. Example: ``binom.pmf(3, 10, 0.3)``."""
    return jnp.exp(logpmf(k, n, p, loc))
