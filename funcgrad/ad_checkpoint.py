"""``jax.ad_checkpoint``'s names: ``checkpoint`` / ``remat``, ``checkpoint_name`` and the
saving policies (``funcgrad.checkpoint_policies``).

Example:
    >>> from funcgrad.ad_checkpoint import checkpoint, checkpoint_name
    >>> from funcgrad import checkpoint_policies as cp
    >>> @checkpoint(policy=cp.save_only_these_names("h"))
    ... def f(x):
    ...     h = checkpoint_name(jnp.sin(x), "h")      # saved in the forward pass
    ...     return jnp.cos(h)                          # recomputed in the backward pass
    >>> funcgrad.grad(f)(0.5)
    Array(-0.4048..., dtype=float32)
"""
from funcgrad.transforms import checkpoint_policies
from funcgrad.transforms.checkpoint_policies import checkpoint_name
from funcgrad.transforms.remat import checkpoint, remat

__all__ = ["checkpoint", "checkpoint_name", "checkpoint_policies", "remat"]
