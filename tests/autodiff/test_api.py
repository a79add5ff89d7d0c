"""The public autodiff API: jvp, linearize, vjp, grad, value_and_grad, jacfwd, jacrev, hessian,
their composition with each other and with jit, symbolic zeros and dead-code elimination."""

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.core import dtypes
from funcgrad.test_util import check_grads, count_equations

rng = np.random.default_rng(1)


def _count(jaxpr, name):
    return count_equations(jaxpr, name)


def test_jvp_and_linearize():
    y, t = funcgrad.jvp(jnp.sin, (0.5,), (2.0,))
    np.testing.assert_allclose(y, np.sin(0.5), rtol=1e-6)
    np.testing.assert_allclose(t, 2 * np.cos(0.5), rtol=1e-6)
    x = rng.standard_normal(3).astype(np.float32)
    y, f_jvp = funcgrad.linearize(lambda v: jnp.tanh(v) * v, x)
    np.testing.assert_allclose(y, np.tanh(x) * x, rtol=1e-6)
    v = np.ones(3, np.float32)
    expected = (1 - np.tanh(x) ** 2) * x + np.tanh(x)
    np.testing.assert_allclose(f_jvp(v), expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(f_jvp(2 * v), 2 * expected, rtol=1e-4, atol=1e-6)


def test_jvp_pytrees_and_aux():
    p = {"a": jnp.ones(2), "b": (2.0, jnp.arange(3.0))}
    t = {"a": jnp.ones(2), "b": (1.0, jnp.ones(3))}
    out, tout, aux = funcgrad.jvp(lambda d: (jnp.sum(d["a"]) * d["b"][0] + jnp.sum(d["b"][1]),
                                             "aux"), (p,), (t,), has_aux=True)
    assert aux == "aux"
    np.testing.assert_allclose(out, 2 * 2 + 3)
    np.testing.assert_allclose(tout, 2 * 2 + 2 * 1 + 3)


def test_vjp():
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    out, f_vjp = funcgrad.vjp(lambda a, b: a @ b, x, w)
    ct = np.ones((2, 4), np.float32)
    gx, gw = f_vjp(ct)
    np.testing.assert_allclose(gx, ct @ w.T, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, x.T @ ct, rtol=1e-4, atol=1e-5)


def test_grad_argnums_has_aux_pytrees():
    def f(params, x, scale):
        return jnp.sum((params["w"] * x + params["b"]) ** 2) * scale, {"n": 3}
    params = {"w": jnp.ones(3), "b": jnp.zeros(3)}
    x = jnp.arange(3.0)
    (val, aux), (gp, gs) = funcgrad.value_and_grad(f, argnums=(0, 2), has_aux=True)(
        params, x, 2.0)
    assert aux == {"n": 3}
    np.testing.assert_allclose(val, 2 * np.sum(np.arange(3.0) ** 2))
    np.testing.assert_allclose(gp["w"], 2 * 2 * np.arange(3.0) ** 2)
    np.testing.assert_allclose(gp["b"], 2 * 2 * np.arange(3.0))
    np.testing.assert_allclose(gs, np.sum(np.arange(3.0) ** 2))
    g, aux = funcgrad.grad(f, has_aux=True)(params, x, 1.0)
    assert set(g) == {"w", "b"}
    g1 = funcgrad.grad(lambda a, b: a * b ** 2, argnums=1)(3.0, 2.0)
    np.testing.assert_allclose(g1, 12.0)


def test_grad_errors():
    with pytest.raises(TypeError, match="argument 0 \\('n'\\).*int32"):
        funcgrad.grad(lambda n: n * 2.0)(3)
    with pytest.raises(TypeError, match="argument 1 \\('k'\\)"):
        funcgrad.grad(lambda x, k: x * k, argnums=(0, 1))(1.0, jnp.arange(2))
    with pytest.raises(TypeError, match="scalar"):
        funcgrad.grad(lambda x: x * 2.0)(jnp.ones(3))
    # a real-valued function of complex inputs is JAX's conjugate convention, not an error
    np.testing.assert_allclose(funcgrad.grad(lambda z: jnp.real(z * z))(1.0 + 1.0j), 2 + 2j)
    with pytest.raises(TypeError, match="holomorphic"):
        funcgrad.grad(lambda z: z * z)(1.0 + 1.0j)
    with pytest.raises(TypeError, match="argnums"):
        funcgrad.grad(lambda x: x, argnums=2)(1.0)


def test_allow_int_and_float0():
    g = funcgrad.grad(lambda x, n: x * n, argnums=(0, 1), allow_int=True)(2.0, 3)
    np.testing.assert_allclose(g[0], 3.0)
    assert np.asarray(g[1]).dtype == dtypes.float0
    # integer outputs get float0 tangents
    out, t = funcgrad.jvp(lambda x: (x * 2.0, jnp.argmax(x)), (jnp.arange(3.0),),
                          (jnp.ones(3),))
    assert np.asarray(t[1]).dtype == dtypes.float0 and np.asarray(t[1]).shape == ()
    np.testing.assert_allclose(t[0], 2 * np.ones(3))
    # integer inputs take float0 tangents
    out, t = funcgrad.jvp(lambda x, n: x * n, (2.0, 3), (1.0, np.zeros((), dtypes.float0)))
    np.testing.assert_allclose(t, 3.0)


def test_holomorphic():
    z = 0.3 + 0.7j
    g = funcgrad.grad(lambda v: v ** 3 + jnp.sin(v), holomorphic=True)(jnp.asarray(z, np.complex64))
    np.testing.assert_allclose(g, 3 * z ** 2 + np.cos(z), rtol=1e-4)


def test_concrete_control_flow_under_eager_grad():
    def f(x):
        if x > 0:
            return x * x
        return -x
    np.testing.assert_allclose(funcgrad.grad(f)(3.0), 6.0)
    np.testing.assert_allclose(funcgrad.grad(f)(-3.0), -1.0)
    np.testing.assert_allclose(funcgrad.grad(lambda x: x * float(x))(2.0), 2.0)


def test_fifth_order_sin():
    g = jnp.sin
    for _ in range(5):
        g = funcgrad.grad(g)
    np.testing.assert_allclose(g(0.7), np.cos(0.7), rtol=1e-4)


def test_fifth_order_norm_like(x64):
    # f(x) = sqrt(1 + x^2): derivatives in closed form
    f = lambda x: jnp.sqrt(1.0 + x * x)
    g = f
    for _ in range(5):
        g = funcgrad.grad(g)
    x = 0.6
    s = 1 + x * x
    # d^5/dx^5 sqrt(1+x^2) = -15 x (4 x^2 - 3) / (1+x^2)^(9/2)
    expected = -15 * x * (4 * x * x - 3) / s ** 4.5
    np.testing.assert_allclose(g(x), expected, rtol=1e-9)
    np.testing.assert_allclose(funcgrad.jit(g)(x), expected, rtol=1e-9)


def test_fifth_order_mixed_modes(x64):
    f = lambda x: jnp.exp(2.0 * x) * x
    d = funcgrad.grad(funcgrad.jacfwd(funcgrad.grad(funcgrad.jacrev(funcgrad.grad(f)))))
    x = 0.3
    # d^5 (x e^{2x}) = e^{2x} (32 x + 80)
    np.testing.assert_allclose(d(x), np.exp(2 * x) * (32 * x + 80), rtol=1e-9)


BATTERY = {
    "elementwise": lambda x: jnp.sin(x) * jnp.exp(x[0]),
    "matmul": lambda x: jnp.tanh(jnp.reshape(x, (2, 2)) @ jnp.reshape(x, (2, 2)).T).ravel(),
    "reductions": lambda x: jnp.stack([jnp.sum(x ** 2), jnp.max(x), jnp.prod(x)]),
    "indexing": lambda x: x[np.array([3, 0, 0])] * x[1:4],
    "cumulative": lambda x: jnp.cumsum(x) * jnp.cumprod(x),
    "where": lambda x: jnp.where(x > 0.5, x ** 2, jnp.cos(x)),
    "softmax": lambda x: jnp.exp(x) / jnp.sum(jnp.exp(x)),
}


@pytest.mark.parametrize("name", sorted(BATTERY))
def test_jacfwd_equals_jacrev(name, x64):
    f = BATTERY[name]
    x = np.array([0.3, 0.9, 0.6, 1.2])
    jf = np.asarray(funcgrad.jacfwd(f)(x))
    jr = np.asarray(funcgrad.jacrev(f)(x))
    assert jf.shape == jr.shape
    np.testing.assert_allclose(jf, jr, rtol=1e-10, atol=1e-12)
    # and against finite differences
    eps = 1e-6
    fd = np.stack([(np.asarray(f(x + eps * e)) - np.asarray(f(x - eps * e))) / (2 * eps)
                   for e in np.eye(4)], axis=-1)
    np.testing.assert_allclose(jf, fd, rtol=1e-5, atol=1e-7)


def test_jacobian_pytrees_and_hessian():
    def f(p):
        return {"y": p["a"] * p["b"][0], "z": jnp.sum(p["a"])}
    p = {"a": jnp.arange(1.0, 3.0), "b": jnp.ones(2)}
    for jac in (funcgrad.jacfwd(f), funcgrad.jacrev(f)):
        j = jac(p)
        np.testing.assert_allclose(j["y"]["a"], np.eye(2))
        np.testing.assert_allclose(j["y"]["b"], np.array([[1.0, 0], [2.0, 0]]))
        np.testing.assert_allclose(j["z"]["a"], np.ones(2))
    h = funcgrad.jit(funcgrad.hessian(lambda x: jnp.sum(x ** 3) + x[0] * x[1]))(
        jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(h, np.array([[6.0, 1.0], [1.0, 12.0]]))


def test_jit_compositions():
    f = lambda x: jnp.sum(jnp.tanh(x) ** 2)
    x = np.random.default_rng(3).standard_normal(4).astype(np.float32)
    expected = 2 * np.tanh(x) * (1 - np.tanh(x) ** 2)
    np.testing.assert_allclose(funcgrad.jit(funcgrad.grad(f))(x), expected, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(funcgrad.grad(funcgrad.jit(f))(x), expected, rtol=1e-4, atol=1e-6)
    g = lambda x: funcgrad.jit(f)(x) * 2.0 + jnp.sum(x)
    np.testing.assert_allclose(funcgrad.grad(g)(x), 2 * expected + 1, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(funcgrad.jit(funcgrad.grad(funcgrad.jit(g)))(x),
                               2 * expected + 1, rtol=1e-4, atol=1e-6)
    # nested jit under higher-order derivatives
    h = funcgrad.jit(lambda x: jnp.sin(x) * x)
    d3 = funcgrad.grad(funcgrad.grad(funcgrad.grad(h)))
    x0 = 0.4
    np.testing.assert_allclose(d3(x0), -3 * np.sin(x0) - x0 * np.cos(x0), rtol=1e-4, atol=1e-6)
    inner = funcgrad.jit(lambda y: jnp.sin(y) * jnp.sum(y))
    check_grads(lambda v: inner(v), (np.array([0.1, 0.5, 0.9]),), 2)


def test_jit_of_grad_has_no_dead_equations():
    from funcgrad.core.dce import has_dead_code

    def loss(w, x):
        y = jnp.tanh(x @ w)
        return jnp.sum(y ** 2)
    w = jnp.ones((3, 2))
    x = jnp.ones((4, 3))
    closed = funcgrad.make_jaxpr(funcgrad.grad(loss))(w, x)
    assert not has_dead_code(closed.jaxpr)
    # the gradient w.r.t. w never needs the cotangent of x
    assert _count(closed.jaxpr, "dot_general") == 2   # forward, and transpose w.r.t. w only


def test_symbolic_zeros_cost_nothing():
    def f(x, y):
        return jnp.sin(x) * 2.0, jnp.exp(y)
    # the tangent of the second output never involves x: its jvp has no cos
    closed = funcgrad.make_jaxpr(lambda x, y: funcgrad.jvp(f, (x, y), (1.0, 0.0))[1][1])(0.1, 0.2)
    assert _count(closed.jaxpr, "cos") == 0
    # grad w.r.t. x of a function where y is unrelated
    closed = funcgrad.make_jaxpr(funcgrad.grad(lambda x, y: jnp.sin(x) + jnp.sum(jnp.exp(y))))(
        0.1, jnp.ones(3))
    assert _count(closed.jaxpr, "exp") == 0
    # a constant output: gradient is zero without any work on the tangent side
    g = funcgrad.grad(lambda x: jnp.asarray(2.0) + 0.0 * x)(1.0)
    np.testing.assert_allclose(g, 0.0)


def test_grad_under_vmap_and_vmap_under_grad():
    f = lambda x: jnp.sum(jnp.sin(x) ** 2)
    xs = rng.standard_normal((3, 2)).astype(np.float32)
    batched = funcgrad.vmap(funcgrad.grad(f))(xs)
    np.testing.assert_allclose(batched, 2 * np.sin(xs) * np.cos(xs), rtol=1e-4, atol=1e-6)
    g = funcgrad.grad(lambda x: jnp.sum(funcgrad.vmap(jnp.sin)(x)))(xs)
    np.testing.assert_allclose(g, np.cos(xs), rtol=1e-4, atol=1e-6)


def test_perturbation_confusion():
    # d/dx [x * d/dy (x + y)] = 1 (the inner derivative must not see x's tangent)
    f = lambda x: x * funcgrad.grad(lambda y: x + y)(1.0)
    np.testing.assert_allclose(funcgrad.grad(f)(2.0), 1.0)
    g = lambda x: funcgrad.grad(lambda y: x * y)(3.0)
    np.testing.assert_allclose(funcgrad.grad(g)(2.0), 1.0)


def test_vjp_errors():
    _, f_vjp = funcgrad.vjp(lambda x: (x, x * 2.0), 1.0)
    with pytest.raises(TypeError, match="structure"):
        f_vjp(1.0)
    with pytest.raises(TypeError, match="tuples"):
        funcgrad.jvp(jnp.sin, 1.0, 1.0)


def test_mlp_grad_matches_numpy():
    w1 = rng.standard_normal((3, 4)).astype(np.float32)
    w2 = rng.standard_normal((4, 1)).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)

    def loss(params):
        h = jnp.tanh(x @ params[0])
        return jnp.mean((h @ params[1]) ** 2)
    g1, g2 = funcgrad.jit(funcgrad.grad(loss))((w1, w2))
    h = np.tanh(x @ w1)
    out = h @ w2
    d_out = 2 * out / out.size
    np.testing.assert_allclose(g2, h.T @ d_out, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(g1, x.T @ ((d_out @ w2.T) * (1 - h ** 2)), rtol=1e-4, atol=1e-6)


def test_demo_training_reduces_loss(capsys):
    from funcgrad.demo_train import init_params, loss, make_spirals, train
    x, y = make_spirals()
    initial = float(loss(init_params(), x, y))
    final, accuracy = train(60, log_every=1000)
    assert final < initial - 0.05
    assert accuracy > 0.6
    assert "step" in capsys.readouterr().out


def test_aux_data_is_returned_as_primal_values():
    def f(x):
        y = jnp.sin(x)
        return jnp.sum(y), {"y": y, "tag": "t"}
    g, aux = funcgrad.grad(f, has_aux=True)(jnp.arange(3.0))
    assert isinstance(aux["y"], funcgrad.Array) and aux["tag"] == "t"
    np.testing.assert_allclose(aux["y"], np.sin(np.arange(3.0)), rtol=1e-6)
    j, aux = funcgrad.jacrev(lambda x: (jnp.sin(x), jnp.cos(x)), has_aux=True)(jnp.ones(2))
    assert isinstance(aux, funcgrad.Array)
    j, aux = funcgrad.jacfwd(lambda x: (jnp.sin(x), jnp.cos(x)), has_aux=True)(jnp.ones(2))
    np.testing.assert_allclose(aux, np.cos(np.ones(2)), rtol=1e-6)
    _, _, aux = funcgrad.jvp(lambda x: (x * 2.0, x * 3.0), (1.0,), (1.0,), has_aux=True)
    np.testing.assert_allclose(aux, 3.0)


def test_tangent_dtypes_follow_the_primals(x64):
    out, t = funcgrad.jvp(jnp.sin, (jnp.ones(2, np.float32),), (1.0 * jnp.ones(2, np.float32),))
    assert np.asarray(t).dtype == np.float32
    out, t = funcgrad.jvp(jnp.sin, (np.float32(1.0),), (1.0,))      # weak Python tangent
    assert np.asarray(t).dtype == np.float32
    with pytest.raises(TypeError, match="tangent dtype must be float32"):
        funcgrad.jvp(jnp.sin, (jnp.ones(2, np.float32),), (np.ones(2),))
    _, f_jvp = funcgrad.linearize(jnp.sin, jnp.ones(2, np.float32))
    assert np.asarray(f_jvp(np.ones(2))).dtype == np.float32
    g = funcgrad.grad(lambda x: jnp.sum(x * 2.0))(jnp.ones(2, np.float32))
    assert np.asarray(g).dtype == np.float32


def test_results_are_device_arrays():
    assert isinstance(funcgrad.grad(lambda x: x)(1.0), funcgrad.Array)
    assert isinstance(funcgrad.grad(lambda x: 3.0 + 0.0 * x)(1.0), funcgrad.Array)
    assert isinstance(funcgrad.jvp(lambda x: x, (1.0,), (np.float32(2.0),))[1], funcgrad.Array)
