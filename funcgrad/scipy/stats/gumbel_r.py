"""The right-skewed Gumbel distribution (as ``scipy.stats.gumbel_r``).

Example:
    >>> from funcgrad.scipy.stats import gumbel_r
    >>> gumbel_r.logpdf(jnp.array(0.5))
    Array(-1.1065307, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import log_density, on_standard, quantile

def logpdf(x, loc=0, scale=1):
    """The log density ``-z - exp(-z)``. Example: ``gumbel_r.logpdf(x)``."""
    return log_density(lambda z: -z - jnp.exp(-z), x, loc, scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``gumbel_r.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """The log CDF ``-exp(-z)``. Example: ``gumbel_r.logcdf(0.5)``."""
    return on_standard(lambda z: -jnp.exp(-z), x, loc, scale)


def cdf(x, loc=0, scale=1):
    """The CDF ``exp(-exp(-z))``. Example: ``gumbel_r.cdf(0.5)``."""
    return jnp.exp(logcdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """The survival function. Example: ``gumbel_r.sf(0.5)``."""
    return -jnp.expm1(logcdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """The log survival function. Example: ``gumbel_r.logsf(0.5)``."""
    return jnp.log(sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    """The quantile function ``-log(-log(q))``. Example: ``gumbel_r.ppf(0.5)``."""
    return quantile(lambda q: -jnp.log(-jnp.log(q)), q, loc, scale)
