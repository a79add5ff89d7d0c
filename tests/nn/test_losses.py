"""MarginRankingLoss, HingeEmbeddingLoss, SoftMarginLoss, TripletMarginLoss,
CosineEmbeddingLoss, PoissonNLLLoss, GaussianNLLLoss, MultiLabelSoftMarginLoss and
MultiLabelMarginLoss (module and ``F.`` function): NumPy transcriptions of PyTorch's formulas
for every reduction, gradients against finite differences in float64, and PyTorch's values and
gradients when it is installed."""
import math

import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp

N, D = 4, 5


def _inputs(seed=0):
    """Every input any case needs, float64 NumPy arrays (targets as PyTorch expects them)."""
    r = np.random.default_rng(seed)
    mlm = np.array([[3, 0, -1, 1, 2], [1, 1, 4, -1, 0], [0, 1, 2, 3, 4], [-1, 2, 0, 0, 0]])
    return {
        "a": r.normal(size=(N, D)), "b": r.normal(size=(N, D)), "c": r.normal(size=(N, D)),
        "s1": r.normal(size=N), "s2": r.normal(size=N),
        "pm": np.array([1.0, -1.0, -1.0, 1.0]),                 # +-1 targets of length N
        "pmD": np.where(r.random((N, D)) < 0.5, -1.0, 1.0),     # +-1 targets of shape (N, D)
        "hinge_t": np.array([[1.0, -1.0, 0.0, 1.0, -1.0]] * N),  # 0 takes both terms
        "counts": r.poisson(2.0, size=(N, D)).astype(np.float64),
        "rate": r.uniform(0.2, 3.0, size=(N, D)),
        "var": r.uniform(0.1, 2.0, size=(N, D)),
        "var1": r.uniform(0.1, 2.0, size=(N, 1)),
        "var_small": np.concatenate([np.full((N, 2), 1e-9), r.uniform(0.1, 1, (N, D - 2))], 1),
        "multi_hot": (r.random((N, D)) < 0.4).astype(np.float64),
        "w": r.uniform(0.5, 2.0, size=D),
        "mlm": mlm,
    }


def _log_sigmoid(x):
    return -np.logaddexp(0, -x)


def _pdist(x, y, p, eps):
    return np.sum(np.abs(x - y + eps) ** p, axis=-1) ** (1 / p)


def _ref_multilabel_margin(x, y):
    out = np.zeros(x.shape[0])
    for n in range(x.shape[0]):
        targets = []
        for j in y[n]:
            if j < 0:
                break
            targets.append(j)
        for j in targets:
            for i in range(x.shape[1]):
                if i not in targets:
                    out[n] += max(0.0, 1 - (x[n, j] - x[n, i]))
    return out / x.shape[1]


def _stirling(t):
    st = t * np.log(np.where(t > 1, t, 1)) - t + 0.5 * np.log(2 * np.pi * np.where(t > 1, t, 1))
    return np.where(t > 1, st, 0.0)


# name -> (F function, module class + constructor kwargs, argument keys (the first
# `ndiff` differentiable), F kwargs, NumPy reference of the unreduced loss, ndiff)
CASES = {
    "margin_ranking": (F.margin_ranking_loss, (nn.MarginRankingLoss, {"margin": 0.3}),
                       ("s1", "s2", "pm"), {"margin": 0.3},
                       lambda a, b, y: np.maximum(-y * (a - b) + 0.3, 0), 2),
    "hinge_embedding": (F.hinge_embedding_loss, (nn.HingeEmbeddingLoss, {"margin": 0.7}),
                        ("a", "hinge_t"), {"margin": 0.7},
                        lambda x, y: np.where(y != 1, np.maximum(0.7 - x, 0), 0)
                        + np.where(y != -1, x, 0), 1),
    "soft_margin": (F.soft_margin_loss, (nn.SoftMarginLoss, {}), ("a", "pmD"), {},
                    lambda x, y: np.log1p(np.exp(-y * x)), 1),
    "triplet": (F.triplet_margin_loss, (nn.TripletMarginLoss, {"margin": 0.8}),
                ("a", "b", "c"), {"margin": 0.8},
                lambda a, p, n: np.maximum(0.8 + _pdist(a, p, 2, 1e-6) - _pdist(a, n, 2, 1e-6),
                                           0), 3),
    "triplet_p1_swap": (F.triplet_margin_loss,
                        (nn.TripletMarginLoss, {"margin": 2.0, "p": 1, "swap": True}),
                        ("a", "b", "c"), {"margin": 2.0, "p": 1, "swap": True},
                        lambda a, p, n: np.maximum(
                            2.0 + _pdist(a, p, 1, 1e-6)
                            - np.minimum(_pdist(a, n, 1, 1e-6), _pdist(p, n, 1, 1e-6)), 0), 3),
    "cosine_embedding": (F.cosine_embedding_loss, (nn.CosineEmbeddingLoss, {"margin": -0.2}),
                         ("a", "b", "pm"), {"margin": -0.2},
                         lambda a, b, y: (lambda cos: np.where(y == 1, 1 - cos,
                                                               np.maximum(cos + 0.2, 0)))(
                             np.sum(a * b, 1) / np.sqrt((np.sum(a * a, 1) + 1e-12)
                                                        * (np.sum(b * b, 1) + 1e-12))), 2),
    "poisson_log": (F.poisson_nll_loss, (nn.PoissonNLLLoss, {"full": True}),
                    ("a", "counts"), {"full": True},
                    lambda x, t: np.exp(x) - t * x + _stirling(t), 1),
    "poisson_rate": (F.poisson_nll_loss, (nn.PoissonNLLLoss, {"log_input": False, "eps": 1e-3}),
                     ("rate", "counts"), {"log_input": False, "eps": 1e-3},
                     lambda x, t: x - t * np.log(x + 1e-3), 1),
    "gaussian": (F.gaussian_nll_loss, (nn.GaussianNLLLoss, {"full": True}),
                 ("a", "var", "b"), {"full": True},
                 lambda x, v, t: 0.5 * (np.log(v) + (x - t) ** 2 / v) + 0.5 * np.log(2 * np.pi),
                 2),
    "gaussian_shared_clamped": (F.gaussian_nll_loss, (nn.GaussianNLLLoss, {"eps": 1e-4}),
                                ("a", "var_small", "b"), {"eps": 1e-4},
                                lambda x, v, t: 0.5 * (np.log(np.maximum(v, 1e-4))
                                                       + (x - t) ** 2 / np.maximum(v, 1e-4)), 2),
    "gaussian_var_column": (F.gaussian_nll_loss, (nn.GaussianNLLLoss, {}), ("a", "var1", "b"),
                            {}, lambda x, v, t: 0.5 * (np.log(v) + (x - t) ** 2 / v), 2),
    "multilabel_soft_margin": (F.multilabel_soft_margin_loss,
                               (nn.MultiLabelSoftMarginLoss, {}), ("a", "multi_hot"), {},
                               lambda x, y: -np.mean(y * _log_sigmoid(x)
                                                     + (1 - y) * _log_sigmoid(-x), 1), 1),
    "multilabel_margin": (F.multilabel_margin_loss, (nn.MultiLabelMarginLoss, {}),
                          ("a", "mlm"), {}, _ref_multilabel_margin, 1),
}


def _order(name, args):
    # CASES keep the differentiable arguments first; gaussian's call order is (input, target,
    # var) with var differentiable, so reorder for the call.
    if name.startswith("gaussian"):
        return [args[0], args[2], args[1]]
    return args


def _as_fg(v):
    return jnp.asarray(v) if v.dtype.kind == "f" else jnp.asarray(v.astype(np.int32))


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_reference_every_reduction_and_module(name, x64):
    fn, (cls, ckw), keys, kw, ref, _ = CASES[name]
    data = _inputs()
    args = [data[k] for k in keys]
    want = ref(*args)
    fargs = [_as_fg(a) for a in _order(name, args)]
    for reduction, red in (("none", lambda v: v), ("mean", np.mean), ("sum", np.sum)):
        got = fn(*fargs, **kw, reduction=reduction)
        np.testing.assert_allclose(np.asarray(got), red(want), rtol=1e-12, atol=1e-12,
                                   err_msg=f"{name} reduction={reduction}")
    module = cls(**ckw, reduction="sum")
    np.testing.assert_allclose(np.asarray(module(*fargs)), np.sum(want), rtol=1e-12)


@pytest.mark.parametrize("name", ["margin_ranking", "triplet_p1_swap", "cosine_embedding",
                                  "poisson_log", "gaussian", "multilabel_soft_margin",
                                  "multilabel_margin", "hinge_embedding", "soft_margin"])
def test_gradients_match_finite_differences(name, x64):
    fn, _, keys, kw, _, ndiff = CASES[name]
    data = _inputs(1)
    args = [data[k] for k in keys]
    weights = np.random.default_rng(2).normal(size=np.shape(fn(
        *[_as_fg(a) for a in _order(name, args)], **kw, reduction="none")))

    def loss(*diff):
        full = [jnp.asarray(d) for d in diff] + [_as_fg(a) for a in args[ndiff:]]
        return jnp.sum(fn(*_order(name, full), **kw, reduction="none") * weights)
    grads = funcgrad.grad(loss, argnums=tuple(range(ndiff)))(*args[:ndiff])
    eps = 1e-6
    for i in range(ndiff):
        for idx in list(np.ndindex(args[i].shape))[::3]:
            up = [a.copy() for a in args[:ndiff]]
            dn = [a.copy() for a in args[:ndiff]]
            up[i][idx] += eps
            dn[i][idx] -= eps
            fd = (float(loss(*up)) - float(loss(*dn))) / (2 * eps)
            assert abs(float(np.asarray(grads[i])[idx]) - fd) < 1e-6 * max(1, abs(fd)), \
                (name, i, idx)


def test_hand_values_and_unbatched_forms():
    # PyTorch's documented example of MultiLabelMarginLoss
    x = jnp.array([[0.1, 0.2, 0.4, 0.8]])
    y = jnp.array([[3, 0, -1, 1]])
    np.testing.assert_allclose(float(nn.MultiLabelMarginLoss()(x, y)), 0.85, rtol=1e-6)
    np.testing.assert_allclose(float(F.multilabel_margin_loss(x[0], y[0], reduction="none")),
                               0.85, rtol=1e-6)
    # (D,) inputs with a scalar target
    a, b = jnp.array([1.0, 0.0]), jnp.array([0.0, 2.0])
    assert float(F.cosine_embedding_loss(a, b, jnp.array(1))) == pytest.approx(1.0)
    assert float(F.cosine_embedding_loss(a, a, jnp.array(-1), margin=0.5)) == pytest.approx(0.5)
    # GaussianNLLLoss with a float variance and a variance without the last axis
    m, t = jnp.array([[0.0, 1.0]]), jnp.array([[1.0, 1.0]])
    assert float(F.gaussian_nll_loss(m, t, 1.0, reduction="sum")) == pytest.approx(0.5)
    np.testing.assert_allclose(np.asarray(F.gaussian_nll_loss(m, t, jnp.array([2.0]),
                                                              reduction="none")),
                               [[0.5 * (math.log(2) + 0.5), 0.5 * math.log(2)]], rtol=1e-6)


def test_legacy_size_average_and_reduce():
    a, b, y = jnp.array([1.0, 2.0]), jnp.array([2.0, 0.0]), jnp.array([1.0, 1.0])
    with pytest.warns(UserWarning, match="size_average and reduce are deprecated"):
        assert float(F.margin_ranking_loss(a, b, y, 0.5, size_average=False)) == 1.5
    with pytest.warns(UserWarning):
        loss = nn.SoftMarginLoss(reduce=False)
    assert loss.reduction == "none"
    with pytest.warns(UserWarning):
        assert nn.HingeEmbeddingLoss(size_average=True, reduce=True).reduction == "mean"


def test_errors_name_the_function_and_shapes():
    x = jnp.ones((2, 3))
    with pytest.raises(ValueError, match=r"F.triplet_margin_loss: .* anchor 2D, positive 2D, "
                                         r"and negative 1D"):
        F.triplet_margin_loss(x, x, jnp.ones(3))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        nn.TripletMarginLoss(margin=0.0)(x, x, x)
    with pytest.raises(ValueError, match=r"F.cosine_embedding_loss: .*input1 \(2, 3\).*target "
                                         r"\(2, 1\)"):
        F.cosine_embedding_loss(x, x, jnp.ones((2, 1)))
    with pytest.raises(ValueError, match=r"var is of incorrect size: var \(3, 3\)"):
        F.gaussian_nll_loss(x, x, jnp.ones((3, 3)))
    with pytest.raises(ValueError, match="var has negative entry"):
        F.gaussian_nll_loss(x, x, -jnp.ones((2, 3)))
    with pytest.raises(ValueError, match=r"F.margin_ranking_loss: .*input1 \(2, 3\)"):
        F.margin_ranking_loss(x, x, jnp.ones(2))
    with pytest.raises(TypeError, match="integer class indices"):
        F.multilabel_margin_loss(x, x)
    with pytest.raises(ValueError, match="reduction must be"):
        F.soft_margin_loss(x, x, reduction="avg")


def test_jit_matches_eager():
    d = _inputs(3)
    a, b, c = (jnp.asarray(d[k].astype(np.float32)) for k in "abc")
    f = funcgrad.jit(lambda a, b, c: (F.triplet_margin_loss(a, b, c, swap=True),
                                      F.gaussian_nll_loss(a, b, jnp.abs(c) + 0.1),
                                      F.multilabel_soft_margin_loss(a, b > 0)))
    for got, want in zip(f(a, b, c), (F.triplet_margin_loss(a, b, c, swap=True),
                                      F.gaussian_nll_loss(a, b, jnp.abs(c) + 0.1),
                                      F.multilabel_soft_margin_loss(a, b > 0))):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


TORCH_NAMES = {"margin_ranking": "margin_ranking_loss", "hinge_embedding": "hinge_embedding_loss",
               "soft_margin": "soft_margin_loss", "triplet": "triplet_margin_loss",
               "triplet_p1_swap": "triplet_margin_loss",
               "cosine_embedding": "cosine_embedding_loss", "poisson_log": "poisson_nll_loss",
               "poisson_rate": "poisson_nll_loss", "gaussian": "gaussian_nll_loss",
               "gaussian_shared_clamped": "gaussian_nll_loss",
               "gaussian_var_column": "gaussian_nll_loss",
               "multilabel_soft_margin": "multilabel_soft_margin_loss",
               "multilabel_margin": "multilabel_margin_loss"}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_match_torch_values_and_gradients(name, dtype, x64):
    torch = pytest.importorskip("torch")
    fn, (cls, ckw), keys, kw, _, ndiff = CASES[name]
    data = _inputs(4)
    args = [data[k] for k in keys]
    tfn = getattr(torch.nn.functional, TORCH_NAMES[name])
    tcls = getattr(torch.nn, cls.__name__)
    rtol, atol = (1e-10, 1e-12) if dtype == "float64" else (1e-5, 1e-6)
    for reduction in ("none", "mean", "sum"):
        targs = [torch.tensor(a.astype(dtype) if a.dtype.kind == "f" else a,
                              requires_grad=i < ndiff) for i, a in enumerate(args)]
        tout = tfn(*_order(name, targs), **kw, reduction=reduction)
        r = np.random.default_rng(5).normal(size=tuple(tout.shape)).astype(dtype)
        torch.sum(tout * torch.tensor(r)).backward()
        fargs = [jnp.asarray(a.astype(dtype)) if a.dtype.kind == "f" else _as_fg(a)
                 for a in args]

        def loss(*diff):
            full = list(diff) + fargs[ndiff:]
            out = fn(*_order(name, full), **kw, reduction=reduction)
            return jnp.sum(out * r), out
        grads, out = funcgrad.grad(loss, argnums=tuple(range(ndiff)), has_aux=True)(
            *fargs[:ndiff])
        np.testing.assert_allclose(np.asarray(out), tout.detach().numpy(), rtol=rtol,
                                   atol=atol, err_msg=f"{name} {reduction} value")
        for g, t in zip(grads, targs):
            np.testing.assert_allclose(np.asarray(g), t.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"{name} {reduction} gradient")
    # the module with the same constructor arguments
    fm, tm = cls(**ckw), tcls(**ckw)
    t_in = [torch.tensor(a) for a in _order(name, args)]
    np.testing.assert_allclose(np.asarray(fm(*[_as_fg(a) for a in _order(name, args)])),
                               tm(*t_in).numpy(), rtol=1e-10)
