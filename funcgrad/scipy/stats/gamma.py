"""The gamma distribution (as ``scipy.stats.gamma``, shape ``a``).

Example:
    >>> from funcgrad.scipy.stats import gamma
    >>> gamma.logpdf(jnp.array(1.5), a=2.0)
    Array(-1.0945349, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import on_standard, outside_support_nan, promote, standardize


def logpdf(x, a, loc=0, scale=1):
    """The log density (-inf outside the support). Example: ``gamma.logpdf(x, 2.0)``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    z, log_scale, scale = standardize(x, loc, scale)
    inside = z >= 0
    safe_z = jnp.where(inside, z, jnp.ones_like(z))
    val = special.xlogy(a - 1.0, safe_z) - safe_z - special.gammaln(a) - log_scale
    return outside_support_nan(jnp.where(inside, val, -jnp.inf), scale)


def pdf(x, a, loc=0, scale=1):
    """The density. Example: ``gamma.pdf(x, 2.0)``."""
    return jnp.exp(logpdf(x, a, loc, scale))


def cdf(x, a, loc=0, scale=1):
    """The CDF, the regularized lower incomplete gamma function. Example: ``gamma.cdf(1.0, 2.0)``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return on_standard(lambda z: special.gammainc(a, jnp.maximum(z, 0.0)), x, loc, scale)


def sf(x, a, loc=0, scale=1):
    """The survival function. Example: ``gamma.sf(1.0, 2.0)``."""
    x, a, loc, scale = promote(x, a, loc, scale)
    return on_standard(lambda z: special.gammaincc(a, jnp.maximum(z, 0.0)), x, loc, scale)


def logcdf(x, a, loc=0, scale=1):
    """The log CDF. Example: ``gamma.logcdf(1.0, 2.0)``."""
    return jnp.log(cdf(x, a, loc, scale))


def logsf(x, a, loc=0, scale=1):
    """The log survival function. Example: ``gamma.logsf(1.0, 2.0)``."""
    return jnp.log(sf(x, a, loc, scale))
