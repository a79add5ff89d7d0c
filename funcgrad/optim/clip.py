"""Gradient clipping by global norm: the pure form on a gradient pytree (usable in ``jit``);
PyTorch's in-place ``clip_grad_norm_``/``clip_grad_value_`` on ``p.grad`` live in
``funcgrad.nn.utils`` and are re-exported here."""
import funcgrad.numpy as jnp
from funcgrad import tree_util
from funcgrad.nn.module import Module, Parameter
from funcgrad.nn.utils import clip_grad_norm_, clip_grad_value_, total_norm  # noqa: F401


def _grad_leaves(grads):
    if isinstance(grads, Module):
        return [p.data for p in grads.parameters()]
    return [g.data if isinstance(g, Parameter) else g
            for g in tree_util.tree_leaves(grads) if g is not None]


def clip_grad_norm(grads, max_norm, norm_type=2.0):
    """(clipped grads, total norm): scale all gradients by min(1, max_norm / (norm + 1e-6)).

    Pure: works on any pytree of gradients (a gradient module, a dict) and inside jit.

    Example:
        >>> grads = {"a": jnp.array([3.0]), "b": jnp.array([4.0])}
        >>> clipped, norm = funcgrad.optim.clip_grad_norm(grads, 1.0)
        >>> norm
        Array(5., dtype=float32)
        >>> clipped
        {'a': Array([0.5999999], dtype=float32), 'b': Array([0.79999983], dtype=float32)}
    """
    leaves = _grad_leaves(grads)
    total = total_norm(leaves, norm_type)
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    return tree_util.tree_map(lambda g: (g * coef).astype(g.dtype), grads), total
