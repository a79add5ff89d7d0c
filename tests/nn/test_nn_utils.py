"""funcgrad.nn.utils: PyTorch's in-place gradient clipping and parameter flattening."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.numpy as jnp


def _model():
    funcgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2, bias=False))


def test_parameters_to_vector_and_back_round_trip():
    m = _model()
    arrays = [np.asarray(p.data) for p in m.parameters()]
    v = nn.utils.parameters_to_vector(m.parameters())
    np.testing.assert_array_equal(np.asarray(v), np.concatenate([a.ravel() for a in arrays]))
    nn.utils.vector_to_parameters(v * 2.0, m.parameters())
    for p, a in zip(m.parameters(), arrays):
        np.testing.assert_array_equal(np.asarray(p.data), 2 * a)
        assert p.data.dtype == jnp.float32
    half = nn.Parameter(jnp.zeros((2, 2), jnp.float16))
    nn.utils.vector_to_parameters(jnp.arange(4.0), [half])
    assert half.data.dtype == jnp.float16
    np.testing.assert_array_equal(np.asarray(half.data), [[0, 1], [2, 3]])


def test_vector_to_parameters_errors_name_the_problem():
    m = _model()
    n = sum(p.size for p in m.parameters())
    with pytest.raises(ValueError, match=f"has {n - 1} elements but the parameters hold {n}"):
        nn.utils.vector_to_parameters(jnp.zeros(n - 1), m.parameters())
    with pytest.raises(ValueError, match=r"expected a 1-d vector, got shape \(2, 3\)"):
        nn.utils.vector_to_parameters(jnp.zeros((2, 3)), m.parameters())
    with pytest.raises(TypeError, match="item 0 is of type Array, not Parameter"):
        nn.utils.vector_to_parameters(jnp.zeros(3), [jnp.zeros(3)])


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_in_place_matches_numpy(norm_type, rng):
    m = _model()
    grads = [rng.standard_normal(p.shape).astype(np.float32) * 3 for p in m.parameters()]
    for p, g in zip(m.parameters(), grads):
        p.grad = jnp.asarray(g)
    flat = np.concatenate([g.ravel() for g in grads]).astype(np.float64)
    want_norm = np.linalg.norm(flat, ord=norm_type)
    norm = nn.utils.clip_grad_norm_(m.parameters(), 1.5, norm_type=norm_type)
    np.testing.assert_allclose(float(norm), want_norm, rtol=1e-5)
    coef = min(1.0, 1.5 / (want_norm + 1e-6))
    for p, g in zip(m.parameters(), grads):
        np.testing.assert_allclose(np.asarray(p.grad), g * coef, rtol=1e-5, atol=1e-7)
    assert funcgrad.optim.clip_grad_norm_ is nn.utils.clip_grad_norm_


def test_clip_grad_value_and_parameters_without_grads():
    m = _model()
    first = next(iter(m.parameters()))
    first.grad = jnp.asarray(np.linspace(-2, 2, first.size).reshape(first.shape), jnp.float32)
    nn.utils.clip_grad_value_(m.parameters(), 0.5)
    assert float(jnp.max(jnp.abs(first.grad))) == 0.5
    assert float(nn.utils.clip_grad_norm_(nn.Linear(2, 2).parameters(), 1.0)) == 0.0


def test_matches_torch_nn_utils(rng):
    torch = pytest.importorskip("torch")
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,), (2, 4)]]
    grads = [rng.standard_normal(a.shape).astype(np.float32) for a in arrays]
    tp = [torch.nn.Parameter(torch.tensor(a)) for a in arrays]
    fp = [nn.Parameter(jnp.asarray(a)) for a in arrays]
    for t, f, g in zip(tp, fp, grads):
        t.grad, f.grad = torch.tensor(g), jnp.asarray(g)
    tn = torch.nn.utils.clip_grad_norm_(tp, 0.7)
    fn = nn.utils.clip_grad_norm_(fp, 0.7)
    np.testing.assert_allclose(float(fn), float(tn), rtol=1e-6)
    for t, f in zip(tp, fp):
        np.testing.assert_allclose(np.asarray(f.grad), t.grad.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(nn.utils.parameters_to_vector(fp)),
                               torch.nn.utils.parameters_to_vector(tp).detach().numpy())
