"""Helpers for writing lowering rules: MLIR types of avals, constants, broadcasts, conversions.

A lowering rule receives a ``LoweringRuleContext`` (``ctx.avals_in``, ``ctx.avals_out``,
``ctx.lower_jaxpr`` for sub-jaxprs) and one MLIR value per operand, and returns the result
value(s). These helpers keep the rules one-liners.
"""
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray


def element_type(dtype):
    """The MLIR element type of a NumPy dtype (float0 is stored as i1)."""
    dtype = np.dtype(dtype)
    if dtype == dtypes.float0 or dtype == dtypes.bool_:
        return ir.IntegerType.get_signless(1)
    if dtype == dtypes.bfloat16:
        return ir.BF16Type.get()
    if dtype.name == "float8_e4m3fn":   # quantization's fp8 format (an ml_dtypes dtype)
        return ir.Float8E4M3FNType.get()
    kind, bits = dtype.kind, dtype.itemsize * 8
    if kind == "i":
        return ir.IntegerType.get_signless(bits)
    if kind == "u":
        return ir.IntegerType.get_unsigned(bits)
    if kind == "f":
        return {16: ir.F16Type, 32: ir.F32Type, 64: ir.F64Type}[bits].get()
    if kind == "c":
        return ir.ComplexType.get(element_type(dtypes.real_dtype(dtype)))
    raise TypeError(f"no XLA element type for dtype {dtype}")


def ir_type(aval):
    """The ranked tensor type of an aval."""
    return ir.RankedTensorType.get(list(aval.shape), element_type(aval.dtype))


def tensor_type(shape, dtype):
    return ir.RankedTensorType.get(list(shape), element_type(dtype))


def _storage(value, dtype):
    dtype = np.dtype(dtype)
    if dtype == dtypes.float0:
        return np.zeros(np.shape(value), np.bool_)
    return np.asarray(value, dtype)


def constant(value, dtype, shape=None):
    """A stablehlo constant of ``value`` as ``dtype``, broadcast to ``shape`` when given."""
    arr = _storage(value, dtype)
    if shape is not None and tuple(shape) != arr.shape:
        if arr.size == 1:
            scalar = constant(arr.reshape(()), dtype)
            return stablehlo.broadcast_in_dim(tensor_type(shape, dtype), scalar, [])
        arr = np.broadcast_to(arr, shape)
    arr = np.array(arr, order="C", copy=True)
    attr = ir.DenseElementsAttr.get(arr, type=element_type(dtype), shape=list(arr.shape))
    return stablehlo.constant(attr)


def zeros_like_aval(aval):
    return constant(0, aval.dtype, aval.shape)


def broadcast_to(value, aval_in, shape, dims=None):
    """Broadcast ``value`` (of ``aval_in``) to ``shape``; trailing-aligned unless ``dims``."""
    if tuple(aval_in.shape) == tuple(shape):
        return value
    if dims is None:
        dims = list(range(len(shape) - len(aval_in.shape), len(shape)))
    return stablehlo.broadcast_in_dim(tensor_type(shape, aval_in.dtype), value, list(dims))


def convert(value, aval_in, dtype):
    """Convert ``value`` of ``aval_in`` to ``dtype`` (bool conversions compare with zero)."""
    dtype = np.dtype(dtype)
    if aval_in.dtype == dtype:
        return value
    out_type = tensor_type(aval_in.shape, dtype)
    if dtype == dtypes.bool_ and aval_in.dtype != dtypes.bool_:
        zero = constant(0, aval_in.dtype, aval_in.shape)
        return compare(value, zero, "NE", aval_in.dtype)
    if dtypes.is_complex(aval_in.dtype) and not dtypes.is_complex(dtype):
        value = stablehlo.real(value)
        aval_in = aval_in.update(dtype=dtypes.real_dtype(aval_in.dtype))
        if aval_in.dtype == dtype:
            return value
    return stablehlo.convert(out_type, value)


def compare_type(dtype):
    dtype = np.dtype(dtype)
    if dtypes.is_inexact(dtype):
        return "FLOAT"
    if dtypes.is_unsigned(dtype) or dtype == dtypes.bool_:
        return "UNSIGNED"
    return "SIGNED"


def compare(x, y, direction, dtype):
    """Elementwise comparison; ``direction`` is EQ, NE, LT, LE, GT or GE."""
    return stablehlo.compare(x, y, stablehlo.ComparisonDirectionAttr.get(direction),
                             compare_type=stablehlo.ComparisonTypeAttr.get(compare_type(dtype)))


def i64_array(values):
    return [int(v) for v in values]


def scalar_region(op, arg_avals, body):
    """Fill ``op``'s first region with a block over scalar args; ``body(*args)`` returns results."""
    scalar_types = [tensor_type((), a.dtype) for a in arg_avals]
    block = op.regions[0].blocks.append(*scalar_types)
    with ir.InsertionPoint(block):
        results = body(*block.arguments)
        stablehlo.return_(list(results) if isinstance(results, (list, tuple)) else [results])
    return op


def cumulative(x, aval, axis, reverse, init_value, combine):
    """Inclusive scan of ``x`` along ``axis`` as one reduce-window whose window covers the
    whole axis (padded on the side the scan comes from); ``combine(a, b)`` builds the scalar
    combination of the region."""
    n = aval.shape[axis]
    window = [1] * aval.ndim
    window[axis] = max(n, 1)
    padding = np.zeros((aval.ndim, 2), np.int64)
    padding[axis] = [0, n - 1] if reverse else [n - 1, 0]
    pad_attr = ir.DenseIntElementsAttr.get(padding, shape=[aval.ndim, 2])
    op = stablehlo.ReduceWindowOp([ir_type(aval)], [x], [constant(init_value, aval.dtype)],
                                  window, window_strides=[1] * aval.ndim, padding=pad_attr)
    scalar = ShapedArray((), aval.dtype)
    scalar_region(op, [scalar, scalar], combine)
    return op.result
