"""conv_general_dilated and reduce_window against NumPy references; their transpose and batch
rules against the adjoint identity and a loop; jvp/grad/vmap once those transforms exist."""
import itertools
import re

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.lax import convolution as C
from funcgrad.lowering import cpu_convolution as CPU
from funcgrad.lax import windowed as W


# --- NumPy references --------------------------------------------------------------------------
def _dilate_np(x, axes, d, fill=0.0):
    for ax, f in zip(axes, d):
        if f == 1 or x.shape[ax] == 0:
            continue
        shape = list(x.shape)
        shape[ax] = (shape[ax] - 1) * f + 1
        out = np.full(shape, fill, x.dtype)
        idx = [slice(None)] * x.ndim
        idx[ax] = slice(None, None, f)
        out[tuple(idx)] = x
        x = out
    return x


def _pad_np(x, axes, pads, fill=0.0):
    cfg = [(0, 0)] * x.ndim
    for ax, (lo, hi) in zip(axes, pads):
        cfg[ax] = (max(lo, 0), max(hi, 0))
    x = np.pad(x, cfg, constant_values=fill)
    idx = [slice(None)] * x.ndim
    for ax, (lo, hi) in zip(axes, pads):
        idx[ax] = slice(-lo if lo < 0 else 0, x.shape[ax] + hi if hi < 0 else x.shape[ax])
    return x[tuple(idx)]


def ref_conv(x, w, strides, pads, lhs_dil, rhs_dil, fgc=1, bgc=1):
    """NCHW x OIHW reference, N-d, with dilations and groups."""
    nsp = x.ndim - 2
    sp = tuple(range(2, 2 + nsp))
    x = _pad_np(_dilate_np(x, sp, lhs_dil), sp, pads)
    w = _dilate_np(w, sp, rhs_dil)
    N, Cin = x.shape[:2]
    O = w.shape[0]
    ksz = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(x, ksz, axis=sp)
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)]
    # win: N, C, *out, *k
    n_out = N // bgc
    out = np.zeros((n_out, O) + win.shape[2:2 + nsp], np.float64)
    ipg = w.shape[1]
    opg_f = O // fgc
    opg_b = O // bgc
    for o in range(O):
        g = o // opg_f
        bg = o // opg_b
        xs = win[bg * n_out:(bg + 1) * n_out, g * ipg:(g + 1) * ipg]
        ks = w[o]
        axes = (1,) + tuple(range(2 + nsp, 2 + 2 * nsp))
        out[:, o] = np.tensordot(xs, ks, axes=(axes, tuple(range(nsp + 1))))
    return out


def ref_window(x, kind, k, s, pads, bd, wd):
    fill = {"sum": 0.0, "max": -np.inf, "min": np.inf}[kind]
    axes = tuple(range(x.ndim))
    x = _pad_np(_dilate_np(x.astype(np.float64), axes, bd, fill), axes, pads, fill)
    kd = [(kk - 1) * d + 1 for kk, d in zip(k, wd)]
    win = np.lib.stride_tricks.sliding_window_view(x, kd)
    win = win[tuple(slice(None, None, ss) for ss in s)]
    win = win[(Ellipsis,) + tuple(slice(None, None, d) for d in wd)]
    red = {"sum": np.sum, "max": np.max, "min": np.min}[kind]
    return red(win, axis=tuple(range(x.ndim, 2 * x.ndim)))


CASES = [
    # x shape, w shape, strides, pads, lhs_dil, rhs_dil, fgc, bgc
    ((2, 3, 7, 6), (4, 3, 3, 2), (1, 1), ((1, 1), (0, 1)), (1, 1), (1, 1), 1, 1),
    ((2, 4, 9, 8), (6, 2, 3, 3), (2, 3), ((1, 2), (2, 0)), (1, 1), (2, 1), 2, 1),
    ((1, 2, 5, 5), (3, 2, 3, 3), (1, 1), ((2, 2), (1, 2)), (2, 2), (1, 1), 1, 1),
    ((4, 3, 6, 6), (6, 3, 2, 2), (2, 2), ((0, 0), (1, 0)), (1, 1), (1, 1), 1, 2),
    ((2, 5, 11), (5, 1, 3), (2,), ((1, 1),), (1,), (2,), 5, 1),
]


@pytest.mark.parametrize("case", CASES)
def test_conv_matches_numpy(case, rng):
    xs, ws, st, pads, ld, rd, fgc, bgc = case
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    got = lax.conv_general_dilated(x, w, st, pads, ld, rd, feature_group_count=fgc,
                                   batch_group_count=bgc)
    want = ref_conv(x, w, st, pads, ld, rd, fgc, bgc)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)


TAP_SUM_CASES = [
    # eligible for the CPU tap-sum lowering (input features per group x taps <= 32): layouts,
    # negative padding, input dilation, groups, 1-d and 3-d
    ((2, 1, 9, 8), (3, 1, 5, 5), (1, 1), ((2, 2), (-1, 2)), (1, 1), (1, 1), 1, 1),
    ((1, 6, 7, 7), (6, 1, 3, 3), (2, 1), ((1, 1), (1, 1)), (1, 1), (2, 1), 6, 1),
    ((2, 2, 4, 5), (3, 2, 2, 3), (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2), 1, 1),
    ((2, 3, 4, 4, 3), (3, 1, 2, 2, 2), (1, 1, 1), ((0, 1), (1, 0), (0, 0)), (1, 1, 1),
     (1, 1, 1), 3, 1),
]


@pytest.mark.parametrize("tap_sum", [True, False], ids=["tap_sum", "xla_conv"])
@pytest.mark.parametrize("case", TAP_SUM_CASES + CASES[:1])
def test_conv_cpu_lowerings_match_numpy(case, tap_sum, rng, monkeypatch, on_cpu):
    # both CPU lowerings (tap sum and XLA's convolution) against the reference, float32 and
    # float64, with fresh jitted functions so neither reuses the other's executable
    monkeypatch.setattr(CPU, "CPU_TAP_SUM_MAX_TERMS", 32 if tap_sum else 0)
    xs, ws, st, pads, ld, rd, fgc, bgc = case
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    want = ref_conv(x, w, st, pads, ld, rd, fgc, bgc)
    f = funcgrad.jit(lambda a, b: lax.conv_general_dilated(a, b, st, pads, ld, rd,
                                                           feature_group_count=fgc))
    got = f(x.astype(np.float32), w.astype(np.float32))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-4)
    assert ("convolution" in f.lower(x.astype(np.float32), w.astype(np.float32)).as_text()) \
        is not tap_sum or CPU.CPU_TAP_SUM_MAX_TERMS < np.prod(ws[1:])


def test_conv_tap_sum_grads_and_layouts(x64, rng, monkeypatch):
    # gradients through the tap-sum lowering (the transposes are convolutions too) in float64,
    # NHWC layout, vs the XLA convolution path
    x = rng.standard_normal((2, 9, 8, 1))
    w = rng.standard_normal((5, 5, 1, 4))
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(a, b):
        return jnp.sum(jnp.tanh(lax.conv_general_dilated(a, b, (2, 1), "SAME",
                                                         dimension_numbers=dn)))
    results = []
    for limit in (32, 0):
        monkeypatch.setattr(CPU, "CPU_TAP_SUM_MAX_TERMS", limit)
        results.append(funcgrad.jit(funcgrad.value_and_grad(
            lambda a, b: loss(a, b), argnums=(0, 1)))(x, w))
    (v1, (gx1, gw1)), (v2, (gx2, gw2)) = results
    np.testing.assert_allclose(float(v1), float(v2), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gx1), np.asarray(gx2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gw1), np.asarray(gw2), rtol=1e-10, atol=1e-12)


def test_conv_layouts_and_same_padding(rng):
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    want = np.asarray(lax.conv_general_dilated(x, w, (2, 2), "SAME"))
    assert want.shape == (2, 5, 4, 4)
    np.testing.assert_allclose(want, ref_conv(x, w, (2, 2), ((0, 1), (1, 1)), (1, 1), (1, 1)),
                               rtol=1e-4, atol=1e-4)
    got = lax.conv_general_dilated(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), (2, 2),
                                   "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(np.asarray(got).transpose(0, 3, 1, 2), want, rtol=1e-5,
                               atol=1e-5)
    dn = C.conv_dimension_numbers(x.shape, w.shape, ("NCHW", "OIHW", "NHWC"))
    got = lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=dn)
    np.testing.assert_allclose(np.asarray(got).transpose(0, 3, 1, 2), want, rtol=1e-5,
                               atol=1e-5)
    with pytest.raises(TypeError, match="feature"):
        lax.conv_general_dilated(x, w[:, :2], (1, 1), "VALID")


def test_conv_jit_matches_eager(rng):
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    f = funcgrad.jit(lambda a, b: lax.conv(a, b, (1, 1), "SAME") * 2.0)
    np.testing.assert_allclose(np.asarray(f(x, w)),
                               2 * np.asarray(lax.conv(x, w, (1, 1), "SAME")), rtol=1e-5,
                               atol=1e-5)


def test_conv_transpose_is_gradient_shape(rng):
    x = rng.standard_normal((1, 2, 4, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    y = lax.conv_transpose(x, w, (2, 2), "SAME")
    assert y.shape == (1, 3, 8, 8)
    # conv_transpose(transpose_kernel=True) is the adjoint of the strided conv.
    z = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    wk = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)   # maps 3 -> 2 channels
    fwd = np.asarray(lax.conv_general_dilated(z, wk, (2, 2), ((1, 1), (1, 1))))
    assert fwd.shape == (1, 2, 4, 4)
    back = np.asarray(lax.conv_transpose(x, wk, (2, 2), ((1, 2), (1, 2)), transpose_kernel=True))
    np.testing.assert_allclose((fwd * x).sum(), (z * back).sum(), rtol=1e-4)


# --- transpose rules via the adjoint identity <A x, c> == <x, A^T c> ----------------------------
def _params(xs, ws, st, pads, ld, rd, fgc, bgc):
    dn = C.conv_dimension_numbers(xs, ws, None)
    return dict(window_strides=st, padding=pads, lhs_dilation=ld, rhs_dilation=rd,
                dimension_numbers=dn, feature_group_count=fgc, batch_group_count=bgc,
                preferred_element_type=None)


@pytest.mark.parametrize("case", CASES)
def test_conv_transpose_rules_adjoint(case, rng):
    xs, ws, st, pads, ld, rd, fgc, bgc = case
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    p = _params(xs, ws, st, pads, ld, rd, fgc, bgc)
    y = np.asarray(C.conv_general_dilated_p.bind(x, w, **p))
    ct = rng.standard_normal(y.shape).astype(np.float32)
    lhs_ct = np.asarray(C._transpose_lhs(ct, w, funcgrad.numpy.asarray(x).aval, **p))
    rhs_ct = np.asarray(C._transpose_rhs(ct, x, funcgrad.numpy.asarray(w).aval, **p))
    assert lhs_ct.shape == xs and rhs_ct.shape == ws
    np.testing.assert_allclose((y * ct).sum(), (x * lhs_ct).sum(), rtol=2e-4)
    np.testing.assert_allclose((y * ct).sum(), (w * rhs_ct).sum(), rtol=2e-4)


@pytest.mark.parametrize("case", CASES[:4])
@pytest.mark.parametrize("which", ["lhs", "rhs", "both"])
def test_conv_batch_rule_matches_loop(case, which, rng):
    xs, ws, st, pads, ld, rd, fgc, bgc = case
    B = 3
    x = rng.standard_normal((B,) + xs if which != "rhs" else xs).astype(np.float32)
    w = rng.standard_normal((B,) + ws if which != "lhs" else ws).astype(np.float32)
    p = _params(xs, ws, st, pads, ld, rd, fgc, bgc)
    # put the batch axis somewhere in the middle to exercise the axis bookkeeping
    xd = wd = None
    if which != "rhs":
        x, xd = np.moveaxis(x, 0, 2), 2
    if which != "lhs":
        w, wd = np.moveaxis(w, 0, 1), 1
    out, od = C._conv_batch_rule([x, w], [xd, wd], **p)
    out = np.moveaxis(np.asarray(out), od, 0)
    for b in range(B):
        xb = np.take(x, b, axis=xd) if xd is not None else x
        wb = np.take(w, b, axis=wd) if wd is not None else w
        np.testing.assert_allclose(out[b], np.asarray(C.conv_general_dilated_p.bind(xb, wb, **p)),
                                   rtol=1e-4, atol=1e-4)


# --- reduce_window -------------------------------------------------------------------------------
WCASES = [
    ((2, 3, 7, 6), (1, 1, 2, 2), (1, 1, 2, 2), ((0, 0), (0, 0), (0, 1), (0, 0)), None, None),
    ((2, 7, 6), (1, 3, 3), (1, 2, 1), ((0, 0), (1, 1), (1, 1)), None, None),
    ((5, 6), (2, 3), (1, 2), ((1, 0), (0, 2)), (2, 1), (1, 2)),
]


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("case", WCASES)
def test_reduce_window_matches_numpy(kind, case, rng):
    xs, k, s, pads, bd, wd = case
    bd = bd or (1,) * len(xs)
    wd = wd or (1,) * len(xs)
    x = rng.standard_normal(xs).astype(np.float32)
    fn = {"sum": lax.reduce_window_sum, "max": lax.reduce_window_max,
          "min": lax.reduce_window_min}[kind]
    got = fn(x, k, s, pads, bd, wd)
    np.testing.assert_allclose(np.asarray(got), ref_window(x, kind, k, s, pads, bd, wd),
                               rtol=1e-5, atol=1e-5)


def test_reduce_window_api_checks():
    x = jnp.arange(6.0)
    np.testing.assert_allclose(np.asarray(lax.reduce_window(x, 0.0, lax.add, (2,), (2,),
                                                            "VALID")), [1, 5, 9])
    np.testing.assert_allclose(np.asarray(lax.reduce_window(x, -np.inf, lax.max, (3,), (1,),
                                                            "SAME")), [1, 2, 3, 4, 5, 5])
    # an init value other than the identity is folded into every window, as in JAX
    np.testing.assert_allclose(np.asarray(lax.reduce_window(x, 1.0, lax.add, (2,), (2,),
                                                            "VALID")), [2, 6, 10])


@pytest.mark.parametrize("case", WCASES)
def test_reduce_window_sum_transpose_adjoint(case, rng):
    xs, k, s, pads, bd, wd = case
    bd = bd or (1,) * len(xs)
    wd = wd or (1,) * len(xs)
    x = rng.standard_normal(xs).astype(np.float32)
    params = dict(window_dimensions=k, window_strides=s, padding=pads, base_dilation=bd,
                  window_dilation=wd)
    y = np.asarray(W.reduce_window_sum_p.bind(x, **params))
    ct = rng.standard_normal(y.shape).astype(np.float32)

    class _U:   # stands for an undefined primal: only .aval is read
        aval = jnp.asarray(x).aval
    (xt,) = W._sum_transpose(ct, _U(), **params)
    np.testing.assert_allclose((y * ct).sum(), (x * np.asarray(xt)).sum(), rtol=1e-4)


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reduce_window_batch_rule(kind, rng):
    x = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)
    prim = W._PRIMS[kind]
    params = dict(window_dimensions=(2, 2, 1), window_strides=(2, 1, 1),
                  padding=((0, 1), (1, 0), (0, 0)), base_dilation=(1, 1, 1),
                  window_dilation=(1, 2, 1))
    out, od = W._batcher(prim)([x], [3], **params)
    out = np.moveaxis(np.asarray(out), od, 0)
    for b in range(3):
        np.testing.assert_allclose(out[b], np.asarray(prim.bind(x[..., b], **params)),
                                   rtol=1e-6)


def test_max_window_tangent_routes_to_argmax(rng):
    # the linear map used by the max jvp: tangent of the first maximal element of each window
    x = np.array([[1., 3., 3., 0.], [2., 5., 1., 5.]], np.float32)
    params = dict(window_dimensions=(1, 2), window_strides=(1, 2), padding=((0, 0), (0, 0)),
                  base_dilation=(1, 1), window_dilation=(1, 1))
    xs = W.window_patches(x, -np.inf, out_shape=(2, 2), **params)
    assert xs.shape == (2, 2, 2)
    np.testing.assert_array_equal(np.asarray(xs)[:, 1, 1], [1., 5.])


def _first_extreme_grad_ref(x, k, kind):
    """NumPy: d sum(ct * pool(x)) / dx for non-overlapping windows k (stride k) with ct = 1 +
    window index, routing each window's cotangent to its first extreme element (NaN wins)."""
    out = tuple(n // kk for n, kk in zip(x.shape, k))
    g = np.zeros_like(x)
    for o_idx in np.ndindex(out):
        sl = tuple(slice(o * kk, (o + 1) * kk) for o, kk in zip(o_idx, k))
        win = x[sl]
        flat = win.reshape(-1)
        j = int(np.argmax(flat)) if kind == "max" else int(np.argmin(flat))
        if np.isnan(flat).any():
            j = int(np.flatnonzero(np.isnan(flat))[0])
        sub = np.unravel_index(j, win.shape)
        g[tuple(o * kk + s for o, kk, s in zip(o_idx, k, sub))] += 1.0 + np.ravel_multi_index(
            o_idx, out)
    return g


@pytest.mark.parametrize("kind", ["max", "min"])
def test_non_overlapping_pool_grad_routes_to_first_extreme(kind, rng):
    # stride == window takes the tiled jvp; ties, a NaN window and a cropped remainder
    x = rng.integers(0, 3, (2, 3, 7, 9)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    k = (1, 1, 2, 3)
    fn = lax.reduce_window_max if kind == "max" else lax.reduce_window_min
    out_shape = (2, 3, 3, 3)
    ct = 1.0 + np.arange(np.prod(out_shape), dtype=np.float32).reshape(out_shape)
    pool = lambda a: fn(a, k, k, ((0, 0),) * 4)  # noqa: E731
    _, vjp = funcgrad.vjp(pool, x)
    (g,) = vjp(jnp.asarray(ct))
    np.testing.assert_array_equal(np.asarray(g), _first_extreme_grad_ref(x, k, kind))
    gj = funcgrad.jit(lambda a, c: funcgrad.vjp(pool, a)[1](c)[0])(x, ct)
    np.testing.assert_array_equal(np.asarray(gj), np.asarray(g))
    # the general (overlap-capable) path gives the same routing for these windows
    padded_pool = lambda a: fn(a, k, k, ((0, 0), (0, 0), (0, 0), (0, 1)))  # noqa: E731
    (g2,) = funcgrad.vjp(padded_pool, x)[1](jnp.asarray(ct))
    np.testing.assert_array_equal(np.asarray(g2), np.asarray(g))


# --- through the transforms, once they exist ---------------------------------------------------
needs_grad = pytest.mark.skipif(not hasattr(funcgrad, "grad"), reason="funcgrad.grad not yet")
needs_vmap = pytest.mark.skipif(not hasattr(funcgrad, "vmap"), reason="funcgrad.vmap not yet")


@needs_grad
@pytest.mark.parametrize("case", [CASES[1], CASES[3]])
def test_conv_grad_matches_finite_differences(case, x64, rng):
    xs, ws, st, pads, ld, rd, fgc, bgc = case
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)

    def f(a, b):
        y = lax.conv_general_dilated(a, b, st, pads, ld, rd, feature_group_count=fgc,
                                     batch_group_count=bgc)
        return jnp.sum(jnp.sin(y))
    gx, gw = funcgrad.grad(f, argnums=(0, 1))(x, w)
    eps = 1e-6
    for arr, g, which in ((x, gx, 0), (w, gw, 1)):
        for idx in itertools.islice(np.ndindex(arr.shape), 0, None, max(arr.size // 5, 1)):
            d = np.zeros_like(arr)
            d[idx] = eps
            args_p = [x, w]
            args_m = [x, w]
            args_p[which] = arr + d
            args_m[which] = arr - d
            fd = (float(f(*args_p)) - float(f(*args_m))) / (2 * eps)
            np.testing.assert_allclose(np.asarray(g)[idx], fd, rtol=1e-5, atol=1e-7)


@needs_grad
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_reduce_window_grad(kind, x64, rng):
    x = rng.standard_normal((2, 5, 6))
    fn = lax.reduce_window_sum if kind == "sum" else lax.reduce_window_max

    def f(a):
        return jnp.sum(jnp.sin(fn(a, (1, 3, 2), (1, 2, 2), ((0, 0), (1, 1), (0, 0)))))
    g = np.asarray(funcgrad.grad(f)(x))
    eps = 1e-6
    for idx in list(np.ndindex(x.shape))[::7]:
        d = np.zeros_like(x)
        d[idx] = eps
        fd = (float(f(x + d)) - float(f(x - d))) / (2 * eps)
        np.testing.assert_allclose(g[idx], fd, rtol=1e-5, atol=1e-7)


@needs_vmap
def test_conv_vmap_matches_loop(rng):
    x = rng.standard_normal((3, 2, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((3, 4, 3, 3, 3)).astype(np.float32)
    f = lambda a, b: lax.conv(a, b, (1, 1), "SAME")
    out = np.asarray(funcgrad.vmap(f)(x, w))
    for b in range(3):
        np.testing.assert_allclose(out[b], np.asarray(f(x[b], w[b])), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n,spatial,stride", [(1, (300,), 1), (1, (600,), 2), (2, (20, 16), 1),
                                              (2, (33, 34), 2), (3, (8, 8, 6), 1),
                                              (2, (6, 6), 1)])
def test_pointwise_conv_values_and_grads(x64, n, spatial, stride, rng):
    # 1x1 convolutions with at least 256 output positions per example run as per-example
    # matrix products (F._conv_pointwise); (6, 6) takes the convolution path. Both must match
    # a NumPy reference and the convolution primitive's gradients.
    import funcgrad.nn.functional as F
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    x = rng.standard_normal((3, 5) + spatial)
    w = rng.standard_normal((7, 5) + (1,) * n)
    b = rng.standard_normal(7)
    sub = x[(slice(None), slice(None)) + (slice(None, None, stride),) * n]
    want = np.einsum("oc,nc...->no...", w.reshape(7, 5), sub) + b.reshape((1, 7) + (1,) * n)
    got = conv(jnp.asarray(x), jnp.asarray(w), jnp.asarray(b), stride=stride)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    unbatched = conv(jnp.asarray(x[0]), jnp.asarray(w), jnp.asarray(b), stride=stride)
    np.testing.assert_allclose(np.asarray(unbatched), want[0], rtol=1e-12, atol=1e-12)

    def ref(x, w):
        dn = lax.conv_dimension_numbers(x.shape, w.shape, None)
        return lax.conv_general_dilated(x, w, (stride,) * n, [(0, 0)] * n,
                                        dimension_numbers=dn)
    ct = rng.standard_normal(want.shape)
    loss = lambda f: lambda x, w: jnp.sum(jnp.asarray(ct) * f(x, w))
    g = funcgrad.jit(funcgrad.grad(loss(lambda x, w: conv(x, w, stride=stride)),
                                   argnums=(0, 1)))(x, w)
    g_ref = funcgrad.grad(loss(ref), argnums=(0, 1))(x, w)
    for a, r in zip(g, g_ref):
        np.testing.assert_allclose(np.asarray(a), np.asarray(r), rtol=1e-11, atol=1e-12)


def _check_conv_grads(conv, x, w):
    """jit(grad) of sum(sin(conv(x, w))) in both operands against central differences at a
    spread of entries (float64)."""
    f = lambda a, b: jnp.sum(jnp.sin(conv(a, b)))
    gx, gw = funcgrad.jit(funcgrad.grad(f, argnums=(0, 1)))(x, w)
    eps = 1e-6
    for arr, g, which in ((x, gx, 0), (w, gw, 1)):
        for idx in itertools.islice(np.ndindex(arr.shape), 0, None, max(arr.size // 6, 1)):
            d = np.zeros_like(arr)
            d[idx] = eps
            args_p, args_m = [x, w], [x, w]
            args_p[which] = arr + d
            args_m[which] = arr - d
            fd = (float(f(*args_p)) - float(f(*args_m))) / (2 * eps)
            np.testing.assert_allclose(np.asarray(g)[idx], fd, rtol=1e-6, atol=1e-8)


PADDED_INPUT_CASES = [
    # on CPU, a kernel larger than the stored input along some axis lowers with the padding
    # (and input dilation) applied to the input first, then XLA's convolution (these have more
    # than CPU_TAP_SUM_MAX_TERMS products per output pixel): plain, groups with kernel
    # dilation, input dilation (a strided layer's input gradient), 1-d, batch groups
    ((2, 6, 2, 2), (3, 6, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 1, 1),
    ((2, 12, 2, 3), (6, 6, 3, 3), (1, 1), ((2, 1), (1, 1)), (1, 1), (2, 1), 2, 1),
    ((2, 5, 2, 2), (4, 5, 3, 3), (2, 1), ((1, 2), (2, 1)), (2, 2), (1, 1), 1, 1),
    ((2, 9, 3), (2, 9, 5), (1,), ((2, 2),), (3,), (1,), 1, 1),
    ((4, 9, 1, 3), (4, 9, 2, 2), (1, 1), ((1, 1), (1, 1)), (2, 1), (1, 1), 1, 2),
]


@pytest.mark.parametrize("case", PADDED_INPUT_CASES)
def test_conv_padded_input_lowering_values_and_grads(case, x64, rng, monkeypatch, on_cpu):
    monkeypatch.setattr(CPU, "CPU_PHASES_MAX_FEATURES", 0)     # only this rewrite
    xs, ws, st, pads, ld, rd, fgc, bgc = case
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)

    def conv(a, b):
        return lax.conv_general_dilated(a, b, st, pads, ld, rd, feature_group_count=fgc,
                                        batch_group_count=bgc)
    want = ref_conv(x, w, st, pads, ld, rd, fgc, bgc)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(conv)(x, w)), want, rtol=1e-12,
                               atol=1e-12)
    import re
    text = funcgrad.jit(conv).lower(x, w).as_text()
    conv_lines = [ln for ln in text.splitlines() if "stablehlo.convolution" in ln]
    assert conv_lines, text
    for ln in conv_lines:       # XLA's convolution runs without padding or input dilation
        dil = re.search(r"lhs_dilate = \[([0-9, ]+)\]", ln)
        pad = re.search(r"pad = (\[\[.*?\]\])", ln)
        assert dil is None or set(dil.group(1).replace(" ", "").split(",")) == {"1"}, ln
        assert pad is None or set(re.findall(r"-?\d+", pad.group(1))) == {"0"}, ln
    # gradients (whose convolutions take the same lowering) against finite differences
    _check_conv_grads(conv, x, w)


PHASES_CASES = [
    # stride-1 convolutions with at most CPU_PHASES_MAX_FEATURES output features (and more
    # than CPU_TAP_SUM_MAX_TERMS products per pixel) lower on CPU as one stride-2 convolution
    # per output phase: LeNet's conv2 input gradient, odd output sizes, 1-d, 3-d with an axis
    # of one output (not split), channels-last
    ((3, 16, 6, 6), (6, 16, 5, 5), ((4, 4), (4, 4)), None),
    ((2, 10, 7, 5), (3, 10, 3, 2), ((1, 1), (0, 2)), None),
    ((2, 12, 9), (2, 12, 4), ((2, 1),), None),
    ((1, 4, 4, 5, 3), (2, 4, 2, 3, 3), ((1, 0), (1, 1), (0, 0)), None),
    ((2, 7, 6, 9), (3, 3, 9, 5), ((1, 1), (1, 1)), ("NHWC", "HWIO", "NHWC")),
]


@pytest.mark.parametrize("case", PHASES_CASES)
def test_conv_output_phases_lowering_values_and_grads(case, x64, rng, monkeypatch, on_cpu):
    xs, ws, pads, dn = case
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    nsp = len(xs) - 2

    def conv(a, b):
        return lax.conv_general_dilated(a, b, (1,) * nsp, pads, dimension_numbers=dn)
    if dn is None:
        want = ref_conv(x, w, (1,) * nsp, pads, (1,) * nsp, (1,) * nsp, 1, 1)
    else:       # the same convolution in NCHW/OIHW, transposed back
        want = ref_conv(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (1, 1), pads,
                        (1, 1), (1, 1), 1, 1).transpose(0, 2, 3, 1)
    text = funcgrad.jit(conv).lower(x, w).as_text()
    strides = re.findall(r"stride = \[([0-9, ]+)\]", text)
    assert strides and all("2" in s for s in strides), text
    np.testing.assert_allclose(np.asarray(funcgrad.jit(conv)(x, w)), want, rtol=1e-12,
                               atol=1e-12)
    monkeypatch.setattr(CPU, "CPU_PHASES_MAX_FEATURES", 0)     # XLA's convolution as it is
    assert "stride = [2" not in funcgrad.jit(conv).lower(x, w).as_text()
    np.testing.assert_allclose(np.asarray(funcgrad.jit(conv)(x, w)), want, rtol=1e-12,
                               atol=1e-12)
    monkeypatch.undo()
    _check_conv_grads(conv, x, w)
