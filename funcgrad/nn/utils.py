"""``torch.nn.utils`` habits on funcgrad Parameters: gradient clipping in place and flattening
parameters to one vector and back.

funcgrad computes gradients functionally (``funcgrad.grad``); code that keeps PyTorch's
``p.grad`` attributes (``optimizer.step()`` with no argument reads them) clips them here. The
pure form that works on any gradient pytree and inside ``jit`` is
``funcgrad.optim.clip_grad_norm``.

Example:
    >>> model = nn.Linear(2, 1)
    >>> grads = funcgrad.grad(lambda m: jnp.sum(m(jnp.full((1, 2), 10.0)) ** 2))(model)
    >>> for p, g in zip(model.parameters(), grads.parameters()):
    ...     p.grad = g.data
    >>> total = nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # the norm before clipping
    >>> round(float(nn.utils.total_norm([p.grad for p in model.parameters()])), 4)
    1.0
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad.nn.module import Parameter


def total_norm(arrays, norm_type=2.0):
    """The ``norm_type``-norm of all ``arrays`` taken together (inf: the largest magnitude).

    Example:
        >>> nn.utils.total_norm([jnp.array([3.0]), jnp.array([4.0])], 2.0)
        Array(5., dtype=float32)
    """
    norm_type = float(norm_type)
    if norm_type == float("inf"):
        return jnp.max(jnp.stack([jnp.max(jnp.abs(g)) for g in arrays]))
    return jnp.sum(jnp.stack([jnp.sum(jnp.abs(g.astype("float32")) ** norm_type)
                              for g in arrays])) ** (1.0 / norm_type)


def _with_grads(parameters):
    if isinstance(parameters, Parameter):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scale every ``p.grad`` in place by min(1, max_norm / (total norm + 1e-6)), as PyTorch;
    returns the total norm before clipping.

    Example:
        >>> model = nn.Linear(1, 1, bias=False)
        >>> model.get_parameter("weight").grad = jnp.array([[4.0]])
        >>> nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        Array(4., dtype=float32)
        >>> model.get_parameter("weight").grad
        Array([[0.99999976]], dtype=float32)
    """
    params = _with_grads(parameters)
    if not params:
        return jnp.asarray(0.0)
    total = total_norm([p.grad for p in params], norm_type)
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    for p in params:
        p.grad = (p.grad * coef).astype(p.grad.dtype)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clip every ``p.grad`` to [-clip_value, clip_value] in place.

    Example:
        >>> model = nn.Linear(2, 1, bias=False)
        >>> model.get_parameter("weight").grad = jnp.array([[2.0, -0.1]])
        >>> nn.utils.clip_grad_value_(model.parameters(), 0.5)
        >>> model.get_parameter("weight").grad
        Array([[ 0.5, -0.1]], dtype=float32)
    """
    for p in _with_grads(parameters):
        p.grad = jnp.clip(p.grad, -clip_value, clip_value)


def parameters_to_vector(parameters):
    """All parameters (or arrays) flattened and joined into one 1-d array, in order.

    Example:
        >>> model = nn.Linear(2, 3)
        >>> nn.utils.parameters_to_vector(model.parameters()).shape   # 6 weights, 3 biases
        (9,)
    """
    arrays = [p.data if isinstance(p, Parameter) else jnp.asarray(p) for p in parameters]
    if not arrays:
        raise ValueError("nn.utils.parameters_to_vector: no parameters given")
    return jnp.concatenate([a.reshape(-1) for a in arrays])


def vector_to_parameters(vec, parameters):
    """Write consecutive slices of the 1-d ``vec`` into ``parameters`` (in place, each
    reshaped and cast to its parameter's shape and dtype): the inverse of
    ``parameters_to_vector``.

    Example:
        >>> model = nn.Linear(2, 1)
        >>> nn.utils.vector_to_parameters(jnp.arange(3.0), model.parameters())
        >>> model.weight, model.bias
        (Array([[0., 1.]], dtype=float32), Array([2.], dtype=float32))
    """
    vec = jnp.asarray(vec)
    params = list(parameters)
    if vec.ndim != 1:
        raise ValueError(f"nn.utils.vector_to_parameters: expected a 1-d vector, got shape "
                         f"{tuple(vec.shape)}")
    for i, p in enumerate(params):
        if not isinstance(p, Parameter):
            raise TypeError(f"nn.utils.vector_to_parameters: item {i} is of type "
                            f"{type(p).__name__}, not Parameter; arrays are immutable, so "
                            f"only Parameters can be written in place")
    need = sum(p.size for p in params)
    if vec.shape[0] != need:
        raise ValueError(f"nn.utils.vector_to_parameters: the vector has {vec.shape[0]} "
                         f"elements but the parameters hold {need}")
    offsets = np.cumsum([0] + [p.size for p in params])
    for p, start, stop in zip(params, offsets[:-1], offsets[1:]):
        p.data = vec[int(start):int(stop)].reshape(p.shape).astype(p.dtype)
