"""Small NumPy helpers JAX users reach for: copy, ascontiguousarray, dsplit, block, iterable,
einsum_path, matvec, vecmat, packbits, unpackbits."""
import numpy as np

from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.core.values import aval_of
from funcgrad.numpy import ufuncs as uf
from funcgrad.numpy._util import canonicalize_axis, check_arraylike, promote_dtypes


def _asarray(x, dtype=None):
    from funcgrad.numpy.creation import asarray
    return asarray(x, dtype)


def copy(a, order=None):
    """A copy of ``a`` (arrays are immutable, so this is ``asarray``). Example: ``jnp.copy(x)``."""
    return _asarray(a)


def ascontiguousarray(a, dtype=None):
    """``a`` as an array (funcgrad arrays are always contiguous). Example:
    ``jnp.ascontiguousarray(x)``."""
    return _asarray(a, dtype)


def dsplit(ary, indices_or_sections):
    """Split along the third axis. Example: ``a, b = jnp.dsplit(jnp.ones((2, 2, 4)), 2)``."""
    from funcgrad.numpy.shape_ops import split
    ary = _asarray(ary)
    if aval_of(ary).ndim < 3:
        raise ValueError(f"funcgrad.numpy.dsplit: only works on arrays of 3 or more dimensions, "
                         f"got {aval_of(ary).str_short()}")
    return split(ary, indices_or_sections, axis=2)


def block(arrays):
    """Assemble an array from nested lists of blocks (as ``np.block``).

    Example:
        >>> jnp.block([[jnp.eye(2), jnp.zeros((2, 1))], [jnp.ones((1, 3))]])
        Array([[1., 0., 0.],
               [0., 1., 0.],
               [1., 1., 1.]], dtype=float32)
    """
    from funcgrad.numpy.shape_ops import concatenate

    def depth(x):
        return 1 + depth(x[0]) if isinstance(x, list) and x else (1 if isinstance(x, list) else 0)
    d = depth(arrays)
    if isinstance(arrays, tuple):
        raise TypeError("funcgrad.numpy.block: use lists, not tuples, for the nesting")
    leaves = []

    def collect(x):
        if isinstance(x, list):
            for y in x:
                collect(y)
        else:
            leaves.append(_asarray(x))
    collect(arrays)
    ndim = max([d] + [aval_of(a).ndim for a in leaves])

    def build(x, level):
        if not isinstance(x, list):
            a = _asarray(x)
            return lax.reshape(a, (1,) * (ndim - aval_of(a).ndim) + aval_of(a).shape)
        parts = promote_dtypes(*[build(y, level + 1) for y in x])
        return concatenate(parts, axis=-(d - level))
    return build(arrays, 0)


def iterable(y):
    """Whether ``iter(y)`` works (0-d arrays are not iterable). Example: ``jnp.iterable([1])``."""
    try:
        iter(y)
    except TypeError:
        return False
    return not (hasattr(y, "ndim") and y.ndim == 0)


def einsum_path(subscripts, *operands, optimize="greedy"):
    """The contraction order ``einsum`` would use (opt_einsum's path and a report).

    Example:
        >>> a, b, c = jnp.ones((2, 10)), jnp.ones((10, 10)), jnp.ones((10, 1))
        >>> path, info = jnp.einsum_path("ij,jk,kl->il", a, b, c)
        >>> path                  # the pairs of operands contracted in turn
        [(0, 1), (0, 1)]
    """
    import opt_einsum
    shapes = [np.empty(aval_of(o).shape, np.float32) for o in operands]
    return opt_einsum.contract_path(subscripts, *shapes, optimize=optimize)


def matvec(x1, x2, /):
    """Matrix-vector product over the last two/one axes, broadcasting the rest.

    Example:
        >>> jnp.matvec(jnp.ones((2, 3, 4)), jnp.ones(4)).shape
        (2, 3)
    """
    from funcgrad.numpy.products import matmul
    check_arraylike("matvec", x1, x2)
    return matmul(x1, _asarray(x2)[..., None])[..., 0]


def vecmat(x1, x2, /):
    """Vector-matrix product ``conj(x1) @ x2`` over the last axes, broadcasting the rest.

    Example:
        >>> jnp.vecmat(jnp.ones(3), jnp.ones((3, 4))).shape
        (4,)
    """
    from funcgrad.numpy.products import matmul
    check_arraylike("vecmat", x1, x2)
    return matmul(uf.conjugate(_asarray(x1))[..., None, :], x2)[..., 0, :]


def packbits(a, axis=None, bitorder="big"):
    """Pack the truth values of ``a`` into uint8 bits along ``axis`` (flattened when None).

    Example:
        >>> jnp.packbits(jnp.array([1, 0, 1, 1, 0, 0, 0, 1]))
        Array([177], dtype=uint8)
    """
    from funcgrad.numpy.shape_ops import moveaxis, pad, ravel
    a = _asarray(a)
    if not (dtypes.is_integer(aval_of(a).dtype) or aval_of(a).dtype == dtypes.bool_):
        raise TypeError(f"funcgrad.numpy.packbits: expected an integer or bool array, got "
                        f"{aval_of(a).str_short()}")
    if bitorder not in ("big", "little"):
        raise ValueError("funcgrad.numpy.packbits: bitorder must be 'big' or 'little'")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis("packbits", axis, aval_of(a).ndim)
    bits = lax.convert_element_type(uf.not_equal(a, 0), np.uint8)
    bits = moveaxis(bits, axis, -1)
    n = aval_of(bits).shape[-1]
    padn = (-n) % 8
    if padn:
        bits = pad(bits, [(0, 0)] * (aval_of(bits).ndim - 1) + [(0, padn)])
    shape = aval_of(bits).shape
    bits = lax.reshape(bits, shape[:-1] + ((n + padn) // 8, 8))
    weights = np.array([128, 64, 32, 16, 8, 4, 2, 1] if bitorder == "big"
                       else [1, 2, 4, 8, 16, 32, 64, 128], np.uint8)
    from funcgrad.numpy.reductions import sum as _sum
    packed = _sum(uf.multiply(bits, weights), axis=-1, dtype=np.uint8)
    return moveaxis(packed, -1, axis)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """Unpack uint8 elements into bits along ``axis`` (flattened when None).

    Example:
        >>> jnp.unpackbits(jnp.array([177], jnp.uint8))
        Array([1, 0, 1, 1, 0, 0, 0, 1], dtype=uint8)
    """
    from funcgrad.numpy.shape_ops import moveaxis, ravel
    a = _asarray(a)
    if aval_of(a).dtype != np.uint8:
        raise TypeError(f"funcgrad.numpy.unpackbits: expected a uint8 array, got "
                        f"{aval_of(a).str_short()}")
    if axis is None:
        a, axis = ravel(a), 0
    axis = canonicalize_axis("unpackbits", axis, aval_of(a).ndim)
    a = moveaxis(a, axis, -1)
    shifts = np.array([7, 6, 5, 4, 3, 2, 1, 0] if bitorder == "big"
                      else [0, 1, 2, 3, 4, 5, 6, 7], np.uint8)
    bits = uf.bitwise_and(uf.right_shift(a[..., None], shifts), np.uint8(1))
    shape = aval_of(bits).shape
    bits = lax.reshape(bits, shape[:-2] + (shape[-2] * 8,))
    if count is not None:
        n = shape[-2] * 8
        count = int(count)
        if count < 0:
            count = max(n + count, 0)
        if count <= n:
            bits = lax.slice_in_dim(bits, 0, count, axis=aval_of(bits).ndim - 1)
        else:
            from funcgrad.numpy.shape_ops import pad
            bits = pad(bits, [(0, 0)] * (aval_of(bits).ndim - 1) + [(0, count - n)])
    return moveaxis(bits, -1, axis)
