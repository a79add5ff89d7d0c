"""custom_jvp, custom_vjp and checkpoint (remat)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.test_util import check_grads, count_equations


def _count(jaxpr, name):
    return count_equations(jaxpr, name)


@funcgrad.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * (1.0 / (1.0 + jnp.exp(-x)))


def test_custom_jvp_matches_true_derivative_in_every_mode():
    x = np.array([-1.0, 0.5, 2.0])
    check_grads(softplus, (x,), 2)
    g = funcgrad.grad(lambda v: jnp.sum(softplus(v)))
    expected = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(g(x.astype(np.float32)), expected, rtol=1e-5)
    np.testing.assert_allclose(funcgrad.jit(g)(x.astype(np.float32)), expected, rtol=1e-5)
    np.testing.assert_allclose(funcgrad.grad(funcgrad.jit(lambda v: jnp.sum(softplus(v))))(
        x.astype(np.float32)), expected, rtol=1e-5)
    np.testing.assert_allclose(funcgrad.vmap(funcgrad.grad(softplus))(x.astype(np.float32)),
                               expected, rtol=1e-5)


def test_custom_jvp_rule_is_used():
    @funcgrad.custom_jvp
    def f(x):
        return jnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        return f(primals[0]), 3.0 * tangents[0]       # deliberately not cos

    np.testing.assert_allclose(funcgrad.grad(f)(0.2), 3.0)
    np.testing.assert_allclose(funcgrad.jvp(f, (0.2,), (1.0,))[1], 3.0)
    np.testing.assert_allclose(funcgrad.jit(funcgrad.grad(f))(0.2), 3.0)
    np.testing.assert_allclose(f(0.2), np.sin(0.2), rtol=1e-6)


def test_custom_jvp_nondiff_argnums_and_defjvps():
    @funcgrad.custom_jvp
    def scale(n, x):
        return x * n

    scale.nondiff_argnums = (0,)

    @scale.defjvp
    def scale_jvp(n, primals, tangents):
        return scale(n, primals[0]), tangents[0] * n * 10.0

    np.testing.assert_allclose(funcgrad.grad(lambda x: scale(2.0, x))(1.0), 20.0)

    @funcgrad.custom_jvp
    def mul(x, y):
        return x * y
    mul.defjvps(lambda t, ans, x, y: t * y, lambda t, ans, x, y: t * x)
    np.testing.assert_allclose(funcgrad.grad(mul, argnums=(0, 1))(2.0, 5.0), (5.0, 2.0))


@funcgrad.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda res, g: (jnp.clip(g, -1.0, 1.0),))


def test_custom_vjp():
    f = lambda x: jnp.sum(clip_gradient(x) * jnp.array([0.5, 5.0, -5.0]))
    x = jnp.ones(3)
    np.testing.assert_allclose(funcgrad.grad(f)(x), [0.5, 1.0, -1.0])
    np.testing.assert_allclose(funcgrad.jit(funcgrad.grad(f))(x), [0.5, 1.0, -1.0])
    np.testing.assert_allclose(funcgrad.grad(funcgrad.jit(f))(x), [0.5, 1.0, -1.0])
    np.testing.assert_allclose(clip_gradient(x), np.ones(3))
    with pytest.raises(TypeError, match="forward-mode"):
        funcgrad.jvp(clip_gradient, (1.0,), (1.0,))


def test_custom_vjp_residuals_pytrees_and_nondiff():
    @funcgrad.custom_vjp
    def f(x, y):
        return jnp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), {"c": jnp.cos(x), "s": jnp.sin(x), "y": y}

    def f_bwd(res, g):
        return g * res["c"] * res["y"], g * res["s"]

    f.defvjp(f_fwd, f_bwd)
    x, y = 0.3, 2.0
    gx, gy = funcgrad.grad(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.cos(x) * y, rtol=1e-6)
    np.testing.assert_allclose(gy, np.sin(x), rtol=1e-6)
    check_grads(f, (np.array([0.3, 0.7]), np.array([2.0, -1.0])), 2, modes=("rev",))

    @funcgrad.custom_vjp
    def pw(n, x):
        return x ** n

    pw.nondiff_argnums = (0,)
    pw.defvjp(lambda n, x: (x ** n, x), lambda n, x, g: (g * n * x ** (n - 1),))
    np.testing.assert_allclose(funcgrad.grad(lambda x: pw(3, x))(2.0), 12.0)


def test_custom_vjp_second_order():
    @funcgrad.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))
    # grad of grad differentiates through bwd
    np.testing.assert_allclose(funcgrad.grad(funcgrad.grad(f))(0.4), -np.sin(0.4), rtol=1e-6)


def test_checkpoint_recomputes_in_backward_pass():
    g = lambda x: jnp.sin(jnp.sin(x))
    plain = funcgrad.make_jaxpr(funcgrad.value_and_grad(g))(0.3)
    remat = funcgrad.make_jaxpr(funcgrad.value_and_grad(funcgrad.checkpoint(g)))(0.3)
    assert _count(plain.jaxpr, "sin") == 2
    # the forward pass computes sin(sin x); the backward pass recomputes sin x
    assert _count(remat.jaxpr, "sin") == 3
    assert _count(remat.jaxpr, "remat") == 2        # the forward call and the recomputing one
    v1, g1 = funcgrad.value_and_grad(g)(0.3)
    v2, g2 = funcgrad.value_and_grad(funcgrad.remat(g))(0.3)
    np.testing.assert_allclose(v1, v2)
    np.testing.assert_allclose(g1, g2, rtol=1e-6)


def test_checkpoint_residuals_are_only_inputs():
    # with checkpoint the linear program only keeps the inputs as residuals
    from funcgrad.transforms.ad import linearize_flat
    w = jnp.ones((3, 3)) * 0.1

    def layer(x):
        return jnp.tanh(jnp.tanh(x @ w) @ w)
    x = jnp.ones((2, 3))
    _, lin_plain = linearize_flat(lambda v: [layer(v)], [x])
    _, lin_remat = linearize_flat(lambda v: [funcgrad.checkpoint(layer)(v)], [x])
    plain_res = [c for c in lin_plain.closed.consts if getattr(c, "shape", ()) == (2, 3)]
    assert len(plain_res) >= 2
    remat_res = [c for c in lin_remat.closed.consts]
    assert all(c is x or getattr(c, "shape", None) == (3, 3) for c in remat_res), remat_res


def test_checkpoint_gradients_match(x64):
    def block(w, x):
        return jnp.tanh(x @ w) * jnp.sin(x @ w)
    f = lambda w, x: jnp.sum(funcgrad.checkpoint(block)(w, x) ** 2)
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((3, 3)), rng.standard_normal((2, 3))
    check_grads(f, (w, x), 2)
    g_plain = funcgrad.grad(lambda w: jnp.sum(block(w, x) ** 2))(w)
    g_remat = funcgrad.jit(funcgrad.grad(lambda w: f(w, x)))(w)
    np.testing.assert_allclose(g_plain, g_remat, rtol=1e-10)
    with_static = funcgrad.checkpoint(lambda x, n: x ** n, static_argnums=(1,))
    np.testing.assert_allclose(funcgrad.grad(with_static)(2.0, 3), 12.0)


def test_custom_rules_under_vmap():
    xs = np.array([[0.1, 0.2], [0.3, -0.4]], np.float32)
    np.testing.assert_allclose(funcgrad.vmap(softplus)(xs), np.log1p(np.exp(xs)), rtol=1e-6)
    g = funcgrad.grad(lambda x: jnp.sum(funcgrad.vmap(softplus)(x)))(xs)
    np.testing.assert_allclose(g, 1 / (1 + np.exp(-xs)), rtol=1e-5)
    f = lambda x: jnp.sum(clip_gradient(x) * 5.0)
    np.testing.assert_allclose(funcgrad.vmap(funcgrad.grad(f))(xs), np.ones_like(xs))
    g = funcgrad.grad(lambda x: jnp.sum(funcgrad.vmap(clip_gradient)(x) * 5.0))(xs)
    np.testing.assert_allclose(g, np.ones_like(xs))
    w = jnp.ones(2)
    g = funcgrad.grad(lambda w: jnp.sum(funcgrad.vmap(lambda x: clip_gradient(x * w))(xs)
                                        * 5.0))(w)
    np.testing.assert_allclose(g, np.sum(xs, 0), rtol=1e-6)


def test_check_grads_catches_wrong_rules():
    @funcgrad.custom_jvp
    def f(x):
        return jnp.sin(x)
    f.defjvp(lambda p, t: (f(p[0]), t[0] * jnp.cos(p[0]) * 1.01))    # 1% off
    with pytest.raises(AssertionError, match="forward mode"):
        check_grads(f, (np.array([0.3, 0.6]),), 1, modes=("fwd",))
    with pytest.raises(AssertionError, match="reverse mode"):
        check_grads(f, (np.array([0.3, 0.6]),), 1, modes=("rev",))
    # second order only: first derivative right, its derivative wrong
    @funcgrad.custom_jvp
    def g(x):
        return jnp.sin(x)
    g.defjvp(lambda p, t: (g(p[0]), t[0] * lax.stop_gradient(jnp.cos(p[0]))))
    check_grads(g, (np.array([0.3, 0.6]),), 1)
    with pytest.raises(AssertionError, match="order 1"):
        check_grads(g, (np.array([0.3, 0.6]),), 2)
