"""Argument handling shared by the distributions: promotion to one float dtype, broadcasting,
and the loc/scale standardization SciPy applies to every continuous distribution."""
import math

import funcgrad.numpy as jnp
from funcgrad.scipy.special import _floats

LOG_2PI = math.log(2 * math.pi)


def promote(*args):
    """``args`` as arrays of one inexact dtype, broadcast together."""
    out = _floats(*args)
    if len(args) == 1:
        return out
    return jnp.broadcast_arrays(*out)


def standardize(x, loc, scale):
    """(z, log(scale), scale) for ``z = (x - loc) / scale``, all broadcast together."""
    x, loc, scale = promote(x, loc, scale)
    return (x - loc) / scale, jnp.log(scale), scale


def outside_support_nan(value, scale):
    """NaN where the scale is not positive (as SciPy)."""
    return jnp.where(scale > 0, value, jnp.nan)


# A location-scale family is its standard form moved by ``loc`` and stretched by ``scale``;
# these three build a distribution's functions from the standard ones.
def on_standard(standard_fn, x, loc, scale):
    """``standard_fn(z)`` at ``z = (x - loc) / scale`` (CDF, survival and their logs)."""
    z, _, scale = standardize(x, loc, scale)
    return outside_support_nan(standard_fn(z), scale)


def log_density(standard_logpdf, x, loc, scale):
    """The log density at ``x``: the standard one at ``z`` minus ``log(scale)``."""
    z, log_scale, scale = standardize(x, loc, scale)
    return outside_support_nan(standard_logpdf(z) - log_scale, scale)


def quantile(standard_ppf, q, loc, scale):
    """``loc + scale * standard_ppf(q)`` (the quantile and inverse survival functions)."""
    q, loc, scale = promote(q, loc, scale)
    return outside_support_nan(standard_ppf(q) * scale + loc, scale)
