"""funcgrad.scipy.interpolate: ``RegularGridInterpolator`` (as ``jax.scipy.interpolate``),
linear or nearest interpolation on a rectilinear grid.

Example:
    >>> from funcgrad.scipy.interpolate import RegularGridInterpolator
    >>> f = RegularGridInterpolator((jnp.array([0.0, 1.0, 2.0]),), jnp.array([0.0, 10.0, 40.0]))
    >>> f(jnp.array([[0.5], [1.5]]))
    Array([ 5., 25.], dtype=float32)
"""
import itertools

import funcgrad.numpy as jnp
from funcgrad.core import dtypes
from funcgrad.tree_util import register_pytree_node

__all__ = ["RegularGridInterpolator"]


class RegularGridInterpolator:
    """Interpolate ``values`` given on the grid ``points`` (one increasing 1-d array per
    dimension) at query points ``xi`` of shape ``(..., ndim)``. ``method`` is "linear" or
    "nearest"; queries outside the grid give ``fill_value`` (None: extrapolate). A pytree, so
    it can be passed through ``jit`` and ``grad``.

    Example:
        >>> from funcgrad.scipy.interpolate import RegularGridInterpolator
        >>> xs, ys = jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0, 2.0])
        >>> table = xs[:, None] * 10 + ys[None, :]
        >>> interp = RegularGridInterpolator((xs, ys), table)
        >>> interp(jnp.array([[0.3, 0.7]])).round(4)        # 10 * 0.3 + 0.7
        Array([3.7], dtype=float32)
    """

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=float("nan")):
        if method not in ("linear", "nearest"):
            raise ValueError(f"scipy.interpolate.RegularGridInterpolator: method must be "
                             f"'linear' or 'nearest', got {method!r}")
        if bounds_error:
            raise ValueError("scipy.interpolate.RegularGridInterpolator: bounds_error=True is "
                             "not supported (queries may be traced); use fill_value=... and "
                             "check the result, or clip the queries")
        values = jnp.asarray(values)
        if not jnp.issubdtype(values.dtype, jnp.inexact):
            values = values.astype(dtypes.default_float())
        points = tuple(jnp.asarray(p) for p in points)
        if len(points) > values.ndim:
            raise ValueError(f"scipy.interpolate.RegularGridInterpolator: {len(points)} grid "
                             f"axes for values of shape {values.shape}")
        for i, p in enumerate(points):
            if p.ndim != 1 or p.shape[0] != values.shape[i]:
                raise ValueError(f"scipy.interpolate.RegularGridInterpolator: points[{i}] "
                                 f"must be 1-d with {values.shape[i]} entries (values shape "
                                 f"{values.shape}), got shape {p.shape}")
        self.grid = points
        self.values = values
        self.method = method
        self.bounds_error = bounds_error
        self.fill_value = fill_value

    def tree_flatten(self):
        return (self.grid, self.values), (self.method, self.fill_value)

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.grid, obj.values = children
        obj.method, obj.fill_value = aux
        obj.bounds_error = False
        return obj

    def __call__(self, xi, method=None):
        """The interpolated values at ``xi`` (shape ``(..., ndim)``); trailing value axes are
        kept.

        Example:
            >>> from funcgrad.scipy.interpolate import RegularGridInterpolator
            >>> interp = RegularGridInterpolator((jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0, 2.0])),
            ...                                  jnp.array([[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]]))
            >>> interp(jnp.array([[0.3, 0.7], [1.0, 2.0]])).round(4)
            Array([ 3.7, 12. ], dtype=float32)
        """
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ValueError(f"RegularGridInterpolator: method must be 'linear' or 'nearest', "
                             f"got {method!r}")
        nd = len(self.grid)
        xi = jnp.asarray(xi)
        if xi.ndim == 0 or xi.shape[-1] != nd:
            raise ValueError(f"RegularGridInterpolator: queries must have shape (..., {nd}) "
                             f"for a {nd}-d grid, got shape {xi.shape}")
        xi = xi.astype(jnp.result_type(xi.dtype, self.values.dtype))
        batch = xi.shape[:-1]
        idxs, fracs = [], []
        outside = jnp.zeros(batch, bool)
        for d, g in enumerate(self.grid):
            x = xi[..., d]
            n = g.shape[0]
            i = jnp.clip(jnp.searchsorted(g, x, side="right") - 1, 0, max(n - 2, 0))
            lo, hi = g[i], g[jnp.minimum(i + 1, n - 1)]
            span = jnp.where(hi == lo, 1, hi - lo)
            fracs.append(((x - lo) / span).astype(xi.dtype))
            idxs.append(i)
            outside = outside | (x < g[0]) | (x > g[-1])
        extra = (1,) * (self.values.ndim - nd)
        if method == "nearest":
            nearest = tuple(jnp.where(f <= 0.5, i, i + 1).clip(0, g.shape[0] - 1)
                            for i, f, g in zip(idxs, fracs, self.grid))
            out = self.values[nearest]
        else:
            out = 0
            for corner in itertools.product((0, 1), repeat=nd):
                weight = 1
                index = []
                for d, bit in enumerate(corner):
                    n = self.grid[d].shape[0]
                    index.append(jnp.minimum(idxs[d] + bit, n - 1))
                    weight = weight * (fracs[d] if bit else 1 - fracs[d])
                out = out + self.values[tuple(index)] * jnp.reshape(weight, batch + extra)
        if self.fill_value is not None:
            fill = jnp.asarray(self.fill_value, out.dtype)
            out = jnp.where(jnp.reshape(outside, batch + extra), fill, out)
        return out


register_pytree_node(RegularGridInterpolator, lambda r: r.tree_flatten(),
                     RegularGridInterpolator.tree_unflatten)
