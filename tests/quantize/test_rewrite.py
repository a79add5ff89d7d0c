"""funcgrad.quantize in "int" mode: the rewritten Jaxprs and their numerics."""
import ml_dtypes
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core.jaxpr import subjaxprs
from funcgrad.quantize import QuantizeConfig, quantize_jaxpr
from tests.quantize import reference as ref

RNG = np.random.default_rng(0)
W = RNG.normal(size=(16, 8)).astype(np.float32)
X = RNG.normal(size=(4, 16)).astype(np.float32)


def all_eqns(jaxpr):
    for e in jaxpr.eqns:
        yield e
        for sub in subjaxprs(e):
            yield from all_eqns(sub)


def products(closed):
    """(operand dtypes, result dtype) of every dot_general/convolution, bodies included."""
    return [(tuple(str(v.aval.dtype) for v in e.invars), str(e.outvars[0].aval.dtype))
            for e in all_eqns(closed.jaxpr)
            if e.prim.name in ("dot_general", "conv_general_dilated")]


INT8 = (("int8", "int8"), "int32")
F32 = (("float32", "float32"), "float32")


def test_jaxpr_has_integer_product_and_float_elsewhere():
    f = lambda x: jnp.tanh(x @ W) + 1.0
    closed = funcgrad.make_jaxpr(funcgrad.quantize(f))(X)
    assert products(closed) == [INT8]
    names = [e.prim.name for e in closed.eqns]
    assert "tanh" in names
    tanh = next(e for e in closed.eqns if e.prim.name == "tanh")
    assert str(tanh.outvars[0].aval.dtype) == "float32"
    # the closed-over weight is stored as int8, quantized once at trace time
    assert "int8" in [str(v.aval.dtype) for v in closed.jaxpr.constvars]
    assert [str(v.aval.dtype) for v in closed.jaxpr.outvars] == ["float32"]


@pytest.mark.parametrize("wrap", ["scan", "cond", "while", "jit", "remat", "custom_jvp",
                                  "custom_vjp"])
def test_products_inside_bodies_are_rewritten(wrap):
    def inner(x):
        return jnp.tanh(x @ W)

    if wrap == "scan":
        def f(xs):
            return lax.scan(lambda c, x: (c + inner(x).sum(), inner(x)), 0.0, xs)[1]
        arg = np.stack([X, X * 2])
    elif wrap == "cond":
        def f(x):
            return lax.cond(jnp.abs(x).sum() > 0, inner, lambda x: jnp.zeros((4, 8)), x)
        arg = X
    elif wrap == "while":
        def f(x):
            return lax.while_loop(lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + inner(x)),
                                  (0, jnp.zeros((4, 8))))[1]
        arg = X
    elif wrap == "jit":
        f, arg = funcgrad.jit(inner), X
    elif wrap == "remat":
        f, arg = funcgrad.checkpoint(inner), X
    elif wrap == "custom_jvp":
        f = funcgrad.custom_jvp(inner)
        f.defjvp(lambda p, t: (inner(*p), t[0] @ W))
        arg = X
    else:
        f = funcgrad.custom_vjp(inner)
        f.defvjp(lambda x: (inner(x), x), lambda x, g: (g @ W.T,))
        arg = X
    closed = funcgrad.make_jaxpr(funcgrad.quantize(f))(arg)
    found = products(closed)
    assert INT8 in found, (wrap, found)
    assert F32 not in found, (wrap, found)
    got = np.asarray(funcgrad.quantize(f)(arg))
    one = np.tanh(ref.matmul_dynamic(X, W))
    want = {"scan": np.stack([one, np.tanh(ref.matmul_dynamic(2 * X, W))]),
            "while": 2 * one}.get(wrap, one)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_dynamic_per_channel_matches_numpy_reference():
    got = np.asarray(funcgrad.quantize(lambda x: x @ W)(X))
    np.testing.assert_allclose(got, ref.matmul_dynamic(X, W), rtol=1e-5, atol=1e-5)


def test_per_tensor_weight_scale():
    cfg = QuantizeConfig(granularity="per_tensor")
    got = np.asarray(funcgrad.quantize(lambda x: x @ W, cfg)(X))
    qx, sx = ref.sym_quant(X, (1,))
    qw, sw = ref.sym_quant(W, (0, 1))
    np.testing.assert_allclose(got, (qx @ qw) * sx * sw, rtol=1e-5, atol=1e-5)
    per_channel = np.asarray(funcgrad.quantize(lambda x: x @ W)(X))
    assert not np.allclose(got, per_channel)


def test_per_block_scales():
    cfg = QuantizeConfig(granularity="per_block", block_size=4)
    got = np.asarray(funcgrad.quantize(lambda x: x @ W, cfg)(X))
    want = np.zeros((4, 8))
    for b in range(4):
        xs, ws = X[:, 4 * b:4 * b + 4], W[4 * b:4 * b + 4]
        qx, sx = ref.sym_quant(xs, (1,))
        qw, sw = ref.sym_quant(ws, (0,))
        want += (qx @ qw) * sx * sw
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    closed = funcgrad.make_jaxpr(funcgrad.quantize(lambda x: x @ W, cfg))(X)
    assert products(closed) == [INT8]


def test_int4_weights_in_int8_containers():
    cfg = QuantizeConfig(weight_dtype="int4", activation_dtype="int4")
    got = np.asarray(funcgrad.quantize(lambda x: x @ W, cfg)(X))
    np.testing.assert_allclose(got, ref.matmul_dynamic(X, W, qmax=7), rtol=1e-5, atol=1e-5)


def test_affine_weights_and_activations():
    cfg = QuantizeConfig(symmetric=False, activation_symmetric=False)
    x = X + 1.0                       # skewed, so zero points are not 0
    got = np.asarray(funcgrad.quantize(lambda x: x @ W, cfg)(x))
    qx, sx, zx = ref.affine_quant(x, (1,))
    qw, sw, zw = ref.affine_quant(W, (0,))
    want = ((qx - zx) @ (qw - zw)) * sx * sw
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.abs(zx).max() > 0 and np.abs(zw).max() > 0


def test_fp8_e4m3_products():
    cfg = QuantizeConfig(weight_dtype="fp8_e4m3", activation_dtype="fp8_e4m3")
    closed = funcgrad.make_jaxpr(funcgrad.quantize(lambda x: x @ W, cfg))(X)
    assert products(closed) == [(("float8_e4m3fn", "float8_e4m3fn"), "float32")]
    got = np.asarray(funcgrad.quantize(lambda x: x @ W, cfg)(X))
    sx = np.abs(X).max(1, keepdims=True) / np.float32(448)
    sw = np.abs(W).max(0, keepdims=True) / np.float32(448)
    qx = (X / sx).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    qw = (W / sw).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_allclose(got, (qx @ qw) * sx * sw, rtol=1e-5, atol=1e-5)


def test_weight_only_dequantizes_int8_weights():
    cfg = QuantizeConfig(activation="none")
    closed = funcgrad.make_jaxpr(funcgrad.quantize(lambda x: x @ W, cfg))(X)
    assert products(closed) == [F32]
    assert "int8" in [str(v.aval.dtype) for v in closed.jaxpr.constvars]
    got = np.asarray(funcgrad.quantize(lambda x: x @ W, cfg)(X))
    qw, sw = ref.sym_quant(W, (0,))
    np.testing.assert_allclose(got, X.astype(np.float64) @ (qw * sw), rtol=1e-5, atol=1e-5)


def test_batched_dot_general_dimension_numbers():
    # batch axis 0 on both, contracting lhs axis 2 with rhs axis 1, rhs free axis 2
    a = RNG.normal(size=(3, 4, 6)).astype(np.float32)
    b = RNG.normal(size=(3, 6, 5)).astype(np.float32)
    dn = (((2,), (1,)), ((0,), (0,)))
    f = lambda a, b: lax.dot_general(a, b, dn)
    got = np.asarray(funcgrad.quantize(f)(a, b))
    want = np.stack([ref.matmul_dynamic(a[i], b[i]) for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_weight_argnums_makes_the_lhs_the_weight():
    # w @ x with w named as the weight: w per row (its output channels), x per column
    w, x = W.T.copy(), X.T.copy()
    cfg = QuantizeConfig(weight_argnums=(0,))
    got = np.asarray(funcgrad.quantize(lambda w, x: w @ x, cfg)(w, x))
    np.testing.assert_allclose(got, ref.matmul_dynamic(X, W).T, rtol=1e-5, atol=1e-5)
    # without it the rhs is the weight: scales then go per column of w... differently
    other = np.asarray(funcgrad.quantize(lambda w, x: w @ x)(w, x))
    qw, sw = ref.sym_quant(w, (1,))
    qx, sx = ref.sym_quant(x, (0,))
    np.testing.assert_allclose(other, (qw @ qx) * sw * sx, rtol=1e-5, atol=1e-5)


def test_convolution_per_example_and_per_output_channel():
    x = RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)
    k = RNG.normal(size=(6, 3, 3, 3)).astype(np.float32)
    f = lambda x: lax.conv_general_dilated(x, k, (1, 1), [(1, 1), (1, 1)])
    closed = funcgrad.make_jaxpr(funcgrad.quantize(f))(x)
    assert products(closed) == [INT8]
    got = np.asarray(funcgrad.quantize(f)(x))
    qx, sx = ref.sym_quant(x, (1, 2, 3))
    qk, sk = ref.sym_quant(k, (1, 2, 3))
    want = ref.conv2d_nchw(qx, qk, 1) * sx * sk.reshape(1, 6, 1, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    # affine activations: the zero point's contribution accounts for the zero padding
    cfg = QuantizeConfig(activation_symmetric=False)
    got = np.asarray(funcgrad.quantize(f, cfg)(x + 1.0))
    qx, sx, zx = ref.affine_quant(x + 1.0, (1, 2, 3))
    want = ref.conv2d_nchw(qx - zx, qk, 1) * sx * sk.reshape(1, 6, 1, 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_selection_by_size_predicate_and_kind():
    small = RNG.normal(size=(16, 2)).astype(np.float32)
    f = lambda x: (x @ W).sum() + (x @ small).sum()
    cfg = QuantizeConfig(min_weight_size=100)
    assert sorted(products(funcgrad.make_jaxpr(funcgrad.quantize(f, cfg))(X))) == \
        sorted([INT8, F32])
    seen = []
    cfg = QuantizeConfig(select=lambda info: seen.append(info) or info.rhs_shape == (16, 2))
    found = products(funcgrad.make_jaxpr(funcgrad.quantize(f, cfg))(X))
    assert sorted(found) == sorted([INT8, F32])
    assert [i.weight_shape for i in seen] == [(16, 8), (16, 2)]
    assert [i.path for i in seen] == [(0,), (2,)]
    k = np.ones((2, 3, 3, 3), np.float32)
    g = lambda x: lax.conv_general_dilated(x, k, (1, 1), "VALID")
    found = products(funcgrad.make_jaxpr(funcgrad.quantize(g, convolutions=False))(
        np.ones((1, 3, 5, 5), np.float32)))
    assert found == [F32]


def test_integer_products_are_left_alone():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = funcgrad.quantize(lambda a: a @ a.T)(a)
    np.testing.assert_array_equal(np.asarray(out), a @ a.T)


def test_composition_with_jit_vmap_and_make_jaxpr():
    f = lambda x: jnp.tanh(x @ W)
    qf = funcgrad.quantize(f)
    eager = np.asarray(qf(X))
    np.testing.assert_allclose(np.asarray(funcgrad.jit(qf)(X)), eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.quantize(funcgrad.jit(f))(X)), eager,
                               rtol=1e-6, atol=1e-6)
    # vmap over rows: each row is its own (1, 16) product, per-row scales are the same
    rows = np.asarray(funcgrad.vmap(qf)(X[:, None, :]))[:, 0]
    np.testing.assert_allclose(rows, eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(funcgrad.vmap(qf))(X[:, None, :]))[:, 0],
                               eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(funcgrad.quantize(funcgrad.vmap(f))(X)), eager,
                               rtol=1e-6, atol=1e-6)
    assert INT8 in products(funcgrad.make_jaxpr(funcgrad.jit(qf))(X))
    assert INT8 in products(funcgrad.make_jaxpr(funcgrad.vmap(qf))(X[:, None, :]))


def test_weights_as_traced_arguments_are_quantized_at_run_time():
    f = lambda w, x: x @ w
    got = np.asarray(funcgrad.jit(funcgrad.quantize(f))(W, X))
    np.testing.assert_allclose(got, ref.matmul_dynamic(X, W), rtol=1e-5, atol=1e-5)


def test_quantize_jaxpr_keeps_the_signature():
    closed = funcgrad.make_jaxpr(lambda x: x @ W)(X)
    new = quantize_jaxpr(closed, QuantizeConfig())
    assert new.in_avals == closed.in_avals and new.out_avals == closed.out_avals
    np.testing.assert_allclose(np.asarray(new(X)[0]), ref.matmul_dynamic(X, W), rtol=1e-5,
                               atol=1e-5)


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="static_ranges"):
        funcgrad.quantize(lambda x: x @ W, activation="static")(X)
    with pytest.raises(ValueError, match="block_size 5 does not divide the contracted size 16"):
        funcgrad.quantize(lambda x: x @ W, granularity="per_block", block_size=5)(X)
    with pytest.raises(ValueError, match="per_block granularity needs a positive int"):
        QuantizeConfig(granularity="per_block")
    with pytest.raises(ValueError, match="one format family"):
        QuantizeConfig(weight_dtype="fp8_e4m3")
    with pytest.raises(ValueError, match="unknown quantized format 'int9'"):
        QuantizeConfig(weight_dtype="int9")
    with pytest.raises(TypeError, match="expected a function"):
        funcgrad.quantize(3)
    with pytest.raises(TypeError, match="must be arrays or pytrees of arrays"):
        funcgrad.quantize(lambda x, s: x @ W)(X, "relu")


def test_module_is_callable_and_exports():
    assert callable(funcgrad.quantize)
    assert funcgrad.quantize.Config is QuantizeConfig
    assert callable(funcgrad.quantize.calibrate)


def test_int_mode_derivative_is_the_float_products():
    # the rounding has no useful derivative; the int product differentiates as the float one
    f = lambda x: jnp.sum(funcgrad.quantize(lambda x: x @ W)(x) * 2.0)
    np.testing.assert_allclose(np.asarray(funcgrad.grad(f)(X)), 2.0 * np.ones((4, 8)) @ W.T,
                               rtol=1e-5)
    g = lambda w: jnp.sum(funcgrad.quantize(lambda w, x: x @ w)(w, X))
    np.testing.assert_allclose(np.asarray(funcgrad.jit(funcgrad.grad(g))(W)),
                               X.T @ np.ones((4, 8)), rtol=1e-5)


def test_int4_per_block_weight_only_like_torchaos_int4_config():
    cfg = QuantizeConfig(weight_dtype="int4", granularity="per_block", block_size=8,
                         activation="none")
    got = np.asarray(funcgrad.quantize(lambda x: x @ W, cfg)(X))
    blocks = W.reshape(2, 8, 8)                 # (block, within block, output channel)
    qw, sw = ref.sym_quant(blocks, (1,), qmax=7)
    w_deq = (qw * sw).reshape(16, 8)
    np.testing.assert_allclose(got, X.astype(np.float64) @ w_deq, rtol=1e-5, atol=1e-5)
    closed = funcgrad.make_jaxpr(funcgrad.quantize(lambda x: x @ W, cfg))(X)
    assert [str(v.aval.dtype) for v in closed.jaxpr.constvars][:1] == ["int8"]
    assert all(-8 <= v <= 7 for v in np.asarray(closed.consts[0]).ravel())


def test_weight_only_convolution():
    x = RNG.normal(size=(1, 2, 6, 6)).astype(np.float32)
    k = RNG.normal(size=(4, 2, 3, 3)).astype(np.float32)
    f = lambda x: lax.conv_general_dilated(x, k, (1, 1), "VALID")
    got = np.asarray(funcgrad.quantize(f, activation="none")(x))
    qk, sk = ref.sym_quant(k, (1, 2, 3))
    np.testing.assert_allclose(got, ref.conv2d_nchw(x, qk * sk, 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("lhs_shape,rhs_shape,dnums", [
    ((3, 4, 5), (5, 4, 6), (((1, 2), (1, 0)), ((), ()))),      # two contracted axes
    ((2, 5, 3), (6, 5, 2), (((1,), (1,)), ((0,), (2,)))),      # batch axes in odd places
    ((5, 3), (6, 5), (((0,), (1,)), ((), ()))),                # x.T @ w.T
    ((4, 2, 5), (5, 3, 7), (((2,), (0,)), ((), ()))),          # several free axes
])
def test_any_dimension_numbers(lhs_shape, rhs_shape, dnums):
    rng = np.random.default_rng(7)
    a = rng.normal(size=lhs_shape).astype(np.float32)
    b = rng.normal(size=rhs_shape).astype(np.float32)
    (lc, rc), _ = dnums
    got = np.asarray(funcgrad.jit(funcgrad.quantize(lambda a, b: lax.dot_general(a, b, dnums)))(
        a, b))
    qa, sa = ref.sym_quant(a, lc)
    qb, sb = ref.sym_quant(b, rc)
    want = ref.dot_general(qa * sa, qb * sb, dnums)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
