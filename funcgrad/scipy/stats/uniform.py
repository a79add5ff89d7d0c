"""The uniform distribution on ``[loc, loc + scale]`` (as ``scipy.stats.uniform``).

Example:
    >>> from funcgrad.scipy.stats import uniform
    >>> uniform.pdf(jnp.array(0.5))
    Array(1., dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import (on_standard, outside_support_nan, promote, standardize)


def logpdf(x, loc=0, scale=1):
    """The log density (-inf outside the interval). Example: ``uniform.logpdf(x, 0.0, 2.0)``."""
    z, log_scale, scale = standardize(x, loc, scale)
    return outside_support_nan(jnp.where((z >= 0) & (z <= 1), -log_scale, -jnp.inf), scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``uniform.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The CDF. Example: ``uniform.cdf(0.25)``."""
    return on_standard(lambda z: jnp.clip(z, 0.0, 1.0), x, loc, scale)


def ppf(q, loc=0, scale=1):
    """The quantile function. Example: ``uniform.ppf(0.25, 1.0, 2.0)``."""
    q, loc, scale = promote(q, loc, scale)
    out = jnp.where((q < 0) | (q > 1), jnp.nan, loc + q * scale)
    return outside_support_nan(out, scale)
