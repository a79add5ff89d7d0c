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
