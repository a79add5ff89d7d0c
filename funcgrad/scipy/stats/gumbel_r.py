"""The right-skewed Gumbel distribution (as ``scipy.stats.gumbel_r``).

Example:
    >>> from funcgrad.scipy.stats import gumbel_r
    >>> gumbel_r.logpdf(jnp.array(0.5))
    Array(-1.1065307, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import outside_support_nan, promote, standardize


def logpdf(x, loc=0, scale=1):
    """The log density ``-z - exp(-z)``. Example: ``gumbel_r.logpdf(x)``."""
    z, log_scale, scale = standardize(x, loc, scale)
    return outside_support_nan(-z - jnp.exp(-z) - log_scale, scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``gumbel_r.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def logcdf(x, loc=0, scale=1):
    """The log CDF ``-exp(-z)``. Example: ``gumbel_r.logcdf(0.5)``."""
    z, _, scale = standardize(x, loc, scale)
    return outside_support_nan(-jnp.exp(-z), scale)


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
    q, loc, scale = promote(q, loc, scale)
    return outside_support_nan(-jnp.log(-jnp.log(q)) * scale + loc, scale)
