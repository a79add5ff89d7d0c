"""The chi-squared distribution with ``df`` degrees of freedom (as ``scipy.stats.chi2``), a
gamma distribution of shape ``df / 2`` and scale 2.

Example:
    >>> from funcgrad.scipy.stats import chi2
    >>> chi2.cdf(jnp.array(3.84), df=1.0)
    Array(0.9499566, dtype=float32)
"""
from funcgrad.scipy.stats import gamma


def logpdf(x, df, loc=0, scale=1):
    """The log density. Example: ``chi2.logpdf(x, 3.0)``."""
    return gamma.logpdf(x, 0.5 * df, loc, 2 * scale)


def pdf(x, df, loc=0, scale=1):
    """The density. Example: ``chi2.pdf(x, 3.0)``."""
    return gamma.pdf(x, 0.5 * df, loc, 2 * scale)


def cdf(x, df, loc=0, scale=1):
    """The CDF. Example: ``chi2.cdf(x, 3.0)``."""
    return gamma.cdf(x, 0.5 * df, loc, 2 * scale)


def logcdf(x, df, loc=0, scale=1):
    """The log CDF. Example: ``chi2.logcdf(x, 3.0)``."""
    return gamma.logcdf(x, 0.5 * df, loc, 2 * scale)


def sf(x, df, loc=0, scale=1):
    """The survival function. Example: ``chi2.sf(x, 3.0)``."""
    return gamma.sf(x, 0.5 * df, loc, 2 * scale)


def logsf(x, df, loc=0, scale=1):
    """The log survival function. Example: ``chi2.logsf(x, 3.0)``."""
    return gamma.logsf(x, 0.5 * df, loc, 2 * scale)
