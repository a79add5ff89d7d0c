"""F.unfold / F.fold (nn.Unfold / nn.Fold), F.avg_pool3d (nn.AvgPool3d) and
F.local_response_norm (nn.LocalResponseNorm): NumPy loop transcriptions of PyTorch's
definitions, fold as the exact adjoint of unfold, and PyTorch's values and gradients when it is
installed."""
import itertools

import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp

# (input (N, C, H, W), kernel_size, dilation, padding, stride)
GEOMETRIES = [
    ((2, 3, 5, 6), 2, 1, 0, 1),
    ((1, 2, 7, 6), (3, 2), (2, 1), (1, 2), (2, 3)),
    ((2, 1, 4, 4), 3, 1, 1, 2),
]


def _pair(v):
    return v if isinstance(v, tuple) else (v, v)


def ref_unfold(x, k, d, p, s):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = map(_pair, (k, d, p, s))
    n, c, h, w = x.shape
    xp = np.pad(x, [(0, 0), (0, 0), (ph, ph), (pw, pw)])
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, c * kh * kw, oh * ow), x.dtype)
    for ci, i, j, bi, bj in itertools.product(range(c), range(kh), range(kw), range(oh),
                                              range(ow)):
        out[:, ci * kh * kw + i * kw + j, bi * ow + bj] = xp[:, ci, bi * sh + i * dh,
                                                              bj * sw + j * dw]
    return out


@pytest.mark.parametrize("shape, k, d, p, s", GEOMETRIES)
def test_unfold_matches_loops_and_fold_is_its_adjoint(shape, k, d, p, s, x64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=shape)
    cols = np.asarray(nn.Unfold(k, d, p, s)(jnp.asarray(x)))
    want = ref_unfold(x, k, d, p, s)
    np.testing.assert_array_equal(cols, want)
    # <unfold(x), y> == <x, fold(y)>: fold is the transpose of unfold (overlaps add)
    y = rng.normal(size=want.shape)
    folded = np.asarray(nn.Fold(shape[2:], k, d, p, s)(jnp.asarray(y)))
    assert folded.shape == shape
    np.testing.assert_allclose(np.sum(want * y), np.sum(x * folded), rtol=1e-12)
    # and the gradient of unfold is fold
    g = funcgrad.grad(lambda v: jnp.sum(F.unfold(v, k, d, p, s) * y))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(g), folded, rtol=1e-12, atol=1e-12)
    # unbatched inputs
    np.testing.assert_array_equal(np.asarray(F.unfold(jnp.asarray(x[0]), k, d, p, s)), want[0])
    np.testing.assert_allclose(np.asarray(F.fold(jnp.asarray(y[0]), shape[2:], k, d, p, s)),
                               folded[0], rtol=1e-14)


def test_fold_of_ones_counts_block_overlaps():
    # 2x2 blocks with stride 1 on a 3x4 image: each pixel is covered by (rows) x (cols) blocks
    ones = jnp.ones((1, 4, 2 * 3))
    got = np.asarray(F.fold(ones, (3, 4), 2))[0, 0]
    np.testing.assert_array_equal(got, np.outer([1, 2, 1], [1, 2, 2, 1]))


def test_fold_unfold_errors():
    with pytest.raises(ValueError, match=r"F.unfold: expected a 3-D .* got shape \(2, 3\)"):
        F.unfold(jnp.ones((2, 3)), 2)
    with pytest.raises(ValueError, match=r"F.fold: .*number of sliding blocks 2 \* 3 = 6, but "
                                         r"got input shape \(1, 4, 5\)"):
        F.fold(jnp.ones((1, 4, 5)), (3, 4), 2)
    with pytest.raises(ValueError, match=r"divisible by the product of kernel_size \(2, 2\)"):
        F.fold(jnp.ones((1, 5, 6)), (3, 4), 2)
    with pytest.raises(ValueError, match="no sliding block fits"):
        F.unfold(jnp.ones((1, 1, 2, 2)), 3)


def ref_avg_pool3d(x, k, s, p, count_include_pad, divisor_override=None):
    """PyTorch's definition, loop by loop (floor mode)."""
    n, c = x.shape[:2]
    sp = x.shape[2:]
    out_sp = [(sp[i] + 2 * p[i] - k[i]) // s[i] + 1 for i in range(3)]
    out = np.zeros((n, c, *out_sp))
    for o in itertools.product(*[range(m) for m in out_sp]):
        lo = [o[i] * s[i] - p[i] for i in range(3)]
        hi = [min(lo[i] + k[i], sp[i] + p[i]) for i in range(3)]
        pool = np.prod([hi[i] - lo[i] for i in range(3)])
        lo_c = [max(v, 0) for v in lo]
        hi_c = [min(hi[i], sp[i]) for i in range(3)]
        win = x[:, :, lo_c[0]:hi_c[0], lo_c[1]:hi_c[1], lo_c[2]:hi_c[2]]
        div = divisor_override or (pool if count_include_pad else
                                   np.prod([hi_c[i] - lo_c[i] for i in range(3)]))
        out[(slice(None), slice(None)) + o] = win.sum(axis=(2, 3, 4)) / div
    return out


@pytest.mark.parametrize("k, s, p, cip, div", [((2, 2, 2), (2, 2, 2), (0, 0, 0), True, None),
                                              ((3, 2, 3), (2, 1, 2), (1, 1, 1), False, None),
                                              ((3, 3, 2), (1, 2, 2), (1, 0, 1), True, None),
                                              ((2, 3, 2), (2, 2, 1), (1, 1, 0), True, 5)])
def test_avg_pool3d_matches_loops(k, s, p, cip, div, x64):
    x = np.random.default_rng(1).normal(size=(2, 2, 5, 6, 4))
    got = nn.AvgPool3d(k, s, p, count_include_pad=cip, divisor_override=div)(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), ref_avg_pool3d(x, k, s, p, cip, div),
                               rtol=1e-13)
    unb = F.avg_pool3d(jnp.asarray(x[0]), k, s, p, count_include_pad=cip, divisor_override=div)
    np.testing.assert_allclose(np.asarray(unb), np.asarray(got)[0], rtol=1e-14)


def ref_lrn(x, size, alpha, beta, k):
    c = x.shape[1]
    sq = np.zeros_like(x)
    for ch in range(c):
        lo, hi = ch - size // 2, ch + (size - 1) // 2
        sq[:, ch] = np.sum(x[:, max(lo, 0):min(hi, c - 1) + 1] ** 2, axis=1)
    return x / (k + alpha / size * sq) ** beta


@pytest.mark.parametrize("shape, size", [((2, 7, 3), 3), ((2, 6, 3, 4), 4), ((1, 5, 2, 2, 3), 2)])
def test_local_response_norm_matches_loops_and_jit(shape, size, x64):
    x = np.random.default_rng(2).normal(size=shape) * 3
    m = nn.LocalResponseNorm(size, alpha=0.3, beta=0.6, k=1.5)
    want = ref_lrn(x, size, 0.3, 0.6, 1.5)
    np.testing.assert_allclose(np.asarray(m(jnp.asarray(x))), want, rtol=1e-13)
    jitted = funcgrad.jit(lambda mod, v: mod(v))(m, jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(jitted), want, rtol=1e-13)
    with pytest.raises(ValueError, match=r"F.local_response_norm: expected a 3-D or higher .* "
                                         r"got shape \(2, 3\)"):
        m(jnp.ones((2, 3)))


def _torch_check(torch, tf, ff, x, r, rtol, atol):
    tx = torch.tensor(x, requires_grad=True)
    tout = tf(tx)
    torch.sum(tout * torch.tensor(r)).backward()
    out = ff(jnp.asarray(x))
    g = funcgrad.grad(lambda v: jnp.sum(ff(v) * r))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(out), tout.detach().numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(np.asarray(g), tx.grad.numpy(), rtol=rtol, atol=atol)


def test_match_torch(x64):
    """Values and gradients in float64 (elementwise to 1e-12)."""
    torch = pytest.importorskip("torch")
    dtype, rtol, atol = "float64", 1e-12, 1e-13
    rng = np.random.default_rng(3)
    for shape, k, d, p, s in GEOMETRIES:
        x = rng.normal(size=shape).astype(dtype)
        cols = ref_unfold(x, k, d, p, s)
        r = rng.normal(size=cols.shape).astype(dtype)
        _torch_check(torch, lambda v: torch.nn.Unfold(k, d, p, s)(v),
                     nn.Unfold(k, d, p, s), x, r, rtol, atol)
        r2 = rng.normal(size=shape).astype(dtype)
        _torch_check(torch, lambda v: torch.nn.Fold(shape[2:], k, d, p, s)(v),
                     nn.Fold(shape[2:], k, d, p, s), cols, r2, rtol, atol)
    x = rng.normal(size=(2, 3, 5, 6, 7)).astype(dtype)
    for kw in (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
               dict(kernel_size=(2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0), ceil_mode=True,
                    count_include_pad=False),
               dict(kernel_size=2, divisor_override=3)):
        tout = torch.nn.AvgPool3d(**kw)(torch.tensor(x))
        r = rng.normal(size=tuple(tout.shape)).astype(dtype)
        _torch_check(torch, torch.nn.AvgPool3d(**kw), nn.AvgPool3d(**kw), x, r, rtol, atol)
    for shape, size in (((2, 7, 3), 3), ((2, 6, 3, 4), 4), ((1, 5, 2, 2, 3), 2)):
        x = rng.normal(size=shape).astype(dtype) * 3
        r = rng.normal(size=shape).astype(dtype)
        _torch_check(torch, torch.nn.LocalResponseNorm(size, 0.3, 0.6, 1.5),
                     nn.LocalResponseNorm(size, 0.3, 0.6, 1.5), x, r, rtol, atol)
