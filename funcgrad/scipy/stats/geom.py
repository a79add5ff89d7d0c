"""The geometric distribution on 1, 2, ... (as ``scipy.stats.geom``).

Example:
    >>> from funcgrad.scipy.stats import geom
    >>> geom.pmf(jnp.array(3), 0.5)
    Array(0.125, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote


def logpmf(k, p, loc=0):
    """The log probability of the first success at trial ``k`` (-inf off the support).

    Example:
        >>> from funcgrad.scipy.stats import geom
        >>> geom.logpmf(jnp.array([1, 2]), 0.3)
        Array([-1.2039728, -1.5606477], dtype=float32)
    """
    k, p, loc = promote(k, p, loc)
    x = k - loc
    ok = (x >= 1) & (x == jnp.floor(x))
    safe = jnp.where(ok, x, jnp.ones_like(x))
    return jnp.where(ok, special.xlog1py(safe - 1.0, -p) + jnp.log(p), -jnp.inf)


def pmf(k, p, loc=0):
    """The probability of ``k``. Example: ``geom.pmf(2, 0.3)``."""
    return jnp.exp(logpmf(k, p, loc))


def cdf(k, p, loc=0):
    """``P(K <= k) = 1 - (1 - p) ** floor(k)``. Example: ``geom.cdf(2, 0.3)``."""
    k, p, loc = promote(k, p, loc)
    x = jnp.floor(k - loc)
    return jnp.where(x < 1, 0.0, -jnp.expm1(special.xlog1py(jnp.maximum(x, 1.0), -p))
                     ).astype(k.dtype)
