"""Rprop and ASGD (float64 against NumPy transcriptions of PyTorch's updates, jit against
eager, state dicts) and the MultiplicativeLR, CyclicLR and ChainedScheduler schedulers (hand
values), with PyTorch's optimizers and schedulers step by step when it is installed."""
import math

import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from tests.optim.helpers import assert_jitted_steps_match
from funcgrad.optim import lr_scheduler as L


def ref_rprop(p, grads, lr, etas, sizes, maximize=False):
    prev, size = np.zeros_like(p), np.full_like(p, lr)
    for g in grads:
        g = -g if maximize else g.copy()
        s = np.sign(g * prev)
        factor = np.where(s > 0, etas[1], np.where(s < 0, etas[0], 1.0))
        size = np.clip(size * factor, *sizes)
        g[factor == etas[0]] = 0
        p = p - np.sign(g) * size
        prev = g
    return p, {"prev": prev, "step_size": size}


def ref_asgd(p, grads, lr, lambd, alpha, t0, wd):
    eta, mu, ax = lr, 1.0, np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = g + wd * p
        p = p * (1 - lambd * eta) - eta * g
        ax = p.copy() if mu == 1 else ax + (p - ax) * mu
        eta = lr / (1 + lambd * lr * t) ** alpha
        mu = 1 / max(1, t - t0)
    return p, {"eta": eta, "mu": mu, "ax": ax}


CASES = [
    ("Rprop", dict(lr=0.05, etas=(0.4, 1.3), step_sizes=(1e-3, 0.08)),
     lambda p, gs: ref_rprop(p, gs, 0.05, (0.4, 1.3), (1e-3, 0.08))),
    ("Rprop", dict(maximize=True), lambda p, gs: ref_rprop(p, gs, 0.01, (0.5, 1.2), (1e-6, 50),
                                                          maximize=True)),
    ("ASGD", dict(lr=0.05, lambd=1e-2, alpha=0.6, t0=3, weight_decay=0.1),
     lambda p, gs: ref_asgd(p, gs, 0.05, 1e-2, 0.6, 3, 0.1)),
]


def _grads(rng, n=9):
    """Gradients whose signs repeat and flip, so every Rprop branch is taken."""
    gs = [rng.standard_normal((3, 4)) for _ in range(n)]
    for i in range(2, n, 3):
        gs[i] = -gs[i - 1] * 0.5
    return gs


@pytest.mark.parametrize("name, kw, ref", CASES, ids=["rprop", "rprop_max", "asgd"])
def test_matches_numpy_reference_float64_and_jit(name, kw, ref, x64, rng):
    p0 = rng.standard_normal((3, 4))
    grads = _grads(rng)
    box = nn.Parameter(jnp.asarray(p0))
    opt = getattr(optim, name)([box], **kw)
    for g in grads:
        opt.step([jnp.asarray(g)])
    want_p, want_state = ref(p0, grads)
    np.testing.assert_allclose(np.asarray(box.data), want_p, rtol=1e-12, atol=1e-14)
    for k, v in want_state.items():
        np.testing.assert_allclose(np.asarray(opt.state[box][k]), v, rtol=1e-12, atol=1e-14,
                                   err_msg=k)
    assert_jitted_steps_match(name, kw, p0, grads, np.asarray(box.data), rtol=1e-13)


@pytest.mark.parametrize("name, kw", [(c[0], c[1]) for c in CASES], ids=["rprop", "rprop_max",
                                                                         "asgd"])
def test_state_dict_round_trip_and_pure_form(name, kw, x64, rng):
    grads = _grads(rng)
    p0 = rng.standard_normal((3, 4))
    box = nn.Parameter(jnp.asarray(p0))
    opt = getattr(optim, name)([box], **kw)
    for g in grads[:4]:
        opt.step([jnp.asarray(g)])
    box2 = nn.Parameter(box.data)
    opt2 = getattr(optim, name)([box2], **kw)
    opt2.load_state_dict(opt.state_dict())
    for g in grads[4:]:
        opt.step([jnp.asarray(g)])
        opt2.step([jnp.asarray(g)])
    np.testing.assert_array_equal(np.asarray(box2.data), np.asarray(box.data))
    # the pure init/update form gives the same parameters
    params = {"w": jnp.asarray(p0)}
    state = opt.init(params)
    for g in grads:
        params, state = opt.update({"w": jnp.asarray(g)}, state, params)
    np.testing.assert_allclose(np.asarray(params["w"]), np.asarray(box.data), rtol=1e-13)


def test_argument_errors():
    p = [nn.Parameter(jnp.ones(2))]
    with pytest.raises(ValueError, match=r"Rprop: invalid lr=0.01 or etas=\(1.2, 0.5\)"):
        optim.Rprop(p, etas=(1.2, 0.5))
    with pytest.raises(ValueError, match=r"ASGD: invalid lr=-1"):
        optim.ASGD(p, lr=-1)


@pytest.mark.parametrize("name, kw", [(c[0], c[1]) for c in CASES], ids=["rprop", "rprop_max",
                                                                         "asgd"])
def test_match_torch_with_param_groups(name, kw, rng):
    torch = pytest.importorskip("torch")
    p0 = [rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(5).astype(np.float32)]
    tps = [torch.nn.Parameter(torch.tensor(p)) for p in p0]
    fps = [nn.Parameter(jnp.asarray(p)) for p in p0]
    lr = kw.get("lr", 0.01)
    to = getattr(torch.optim, name)([{"params": [tps[0]]}, {"params": [tps[1]], "lr": 2 * lr}],
                                    **kw)
    fo = getattr(optim, name)([{"params": [fps[0]]}, {"params": [fps[1]], "lr": 2 * lr}], **kw)
    prev = None
    for i in range(8):
        gs = [rng.standard_normal(p.shape).astype(np.float32) for p in p0]
        if i % 3 == 2:
            gs = [-0.5 * g for g in prev]
        prev = gs
        for tp, g in zip(tps, gs):
            tp.grad = torch.tensor(g)
        to.step()
        fo.step([jnp.asarray(g) for g in gs])
        for fp, tp in zip(fps, tps):
            np.testing.assert_allclose(np.asarray(fp.data), tp.detach().numpy(), rtol=1e-5,
                                       atol=1e-6)
    tsd, fsd = to.state_dict(), fo.state_dict()
    for i in (0, 1):
        assert sorted(fsd["state"][i]) == sorted(tsd["state"][i])
        for k, v in tsd["state"][i].items():
            np.testing.assert_allclose(np.asarray(fsd["state"][i][k]), v.numpy(), rtol=1e-5,
                                       atol=1e-6, err_msg=k)


# --- schedulers --------------------------------------------------------------------------------
def _opt(lr=1.0, kind="sgd"):
    p = nn.Parameter(jnp.ones(1))
    if kind == "adam":
        return optim.Adam([p], lr=lr)
    return optim.SGD([p], lr=lr, momentum=0.9)


def _run(sched, opt, steps, key="lr"):
    out = []
    for _ in range(steps):
        g = opt.param_groups[0]
        out.append(g["betas"][0] if key == "beta1" else g[key])
        sched.step()
    return np.asarray(out)


def test_multiplicative_lr_hand_values():
    o = _opt()
    s = L.MultiplicativeLR(o, lambda e: 0.5 if e % 2 else 0.9)
    np.testing.assert_allclose(_run(s, o, 5), [1.0, 0.5, 0.45, 0.225, 0.2025])
    o.param_groups[0]["lr"] = 10.0          # it scales the current lr, as PyTorch's
    s.step()
    assert o.param_groups[0]["lr"] == pytest.approx(9.0)       # epoch 6: x 0.9


def test_cyclic_lr_modes_and_momentum_hand_values():
    o = _opt()
    s = L.CyclicLR(o, base_lr=0.0, max_lr=1.0, step_size_up=2, step_size_down=2)
    np.testing.assert_allclose(_run(s, o, 9), [0, 0.5, 1, 0.5, 0, 0.5, 1, 0.5, 0])
    o = _opt()
    s = L.CyclicLR(o, base_lr=0.0, max_lr=1.0, step_size_up=2, step_size_down=2)
    # momentum cycles inversely between max_momentum (0.9) and base_momentum (0.8)
    np.testing.assert_allclose(_run(s, o, 5, "momentum"), [0.9, 0.85, 0.8, 0.85, 0.9])
    o = _opt()
    s = L.CyclicLR(o, 0.0, 1.0, step_size_up=1, mode="triangular2")
    np.testing.assert_allclose(_run(s, o, 7), [0, 1, 0, 0.5, 0, 0.25, 0])
    o = _opt(kind="adam")
    s = L.CyclicLR(o, 0.0, 1.0, step_size_up=1, mode="exp_range", gamma=0.5)
    np.testing.assert_allclose(_run(s, o, 4), [0, 0.5, 0, 0.125])
    o = _opt(kind="adam")
    s = L.CyclicLR(o, 0.0, 1.0, step_size_up=1, mode="exp_range", gamma=0.5)
    np.testing.assert_allclose(_run(s, o, 4, "beta1"), [0.9, 0.85, 0.9, 0.8875])
    with pytest.raises(ValueError, match="cycle_momentum needs an optimizer with a momentum"):
        L.CyclicLR(optim.Adagrad([nn.Parameter(jnp.ones(1))]), 0.1, 1.0)
    with pytest.raises(ValueError, match="expected 1 values for base_lr"):
        L.CyclicLR(o, [0.1, 0.2], 1.0)


def test_chained_scheduler_composes_and_round_trips():
    o = _opt()
    s = L.ChainedScheduler([L.ConstantLR(o, factor=0.1, total_iters=2),
                            L.ExponentialLR(o, gamma=0.9)])
    np.testing.assert_allclose(_run(s, o, 5), [0.1, 0.09, 0.81, 0.729, 0.6561])
    state = s.state_dict()
    o2 = _opt()
    s2 = L.ChainedScheduler([L.ConstantLR(o2, factor=0.1, total_iters=2),
                             L.ExponentialLR(o2, gamma=0.9)])
    s2.load_state_dict(state)
    o2.param_groups[0]["lr"] = o.param_groups[0]["lr"]
    s.step()
    s2.step()
    assert s.get_last_lr() == s2.get_last_lr()
    with pytest.raises(ValueError, match="does not support ReduceLROnPlateau"):
        L.ChainedScheduler([L.ReduceLROnPlateau(o)])
    with pytest.raises(ValueError, match="same optimizer"):
        L.ChainedScheduler([L.StepLR(o, 2), L.StepLR(_opt(), 2)])


def test_cyclic_lr_in_a_jitted_step_does_not_retrace(x64):
    w = nn.Parameter(jnp.asarray(np.ones(3)))
    opt = optim.SGD([w], lr=0.1, momentum=0.9)
    s = L.CyclicLR(opt, 0.01, 0.1, step_size_up=2)
    traces = []

    @funcgrad.jit
    def step(o, g):
        traces.append(1)
        o.step([g])
    for _ in range(6):
        step(opt, jnp.asarray(np.ones(3)))
        s.step()
    assert len(traces) == 1


@pytest.mark.filterwarnings("ignore:Detected call of")
@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_match_torch_step_by_step(kind):
    torch = pytest.importorskip("torch")
    T = torch.optim.lr_scheduler

    def pair():
        ps = [nn.Parameter(jnp.ones(1)) for _ in range(2)]
        tps = [torch.nn.Parameter(torch.ones(1)) for _ in range(2)]
        if kind == "sgd":
            return (optim.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2}], lr=0.1,
                              momentum=0.9),
                    torch.optim.SGD([{"params": [tps[0]]}, {"params": [tps[1]], "lr": 0.2}],
                                    lr=0.1, momentum=0.9))
        return (optim.Adam([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2}], lr=0.1),
                torch.optim.Adam([{"params": [tps[0]]}, {"params": [tps[1]], "lr": 0.2}],
                                 lr=0.1))
    cases = [
        lambda M, o: M.MultiplicativeLR(o, [lambda e: 0.9 if e % 2 else 0.97,
                                            lambda e: 1.01]),
        lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=4, step_size_down=3),
        lambda M, o: M.CyclicLR(o, [0.01, 0.02], 0.1, step_size_up=5, mode="triangular2",
                                base_momentum=0.7, max_momentum=0.95),
        lambda M, o: M.CyclicLR(o, 0.01, [0.1, 0.3], step_size_up=3, mode="exp_range",
                                gamma=0.9),
        lambda M, o: M.CyclicLR(o, 0.01, 0.1, step_size_up=3, scale_fn=lambda x: 1 / (x + 1),
                                scale_mode="iterations", cycle_momentum=False),
        lambda M, o: M.ChainedScheduler([M.ConstantLR(o, factor=0.1, total_iters=2),
                                         M.ExponentialLR(o, gamma=0.9)]),
        lambda M, o: M.ChainedScheduler([M.LinearLR(o, 0.2, total_iters=5),
                                         M.CosineAnnealingLR(o, T_max=7, eta_min=0.001),
                                         M.StepLR(o, 4, 0.5), M.MultiStepLR(o, [3, 9, 9], 0.7),
                                         M.PolynomialLR(o, 12, 1.5),
                                         M.MultiplicativeLR(o, lambda e: 0.99)]),
    ]
    for i, make in enumerate(cases):
        o, t = pair()
        s, ts = make(L, o), make(T, t)
        for step in range(35):
            for g, tg in zip(o.param_groups, t.param_groups):
                assert math.isclose(g["lr"], tg["lr"], rel_tol=1e-12, abs_tol=1e-15), (i, step)
                if kind == "sgd":
                    assert math.isclose(g["momentum"], tg["momentum"], rel_tol=1e-12), (i, step)
                else:
                    assert math.isclose(g["betas"][0], tg["betas"][0], rel_tol=1e-12), (i, step)
            assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12)
            s.step()
            ts.step()
