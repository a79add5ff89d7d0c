"""``Dropout``: random zeroing in training mode, identity in eval mode.

Key handling: each Dropout module owns a non-persistent buffer ``rng_counter`` (a float32
counter, started from ``funcgrad.manual_seed``'s generator). Every training-mode call draws its
mask from a hash of (counter, position) and advances the counter through
``Module.update_buffer``, so a jitted training step gets a fresh mask each call (the counter is
carried out of ``jit`` like BatchNorm statistics). The counter is not in ``state_dict``.

The channel-wise (``Dropout1d/2d/3d``, ``FeatureAlphaDropout``) and ``AlphaDropout`` variants
follow the same rule: they differ from ``Dropout`` only in the ``F`` function they call.
"""
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.module import Module


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode, scaling the rest by 1/(1-p).

    Example:
        >>> d = nn.Dropout(0.5)
        >>> y = d(jnp.ones(1000))      # training mode: zeros, and 2s (kept values scaled)
        >>> sorted(set(np.asarray(y).tolist()))
        [0.0, 2.0]
        >>> d.eval()(jnp.ones(3))      # eval mode: the identity
        Array([1., 1., 1.], dtype=float32)
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)
        import funcgrad.numpy as jnp
        start = float(init.generator().integers(0, 1 << 23))
        self.register_buffer("rng_counter", jnp.asarray(start, "float32"), persistent=False)

    _functional = "dropout"        # the nn.functional form this module applies

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        counter = self.rng_counter
        self.update_buffer("rng_counter", counter + 1.0)
        return getattr(F, self._functional)(x, self.p, True, key=counter)

    def extra_repr(self):
        return f"p={self.p}, inplace=False"


class Dropout1d(Dropout):
    """Zero whole channels ``x[n, c, :]`` of a (N, C, L) or (C, L) input with probability
    ``p`` in training mode, scaling the rest by 1/(1-p) (``F.dropout1d``).

    Example:
        >>> nn.Dropout1d(0.1)(jnp.ones((4, 16, 32))).shape
        (4, 16, 32)
    """

    _functional = "dropout1d"


class Dropout2d(Dropout):
    """Zero whole channels ``x[n, c]`` of a (N, C, H, W) input with probability ``p`` in
    training mode, scaling the rest by 1/(1-p) (``F.dropout2d``; a 3-D input is read as
    (N, C, L) as in PyTorch).

    Example:
        >>> nn.Dropout2d(0.1)(jnp.ones((4, 16, 8, 8))).shape
        (4, 16, 8, 8)
    """

    _functional = "dropout2d"


class Dropout3d(Dropout):
    """Zero whole channels ``x[n, c]`` of a (N, C, D, H, W) or (C, D, H, W) input with
    probability ``p`` in training mode, scaling the rest by 1/(1-p) (``F.dropout3d``).

    Example:
        >>> nn.Dropout3d(0.1)(jnp.ones((2, 4, 3, 8, 8))).shape
        (2, 4, 3, 8, 8)
    """

    _functional = "dropout3d"


class AlphaDropout(Dropout):
    """Dropout for SELU networks (``F.alpha_dropout``): dropped elements take SELU's negative
    saturation value and an affine correction keeps zero mean and unit variance.

    Example:
        >>> nn.AlphaDropout(0.1)(jnp.ones((4, 8))).shape
        (4, 8)
    """

    _functional = "alpha_dropout"


class FeatureAlphaDropout(Dropout):
    """``AlphaDropout`` over whole channels ``x[n, c]`` (``F.feature_alpha_dropout``).

    Example:
        >>> nn.FeatureAlphaDropout(0.2)(jnp.ones((2, 8, 5))).shape
        (2, 8, 5)
    """

    _functional = "feature_alpha_dropout"
