"""funcgrad.scipy.stats: probability distributions as modules of functions (as
``jax.scipy.stats``): ``norm.logpdf(x, loc, scale)``, ``gamma.cdf(x, a)``, ...

Example:
    >>> from funcgrad.scipy import stats
    >>> stats.norm.cdf(jnp.array(1.96))
    Array(0.9750021, dtype=float32)
"""
from funcgrad.scipy.stats import (bernoulli, beta, binom, categorical, cauchy,  # noqa: F401
                                  chi2, dirichlet, expon, gamma, geom, gumbel_l, gumbel_r,
                                  laplace, logistic, multivariate_normal, nbinom, norm, pareto,
                                  poisson, t, uniform)
