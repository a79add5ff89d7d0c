"""NumPy references of the quantization schemes, written out independently of
``funcgrad.quantize.schemes`` (float64 where exact, float32 where the scheme rounds)."""
import numpy as np


def sym_quant(x, axes, qmax=127):
    """Symmetric per-slice quantization over ``axes`` (kept), scale = max|x| / qmax."""
    x = np.asarray(x, np.float32)
    amax = np.max(np.abs(x), axis=axes, keepdims=True).astype(np.float32)
    scale = np.maximum(amax / np.float32(qmax), np.float32(np.finfo(np.float32).eps))
    q = np.clip(np.round(x / scale), -qmax - 1, qmax)
    return q.astype(np.int64), scale.astype(np.float64)


def affine_quant(x, axes, qmin=-128, qmax=127):
    x = np.asarray(x, np.float32)
    lo = np.minimum(np.min(x, axis=axes, keepdims=True), 0).astype(np.float32)
    hi = np.maximum(np.max(x, axis=axes, keepdims=True), 0).astype(np.float32)
    scale = np.maximum((hi - lo) / np.float32(qmax - qmin), np.float32(np.finfo(np.float32).eps))
    zp = np.clip(qmin - np.round(lo / scale), qmin, qmax)
    q = np.clip(np.round(x / scale) + zp, qmin, qmax)
    return q.astype(np.int64), scale.astype(np.float64), zp.astype(np.int64)


def matmul_dynamic(x, w, qmax=127):
    """x @ w with x per row and w per output column, symmetric."""
    qx, sx = sym_quant(x, (1,), qmax)
    qw, sw = sym_quant(w, (0,), qmax)
    return (qx @ qw) * sx * sw


def conv2d_nchw(x, k, pad):
    """Direct float64 NCHW x OIHW convolution, stride 1, symmetric padding ``pad``."""
    x = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    kh, kw = k.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, np.asarray(k, np.float64))
