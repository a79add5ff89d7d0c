"""Optimizers against NumPy transcriptions of PyTorch's formulas, schedulers against their
closed forms, clipping, state dicts, param groups, and the pure init/update form under jit."""
import math

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
import funcgrad.nn as nn
import funcgrad.optim as optim


def _np_sgd(p, gs, lr, momentum, dampening, wd, nesterov):
    buf = None
    for g in gs:
        g = g + wd * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def _np_adam(p, gs, lr, b1, b2, eps, wd, decoupled, amsgrad=False):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    for t, g in enumerate(gs, 1):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vv = np.maximum(vmax, v) if amsgrad else v
        vmax = vv
        denom = np.sqrt(vv) / np.sqrt(1 - b2 ** t) + eps
        p = p - lr / (1 - b1 ** t) * m / denom
    return p


def _np_rmsprop(p, gs, lr, alpha, eps, wd, momentum, centered):
    sq = np.zeros_like(p)
    ga = np.zeros_like(p)
    buf = np.zeros_like(p)
    for g in gs:
        g = g + wd * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def _np_adagrad(p, gs, lr, lr_decay, wd, init_acc, eps):
    s = np.full_like(p, init_acc)
    for t, g in enumerate(gs, 1):
        g = g + wd * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (np.sqrt(s) + eps)
    return p


CASES = [
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01),
     lambda p, gs: _np_sgd(p, gs, 0.1, 0.9, 0.2, 0.01, False)),
    (optim.SGD, dict(lr=0.1, momentum=0.5, nesterov=True),
     lambda p, gs: _np_sgd(p, gs, 0.1, 0.5, 0.0, 0.0, True)),
    (optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1),
     lambda p, gs: _np_adam(p, gs, 0.01, 0.8, 0.99, 1e-8, 0.1, False)),
    (optim.Adam, dict(lr=0.01, amsgrad=True),
     lambda p, gs: _np_adam(p, gs, 0.01, 0.9, 0.999, 1e-8, 0.0, False, True)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.1),
     lambda p, gs: _np_adam(p, gs, 0.01, 0.9, 0.999, 1e-8, 0.1, True)),
    (optim.RMSprop, dict(lr=0.01, alpha=0.9, eps=1e-3, momentum=0.5, centered=True,
                         weight_decay=0.01),
     lambda p, gs: _np_rmsprop(p, gs, 0.01, 0.9, 1e-3, 0.01, 0.5, True)),
    (optim.RMSprop, dict(lr=0.01, eps=1e-2),
     lambda p, gs: _np_rmsprop(p, gs, 0.01, 0.99, 1e-2, 0.0, 0.0, False)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1,
                         weight_decay=0.01),
     lambda p, gs: _np_adagrad(p, gs, 0.1, 0.01, 0.01, 0.1, 1e-10)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].__name__ if isinstance(c, tuple)
                         else None)
def test_optimizer_matches_numpy_formula(case, rng):
    cls, kw, ref = case
    p0 = rng.standard_normal((3, 2)).astype(np.float64)
    gs = [rng.standard_normal((3, 2)) for _ in range(4)]
    param = nn.Parameter(jnp.asarray(p0.astype(np.float32)))
    param._name = "w"
    opt = cls([param], **kw)
    for g in gs:
        opt.step({"w": jnp.asarray(g.astype(np.float32))})
    np.testing.assert_allclose(np.asarray(param.data), ref(p0, gs), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0].__name__ if isinstance(c, tuple)
                         else None)
def test_optimizer_float64_is_exact(case, rng, x64):
    """A float64 parameter is updated entirely in float64 (the float32 step counter included):
    the result equals the float64 formula to rounding."""
    cls, kw, ref = case
    p0 = rng.standard_normal((3, 2))
    gs = [rng.standard_normal((3, 2)) for _ in range(4)]
    param = nn.Parameter(jnp.asarray(p0))
    param._name = "w"
    opt = cls([param], **kw)
    for g in gs:
        opt.step({"w": jnp.asarray(g)})
    got, want = np.asarray(param.data), ref(p0, gs)
    assert got.dtype == np.float64
    # relative to the distance moved (a float32 step counter made Adagrad's error 2e-8 and
    # Adam's bias corrections 7e-6 of it)
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want - p0))


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_adam_float32_bias_correction_has_no_cancellation(cls, rng):
    """1 - 0.999**t in float32 loses three digits (pow's rounding against ~2e-3); Adam computes
    it as -expm1(t log beta). From p = 0 (so p's own rounding is tiny) three float32 steps match
    the float64 formula to 2e-7 of the result (1 - beta**t gave 1.8e-6)."""
    gs = [rng.standard_normal(50).astype(np.float32) for _ in range(3)]
    param = nn.Parameter(jnp.zeros((50,), "float32"))
    param._name = "w"
    opt = cls([param], lr=1e-3, weight_decay=0.0)
    want = np.zeros(50)
    m = v = 0.0
    for t, g in enumerate(gs, 1):
        opt.step({"w": jnp.asarray(g)})
        g = g.astype(np.float64)
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        want = want - 1e-3 / (1 - 0.9 ** t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999 ** t) + 1e-8)
        err = np.max(np.abs(np.asarray(param.data, np.float64) - want)) / np.max(np.abs(want))
        assert err <= 6e-7, (t, err)


def test_adam_beta1_zero_and_python_step(rng):
    """beta1 = 0 (log 0 = -inf in the bias correction) and a plain-number step restored from a
    state dict both work."""
    p = nn.Parameter(jnp.ones(3))
    p._name = "w"
    opt = optim.Adam([p], lr=0.1, betas=(0.0, 0.9))
    g = np.array([1.0, -2.0, 0.5], np.float32)
    opt.step({"w": jnp.asarray(g)})
    np.testing.assert_allclose(np.asarray(p.data), 1 - 0.1 * np.sign(g), rtol=1e-6)
    sd = opt.state_dict()
    sd["state"][0]["step"] = 1.0
    opt.load_state_dict(sd)
    opt.step({"w": jnp.asarray(g)})
    v = 0.9 * 0.1 * g * g + 0.1 * g * g
    want = 1 - 0.1 * np.sign(g) - 0.1 * g / (np.sqrt(v) / np.sqrt(1 - 0.81) + 1e-8)
    np.testing.assert_allclose(np.asarray(p.data), want, rtol=1e-6)


def test_pure_init_update_in_jit_matches_stateful(rng):
    p0 = {"a": jnp.asarray(rng.standard_normal(4).astype(np.float32)),
          "b": jnp.asarray(rng.standard_normal((2, 2)).astype(np.float32))}
    gs = [{"a": jnp.asarray(rng.standard_normal(4).astype(np.float32)),
           "b": jnp.asarray(rng.standard_normal((2, 2)).astype(np.float32))} for _ in range(3)]
    boxes = [nn.Parameter(p0["a"]), nn.Parameter(p0["b"])]
    boxes[0]._name, boxes[1]._name = "a", "b"
    opt = optim.Adam(boxes, lr=0.05)
    state = opt.init(p0)
    upd = funcgrad.jit(lambda g, s, p: opt.update(g, s, p))
    params = p0
    for g in gs:
        params, state = upd(g, state, params)
        opt.step(g)
    for k, b in zip("ab", boxes):
        np.testing.assert_allclose(np.asarray(params[k]), np.asarray(b.data), rtol=1e-4,
                                   atol=2e-6)


def test_param_groups_frozen_and_grad_module(rng):
    funcgrad.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    m[1].requires_grad_(False)
    w1 = np.asarray(m[1].weight)
    opt = optim.SGD([{"params": m[0].parameters(), "lr": 0.5},
                     {"params": m[1].parameters()}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[1]["lr"] == 0.1
    list(m.named_parameters())          # names the boxes relative to the model
    x = jnp.ones((3, 2))
    w0 = np.asarray(m[0].weight)
    g = funcgrad.grad(lambda mm: jnp.sum(mm(x)))(m)
    opt.step(g)
    np.testing.assert_allclose(np.asarray(m[0].weight), w0 - 0.5 * np.asarray(g[0].weight),
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(m[1].weight), w1)      # frozen
    with pytest.raises(ValueError):
        optim.SGD([{"params": m[0].parameters()}, {"params": m[0].parameters()}])


def test_optimizer_state_dict_roundtrip(rng):
    p = nn.Parameter(jnp.ones(3))
    p._name = "p"
    opt = optim.Adam([p], lr=0.1)
    opt.step({"p": jnp.ones(3)})
    sd = opt.state_dict()
    assert sd["param_groups"][0]["params"] == [0] and float(sd["state"][0]["step"]) == 1.0
    q = nn.Parameter(jnp.asarray(np.asarray(p.data)))
    q._name = "p"
    opt2 = optim.Adam([q], lr=0.5)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.1
    opt.step({"p": jnp.ones(3) * 2})
    opt2.step({"p": jnp.ones(3) * 2})
    np.testing.assert_allclose(np.asarray(p.data), np.asarray(q.data), rtol=1e-6)


def _torch_sgd_state_dict(momentum, buffers):
    """A state dict as PyTorch's SGD writes it (its format: the momentum buffer alone, None
    before the first step or without momentum; its extra group entries)."""
    return {"state": {i: {"momentum_buffer": b} for i, b in enumerate(buffers)},
            "param_groups": [{"lr": 0.1, "momentum": momentum, "dampening": 0.25,
                              "weight_decay": 0.0, "nesterov": False, "maximize": False,
                              "foreach": None, "differentiable": False, "fused": None,
                              "params": list(range(len(buffers)))}]}


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_loads_pytorch_state_dict(momentum, rng):
    p0, g1, g2 = (rng.normal(size=3).astype(np.float32) for _ in range(3))
    # PyTorch after one step: buf = g1, p = p0 - lr * g1; its state dict, then one more step
    p1 = p0 - 0.1 * g1
    sd = _torch_sgd_state_dict(momentum, [g1.copy() if momentum else None])
    box = nn.Parameter(jnp.asarray(p1))
    box._name = "w"
    opt = optim.SGD([box], lr=0.5)
    opt.load_state_dict(sd)
    opt.step({"w": jnp.asarray(g2)})
    buf = momentum * g1 + (1 - 0.25) * g2 if momentum else g2
    np.testing.assert_allclose(np.asarray(box.data), p1 - 0.1 * buf, rtol=1e-6)
    if momentum:
        np.testing.assert_allclose(np.asarray(opt.state_dict()["state"][0]["momentum_buffer"]),
                                   buf, rtol=1e-6)
    try:
        import torch
    except ImportError:
        return
    w = torch.nn.Parameter(torch.tensor(p0))
    topt = torch.optim.SGD([w], lr=0.1, momentum=momentum, dampening=0.25)
    for g in (g1, g2):
        w.grad = torch.tensor(g)
        topt.step()
    np.testing.assert_allclose(np.asarray(box.data), w.detach().numpy(), rtol=1e-6)


def test_schedulers_closed_forms():
    def make():
        p = nn.Parameter(jnp.ones(1))
        return optim.SGD([p], lr=1.0, momentum=0.9)
    o = make()
    s = optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)
    lrs = []
    for _ in range(5):
        lrs.append(o.param_groups[0]["lr"])
        s.step()
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25]
    o = make()
    s = optim.lr_scheduler.ExponentialLR(o, 0.9)
    s.step()
    s.step()
    assert math.isclose(o.param_groups[0]["lr"], 0.81)
    o = make()
    s = optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=0.1)
    for _ in range(5):
        s.step()
    assert math.isclose(o.param_groups[0]["lr"], 0.1 + 0.9 * (1 + math.cos(math.pi / 2)) / 2)
    o = make()
    s = optim.lr_scheduler.LambdaLR(o, lambda e: 1 / (e + 1))
    s.step()
    assert math.isclose(s.get_last_lr()[0], 0.5)
    o = make()
    s = optim.lr_scheduler.OneCycleLR(o, max_lr=1.0, total_steps=10, pct_start=0.3)
    lrs = [o.param_groups[0]["lr"]]
    moms = [o.param_groups[0]["momentum"]]
    for _ in range(9):
        s.step()
        lrs.append(o.param_groups[0]["lr"])
        moms.append(o.param_groups[0]["momentum"])
    assert math.isclose(lrs[0], 1.0 / 25) and max(lrs) == pytest.approx(1.0)
    assert int(np.argmax(lrs)) == 2 and math.isclose(lrs[-1], 1.0 / 25 / 1e4, rel_tol=1e-6)
    assert math.isclose(moms[2], 0.85) and math.isclose(moms[0], 0.95)


def test_scheduler_lr_change_does_not_retrace():
    m = nn.Linear(2, 1)
    opt = optim.SGD(m.parameters(), lr=0.1)
    sched = optim.lr_scheduler.ExponentialLR(opt, 0.5)
    x = jnp.ones((4, 2))

    @funcgrad.jit
    def step(m, o, x):
        loss, g = funcgrad.value_and_grad(lambda mm: jnp.sum(mm(x) ** 2))(m)
        o.step(g)
        return loss
    b0 = float(m.bias[0])
    g0 = float(funcgrad.grad(lambda mm: jnp.sum(mm(x) ** 2))(m).bias[0])
    step(m, opt, x)
    np.testing.assert_allclose(float(m.bias[0]), b0 - 0.1 * g0, rtol=1e-5)
    sched.step()
    b1 = float(m.bias[0])
    g1 = float(funcgrad.grad(lambda mm: jnp.sum(mm(x) ** 2))(m).bias[0])
    step(m, opt, x)
    np.testing.assert_allclose(float(m.bias[0]), b1 - 0.05 * g1, rtol=1e-5)
    assert step.trace_count == 1



def test_hyper_parameter_changes_between_jitted_steps():
    """The optimizer's flatten keeps what it derived from its hyper-parameters per set of
    values: a changed flag (momentum switched on, nesterov) retraces and takes effect, the
    same values again reuse their trace."""
    m = nn.Linear(2, 1, bias=False)
    opt = optim.SGD(m.parameters(), lr=0.5)
    x = jnp.ones((1, 2))

    @funcgrad.jit
    def step(m, o):
        g = funcgrad.grad(lambda mm: jnp.sum(mm(x)))(m)   # d/dw = x = 1 everywhere
        o.step(g)

    def w():
        return np.asarray(m.weight).copy()
    w0 = w()
    step(m, opt)
    np.testing.assert_allclose(w(), w0 - 0.5, rtol=1e-6)       # plain SGD
    opt.param_groups[0]["momentum"] = 0.9
    step(m, opt)
    step(m, opt)                                                 # buffer 1, then 1.9
    np.testing.assert_allclose(w(), w0 - 0.5 - 0.5 * (1 + 1.9), rtol=1e-6)
    traces = step.trace_count
    step(m, opt)                                                 # buffer 2.71
    assert step.trace_count == traces
    opt.param_groups[0]["nesterov"] = True                       # g + 0.9 * (0.9 * 2.71 + 1)
    step(m, opt)
    assert step.trace_count == traces + 1
    np.testing.assert_allclose(w(), w0 - 0.5 * (1 + 2.9 + 2.71) - 0.5 * (1 + 0.9 * 3.439),
                               rtol=1e-6)
    opt.param_groups[0]["nesterov"] = False                      # the momentum trace again
    step(m, opt)
    assert step.trace_count == traces + 1
    np.testing.assert_allclose(w(), w0 - 0.5 * (1 + 2.9 + 2.71 + 1 + 0.9 * 3.439 + 4.0951),
                               rtol=1e-6)

def test_clip_grad_norm():
    g = {"a": jnp.asarray([3.0, 0.0]), "b": jnp.asarray([4.0])}
    clipped, norm = optim.clip_grad_norm(g, 1.0)
    assert float(norm) == pytest.approx(5.0)
    np.testing.assert_allclose(np.asarray(clipped["a"]), [0.6, 0.0], rtol=1e-5)
    p = nn.Parameter(jnp.zeros(2))
    p.grad = jnp.asarray([0.3, 0.4])
    assert float(optim.clip_grad_norm_([p], 1.0)) == pytest.approx(0.5)
    np.testing.assert_allclose(np.asarray(p.grad), [0.3, 0.4], rtol=1e-5)


def test_step_on_closed_over_optimizer_inside_jit_raises():
    m = nn.Linear(2, 1)
    opt = optim.SGD(m.parameters(), lr=0.1)
    x = jnp.ones((1, 2))

    @funcgrad.jit
    def bad(m, x):
        opt.step(funcgrad.grad(lambda mm: jnp.sum(mm(x)))(m))
        return x
    with pytest.raises(TypeError, match="argument"):
        bad(m, x)
