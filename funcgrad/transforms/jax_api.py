"""Top-level transformations and helpers that JAX programs import from ``jax``: ``jacobian``,
``linear_transpose``, ``closure_convert``, ``custom_gradient``, ``named_call``, ``typeof``,
``enable_x64`` and ``live_arrays``.
"""
import contextlib
import functools
import gc

import numpy as np

from funcgrad import tree_util
from funcgrad.config import config
from funcgrad.core import dtypes
from funcgrad.core.interpreters import Tracer
from funcgrad.core.jaxpr import eval_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax.decomposed import composite
from funcgrad.lowering.array import Array
from funcgrad.transforms.ad import jacrev, vjp
from funcgrad.transforms.custom_derivatives import custom_vjp
from funcgrad.transforms.jit import make_jaxpr

__all__ = ["jacobian", "linear_transpose", "closure_convert", "custom_gradient", "named_call",
           "typeof", "enable_x64", "live_arrays"]


def jacobian(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian of ``fun`` by reverse mode (JAX's ``jax.jacobian``, i.e. ``jacrev``).

    Example:
        >>> funcgrad.jacobian(lambda x: x ** 2)(jnp.array([1.0, 3.0]))
        Array([[2., 0.],
               [0., 6.]], dtype=float32)
    """
    return jacrev(fun, argnums=argnums, has_aux=has_aux, holomorphic=holomorphic,
                  allow_int=allow_int)


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function ``fun``: ``primals`` (arrays or
    ``ShapeDtypeStruct``s) give the input types; the result maps an output cotangent to the
    tuple of input cotangents.

    Example:
        >>> f_t = funcgrad.linear_transpose(lambda x: 2.0 * x[::-1], jnp.zeros(3))
        >>> f_t(jnp.array([1.0, 2.0, 3.0]))
        (Array([6., 4., 2.], dtype=float32),)
    """
    leaves, tree = tree_util.tree_flatten(primals)
    for leaf in leaves:
        if not dtypes.is_inexact(np.dtype(leaf.dtype)):
            raise TypeError(f"linear_transpose: inputs must be floating-point or complex, got "
                            f"{np.dtype(leaf.dtype)}")
    zeros = tree_util.tree_unflatten(tree, [np.zeros(leaf.shape, leaf.dtype) for leaf in leaves])
    out, pullback = vjp(fun, *zeros)
    out_tree = tree_util.tree_structure(out)

    def transposed(*cotangent):
        ct = cotangent[0] if len(cotangent) == 1 else cotangent
        if tree_util.tree_structure(ct) != out_tree:
            raise TypeError(f"linear_transpose: cotangent structure {tree_util.tree_structure(ct)}"
                            f" does not match the output {out_tree}")
        return pullback(ct)
    return transposed


def closure_convert(fun, *example_args):
    """``(converted, consts)``: ``converted(*args, *consts)`` computes ``fun(*args)`` with the
    floating-point values ``fun`` closes over (tracers of an enclosing transformation included)
    passed explicitly, as custom-derivative rules need.

    Example:
        >>> w = jnp.array([1.0, 2.0])
        >>> f, consts = funcgrad.closure_convert(lambda x: (x * w).sum(), jnp.ones(2))
        >>> len(consts), f(jnp.ones(2), *consts)
        (1, Array(3., dtype=float32))
    """
    closed = make_jaxpr(lambda *a: fun(*a))(*example_args)
    out_tree = tree_util.tree_structure(fun(*example_args))
    hoist = [i for i, c in enumerate(closed.consts)
             if isinstance(c, Tracer) or dtypes.is_inexact(aval_of(c).dtype)]
    consts = [closed.consts[i] for i in hoist]
    n_args = len(tree_util.tree_leaves(example_args))

    def converted(*args_and_consts):
        args, hoisted = args_and_consts[:len(example_args)], args_and_consts[len(example_args):]
        if len(hoisted) != len(consts):
            raise TypeError(f"closure_convert: expected {len(consts)} consts after the "
                            f"arguments, got {len(hoisted)}")
        values = list(closed.consts)
        for i, v in zip(hoist, hoisted):
            values[i] = v
        leaves = tree_util.tree_leaves(args)
        if len(leaves) != n_args:
            raise TypeError(f"closure_convert: expected {n_args} argument leaves, got "
                            f"{len(leaves)}")
        return tree_util.tree_unflatten(out_tree, eval_jaxpr(closed.jaxpr, values, *leaves))
    return converted, consts


def custom_gradient(fun):
    """``fun(*args)`` returns ``(value, vjp_fn)``; the result returns ``value`` and
    differentiates with ``vjp_fn(cotangent) -> one cotangent per argument``. The backward
    pass calls ``fun`` again to obtain ``vjp_fn``.

    Example:
        >>> @funcgrad.custom_gradient
        ... def clip_grad(x):
        ...     return x, lambda g: (jnp.clip(g, -1.0, 1.0),)
        >>> funcgrad.grad(lambda x: 5.0 * clip_grad(x))(2.0)
        Array(1., dtype=float32)
    """
    @custom_vjp
    def wrapped(*args):
        return fun(*args)[0]

    def fwd(*args):
        return fun(*args)[0], args

    def bwd(args, ct):
        grads = fun(*args)[1](ct)
        return tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)

    wrapped.defvjp(fwd, bwd)
    functools.update_wrapper(wrapped, fun, updated=())
    return wrapped


def named_call(fun, *, name=None):
    """``fun`` staged as one named equation (a ``composite`` named ``name``, default its
    ``__name__``), so Jaxprs and profiles show where it starts and ends.

    Example:
        >>> f = funcgrad.named_call(lambda x: x * 2.0, name="double")
        >>> funcgrad.make_jaxpr(f)(1.0).jaxpr.eqns[0].params["name"]
        'double'
        >>> f(3.0)
        Array(6., dtype=float32, weak_type=True)
    """
    return composite(fun, name or getattr(fun, "__name__", "named_call"))


def typeof(x):
    """The abstract value (shape, dtype, weak type) of ``x``.

    Example:
        >>> funcgrad.typeof(jnp.ones((2, 3)))
        f32[2,3]
    """
    return aval_of(x)


@contextlib.contextmanager
def enable_x64(new_val=True):
    """Turn 64-bit types on (or off) inside a ``with`` block.

    Example:
        >>> with funcgrad.enable_x64():
        ...     jnp.arange(2.0).dtype
        dtype('float64')
    """
    with config.override("enable_x64", bool(new_val)):
        yield


def live_arrays(platform=None):
    """The funcgrad Arrays currently alive (optionally only those on ``platform``).

    Example:
        >>> keep = jnp.ones(3)
        >>> any(a is keep for a in funcgrad.live_arrays())
        True
    """
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, Array) and not obj.is_deleted():
            if platform is None or any(d.platform == platform for d in obj.devices()):
                found.append(obj)
    return found
