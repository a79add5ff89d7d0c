"""funcgrad.quantize in "fake" mode: quantize-dequantize in float, straight-through
gradients, quantization-aware training, and composition with grad/jit/vmap."""
import numpy as np

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.quantize import QuantizeConfig, Ranges
from funcgrad.quantize.rewrite import fake_quant_fn
from tests.quantize import reference as ref

RNG = np.random.default_rng(1)
W = RNG.normal(size=(6, 3)).astype(np.float32)
X = RNG.normal(size=(5, 6)).astype(np.float32)
FAKE = QuantizeConfig(mode="fake", weight_argnums=(0,))


def fq_np(x, axes):
    q, s = ref.sym_quant(x, axes)
    return q * s


def test_fake_mode_values_are_quantize_dequantize_in_float():
    got = np.asarray(funcgrad.quantize(lambda w, x: x @ w, FAKE)(W, X))
    want = fq_np(X, (1,)) @ fq_np(W, (0,))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    closed = funcgrad.make_jaxpr(funcgrad.quantize(lambda w, x: x @ w, FAKE))(W, X)
    dots = [e for e in closed.eqns if e.prim.name == "dot_general"]
    assert [str(e.outvars[0].aval.dtype) for e in dots] == ["float32"]
    assert any(e.prim.name == "custom_jvp_call" for e in closed.eqns)


def test_straight_through_gradients():
    loss = lambda w, x: jnp.sum(jnp.sin(x @ w))
    gw, gx = funcgrad.grad(funcgrad.quantize(loss, FAKE), argnums=(0, 1))(W, X)
    # d/dw sum(sin(fq(x) @ fq(w))) with d fq/dw = identity: fq(x).T @ cos(fq(x) @ fq(w))
    xq, wq = fq_np(X, (1,)), fq_np(W, (0,))
    c = np.cos(xq @ wq)
    np.testing.assert_allclose(np.asarray(gw), xq.T @ c, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(gx), c @ wq.T, rtol=1e-4, atol=1e-5)


def test_gradient_is_zero_where_values_were_clipped():
    fq = fake_quant_fn("int8")
    x = jnp.array([-3.0, -0.5, 0.5, 3.0])
    g = funcgrad.grad(lambda x: jnp.sum(fq(x, jnp.float32(1 / 127), jnp.float32(0.0)) * 2.0))(x)
    np.testing.assert_array_equal(np.asarray(g), [0.0, 2.0, 2.0, 0.0])
    # static activation ranges clip the same way inside the transform
    cfg = QuantizeConfig(mode="fake", activation="static", weight_argnums=(0,),
                         static_ranges=Ranges({(0,): (-1.0, 1.0)}))
    x2 = np.array([[0.5, 2.0, -0.25, -4.0, 0.1, 0.0]], np.float32)
    gx = funcgrad.grad(lambda x: jnp.sum(funcgrad.quantize(lambda w, x: x @ w, cfg)(W, x)))(x2)
    wq = fq_np(W, (0,))
    want = np.where(np.abs(x2) <= 1.0, wq.sum(1)[None, :], 0.0)
    np.testing.assert_allclose(np.asarray(gx), want, rtol=1e-5, atol=1e-6)


def test_qat_converges():
    rng = np.random.default_rng(2)
    w_true = rng.normal(size=(8, 2)).astype(np.float32)
    xs = rng.normal(size=(64, 8)).astype(np.float32)
    ys = xs @ w_true

    def loss(w, x, y):
        return jnp.mean((x @ w - y) ** 2)
    qloss = funcgrad.quantize(loss, FAKE)
    step = funcgrad.jit(lambda w: w - 0.1 * funcgrad.grad(qloss)(w, xs, ys))
    w = jnp.zeros((8, 2))
    first = float(qloss(w, xs, ys))
    for _ in range(150):
        w = step(w)
    last = float(qloss(w, xs, ys))
    assert last < 1e-3 * first, (first, last)
    np.testing.assert_allclose(np.asarray(w), w_true, atol=0.05)


def test_grad_composes_with_jit_and_vmap_in_several_orders():
    loss = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
    q = funcgrad.quantize(loss, FAKE)
    g = np.asarray(funcgrad.grad(q)(W, X))
    np.testing.assert_allclose(np.asarray(funcgrad.jit(funcgrad.grad(q))(W, X)), g, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.grad(funcgrad.jit(q))(W, X)), g, rtol=1e-5,
                               atol=1e-6)
    # quantize(grad(f)) is another program: the backward pass's products are quantized too
    inner = funcgrad.quantize(lambda w, x: funcgrad.grad(loss)(w, x), FAKE)
    closed = funcgrad.make_jaxpr(inner)(W, X)
    assert sum(e.prim.name == "custom_jvp_call" for e in closed.eqns) >= 4
    g_float = np.asarray(funcgrad.grad(loss)(W, X))
    assert np.abs(np.asarray(inner(W, X)) - g_float).max() < 0.05 * np.abs(g_float).max()
    # per-example gradients: vmap over rows of x, each row quantized as its own batch of 1
    per = np.asarray(funcgrad.vmap(funcgrad.grad(q), in_axes=(None, 0))(W, X[:, None, :]))
    rows = np.stack([np.asarray(funcgrad.grad(q)(W, X[i:i + 1])) for i in range(5)])
    np.testing.assert_allclose(per, rows, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(per.sum(0), g, rtol=1e-4, atol=1e-5)


def test_pmap_composition_on_the_local_devices():
    from funcgrad import lax
    n = funcgrad.local_device_count()
    xs = np.stack([X] * n)
    loss = lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2)
    q = funcgrad.quantize(loss, FAKE)
    step = funcgrad.pmap(lambda w, x: lax.pmean(funcgrad.grad(q)(w, x), "d"), axis_name="d",
                         in_axes=(None, 0))
    np.testing.assert_allclose(np.asarray(step(W, xs))[0], np.asarray(funcgrad.grad(q)(W, X)),
                               rtol=1e-5, atol=1e-6)
    qint = funcgrad.quantize(lambda x: x @ W)
    np.testing.assert_allclose(np.asarray(funcgrad.pmap(qint)(xs))[0], np.asarray(qint(X)),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.quantize(funcgrad.pmap(lambda x: x @ W))(xs))[0],
                               np.asarray(qint(X)), rtol=1e-6, atol=1e-6)
