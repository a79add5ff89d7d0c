"""The Dirichlet distribution (as ``scipy.stats.dirichlet``; the categories are the first axis
of ``x``, as SciPy).

Example:
    >>> from funcgrad.scipy.stats import dirichlet
    >>> dirichlet.logpdf(jnp.array([0.2, 0.3, 0.5]), jnp.array([1.0, 2.0, 3.0]))
    Array(1.5040779, dtype=float32)
"""
import funcgrad.numpy as jnp
from funcgrad.scipy import special
from funcgrad.scipy.stats._util import promote


def logpdf(x, alpha):
    """The log density of ``x`` (shape ``(K, ...)``, each column on the simplex) for
    concentration ``alpha`` (shape ``(K,)``); -inf off the simplex.

    Example:
        >>> from funcgrad.scipy.stats import dirichlet
        >>> dirichlet.logpdf(jnp.array([0.2, 0.8]), jnp.array([2.0, 2.0]))
        Array(-0.04082119, dtype=float32)
    """
    x, alpha = promote(x), promote(alpha)
    if alpha.ndim != 1 or x.ndim < 1 or x.shape[0] != alpha.shape[0]:
        raise ValueError(f"scipy.stats.dirichlet.logpdf: x must have shape (K, ...) with K the "
                         f"length of the 1-D alpha; got x {x.shape} and alpha {alpha.shape}")
    x, alpha = jnp.asarray(x), jnp.asarray(alpha).astype(x.dtype)
    a = jnp.reshape(alpha, alpha.shape + (1,) * (x.ndim - 1))
    norm = jnp.sum(special.gammaln(alpha)) - special.gammaln(jnp.sum(alpha))
    val = jnp.sum(special.xlogy(a - 1.0, x), axis=0) - norm
    on_simplex = jnp.all(x >= 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - 1.0) < 1e-6 *
                                            x.shape[0] + 1e-6)
    return jnp.where(on_simplex, val, -jnp.inf)


def pdf(x, alpha):
    """The density. Example: ``dirichlet.pdf(x, alpha)``."""
    return jnp.exp(logpdf(x, alpha))
