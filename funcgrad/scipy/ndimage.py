"""funcgrad.scipy.ndimage: ``map_coordinates`` (as ``jax.scipy.ndimage``), nearest or linear
interpolation of an N-d array at arbitrary coordinates.

Example:
    >>> from funcgrad.scipy import ndimage
    >>> ndimage.map_coordinates(jnp.arange(5.0), [jnp.array([0.5, 2.25])], order=1)
    Array([0.5 , 2.25], dtype=float32)
"""
import itertools

import funcgrad.numpy as jnp
from funcgrad.core import dtypes

__all__ = ["map_coordinates"]

_MODES = ("constant", "nearest", "mirror", "reflect", "wrap", "grid-wrap", "grid-constant",
          "grid-mirror")


def _fold(index, n, mode):
    """Integer sample positions mapped into [0, n) by the boundary ``mode`` (as SciPy)."""
    if mode in ("nearest", "constant", "grid-constant"):
        return jnp.clip(index, 0, n - 1)
    if mode in ("grid-wrap", "wrap"):
        return jnp.remainder(index, n)
    if mode == "mirror":
        if n == 1:
            return jnp.zeros_like(index)
        period = 2 * n - 2
        r = jnp.remainder(index, period)
        return jnp.where(r >= n, period - r, r)
    # reflect / grid-mirror: reflect about the array's outer edges (period 2n)
    period = 2 * n
    r = jnp.remainder(index, period)
    return jnp.where(r >= n, period - 1 - r, r)


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """Values of ``input`` at ``coordinates`` (a sequence of ``input.ndim`` arrays of one
    shape), by nearest-sample (``order=0``) or linear (``order=1``) interpolation; outside the
    array, ``mode`` extends it ("constant" gives ``cval``, "grid-constant" interpolates with
    ``cval`` samples, "nearest", "mirror", "reflect", "grid-wrap", and "wrap" as in JAX: a
    period of ``n`` samples, SciPy's "grid-wrap"; SciPy's own "wrap" repeats ``n - 1``).

    Example:
        >>> img = jnp.arange(12.0).reshape(3, 4)
        >>> from funcgrad.scipy import ndimage
        >>> ndimage.map_coordinates(img, [jnp.array([0.5]), jnp.array([1.5])], order=1)
        Array([3.5], dtype=float32)
    """
    x = jnp.asarray(input)
    if order not in (0, 1):
        raise ValueError(f"scipy.ndimage.map_coordinates: order must be 0 or 1 (nearest or "
                         f"linear interpolation), got {order!r}")
    if mode not in _MODES:
        raise ValueError(f"scipy.ndimage.map_coordinates: mode must be one of {_MODES}, got "
                         f"{mode!r}")
    coords = [jnp.asarray(c) for c in coordinates]
    if len(coords) != x.ndim:
        raise ValueError(f"scipy.ndimage.map_coordinates: needs one coordinate array per "
                         f"dimension of the input of shape {x.shape}, got {len(coords)}")
    shape = jnp.broadcast_shapes(*[c.shape for c in coords])
    work = x.dtype if jnp.issubdtype(x.dtype, jnp.inexact) else dtypes.default_float()
    coords = [jnp.broadcast_to(c, shape).astype(work) for c in coords]
    cval = jnp.asarray(cval, work)

    # per dimension: (integer sample, weight, whether it lies inside) pairs
    taps = []
    inside = jnp.ones(shape, bool)
    for c, n in zip(coords, x.shape):
        if mode == "constant":
            inside = inside & (c >= 0) & (c <= n - 1)
        if order == 0:
            taps.append([(jnp.floor(c + 0.5).astype(jnp.int32), None)])
        else:
            lo = jnp.floor(c)
            frac = c - lo
            lo = lo.astype(jnp.int32)
            taps.append([(lo, 1 - frac), (lo + 1, frac)])

    out = jnp.zeros(shape, work)
    for combo in itertools.product(*taps):
        idx, weight, valid = [], None, jnp.ones(shape, bool)
        for (i, w), n in zip(combo, x.shape):
            if mode == "grid-constant":
                valid = valid & (i >= 0) & (i < n)
            idx.append(_fold(i, n, mode))
            weight = w if weight is None else (w if w is None else weight * w)
        value = x[tuple(idx)].astype(work)
        if mode == "grid-constant":
            value = jnp.where(valid, value, cval)
        out = out + (value if weight is None else value * weight)
    if mode == "constant":
        out = jnp.where(inside, out, cval)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        # SciPy rounds halves away from zero
        out = (jnp.sign(out) * jnp.floor(jnp.abs(out) + 0.5)).astype(x.dtype)
    return out
