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

import numpy as np

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


def _out_of_range(ids, size, ignore):
    """The first id outside ``[0, size)`` (and not ``ignore``), or None."""
    ids = np.asarray(ids)
    bad = (ids < 0) | (ids >= size)
    if ignore is not None:
        bad &= ids != ignore
    if not bad.any():
        return None
    return ids[bad].flat[0].item()


def _raise_out_of_range(ids, size, where, what, ignore, of):
    bad = _out_of_range(ids, size, ignore)
    if bad is not None:
        extra = f", or {ignore} to ignore" if ignore is not None else ""
        raise IndexError(f"{where}: {what} {bad} is out of range for {of or f'size {size}'} "
                         f"(valid: 0..{size - 1}{extra})")


def check_ids(ids, size, where, what="index", ignore=None, of=None):
    """Raise ``IndexError`` if an integer id is outside ``[0, size)`` (ids equal to ``ignore``
    pass), as PyTorch's embedding and losses do. ``of`` names the size in the message.

    Concrete ids are checked now. Traced ids (inside ``jit``/``vmap``) are checked when the
    compiled code runs only if ``funcgrad.config.debug_checks`` is on (a host callback: slower,
    for debugging); otherwise they are not checked, and the callers document what an
    out-of-range id gives there (NaN rows and losses, never another row's values).

    Example:
        >>> funcgrad.debug.check_ids(jnp.array([1, 9]), 5, "Embedding(5, 3)")
        Traceback (most recent call last):
        ...
        IndexError: Embedding(5, 3): index 9 is out of range for size 5 (valid: 0..4)
        >>> with funcgrad.config.override("debug_checks", True):
        ...     funcgrad.jit(lambda i: funcgrad.debug.check_ids(i, 5, "f") or i)(jnp.array([7]))
        Traceback (most recent call last):
        ...
        IndexError: f: index 7 is out of range for size 5 (valid: 0..4)
    """
    from funcgrad.core.interpreters import Tracer
    from funcgrad.config import config
    if not isinstance(ids, Tracer):
        _raise_out_of_range(ids, size, where, what, ignore, of)
    elif config.debug_checks:
        debug_callback(functools.partial(_raise_out_of_range, size=size, where=where,
                                         what=what, ignore=ignore, of=of), ids)


def visualize_array_sharding(x, *, file=None):
    """Print which devices hold which block of ``x`` (a 1-d or 2-d Array), as a text grid:
    one cell per block, naming the devices holding it (several when replicated).

    Example:
        >>> funcgrad.debug.visualize_array_sharding(jnp.ones((2, 3)))
        +-------+
        | CPU 0 |
        +-------+
    """
    from funcgrad.lowering.array import Array
    if not isinstance(x, Array):
        raise TypeError(f"visualize_array_sharding: expected an Array, got {type(x).__name__}")
    if x.ndim > 2:
        raise ValueError(f"visualize_array_sharding: only 1-d and 2-d arrays can be shown, got "
                         f"shape {x.shape}")
    index = x.sharding.devices_indices_map(x.shape)
    shape = x.shape if x.ndim == 2 else (1,) + x.shape
    index = {d: (slice(None),) * (2 - x.ndim) + tuple(ix) for d, ix in index.items()}
    bounds = [sorted({ix[k].indices(shape[k])[:2] for ix in index.values()}) for k in (0, 1)]
    cells = {}
    for d, ix in sorted(index.items(), key=lambda item: item[0].id):
        at = tuple(bounds[k].index(ix[k].indices(shape[k])[:2]) for k in (0, 1))
        cells.setdefault(at, []).append(d)
    labels = {at: f"{ds[0].platform.upper()} {','.join(str(d.id) for d in ds)}"
              for at, ds in cells.items()}
    width = max(len(s) for s in labels.values()) + 2
    rule = "+" + "+".join(["-" * width] * len(bounds[1])) + "+"
    lines = [rule]
    for r in range(len(bounds[0])):
        lines.append("|" + "|".join(labels[(r, c)].center(width)
                                    for c in range(len(bounds[1]))) + "|")
        lines.append(rule)
    builtins.print("\n".join(lines), file=file)
