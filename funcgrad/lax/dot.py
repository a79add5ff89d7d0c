"""``dot_general``: batched tensor contraction, the one primitive behind matmul, dot, einsum."""
import numpy as np
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import dtypes
from funcgrad.core.ad_util import Zero, add_tangents, is_undefined_primal, tangent_aval
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo
from funcgrad.lax.elementwise import convert_element_type
from funcgrad.lax.precision import canonicalize_precision, precision_config
from funcgrad.lax.shapes import transpose

dot_general_p = Primitive("dot_general")


def _check_dims(lhs, rhs, dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    for dims, aval, what in ((lc, lhs, "lhs contracting"), (rc, rhs, "rhs contracting"),
                             (lb, lhs, "lhs batch"), (rb, rhs, "rhs batch")):
        for d in dims:
            if not 0 <= d < aval.ndim:
                raise TypeError(f"lax.dot_general: {what} dimension {d} is out of range for "
                                f"{aval.str_short()}")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError(f"lax.dot_general: contracting {lc}/{rc} and batch {lb}/{rb} dimension "
                        f"lists must pair up")
    for l, r in list(zip(lc, rc)) + list(zip(lb, rb)):
        if lhs.shape[l] != rhs.shape[r]:
            raise TypeError(f"lax.dot_general: size mismatch between lhs {lhs.str_short()} axis "
                            f"{l} and rhs {rhs.str_short()} axis {r}")


@dot_general_p.def_abstract_eval
def _dot_general_abstract(lhs, rhs, dimension_numbers, precision=None,
                          preferred_element_type=None):
    _check_dims(lhs, rhs, dimension_numbers)
    if lhs.dtype != rhs.dtype:
        raise TypeError(f"lax.dot_general: operand dtypes must match, got {lhs.str_short()} "
                        f"and {rhs.str_short()}")
    (lc, rc), (lb, rb) = dimension_numbers
    batch = [lhs.shape[d] for d in lb]
    lfree = [s for i, s in enumerate(lhs.shape) if i not in lc and i not in lb]
    rfree = [s for i, s in enumerate(rhs.shape) if i not in rc and i not in rb]
    dtype = preferred_element_type or lhs.dtype
    return ShapedArray(batch + lfree + rfree, dtype, lhs.weak_type and rhs.weak_type)


def _dot_general_lowering(ctx, lhs, rhs, dimension_numbers, precision=None,
                          preferred_element_type=None, widen_operands=False):
    """``stablehlo.dot_general``; ``widen_operands`` converts the operands to the result dtype
    first (a platform's workaround, see ``lowering/cuda.py``)."""
    (lc, rc), (lb, rb) = dimension_numbers
    dnums = stablehlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=list(lb), rhs_batching_dimensions=list(rb),
        lhs_contracting_dimensions=list(lc), rhs_contracting_dimensions=list(rc))
    out = ctx.avals_out[0]
    if widen_operands:
        lhs = _hlo.convert(lhs, ctx.avals_in[0], out.dtype)
        rhs = _hlo.convert(rhs, ctx.avals_in[1], out.dtype)
    return stablehlo.dot_general(_hlo.ir_type(out), lhs, rhs, dnums,
                                 precision_config=precision_config(precision))


dot_general_p.def_lowering(_dot_general_lowering)


def _dot_general_jvp(primals, tangents, dimension_numbers, precision=None,
                     preferred_element_type=None):
    lhs, rhs = primals
    tl, tr = tangents
    params = dict(dimension_numbers=dimension_numbers, precision=precision,
                  preferred_element_type=preferred_element_type)
    out = dot_general_p.bind(lhs, rhs, **params)
    t = Zero(tangent_aval(aval_of(out)))
    if not dtypes.is_inexact(aval_of(out).dtype):
        return out, t
    if type(tl) is not Zero:
        t = dot_general_p.bind(tl, rhs, **params)
    if type(tr) is not Zero:
        t = add_tangents(t, dot_general_p.bind(lhs, tr, **params))
    return out, t


def _product_in_order(x, y, dims, batch, x_rest, y_rest, precision):
    """``dot_general(x, y, dims)`` with its result's axes put in order, where the result's axes
    are (``batch``, ``x_rest``, ``y_rest``) in the wanted value's numbering; when that order
    needs a transpose and the swapped product's (``batch``, ``y_rest``, ``x_rest``) does not,
    ``dot_general(y, x)`` instead. A transposed product costs XLA a copy of the result (a
    strided pass over a weight's gradient in a training step), the swapped one nothing."""
    src = list(batch) + list(x_rest) + list(y_rest)
    swapped = list(batch) + list(y_rest) + list(x_rest)
    if src != sorted(src) and swapped == sorted(swapped):
        (xc, yc), (xb, yb) = dims
        x, y, dims, src = y, x, ((yc, xc), (yb, xb)), swapped
    out = dot_general_p.bind(x, y, dimension_numbers=dims, precision=precision,
                             preferred_element_type=None)
    return transpose(out, tuple(int(p) for p in np.argsort(src)))


def _dot_transpose_lhs(ct, lhs_aval, rhs, dimension_numbers, precision):
    """The cotangent of lhs of ``dot_general(lhs, rhs)`` given the output cotangent ``ct``."""
    (lc, rc), (lb, rb) = dimension_numbers
    rhs_aval = aval_of(rhs)
    nb = len(lb)
    lhs_free = [i for i in range(lhs_aval.ndim) if i not in lc and i not in lb]
    rhs_free = [i for i in range(rhs_aval.ndim) if i not in rc and i not in rb]
    ct_rhs_free = tuple(range(nb + len(lhs_free), nb + len(lhs_free) + len(rhs_free)))
    if aval_of(ct).dtype != rhs_aval.dtype:
        ct = convert_element_type(ct, rhs_aval.dtype)
    # ct's free axes are lhs's; rhs's remaining (contracted) axes map to lhs's contracted ones
    out = _product_in_order(ct, rhs, ((ct_rhs_free, tuple(rhs_free)), (tuple(range(nb)),
                                                                       tuple(rb))),
                            lb, lhs_free, [lc[list(rc).index(r)] for r in sorted(rc)],
                            precision)
    if aval_of(out).dtype != lhs_aval.dtype:
        out = convert_element_type(out, lhs_aval.dtype)
    return out


def _dot_transpose_rhs(ct, lhs, rhs_aval, dimension_numbers, precision):
    (lc, rc), (lb, rb) = dimension_numbers
    lhs_aval = aval_of(lhs)
    nb = len(lb)
    lhs_free = [i for i in range(lhs_aval.ndim) if i not in lc and i not in lb]
    rhs_free = [i for i in range(rhs_aval.ndim) if i not in rc and i not in rb]
    ct_lhs_free = tuple(range(nb, nb + len(lhs_free)))
    if aval_of(ct).dtype != lhs_aval.dtype:
        ct = convert_element_type(ct, lhs_aval.dtype)
    # lhs's remaining (contracted) axes map to rhs's contracted ones; ct's free axes are rhs's
    out = _product_in_order(lhs, ct, ((tuple(lhs_free), ct_lhs_free), (tuple(lb),
                                                                       tuple(range(nb)))),
                            rb, [rc[list(lc).index(l)] for l in sorted(lc)], rhs_free,
                            precision)
    if aval_of(out).dtype != rhs_aval.dtype:
        out = convert_element_type(out, rhs_aval.dtype)
    return out


def _dot_general_transpose(ct, lhs, rhs, dimension_numbers, precision=None,
                           preferred_element_type=None):
    if is_undefined_primal(lhs) and is_undefined_primal(rhs):
        raise TypeError("transpose of dot_general: both operands are linear")
    if is_undefined_primal(lhs):
        return [Zero(lhs.aval) if type(ct) is Zero else
                _dot_transpose_lhs(ct, lhs.aval, rhs, dimension_numbers, precision), None]
    return [None, Zero(rhs.aval) if type(ct) is Zero else
            _dot_transpose_rhs(ct, lhs, rhs.aval, dimension_numbers, precision)]


dot_general_p.def_jvp(_dot_general_jvp)
dot_general_p.def_transpose(_dot_general_transpose)


# vmap's axis becomes a batch or free dimension of the product
def _dot_general_batch(args, dims, dimension_numbers, precision=None,
                       preferred_element_type=None):
    """Fold vmap's axis into dot_general itself: a batch dimension when both operands are
    batched, a free dimension when one is; never a loop and never an extra copy."""
    lhs, rhs = args
    ld, rd = dims
    (lc, rc), (lb, rb) = dimension_numbers

    def shift(axes, d):
        return tuple(a + (a >= d) for a in axes)

    if ld is not None and rd is not None:
        dn = ((shift(lc, ld), shift(rc, rd)), ((ld,) + shift(lb, ld), (rd,) + shift(rb, rd)))
        out_dim = 0
    elif ld is not None:
        lc2, lb2 = shift(lc, ld), shift(lb, ld)
        dn = ((lc2, rc), (lb2, rb))
        free_before = sum(1 for a in range(ld) if a not in lc2 and a not in lb2)
        out_dim = len(lb) + free_before
    else:
        rc2, rb2 = shift(rc, rd), shift(rb, rd)
        dn = ((lc, rc2), (lb, rb2))
        lhs_aval = aval_of(lhs)
        lhs_free = lhs_aval.ndim - len(lc) - len(lb)
        free_before = sum(1 for a in range(rd) if a not in rc2 and a not in rb2)
        out_dim = len(lb) + lhs_free + free_before
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dn, precision=precision,
                              preferred_element_type=preferred_element_type), out_dim


dot_general_p.def_batch(_dot_general_batch)


def _canonical_dnums(dimension_numbers):
    (lc, rc), (lb, rb) = dimension_numbers
    return ((tuple(int(d) for d in lc), tuple(int(d) for d in rc)),
            (tuple(int(d) for d in lb), tuple(int(d) for d in rb)))


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """Contract ``lhs`` and ``rhs``: ``dimension_numbers = ((lhs_contract, rhs_contract),
    (lhs_batch, rhs_batch))``. The result axes are batch, then lhs free, then rhs free.
    ``precision`` (see ``lax.Precision``) matters on GPU/TPU only; None follows
    ``funcgrad.config.default_matmul_precision``.

    Example:
        >>> a, b = jnp.array([[1.0, 2.0], [3.0, 4.0]]), jnp.array([[1.0], [1.0]])
        >>> lax.dot_general(a, b, (((1,), (0,)), ((), ())))   # a @ b for matrices
        Array([[3.],
               [7.]], dtype=float32)
    """
    pet = dtypes.canonicalize(preferred_element_type) if preferred_element_type else None
    return dot_general_p.bind(lhs, rhs, dimension_numbers=_canonical_dnums(dimension_numbers),
                              precision=canonicalize_precision(precision, "lax.dot_general"),
                              preferred_element_type=pet)


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """Vector/matrix product of rank-1 or rank-2 operands. Example: ``lax.dot(a, b)``."""
    la, ra = aval_of(lhs), aval_of(rhs)
    if la.ndim not in (1, 2) or ra.ndim not in (1, 2):
        raise TypeError(f"lax.dot: expects rank-1 or rank-2 operands, got {la.str_short()} and "
                        f"{ra.str_short()}; use dot_general or funcgrad.numpy.matmul")
    return dot_general(lhs, rhs, (((la.ndim - 1,), (0,)), ((), ())), precision=precision,
                       preferred_element_type=preferred_element_type)
