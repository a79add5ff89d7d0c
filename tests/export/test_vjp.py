"""Differentiable exports: with vjp_order=1 the backward pass is stored, and grad of a loaded
Exported equals grad of the original function (and float64 finite differences)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import export, nn

rng = np.random.default_rng(2)


def _spec(text, dtype=jnp.float32):
    return funcgrad.ShapeDtypeStruct(export.symbolic_shape(text), dtype)


def _loaded(exp):
    return export.deserialize(exp.serialize())


def test_grad_of_a_loaded_module_equals_grad_of_the_module():
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    exp = _loaded(export.export(model, vjp_order=1)(_spec("b, 3")))
    assert exp.vjp_order == 1
    want_fn = funcgrad.jit(funcgrad.grad(lambda x: jnp.sum(model(x) ** 2)))
    for b in (1, 5):
        x = rng.standard_normal((b, 3)).astype(np.float32)
        got = funcgrad.grad(lambda x: jnp.sum(exp.call(x) ** 2))(x)
        want = want_fn(x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_grad_matches_float64_finite_differences(x64):
    def f(x, y):
        return jnp.sum(jnp.sin(x) * y ** 2) + jnp.prod(x[:2])
    x, y = rng.standard_normal((2, 3))
    exp = _loaded(export.export(f, vjp_order=1)(x, y))
    gx, gy = funcgrad.grad(exp.call, argnums=(0, 1))(x, y)
    eps = 1e-6
    for i in range(3):
        e = np.eye(3)[i] * eps
        np.testing.assert_allclose(gx[i], (f(x + e, y) - f(x - e, y)) / (2 * eps), rtol=1e-6)
        np.testing.assert_allclose(gy[i], (f(x, y + e) - f(x, y - e)) / (2 * eps), rtol=1e-6)


def test_integer_arguments_and_outputs_get_no_cotangent():
    def f(x, idx):
        return x[idx] * 2.0, idx + 1
    x, idx = rng.standard_normal(4).astype(np.float32), np.array([3, 0, 3], np.int32)
    exp = _loaded(export.export(f, vjp_order=1)(x, idx))
    got = funcgrad.grad(lambda x: jnp.sum(exp.call(x, idx)[0]))(x)
    np.testing.assert_allclose(got, [2.0, 0.0, 0.0, 4.0])


def test_grad_under_jit_and_vmap_of_grad():
    w = rng.standard_normal((3, 2)).astype(np.float32)
    exp = _loaded(export.export(lambda x, w: jnp.tanh(x @ w), vjp_order=1)(_spec("b, 3"), w))
    x = rng.standard_normal((4, 3)).astype(np.float32)

    def loss(x):
        return jnp.sum(exp.call(x, w))
    want = (1 - np.tanh(x @ w) ** 2) @ w.T
    np.testing.assert_allclose(funcgrad.jit(funcgrad.grad(loss))(x), want, rtol=1e-5, atol=1e-6)
    per_row = funcgrad.vmap(funcgrad.grad(lambda r: loss(r[None])))(x)
    np.testing.assert_allclose(per_row, want, rtol=1e-5, atol=1e-6)


def test_without_vjp_order_differentiation_fails_clearly():
    exp = export.export(jnp.sin)(np.zeros(2, np.float32))
    with pytest.raises(TypeError, match="only when exported with vjp_order >= 1"):
        funcgrad.grad(lambda x: jnp.sum(exp.call(x)))(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="without its backward pass"):
        exp.vjp()
    with pytest.raises(ValueError, match="vjp_order must be an int from 0 to 3"):
        export.export(jnp.sin, vjp_order=4)


def test_the_backward_pass_is_an_exported_function_of_flat_arrays():
    exp = export.export(lambda x: jnp.sum(x ** 3), vjp_order=1)(np.ones(3, np.float32))
    bwd = exp.vjp()
    (g,) = bwd.call(np.array([1.0, 2.0, 3.0], np.float32), np.float32(1.0))
    np.testing.assert_allclose(g, [3.0, 12.0, 27.0])


def test_second_derivatives_with_vjp_order_2():
    def f(x):
        return jnp.sum(jnp.sin(x) * x ** 2)
    x = np.array([0.3, 0.7, 1.1], np.float32)
    exp = _loaded(export.export(f, vjp_order=2)(x))
    assert exp.vjp_order == 2 and exp.vjp().vjp_order == 1
    hess = funcgrad.jacrev(funcgrad.grad(exp.call))(x)
    want = np.diag(2 * np.sin(x) + 4 * x * np.cos(x) - x ** 2 * np.sin(x))
    np.testing.assert_allclose(hess, want, rtol=1e-5, atol=1e-6)
    once = _loaded(export.export(f, vjp_order=1)(x))
    with pytest.raises(TypeError, match="vjp_order >= 1"):
        funcgrad.jacrev(funcgrad.grad(once.call))(x)
