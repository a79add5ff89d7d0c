"""Adamax, NAdam, RAdam and Adadelta: float64 against NumPy transcriptions of PyTorch's
formulas (both RAdam branches), jit against eager, and against torch.optim when installed."""
import numpy as np
import pytest

import funcgrad.nn as nn
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from tests.optim.helpers import assert_jitted_steps_match


def ref_adamax(p, grads, lr, b1, b2, eps, wd):
    m, u = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        g = g + wd * p
        m = b1 * m + (1 - b1) * g
        u = np.maximum(b2 * u, np.abs(g) + eps)
        p = p - lr / (1 - b1 ** t) * m / u
    return p


def ref_nadam(p, grads, lr, b1, b2, eps, wd, md, decoupled):
    m, v, prod = np.zeros_like(p), np.zeros_like(p), 1.0
    for t, g in enumerate(grads, 1):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        mu, mu1 = b1 * (1 - 0.5 * 0.96 ** (t * md)), b1 * (1 - 0.5 * 0.96 ** ((t + 1) * md))
        prod *= mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2 ** t)) + eps
        p = p - lr * (1 - mu) / (1 - prod) * g / denom - lr * mu1 / (1 - prod * mu1) * m / denom
    return p


def ref_radam(p, grads, lr, b1, b2, eps, wd):
    m, v = np.zeros_like(p), np.zeros_like(p)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(grads, 1):
        g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1 ** t)
        rho = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho > 5:
            r = np.sqrt((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho))
            p = p - lr * mhat * r * np.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
        else:
            p = p - lr * mhat
    return p


def ref_adadelta(p, grads, lr, rho, eps, wd):
    sq, acc = np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        g = g + wd * p
        sq = rho * sq + (1 - rho) * g * g
        d = np.sqrt(acc + eps) / np.sqrt(sq + eps) * g
        acc = rho * acc + (1 - rho) * d * d
        p = p - lr * d
    return p


CASES = [
    ("Adamax", dict(lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1),
     lambda p, gs: ref_adamax(p, gs, 0.01, 0.9, 0.99, 1e-8, 0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.05),
     lambda p, gs: ref_nadam(p, gs, 0.01, 0.9, 0.999, 1e-8, 0.05, 4e-3, False)),
    ("NAdam", dict(lr=0.01, weight_decay=0.05, decoupled_weight_decay=True),
     lambda p, gs: ref_nadam(p, gs, 0.01, 0.9, 0.999, 1e-8, 0.05, 4e-3, True)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1),        # 8 steps: rho_t passes 5 at step 6
     lambda p, gs: ref_radam(p, gs, 0.01, 0.9, 0.999, 1e-8, 0.1)),
    ("Adadelta", dict(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.01),
     lambda p, gs: ref_adadelta(p, gs, 1.0, 0.9, 1e-6, 0.01)),
]


@pytest.mark.parametrize("name, kw, ref", CASES, ids=[c[0] + str(i) for i, c in enumerate(CASES)])
def test_matches_numpy_reference_float64_and_jit(name, kw, ref, x64, rng):
    p0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(8)]
    box = nn.Parameter(jnp.asarray(p0))
    opt = getattr(optim, name)([box], **kw)
    for g in grads:
        opt.step([jnp.asarray(g)])
    np.testing.assert_allclose(np.asarray(box.data), ref(p0, grads), rtol=1e-10, atol=1e-12)
    # the same steps inside a jitted function (traced once), from a fresh optimizer
    assert_jitted_steps_match(name, kw, p0, grads, np.asarray(box.data), rtol=1e-12)


def test_argument_errors():
    p = [nn.Parameter(jnp.ones(2))]
    with pytest.raises(ValueError, match=r"RAdam: invalid lr=-1"):
        optim.RAdam(p, lr=-1)
    with pytest.raises(ValueError, match=r"Adadelta: rho must be in \[0, 1\]"):
        optim.Adadelta(p, rho=1.5)
    with pytest.raises(ValueError, match=r"NAdam: .*momentum_decay=-0.1"):
        optim.NAdam(p, momentum_decay=-0.1)


@pytest.mark.parametrize("name, kw", [(c[0], c[1]) for c in CASES])
def test_match_torch(name, kw, rng):
    torch = pytest.importorskip("torch")
    p0 = rng.standard_normal((3, 4)).astype(np.float32)
    tp, fp = torch.nn.Parameter(torch.tensor(p0)), nn.Parameter(jnp.asarray(p0))
    to, fo = getattr(torch.optim, name)([tp], **kw), getattr(optim, name)([fp], **kw)
    for _ in range(8):
        g = rng.standard_normal((3, 4)).astype(np.float32)
        tp.grad = torch.tensor(g)
        to.step()
        fo.step([jnp.asarray(g)])
        np.testing.assert_allclose(np.asarray(fp.data), tp.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
