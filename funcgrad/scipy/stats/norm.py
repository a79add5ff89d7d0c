"""The normal distribution (as ``scipy.stats.norm``).

Example:
    >>> from funcgrad.scipy.stats import norm
    >>> norm.logpdf(jnp.array(0.0))
    Array(-0.9189385, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import LOG_2PI, log_density, on_standard, quantile


def logpdf(x, loc=0, scale=1):
    """The log density. Example: ``norm.logpdf(x, loc=1.0, scale=2.0)``."""
    return log_density(lambda z: -0.5 * (z * z + LOG_2PI), x, loc, scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``norm.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The cumulative distribution function. Example: ``norm.cdf(1.96)``."""
    return on_standard(special.ndtr, x, loc, scale)


def logcdf(x, loc=0, scale=1):
    """The log CDF, accurate in the lower tail. Example: ``norm.logcdf(-40.0)``."""
    return on_standard(special.log_ndtr, x, loc, scale)


def sf(x, loc=0, scale=1):
    """The survival function ``1 - cdf``. Example: ``norm.sf(5.0)``."""
    return on_standard(lambda z: special.ndtr(-z), x, loc, scale)


def logsf(x, loc=0, scale=1):
    """The log survival function. Example: ``norm.logsf(40.0)``."""
    return on_standard(lambda z: special.log_ndtr(-z), x, loc, scale)


def ppf(q, loc=0, scale=1):
    """The quantile function (inverse CDF). Example: ``norm.ppf(0.975)``."""
    return quantile(special.ndtri, q, loc, scale)


def isf(q, loc=0, scale=1):
    """The inverse survival function. Example: ``norm.isf(0.025)``."""
    return quantile(lambda q: -special.ndtri(q), q, loc, scale)
