"""The jax.nn-style functions (funcgrad.nn.relu, softmax, ...) and a few layers against NumPy."""
import math

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
import funcgrad.nn as nn
import funcgrad.nn.functional as F

X = np.array([[-3.0, -1.0, -0.1, 0.0, 0.2, 1.5, 4.0, 30.0]], np.float32)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _erf(x):
    return np.vectorize(math.erf)(x)


CASES = {
    "relu": (nn.relu, lambda x: np.maximum(x, 0)),
    "relu6": (nn.relu6, lambda x: np.clip(x, 0, 6)),
    "leaky_relu": (lambda x: nn.leaky_relu(x, 0.2), lambda x: np.where(x >= 0, x, 0.2 * x)),
    "elu": (nn.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    "celu": (lambda x: nn.celu(x, 2.0),
             lambda x: np.maximum(x, 0) + np.minimum(0, 2 * np.expm1(x / 2))),
    "selu": (nn.selu, lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 *
                                                               np.expm1(x))),
    "sigmoid": (nn.sigmoid, _sig),
    "log_sigmoid": (nn.log_sigmoid, lambda x: -np.logaddexp(0, -x)),
    "softplus": (nn.softplus, lambda x: np.logaddexp(x, 0)),
    "silu": (nn.silu, lambda x: x * _sig(x)),
    "hard_sigmoid": (nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    "hard_silu": (nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    "hard_tanh": (nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    "soft_sign": (nn.soft_sign, lambda x: x / (1 + np.abs(x))),
    "gelu_tanh": (nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) *
                                                            (x + 0.044715 * x ** 3)))),
    "gelu_exact": (lambda x: nn.gelu(x, approximate=False),
                   lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    "mish": (nn.mish, lambda x: x * np.tanh(np.logaddexp(x, 0))),
    "softmax": (nn.softmax, lambda x: np.exp(x - x.max(-1, keepdims=True)) /
                np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
    "log_softmax": (nn.log_softmax, lambda x: x - x.max(-1, keepdims=True) - np.log(
        np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))),
    "logsumexp": (lambda x: nn.logsumexp(x, axis=-1),
                  lambda x: np.log(np.exp(x - 30).sum(-1)) + 30),
    "standardize": (nn.standardize, lambda x: (x - x.mean(-1, keepdims=True)) /
                    np.sqrt(x.var(-1, keepdims=True) + 1e-5)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_function_matches_numpy(name):
    fn, ref = CASES[name]
    np.testing.assert_allclose(np.asarray(fn(jnp.asarray(X))), ref(X.astype(np.float64)),
                               rtol=2e-5, atol=2e-6)


def test_softmax_masks_and_one_hot():
    x = jnp.asarray([[1.0, 2.0, 3.0]])
    np.testing.assert_allclose(np.asarray(nn.softmax(x, where=jnp.asarray([[True, False,
                                                                            True]]))),
                               [[np.exp(-2) / (1 + np.exp(-2)), 0, 1 / (1 + np.exp(-2))]],
                               rtol=1e-6)
    assert np.isfinite(np.asarray(nn.log_softmax(jnp.asarray([-np.inf, 0.0])))[1])
    np.testing.assert_array_equal(np.asarray(nn.one_hot(jnp.asarray([0, 2, 5]), 3)),
                                  [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(np.asarray(nn.one_hot(jnp.asarray([1]), 2, axis=0)),
                                  [[0], [1]])
    val, sign = nn.logsumexp(jnp.asarray([1.0, 2.0]), b=jnp.asarray([1.0, -2.0]),
                             return_sign=True)
    np.testing.assert_allclose(float(val), np.log(2 * np.e ** 2 - np.e), rtol=1e-6)
    assert float(sign) == -1.0


def test_relu_gradient_at_zero_and_softplus_large():
    g = funcgrad.grad(lambda x: jnp.sum(nn.relu(x)))(jnp.asarray([-1.0, 0.0, 2.0]))
    np.testing.assert_array_equal(np.asarray(g), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(np.asarray(nn.softplus(jnp.asarray([100.0]))), [100.0])


@pytest.mark.parametrize("fn, lo, hi", [(nn.relu, 0.0, None), (nn.relu6, 0.0, 6.0)])
def test_relu_family_derivative_reads_output(fn, lo, hi):
    """Derivative 0 at the kinks (PyTorch's convention), the same through jvp, vjp, jit and
    vmap, and in float64 against central differences away from the kinks."""
    pts = [-2.0, lo, 0.5, 3.0, 7.5] + ([hi] if hi is not None else [])
    x = jnp.asarray(pts)
    want = np.array([0.0 if (p <= lo or (hi is not None and p >= hi)) else 1.0 for p in pts],
                    np.float32)
    g = funcgrad.grad(lambda v: jnp.sum(fn(v)))(x)
    np.testing.assert_array_equal(np.asarray(g), want)
    _, t = funcgrad.jvp(fn, (x,), (jnp.ones_like(x),))
    np.testing.assert_array_equal(np.asarray(t), want)
    np.testing.assert_array_equal(np.asarray(funcgrad.jit(funcgrad.vmap(funcgrad.grad(fn)))(x)),
                                  want)
    assert float(funcgrad.grad(funcgrad.grad(lambda v: fn(v) * v))(jnp.asarray(0.5))) == 2.0
    ints = fn(jnp.asarray([-2, 3, 9]))
    assert ints.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(ints), np.clip([-2, 3, 9], 0, hi))


@pytest.mark.parametrize("fn", [nn.relu, nn.relu6])
def test_relu_family_gradient_matches_central_differences(fn, x64):
    z = np.array([-1.3, 0.4, 2.2, 5.1, 8.0])
    g = funcgrad.grad(lambda v: jnp.sum(fn(v) ** 2))(jnp.asarray(z))
    assert g.dtype == jnp.float64
    eps = 1e-6
    fd = [(float(jnp.sum(fn(jnp.asarray(z + eps * e)) ** 2))
           - float(jnp.sum(fn(jnp.asarray(z - eps * e)) ** 2))) / (2 * eps) for e in np.eye(5)]
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-7, atol=1e-9)


def test_relu_backward_masks_with_the_output():
    """The backward pass compares relu's output, not its input, so XLA need not recompute a
    fused producer (a convolution) to find the mask."""
    x = jnp.asarray(np.linspace(-1, 1, 6, dtype=np.float32))
    closed = funcgrad.make_jaxpr(funcgrad.grad(lambda v: jnp.sum(nn.relu(v * 2.0) * v)))(x)
    eqns = closed.jaxpr.eqns
    relu_out = next(e.outvars[0] for e in eqns if e.prim.name == "custom_jvp_call")
    masks = [e for e in eqns if e.prim.name == "gt"]
    assert masks and all(e.invars[0] is relu_out for e in masks)


def test_lstm_matches_numpy_loop(rng):
    funcgrad.manual_seed(0)
    lstm = nn.LSTM(3, 4, batch_first=True)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)
    out, (h, c) = lstm(jnp.asarray(x))
    W_ih, W_hh = np.asarray(lstm.weight_ih_l0), np.asarray(lstm.weight_hh_l0)
    b = np.asarray(lstm.bias_ih_l0) + np.asarray(lstm.bias_hh_l0)
    hh = np.zeros((2, 4))
    cc = np.zeros((2, 4))
    outs = []
    for t in range(5):
        z = x[:, t] @ W_ih.T + hh @ W_hh.T + b
        i, f, g, o = np.split(z, 4, axis=-1)         # PyTorch's gate order
        cc = _sig(f) * cc + _sig(i) * np.tanh(g)
        hh = _sig(o) * np.tanh(cc)
        outs.append(hh)
    np.testing.assert_allclose(np.asarray(out), np.stack(outs, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(h)[0], hh, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(c)[0], cc, rtol=1e-5, atol=1e-6)


def test_norms_match_numpy(rng):
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    xd = x.astype(np.float64)
    gn = np.asarray(F.group_norm(jnp.asarray(x), 2))
    g = xd.reshape(2, 2, -1)
    want = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    np.testing.assert_allclose(gn, want.reshape(x.shape), rtol=1e-4, atol=1e-5)
    rms = np.asarray(F.rms_norm(jnp.asarray(x), (3,), eps=1e-6))
    np.testing.assert_allclose(rms, xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-6),
                               rtol=1e-5)
    emb = nn.Embedding(5, 2, padding_idx=1)
    np.testing.assert_array_equal(np.asarray(emb.weight)[1], [0, 0])
    g = funcgrad.grad(lambda w: jnp.sum(F.embedding(jnp.asarray([1, 2, 2]), w, 1)))(emb.weight)
    np.testing.assert_array_equal(np.asarray(g)[:3], [[0, 0], [0, 0], [2, 2]])


EAGER_CALLS = [
    ("F.cross_entropy", lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1)),
    ("F.nll_loss", lambda x, y: F.nll_loss(F.log_softmax(x, dim=1), y, reduction="sum")),
    ("F.mse_loss", lambda x, y: F.mse_loss(x, x * 0.5, reduction="none")),
    ("nn.softmax", lambda x, y: nn.softmax(x, axis=0)),
    ("nn.logsumexp", lambda x, y: nn.logsumexp(x, axis=1, keepdims=True)),
    ("jnp.var", lambda x, y: jnp.var(x, axis=0, ddof=1)),
    ("mean method", lambda x, y: x.mean(axis=(0, 1))),
]


@pytest.mark.parametrize("name, call", EAGER_CALLS, ids=[n for n, _ in EAGER_CALLS])
def test_eager_losses_and_reductions_run_as_one_executable(name, call, rng):
    """Eager calls of multi-primitive losses, softmaxes and reductions compile once per shape
    and option set (no per-primitive eager executables) and equal the jitted call."""
    from funcgrad.lowering import eager
    x = jnp.asarray(rng.standard_normal((6, 5)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, 5, 6).astype(np.int32))
    before = set(eager._op_cache)
    got = call(x, y)
    assert set(eager._op_cache) == before, name
    want = funcgrad.jit(call)(x, y)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-7)
    assert got.dtype == want.dtype and got.shape == want.shape


def test_class_index_target_errors_name_the_shapes():
    x = jnp.ones((4, 3, 5))
    with pytest.raises(ValueError, match=r"F.cross_entropy: .*\(4, 6\).*\(4, 3, 5\).*\(4, 5\)"):
        F.cross_entropy(x, jnp.zeros((4, 6), jnp.int32))
    with pytest.raises(ValueError, match=r"F.nll_loss: .*\(4,\).*expected target shape \(4, 5\)"):
        F.nll_loss(x, jnp.zeros((4,), jnp.int32))
    with pytest.raises(TypeError, match="F.cross_entropy: class-index targets must be integers"):
        F.cross_entropy(x, jnp.zeros((4, 5), jnp.bool_))
