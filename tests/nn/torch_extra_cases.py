"""Cases of the torch.nn / torch.nn.functional names added for issue 21, written once for both
libraries: ``fn(lib, *inputs)`` runs with ``lib.F``/``lib.nn`` = torch's or funcgrad's.

Each case: (name, inputs, fn, diff) where ``inputs`` is a list of NumPy arrays (made from a
fixed seed), and ``diff`` the positions of the inputs to differentiate (the gradient of
``sum(out_i * cotangent_i)`` over the floating outputs, with fixed random cotangents).
make_torch_extra.py stores PyTorch's outputs and gradients; test_torch_extra_parity.py
compares funcgrad's with them (and with PyTorch live when it is importable).
"""
import numpy as np


def _rng(name):
    return np.random.default_rng(abs(hash(name)) % (2 ** 32) if False else
                                 sum(map(ord, name)) * 7919)


def f32(rng, *shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def _distinct(rng, *shape):
    """Values without ties (max pooling's index is then unique)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).astype(np.float32) / n * 4 - 2).reshape(shape)


CASES = []


def case(name, diff=(0,)):
    def register(make):
        rng = _rng(name)
        inputs, fn = make(rng)
        CASES.append((name, inputs, fn, tuple(diff)))
        return make
    return register


# --- pooling -------------------------------------------------------------------------------------
@case("max_pool1d_with_indices")
def _(r):
    return [_distinct(r, 2, 3, 11)], lambda lib, x: lib.F.max_pool1d_with_indices(
        x, 3, 2, 1, dilation=2, ceil_mode=True)


@case("max_pool2d_with_indices")
def _(r):
    return [_distinct(r, 2, 2, 7, 8)], lambda lib, x: lib.F.max_pool2d_with_indices(
        x, (3, 2), (2, 1), (1, 0))


@case("max_pool3d_with_indices")
def _(r):
    return [_distinct(r, 1, 2, 5, 6, 5)], lambda lib, x: lib.F.max_pool3d_with_indices(
        x, 2, ceil_mode=True)


@case("adaptive_max_pool1d")
def _(r):
    return [_distinct(r, 2, 3, 10)], lambda lib, x: lib.F.adaptive_max_pool1d(
        x, 4, return_indices=True)


@case("adaptive_max_pool2d_uneven")
def _(r):
    return [_distinct(r, 2, 3, 7, 9)], lambda lib, x: lib.F.adaptive_max_pool2d(
        x, (3, 4), return_indices=True)


@case("adaptive_max_pool3d")
def _(r):
    return [_distinct(r, 1, 2, 5, 7, 6)], lambda lib, x: lib.F.adaptive_max_pool3d_with_indices(
        x, (2, 3, 4))


@case("adaptive_max_pool3d_module_unbatched")
def _(r):
    return [_distinct(r, 2, 4, 5, 6)], lambda lib, x: lib.nn.AdaptiveMaxPool3d((3, None, 2))(x)


@case("adaptive_avg_pool3d")
def _(r):
    return [f32(r, 2, 2, 5, 7, 6)], lambda lib, x: lib.nn.AdaptiveAvgPool3d((2, 3, 4))(x)


@case("lp_pool1d_p2")
def _(r):
    return [f32(r, 2, 3, 10)], lambda lib, x: lib.F.lp_pool1d(x, 2, 3, 2, ceil_mode=True)


@case("lp_pool2d_p3")
def _(r):
    return [f32(r, 2, 3, 7, 8, lo=0.1)], lambda lib, x: lib.nn.LPPool2d(3, (2, 3), (2, 2))(x)


@case("lp_pool3d_p1")
def _(r):
    return [f32(r, 1, 2, 4, 5, 6, lo=0.1)], lambda lib, x: lib.F.lp_pool3d(x, 1, 2)


@case("max_unpool1d")
def _(r):
    def fn(lib, x):
        y, i = lib.F.max_pool1d(x, 2, return_indices=True)
        return lib.nn.MaxUnpool1d(2)(y, i)
    return [_distinct(r, 2, 3, 9)], fn


@case("max_unpool2d_output_size")
def _(r):
    def fn(lib, x):
        y, i = lib.F.max_pool2d(x, 3, 2, 1, return_indices=True)
        return lib.F.max_unpool2d(y, i, 3, 2, 1, output_size=(7, 8))
    return [_distinct(r, 2, 2, 7, 8)], fn


@case("max_unpool3d")
def _(r):
    def fn(lib, x):
        y, i = lib.F.max_pool3d(x, 2, return_indices=True)
        return lib.nn.MaxUnpool3d(2)(y, i)
    return [_distinct(r, 1, 2, 4, 4, 6)], fn


@case("fractional_max_pool2d")
def _(r):
    samples = r.uniform(0, 1, (2, 3, 2)).astype(np.float32)
    return [_distinct(r, 2, 3, 9, 11), samples], lambda lib, x, s: lib.F.fractional_max_pool2d(
        x, (2, 3), output_size=(4, 5), return_indices=True, _random_samples=s)


@case("fractional_max_pool3d")
def _(r):
    samples = r.uniform(0, 1, (1, 2, 3)).astype(np.float32)
    return [_distinct(r, 1, 2, 7, 8, 9), samples], lambda lib, x, s: lib.F.fractional_max_pool3d(
        x, 2, output_ratio=0.5, return_indices=True, _random_samples=s)


# --- sampling ------------------------------------------------------------------------------------
def _theta2(r, n):
    return (np.eye(2, 3)[None] + r.uniform(-0.4, 0.4, (n, 2, 3))).astype(np.float32)


for _align in (False, True):
    @case(f"affine_grid_2d_align{int(_align)}")
    def _(r, align=_align):
        return [_theta2(r, 2)], lambda lib, t: lib.F.affine_grid(t, [2, 3, 4, 5],
                                                                 align_corners=align)

    @case(f"affine_grid_3d_align{int(_align)}")
    def _(r, align=_align):
        theta = (np.eye(3, 4)[None] + r.uniform(-0.3, 0.3, (2, 3, 4))).astype(np.float32)
        return [theta], lambda lib, t: lib.F.affine_grid(t, [2, 1, 3, 4, 5],
                                                         align_corners=align)

    for _mode in ("bilinear", "nearest", "bicubic"):
        for _pad in ("zeros", "border", "reflection"):
            @case(f"grid_sample_2d_{_mode}_{_pad}_align{int(_align)}",
                  diff=(0, 1) if _mode != "nearest" else (0,))
            def _(r, align=_align, mode=_mode, pad=_pad):
                grid = r.uniform(-1.3, 1.3, (2, 5, 6, 2)).astype(np.float32)
                return [f32(r, 2, 3, 4, 5), grid], lambda lib, x, g: lib.F.grid_sample(
                    x, g, mode=mode, padding_mode=pad, align_corners=align)

    for _mode in ("bilinear", "nearest"):
        for _pad in ("zeros", "border", "reflection"):
            @case(f"grid_sample_3d_{_mode}_{_pad}_align{int(_align)}",
                  diff=(0, 1) if _mode != "nearest" else (0,))
            def _(r, align=_align, mode=_mode, pad=_pad):
                grid = r.uniform(-1.2, 1.2, (2, 3, 4, 2, 3)).astype(np.float32)
                return [f32(r, 2, 2, 3, 4, 5), grid], lambda lib, x, g: lib.F.grid_sample(
                    x, g, mode=mode, padding_mode=pad, align_corners=align)


# --- activations, shuffles, distances ------------------------------------------------------------
@case("pdist_p2")
def _(r):
    return [f32(r, 6, 4)], lambda lib, x: lib.F.pdist(x)


@case("pdist_p1_p3_inf")
def _(r):
    return [f32(r, 5, 3)], lambda lib, x: (lib.F.pdist(x, 1), lib.F.pdist(x, 3),
                                           lib.F.pdist(x, float("inf")))


@case("channel_shuffle")
def _(r):
    return [f32(r, 2, 6, 3, 2)], lambda lib, x: (lib.F.channel_shuffle(x, 3),
                                                 lib.nn.ChannelShuffle(2)(x))


@case("rrelu_eval")
def _(r):
    return [f32(r, 3, 7)], lambda lib, x: (lib.F.rrelu(x, 0.1, 0.4),
                                           lib.nn.RReLU().eval()(x))


@case("inplace_aliases")
def _(r):
    def fn(lib, x):
        F = lib.F
        return (F.relu_(x * 1), F.elu_(x * 1), F.celu_(x * 1, 0.7), F.selu_(x * 1),
                F.leaky_relu_(x * 1, 0.2), F.hardtanh_(x * 1, -0.5, 0.7),
                F.threshold_(x * 1, 0.3, -1.0), F.rrelu_(x * 1, 0.1, 0.3),
                lib.nn.Hardtanh(-0.4, 0.9)(x))
    return [f32(r, 4, 5)], fn


@case("upsample_aliases")
def _(r):
    return [f32(r, 1, 2, 3, 4)], lambda lib, x: (lib.F.upsample_nearest(x, scale_factor=2),
                                                 lib.F.upsample_bilinear(x, size=(5, 7)))


# --- convolutions, embeddings --------------------------------------------------------------------
@case("conv_transpose3d", diff=(0, 1, 2))
def _(r):
    return ([f32(r, 2, 4, 3, 4, 3), f32(r, 4, 3, 2, 3, 2, lo=-0.5, hi=0.5), f32(r, 6)],
            lambda lib, x, w, b: lib.F.conv_transpose3d(x, w, b, stride=(2, 1, 2),
                                                        padding=(0, 1, 1),
                                                        output_padding=(1, 0, 1), groups=2,
                                                        dilation=(1, 2, 1)))


@case("conv_tbc", diff=(0, 1, 2))
def _(r):
    return ([f32(r, 7, 2, 3), f32(r, 3, 3, 4), f32(r, 4)],
            lambda lib, x, w, b: lib.F.conv_tbc(x, w, b, 1))


_IDS = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0], np.int64)
_OFFSETS = np.array([0, 3, 3, 6], np.int64)      # bag 1 is empty


for _mode in ("sum", "mean", "max"):
    @case(f"embedding_bag_offsets_{_mode}", diff=(0,))
    def _(r, mode=_mode):
        return [f32(r, 10, 3), _IDS, _OFFSETS], lambda lib, w, i, o: lib.F.embedding_bag(
            i, w, o, mode=mode)

    @case(f"embedding_bag_2d_padding_{_mode}", diff=(0,))
    def _(r, mode=_mode):
        ids = r.integers(0, 10, (4, 5)).astype(np.int64)
        ids[0, :] = 2                  # a bag of padding only
        return [f32(r, 10, 3), ids], lambda lib, w, i: lib.F.embedding_bag(
            i, w, mode=mode, padding_idx=2)


@case("embedding_bag_per_sample_weights_last_offset", diff=(0, 3))
def _(r):
    offsets = np.array([0, 2, 7, 10], np.int64)
    return ([f32(r, 10, 3), _IDS, offsets, f32(r, 10)],
            lambda lib, w, i, o, psw: lib.F.embedding_bag(
                i, w, o, mode="sum", per_sample_weights=psw, include_last_offset=True))


# --- losses --------------------------------------------------------------------------------------
@case("multi_margin_loss", diff=(0,))
def _(r):
    y = r.integers(0, 5, (6,)).astype(np.int64)
    w = r.uniform(0.5, 2.0, (5,)).astype(np.float32)
    def fn(lib, x, y, w):
        F = lib.F
        return (F.multi_margin_loss(x, y), F.multi_margin_loss(x, y, p=2, margin=0.7),
                F.multi_margin_loss(x, y, weight=w, reduction="sum"),
                F.multi_margin_loss(x, y, reduction="none"),
                lib.nn.MultiMarginLoss(p=2, weight=w)(x, y))
    return [f32(r, 6, 5), y, w], fn


@case("triplet_margin_with_distance_loss", diff=(0, 1, 2))
def _(r):
    def fn(lib, a, p, n):
        F = lib.F
        cos = lambda u, v: 1.0 - F.cosine_similarity(u, v)  # noqa: E731
        return (F.triplet_margin_with_distance_loss(a, p, n),
                F.triplet_margin_with_distance_loss(a, p, n, distance_function=cos,
                                                    margin=0.5, swap=True,
                                                    reduction="none"),
                lib.nn.TripletMarginWithDistanceLoss(swap=True, reduction="sum")(a, p, n))
    return [f32(r, 5, 4), f32(r, 5, 4), f32(r, 5, 4)], fn


@case("linear_cross_entropy", diff=(0, 1, 3))
def _(r):
    y = r.integers(0, 6, (5,)).astype(np.int64)
    y[1] = -100
    def fn(lib, x, w, y, b):
        F = lib.F
        return (F.linear_cross_entropy(x, w, y, linear_bias=b),
                F.linear_cross_entropy(x, w, y, reduction="sum", label_smoothing=0.1))
    return [f32(r, 5, 4), f32(r, 6, 4), y, f32(r, 6)], fn


def _ctc_inputs(r, t, n, c, s):
    logits = f32(r, t, n, c)
    tl = r.integers(1, s + 1, (n,)).astype(np.int64)
    il = r.integers(max(2 * s, 1), t + 1, (n,)).astype(np.int64)
    targets = r.integers(1, c, (n, s)).astype(np.int64)
    targets[0, :2] = 3             # a repeated label needs a blank between
    return logits, targets, il, tl


@case("ctc_loss_padded")
def _(r):
    logits, targets, il, tl = _ctc_inputs(r, 12, 4, 5, 4)
    def fn(lib, z, tg, il, tl):
        lp = lib.F.log_softmax(z, 2)
        return (lib.F.ctc_loss(lp, tg, il, tl), lib.F.ctc_loss(lp, tg, il, tl,
                                                               reduction="none"),
                lib.nn.CTCLoss(reduction="sum")(lp, tg, il, tl))
    return [logits, targets, il, tl], fn


@case("ctc_loss_concatenated_blank")
def _(r):
    logits, targets, il, tl = _ctc_inputs(r, 10, 3, 6, 3)
    flat = np.concatenate([np.where(row[:k] == 2, 1, row[:k]) for row, k in zip(targets, tl)])
    def fn(lib, z, tg, il, tl):
        lp = lib.F.log_softmax(z, 2)
        return lib.F.ctc_loss(lp, tg, il, tl, blank=2, reduction="none")
    return [logits, flat, il, tl], fn


@case("ctc_loss_zero_infinity")
def _(r):
    logits = f32(r, 4, 2, 4)
    targets = np.array([[1, 1, 1], [1, 2, 3]], np.int64)   # 1 1 1 needs 5 steps > 4
    il, tl = np.array([4, 4], np.int64), np.array([3, 2], np.int64)
    def fn(lib, z, tg, il, tl):
        lp = lib.F.log_softmax(z, 2)
        return (lib.F.ctc_loss(lp, tg, il, tl, reduction="none", zero_infinity=True),
                lib.F.ctc_loss(lp, tg, il, tl, zero_infinity=True))
    return [logits, targets, il, tl], fn


# --- modules with parameters: the same values loaded into both (lib.load fills the state dict
# from a seeded generator, by name) --------------------------------------------------------------
@case("instance_norm_1d_3d")
def _(r):
    def fn(lib, x1, x3):
        m1 = lib.load(lib.nn.InstanceNorm1d(3, affine=True), "in1")
        m3 = lib.load(lib.nn.InstanceNorm3d(2, track_running_stats=True, momentum=0.3), "in3")
        y3 = m3(x3)
        return m1(x1), m1(x1[0]), y3, m3.running_mean, m3.running_var, m3.eval()(x3)
    return [f32(r, 2, 3, 7), f32(r, 2, 2, 3, 4, 3)], fn


@case("conv_transpose3d_module")
def _(r):
    def fn(lib, x):
        m = lib.load(lib.nn.ConvTranspose3d(4, 6, (2, 3, 2), 2, 1, 1, groups=2), "ct3")
        return m(x)
    return [f32(r, 2, 4, 3, 4, 3)], fn


@case("embedding_bag_module")
def _(r):
    def fn(lib, i, o):
        m = lib.load(lib.nn.EmbeddingBag(10, 4, mode="max"), "bag")
        return m(i, o)
    return [_IDS, _OFFSETS], fn


@case("lazy_modules")
def _(r):
    def fn(lib, x, img):
        nn = lib.nn
        lin, conv, tconv = nn.LazyLinear(5), nn.LazyConv2d(4, 3, padding=1), \
            nn.LazyConvTranspose2d(3, 2, stride=2)
        bn, inorm = nn.LazyBatchNorm2d(momentum=0.2), nn.LazyInstanceNorm2d(affine=True)
        for m, v in ((lin, x), (conv, img), (tconv, img), (bn, img), (inorm, img)):
            m(v)                                     # the dry run infers the sizes
        for m, key in ((lin, "lin"), (conv, "conv"), (tconv, "tconv"), (bn, "bn"),
                       (inorm, "inorm")):
            lib.load(m, key)
        y = bn(img)
        return (lin(x), conv(img), tconv(img), y, bn.running_mean, bn.running_var, inorm(img))
    return [f32(r, 3, 7), f32(r, 2, 3, 5, 4)], fn


@case("sync_batchnorm_one_process")
def _(r):
    def fn(lib, x):
        m = lib.load(lib.nn.SyncBatchNorm(3), "sbn")
        y = m(x)
        return y, m.running_mean, m.running_var, m.eval()(x)
    return [f32(r, 4, 3, 5)], fn


@case("cross_map_lrn2d", diff=())
def _(r):
    return [f32(r, 2, 9, 3, 2)], lambda lib, x: (lib.nn.CrossMapLRN2d(3, 0.1, 0.6, 1.5)(x),
                                                 lib.nn.CrossMapLRN2d(4, 0.2)(x))


@case("linear_cross_entropy_module", diff=(0,))
def _(r):
    y = r.integers(0, 4, (5, 3)).astype(np.int64)
    def fn(lib, x, y):
        m = lib.load(lib.nn.LinearCrossEntropyLoss(6, 4, out_features=(3,), bias=True,
                                                   label_smoothing=0.05), "lce")
        return m(x, y)
    return [f32(r, 5, 6), y], fn


@case("adaptive_log_softmax", diff=(0,))
def _(r):
    t = r.integers(0, 20, (7,)).astype(np.int64)
    def fn(lib, x, t):
        m = lib.load(lib.nn.AdaptiveLogSoftmaxWithLoss(16, 20, [5, 12], div_value=2.0,
                                                       head_bias=True), "asm")
        out = m(x, t)
        return out.output, out.loss, m.log_prob(x), m.predict(x), m(x[0], t[0]).output
    return [f32(r, 7, 16), t], fn


@case("multi_head_attention_forward", diff=(0, 1, 3, 5))
def _(r):
    E, H, L, S, N = 6, 2, 4, 5, 3
    mask = np.triu(np.ones((L, S), bool), 2)
    kpm = np.zeros((N, S), bool)
    kpm[1, -1] = True
    def fn(lib, q, k, w_in, b_in, w_out, b_out, bk, bv, mask, kpm):
        F = lib.F
        packed = F.multi_head_attention_forward(q, k, k, E, H, w_in, b_in, bk, bv, True, 0.0,
                                                w_out, b_out, key_padding_mask=kpm,
                                                attn_mask=mask, average_attn_weights=False)
        wq, wk, wv = w_in[:E], w_in[E:2 * E], w_in[2 * E:]
        separate = F.multi_head_attention_forward(q, k, k, E, H, None, b_in, None, None, False,
                                                  0.0, w_out, None, need_weights=True,
                                                  use_separate_proj_weight=True,
                                                  q_proj_weight=wq, k_proj_weight=wk,
                                                  v_proj_weight=wv, is_causal=False)
        return packed, separate
    return [f32(r, L, N, E), f32(r, S, N, E), f32(r, 3 * E, E, lo=-0.5, hi=0.5), f32(r, 3 * E),
            f32(r, E, E, lo=-0.5, hi=0.5), f32(r, E), f32(r, 1, 1, E), f32(r, 1, 1, E), mask,
            kpm], fn
