"""Products: matmul, dot, vdot, inner, outer, tensordot, einsum (paths from opt_einsum)."""
import builtins

import numpy as np
import opt_einsum

from funcgrad import lax
from funcgrad.core.values import aval_of
from funcgrad.numpy._util import broadcast_shapes, broadcast_to_shape, check_arraylike, \
    promote_dtypes
from funcgrad.numpy.creation import asarray


def matmul(a, b, *, precision=None, preferred_element_type=None):
    """Matrix product with NumPy's rules (1-d operands promoted, leading axes broadcast).

    Example:
        >>> jnp.matmul(jnp.ones((2, 3)), jnp.ones((3, 4))).shape
        (2, 4)
    """
    check_arraylike("matmul", a, b)
    a, b = promote_dtypes(a, b)
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if not sa or not sb:
        raise ValueError(f"funcgrad.numpy.matmul: operands must be at least 1-d, got shapes "
                         f"{sa} and {sb}")
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:
        a = lax.reshape(a, (1,) + sa)
    if b_vec:
        b = lax.reshape(b, sb + (1,))
    sa, sb = aval_of(a).shape, aval_of(b).shape
    if sa[-1] != sb[-2]:
        raise ValueError(f"funcgrad.numpy.matmul: contracting dimensions differ: "
                         f"{'(' + str(sa[-1]) + ',)' if a_vec else sa} @ "
                         f"{'(' + str(sb[-2]) + ',)' if b_vec else sb}")
    batch = broadcast_shapes("matmul", sa[:-2], sb[:-2])
    nb = len(batch)
    if len(sb) == 2 and nb:
        # (..., m, k) @ (k, n): contract directly; broadcasting b to a batch would make the
        # transpose (b's gradient) a batched product summed over the batch.
        out = lax.dot_general(a, b, (((len(sa) - 1,), (0,)), ((), ())),
                              precision=precision,
                              preferred_element_type=preferred_element_type)
        return _unpromote(out, a_vec, b_vec, nb)
    if len(sa) == 2 and nb:
        # (m, k) @ (..., k, n): the product of b's matrices with a, then (n, m) -> (m, n).
        out = lax.dot_general(b, a, (((len(sb) - 2,), (1,)), ((), ())),
                              precision=precision,
                              preferred_element_type=preferred_element_type)
        out = lax.transpose(out, tuple(range(nb)) + (nb + 1, nb))
        return _unpromote(out, a_vec, b_vec, nb)
    if sa[:-2] != batch:
        a = broadcast_to_shape(a, batch + sa[-2:])
    if sb[:-2] != batch:
        b = broadcast_to_shape(b, batch + sb[-2:])
    bdims = tuple(range(nb))
    out = lax.dot_general(a, b, (((nb + 1,), (nb,)), (bdims, bdims)), precision=precision,
                          preferred_element_type=preferred_element_type)
    return _unpromote(out, a_vec, b_vec, nb)


def _unpromote(out, a_vec, b_vec, nb):
    """Drop the unit axes matmul added to 1-d operands."""
    if a_vec:
        out = lax.squeeze(out, (nb,))
    if b_vec:
        out = lax.squeeze(out, (aval_of(out).ndim - 1,))
    return out


def dot(a, b, *, precision=None, preferred_element_type=None):
    """NumPy's ``dot``: sum over the last axis of ``a`` and the second-to-last of ``b``.

    Example:
        >>> jnp.dot(jnp.arange(3.0), jnp.arange(3.0))
        Array(5., dtype=float32)
    """
    check_arraylike("dot", a, b)
    a, b = promote_dtypes(a, b)
    na, nb = aval_of(a).ndim, aval_of(b).ndim
    if na == 0 or nb == 0:
        from funcgrad.numpy.ufuncs import multiply
        return multiply(a, b)
    contract_b = 0 if nb == 1 else nb - 2
    _check_contract("dot", aval_of(a), na - 1, aval_of(b), contract_b)
    return lax.dot_general(a, b, (((na - 1,), (contract_b,)), ((), ())), precision=precision,
                           preferred_element_type=preferred_element_type)


def _check_contract(fname, la, i, lb, j):
    if la.shape[i] != lb.shape[j]:
        raise ValueError(f"funcgrad.numpy.{fname}: shapes {la.shape} and {lb.shape} not aligned: "
                         f"{la.shape[i]} (axis {i}) != {lb.shape[j]} (axis {j})")


def vdot(a, b, *, precision=None):
    """Dot product of flattened arrays, conjugating the first. Example: ``jnp.vdot(a, b)``."""
    from funcgrad.numpy.ufuncs import conjugate
    return dot(conjugate(asarray(a)).reshape(-1), asarray(b).reshape(-1), precision=precision)


def vecdot(x1, x2, /, *, axis=-1):
    """Array-API vector dot along ``axis`` (conjugating x1). Example: ``jnp.vecdot(a, b)``."""
    from funcgrad.numpy.reductions import sum
    from funcgrad.numpy.ufuncs import conjugate, multiply
    a1, a2 = aval_of(asarray(x1)), aval_of(asarray(x2))
    ndim = builtins.max(a1.ndim, a2.ndim)
    ax = axis if axis < 0 else axis - ndim
    if not -ndim <= ax < 0 or -ax > builtins.min(a1.ndim, a2.ndim) or a1.shape[ax] != a2.shape[ax]:
        raise ValueError(f"funcgrad.numpy.vecdot: x1 {a1.str_short()} and x2 {a2.str_short()} "
                         f"must have the same size along axis {axis} (it is not broadcast)")
    prod = multiply(conjugate(x1), x2)
    # the promoted dtype of x1 and x2: small integers are not widened as sum would
    return sum(prod, axis=axis, dtype=aval_of(prod).dtype)


def inner(a, b):
    """Sum over the last axes of both. Example: ``jnp.inner(a, b)``."""
    a, b = promote_dtypes(asarray(a), asarray(b))
    na, nb = aval_of(a).ndim, aval_of(b).ndim
    if na == 0 or nb == 0:
        from funcgrad.numpy.ufuncs import multiply
        return multiply(a, b)
    _check_contract("inner", aval_of(a), na - 1, aval_of(b), nb - 1)
    return lax.dot_general(a, b, (((na - 1,), (nb - 1,)), ((), ())))


def outer(a, b):
    """Outer product of flattened inputs. Example: ``jnp.outer(a, b).shape``."""
    a, b = promote_dtypes(asarray(a).reshape(-1), asarray(b).reshape(-1))
    return lax.dot_general(lax.reshape(a, (aval_of(a).shape[0], 1)),
                           lax.reshape(b, (1, aval_of(b).shape[0])), (((1,), (0,)), ((), ())))


def tensordot(a, b, axes=2):
    """Sum products over ``axes`` (an int: last/first N axes; or two sequences).

    Example:
        >>> jnp.tensordot(jnp.ones((2, 3)), jnp.ones((3, 4)), axes=1).shape
        (2, 4)
    """
    a, b = promote_dtypes(asarray(a), asarray(b))
    na, nb = aval_of(a).ndim, aval_of(b).ndim
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        ax_a, ax_b = tuple(range(na - n, na)), tuple(range(n))
    else:
        ax_a, ax_b = axes
        ax_a = (ax_a,) if isinstance(ax_a, int) else tuple(ax_a)
        ax_b = (ax_b,) if isinstance(ax_b, int) else tuple(ax_b)
        ax_a = tuple(x % na for x in ax_a)
        ax_b = tuple(x % nb for x in ax_b)
    for i, j in zip(ax_a, ax_b):
        _check_contract("tensordot", aval_of(a), i, aval_of(b), j)
    return lax.dot_general(a, b, ((ax_a, ax_b), ((), ())))


def einsum(subscripts, *operands, optimize="optimal", precision=None,
           preferred_element_type=None):
    """Einstein summation; contraction order chosen by opt_einsum, each step a dot_general.

    Example:
        >>> jnp.einsum("ij,jk->ik", jnp.ones((2, 3)), jnp.ones((3, 4))).shape
        (2, 4)
    """
    operands = promote_dtypes(*[asarray(o) for o in operands])
    if optimize is True:
        optimize = "optimal"
    elif optimize is False:
        optimize = None
    shapes = [aval_of(o).shape for o in operands]
    _, contractions = opt_einsum.contract_path(subscripts, *shapes, shapes=True,
                                               einsum_call=True, optimize=optimize or "auto")
    ops = list(operands)
    for inds, _, eq, *_ in contractions:
        args = [ops.pop(i) for i in inds]   # opt_einsum lists inds in the order of eq's inputs
        inputs, output = eq.split("->")
        specs = inputs.split(",")
        if len(specs) == 1:
            ops.append(_unary_einsum(specs[0], output, args[0]))
        else:
            ops.append(_binary_einsum(specs[0], specs[1], output, args[0], args[1],
                                      precision, preferred_element_type))
    return ops[0]


def _unary_einsum(spec, out, x):
    from funcgrad.numpy.reductions import sum
    # repeated indices: take the diagonal
    while True:
        dup = next((c for c in spec if spec.count(c) > 1), None)
        if dup is None:
            break
        i = spec.index(dup)
        j = spec.index(dup, i + 1)
        from funcgrad.numpy.creation import diagonal
        x = diagonal(x, 0, i, j)
        spec = spec[:i] + spec[i + 1:j] + spec[j + 1:] + dup
    summed = tuple(i for i, c in enumerate(spec) if c not in out)
    if summed:
        x = sum(x, axis=summed)
        spec = "".join(c for c in spec if c in out)
    return lax.transpose(x, tuple(spec.index(c) for c in out))


def _binary_einsum(a_spec, b_spec, out, a, b, precision, preferred_element_type):
    # sum out indices that appear only in one operand and not in the output
    for which in (0, 1):
        spec, other = (a_spec, b_spec) if which == 0 else (b_spec, a_spec)
        only = tuple(i for i, c in enumerate(spec) if c not in other and c not in out)
        if only or builtins.any(spec.count(c) > 1 for c in spec):
            keep = "".join(c for c in spec if c in other or c in out)
            keep = "".join(dict.fromkeys(keep))
            x = _unary_einsum(spec, keep, a if which == 0 else b)
            if which == 0:
                a, a_spec = x, keep
            else:
                b, b_spec = x, keep
    contract = [c for c in a_spec if c in b_spec and c not in out]
    batch = [c for c in a_spec if c in b_spec and c in out]
    dn = ((tuple(a_spec.index(c) for c in contract), tuple(b_spec.index(c) for c in contract)),
          (tuple(a_spec.index(c) for c in batch), tuple(b_spec.index(c) for c in batch)))
    res = lax.dot_general(a, b, dn, precision=precision,
                          preferred_element_type=preferred_element_type)
    res_spec = "".join(batch) + "".join(c for c in a_spec if c not in contract and c not in batch) \
        + "".join(c for c in b_spec if c not in contract and c not in batch)
    return lax.transpose(res, tuple(res_spec.index(c) for c in out))

