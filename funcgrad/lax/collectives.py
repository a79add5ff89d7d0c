"""``jax.lax``'s collectives written over funcgrad's collective primitives (``lax.parallel``):
broadcast from one member, permutation by a member list, swapping a positional axis with the
named one, and JAX's axis-type cast. They work wherever the primitives do: under ``vmap`` with
an ``axis_name``, under ``pmap``, and they differentiate and batch through them.
"""
import numpy as np

from funcgrad import tree_util
from funcgrad.core.values import aval_of
from funcgrad.lax import elementwise as ew
from funcgrad.lax import parallel, shapes

__all__ = ["pbroadcast", "pcast", "pshuffle", "pswapaxes"]


def pbroadcast(x, axis_name, source):
    """Every member of ``axis_name`` gets member ``source``'s ``x`` (a pytree too).

    Example:
        >>> funcgrad.vmap(lambda v: lax.pbroadcast(v, "i", 2), axis_name="i")(
        ...     jnp.array([1.0, 2.0, 3.0]))
        Array([3., 3., 3.], dtype=float32)
    """
    size = parallel.axis_size(axis_name)
    if not 0 <= int(source) < size:
        raise ValueError(f"lax.pbroadcast: source {source} is not a member of axis "
                         f"{axis_name!r} of size {size}")

    def one(v):
        aval = aval_of(v)
        mine = ew.eq(parallel.axis_index(axis_name), np.int32(source))
        as_num = ew.convert_element_type(v, np.int32) if aval.dtype == np.bool_ else v
        zero = shapes.full(aval.shape, 0, aval_of(as_num).dtype)
        kept = ew.select(shapes.broadcast_in_dim(mine, aval.shape, ()), as_num, zero)
        out = parallel.psum(kept, axis_name)
        return ew.convert_element_type(out, np.bool_) if aval.dtype == np.bool_ else out
    return tree_util.tree_map(one, x)


def pshuffle(x, axis_name, perm):
    """Member ``i`` gets the ``x`` of member ``perm[i]``.

    Example:
        >>> funcgrad.vmap(lambda v: lax.pshuffle(v, "i", [2, 0, 1]), axis_name="i")(
        ...     jnp.array([10.0, 11.0, 12.0]))
        Array([12., 10., 11.], dtype=float32)
    """
    perm = [int(p) for p in perm]
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"lax.pshuffle: perm {perm} is not a permutation of "
                         f"0..{len(perm) - 1}")
    return parallel.ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the named axis with positional ``axis`` of ``x`` (whose size must equal the
    named axis's): ``all_to_all`` splitting and stacking along ``axis``.

    Example:
        >>> x = jnp.arange(4.0).reshape(2, 2)
        >>> funcgrad.vmap(lambda v: lax.pswapaxes(v, "i", 0), axis_name="i")(x)
        Array([[0., 2.],
               [1., 3.]], dtype=float32)
    """
    if axis_index_groups is not None:
        raise ValueError("lax.pswapaxes: axis_index_groups is not supported; split the axis "
                         "with a nested vmap/pmap instead")
    return parallel.all_to_all(x, axis_name, axis, axis)


_PCAST_TO = ("varying", "reduced", "unreduced")


def pcast(x, axis_name, *, to):
    """JAX's cast between axis types (``to`` one of 'varying', 'reduced', 'unreduced').
    ``to='varying'`` is ``lax.pvary`` (inside a checked ``shard_map`` body); funcgrad has no
    reduced or unreduced types, so those casts pass the values unchanged.

    Example:
        >>> funcgrad.vmap(lambda v: lax.pcast(v, "i", to="varying"), axis_name="i")(jnp.ones(2))
        Array([1., 1.], dtype=float32)
    """
    if isinstance(axis_name, (set, frozenset)):
        raise TypeError(f"lax.pcast: axis_name must be a name or a tuple of names, got "
                        f"{axis_name!r}")
    if to not in _PCAST_TO:
        raise ValueError(f"lax.pcast: to={to!r}; expected one of {_PCAST_TO}")
    for name in axis_name if isinstance(axis_name, tuple) else (axis_name,):
        parallel.axis_size(name)     # raises for an axis that is not bound
    return parallel.pvary(x, axis_name) if to == "varying" else x
