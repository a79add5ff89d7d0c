"""Integer matrix products on XLA:CPU: an int8 x int8 -> int32 ``dot_general`` lowers as a
uint8 x int8 product plus a correction, chosen at lowering time (Jaxprs keep int8 x int8).

x86's VNNI instructions multiply unsigned by signed bytes; XLA:CPU's library product (YNNPACK)
uses them for uint8 x int8 operands and emulates int8 x int8 more slowly: a 16x1024 @
1024x1024 product measured 0.20 ms against 0.44 ms (CPU time, one run on the 2 shared cores,
AVX512-VNNI), which PyTorch's fbgemm kernels get by quantizing activations to uint8. With
``u = lhs + 128`` (the same bits with the sign bit flipped, read as uint8):

    sum_k lhs[k] * rhs[k] = sum_k u[k] * rhs[k] - 128 * sum_k rhs[k]

in int32 arithmetic, which wraps the same way on both sides, so the result is bit-identical
to the int8 product's for every input. The correction, the sums of ``rhs`` over the
contracted axis, comes out of the same product: the uint8 operand gets one more row, of ones.

Example:
    >>> import numpy as np, funcgrad, funcgrad.numpy as jnp
    >>> from funcgrad import lax
    >>> a = jnp.array([[-128, 127, 3]], dtype="int8")
    >>> b = jnp.array([[-128], [127], [-1]], dtype="int8")
    >>> f = lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())),
    ...                                  preferred_element_type=np.int32)
    >>> funcgrad.jit(f)(a, b)
    Array([[32510]], dtype=int32)
    >>> "ui8" in funcgrad.jit(f).lower(a, b).as_text()
    True
"""
import os

import numpy as np
from jaxlib.mlir.dialects import stablehlo

from funcgrad import lax
from funcgrad.lax import _hlo
from funcgrad.core.avals import ShapedArray
from funcgrad.lax.dot import _dot_general_lowering, dot_general_p
from funcgrad.lowering import platforms
from funcgrad.lowering.mlir import LoweringRuleContext

INT8, INT32 = np.dtype(np.int8), np.dtype(np.int32)


def _ynn_dots_enabled():
    """Whether XLA:CPU sends products to YNNPACK (funcgrad's default compile option; an
    XLA_FLAGS setting may turn it off): XLA's own dot emitter takes no mixed operand types."""
    flags = os.environ.get("XLA_FLAGS", "")
    key = "xla_cpu_experimental_ynn_fusion_type="
    if key not in flags:
        return "DOT" in platforms.get("cpu").compile_options.get(key[:-1], "")
    value = flags.split(key, 1)[1].split(" ", 1)[0]
    return "DOT" in value


def _unsigned_lhs_applies(ctx, dimension_numbers):
    """int8 x int8 -> int32 products of the layouts YNNPACK takes with mixed operand types
    (measured; others reach XLA's own emitter, which rejects them): no batch axes, the lhs
    contracted on its last axis, a 2-d rhs contracted on either axis."""
    lhs, rhs = ctx.avals_in
    if not (lhs.dtype == INT8 and rhs.dtype == INT8 and ctx.avals_out[0].dtype == INT32):
        return False
    (lc, rc), (lb, rb) = dimension_numbers
    if lb or rb or tuple(lc) != (lhs.ndim - 1,) or rhs.ndim != 2:
        return False
    if min(int(np.prod(a.shape, dtype=np.int64)) for a in (lhs, rhs)) == 0:
        return False
    return _ynn_dots_enabled()


def _shifted_rows(a):
    """``a + 128`` as uint8 (the bits of ``a`` with the sign bit flipped), as (rows, k), with
    a last row of ones: its product with the rhs is the rhs's sums over k, the correction."""
    k = a.shape[-1]
    u = lax.bitcast_convert_type(lax.bitwise_xor(a, np.int8(-128)), np.uint8)
    u = lax.reshape(u, (int(np.prod(a.shape[:-1], dtype=np.int64)), k))
    return lax.concatenate([u, lax.full((1, k), 1, np.uint8)], 0)


def _corrected(acc, out_shape):
    """The product rows minus 128 x the last row (the rhs's sums), in the output's shape."""
    rows = acc.shape[0] - 1
    n = acc.shape[1]
    sums = lax.reshape(lax.slice(acc, (rows, 0), acc.shape), (n,))
    sums = lax.broadcast_in_dim(lax.mul(sums, np.int32(128)), (rows, n), (1,))
    body = lax.slice(acc, (0, 0), (rows, n))
    return lax.reshape(lax.sub(body, sums), tuple(out_shape))


def _dot_general_lowering_cpu(ctx, lhs, rhs, dimension_numbers, precision=None,
                              preferred_element_type=None):
    if not _unsigned_lhs_applies(ctx, dimension_numbers):
        return _dot_general_lowering(ctx, lhs, rhs, dimension_numbers, precision=precision,
                                     preferred_element_type=preferred_element_type)
    lhs_aval, rhs_aval = ctx.avals_in
    out = ctx.avals_out[0]
    (_, rc), _ = dimension_numbers
    rows = int(np.prod(lhs_aval.shape[:-1], dtype=np.int64)) + 1
    shifted = ctx.lower_fun(lambda a, b: [_shifted_rows(a)], (lhs, rhs), "int8_as_uint8")[0]
    acc_aval = ShapedArray((rows, rhs_aval.shape[1 - rc[0]]), INT32)
    dnums = stablehlo.DotDimensionNumbers.get(
        lhs_batching_dimensions=[], rhs_batching_dimensions=[],
        lhs_contracting_dimensions=[1], rhs_contracting_dimensions=list(rc))
    acc = stablehlo.dot_general(_hlo.ir_type(acc_aval), shifted, rhs, dnums)
    sub = LoweringRuleContext(ctx.module, [acc_aval], ctx.avals_out, ctx.platform, ctx.axis_env,
                              ctx.host_callbacks)
    return sub.lower_fun(lambda a: [_corrected(a, out.shape)], (acc,), "uint8_correction")[0]


dot_general_p.def_lowering(_dot_general_lowering_cpu, platform="cpu")
