"""ConstantLR, LinearLR, PolynomialLR, CosineAnnealingWarmRestarts, SequentialLR and
ReduceLROnPlateau: PyTorch's closed forms and rules, against hand-computed values and, when
PyTorch is installed, against its schedulers step by step."""
import math

import numpy as np
import pytest

import funcgrad.nn as nn
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad.optim import lr_scheduler as L


def _opt(lr=1.0, groups=1):
    params = [nn.Parameter(jnp.ones(1)) for _ in range(groups)]
    return optim.SGD([{"params": [p], "lr": lr * (i + 1)} for i, p in enumerate(params)],
                     lr=lr, momentum=0.9)


def _lrs(sched, opt, steps, metric=None):
    out = []
    for t in range(steps):
        out.append([g["lr"] for g in opt.param_groups])
        sched.step() if metric is None else sched.step(metric(t))
    return np.asarray(out)


def test_closed_forms():
    o = _opt()
    np.testing.assert_allclose(_lrs(L.ConstantLR(o, factor=0.5, total_iters=3), o, 5)[:, 0],
                               [0.5, 0.5, 0.5, 1.0, 1.0])
    o = _opt()
    np.testing.assert_allclose(_lrs(L.LinearLR(o, start_factor=0.25, total_iters=3), o, 5)[:, 0],
                               [0.25, 0.5, 0.75, 1.0, 1.0])
    o = _opt()
    np.testing.assert_allclose(_lrs(L.PolynomialLR(o, total_iters=4, power=2.0), o, 6)[:, 0],
                               [1.0, 0.5625, 0.25, 0.0625, 0.0, 0.0])
    o = _opt()
    got = _lrs(L.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2, eta_min=0.0), o, 8)[:, 0]
    # restarts at epochs 0, 2, 6; T_i = 2, 4, 8
    want = [1.0, 0.5, 1.0, (1 + math.cos(math.pi / 4)) / 2, 0.5,
            (1 + math.cos(3 * math.pi / 4)) / 2, 1.0, (1 + math.cos(math.pi / 8)) / 2]
    np.testing.assert_allclose(got, want, atol=1e-12)


def test_sequential_warmup_then_decay_and_state_dict():
    o = _opt(groups=2)
    warm = L.LinearLR(o, start_factor=0.5, total_iters=2)
    decay = L.ExponentialLR(o, gamma=0.5)
    s = L.SequentialLR(o, [warm, decay], milestones=[3])
    got = _lrs(s, o, 6)
    np.testing.assert_allclose(got[:, 0], [0.5, 0.75, 1.0, 1.0, 0.5, 0.25])
    np.testing.assert_allclose(got[:, 1], 2 * got[:, 0])
    state = s.state_dict()
    o2 = _opt(groups=2)
    s2 = L.SequentialLR(o2, [L.LinearLR(o2, 0.5, total_iters=2), L.ExponentialLR(o2, 0.5)], [3])
    s2.load_state_dict(state)
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr() == [0.0625, 0.125]
    with pytest.raises(ValueError, match="expected 1 milestones for 2 schedulers, got 2"):
        L.SequentialLR(o, [warm, decay], milestones=[1, 2])


def test_reduce_on_plateau_patience_cooldown_and_floor():
    o = _opt()
    s = L.ReduceLROnPlateau(o, factor=0.5, patience=1, cooldown=1, min_lr=0.2)
    metrics = [5, 4, 4, 4, 4, 4, 4, 4, 4, 3]
    got = _lrs(s, o, len(metrics), metric=lambda t: metrics[t])[:, 0]
    # two bad epochs in a row halve the lr, a cooldown epoch follows; never below 0.2
    np.testing.assert_allclose(got, [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25])
    s.step(4)
    assert o.param_groups[0]["lr"] == 0.25
    s.step(4)
    assert o.param_groups[0]["lr"] == 0.2 and s.get_last_lr() == [0.2]
    with pytest.raises(ValueError, match="factor must be < 1"):
        L.ReduceLROnPlateau(o, factor=1.5)


@pytest.mark.filterwarnings("ignore:Detected call of")
def test_match_torch_step_by_step():
    torch = pytest.importorskip("torch")

    def pair(lr=0.1):
        tp = torch.nn.Parameter(torch.ones(1))
        return _opt(lr), torch.optim.SGD([tp], lr=lr, momentum=0.9)

    cases = [
        (lambda o: L.ConstantLR(o, factor=0.3, total_iters=4),
         lambda t: torch.optim.lr_scheduler.ConstantLR(t, factor=0.3, total_iters=4)),
        (lambda o: L.LinearLR(o, start_factor=0.1, end_factor=0.9, total_iters=7),
         lambda t: torch.optim.lr_scheduler.LinearLR(t, start_factor=0.1, end_factor=0.9,
                                                     total_iters=7)),
        (lambda o: L.PolynomialLR(o, total_iters=9, power=1.5),
         lambda t: torch.optim.lr_scheduler.PolynomialLR(t, total_iters=9, power=1.5)),
        (lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01),
         lambda t: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(t, T_0=3, T_mult=2,
                                                                        eta_min=0.01)),
        (lambda o: L.CosineAnnealingWarmRestarts(o, T_0=4),
         lambda t: torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(t, T_0=4)),
    ]
    for ours, theirs in cases:
        o, t = pair()
        s, ts = ours(o), theirs(t)
        for _ in range(25):
            assert math.isclose(o.param_groups[0]["lr"], t.param_groups[0]["lr"],
                                rel_tol=1e-9, abs_tol=1e-12)
            s.step()
            ts.step()
    o, t = pair()
    s = L.SequentialLR(o, [L.LinearLR(o, 0.2, total_iters=4), L.StepLR(o, 3, 0.5)], [5])
    ts = torch.optim.lr_scheduler.SequentialLR(
        t, [torch.optim.lr_scheduler.LinearLR(t, 0.2, total_iters=4),
            torch.optim.lr_scheduler.StepLR(t, 3, 0.5)], milestones=[5])
    for _ in range(15):
        assert math.isclose(o.param_groups[0]["lr"], t.param_groups[0]["lr"], rel_tol=1e-9)
        s.step()
        ts.step()
    o, t = pair()
    s = L.ReduceLROnPlateau(o, mode="max", factor=0.3, patience=2, threshold=0.1,
                            threshold_mode="abs", cooldown=2, min_lr=0.001)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(t, mode="max", factor=0.3, patience=2,
                                                    threshold=0.1, threshold_mode="abs",
                                                    cooldown=2, min_lr=0.001)
    rng = np.random.default_rng(0)
    for m in np.cumsum(rng.standard_normal(40) * 0.1):
        s.step(float(m))
        ts.step(float(m))
        assert math.isclose(o.param_groups[0]["lr"], t.param_groups[0]["lr"], rel_tol=1e-12)
