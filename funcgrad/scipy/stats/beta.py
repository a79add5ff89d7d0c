"""The beta distribution (as ``scipy.stats.beta``).

Example:
    >>> from funcgrad.scipy.stats import beta
    >>> beta.logpdf(jnp.array(0.3), a=2.0, b=5.0)
    Array(0.7705252, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import on_standard, outside_support_nan, promote, standardize


def logpdf(x, a, b, loc=0, scale=1):
    """The log density (-inf outside [0, 1] after standardizing). Example:
    ``beta.logpdf(x, 2.0, 5.0)``."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    z, log_scale, scale = standardize(x, loc, scale)
    inside = (z >= 0) & (z <= 1)
    safe_z = jnp.where(inside, z, jnp.full_like(z, 0.5))
    val = (special.xlogy(a - 1.0, safe_z) + special.xlog1py(b - 1.0, -safe_z)
           - special.betaln(a, b) - log_scale)
    return outside_support_nan(jnp.where(inside, val, -jnp.inf), scale)


def pdf(x, a, b, loc=0, scale=1):
    """The density. Example: ``beta.pdf(x, 2.0, 5.0)``."""
    return jnp.exp(logpdf(x, a, b, loc, scale))


def cdf(x, a, b, loc=0, scale=1):
    """The CDF, the regularized incomplete beta function. Example: ``beta.cdf(0.3, 2.0, 5.0)``."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return on_standard(lambda z: special.betainc(a, b, jnp.clip(z, 0.0, 1.0)), x, loc, scale)


def sf(x, a, b, loc=0, scale=1):
    """The survival function. Example: ``beta.sf(0.3, 2.0, 5.0)``."""
    x, a, b, loc, scale = promote(x, a, b, loc, scale)
    return on_standard(lambda z: special.betainc(b, a, jnp.clip(1.0 - z, 0.0, 1.0)), x, loc, scale)


def logcdf(x, a, b, loc=0, scale=1):
    """The log CDF. Example: ``beta.logcdf(0.3, 2.0, 5.0)``."""
    return jnp.log(cdf(x, a, b, loc, scale))


def logsf(x, a, b, loc=0, scale=1):
    """The log survival function. Example: ``beta.logsf(0.3, 2.0, 5.0)``."""
    return jnp.log(sf(x, a, b, loc, scale))
