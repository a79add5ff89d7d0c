"""The exponential distribution (as ``scipy.stats.expon``).

Example:
    >>> from funcgrad.scipy.stats import expon
    >>> expon.logpdf(jnp.array(1.0))
    Array(-1., dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import on_standard, outside_support_nan, promote, standardize


def logpdf(x, loc=0, scale=1):
    """The log density (-inf below ``loc``). Example: ``expon.logpdf(x, scale=2.0)``."""
    z, log_scale, scale = standardize(x, loc, scale)
    return outside_support_nan(jnp.where(z >= 0, -z - log_scale, -jnp.inf), scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``expon.pdf(x)``."""
    return jnp.exp(logpdf(x, loc, scale))


def cdf(x, loc=0, scale=1):
    """The CDF ``1 - exp(-z)``. Example: ``expon.cdf(1.0)``."""
    return on_standard(lambda z: -jnp.expm1(-jnp.maximum(z, 0.0)), x, loc, scale)


def logcdf(x, loc=0, scale=1):
    """The log CDF. Example: ``expon.logcdf(1.0)``."""
    return jnp.log(cdf(x, loc, scale))


def sf(x, loc=0, scale=1):
    """The survival function ``exp(-z)``. Example: ``expon.sf(1.0)``."""
    return jnp.exp(logsf(x, loc, scale))


def logsf(x, loc=0, scale=1):
    """The log survival function ``-z``. Example: ``expon.logsf(1.0)``."""
    return on_standard(lambda z: -jnp.maximum(z, 0.0), x, loc, scale)


def ppf(q, loc=0, scale=1):
    """The quantile function ``-log1p(-q)``. Example: ``expon.ppf(0.5)``."""
    q, loc, scale = promote(q, loc, scale)
    out = -jnp.log1p(-q) * scale + loc
    return outside_support_nan(jnp.where((q < 0) | (q > 1), jnp.nan, out), scale)
