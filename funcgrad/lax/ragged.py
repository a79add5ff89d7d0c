"""Grouped and scaled products of ``jax.lax``: ``ragged_dot`` / ``ragged_dot_general`` (rows,
contraction entries or batch entries split into consecutive groups, e.g. tokens routed to the
experts of a mixture-of-experts layer) and ``scaled_dot`` (block-scaled operands).

They are written over ``dot_general`` with group masks, so they differentiate (in the operands)
and batch like it.
"""
import numpy as np

from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.lax import reductions, shapes
from funcgrad.lax import elementwise as ew
from funcgrad.lax.dot import dot_general
from funcgrad.lax.enums import RaggedDotDimensionNumbers

__all__ = ["ragged_dot", "ragged_dot_general", "scaled_dot"]


def _group_masks(group_sizes, size, dtype, where):
    """(g, size) masks: entry (j, i) is 1 where position i falls in group j (consecutive groups
    of ``group_sizes``; positions past their total are in no group)."""
    gaval = aval_of(group_sizes)
    if gaval.ndim != 1 or not dtypes.is_integer(gaval.dtype):
        raise TypeError(f"lax.{where}: group_sizes must be a 1-d integer array, got "
                        f"{gaval.str_short()}")
    g = gaval.shape[0]
    sizes = ew.convert_element_type(group_sizes, dtypes.int32)
    ends = reductions.cumsum(sizes, 0)
    starts = ew.sub(ends, sizes)
    pos = shapes.broadcasted_iota(dtypes.int32, (g, size), 1)
    lo = shapes.broadcast_in_dim(starts, (g, size), (0,))
    hi = shapes.broadcast_in_dim(ends, (g, size), (0,))
    inside = ew.bitwise_and(ew.ge(pos, lo), ew.lt(pos, hi))
    return ew.convert_element_type(inside, dtype), g


def _masked(x, masks, axis):
    """(g, *x.shape): ``x`` times each group's mask along ``axis``."""
    aval = aval_of(x)
    g = aval_of(masks).shape[0]
    full = (g,) + aval.shape
    return ew.mul(shapes.broadcast_in_dim(x, full, tuple(range(1, aval.ndim + 1))),
                  shapes.broadcast_in_dim(masks, full, (0, axis + 1)))


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """``dot_general`` with one lhs dimension split into consecutive groups of
    ``group_sizes`` (shape ``[g]``). Three modes, by the kind of the ragged dimension:
    a non-contracting one (each group multiplies its own slice ``g`` of the rhs group
    dimension), a contracting one (one product per group, stacked on a new leading axis), or
    a batch one (an ordinary ``dot_general``).

    Example:
        >>> lhs, rhs = jnp.ones((5, 2)), jnp.stack([jnp.eye(2), 2 * jnp.eye(2)])
        >>> dn = lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
        >>> lax.ragged_dot_general(lhs, rhs, jnp.array([2, 3]), dn)[:, 0]
        Array([1., 1., 2., 2., 2.], dtype=float32)
    """
    where = "ragged_dot_general"
    if group_offset is not None:
        raise ValueError(f"lax.{where}: group_offset is not supported (pass the groups to "
                         f"compute in group_sizes)")
    rdn = RaggedDotDimensionNumbers(*ragged_dot_dimension_numbers)
    (lc, rc), (lb, rb) = [[tuple(int(i) for i in d) for d in pair]
                          for pair in rdn.dot_dimension_numbers]
    ragged = [int(d) for d in rdn.lhs_ragged_dimensions]
    groups = [int(d) for d in rdn.rhs_group_dimensions]
    la, ra = aval_of(lhs), aval_of(rhs)
    if len(ragged) != 1 or len(groups) > 1:
        raise ValueError(f"lax.{where}: need exactly one lhs ragged dimension and at most one "
                         f"rhs group dimension, got {rdn}")
    r = ragged[0] % la.ndim
    masks, g = _group_masks(group_sizes, la.shape[r], la.dtype, where)
    kw = dict(precision=precision, preferred_element_type=preferred_element_type)
    if r in lb:
        return dot_general(lhs, rhs, ((lc, rc), (lb, rb)), **kw)
    up = tuple(d + 1 for d in lc), tuple(d + 1 for d in lb)
    if r in lc:       # one product per group, stacked in front
        if groups:
            raise ValueError(f"lax.{where}: a contracting ragged dimension takes no rhs group "
                             f"dimension, got {rdn}")
        out = dot_general(_masked(lhs, masks, r), rhs, ((up[0], rc), (up[1], rb)), **kw)
        return shapes.transpose(out, (len(lb),) + tuple(i for i in range(aval_of(out).ndim)
                                                        if i != len(lb)))
    if not groups:
        raise ValueError(f"lax.{where}: a non-contracting ragged dimension needs an rhs group "
                         f"dimension, got {rdn}")
    gd = groups[0] % ra.ndim
    if ra.shape[gd] != g:
        raise ValueError(f"lax.{where}: rhs group dimension {gd} of {ra.str_short()} must have "
                         f"the {g} groups of group_sizes")
    out = dot_general(_masked(lhs, masks, r), rhs,
                      ((up[0], rc), ((0,) + up[1], (gd,) + rb)), **kw)
    return reductions.reduce_sum(out, (0,))


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """Rows of ``lhs`` (m, k) in consecutive groups of ``group_sizes`` (g,), each group times
    its own matrix of ``rhs`` (g, k, n); rows past the groups give zeros.

    Example:
        >>> lhs, rhs = jnp.ones((4, 2)), jnp.stack([jnp.ones((2, 1)), 3 * jnp.ones((2, 1))])
        >>> lax.ragged_dot(lhs, rhs, jnp.array([1, 2]))[:, 0]
        Array([2., 6., 6., 0.], dtype=float32)
    """
    la, ra = aval_of(lhs), aval_of(rhs)
    if la.ndim != 2 or ra.ndim != 3:
        raise TypeError(f"lax.ragged_dot: expected lhs (m, k) and rhs (g, k, n), got "
                        f"{la.str_short()} and {ra.str_short()}")
    dn = RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))
    return ragged_dot_general(lhs, rhs, group_sizes, dn, precision, preferred_element_type,
                              group_offset)


def _expand_scale(scale, operand_shape, contract, where):
    """``scale`` repeated along the contracting dimensions up to the operand's shape."""
    saval = aval_of(scale)
    if saval.ndim != len(operand_shape):
        raise ValueError(f"lax.{where}: a scale must have the operand's rank, got "
                         f"{saval.str_short()} for shape {operand_shape}")
    for d, (s, n) in enumerate(zip(saval.shape, operand_shape)):
        if (d in contract and (s == 0 or n % s)) or (d not in contract and s != n):
            raise ValueError(f"lax.{where}: scale {saval.str_short()} does not fit operand "
                             f"shape {operand_shape}: non-contracting sizes must match and "
                             f"contracting sizes must divide")
    wide, dims = [], []
    for d, (s, n) in enumerate(zip(saval.shape, operand_shape)):
        dims.append(len(wide))
        wide.append(s)
        if d in contract:
            wide.append(n // s)
    y = shapes.broadcast_in_dim(scale, tuple(wide), tuple(dims))
    return shapes.reshape(y, tuple(operand_shape))


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """``(lhs * lhs_scale) @ (rhs * rhs_scale)`` by ``dot_general``, each scale repeated over
    blocks (sub-channels) of the contracting dimensions, computed in
    ``preferred_element_type`` (default float32).

    Example:
        >>> lhs, rhs = jnp.ones((2, 4)), jnp.ones((4, 3))
        >>> ls = jnp.array([[1.0, 2.0], [1.0, 1.0]])          # one scale per 2 columns
        >>> lax.scaled_dot(lhs, rhs, lhs_scale=ls, rhs_scale=jnp.ones((2, 3)))
        Array([[6., 6., 6.],
               [4., 4., 4.]], dtype=float32)
    """
    la, ra = aval_of(lhs), aval_of(rhs)
    if dimension_numbers is None:
        if la.ndim == 2 and ra.ndim == 2:
            dimension_numbers = (((1,), (0,)), ((), ()))
        elif la.ndim == 3 and ra.ndim == 3:
            dimension_numbers = (((2,), (1,)), ((0,), (0,)))
        else:
            raise ValueError(f"lax.scaled_dot: give dimension_numbers for operands "
                             f"{la.str_short()} and {ra.str_short()}")
    (lc, rc), (lb, rb) = dimension_numbers
    out_dt = np.dtype(dtypes.canonicalize(preferred_element_type or np.float32))
    x = ew.convert_element_type(lhs, out_dt)
    y = ew.convert_element_type(rhs, out_dt)
    if lhs_scale is not None:
        x = ew.mul(x, _expand_scale(ew.convert_element_type(lhs_scale, out_dt), la.shape,
                                    tuple(lc), "scaled_dot"))
    if rhs_scale is not None:
        y = ew.mul(y, _expand_scale(ew.convert_element_type(rhs_scale, out_dt), ra.shape,
                                    tuple(rc), "scaled_dot"))
    return dot_general(x, y, ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb))),
                       preferred_element_type=out_dt)
