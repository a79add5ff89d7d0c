"""funcgrad.scipy.stats: probability distributions as modules of functions (as
``jax.scipy.stats``): ``norm.logpdf(x, loc, scale)``, ``gamma.cdf(x, a)``, ...

Example:
    >>> from funcgrad.scipy import stats
    >>> stats.norm.cdf(jnp.array(1.96))
"""
from funcgrad.scipy.stats import (bernoulli, beta, categorical, cauchy, chi2,  # noqa: F401
                                  dirichlet, expon, gamma, geom, laplace, logistic,
                                  multivariate_normal, norm, poisson, t, uniform)
