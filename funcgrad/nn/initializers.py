"""funcgrad.nn.initializers: parameter initializers with JAX's ``(key, shape, dtype)`` signature
(as ``jax.nn.initializers``), for functional code that builds parameter pytrees.

``funcgrad.nn.init`` keeps PyTorch's in-place style (``init.xavier_uniform_(w)``); this module
returns new arrays from a PRNG key, so it works under ``jit`` and ``vmap``.

Example:
    >>> from funcgrad.nn import initializers
    >>> w = initializers.glorot_normal()(funcgrad.random.PRNGKey(0), (784, 512))
    >>> b = initializers.zeros(funcgrad.random.PRNGKey(1), (512,))
"""
import math
from typing import Protocol

import numpy as np

import funcgrad.numpy as jnp
from funcgrad import lax, random
from funcgrad.core import dtypes

__all__ = [
    "Initializer", "compute_fans", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
    "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
    "orthogonal", "truncated_normal", "uniform", "variance_scaling", "xavier_normal",
    "xavier_uniform", "zeros",
]

# The standard deviation of a standard normal truncated to (-2, 2): dividing by it makes the
# truncated samples' variance the requested one.
_TRUNCATED_STD = 0.87962566103423978


class Initializer(Protocol):
    """What every initializer here is: ``init(key, shape, dtype=None) -> Array``."""

    def __call__(self, key, shape, dtype=None): ...


def _dtype(name, dtype, float_only=True):
    dt = dtypes.canonicalize(dtype if dtype is not None else dtypes.default_float())
    if float_only and not dtypes.is_float(dt):
        raise TypeError(f"initializers.{name}: dtype must be a floating dtype, got {dt}")
    return dt


def _shape(name, shape):
    try:
        return tuple(int(d) for d in shape)
    except TypeError:
        raise TypeError(f"initializers.{name}: shape must be a sequence of ints, got "
                        f"{shape!r}") from None


def zeros(key, shape, dtype=None):
    """An array of zeros (the key is ignored).

    Example:
        >>> key = random.key(0)
        >>> nn.initializers.zeros(key, (2, 3))
        Array([[0., 0., 0.],
               [0., 0., 0.]], dtype=float32)
    """
    return jnp.zeros(_shape("zeros", shape), _dtype("zeros", dtype, float_only=False))


def ones(key, shape, dtype=None):
    """An array of ones (the key is ignored).

    Example:
        >>> key = random.key(0)
        >>> nn.initializers.ones(key, (3,))
        Array([1., 1., 1.], dtype=float32)
    """
    return jnp.ones(_shape("ones", shape), _dtype("ones", dtype, float_only=False))


def constant(value, dtype=None):
    """An initializer filling every element with ``value``.

    Example:
        >>> key = random.key(0)
        >>> nn.initializers.constant(0.1)(key, (3,))
        Array([0.1, 0.1, 0.1], dtype=float32)
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype("constant", dtype, float_only=False)
        return jnp.full(_shape("constant", shape), value, dt)
    return init


def uniform(scale=1e-2, dtype=None):
    """An initializer drawing uniformly from ``[0, scale)``.

    Example:
        >>> key = random.key(0)
        >>> nn.initializers.uniform(0.5)(key, (2, 2)).round(4)
        Array([[0.4738, 0.4893],
               [0.1661, 0.2343]], dtype=float32)
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype("uniform", dtype)
        return random.uniform(key, _shape("uniform", shape), dt) * jnp.asarray(scale, dt)
    return init


def normal(stddev=1e-2, dtype=None):
    """An initializer drawing from a normal distribution with mean 0 and ``stddev``.

    Example:
        >>> key = random.key(0)
        >>> w = nn.initializers.normal(0.02)(key, (768, 768))
        >>> w.shape, round(float(w.std()), 3)
        ((768, 768), 0.02)
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype("normal", dtype)
        return random.normal(key, _shape("normal", shape), dt) * jnp.asarray(stddev, dt)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """An initializer drawing ``stddev * z`` with ``z`` a standard normal truncated to
    ``(lower, upper)`` (the result's standard deviation is below ``stddev``, as in JAX).

    Example:
        >>> key = random.key(0)
        >>> w = nn.initializers.truncated_normal(0.02)(key, (256, 256))
        >>> bool(jnp.abs(w).max() <= 2 * 0.02)      # cut at two standard deviations
        True
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype("truncated_normal", dtype)
        z = random.truncated_normal(key, lower, upper, _shape("truncated_normal", shape), dt)
        return z * jnp.asarray(stddev, dt)
    return init


def _axes(name, value, ndim, what):
    axes = (value,) if isinstance(value, int) else tuple(value)
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"initializers.{name}: {what} {a} is out of range for a shape "
                             f"of {ndim} dimensions")
        out.append(a % ndim)
    return tuple(out)


def compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=(), name="variance_scaling"):
    """(fan_in, fan_out) of a weight ``shape``: the input/output axis sizes times the receptive
    field (every axis that is neither input, output nor batch).

    Example:
        >>> nn.initializers.compute_fans((3, 3, 16, 32))      # a 3x3 conv kernel, HWIO
        (144.0, 288.0)
    """
    shape = _shape(name, shape)
    if len(shape) < 2:
        raise ValueError(f"initializers.{name}: needs a shape of at least 2 dimensions to "
                         f"compute fan-in and fan-out, got {shape}")
    ins = _axes(name, in_axis, len(shape), "in_axis")
    outs = _axes(name, out_axis, len(shape), "out_axis")
    batch = _axes(name, batch_axis, len(shape), "batch_axis")
    in_size = math.prod(shape[a] for a in ins)
    out_size = math.prod(shape[a] for a in outs)
    batch_size = math.prod(shape[a] for a in batch)
    receptive = math.prod(shape) / (in_size * out_size * batch_size) if math.prod(shape) else 0
    return in_size * receptive, out_size * receptive


_MODES = ("fan_in", "fan_out", "fan_avg", "fan_geo_avg")
_DISTRIBUTIONS = ("truncated_normal", "normal", "uniform")


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    """An initializer whose samples have variance ``scale / n``, with ``n`` the fan-in
    (``mode="fan_in"``), fan-out, their mean (``"fan_avg"``) or geometric mean
    (``"fan_geo_avg"``); ``distribution`` is ``"truncated_normal"`` (within two standard
    deviations, rescaled to the target variance), ``"normal"`` or ``"uniform"``.

    Example:
        >>> key = random.key(0)
        >>> init = nn.initializers.variance_scaling(2.0, "fan_in", "truncated_normal")
        >>> w = init(key, (256, 128))
        >>> round(float(w.std()), 2), round((2.0 / 256) ** 0.5, 2)      # std sqrt(scale / fan_in)
        (0.09, 0.09)
    """
    if mode not in _MODES:
        raise ValueError(f"initializers.variance_scaling: mode must be one of {_MODES}, got "
                         f"{mode!r}")
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"initializers.variance_scaling: distribution must be one of "
                         f"{_DISTRIBUTIONS}, got {distribution!r}")

    def init(key, shape, dtype=dtype):
        dt = _dtype("variance_scaling", dtype)
        shape = _shape("variance_scaling", shape)
        fan_in, fan_out = compute_fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out,
                       "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": math.sqrt(fan_in * fan_out)}[mode]
        variance = scale / denominator if denominator else 0.0
        if distribution == "truncated_normal":
            std = math.sqrt(variance) / _TRUNCATED_STD
            return random.truncated_normal(key, -2.0, 2.0, shape, dt) * jnp.asarray(std, dt)
        if distribution == "normal":
            return random.normal(key, shape, dt) * jnp.asarray(math.sqrt(variance), dt)
        bound = math.sqrt(3 * variance)
        return random.uniform(key, shape, dt, -bound, bound)
    return init


def _named_scaling(name, scale, mode, distribution, doc):
    def factory(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)
    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = (f"{doc} (``variance_scaling({scale}, {mode!r}, {distribution!r})``).\n\n"
                       f"    Example:\n        >>> key = random.key(0)\n"
                       f"        >>> w = nn.initializers.{name}()(key, (128, 64))\n"
                       f"        >>> w.shape, w.dtype\n"
                       f"        ((128, 64), dtype('float32'))\n")
    return factory


glorot_uniform = _named_scaling("glorot_uniform", 1.0, "fan_avg", "uniform",
                                "Glorot/Xavier uniform initializer")
glorot_normal = _named_scaling("glorot_normal", 1.0, "fan_avg", "truncated_normal",
                               "Glorot/Xavier normal initializer")
lecun_uniform = _named_scaling("lecun_uniform", 1.0, "fan_in", "uniform",
                               "LeCun uniform initializer")
lecun_normal = _named_scaling("lecun_normal", 1.0, "fan_in", "truncated_normal",
                              "LeCun normal initializer")
he_uniform = _named_scaling("he_uniform", 2.0, "fan_in", "uniform",
                            "He/Kaiming uniform initializer")
he_normal = _named_scaling("he_normal", 2.0, "fan_in", "truncated_normal",
                           "He/Kaiming normal initializer")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer returning a (scaled) matrix with orthonormal rows or columns, reshaped:
    every axis but ``column_axis`` is flattened into rows.

    Example:
        >>> key = random.key(0)
        >>> w = nn.initializers.orthogonal()(key, (64, 64))
        >>> np.allclose(w @ w.T, np.eye(64), atol=1e-5)
        True
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype("orthogonal", dtype)
        shape = _shape("orthogonal", shape)
        if len(shape) < 2:
            raise ValueError(f"initializers.orthogonal: needs a shape of at least 2 "
                             f"dimensions, got {shape}")
        col = _axes("orthogonal", column_axis, len(shape), "column_axis")[0]
        n_cols = shape[col]
        n_rows = math.prod(shape) // n_cols if n_cols else 0
        big, small = max(n_rows, n_cols), min(n_rows, n_cols)
        a = random.normal(key, (big, small), dt)
        q, r = jnp.linalg.qr(a)
        d = jnp.sign(jnp.diagonal(r))
        q = q * jnp.where(d == 0, jnp.ones((), dt), d)[None, :]
        if n_rows < n_cols:
            q = q.T
        other = shape[:col] + shape[col + 1:]
        q = jnp.reshape(q, other + (n_cols,))
        q = jnp.moveaxis(q, -1, col)
        return q * jnp.asarray(scale, dt)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """An initializer for convolution kernels (1-D to 3-D, shape ``(*spatial, in, out)`` with
    ``in <= out``): an orthogonal matrix at the centre tap and zeros elsewhere, so the layer
    starts as an orthogonal map (Xiao et al., 2018).

    Example:
        >>> key = random.key(0)
        >>> k = nn.initializers.delta_orthogonal()(key, (3, 3, 16, 32))
        >>> float(jnp.abs(k[0, 0]).max()), np.allclose(k[1, 1] @ k[1, 1].T, np.eye(16), atol=1e-5)
        (0.0, True)
    """
    def init(key, shape, dtype=dtype):
        dt = _dtype("delta_orthogonal", dtype)
        shape = _shape("delta_orthogonal", shape)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"initializers.delta_orthogonal: needs a kernel shape of 3, 4 or "
                             f"5 dimensions (*spatial, in, out), got {shape}")
        if shape[-2] > shape[-1]:
            raise ValueError(f"initializers.delta_orthogonal: needs in <= out channels, got "
                             f"shape {shape} ({shape[-2]} > {shape[-1]})")
        centre = orthogonal(scale, column_axis, dt)(key, shape[-2:])
        spatial = shape[:-2]
        mask = np.zeros(spatial, dtype=bool)
        mask[tuple(s // 2 for s in spatial)] = True
        mask = jnp.asarray(mask.reshape(spatial + (1, 1)))
        return lax.select(jnp.broadcast_to(mask, shape), jnp.broadcast_to(centre, shape),
                          jnp.zeros(shape, dt))
    return init
