"""The Pareto distribution with shape ``b`` (as ``scipy.stats.pareto``: support ``z >= 1``).

Example:
    >>> from funcgrad.scipy.stats import pareto
    >>> pareto.logpdf(jnp.array(2.0), b=3.0)
    Array(-1.6739764, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy.stats._util import (on_standard, outside_support_nan, promote, standardize)


def logpdf(x, b, loc=0, scale=1):
    """The log density ``log(b) - (b + 1) log(z)`` (-inf below 1). Example:
    ``pareto.logpdf(x, 3.0)``."""
    x, b, loc, scale = promote(x, b, loc, scale)
    z, log_scale, scale = standardize(x, loc, scale)
    safe = jnp.maximum(z, 1.0)
    val = jnp.log(b) - (b + 1.0) * jnp.log(safe) - log_scale
    return outside_support_nan(jnp.where(z >= 1, val, -jnp.inf), scale)


def pdf(x, b, loc=0, scale=1):
    """The density. Example: ``pareto.pdf(x, 3.0)``."""
    return jnp.exp(logpdf(x, b, loc, scale))


def logsf(x, b, loc=0, scale=1):
    """The log survival function ``-b log(z)``. Example: ``pareto.logsf(2.0, 3.0)``."""
    x, b, loc, scale = promote(x, b, loc, scale)
    return on_standard(lambda z: -b * jnp.log(jnp.maximum(z, 1.0)), x, loc, scale)


def sf(x, b, loc=0, scale=1):
    """The survival function ``z ** -b``. Example: ``pareto.sf(2.0, 3.0)``."""
    return jnp.exp(logsf(x, b, loc, scale))


def cdf(x, b, loc=0, scale=1):
    """The CDF ``1 - z ** -b``. Example: ``pareto.cdf(2.0, 3.0)``."""
    return -jnp.expm1(logsf(x, b, loc, scale))


def logcdf(x, b, loc=0, scale=1):
    """The log CDF. Example: ``pareto.logcdf(2.0, 3.0)``."""
    return jnp.log(cdf(x, b, loc, scale))


def ppf(q, b, loc=0, scale=1):
    """The quantile function ``(1 - q) ** (-1 / b)``. Example: ``pareto.ppf(0.5, 3.0)``."""
    q, b, loc, scale = promote(q, b, loc, scale)
    out = jnp.exp(-jnp.log1p(-q) / b) * scale + loc
    return outside_support_nan(jnp.where((q < 0) | (q > 1), jnp.nan, out), scale)
