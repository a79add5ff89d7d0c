"""``scan`` and the functions built on it (``map``), plus ``associative_scan``: the ``scan``
primitive (a loop over the leading axis of its ``xs`` carrying a state), its shape and batching
rules and the function that binds it. Its lowering is in ``scan_lowering.py``, its jvp and
transpose (reverse mode) in ``scan_reverse.py``."""
import builtins

import numpy as np

from funcgrad import tree_util
from funcgrad.core import batching_util as bu
from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching import batch_jaxpr, map_leading_axis
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.control_flow.common import (
    _abstractify, _carry_avals, _check_carry, _intern, _parts, _strong, _to_strong, _trace,
    _widen_carry)


scan_p = Primitive("scan", multiple_results=True)


@scan_p.def_abstract_eval
def _scan_abstract(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    carry = args[num_consts:num_consts + num_carry]
    xs = args[num_consts + num_carry:]
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise TypeError(f"scan: every xs leaf needs leading dimension {length}, got "
                            f"{x.str_short()}")
    ys = jaxpr.out_avals[num_carry:]
    return [_strong(a) for a in carry] + [ShapedArray((length,) + y.shape, y.dtype, False, y.vma)
                                          for y in ys]


@scan_p.def_batch
def _scan_batch(args, dims, jaxpr, num_consts, num_carry, length, reverse, unroll):
    size = bu.batch_size(args, dims)
    n_c, n_k = num_consts, num_carry
    consts, carry, xs = args[:n_c], list(args[n_c:n_c + n_k]), args[n_c + n_k:]
    cdims, kdims, xdims = dims[:n_c], list(dims[n_c:n_c + n_k]), dims[n_c + n_k:]
    consts = [bu.bdim_to_front(c, d) if d is not None else c for c, d in zip(consts, cdims)]
    xs = [bu.bdim_at(x, d, 1) if d is not None else x for x, d in zip(xs, xdims)]
    c_in = [0 if d is not None else None for d in cdims]
    x_in = [0 if d is not None else None for d in xdims]
    batched = [d is not None for d in kdims]
    while True:
        k_in = [0 if b else None for b in batched]
        _, od = batch_jaxpr(jaxpr, size, c_in + k_in + x_in)
        new = [b or d is not None for b, d in zip(batched, od[:n_k])]
        if new == batched:
            break
        batched = new
    k_in = [0 if b else None for b in batched]
    _, od = batch_jaxpr(jaxpr, size, c_in + k_in + x_in)
    y_out = [0 if d is not None else None for d in od[n_k:]]
    body, _ = batch_jaxpr(jaxpr, size, c_in + k_in + x_in, out_dims=k_in + y_out)
    j, extra = _parts(body)
    carry = [bu.bdim_to_front(c, d, size) if b else c for c, d, b in zip(carry, kdims, batched)]
    outs = scan_p.bind(*extra, *consts, *carry, *xs, jaxpr=_intern(j),
                       num_consts=len(extra) + n_c, num_carry=n_k, length=length,
                       reverse=reverse, unroll=unroll)
    return outs, k_in + [1 if d is not None else None for d in y_out]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns (carry, ys).

    ``xs`` may be any pytree (or None with ``length``); ``ys`` stacks the per-step outputs.
    ``reverse`` walks from the end; ``unroll`` runs that many steps per loop iteration (True:
    all). Differentiable in forward and reverse mode, and batchable.

    Example:
        >>> def step(c, x):
        ...     return c + x, c * x
        >>> total, partial = lax.scan(step, 0.0, jnp.arange(5.0))
    """
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {type(f).__name__}")
    x_leaves, x_tree = tree_util.tree_flatten(xs)
    x_avals = _abstractify(x_leaves)
    lengths = {a.shape[0] if a.shape else None for a in x_avals}
    if None in lengths:
        bad = [a.str_short() for a in x_avals if not a.shape]
        raise TypeError(f"scan: xs leaves must have a leading axis to scan over, got "
                        f"{', '.join(bad)}")
    if length is not None:
        try:
            length = int(length)
        except TypeError:
            raise TypeError(f"scan: length must be a static int, got {length!r}") from None
        if lengths and lengths != {length}:
            raise ValueError(f"scan: length={length} but xs have leading sizes "
                             f"{sorted(lengths)}")
    elif len(lengths) == 1:
        length = lengths.pop()
    elif not lengths:
        raise ValueError("scan: with no xs, pass length=")
    else:
        raise ValueError(f"scan: xs leaves have different leading sizes {sorted(lengths)}; "
                         f"{', '.join(a.str_short() for a in x_avals)}")
    if unroll is True:
        unroll = builtins.max(length, 1)
    elif unroll is False:
        unroll = 1
    unroll = int(unroll)
    if unroll < 1:
        raise ValueError(f"scan: unroll must be >= 1, got {unroll}")
    c_leaves, c_tree = tree_util.tree_flatten(init)
    c_avals = _carry_avals(c_leaves)
    c_leaves = [_to_strong(x, a) for x, a in zip(c_leaves, _abstractify(c_leaves))]
    slice_avals = [ShapedArray(a.shape[1:], a.dtype, False, a.vma) for a in x_avals]
    in_tree = tree_util.tree_structure((tree_util.tree_unflatten(c_tree, c_leaves),
                                        tree_util.tree_unflatten(x_tree, x_leaves)))
    out_trees = []

    def body(carry, x):
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan: f must return a pair (new_carry, y), got "
                            f"{type(out).__name__}")
        new_carry, y = out
        c_out, c_out_tree = tree_util.tree_flatten(new_carry)
        y_out, y_tree = tree_util.tree_flatten(y)
        out_trees.append((c_out_tree, y_tree))
        return tuple(c_out) + tuple(y_out)

    while True:
        jaxpr, consts, _ = _trace(body, in_tree, c_avals + slice_avals, "scan f")
        wider = _widen_carry(c_leaves, c_avals, jaxpr.out_avals[:len(c_avals)])
        if wider is None:
            break
        c_leaves, c_avals = wider
    c_out_tree, y_tree = out_trees[0]
    _check_carry("scan", "f's new carry", c_tree, c_avals, c_out_tree,
                 jaxpr.out_avals[:len(c_avals)])
    outs = scan_p.bind(*consts, *c_leaves, *x_leaves, jaxpr=_intern(jaxpr),
                       num_consts=len(consts), num_carry=len(c_leaves), length=length,
                       reverse=bool(reverse), unroll=unroll)
    carry = tree_util.tree_unflatten(c_tree, outs[:len(c_leaves)])
    ys = tree_util.tree_unflatten(y_tree, outs[len(c_leaves):])
    return carry, ys


def map(f, xs, *, batch_size=None):
    """``f`` applied to each slice of ``xs`` along its leading axis, results stacked (a scan).

    ``batch_size`` processes that many slices per step with ``funcgrad.vmap``.

    Example:
        >>> lax.map(lambda r: r @ r, jnp.arange(6.0).reshape(3, 2))
        Array([ 1., 13., 41.], dtype=float32)
    """
    if batch_size is None:
        _, ys = scan(lambda c, x: (c, f(x)), (), xs)
        return ys
    leaves, tree = tree_util.tree_flatten(xs)
    n = aval_of(leaves[0]).shape[0]
    b = int(batch_size)
    n_main = (n // b) * b
    main = [shapes.reshape(shapes.slice_in_dim(x, 0, n_main), (n // b, b) + aval_of(x).shape[1:])
            for x in leaves]
    _, ys = scan(lambda c, x: (c, map_leading_axis(f)(tree_util.tree_unflatten(tree, list(x)))), (),
                 tuple(main))
    ys = tree_util.tree_map(lambda y: shapes.reshape(y, (n_main,) + aval_of(y).shape[2:]), ys)
    if n_main < n:
        rest = [shapes.slice_in_dim(x, n_main, n) for x in leaves]
        ys_rest = map_leading_axis(f)(tree_util.tree_unflatten(tree, rest))
        ys = tree_util.tree_map(lambda a, r: shapes.concatenate([a, r], 0), ys, ys_rest)
    return ys


# --- associative_scan (composed of slices, pads and the user's function) ---------------------
def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations ``fn(...fn(fn(e0, e1), e2)..., ek)`` along ``axis``, computed in
    ``O(log n)`` rounds of vectorized ``fn`` calls (``fn`` must be associative and act
    elementwise on slices). ``elems`` is a pytree of arrays sharing the axis length.

    Built from slicing, padding and ``fn`` itself, so it differentiates and batches through them.

    Example:
        >>> lax.associative_scan(lax.add, jnp.arange(5.0))     # cumulative sum
        Array([ 0.,  1.,  3.,  6., 10.], dtype=float32)
    """
    leaves, tree = tree_util.tree_flatten(elems)
    if not leaves:
        return elems
    ndim = aval_of(leaves[0]).ndim
    if ndim == 0:
        raise TypeError("associative_scan: elems must have at least one axis")
    axis = int(axis) % ndim
    n = aval_of(leaves[0]).shape[axis]
    for x in leaves:
        if aval_of(x).ndim <= axis or aval_of(x).shape[axis] != n:
            raise ValueError(f"associative_scan: every leaf needs length {n} along axis {axis}, "
                             f"got {', '.join(aval_of(y).str_short() for y in leaves)}")
    if reverse:
        leaves = [shapes.rev(x, (axis,)) for x in leaves]

    def sl(xs, start, stop, step=1):
        return [shapes.slice_in_dim(x, start, stop, step, axis) for x in xs]

    def combine(a, b):
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return the structure of elems {tree}, "
                            f"got {out_tree}")
        return out_leaves

    def interleave(a, b):
        # a holds positions 0, 2, 4...; b holds 1, 3, 5...
        out = []
        for x, y in zip(a, b):
            na, nb = aval_of(x).shape[axis], aval_of(y).shape[axis]
            cfg_a = [(0, 0, 0)] * ndim
            cfg_b = [(0, 0, 0)] * ndim
            cfg_a[axis] = (0, 1 if na == nb else 0, 1)
            cfg_b[axis] = (1, 0 if na == nb else 1, 1)
            dt = aval_of(x).dtype
            zero = np.zeros((), dt)
            xa, yb = shapes.pad(x, zero, cfg_a), shapes.pad(y, zero, cfg_b)
            out.append(ew.bitwise_or(xa, yb) if dt == dtypes.bool_ else ew.add(xa, yb))
        return out

    def rec(xs):
        m = aval_of(xs[0]).shape[axis]
        if m < 2:
            return xs
        pairs = combine(sl(xs, 0, m - 1, 2), sl(xs, 1, m, 2))
        odd = rec(pairs)
        if m % 2 == 0:
            even = combine(sl(odd, 0, aval_of(odd[0]).shape[axis] - 1), sl(xs, 2, m, 2))
        else:
            even = combine(odd, sl(xs, 2, m, 2))
        even = [shapes.concatenate([f, e], axis) for f, e in zip(sl(xs, 0, 1), even)]
        return interleave(even, odd)

    out = rec(leaves)
    if reverse:
        out = [shapes.rev(x, (axis,)) for x in out]
    return tree_util.tree_unflatten(tree, out)
