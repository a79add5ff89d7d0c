"""The Cauchy distribution (as ``scipy.stats.cauchy``).

Example:
    >>> from funcgrad.scipy.stats import cauchy
    >>> cauchy.logpdf(jnp.array(0.0))
    Array(-1.1447299, dtype=float32)
"""
import math

import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import on_standard, outside_support_nan, quantile, standardize

def logpdf(x, loc=0, scale=1):
    """The log density. Example: ``cauchy.logpdf(x)``."""
    z, log_scale, scale = standardize(x, loc, scale)
    return outside_support_nan(-math.log(math.pi) - log_scale - jnp.log1p(z * z), scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``cauchy.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The CDF ``1/2 + arctan(z) / pi``. Example: ``cauchy.cdf(1.0)``."""
    return on_standard(lambda z: 0.5 + jnp.arctan(z) / math.pi, x, loc, scale)


def sf(x, loc=0, scale=1):
    """The survival function. Example: ``cauchy.sf(1.0)``."""
    return on_standard(lambda z: 0.5 - jnp.arctan(z) / math.pi, x, loc, scale)


def logcdf(x, loc=0, scale=1):
    """The log CDF. Example: ``cauchy.logcdf(1.0)``."""
    return jnp.log(cdf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """The log survival function. Example: ``cauchy.logsf(1.0)``."""
    return jnp.log(sf(x, loc, scale))


def ppf(q, loc=0, scale=1):
    """The quantile function ``tan(pi (q - 1/2))``. Example: ``cauchy.ppf(0.75)``."""
    return quantile(lambda q: jnp.tan(math.pi * (q - 0.5)), q, loc, scale)


def isf(q, loc=0, scale=1):
    """The inverse survival function. Example: ``cauchy.isf(0.25)``."""
    return quantile(lambda q: jnp.tan(math.pi * (0.5 - q)), q, loc, scale)
