"""``funcgrad.amp.GradScaler`` against ``torch.amp.GradScaler``: the scale sequence, the skipped
steps and the final weights for the same pattern of overflowing steps (stored reference in
data/torch_amp_ref.npz; live when PyTorch is installed), eagerly and inside one jitted step."""
import json
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
import funcgrad.nn.functional as F
import funcgrad.optim as optim
from funcgrad import nn
from funcgrad.amp import GradScaler
from tests.amp import amp_cases as C

DATA = os.path.join(os.path.dirname(__file__), "data")
REF = np.load(os.path.join(DATA, "torch_amp_ref.npz"))
with open(os.path.join(DATA, "torch_amp_ref.json")) as _f:
    REF_JSON = json.load(_f)
NAMES = list(C.net_init())


def _setup():
    boxes = {k: nn.Parameter(jnp.asarray(v)) for k, v in C.net_init().items()}
    opt = optim.SGD(list(boxes.values()), lr=0.05, momentum=0.9)
    x, y = C.train_data()
    return boxes, opt, jnp.asarray(x), jnp.asarray(y.astype(np.int32))


def _grads(scaler, params, x, y, bad):
    def loss_fn(p):
        return scaler.scale(F.cross_entropy(C.net_forward(F, jnp, p, x), y))
    g = funcgrad.grad(loss_fn)(params)
    w = g["fc1.weight"]
    g["fc1.weight"] = w.at[0, 0].set(jnp.where(bad, jnp.inf, w[0, 0]))
    return g


def _run(jitted):
    boxes, opt, x, y = _setup()
    scaler = GradScaler("cpu", **C.SCALER_KW)

    def step(boxes_data, opt, scaler, x, y, bad):
        g = _grads(scaler, boxes_data, x, y, bad)
        scaler.step(opt, [g[k] for k in NAMES])
        scaler.update()

    if jitted:
        step = funcgrad.jit(step)
    scales, skipped = [], []
    for i in range(C.SCALER_STEPS):
        before = np.asarray(boxes["fc2.bias"].data)
        step({k: b.data for k, b in boxes.items()}, opt, scaler, x, y,
             jnp.asarray(i in C.SCALER_BAD_STEPS))
        skipped.append(bool(np.array_equal(before, np.asarray(boxes["fc2.bias"].data))))
        scales.append(scaler.get_scale())
    return scaler, np.asarray(scales), np.asarray(skipped), boxes


def _check(scaler, scales, skipped, boxes, want_scales, want_skipped, want_weights, want_sd):
    np.testing.assert_array_equal(scales, want_scales)
    np.testing.assert_array_equal(skipped, want_skipped)
    for k, b in boxes.items():
        w = want_weights[k]
        np.testing.assert_allclose(np.asarray(b.data), w, rtol=1e-4,
                                   atol=1e-5 * np.abs(w).max(), err_msg=k)
    assert scaler.state_dict() == want_sd


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_scale_sequence_skips_and_weights_match_pytorch_reference(jitted):
    scaler, scales, skipped, boxes = _run(jitted)
    assert list(np.flatnonzero(skipped)) == list(C.SCALER_BAD_STEPS)
    _check(scaler, scales, skipped, boxes, REF["scaler/scales"], REF["scaler/skipped"],
           {k: REF["scaler/" + k] for k in NAMES}, REF_JSON["scaler_state_dict"])


def test_jitted_step_is_traced_once_and_skip_is_a_select():
    boxes, opt, x, y = _setup()
    scaler = GradScaler("cpu", init_scale=4.0, growth_interval=2)

    @funcgrad.jit
    def step(p, opt, scaler, bad):
        g = _grads(scaler, p, x, y, bad)
        scaler.step(opt, [g[k] for k in NAMES])
        scaler.update()

    for bad in (False, True, False, False, True):
        step({k: b.data for k, b in boxes.items()}, opt, scaler, jnp.asarray(bad))
    assert step.trace_count == 1
    text = step.lower({k: b.data for k, b in boxes.items()}, opt, scaler,
                      jnp.asarray(True)).as_text()
    assert "stablehlo.select" in text
    # 4 -> 2 (inf) ... : F T F F T with interval 2: 4, 2, 2, 4, 2
    assert scaler.get_scale() == 2.0 and scaler.state_dict()["_growth_tracker"] == 0


def test_skipped_first_step_leaves_optimizer_state_fresh():
    boxes, opt, x, y = _setup()
    scaler = GradScaler("cpu")
    step = funcgrad.jit(lambda p, opt, scaler, bad: (
        scaler.step(opt, [_grads(scaler, p, x, y, bad)[k] for k in NAMES]), scaler.update()))
    p0 = {k: np.asarray(b.data) for k, b in boxes.items()}
    step({k: b.data for k, b in boxes.items()}, opt, scaler, jnp.asarray(True))
    for k, b in boxes.items():
        np.testing.assert_array_equal(np.asarray(b.data), p0[k])
    for st in opt.state.values():
        assert float(st["step"]) == 0.0
        assert not np.any(np.asarray(st["momentum_buffer"]))
    assert scaler.get_scale() == 2.0 ** 15


def test_unscale_then_clip_then_step():
    scaler = GradScaler("cpu", init_scale=8.0)
    g = {"a": jnp.asarray([8.0, 16.0])}
    un = scaler.unscale(g)
    np.testing.assert_array_equal(np.asarray(un["a"]), [1.0, 2.0])
    with pytest.raises(RuntimeError, match="already called"):
        scaler.unscale(g)
    box = nn.Parameter(jnp.asarray([0.0, 0.0]))
    opt = optim.SGD([box], lr=1.0)
    scaler.step(opt, [un["a"]])          # not unscaled a second time
    np.testing.assert_array_equal(np.asarray(box.data), [-1.0, -2.0])
    scaler.update()
    assert scaler.get_scale() == 8.0
    scaler.update(new_scale=3.0)
    assert scaler.get_scale() == 3.0


def test_nan_gradient_is_skipped_eagerly():
    scaler = GradScaler("cpu", init_scale=2.0)
    box = nn.Parameter(jnp.asarray([1.0]))
    opt = optim.SGD([box], lr=1.0)
    scaler.step(opt, [jnp.asarray([jnp.nan])])
    scaler.update()
    np.testing.assert_array_equal(np.asarray(box.data), [1.0])
    assert scaler.get_scale() == 1.0


def test_disabled_scaler_is_transparent():
    scaler = GradScaler("cpu", enabled=False)
    loss = jnp.asarray(3.0)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0
    assert scaler.state_dict() == {}
    box = nn.Parameter(jnp.asarray([1.0]))
    scaler.step(optim.SGD([box], lr=1.0), [jnp.asarray([1.0])])
    np.testing.assert_array_equal(np.asarray(box.data), [0.0])
    with pytest.raises(RuntimeError, match="disabled"):
        scaler.load_state_dict({"scale": 1.0})


def test_state_dict_round_trip_and_errors():
    a = GradScaler("cpu", init_scale=16.0, growth_interval=7)
    b = GradScaler("cpu")
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict() == {
        "scale": 16.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 7,
        "_growth_tracker": 0}
    with pytest.raises(KeyError, match="missing keys"):
        b.load_state_dict({"scale": 1.0})
    with pytest.raises(ValueError, match="growth_factor must be > 1.0"):
        GradScaler("cpu", growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor"):
        GradScaler("cpu", backoff_factor=1.5)
    with pytest.raises(ValueError, match="growth_interval"):
        GradScaler("cpu", growth_interval=0)
    with pytest.raises(RuntimeError, match="no inf checks"):
        GradScaler("cpu").update()


def test_traced_update_of_a_closed_over_scaler_is_an_error():
    scaler = GradScaler("cpu")

    @funcgrad.jit
    def f(g):
        scaler.unscale([g])
        scaler.update()
        return g
    with pytest.raises(TypeError, match="argument of the jitted function"):
        f(jnp.ones(2))


def test_scale_keeps_the_loss_dtype():
    scaler = GradScaler("cuda")
    assert scaler.scale(jnp.asarray(1.0, jnp.float16)).dtype == np.float16
    assert float(scaler.scale(jnp.asarray(1.0))) == 65536.0


def test_live_pytorch_scaler():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    x, y = (torch.tensor(v) for v in C.train_data())
    p = {k: torch.tensor(v, requires_grad=True) for k, v in C.net_init().items()}
    opt = torch.optim.SGD(p.values(), lr=0.05, momentum=0.9)
    ts = torch.amp.GradScaler("cpu", **C.SCALER_KW)
    scales, skipped = [], []
    for step in range(C.SCALER_STEPS):
        opt.zero_grad()
        ts.scale(TF.cross_entropy(C.net_forward(TF, torch, p, x), y)).backward()
        if step in C.SCALER_BAD_STEPS:
            p["fc1.weight"].grad[0, 0] = float("inf")
        before = p["fc2.bias"].detach().clone()
        ts.step(opt)
        ts.update()
        skipped.append(bool(torch.equal(before, p["fc2.bias"].detach())))
        scales.append(ts.get_scale())
    scaler, got_scales, got_skipped, boxes = _run(jitted=True)
    _check(scaler, got_scales, got_skipped, boxes, np.asarray(scales, np.float32),
           np.asarray(skipped), {k: v.detach().numpy() for k, v in p.items()}, ts.state_dict())
    # and the other way round: torch's scaler loads ours
    ts2 = torch.amp.GradScaler("cpu")
    ts2.load_state_dict(scaler.state_dict())
    assert ts2.state_dict() == scaler.state_dict()
