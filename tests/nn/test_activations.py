"""CELU, GLU, Tanhshrink, Threshold, Softshrink, Hardshrink and Softmax2d (module and ``F.``
function): NumPy formulas including the boundary points, derivatives against the formulas'
derivatives, vmap against a loop, and PyTorch's values and gradients when it is installed."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp

# exact boundary points of the piecewise activations are included (0.5, -0.5, 0.1)
X = np.array([[-3.0, -0.5, -0.2, 0.0, 0.1, 0.3, 0.5, 0.7, 2.5, -1.5]] * 2)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> (module, F call, NumPy value, NumPy derivative (elementwise cases only))
CASES = {
    "celu": (nn.CELU(alpha=0.7), lambda x: F.celu(x, 0.7),
             lambda x: np.where(x > 0, x, 0.7 * np.expm1(x / 0.7)),
             lambda x: np.where(x > 0, 1.0, np.exp(x / 0.7))),
    "tanhshrink": (nn.Tanhshrink(), F.tanhshrink, lambda x: x - np.tanh(x),
                   lambda x: np.tanh(x) ** 2),
    "threshold": (nn.Threshold(0.1, -2.0), lambda x: F.threshold(x, 0.1, -2.0),
                  lambda x: np.where(x > 0.1, x, -2.0), lambda x: (x > 0.1).astype(float)),
    "softshrink": (nn.Softshrink(0.5), lambda x: F.softshrink(x, 0.5),
                   lambda x: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0.0)),
                   lambda x: (np.abs(x) > 0.5).astype(float)),
    "hardshrink": (nn.Hardshrink(0.5), lambda x: F.hardshrink(x, 0.5),
                   lambda x: np.where(np.abs(x) > 0.5, x, 0.0),
                   lambda x: (np.abs(x) > 0.5).astype(float)),
    "glu": (nn.GLU(dim=1), lambda x: F.glu(x, 1),
            lambda x: x[:, :5] * _sigmoid(x[:, 5:]), None),
    "softmax2d": (nn.Softmax2d(), None,
                  lambda x: np.exp(x) / np.sum(np.exp(x), axis=-3, keepdims=True), None),
}


def _input(name):
    if name == "softmax2d":
        return np.random.default_rng(0).normal(size=(2, 3, 2, 4))
    return X


@pytest.mark.parametrize("name", list(CASES))
def test_values_and_derivatives(name, x64):
    module, fn, ref, dref = CASES[name]
    x = _input(name)
    want = ref(x)
    np.testing.assert_allclose(np.asarray(module(jnp.asarray(x))), want, rtol=1e-14, atol=1e-15)
    if fn is not None:
        np.testing.assert_allclose(np.asarray(fn(jnp.asarray(x))), want, rtol=1e-14,
                                   atol=1e-15)
    if dref is not None:
        g = funcgrad.grad(lambda v: jnp.sum(module(v)))(jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(g), dref(x), rtol=1e-14, atol=1e-15)


def test_glu_gradient_and_vmap_against_a_loop(x64):
    x = np.random.default_rng(1).normal(size=(3, 4, 6))
    g = np.asarray(funcgrad.grad(lambda v: jnp.sum(F.glu(v, -1) ** 2))(jnp.asarray(x)))
    a, b = x[..., :3], x[..., 3:]
    s = _sigmoid(b)
    np.testing.assert_allclose(g[..., :3], 2 * a * s * s, rtol=1e-12)
    np.testing.assert_allclose(g[..., 3:], 2 * a * s * a * s * (1 - s), rtol=1e-12)
    batched = funcgrad.vmap(nn.Softmax2d())(jnp.asarray(x[:, None]))
    for i in range(3):
        np.testing.assert_allclose(np.asarray(batched[i]),
                                   np.asarray(nn.Softmax2d()(jnp.asarray(x[i:i + 1]))),
                                   rtol=1e-14)


def test_nan_and_errors():
    nan = jnp.array([float("nan")])
    assert np.isnan(np.asarray(F.threshold(nan, 0.0, 1.0)))[0]
    assert np.isnan(np.asarray(F.hardshrink(nan)))[0]
    with pytest.raises(ValueError, match=r"F.glu: halving dimension must be even, but "
                                         r"dimension 1 of shape \(2, 5\) is size 5"):
        nn.GLU(1)(jnp.ones((2, 5)))
    with pytest.raises(ValueError, match=r"Softmax2d: expected a 3-D .* got shape \(2, 5\)"):
        nn.Softmax2d()(jnp.ones((2, 5)))
    with pytest.raises(ValueError, match="F.softshrink: lambd must be greater or equal to 0"):
        F.softshrink(jnp.ones(2), -1.0)
    assert repr(nn.Threshold(0.1, 20.0)) == "Threshold(threshold=0.1, value=20.0)"


@pytest.mark.parametrize("name", list(CASES))
def test_match_torch(name, x64):
    torch = pytest.importorskip("torch")
    module, _, _, _ = CASES[name]
    tmod = {"celu": lambda: torch.nn.CELU(0.7), "tanhshrink": torch.nn.Tanhshrink,
            "threshold": lambda: torch.nn.Threshold(0.1, -2.0),
            "softshrink": lambda: torch.nn.Softshrink(0.5),
            "hardshrink": lambda: torch.nn.Hardshrink(0.5), "glu": lambda: torch.nn.GLU(1),
            "softmax2d": torch.nn.Softmax2d}[name]()
    for dtype, rtol in (("float64", 1e-13), ("float32", 1e-6)):
        x = _input(name).astype(dtype)
        r = np.random.default_rng(2).normal(size=tmod(torch.tensor(x)).shape).astype(dtype)
        tx = torch.tensor(x, requires_grad=True)
        tout = tmod(tx)
        torch.sum(tout * torch.tensor(r)).backward()
        val = module(jnp.asarray(x))
        g = funcgrad.grad(lambda v: jnp.sum(module(v) * r))(jnp.asarray(x))
        np.testing.assert_allclose(np.asarray(val), tout.detach().numpy(), rtol=rtol,
                                   atol=1e-7)
        np.testing.assert_allclose(np.asarray(g), tx.grad.numpy(), rtol=rtol, atol=1e-7)
