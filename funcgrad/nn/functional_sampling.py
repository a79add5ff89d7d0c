"""Spatial transformers: ``F.affine_grid`` and ``F.grid_sample`` as in PyTorch (2-d and 3-d;
bilinear/trilinear, nearest and bicubic; zeros, border and reflection padding;
``align_corners``). Differentiable in the input and in the grid. Re-exported by
``funcgrad.nn.functional``.

Example:
    >>> import funcgrad.nn.functional as F
    >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
    >>> theta = jnp.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])    # the identity
    >>> grid = F.affine_grid(theta, (1, 1, 4, 4), align_corners=False)
    >>> bool(jnp.allclose(F.grid_sample(x, grid, align_corners=False), x))
    True
"""
import itertools

import numpy as np

import funcgrad.numpy as jnp

__all__ = ["affine_grid", "grid_sample"]


def _base_coords(n, align_corners, dtype):
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (2.0 * np.arange(n) + 1.0) / n - 1.0


def affine_grid(theta, size, align_corners=None):
    """Sampling grid of an affine map: for ``size`` (N, C, H, W) and ``theta`` (N, 2, 3), the
    (N, H, W, 2) normalized (x, y) source coordinates ``theta @ [x, y, 1]`` of every output
    pixel; for (N, C, D, H, W) and (N, 3, 4), an (N, D, H, W, 3) grid. ``align_corners``
    (default False) as in ``grid_sample``.

    Example:
        >>> theta = jnp.array([[[2.0, 0.0, 0.0], [0.0, 1.0, 0.5]]])
        >>> F.affine_grid(theta, (1, 1, 1, 2), align_corners=False)
        Array([[[[-1. ,  0.5],
                 [ 1. ,  0.5]]]], dtype=float32)
    """
    theta = jnp.asarray(theta)
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise ValueError(f"F.affine_grid: size must be (N, C, H, W) or (N, C, D, H, W), got "
                         f"{size}")
    nd = len(size) - 2
    if not jnp.issubdtype(theta.dtype, jnp.floating):
        raise TypeError(f"F.affine_grid: theta must be floating point, got {theta.dtype}")
    if theta.shape != (size[0], nd, nd + 1):
        raise ValueError(f"F.affine_grid: for size {size} theta must have shape "
                         f"{(size[0], nd, nd + 1)}, got {tuple(theta.shape)}")
    if min(size[2:]) <= 0:
        raise ValueError(f"F.affine_grid: spatial sizes must be positive, got {size}")
    spatial = size[2:]
    # coordinates are (x, y[, z]): x runs along the last axis
    axes = [_base_coords(n, bool(align_corners), np.float64) for n in reversed(spatial)]
    mesh = np.meshgrid(*axes, indexing="ij")          # each (W, H[, D])
    base = np.stack([m.transpose(tuple(reversed(range(nd)))) for m in mesh]
                    + [np.ones(spatial)], axis=-1)    # (*spatial, nd + 1)
    base = jnp.asarray(base.astype(np.dtype(theta.dtype)))
    return jnp.einsum("...k,nik->n...i", base, theta)


def _unnormalize(coord, n, align_corners):
    if align_corners:
        return (coord + 1.0) / 2.0 * (n - 1)
    return ((coord + 1.0) * n - 1.0) / 2.0


def _reflect(coord, twice_low, twice_high):
    if twice_low == twice_high:
        return jnp.zeros_like(coord)
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    c = jnp.abs(coord - lo)
    extra = jnp.fmod(c, span)
    flips = jnp.floor(c / span)
    return jnp.where(jnp.fmod(flips, 2.0) == 0, extra + lo, span - extra + lo)


def _source_coord(coord, n, padding_mode, align_corners):
    """Pixel coordinate of a normalized one, with PyTorch's padding-mode folding."""
    c = _unnormalize(coord, n, align_corners)
    if padding_mode == "border":
        c = jnp.clip(c, 0, n - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align_corners else _reflect(c, -1, 2 * n - 1)
        c = jnp.clip(c, 0, n - 1)
    return c


def _gather(x, idx, valid, spatial):
    """x (N, C, *spatial) at integer positions ``idx`` (a list of (N, *out) arrays, one per
    spatial axis) -> (N, C, *out); positions where ``valid`` is False give 0."""
    nb, c = x.shape[:2]
    flat = jnp.zeros(idx[0].shape, "int32")
    for i, n in zip(idx, spatial):
        flat = flat * n + jnp.clip(i, 0, n - 1).astype("int32")
    out_shape = flat.shape[1:]
    flat = jnp.reshape(flat, (nb, 1, -1))
    vals = jnp.take_along_axis(jnp.reshape(x, (nb, c, -1)), jnp.broadcast_to(
        flat, (nb, c, flat.shape[-1])), axis=2)
    vals = jnp.reshape(vals, (nb, c) + out_shape)
    if valid is None:
        return vals
    return jnp.where(valid[:, None], vals, jnp.zeros((), x.dtype))


def _in_bounds(idx, spatial):
    ok = None
    for i, n in zip(idx, spatial):
        v = (i >= 0) & (i <= n - 1)
        ok = v if ok is None else ok & v
    return ok


def _cubic_weights(t, a=-0.75):
    """PyTorch's cubic-convolution weights of the 4 taps at offsets -1, 0, 1, 2."""
    def near(s):
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample ``input`` (N, C, H, W) at the normalized (x, y) locations of ``grid``
    (N, Ho, Wo, 2), or (N, C, D, H, W) at (x, y, z) of an (N, Do, Ho, Wo, 3) grid, as PyTorch:
    -1 and 1 are the centers of the edge pixels with ``align_corners=True``, their outer edges
    otherwise (the default). ``mode``: 'bilinear' (trilinear for 5-d), 'nearest' (ties to
    even) or 'bicubic' (4-d only); ``padding_mode``: 'zeros', 'border' or 'reflection'.

    Example:
        >>> x = jnp.array([[[[0.0, 1.0], [2.0, 3.0]]]])
        >>> F.grid_sample(x, jnp.array([[[[0.0, 0.0]]]]), align_corners=True)   # the center
        Array([[[[1.5]]]], dtype=float32)
    """
    x, grid = jnp.asarray(input), jnp.asarray(grid)
    if x.ndim not in (4, 5):
        raise ValueError(f"F.grid_sample: expected a 4-d or 5-d input, got shape "
                         f"{tuple(x.shape)}")
    nd = x.ndim - 2
    if grid.ndim != x.ndim or grid.shape[0] != x.shape[0] or grid.shape[-1] != nd:
        raise ValueError(f"F.grid_sample: for input {tuple(x.shape)} the grid must have shape "
                         f"(N={x.shape[0]}, ..., {nd}) with {x.ndim} axes, got "
                         f"{tuple(grid.shape)}")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"F.grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got "
                         f"{mode!r}")
    if mode == "bicubic" and nd != 2:
        raise ValueError("F.grid_sample: mode='bicubic' supports 4-d inputs only")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"F.grid_sample: padding_mode must be 'zeros', 'border' or "
                         f"'reflection', got {padding_mode!r}")
    align = bool(align_corners)
    spatial = x.shape[2:]
    grid = grid.astype(x.dtype)
    # grid's last axis is (x, y[, z]); spatial axes are (..., H, W): reverse
    comps = [grid[..., nd - 1 - i] for i in range(nd)]
    zeros = padding_mode == "zeros"
    if mode == "bicubic":
        c = [_unnormalize(g, n, align) for g, n in zip(comps, spatial)]
        base = [jnp.floor(v) for v in c]
        w = [_cubic_weights(v - b) for v, b in zip(c, base)]
        out = None
        for (dy, wy), (dx, wx) in itertools.product(enumerate(w[0]), enumerate(w[1])):
            iy, ix = base[0] + (dy - 1), base[1] + (dx - 1)
            if not zeros:       # PyTorch folds each tap back in with the padding rule
                iy = _fold_index(iy, spatial[0], padding_mode, align)
                ix = _fold_index(ix, spatial[1], padding_mode, align)
            idx = [iy.astype("int32"), ix.astype("int32")]
            term = _gather(x, idx, _in_bounds(idx, spatial), spatial) * (wy * wx)[:, None]
            out = term if out is None else out + term
        return out
    c = [_source_coord(g, n, padding_mode, align) for g, n in zip(comps, spatial)]
    if mode == "nearest":
        idx = [jnp.round(v).astype("int32") for v in c]
        return _gather(x, idx, _in_bounds(idx, spatial), spatial)
    lo = [jnp.floor(v) for v in c]
    frac = [v - f for v, f in zip(c, lo)]
    out = None
    for corner in itertools.product((0, 1), repeat=nd):
        idx = [(f + o).astype("int32") for f, o in zip(lo, corner)]
        weight = None
        for o, t in zip(corner, frac):
            wi = t if o else 1.0 - t
            weight = wi if weight is None else weight * wi
        term = _gather(x, idx, _in_bounds(idx, spatial), spatial) * weight[:, None]
        out = term if out is None else out + term
    return out


def _fold_index(i, n, padding_mode, align):
    if padding_mode == "border":
        return jnp.clip(i, 0, n - 1)
    r = _reflect(i, 0, 2 * (n - 1)) if align else _reflect(i, -1, 2 * n - 1)
    return jnp.clip(r, 0, n - 1)
