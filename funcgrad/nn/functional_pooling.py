"""More of ``torch.nn.functional``'s pooling: the ``*_with_indices`` forms, adaptive max pooling
in 1/2/3-d (with indices), adaptive average pooling in 3-d, power-average (LP) pooling,
max unpooling and fractional max pooling. Re-exported by ``funcgrad.nn.functional``.

Indices follow PyTorch: the flat position of each window's first maximum within its
(sample, channel) plane, so ``max_unpool*`` puts values back where ``max_pool*`` found them.

Example:
    >>> import funcgrad.nn.functional as F
    >>> x = jnp.array([[[1.0, 5.0, 2.0, 4.0, 3.0, 0.0]]])
    >>> y, idx = F.max_pool1d_with_indices(x, 2)
    >>> y, idx
    (Array([[[5., 4., 3.]]], dtype=float32), Array([[[1, 3, 4]]], dtype=int32))
    >>> F.max_unpool1d(y, idx, 2)
    Array([[[0., 5., 0., 4., 3., 0.]]], dtype=float32)
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad import debug, lax
from funcgrad.nn import functional as _F

__all__ = [
    "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d_with_indices",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices", "adaptive_avg_pool3d",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d_with_indices",
]


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``F.max_pool1d(..., return_indices=True)``: (values, flat indices).

    Example:
        >>> F.max_pool1d_with_indices(jnp.array([[[0.0, 2.0, 1.0, 3.0]]]), 2)[1]
        Array([[[1, 3]]], dtype=int32)
    """
    return _F.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``F.max_pool2d(..., return_indices=True)``: (values, flat indices into H * W).

    Example:
        >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
        >>> F.max_pool2d_with_indices(x, 2)[1]
        Array([[[[ 5,  7],
                 [13, 15]]]], dtype=int32)
    """
    return _F.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``F.max_pool3d(..., return_indices=True)``: (values, flat indices into D * H * W).

    Example:
        >>> F.max_pool3d_with_indices(jnp.arange(8.0).reshape(1, 1, 2, 2, 2), 2)[1]
        Array([[[[[7]]]]], dtype=int32)
    """
    return _F.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# --- adaptive pooling ----------------------------------------------------------------------------
def _adaptive_sizes(fname, x, output_size, n):
    x = jnp.asarray(x)
    if x.ndim not in (n + 1, n + 2):
        raise ValueError(f"{fname}: expected a {n + 1}-d or {n + 2}-d input, got shape "
                         f"{tuple(x.shape)}")
    if not isinstance(output_size, (tuple, list)):
        output_size = (output_size,) * n
    if len(output_size) != n:
        raise ValueError(f"{fname}: output_size must be an int or {n} ints, got {output_size!r}")
    spatial = x.shape[-n:]
    out = tuple(int(s) if o is None else int(o) for o, s in zip(output_size, spatial))
    if min(out) <= 0:
        raise ValueError(f"{fname}: output_size must be positive, got {output_size!r}")
    return x, spatial, out


def _bin_taps(n_in, n_out):
    """(n_out, K) input positions of each adaptive bin [floor(i n / o), ceil((i + 1) n / o)),
    padded with the bin's last position (a repeat changes neither the max nor its first
    position)."""
    starts = [(i * n_in) // n_out for i in range(n_out)]
    ends = [-(-((i + 1) * n_in) // n_out) for i in range(n_out)]
    k = max(e - s for s, e in zip(starts, ends))
    return np.array([[min(s + j, e - 1) for j in range(k)] for s, e in zip(starts, ends)],
                    np.int32)


def _adaptive_max(fname, x, output_size, n, return_indices):
    x, spatial, out = _adaptive_sizes(fname, x, output_size, n)
    lead = x.shape[:-n]
    taps = [_bin_taps(s, o) for s, o in zip(spatial, out)]
    g = x
    for i, t in enumerate(taps):         # axis -n + i becomes (o_i, K_i), at the end
        axis = len(lead) + 2 * i
        g = jnp.take(g, jnp.asarray(t.reshape(-1)), axis=axis)
        g = jnp.reshape(g, g.shape[:axis] + t.shape + g.shape[axis + 1:])
    # (..., o1, K1, o2, K2, ...) -> (..., o1, o2, ..., K1 * K2 * ...)
    nl = len(lead)
    perm = tuple(range(nl)) + tuple(nl + 2 * i for i in range(n)) + tuple(
        nl + 2 * i + 1 for i in range(n))
    g = jnp.reshape(jnp.transpose(g, perm), lead + out + (-1,))
    values = jnp.max(g, axis=-1)
    if not return_indices:
        return values
    arg = jnp.argmax(g, axis=-1).astype("int32")
    flat = jnp.zeros(arg.shape, "int32")
    rest = arg
    ks = [t.shape[1] for t in taps]
    for i in range(n):
        inner = int(np.prod(ks[i + 1:], dtype=np.int64))
        k_i = rest // inner
        rest = rest % inner
        # position along axis i of output cell o_i and tap k_i
        pos = jnp.asarray(taps[i])[_grid_index(out, i), k_i]
        flat = flat * spatial[i] + pos
    return values, flat


def _grid_index(out, i):
    """The output coordinate along axis ``i``, shaped to broadcast over ``out``."""
    shape = [1] * len(out)
    shape[i] = out[i]
    return jnp.reshape(jnp.arange(out[i], dtype="int32"), shape)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max over PyTorch's adaptive bins of the last axis, any input length.

    Example:
        >>> F.adaptive_max_pool1d(jnp.array([[[1.0, 3.0, 2.0, 5.0, 4.0]]]), 2)
        Array([[[3., 5.]]], dtype=float32)
    """
    return _adaptive_max("F.adaptive_max_pool1d", input, output_size, 1, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max over PyTorch's adaptive bins of the last two axes (None keeps an axis), any size.

    Example:
        >>> F.adaptive_max_pool2d(jnp.arange(25.0).reshape(1, 1, 5, 5), 2)
        Array([[[[12., 14.],
                 [22., 24.]]]], dtype=float32)
    """
    return _adaptive_max("F.adaptive_max_pool2d", input, output_size, 2, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max over PyTorch's adaptive bins of the last three axes.

    Example:
        >>> F.adaptive_max_pool3d(jnp.ones((2, 3, 5, 6, 7)), (2, 3, 1)).shape
        (2, 3, 2, 3, 1)
    """
    return _adaptive_max("F.adaptive_max_pool3d", input, output_size, 3, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    """``F.adaptive_max_pool1d(..., return_indices=True)``.

    Example:
        >>> F.adaptive_max_pool1d_with_indices(jnp.array([[[1.0, 3.0, 2.0]]]), 1)[1]
        Array([[[1]]], dtype=int32)
    """
    return _adaptive_max("F.adaptive_max_pool1d", input, output_size, 1, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    """``F.adaptive_max_pool2d(..., return_indices=True)``.

    Example:
        >>> F.adaptive_max_pool2d_with_indices(jnp.arange(9.0).reshape(1, 1, 3, 3), 1)[1]
        Array([[[[8]]]], dtype=int32)
    """
    return _adaptive_max("F.adaptive_max_pool2d", input, output_size, 2, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    """``F.adaptive_max_pool3d(..., return_indices=True)``.

    Example:
        >>> F.adaptive_max_pool3d_with_indices(jnp.arange(8.0).reshape(1, 1, 2, 2, 2), 1)[1]
        Array([[[[[7]]]]], dtype=int32)
    """
    return _adaptive_max("F.adaptive_max_pool3d", input, output_size, 3, True)


def adaptive_avg_pool3d(input, output_size):
    """Average over PyTorch's adaptive bins of the last three axes (None keeps an axis).

    Example:
        >>> F.adaptive_avg_pool3d(jnp.arange(8.0).reshape(1, 1, 2, 2, 2), 1)
        Array([[[[[3.5]]]]], dtype=float32)
    """
    x, spatial, out = _adaptive_sizes("F.adaptive_avg_pool3d", input, output_size, 3)
    dt = np.dtype(x.dtype)
    m = [_F._adaptive_matrix(s, o, dt) for s, o in zip(spatial, out)]
    return jnp.einsum("...dhw,id,jh,kw->...ijk", x, *m)


# --- power-average pooling ----------------------------------------------------------------------
def _lp_pool(n, fname, x, norm_type, kernel_size, stride, ceil_mode):
    k = _F._tuple(kernel_size, n, f"{fname} kernel_size")
    p = float(norm_type)
    if p == 0:
        raise ValueError(f"{fname}: norm_type must be non-zero, got {norm_type}")
    x = jnp.asarray(x)
    avg = (_F.avg_pool1d, _F.avg_pool2d, _F.avg_pool3d)[n - 1]
    powered = x ** p if p != 1 else x
    s = avg(powered, k, stride, 0, ceil_mode)
    # PyTorch scales the window average back by the full kernel size (also for the partial
    # windows of ceil_mode) and takes sign(s) * relu(|s|) before the root
    s = jnp.sign(s) * jnp.maximum(jnp.abs(s), 0) * float(np.prod(k))
    return s ** (1.0 / p)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each window)^(1/p), PyTorch's ``F.lp_pool1d``.

    Example:
        >>> F.lp_pool1d(jnp.array([[[3.0, 4.0, 1.0, 0.0]]]), 2, 2)
        Array([[[5., 1.]]], dtype=float32)
    """
    return _lp_pool(1, "F.lp_pool1d", input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each 2-d window)^(1/p), PyTorch's ``F.lp_pool2d``.

    Example:
        >>> F.lp_pool2d(jnp.ones((1, 1, 4, 4)), 2, 2)
        Array([[[[2., 2.],
                 [2., 2.]]]], dtype=float32)
    """
    return _lp_pool(2, "F.lp_pool2d", input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum of x^p over each 3-d window)^(1/p), PyTorch's ``F.lp_pool3d``.

    Example:
        >>> F.lp_pool3d(jnp.ones((1, 1, 2, 2, 2)), 1, 2)
        Array([[[[[8.]]]]], dtype=float32)
    """
    return _lp_pool(3, "F.lp_pool3d", input, norm_type, kernel_size, stride, ceil_mode)


# --- max unpooling --------------------------------------------------------------------------------
def _max_unpool(n, fname, x, indices, kernel_size, stride, padding, output_size):
    x, indices = jnp.asarray(x), jnp.asarray(indices)
    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise TypeError(f"{fname}: indices must be integers, got {indices.dtype}")
    if x.shape != indices.shape:
        raise ValueError(f"{fname}: input {tuple(x.shape)} and indices {tuple(indices.shape)} "
                         f"must have the same shape")
    if x.ndim not in (n + 1, n + 2):
        raise ValueError(f"{fname}: expected a {n + 1}-d or {n + 2}-d input, got shape "
                         f"{tuple(x.shape)}")
    k = _F._tuple(kernel_size, n, f"{fname} kernel_size")
    s = _F._tuple(stride if stride is not None else kernel_size, n, f"{fname} stride")
    p = _F._tuple(padding, n, f"{fname} padding")
    spatial_in = x.shape[-n:]
    default = tuple((i - 1) * ss - 2 * pp + kk for i, ss, pp, kk in zip(spatial_in, s, p, k))
    if output_size is None:
        out = default
    else:
        out = tuple(int(v) for v in output_size)[-n:]
        if len(out) != n:
            raise ValueError(f"{fname}: output_size must have {n} (or {n + 2}) entries, got "
                             f"{output_size!r}")
        for o, d, ss in zip(out, default, s):
            if not d - ss < o < d + ss:
                raise ValueError(f"{fname}: output_size {out} must be within a stride of the "
                                 f"default size {default} (stride {s})")
    total = int(np.prod(out, dtype=np.int64))
    lead = x.shape[:-n]
    rows = int(np.prod(lead, dtype=np.int64))
    flat_x = jnp.reshape(x, (rows, -1))
    flat_i = jnp.reshape(indices, (rows, -1)).astype("int32")
    debug.check_ids(flat_i, total, fname,
                    of=f"the output of {total} elements per plane (output_size {out})")
    row_ids = jnp.broadcast_to(jnp.arange(rows, dtype="int32")[:, None], flat_i.shape)
    zeros = jnp.zeros((rows, total), x.dtype)
    # Overlapping windows can pick one element twice: the value is written once, and (as in
    # PyTorch, whose backward gathers) each copy receives the output's gradient at its index.
    kept = zeros.at[row_ids, flat_i].set(lax.stop_gradient(flat_x))
    added = zeros.at[row_ids, flat_i].add(flat_x)
    y = kept + (added - lax.stop_gradient(added))
    return jnp.reshape(y, lead + out)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool1d``: each value goes to its index, zeros elsewhere.

    Example:
        >>> F.max_unpool1d(jnp.array([[[5.0, 4.0]]]), jnp.array([[[1, 2]]]), 2)
        Array([[[0., 5., 4., 0.]]], dtype=float32)
    """
    return _max_unpool(1, "F.max_unpool1d", input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool2d`` (indices into each H * W plane).

    Example:
        >>> y, i = F.max_pool2d(jnp.arange(16.0).reshape(1, 1, 4, 4), 2, return_indices=True)
        >>> F.max_unpool2d(y, i, 2)[0, 0]
        Array([[ 0.,  0.,  0.,  0.],
               [ 0.,  5.,  0.,  7.],
               [ 0.,  0.,  0.,  0.],
               [ 0., 13.,  0., 15.]], dtype=float32)
    """
    return _max_unpool(2, "F.max_unpool2d", input, indices, kernel_size, stride, padding,
                       output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of ``max_pool3d`` (indices into each D * H * W volume).

    Example:
        >>> F.max_unpool3d(jnp.ones((1, 1, 1, 1, 1)), jnp.array([[[[[7]]]]]), 2).shape
        (1, 1, 2, 2, 2)
    """
    return _max_unpool(3, "F.max_unpool3d", input, indices, kernel_size, stride, padding,
                       output_size)


# --- fractional max pooling -------------------------------------------------------------------------
def _fractional_starts(u, n_in, n_out, k):
    """PyTorch's pseudo-random window starts for one axis: ``u`` (..., ) uniform samples in
    [0, 1) -> (..., n_out) integer starts."""
    if n_out == 1:
        return jnp.full(u.shape + (1,), n_in - k, "int32")
    alpha = (n_in - k) / (n_out - 1)
    i = jnp.arange(n_out - 1, dtype=u.dtype)
    u = u[..., None]
    starts = (jnp.floor((i + u) * alpha) - jnp.floor(u * alpha)).astype("int32")
    last = jnp.full(starts.shape[:-1] + (1,), n_in - k, "int32")
    return jnp.concatenate([starts, last], axis=-1)


def _fractional_max(n, fname, x, kernel_size, output_size, output_ratio, return_indices,
                    samples, key):
    x = jnp.asarray(x)
    if x.ndim not in (n + 1, n + 2):
        raise ValueError(f"{fname}: expected a {n + 1}-d or {n + 2}-d input, got shape "
                         f"{tuple(x.shape)}")
    unbatched = x.ndim == n + 1
    if unbatched:
        x = x[None]
    k = _F._tuple(kernel_size, n, f"{fname} kernel_size")
    spatial = x.shape[2:]
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{fname}: give output_size or output_ratio")
        ratio = output_ratio if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * n
        out = tuple(int(s * float(r)) for s, r in zip(spatial, ratio))
    else:
        out = _F._tuple(output_size, n, f"{fname} output_size")
    for s, o, kk in zip(spatial, out, k):
        if o + kk - 1 > s:
            raise ValueError(f"{fname}: output_size {out} with kernel_size {k} needs an input "
                             f"of at least {tuple(o + kk - 1 for o, kk in zip(out, k))}, got "
                             f"{tuple(spatial)}")
    nb, c = x.shape[:2]
    if samples is None:
        import funcgrad.random as fr
        key = _F._draw_key(key)
        if not hasattr(key, "shape") or getattr(key, "shape", None) == ():
            key = fr.PRNGKey(int(key))
        samples = fr.uniform(key, (nb, c, n), x.dtype)
    samples = jnp.asarray(samples)
    if samples.shape != (nb, c, n):
        raise ValueError(f"{fname}: _random_samples must have shape {(nb, c, n)}, got "
                         f"{tuple(samples.shape)}")
    # PyTorch orders the samples (w, h) in 2-d but (d, h, w) in 3-d
    order = (1, 0) if n == 2 else tuple(range(n))
    g = x
    positions = []
    for i in range(n):
        st = _fractional_starts(samples[..., order[i]], spatial[i], out[i], k[i])  # (N,C,o)
        taps = st[..., None] + jnp.arange(k[i], dtype="int32")                     # (N,C,o,k)
        positions.append(taps)
        axis = 2 + 2 * i
        shape = taps.shape[:2] + (1,) * (2 * i) + (out[i] * k[i],) + (1,) * (n - i - 1)
        idx = jnp.reshape(taps, shape)
        g = jnp.take_along_axis(g, idx, axis=axis)
        g = jnp.reshape(g, g.shape[:axis] + (out[i], k[i]) + g.shape[axis + 1:])
    perm = (0, 1) + tuple(2 + 2 * i for i in range(n)) + tuple(3 + 2 * i for i in range(n))
    g = jnp.reshape(jnp.transpose(g, perm), (nb, c) + tuple(out) + (-1,))
    values = jnp.max(g, axis=-1)
    result = values
    if return_indices:
        arg = jnp.argmax(g, axis=-1).astype("int32")
        flat = jnp.zeros(arg.shape, "int32")
        rest = arg
        for i in range(n):
            inner = int(np.prod(k[i + 1:], dtype=np.int64))
            k_i, rest = rest // inner, rest % inner
            taps = positions[i]                                          # (N, C, o_i, k_i)
            shape = (nb, c) + tuple(out[j] if j == i else 1 for j in range(n)) + (k[i],)
            t = jnp.broadcast_to(jnp.reshape(taps, shape), (nb, c) + tuple(out) + (k[i],))
            pos = jnp.take_along_axis(t, k_i[..., None], axis=-1)[..., 0]
            flat = flat * spatial[i] + pos
        result = (values, flat)
    if unbatched:
        return tuple(r[0] for r in result) if return_indices else result[0]
    return result


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None, key=None):
    """Fractional max pooling (Graham, 2014) as PyTorch: windows of ``kernel_size`` at
    pseudo-random starts that step by ``input / output`` on average. The start pattern per
    (sample, channel) comes from ``_random_samples`` (N, C, 2) uniform in [0, 1) when given
    (PyTorch's argument: the same samples give PyTorch's result), else from ``key`` (or the
    host generator, ``funcgrad.manual_seed``).

    Example:
        >>> x = jnp.arange(25.0).reshape(1, 1, 5, 5)
        >>> F.fractional_max_pool2d(x, 2, output_size=3,
        ...                         _random_samples=jnp.full((1, 1, 2), 0.5))
        Array([[[[ 6.,  8.,  9.],
                 [16., 18., 19.],
                 [21., 23., 24.]]]], dtype=float32)
    """
    return _fractional_max(2, "F.fractional_max_pool2d", input, kernel_size, output_size,
                           output_ratio, return_indices, _random_samples, key)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                          return_indices=False, _random_samples=None, key=None):
    """Fractional max pooling over (D, H, W); ``_random_samples`` is (N, C, 3) as PyTorch's.

    Example:
        >>> F.fractional_max_pool3d(jnp.ones((1, 2, 6, 6, 6)), 2, output_ratio=0.5,
        ...                         key=0).shape
        (1, 2, 3, 3, 3)
    """
    return _fractional_max(3, "F.fractional_max_pool3d", input, kernel_size, output_size,
                           output_ratio, return_indices, _random_samples, key)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None, key=None):
    """``F.fractional_max_pool2d(..., return_indices=True)``.

    Example:
        >>> x = jnp.arange(16.0).reshape(1, 1, 4, 4)
        >>> F.fractional_max_pool2d_with_indices(x, 2, output_size=1)[1]
        Array([[[[15]]]], dtype=int32)
    """
    return _fractional_max(2, "F.fractional_max_pool2d", input, kernel_size, output_size,
                           output_ratio, True, _random_samples, key)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None, key=None):
    """``F.fractional_max_pool3d(..., return_indices=True)``.

    Example:
        >>> x = jnp.arange(8.0).reshape(1, 1, 2, 2, 2)
        >>> F.fractional_max_pool3d_with_indices(x, 2, output_size=1)[1]
        Array([[[[[7]]]]], dtype=int32)
    """
    return _fractional_max(3, "F.fractional_max_pool3d", input, kernel_size, output_size,
                           output_ratio, True, _random_samples, key)
