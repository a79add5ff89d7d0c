"""Helpers for writing batching rules (the ``batch`` slot of a primitive).

A batching rule has the signature ``rule(args, dims, **params) -> (out, out_dim)`` (lists for
``multiple_results`` primitives). ``dims[i]`` is the axis of ``args[i]`` that holds the batch
(``not_mapped``, i.e. ``None``, when ``args[i]`` is the same for every batch member). A rule runs
under the parent interpreter of ``vmap``'s, so it computes with ordinary ``funcgrad.lax``
functions; ``out_dim`` may be ``not_mapped`` when the result does not depend on the batch.

An elementwise primitive takes a ready-made rule: ``exp_p.def_batch(broadcast_batcher(exp_p))``.

Example (a rule for a one-operand reduction, called as ``vmap`` would call it; registering it
is ``reduce_sum_p.def_batch(reduce_sum_batch)``):
    >>> from funcgrad.core.batching_util import bdim_to_front
    >>> def reduce_sum_batch(args, dims, axes):
    ...     x = bdim_to_front(args[0], dims[0])
    ...     return lax.reduce_sum(x, tuple(a + 1 for a in axes)), 0
    >>> reduce_sum_batch((jnp.ones((3, 2)),), (1,), axes=(0,))    # 2 examples of shape (3,)
    (Array([3., 3.], dtype=float32), 0)

This module depends on ``funcgrad.core`` only (the array operations it applies are registered
by ``funcgrad.lax``, see ``core/array_ops.py``), so every primitive family can use it.
``batch_jaxpr`` (for higher-order primitives: control flow, ``jit``) is in
``funcgrad.core.batching``.
"""
from funcgrad.core import array_ops
from funcgrad.core.primitive import rule_table
from funcgrad.core.values import aval_of

not_mapped = None

#: Collective primitives (psum, axis_index, ...): the ``collective`` rules,
#: prim -> rule(axis_data, args, dims, /, **params) where ``axis_data`` has ``.name`` and
#: ``.size`` (make it positional-only if the primitive has a param of the same name); consulted
#: by the batching interpreter before ``prim.batch`` when the primitive's ``axis_name`` param
#: names vmap's axis. Register with ``prim.def_rule("collective", rule)``.
collective_rules = rule_table("collective")


def ndim_of(x):
    return aval_of(x).ndim


def moveaxis(x, src, dst):
    """``x`` with axis ``src`` moved to position ``dst`` (a transpose; no-op when equal).

    Example:
        >>> from funcgrad.core.batching_util import moveaxis
        >>> moveaxis(jnp.zeros((3, 4, 5)), 2, 0).shape
        (5, 3, 4)
    """
    ndim = ndim_of(x)
    src, dst = src % ndim, dst % ndim
    if src == dst:
        return x
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return array_ops.transpose(x, perm)


def broadcast_batched(x, size, dst=0):
    """An unbatched ``x`` repeated ``size`` times along a new axis ``dst``.

    Example:
        >>> from funcgrad.core.batching_util import broadcast_batched
        >>> broadcast_batched(jnp.ones(3), 4, 1).shape
        (3, 4)
    """
    aval = aval_of(x)
    shape = list(aval.shape)
    shape.insert(dst, size)
    dims = [i for i in range(len(shape)) if i != dst]
    return array_ops.broadcast_in_dim(x, tuple(shape), tuple(dims))


def bdim_at(x, d, dst, size=None):
    """``x`` (batched at ``d``, or unbatched if ``d`` is None) with its batch axis at ``dst``.

    An unbatched ``x`` is broadcast to ``size`` (required then).

    Example:
        >>> from funcgrad.core.batching_util import bdim_at
        >>> bdim_at(jnp.zeros((7, 3, 4)), 0, 2).shape
        (3, 4, 7)
        >>> bdim_at(jnp.zeros((3, 4)), None, 1, size=7).shape
        (3, 7, 4)
    """
    if d is not_mapped:
        if size is None:
            raise ValueError("bdim_at: an unbatched operand needs the batch size to broadcast")
        return broadcast_batched(x, size, dst % (ndim_of(x) + 1))
    return moveaxis(x, d, dst)


def bdim_to_front(x, d, size=None):
    """``x`` with its batch axis first; an unbatched ``x`` (``d`` None) is broadcast to ``size``.

    Example:
        >>> from funcgrad.core.batching_util import bdim_to_front
        >>> bdim_to_front(jnp.zeros((3, 7)), 1).shape
        (7, 3)
    """
    return bdim_at(x, d, 0, size)


def batch_size(args, dims):
    """The batch size shared by the batched ``args`` (None if none is batched)."""
    for a, d in zip(args, dims):
        if d is not not_mapped:
            return aval_of(a).shape[d]
    return None


def all_to_front(args, dims, size=None):
    """Every arg with its batch axis first (unbatched ones broadcast): a list."""
    size = size if size is not None else batch_size(args, dims)
    return [bdim_to_front(a, d, size) for a, d in zip(args, dims)]


def shift_axes(axes, by=1):
    """Per-example axis numbers as axis numbers of arrays with ``by`` leading batch axes."""
    return tuple(int(a) + by for a in axes)


def axis_after_removing(d, removed):
    """Where axis ``d`` ends up after the axes ``removed`` are deleted."""
    return d - sum(1 for r in removed if r < d)


def broadcast_batcher(prim):
    """A batching rule for an elementwise primitive with any number of operands.

    Operands whose per-example shape is the full (largest-rank) shape get their batch axes
    aligned; unbatched ones are broadcast to the batch size. Per-example rank-0 operands the
    primitive accepts as scalars (``select_n``'s selector, ``clamp``'s bounds) stay scalars when
    unbatched and are broadcast to the full batched shape when batched. When every batched
    full-rank operand already has the same batch axis the result keeps it (no transposes).

    Example:
        >>> from funcgrad.core.batching_util import broadcast_batcher
        >>> from funcgrad.lax.elementwise import add_p
        >>> rule = broadcast_batcher(add_p)      # what add_p.def_batch received
        >>> rule((jnp.ones((2, 3)), jnp.arange(3.0)), (0, None))
        (Array([[1., 2., 3.],
               [1., 2., 3.]], dtype=float32), 0)
    """
    def rule(args, dims, **params):
        avals = [aval_of(a) for a in args]
        size = None
        per_example = []
        for a, d in zip(avals, dims):
            if d is not_mapped:
                per_example.append(a.shape)
            else:
                size = a.shape[d] if size is None else size
                per_example.append(a.shape[:d] + a.shape[d + 1:])
        if size is None:   # nothing batched: the interpreter should not have called us
            return prim.bind(*args, **params), not_mapped
        full = max(per_example, key=len)
        full_dims = {d for s, d in zip(per_example, dims) if d is not not_mapped and s == full}
        out_dim = full_dims.pop() if len(full_dims) == 1 else 0
        batched_full = list(full)
        batched_full.insert(out_dim, size)
        batched_full = tuple(batched_full)
        new_args = []
        for x, aval, d, s in zip(args, avals, dims, per_example):
            if s == full:
                x = bdim_at(x, d, out_dim, size)
            elif d is not not_mapped:
                # a batched scalar among array operands: broadcast it to the full shape
                if s != ():
                    raise TypeError(f"vmap of {prim.name}: cannot align operand "
                                    f"{aval.str_short()} (batch axis {d}) with per-example "
                                    f"shape {full}")
                x = array_ops.broadcast_in_dim(x, batched_full, (out_dim,))
            elif s != ():
                raise TypeError(f"vmap of {prim.name}: unbatched operand {aval.str_short()} "
                                f"does not match the per-example shape {full}")
            new_args.append(x)
        out = prim.bind(*new_args, **params)
        if prim.multiple_results:
            return out, [out_dim] * len(out)
        return out, out_dim
    rule.__name__ = f"{prim.name}_broadcast_batcher"
    return rule


def defbroadcasting(*prims):
    """Give each primitive in ``prims`` the ``broadcast_batcher`` rule."""
    for p in prims:
        p.def_batch(broadcast_batcher(p))


def vectorized_batcher(prim):
    """A rule for primitives that act on the leading axes independently when the batch axis is
    first (e.g. an op over the trailing axes): moves the batch to the front of every operand
    (broadcasting unbatched ones) and binds with unchanged params; the result is batched at 0.

    Example:
        >>> from funcgrad.core.batching_util import vectorized_batcher
        >>> from funcgrad.lax.linalg import cholesky_p
        >>> rule = vectorized_batcher(cholesky_p)      # what cholesky_p.def_batch received
        >>> x = jnp.stack([4.0 * jnp.eye(2), 9.0 * jnp.eye(2)], axis=2)   # batched at axis 2
        >>> out, dim = rule((x,), (2,))
        >>> out.shape, dim, out[:, 0, 0]
        ((2, 2, 2), 0, Array([2., 3.], dtype=float32))
    """
    def rule(args, dims, **params):
        out = prim.bind(*all_to_front(args, dims), **params)
        if prim.multiple_results:
            return out, [0] * len(out)
        return out, 0
    rule.__name__ = f"{prim.name}_vectorized_batcher"
    return rule
