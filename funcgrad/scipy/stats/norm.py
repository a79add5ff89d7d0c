"""The normal distribution (as ``scipy.stats.norm``).

Example:
    >>> from funcgrad.scipy.stats import norm
    >>> norm.logpdf(jnp.array(0.0))
    Array(-0.9189385, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import (LOG_2PI, outside_support_nan, promote,
                                           standardize)


def logpdf(x, loc=0, scale=1):
    """The log density. Example: ``norm.logpdf(x, loc=1.0, scale=2.0)``."""
    z, log_scale, scale = standardize(x, loc, scale)
    return outside_support_nan(-0.5 * (z * z + LOG_2PI) - log_scale, scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``norm.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The cumulative distribution function. Example: ``norm.cdf(1.96)``."""
    z, _, scale = standardize(x, loc, scale)
    return outside_support_nan(special.ndtr(z), scale)


def logcdf(x, loc=0, scale=1):
    """The log CDF, accurate in the lower tail. Example: ``norm.logcdf(-40.0)``."""
    z, _, scale = standardize(x, loc, scale)
    return outside_support_nan(special.log_ndtr(z), scale)


def sf(x, loc=0, scale=1):
    """The survival function ``1 - cdf``. Example: ``norm.sf(5.0)``."""
    z, _, scale = standardize(x, loc, scale)
    return outside_support_nan(special.ndtr(-z), scale)


def logsf(x, loc=0, scale=1):
    """The log survival function. Example: ``norm.logsf(40.0)``."""
    z, _, scale = standardize(x, loc, scale)
    return outside_support_nan(special.log_ndtr(-z), scale)


def ppf(q, loc=0, scale=1):
    """The quantile function (inverse CDF). Example: ``norm.ppf(0.975)``."""
    q, loc, scale = promote(q, loc, scale)
    return outside_support_nan(special.ndtri(q) * scale + loc, scale)


def isf(q, loc=0, scale=1):
    """The inverse survival function. Example: ``norm.isf(0.025)``."""
    q, loc, scale = promote(q, loc, scale)
    return outside_support_nan(-special.ndtri(q) * scale + loc, scale)
