"""Gradient clipping by global norm or by value."""
import funcgrad.numpy as jnp
from funcgrad import tree_util
from funcgrad.nn.module import Module, Parameter


def _grad_leaves(grads):
    if isinstance(grads, Module):
        return [p.data for p in grads.parameters()]
    return [g.data if isinstance(g, Parameter) else g
            for g in tree_util.tree_leaves(grads) if g is not None]


def _total_norm(leaves, norm_type):
    if norm_type == float("inf"):
        return jnp.max(jnp.stack([jnp.max(jnp.abs(g)) for g in leaves]))
    return jnp.sum(jnp.stack([jnp.sum(jnp.abs(g.astype("float32")) ** norm_type)
                              for g in leaves])) ** (1.0 / norm_type)


def clip_grad_norm(grads, max_norm, norm_type=2.0):
    """(clipped grads, total norm): scale all gradients by min(1, max_norm / (norm + 1e-6)).

    Pure: works on any pytree of gradients (a gradient module, a dict) and inside jit.

    Example:
        >>> grads, norm = funcgrad.optim.clip_grad_norm(grads, 1.0)
    """
    leaves = _grad_leaves(grads)
    total = _total_norm(leaves, float(norm_type))
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    return tree_util.tree_map(lambda g: (g * coef).astype(g.dtype), grads), total


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """PyTorch's in-place form over Parameters with ``.grad`` set; returns the total norm.

    Example:
        >>> for p, g in zip(params, grads): p.grad = g
        >>> funcgrad.optim.clip_grad_norm_(params, 1.0)
    """
    if isinstance(parameters, Parameter):
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return jnp.asarray(0.0)
    total = _total_norm([p.grad for p in params], float(norm_type))
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    for p in params:
        p.grad = (p.grad * coef).astype(p.grad.dtype)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clip every ``p.grad`` to [-clip_value, clip_value] in place."""
    if isinstance(parameters, Parameter):
        parameters = [parameters]
    for p in parameters:
        if p.grad is not None:
            p.grad = jnp.clip(p.grad, -clip_value, clip_value)
