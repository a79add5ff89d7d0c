"""Debugging inside transformed code, as ``jax.debug``: ``funcgrad.debug.print`` and
``funcgrad.debug.callback`` run on the host with the actual values, also under ``jit``,
``grad`` (the primal values) and ``vmap`` (once per batch element).

Example:
    >>> @funcgrad.jit
    ... def f(x):
    ...     funcgrad.debug.print("x = {}, sum = {s}", x, s=x.sum())
    ...     return x * 2
    >>> f(jnp.arange(3.0))
    x = [0. 1. 2.], sum = 3.0
    Array([0., 2., 4.], dtype=float32)
"""
import builtins
import functools

from funcgrad.lax.callbacks import debug_callback


def callback(fn, *args, **kwargs):
    """Call ``fn(*args, **kwargs)`` on the host with the values of the (possibly traced)
    arguments, as NumPy arrays; returns None. Calls inside one compiled program may run in any
    order.

    Example:
        >>> funcgrad.jit(lambda x: funcgrad.debug.callback(print, x) or x)(jnp.ones(2))
        [1. 1.]
        Array([1., 1.], dtype=float32)
    """
    debug_callback(fn, *args, **kwargs)


def _format_and_print(fmt, file, flush, *args, **kwargs):
    builtins.print(fmt.format(*args, **kwargs), file=file, flush=flush)


def print(fmt, *args, file=None, flush=False, **kwargs):  # noqa: A001 (jax.debug's name)
    """``print(fmt.format(*args, **kwargs))`` with the runtime values of the arguments, also
    inside ``jit``, ``grad`` and ``vmap``.

    Example:
        >>> funcgrad.jit(lambda x: funcgrad.debug.print("x: {}", x) or x)(jnp.arange(2))
        x: [0 1]
        Array([0, 1], dtype=int32)
    """
    if not isinstance(fmt, str):
        raise TypeError(f"funcgrad.debug.print: the format must be a str, got "
                        f"{type(fmt).__name__}")
    debug_callback(functools.partial(_format_and_print, fmt, file, flush), *args, **kwargs)
