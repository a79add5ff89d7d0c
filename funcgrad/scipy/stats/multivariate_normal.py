"""The multivariate normal distribution (as ``scipy.stats.multivariate_normal``), through a
Cholesky factor of the covariance.

Example:
    >>> from funcgrad.scipy.stats import multivariate_normal
    >>> multivariate_normal.logpdf(jnp.zeros(2), jnp.zeros(2), jnp.eye(2))
    Array(-1.837877, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.numpy import linalg
from funcgrad.scipy.stats._util import LOG_2PI, promote


def logpdf(x, mean, cov, allow_singular=None):
    """The log density of ``x`` (shape ``(..., d)``) for ``mean`` (``(..., d)``) and ``cov``
    (``(..., d, d)``, or a scalar or ``(d,)`` vector for a diagonal covariance).

    Example:
        >>> from funcgrad.scipy.stats import multivariate_normal
        >>> multivariate_normal.logpdf(jnp.array([0.5, 0.0]), jnp.zeros(2), jnp.eye(2))
        Array(-1.962877, dtype=float32)
    """
    if allow_singular:
        raise ValueError("scipy.stats.multivariate_normal.logpdf: allow_singular=True is not "
                         "supported (the density uses a Cholesky factor of cov)")
    x, mean = promote(x, mean)
    cov = jnp.asarray(cov).astype(x.dtype)
    d = x.shape[-1] if x.ndim else 1
    if cov.ndim < 2:
        var = jnp.broadcast_to(cov, (d,))
        dev = x - mean
        maha = jnp.sum(dev * dev / var, axis=-1)
        return -0.5 * (d * LOG_2PI + jnp.sum(jnp.log(var)) + maha)
    if cov.shape[-1] != d or cov.shape[-2] != d:
        raise ValueError(f"scipy.stats.multivariate_normal.logpdf: cov of shape {cov.shape} "
                         f"does not match the dimension {d} of x {x.shape}")
    chol = linalg.cholesky(cov)
    dev = (x - mean)[..., None]
    batch = jnp.broadcast_shapes(dev.shape[:-2], chol.shape[:-2])
    chol = jnp.broadcast_to(chol, batch + (d, d))
    white = linalg.solve_triangular(chol, jnp.broadcast_to(dev, batch + (d, 1)), lower=True)
    maha = jnp.sum(white[..., 0] ** 2, axis=-1)
    log_det = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -0.5 * (d * LOG_2PI + log_det + maha)


def pdf(x, mean, cov):
    """The density. Example: ``multivariate_normal.pdf(x, mean, cov)``."""
    return jnp.exp(logpdf(x, mean, cov))
