"""Parity with PyTorch: the same model code (tests/nn/shared_models.py) built with
``funcgrad.nn`` loads PyTorch's initial weights and must reproduce PyTorch's outputs, losses,
gradients, BatchNorm statistics and three SGD-momentum and Adam steps.

References come from tests/nn/data/torch_ref.npz (made by make_fixtures.py with PyTorch); when
PyTorch is importable the same checks also run against values computed live.
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
RTOL = 1e-5


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


def _close(got, want, rtol=RTOL, atol=1e-6, what=""):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol, err_msg=what)


MODELS = {
    "lenet": (shared_models.lenet,
              lambda o, t: F.cross_entropy(o, t, label_smoothing=0.1)),
    "lm": (shared_models.lstm_lm,
           lambda o, t: F.nll_loss(o.reshape(-1, 20), t.reshape(-1))),
    "attn": (shared_models.attention_block,
             lambda o, t: F.smooth_l1_loss(o, t, beta=0.5)),
}


def _build(name, ref, stage="init"):
    model = MODELS[name][0](nn)
    sd = {k[len(f"{name}/{stage}/"):]: v for k, v in ref.items()
          if k.startswith(f"{name}/{stage}/")}
    model.load_state_dict(sd)
    return model


def _inputs(name, ref):
    return jnp.asarray(ref[f"{name}/x"]), jnp.asarray(ref[f"{name}/y"])


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("mode", ["jit", pytest.param("eager", marks=pytest.mark.slow)])
def test_forward_loss_grads_and_stats(name, mode, ref):
    model = _build(name, ref)
    x, y = _inputs(name, ref)
    loss_fn = MODELS[name][1]
    vg = funcgrad.value_and_grad(lambda m, x, y: loss_fn(m(x), y))
    if mode == "jit":
        vg = funcgrad.jit(vg)
    loss, grads = vg(model, x, y)
    _close(loss, ref[f"{name}/loss"], what="loss")
    for k, g in grads.named_parameters():
        _close(g.data, ref[f"{name}/grad/{k}"], rtol=2e-4, atol=2e-6, what=f"grad {k}")
    # the eager forward inside grad updated BatchNorm's running statistics in place
    for k, v in model.state_dict().items():
        _close(v, ref[f"{name}/after_forward/{k}"], what=f"state {k}")
    if name == "lenet":      # BatchNorm: eval mode uses the running statistics
        model.eval()
        _close(funcgrad.jit(lambda m, x: m(x))(model, x), ref[f"{name}/eval_out"], rtol=1e-4,
               atol=1e-5, what="eval output")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_eager_train_output_matches(name, ref):
    model = _build(name, ref)
    x, _ = _inputs(name, ref)
    _close(model(x), ref[f"{name}/out"], rtol=1e-4, atol=1e-5, what="train output")


def _make_opt(kind, params):
    if kind == "sgd":
        return optim.SGD(params, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3)
    return optim.Adam(params, lr=1e-3, weight_decay=1e-3)


_SLOW = pytest.mark.slow


@pytest.mark.parametrize("name,kind,mode", [
    ("lenet", "sgd", "jit"), ("lm", "adam", "jit"),
    pytest.param("lenet", "adam", "jit", marks=_SLOW), pytest.param("lm", "sgd", "jit", marks=_SLOW),
    pytest.param("lenet", "sgd", "eager", marks=_SLOW),
    pytest.param("lenet", "adam", "eager", marks=_SLOW)])
def test_three_optimizer_steps(name, kind, mode, ref):
    model = _build(name, ref)
    x, y = _inputs(name, ref)
    loss_fn = MODELS[name][1]
    opt = _make_opt(kind, model.parameters())

    def step(m, o, x, y):
        loss, grads = funcgrad.value_and_grad(lambda mm: loss_fn(mm(x), y))(m)
        o.step(grads)
        return loss
    if mode == "jit":
        step = funcgrad.jit(step)
    losses = [float(step(model, opt, x, y)) for _ in range(3)]
    _close(losses, ref[f"{name}/{kind}/losses"], rtol=1e-4, what="losses")
    for k, v in model.state_dict().items():
        _close(v, ref[f"{name}/{kind}/final/{k}"], rtol=1e-4, atol=2e-6, what=f"{k}")


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
    if loss in ("ce", "ce_plain", "nll") and reduction == "none":
        _close(got, want, what=f"{loss} {reduction}")
    else:
        _close(got, want, what=f"{loss} {reduction}")
    if loss == "kl" and reduction == "mean":
        _close(F.kl_div(F.log_softmax(args[0], 1), args[3], reduction="batchmean"),
               ref["loss/kl_batchmean"])


def test_pooling_and_conv_corner_cases(ref):
    x = jnp.asarray(ref["pool/x"])
    _close(F.max_pool2d(x, 3, 2, 1, ceil_mode=True), ref["pool/max_ceil"])
    _close(F.max_pool2d(x, 2, 1, 0, dilation=2), ref["pool/max_dil"])
    _close(F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), ref["pool/avg_pad"])
    _close(F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
           ref["pool/avg_nopad"])
    _close(F.adaptive_avg_pool2d(x, (4, 3)), ref["pool/adaptive"])
    _close(F.conv_transpose2d(x, jnp.asarray(ref["conv/wt"]), stride=2, padding=1,
                              output_padding=1), ref["conv/tr"], rtol=1e-4, atol=1e-5)
    _close(F.conv2d(x, jnp.asarray(ref["conv/wg"]), stride=(1, 2), padding="valid", groups=3,
                    dilation=(2, 1)), ref["conv/grouped"], rtol=1e-4, atol=1e-5)


def test_state_dict_keys_match_pytorch(ref):
    for name in MODELS:
        model = MODELS[name][0](nn)
        want = [k[len(f"{name}/init/"):] for k in ref if k.startswith(f"{name}/init/")]
        assert sorted(model.state_dict()) == sorted(want)
        for k, v in model.state_dict().items():
            assert tuple(v.shape) == ref[f"{name}/init/{k}"].shape, k
