"""``SyncBatchNorm``: batch normalization whose batch statistics cover every replica.

PyTorch synchronizes over a ``process_group`` of ``DistributedDataParallel`` processes.
funcgrad's replicas are the members of a named mapped axis: give ``axis_name`` and call the
module inside ``funcgrad.pmap(..., axis_name=...)`` (or ``vmap`` with that name) — the mean and
variance are then ``psum``-reduced over that axis, so every replica normalizes with the
statistics of the global batch and the gradients flow across replicas as in PyTorch. Without
``axis_name`` (one process, or outside a mapped function) it is exactly ``BatchNorm``, as
PyTorch's ``SyncBatchNorm`` is on a single process. Running statistics use the global batch
(unbiased variance over all replicas' samples); under ``pmap`` return them from the mapped
function to keep them (see docs/nn.md).

Example:
    >>> import funcgrad.nn as nn
    >>> bn = nn.SyncBatchNorm(2, axis_name="batch", track_running_stats=False)
    >>> shards = jnp.arange(16.0).reshape(2, 4, 2)      # 2 replicas x 4 samples x 2 channels
    >>> y = funcgrad.vmap(bn, axis_name="batch")(shards)
    >>> whole = nn.BatchNorm1d(2, track_running_stats=False)(shards.reshape(8, 2))
    >>> bool(jnp.allclose(y.reshape(8, 2), whole, atol=1e-6))
    True
"""
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.nn.normalization import _BatchNorm

__all__ = ["SyncBatchNorm"]


class SyncBatchNorm(_BatchNorm):
    """Batch norm over (N, C, ...) inputs of any rank >= 2 whose statistics are reduced over
    the mapped axis ``axis_name`` (see the module docstring); ``process_group`` is accepted
    for PyTorch compatibility and must be None.

    Example:
        >>> nn.SyncBatchNorm(4)(jnp.ones((8, 4, 3))).shape     # no axis_name: a BatchNorm
        (8, 4, 3)
    """

    _dims = tuple(range(2, 12))

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None,
                 axis_name=None):
        if process_group is not None:
            raise ValueError("SyncBatchNorm: process groups do not exist in funcgrad; pass "
                             "axis_name= (the name of the pmap/vmap axis of the replicas)")
        super().__init__(num_features, eps, momentum, affine, track_running_stats,
                         dtype=dtype)
        self.axis_name = axis_name

    def forward(self, x):
        use_batch = self.training or not self.track_running_stats
        if self.axis_name is None or not use_batch:
            return super().forward(x)
        if x.ndim < 2 or x.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm({self.num_features}): expected an (N, C, ...) "
                             f"input with C = {self.num_features}, got shape {tuple(x.shape)}")
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        local = x.size // x.shape[1]
        count = lax.psum(jnp.asarray(float(local), x.dtype), self.axis_name)
        mean = lax.psum(jnp.sum(x, axis=axes), self.axis_name) / count
        centered = x - jnp.reshape(mean, shape)
        var = lax.psum(jnp.sum(centered * centered, axis=axes), self.axis_name) / count
        y = centered * jnp.reshape(lax.rsqrt(var + self.eps), shape)
        if self.weight is not None:
            y = y * jnp.reshape(self.weight, shape) + jnp.reshape(self.bias, shape)
        if self.training and self.track_running_stats:
            steps = self.num_batches_tracked + 1.0
            self.update_buffer("num_batches_tracked", steps)
            m = 1.0 / steps if self.momentum is None else self.momentum
            unbiased = lax.stop_gradient(var) * count / jnp.maximum(count - 1.0, 1.0)
            self.update_buffer("running_mean",
                               (1 - m) * self.running_mean + m * lax.stop_gradient(mean))
            self.update_buffer("running_var", (1 - m) * self.running_var + m * unbiased)
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None, axis_name=None):
        """``module`` with every ``BatchNorm*d`` replaced by a ``SyncBatchNorm`` holding the
        same parameters and running statistics (PyTorch's helper; ``axis_name`` added).

        Example:
            >>> net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
            >>> type(nn.SyncBatchNorm.convert_sync_batchnorm(net, axis_name="i")[1]).__name__
            'SyncBatchNorm'
        """
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            new = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group, axis_name=axis_name)
            for name, box in module._parameters.items():
                new._parameters[name] = box
            for name, value in module._buffers.items():
                new._buffers[name] = value
            new.training = module.training
            new._changed()
            return new
        for name, child in list(module._modules.items()):
            if child is not None:
                converted = cls.convert_sync_batchnorm(child, process_group, axis_name)
                if converted is not child:
                    module._modules[name] = converted
                    module._changed()
        return module
