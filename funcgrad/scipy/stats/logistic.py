"""The logistic distribution (as ``scipy.stats.logistic``).

Example:
    >>> from funcgrad.scipy.stats import logistic
    >>> logistic.cdf(jnp.array(0.0))
    Array(0.5, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import on_standard, outside_support_nan, quantile, standardize

def logpdf(x, loc=0, scale=1):
    """The log density. Example: ``logistic.logpdf(x)``."""
    z, log_scale, scale = standardize(x, loc, scale)
    a = jnp.abs(z)
    return outside_support_nan(-a - 2.0 * jnp.log1p(jnp.exp(-a)) - log_scale, scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``logistic.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The CDF, the logistic sigmoid. Example: ``logistic.cdf(1.0)``."""
    return on_standard(special.expit, x, loc, scale)


def sf(x, loc=0, scale=1):
    """The survival function. Example: ``logistic.sf(1.0)``."""
    return on_standard(lambda z: special.expit(-z), x, loc, scale)


def ppf(q, loc=0, scale=1):
    """The quantile function ``logit(q)``. Example: ``logistic.ppf(0.9)``."""
    return quantile(special.logit, q, loc, scale)


def isf(q, loc=0, scale=1):
    """The inverse survival function. Example: ``logistic.isf(0.1)``."""
    return quantile(lambda q: -special.logit(q), q, loc, scale)
