"""Normalization layers: ``BatchNorm1d/2d/3d``, ``LayerNorm``, ``GroupNorm``, ``RMSNorm``,
``InstanceNorm1d/2d/3d``, ``LocalResponseNorm``.

BatchNorm keeps PyTorch's buffers (``running_mean``, ``running_var``, ``num_batches_tracked``)
and updates them in training mode through ``Module.update_buffer``: in place eagerly, carried
out of ``jit``/``grad`` otherwise. ``num_batches_tracked`` is held as a float32 counter so that
models stay differentiable with ``funcgrad.grad`` (which rejects integer leaves); it is an int64
in ``state_dict()`` exactly as in PyTorch, and loads from one.

``axis_name=`` (as flax's ``BatchNorm(axis_name=...)``, PyTorch's ``SyncBatchNorm``) computes
the batch statistics over every member of a ``pmap`` (or ``vmap``) axis: the mean and variance
are ``pmean``s of the per-device moments, so a data-parallel step normalizes with the
statistics of the whole batch and every device holds the same running statistics.
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module, Parameter, host_ones, host_zeros


class _BatchNorm(Module):
    _dims = (2, 3)

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, axis_name=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), momentum
        self.axis_name = axis_name
        self.affine, self.track_running_stats = affine, track_running_stats
        dt = dtype or "float32"
        if affine:
            self.weight = Parameter(host_ones((num_features,), dt))
            self.bias = Parameter(host_zeros((num_features,), dt))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", host_zeros((num_features,), dt))
            self.register_buffer("running_var", host_ones((num_features,), dt))
            self.register_buffer("num_batches_tracked", host_zeros((), "float32"))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean = jnp.zeros_like(self.running_mean)
            self.running_var = jnp.ones_like(self.running_var)
            self.num_batches_tracked = host_zeros((), "float32")

    def _export_buffer(self, name, value):
        if name == "num_batches_tracked":
            return np.asarray(value).astype(np.int64)
        return value

    def _import_buffer(self, name, value, current):
        if name == "num_batches_tracked":
            return np.asarray(value, np.float32).reshape(())
        return value

    def forward(self, x):
        if x.ndim not in self._dims:
            raise ValueError(f"{type(self).__name__}: expected a {' or '.join(map(str, self._dims))}"
                             f"-d input, got shape {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}({self.num_features}): input has "
                             f"{x.shape[1]} channels (shape {tuple(x.shape)})")
        momentum = self.momentum
        update = self.training and self.track_running_stats
        if update:
            count = self.num_batches_tracked + 1.0
            self.update_buffer("num_batches_tracked", count)
            if momentum is None:
                momentum = 1.0 / count
        use_batch = self.training or not self.track_running_stats
        if use_batch and self.axis_name is not None:
            y, mean, var = self._synced(x, momentum)
        else:
            y, mean, var = F.batch_norm(x, self.running_mean, self.running_var, self.weight,
                                        self.bias, use_batch, momentum if momentum is not None
                                        else 0.0, self.eps, return_stats=True)
        if update:
            self.update_buffer("running_mean", mean)
            self.update_buffer("running_var", var)
        return y

    def _synced(self, x, momentum):
        """(y, new running mean, new running var) with the batch statistics taken over every
        member of ``axis_name`` (each member's batch of the same size)."""
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
        names = self.axis_name if isinstance(self.axis_name, tuple) else (self.axis_name,)
        n = x.size // x.shape[1]
        for name in names:
            n *= lax.axis_size(name)
        if n <= 1:
            raise ValueError(f"{type(self).__name__}(axis_name={self.axis_name!r}): expected "
                             f"more than 1 value per channel over the devices, got input of "
                             f"shape {tuple(x.shape)}")
        mean = lax.pmean(jnp.mean(x, axis=axes), names)
        var = lax.pmean(jnp.mean(jnp.square(x - jnp.reshape(mean, shape)), axis=axes), names)
        y = F.batch_norm(x, mean, var, self.weight, self.bias, False, eps=self.eps)
        if self.running_mean is None:
            return y, None, None
        m = momentum
        new_mean = (1 - m) * self.running_mean + m * lax.stop_gradient(mean)
        new_var = (1 - m) * self.running_var + m * lax.stop_gradient(var) * (n / (n - 1))
        return y, new_mean.astype(self.running_mean.dtype), new_var.astype(
            self.running_var.dtype)

    def extra_repr(self):
        sync = f", axis_name={self.axis_name!r}" if self.axis_name is not None else ""
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}{sync}")


class BatchNorm1d(_BatchNorm):
    """Batch norm over (N, C) or (N, C, L). Example: ``nn.BatchNorm1d(16)``."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm over (N, C, H, W); ``axis_name=`` takes the batch statistics over a mapped
    axis (``pmap``/``vmap``), as PyTorch's ``SyncBatchNorm``.

    Example:
        >>> bn = nn.BatchNorm2d(2)
        >>> y = bn(jnp.ones((4, 2, 3, 3)))   # training mode: updates the running statistics
        >>> bn.running_mean
        Array([0.1, 0.1], dtype=float32)
        >>> sync = nn.BatchNorm2d(1, axis_name="d")
        >>> x = jnp.arange(8.0).reshape(2, 2, 1, 2, 1)          # 2 members, 2 images each
        >>> y = funcgrad.vmap(sync, axis_name="d")(x)           # statistics over all 8 values
        >>> sync.running_mean, round(float(y.std()), 3)
        (Array([0.35], dtype=float32), 1.0)
    """
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch norm over (N, C, D, H, W). Example: ``nn.BatchNorm3d(8)``."""
    _dims = (5,)


class LayerNorm(Module):
    """Normalize over the trailing ``normalized_shape``. Example: ``nn.LayerNorm(64)``."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = float(eps), elementwise_affine
        dt = dtype or "float32"
        if elementwise_affine:
            self.weight = Parameter(host_ones(self.normalized_shape, dt))
            if bias:
                self.bias = Parameter(host_zeros(self.normalized_shape, dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class RMSNorm(Module):
    """x / rms(x) * weight over trailing axes. Example: ``nn.RMSNorm(64)``."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape, self.eps = tuple(normalized_shape), eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(host_ones(self.normalized_shape, dtype or "float32"))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """Group normalization of (N, C, ...). Example: ``nn.GroupNorm(4, 16)``."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels = int(num_groups), int(num_channels)
        self.eps, self.affine = float(eps), affine
        if affine:
            self.weight = Parameter(host_ones((num_channels,), dtype or "float32"))
            self.bias = Parameter(host_zeros((num_channels,), dtype or "float32"))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(Module):
    _dim = 2        # spatial axes

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.affine = int(num_features), float(eps), affine
        self.momentum, self.track_running_stats = momentum, track_running_stats
        dt = dtype or "float32"
        if affine:
            self.weight = Parameter(host_ones((num_features,), dt))
            self.bias = Parameter(host_zeros((num_features,), dt))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", host_zeros((num_features,), dt))
            self.register_buffer("running_var", host_ones((num_features,), dt))
            self.register_buffer("num_batches_tracked", host_zeros((), "float32"))

    _export_buffer = _BatchNorm._export_buffer
    _import_buffer = _BatchNorm._import_buffer

    def forward(self, x):
        x = jnp.asarray(x)
        n = self._dim
        if x.ndim not in (n + 1, n + 2):
            raise ValueError(f"{type(self).__name__}: expected a {n + 1}-d (unbatched) or "
                             f"{n + 2}-d input, got shape {tuple(x.shape)}")
        unbatched = x.ndim == n + 1
        if unbatched:
            x = x[None]
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"{type(self).__name__}({self.num_features}): input has "
                             f"{x.shape[1]} channels (shape {tuple(x.shape)})")
        if self.track_running_stats and not self.training:
            shape = (1, -1) + (1,) * n
            y = (x - jnp.reshape(self.running_mean, shape)) * jnp.reshape(
                (self.running_var + self.eps) ** -0.5, shape)
            if self.weight is not None:
                y = y * jnp.reshape(self.weight, shape) + jnp.reshape(self.bias, shape)
        else:
            y = F.instance_norm(x, weight=self.weight, bias=self.bias, eps=self.eps)
            if self.track_running_stats:
                self._update_stats(x)
        return y[0] if unbatched else y

    def _update_stats(self, x):
        # PyTorch: the batch mean of each instance's mean and unbiased variance
        x = lax.stop_gradient(x)
        axes = tuple(range(2, x.ndim))
        count = int(np.prod(x.shape[2:]))
        mean = jnp.mean(x, axis=axes)
        var = jnp.var(x, axis=axes) * (count / max(count - 1, 1))
        steps = self.num_batches_tracked + 1.0
        self.update_buffer("num_batches_tracked", steps)
        m = 1.0 / steps if self.momentum is None else self.momentum
        self.update_buffer("running_mean", (1 - m) * self.running_mean + m * jnp.mean(mean, 0))
        self.update_buffer("running_var", (1 - m) * self.running_var + m * jnp.mean(var, 0))

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization of (N, C, L) or (C, L): each (sample, channel) over its length.

    Example:
        >>> y = nn.InstanceNorm1d(2)(jnp.array([[[1.0, 3.0], [0.0, 4.0]]]))
        >>> y.round(3)
        Array([[[-1.,  1.],
                [-1.,  1.]]], dtype=float32)
    """
    _dim = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization of (N, C, H, W) or (C, H, W); ``track_running_stats=True`` keeps
    PyTorch's running statistics (used in eval mode). Example: ``nn.InstanceNorm2d(8)``."""
    _dim = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization of (N, C, D, H, W) or (C, D, H, W).

    Example:
        >>> nn.InstanceNorm3d(4, affine=True)(jnp.ones((2, 4, 3, 3, 3))).shape
        (2, 4, 3, 3, 3)
    """
    _dim = 3


class LocalResponseNorm(Module):
    """Normalize each channel by its ``size`` neighbouring channels:
    x / (k + alpha / size * sum of x^2 over the window) ** beta (``F.local_response_norm``).

    Example:
        >>> nn.LocalResponseNorm(size=5)(jnp.ones((1, 8, 4, 4))).shape
        (1, 8, 4, 4)
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = int(size), alpha, beta, k

    def forward(self, x):
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class CrossMapLRN2d(Module):
    """PyTorch's legacy cross-channel LRN of (N, C, H, W): x * (k + alpha / size * s) ** -beta
    with s the sum of squares over a window of channels laid out as PyTorch's running-sum
    kernel lays it (channels [c - p + 1, c + p - 1] with p = (size - 1) // 2 + 1, clipped, and
    for c <= p starting at channel 0; that kernel never subtracts channel 0 again, so later
    windows include it too — kept, for the same outputs).

    Example:
        >>> nn.CrossMapLRN2d(3)(jnp.ones((1, 4, 2, 2))).shape
        (1, 4, 2, 2)
    """

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = int(size), alpha, beta, k

    def forward(self, x):
        x = jnp.asarray(x)
        if x.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: expected a 4-d input, got shape "
                             f"{tuple(x.shape)}")
        c = x.shape[1]
        p = (self.size - 1) // 2 + 1
        hi = np.minimum(np.arange(c) + p - 1, c - 1)
        lo = np.where(np.arange(c) <= p, 0, np.arange(c) - p + 1)
        sq = x * x
        prefix = jnp.concatenate([jnp.zeros_like(sq[:, :1]), jnp.cumsum(sq, axis=1)], axis=1)
        window = prefix[:, hi + 1] - prefix[:, lo]
        # PyTorch's running sum never subtracts channel 0 once the window has passed it
        late = jnp.asarray((np.arange(c) > p).astype(np.dtype(x.dtype)))
        window = window + sq[:, :1] * late[None, :, None, None]
        return x * (self.k + self.alpha / self.size * window) ** -self.beta

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
