"""The eager ``Optimizer.step`` runs one compiled program over all parameters (the multi-tensor
update): it must equal the per-parameter update (``_apply``, the path a traced step takes, and
the pure ``update``) to 1e-6, across the options that change the update's code path, several
parameter groups, frozen parameters and learning-rate changes."""
import numpy as np
import pytest

import funcgrad.nn as nn
import funcgrad.numpy as jnp
import funcgrad.optim as optim

SHAPES = [(3, 4), (4,), (2, 3, 2), ()]

CASES = [
    (optim.SGD, dict(lr=0.1)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.01)),
    (optim.SGD, dict(lr=0.1, momentum=0.5, nesterov=True, maximize=True)),
    (optim.Adam, dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1)),
    (optim.Adam, dict(lr=0.01, amsgrad=True, maximize=True)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.1)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.05, amsgrad=True)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.01)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.01, weight_decay=0.01)),
]


def _params(rng):
    return [nn.Parameter(jnp.asarray(rng.standard_normal(s).astype(np.float32)))
            for s in SHAPES]


def _grads(rng, steps):
    return [[jnp.asarray(rng.standard_normal(s).astype(np.float32)) for s in SHAPES]
            for _ in range(steps)]


def _per_parameter_step(opt, grads):
    """What ``step`` does parameter by parameter (the traced path): ``_apply``."""
    items = []
    boxes = opt._all_params()
    for gi, group in enumerate(opt.param_groups):
        for p in group["params"]:
            if p.requires_grad:
                items.append((gi, p, grads[boxes.index(p)]))
    opt._apply(items)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0].__name__}-{sorted(c[1])}")
def test_fused_step_equals_per_parameter_update(case, rng):
    cls, kw = case
    fused_boxes = _params(rng)
    ref_boxes = [nn.Parameter(b.data) for b in fused_boxes]
    fused, ref = cls(fused_boxes, **kw), cls(ref_boxes, **kw)
    steps = _grads(rng, 3)
    for gs in steps:
        fused.step(gs)
        _per_parameter_step(ref, gs)
    for a, b in zip(fused_boxes, ref_boxes):
        np.testing.assert_allclose(np.asarray(a.data), np.asarray(b.data), rtol=1e-6,
                                   atol=1e-6)
    for a, b in zip(fused_boxes, ref_boxes):
        for k, v in ref.state[b].items():
            np.testing.assert_allclose(np.asarray(fused.state[a][k]), np.asarray(v),
                                       rtol=1e-6, atol=1e-6)
    assert len(fused._compiled) == 1         # one program for all parameters, reused


def test_fused_step_groups_frozen_and_lr_change(rng):
    boxes = _params(rng)
    boxes[2].requires_grad = False
    ref_boxes = [nn.Parameter(b.data, requires_grad=b.requires_grad) for b in boxes]

    def make(bs):
        return optim.Adam([{"params": bs[:2], "lr": 0.05, "amsgrad": True},
                           {"params": bs[2:], "weight_decay": 0.1}], lr=0.01)
    fused, ref = make(boxes), make(ref_boxes)
    frozen = np.asarray(boxes[2].data)
    for i, gs in enumerate(_grads(rng, 3)):
        if i == 1:                       # a scheduler's change: a new runtime value
            for o in (fused, ref):
                o.param_groups[0]["lr"] = 0.02
        fused.step(gs)
        _per_parameter_step(ref, gs)
    for a, b in zip(boxes, ref_boxes):
        np.testing.assert_allclose(np.asarray(a.data), np.asarray(b.data), rtol=1e-6,
                                   atol=1e-6)
    np.testing.assert_array_equal(np.asarray(boxes[2].data), frozen)
    # the learning rate is an argument, not a constant: one program for all three steps
    (program,) = fused._compiled.values()
    assert program.trace_count <= 2      # the first step (empty state) and the later ones


def test_fused_step_matches_pure_update(rng):
    boxes = _params(rng)
    opt = optim.AdamW(boxes, lr=0.01, weight_decay=0.1, amsgrad=True)
    params = {str(i): b.data for i, b in enumerate(boxes)}
    state = opt.init(params)
    for gs in _grads(rng, 3):
        params, state = opt.update({str(i): g for i, g in enumerate(gs)}, state, params)
        opt.step(gs)
    for i, b in enumerate(boxes):
        np.testing.assert_allclose(np.asarray(b.data), np.asarray(params[str(i)]),
                                   rtol=1e-6, atol=1e-6)
