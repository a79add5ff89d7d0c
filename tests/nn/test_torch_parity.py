"""Parity with PyTorch: the same model code (tests/nn/shared_models.py) built with
``funcgrad.nn`` loads PyTorch's initial weights and must reproduce PyTorch's outputs, losses,
gradients, BatchNorm statistics and three SGD-momentum and Adam steps, to 1e-5 relative.

Each check runs twice: in float64 (``Module.double()`` with x64 enabled, against PyTorch's
``.double()`` model), elementwise, which tests the semantics exactly; and in float32, per tensor
(max|got - want| / max|want|), where only the summation order differs. The measured numbers and
the few entries that need a separate rule are explained below.

References come from tests/nn/data/torch_ref.npz (made by make_fixtures.py with PyTorch; float64
references under "f64/"); when PyTorch is importable the same checks also run against values
computed live (the slow "live-torch" variants).
"""
import os
import sys

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.optim as optim

sys.path.insert(0, os.path.dirname(__file__))
import shared_models  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "torch_ref.npz")
# The bar (issue 7): 1e-5 relative. Measured with jaxlib 0.10.2 / torch 2.13 CPU:
# * float64 (both libraries in float64, the funcgrad model built with ``Module.double()``): every
#   output, loss, gradient, BatchNorm statistic and parameter after 3 SGD-momentum / 3 Adam
#   steps agrees ELEMENTWISE to <= 3e-11 relative (worst: lenet's fc1.weight gradient; after
#   Adam 1.2e-12), with an absolute slack far below 1e-12 x the tensor's largest entry, apart
#   from the exactly-zero entries described below: this checks the semantics exactly.
# * float32: per tensor, max|got - want| / max|want| <= 2.1e-6 (worst: lenet's conv1.weight
#   gradient; lm's weight_hh_l1_reverse after Adam 1.8e-6), except lenet's fc1.weight after
#   Adam (RTOL32_ADAM below). Elementwise relative errors are larger (up to 5e-3) only for
#   entries far smaller than their tensor's scale, whose value is a cancellation of larger terms
#   summed in a different order (XLA's vs PyTorch's reductions and convolutions); PyTorch's own
#   float32 gradients are as far from its float64 ones (worst 2.0e-6 per tensor, lenet).
RTOL = 1e-5
ATOL64 = 1e-12         # float64 elementwise slack, as a fraction of the tensor's max |value|

# Entries whose exact gradient is zero, so that what both libraries compute is rounding noise:
# conv1's bias feeds a training-mode BatchNorm (which subtracts the batch mean), and the key
# projection's bias (rows 16:32 of in_proj_bias) shifts every attention logit of a query by the
# same amount, which softmax ignores. They are checked to be zero at the gradient scale.
ZERO_GRAD = {("lenet", "conv1.bias"): slice(None),
             ("attn", "enc.self_attn.in_proj_bias"): slice(16, 32)}
# Adam divides each gradient by its own RMS: on a zero-gradient entry that starts at 0 (the key
# bias) it moves by noise / (|noise| + eps). In float64 the noise (~1e-18) is far below eps and
# the entries stay below 3.1e-7 lr (PyTorch: 2.7e-7 lr); in float32 the noise (~1e-9) is
# comparable to eps and the entries move by up to 0.43 lr with arbitrary signs, in both
# libraries (PyTorch float32 vs PyTorch float64 differ by the same amount). There they are only
# checked against Adam's step bound (3 steps of at most ~1.0013 lr each).
ADAM_LR = 1e-3
ADAM_NOISE = {"float64": 1e-5 * ADAM_LR, "float32": 3.1 * ADAM_LR}
# float32 after 3 Adam steps, lenet's fc1.weight: one entry's weight-decayed gradient is a
# cancellation, -4.00673e-5 (loss) + 4.02012e-5 (weight decay) = 1.3e-7, known to only ~2% in
# float32; Adam normalizes it to a step of ~lr, so the entry ends up 1.3e-3 lr = 2.4e-5 x the
# tensor's max away from the exact (float64) value in funcgrad, and PyTorch float32 is itself
# 1.35e-5 away from PyTorch float64 there. Measured funcgrad vs PyTorch float32: 1.1e-5
# (3.9e-6 before the convolution lowering changed its summation order); the float64 test checks
# this tensor elementwise to 1e-5. Every other tensor meets 1e-5.
RTOL32_ADAM = {("lenet", "fc1.weight"): 5e-5}


def _stored():
    with np.load(DATA) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module", params=["stored",
                                        pytest.param("live-torch", marks=pytest.mark.slow)])
def ref(request):
    if request.param == "stored":
        return _stored()
    pytest.importorskip("torch")
    import make_fixtures
    return make_fixtures.compute()


@pytest.fixture(params=["float32", "float64"])
def dtype(request):
    """The precision of a parity test: float64 runs with funcgrad's x64 mode on."""
    if request.param == "float64":
        request.getfixturevalue("x64")
    return request.param


def _rel_err(got, want):
    """max |got - want| / max |want| (absolute error when ``want`` is all zeros)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.size == 0:
        return 0.0
    scale = np.max(np.abs(want))
    err = np.max(np.abs(got - want))
    return err / scale if scale else err


def _check(got, want, dtype, what, rtol=RTOL):
    """float64: elementwise |got - want| <= rtol |want| + ATOL64 max|want|;
    float32: max|got - want| <= rtol max|want|."""
    if dtype == "float64":
        want = np.asarray(want, np.float64)
        scale = np.max(np.abs(want)) if want.size else 0.0
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol,
                                   atol=ATOL64 * scale, err_msg=what)
    else:
        err = _rel_err(got, want)
        assert err <= rtol, f"{what}: max|got - want| / max|want| = {err:.3g} > {rtol:g}"


def _check_grads(name, grads, ref, dtype, pre):
    want_all = {k: ref[f"{pre}/grad/{k}"] for k in grads}
    scale = max(np.max(np.abs(w)) for w in want_all.values())
    zero_tol = RTOL if dtype == "float32" else ATOL64
    for k, g in grads.items():
        g, want = np.asarray(g, np.float64), np.asarray(want_all[k], np.float64)
        sl = ZERO_GRAD.get((name, k))
        if sl is not None:
            # both libraries' values of an exactly-zero gradient are noise at the gradient scale
            for who, v in (("funcgrad", g), ("torch", want)):
                noise = np.max(np.abs(v[sl])) / scale
                assert noise <= zero_tol, f"grad {k}[{sl}] ({who}): |g| / scale = {noise:.3g}"
            rest = np.ones(g.shape, bool)
            rest[sl] = False
            g, want = g[rest], want[rest]
            if not g.size:
                continue
        _check(g, want, dtype, f"grad {k}")


def _check_state(name, state, ref, dtype, key, adam=False):
    for k, v in state.items():
        want = ref.get(f"{key}/{k}")
        if want is None:     # float64 after_forward stores only what the forward changed
            want = ref[f"{name}/init/{k}"]
        v, want = np.asarray(v, np.float64), np.asarray(want, np.float64)
        sl = ZERO_GRAD.get((name, k)) if adam else None
        if sl is not None and not np.any(ref[f"{name}/init/{k}"][sl]):
            for who, x in (("funcgrad", v), ("torch", want)):
                moved = np.max(np.abs(x[sl]))
                assert moved <= ADAM_NOISE[dtype], f"{k}[{sl}] ({who}) moved by {moved:.3g}"
            rest = np.ones(v.shape, bool)
            rest[sl] = False
            v, want = v[rest], want[rest]
        rtol = RTOL32_ADAM.get((name, k), RTOL) if adam and dtype == "float32" else RTOL
        _check(v, want, dtype, k, rtol)


MODELS = {
    "lenet": (shared_models.lenet,
              lambda o, t: F.cross_entropy(o, t, label_smoothing=0.1)),
    "lm": (shared_models.lstm_lm,
           lambda o, t: F.nll_loss(o.reshape(-1, 20), t.reshape(-1))),
    "attn": (shared_models.attention_block,
             lambda o, t: F.smooth_l1_loss(o, t, beta=0.5)),
}


def _pre(name, dtype):
    return name if dtype == "float32" else f"f64/{name}"


def _build(name, ref, dtype="float32"):
    model = MODELS[name][0](nn)
    if dtype == "float64":
        model.double()
    sd = {k[len(f"{name}/init/"):]: v for k, v in ref.items() if k.startswith(f"{name}/init/")}
    model.load_state_dict(sd)       # cast exactly to the model's dtype
    return model


def _inputs(name, ref, dtype="float32"):
    x, y = ref[f"{name}/x"], ref[f"{name}/y"]
    cast = (lambda a: a.astype(dtype) if a.dtype.kind == "f" else a)
    return jnp.asarray(cast(x)), jnp.asarray(cast(y))


def _buffers(model):
    names = {k for k, _ in model.named_buffers()}
    return {k: v for k, v in model.state_dict().items() if k in names}


@pytest.mark.parametrize("name", list(MODELS))
def test_forward_stats_and_eval(name, dtype, ref):
    """Training-mode output of a jitted forward, the BatchNorm statistics it writes back, then
    the eval-mode output (which uses them)."""
    pre = _pre(name, dtype)
    model = _build(name, ref, dtype)
    assert all(p.dtype == np.dtype(dtype) for p in model.parameters())
    x, _ = _inputs(name, ref, dtype)
    fwd = funcgrad.jit(lambda m, x: m(x))
    out = fwd(model, x)
    assert out.dtype == np.dtype(dtype)
    _check(out, ref[f"{pre}/out"], dtype, "train output")
    _check_state(name, model.state_dict(), ref, dtype, f"{pre}/after_forward")
    model.eval()
    _check(fwd(model, x), ref[f"{pre}/eval_out"], dtype, "eval output")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_eager_forward_loss_grads_and_stats(name, dtype, ref):
    """The same without jit: grad's eager forward updates BatchNorm's statistics in place."""
    pre = _pre(name, dtype)
    model = _build(name, ref, dtype)
    x, y = _inputs(name, ref, dtype)
    _check(model(x), ref[f"{pre}/out"], dtype, "train output")
    model = _build(name, ref, dtype)
    loss, grads = funcgrad.value_and_grad(lambda m: MODELS[name][1](m(x), y))(model)
    _check(loss, ref[f"{pre}/loss"], dtype, "loss")
    _check_grads(name, {k: g.data for k, g in grads.named_parameters()}, ref, dtype, pre)
    _check_state(name, model.state_dict(), ref, dtype, f"{pre}/after_forward")
    model.eval()
    _check(model(x), ref[f"{pre}/eval_out"], dtype, "eval output")


def _make_opt(kind, params):
    if kind == "sgd":
        return optim.SGD(params, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)
    return optim.Adam(params, lr=ADAM_LR, weight_decay=1e-3)


_SLOW = pytest.mark.slow


# One jitted training step per case (compiling the LSTM model's gradient takes ~5 s): its
# first call's loss, gradients and BatchNorm statistics are checked, then the losses of three
# steps and the final parameters and buffers.
@pytest.mark.parametrize("name,kind,mode", [
    ("lenet", "sgd", "jit"), ("lenet", "adam", "jit"), ("lm", "adam", "jit"),
    ("attn", "adam", "jit"),
    pytest.param("lm", "sgd", "jit", marks=_SLOW), pytest.param("attn", "sgd", "jit", marks=_SLOW),
    pytest.param("lenet", "sgd", "eager", marks=_SLOW),
    pytest.param("lenet", "adam", "eager", marks=_SLOW)])
def test_loss_grads_stats_and_three_optimizer_steps(name, kind, mode, dtype, ref):
    pre = _pre(name, dtype)
    model = _build(name, ref, dtype)
    x, y = _inputs(name, ref, dtype)
    loss_fn = MODELS[name][1]
    opt = _make_opt(kind, model.parameters())

    def step(m, o, x, y):
        loss, grads = funcgrad.value_and_grad(lambda mm: loss_fn(mm(x), y))(m)
        o.step(grads)
        return loss, grads
    if mode == "jit":
        step = funcgrad.jit(step)
    loss, grads = step(model, opt, x, y)
    assert loss.dtype == np.dtype(dtype)
    _check(loss, ref[f"{pre}/loss"], dtype, "loss")
    _check_grads(name, {k: g.data for k, g in grads.named_parameters()}, ref, dtype, pre)
    # the step's forward wrote BatchNorm's running statistics back to the model
    _check_state(name, _buffers(model), ref, dtype, f"{pre}/after_forward")
    losses = [float(loss)] + [float(step(model, opt, x, y)[0]) for _ in range(2)]
    for i, (got, want) in enumerate(zip(losses, ref[f"{pre}/{kind}/losses"])):
        _check(got, want, dtype, f"loss {i}")
    _check_state(name, model.state_dict(), ref, dtype, f"{pre}/{kind}/final",
                 adam=kind == "adam")


LOSSES = {
    "ce": lambda L, T, W, P, r: F.cross_entropy(L, T, weight=W, reduction=r, label_smoothing=0.2),
    "ce_plain": lambda L, T, W, P, r: F.cross_entropy(L, T, reduction=r),
    "ce_prob": lambda L, T, W, P, r: F.cross_entropy(L, P, weight=W, reduction=r,
                                                     label_smoothing=0.1),
    "nll": lambda L, T, W, P, r: F.nll_loss(F.log_softmax(L, 1), T, weight=W, reduction=r),
    "bce": lambda L, T, W, P, r: F.binary_cross_entropy(F.sigmoid(L), P, reduction=r),
    "bcel": lambda L, T, W, P, r: F.binary_cross_entropy_with_logits(L, P, pos_weight=W,
                                                                     reduction=r),
    "kl": lambda L, T, W, P, r: F.kl_div(F.log_softmax(L, 1), P, reduction=r),
    "sl1": lambda L, T, W, P, r: F.smooth_l1_loss(L, P, reduction=r, beta=0.3),
}


@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(loss, reduction, ref):
    args = [jnp.asarray(ref[f"loss/{k}"]) for k in ("logits", "labels", "w", "probs")]
    got = LOSSES[loss](*args, reduction)
    want = ref[f"loss/{loss}_{reduction}"]
    _check(got, want, "float32", f"{loss} {reduction}")      # measured <= 2.8e-7
    if loss == "kl" and reduction == "mean":
        _check(F.kl_div(F.log_softmax(args[0], 1), args[3], reduction="batchmean"),
               ref["loss/kl_batchmean"], "float32", "kl batchmean")


def test_pooling_and_conv_corner_cases(ref):
    x = jnp.asarray(ref["pool/x"])

    def check(got, key):      # measured <= 2.1e-7 (adaptive average pooling)
        _check(got, ref[key], "float32", key)
    check(F.max_pool2d(x, 3, 2, 1, ceil_mode=True), "pool/max_ceil")
    check(F.max_pool2d(x, 2, 1, 0, dilation=2), "pool/max_dil")
    check(F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), "pool/avg_pad")
    check(F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), "pool/avg_nopad")
    check(F.adaptive_avg_pool2d(x, (4, 3)), "pool/adaptive")
    check(F.conv_transpose2d(x, jnp.asarray(ref["conv/wt"]), stride=2, padding=1,
                             output_padding=1), "conv/tr")
    check(F.conv2d(x, jnp.asarray(ref["conv/wg"]), stride=(1, 2), padding="valid", groups=3,
                   dilation=(2, 1)), "conv/grouped")


def test_state_dict_keys_match_pytorch(ref):
    for name in MODELS:
        model = MODELS[name][0](nn)
        want = [k[len(f"{name}/init/"):] for k in ref if k.startswith(f"{name}/init/")]
        assert sorted(model.state_dict()) == sorted(want)
        for k, v in model.state_dict().items():
            assert tuple(v.shape) == ref[f"{name}/init/{k}"].shape, k
