"""Student's t distribution (as ``scipy.stats.t``).

Example:
    >>> from funcgrad.scipy.stats import t
    >>> t.logpdf(jnp.array(0.5), df=3.0)
    Array(-1.1609746, dtype=float32)
"""
import math

import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import outside_support_nan, promote, standardize


def logpdf(x, df, loc=0, scale=1):
    """The log density. Example: ``t.logpdf(x, df=4.0)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    z, log_scale, scale = standardize(x, loc, scale)
    half = 0.5 * (df + 1.0)
    norm = (special.gammaln(half) - special.gammaln(0.5 * df)
            - 0.5 * (jnp.log(df) + math.log(math.pi)) - log_scale)
    return outside_support_nan(norm - half * jnp.log1p(z * z / df), scale)


def pdf(x, df, loc=0, scale=1):
    """The density. Example: ``t.pdf(x, df=4.0)``."""
    return jnp.exp(logpdf(x, df, loc, scale))


def cdf(x, df, loc=0, scale=1):
    """The CDF, from the regularized incomplete beta function. Example: ``t.cdf(2.0, 5.0)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    z, _, scale = standardize(x, loc, scale)
    tail = 0.5 * special.betainc(0.5 * df, jnp.full_like(df, 0.5), df / (df + z * z))
    return outside_support_nan(jnp.where(z > 0, 1.0 - tail, tail), scale)


def sf(x, df, loc=0, scale=1):
    """The survival function ``1 - cdf``. Example: ``t.sf(2.0, 5.0)``."""
    x, df, loc, scale = promote(x, df, loc, scale)
    return cdf(-x, df, -loc, scale)


def logcdf(x, df, loc=0, scale=1):
    """The log CDF. Example: ``t.logcdf(-2.0, 5.0)``."""
    return jnp.log(cdf(x, df, loc, scale))


def logsf(x, df, loc=0, scale=1):
    """The log survival function. Example: ``t.logsf(2.0, 5.0)``."""
    return jnp.log(sf(x, df, loc, scale))
