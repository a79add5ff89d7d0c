"""``Dropout``: random zeroing in training mode, identity in eval mode.

Key handling: each Dropout module owns a non-persistent buffer ``rng_counter`` (a float32
counter, started from ``funcgrad.manual_seed``'s generator). Every training-mode call draws its
mask from a hash of (counter, position) and advances the counter through
``Module.update_buffer``, so a jitted training step gets a fresh mask each call (the counter is
carried out of ``jit`` like BatchNorm statistics). The counter is not in ``state_dict``.
"""
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.module import Module


class Dropout(Module):
    """Zero elements with probability ``p`` in training mode, scaling the rest by 1/(1-p).

    Example:
        >>> d = nn.Dropout(0.5); y = d(x)     # d.eval() makes it the identity
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)
        import funcgrad.numpy as jnp
        start = float(init.generator().integers(0, 1 << 23))
        self.register_buffer("rng_counter", jnp.asarray(start, "float32"), persistent=False)

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        counter = self.rng_counter
        self.update_buffer("rng_counter", counter + 1.0)
        return F.dropout(x, self.p, True, key=counter)

    def extra_repr(self):
        return f"p={self.p}, inplace=False"


class Dropout1d(Dropout):
    """Dropout (elementwise here). Example: ``nn.Dropout1d(0.1)``."""


class Dropout2d(Dropout):
    """Dropout (elementwise here). Example: ``nn.Dropout2d(0.1)``."""
