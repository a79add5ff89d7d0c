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


def dot_general(a, b, dnums):
    """NumPy dot_general (batch, lhs free, rhs free) in float64, by einsum."""
    (lc, rc), (lb, rb) = dnums
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la = [None] * a.ndim
    lbb = [None] * b.ndim
    for i, j in list(zip(lc, rc)) + list(zip(lb, rb)):
        la[i] = lbb[j] = next(letters)
    la = [c or next(letters) for c in la]
    lbb = [c or next(letters) for c in lbb]
    out = [la[i] for i in lb] + [c for i, c in enumerate(la) if i not in lc and i not in lb] + \
        [c for i, c in enumerate(lbb) if i not in rc and i not in rb]
    return np.einsum(f"{''.join(la)},{''.join(lbb)}->{''.join(out)}",
                     np.asarray(a, np.float64), np.asarray(b, np.float64))
