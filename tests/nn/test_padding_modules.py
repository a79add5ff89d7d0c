"""Padding modules, Softmin, CosineSimilarity and PairwiseDistance against NumPy (and PyTorch
when it is installed)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.numpy as jnp

PAD_CASES = [
    # (module, args, input rank, NumPy mode, NumPy kwargs)
    ("ZeroPad2d", ((1, 2, 0, 3),), 4, "constant", {}),
    ("ConstantPad1d", (2, 0.5), 3, "constant", {"constant_values": 0.5}),
    ("ReflectionPad2d", ((1, 2, 2, 1),), 4, "reflect", {}),
    ("ReplicationPad3d", (1,), 5, "edge", {}),
    ("CircularPad1d", ((2, 1),), 2, "wrap", {}),
]


@pytest.mark.parametrize("name, args, rank, np_mode, kw", PAD_CASES)
def test_padding_modules_match_numpy(name, args, rank, np_mode, kw, rng):
    x = rng.standard_normal((2, 3, 4, 5, 6)[:rank]).astype(np.float32)
    mod = getattr(nn, name)(*args)
    dims = int(name[-2])
    p = mod.padding                                   # (left, right, top, bottom, ...)
    cfg = [(0, 0)] * (rank - dims) + [(p[2 * i], p[2 * i + 1]) for i in range(dims)][::-1]
    np.testing.assert_array_equal(np.asarray(mod(jnp.asarray(x))), np.pad(x, cfg, np_mode, **kw))
    g = funcgrad.grad(lambda v: jnp.sum(mod(v) ** 2))(jnp.asarray(x))
    assert g.shape == x.shape


def test_padding_errors():
    with pytest.raises(ValueError, match=r"ZeroPad2d: padding must be an int or 4 ints"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(ValueError, match=r"ReflectionPad2d: expected a 3-d or 4-d input"):
        nn.ReflectionPad2d(1)(jnp.ones(5))


def test_softmin_cosine_and_pairwise_distance_match_numpy(rng):
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((4, 6)).astype(np.float32)
    e = np.exp(-a - (-a).max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(nn.Softmin(dim=1)(jnp.asarray(a))),
                               e / e.sum(1, keepdims=True), rtol=1e-6)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    np.testing.assert_allclose(np.asarray(nn.CosineSimilarity()(jnp.asarray(a), jnp.asarray(b))),
                               cos, rtol=1e-5)
    for p in (1.0, 2.0, 3.0):
        want = np.linalg.norm(a - b + 1e-6, ord=p, axis=1)
        got = nn.PairwiseDistance(p=p)(jnp.asarray(a), jnp.asarray(b))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    assert nn.PairwiseDistance(keepdim=True)(jnp.asarray(a), jnp.asarray(b)).shape == (4, 1)


def test_match_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    for name, args in [("ZeroPad2d", (1,)), ("ConstantPad2d", (2, 0.5)),
                       ("ReflectionPad2d", ((1, 2, 2, 1),)), ("ReplicationPad2d", (2,)),
                       ("CircularPad2d", ((1, 1, 2, 0),))]:
        np.testing.assert_array_equal(np.asarray(getattr(nn, name)(*args)(jnp.asarray(x))),
                                      getattr(torch.nn, name)(*args)(torch.tensor(x)).numpy())
    a, b = (rng.standard_normal((4, 6)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(
        np.asarray(nn.PairwiseDistance(p=1.0, keepdim=True)(jnp.asarray(a), jnp.asarray(b))),
        torch.nn.PairwiseDistance(p=1.0, keepdim=True)(torch.tensor(a), torch.tensor(b)).numpy(),
        rtol=1e-6)
