"""The left-skewed Gumbel distribution (as ``scipy.stats.gumbel_l``): the mirror image of
``gumbel_r``.

Example:
    >>> from funcgrad.scipy.stats import gumbel_l
    >>> gumbel_l.logpdf(jnp.array(0.5))
    Array(-1.1487212, dtype=float32)
"""
from funcgrad.scipy.stats import gumbel_r
from funcgrad.scipy.stats._util import promote


def logpdf(x, loc=0, scale=1):
    """The log density. Example: ``gumbel_l.logpdf(x)``."""
    x, loc, scale = promote(x, loc, scale)
    return gumbel_r.logpdf(-x, -loc, scale)


def pdf(x, loc=0, scale=1):
    """The density. Example: ``gumbel_l.pdf(x)``."""
    x, loc, scale = promote(x, loc, scale)
    return gumbel_r.pdf(-x, -loc, scale)


def cdf(x, loc=0, scale=1):
    """The CDF, ``gumbel_r``'s survival function at ``-x``. Example: ``gumbel_l.cdf(0.5)``."""
    x, loc, scale = promote(x, loc, scale)
    return gumbel_r.sf(-x, -loc, scale)


def logcdf(x, loc=0, scale=1):
    """The log CDF. Example: ``gumbel_l.logcdf(0.5)``."""
    x, loc, scale = promote(x, loc, scale)
    return gumbel_r.logsf(-x, -loc, scale)


def sf(x, loc=0, scale=1):
    """The survival function. Example: ``gumbel_l.sf(0.5)``."""
    x, loc, scale = promote(x, loc, scale)
    return gumbel_r.cdf(-x, -loc, scale)


def logsf(x, loc=0, scale=1):
    """The log survival function. Example: ``gumbel_l.logsf(0.5)``."""
    x, loc, scale = promote(x, loc, scale)
    return gumbel_r.logcdf(-x, -loc, scale)


def ppf(q, loc=0, scale=1):
    """The quantile function. Example: ``gumbel_l.ppf(0.5)``."""
    q, loc, scale = promote(q, loc, scale)
    return -gumbel_r.ppf(1.0 - q, -loc, scale)
