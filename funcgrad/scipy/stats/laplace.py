"""The Laplace distribution (as ``scipy.stats.laplace``).

Example:
    >>> from funcgrad.scipy.stats import laplace
    >>> laplace.logpdf(jnp.array(0.5))
    Array(-1.1931472, dtype=float32)
"""
import math

import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import log_density, outside_support_nan, standardize


def logpdf(x, loc=0, scale=1):
    """The log density ``-|z| - log(2 scale)``. Example: ``laplace.logpdf(x)``."""
    return log_density(lambda z: -jnp.abs(z) - math.log(2.0), x, loc, scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``laplace.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The CDF. Example: ``laplace.cdf(0.5)``."""
    z, _, scale = standardize(x, loc, scale)
    half = 0.5 * jnp.exp(-jnp.abs(z))
    return outside_support_nan(jnp.where(z < 0, half, 1.0 - half), scale)
