"""The lowering choices made for speed: one variadic reduction for traced ranges, products
with the weight in (in, out) layout (concrete weights transposed once at trace time, a
recurrent weight once outside its loop). Each must leave the numbers unchanged."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import nn
from funcgrad.quantization import products
from funcgrad.quantization.modules import DynamicQuantizedLSTM, quantize_weight_values
from funcgrad.quantize import QuantizeConfig, schemes
from tests.quantize import reference as ref
from tests.quantize.test_rewrite import INT8, all_eqns

RNG = np.random.default_rng(3)


def eqn_names(jaxpr):
    return [e.prim.name for e in jaxpr.eqns]


@pytest.mark.parametrize("axes", [(1,), (0, 1), (0,)])
def test_traced_range_is_one_reduction_with_numpys_values(axes):
    x = RNG.normal(size=(5, 7)).astype(np.float32)
    x[2] = np.abs(x[2]) + 1.0                    # a row of positives only
    f = lambda a: schemes.reduced_range(a, axes, jnp)
    closed = funcgrad.make_jaxpr(f)(x)
    reduces = [e for e in closed.jaxpr.eqns if e.prim.name == "reduce"]
    assert len(reduces) == 1 and len(reduces[0].outvars) == 2
    assert not any(n.startswith(("reduce_max", "reduce_min")) for n in eqn_names(closed.jaxpr))
    lo, hi = funcgrad.jit(f)(x)
    want_lo, want_hi = schemes.reduced_range(x, axes)        # NumPy's min and max
    np.testing.assert_array_equal(np.asarray(lo), want_lo)
    np.testing.assert_array_equal(np.asarray(hi), want_hi)
    assert np.asarray(lo).shape == want_lo.shape


def test_traced_range_under_vmap():
    x = RNG.normal(size=(3, 4, 6)).astype(np.float32)
    lo, hi = funcgrad.vmap(lambda a: schemes.reduced_range(a, (0, 1), jnp))(x)
    np.testing.assert_array_equal(np.asarray(lo).ravel(), x.min(axis=(1, 2)))
    np.testing.assert_array_equal(np.asarray(hi).ravel(), x.max(axis=(1, 2)))


def test_concrete_weight_of_x_at_w_transposed_is_stored_in_out_layout():
    w = RNG.normal(size=(8, 16)).astype(np.float32)          # (out, in), as nn.Linear
    x = RNG.normal(size=(4, 16)).astype(np.float32)
    f = lambda a: a @ w.T
    closed = funcgrad.make_jaxpr(funcgrad.quantize(f))(x)
    dots = [e for e in all_eqns(closed.jaxpr) if e.prim.name == "dot_general"]
    assert len(dots) == 1
    lhs, rhs = (v.aval for v in dots[0].invars)
    assert ((str(lhs.dtype), str(rhs.dtype)), str(dots[0].outvars[0].aval.dtype)) == INT8
    assert tuple(rhs.shape) == (16, 8)                       # (in, out): transposed once
    assert dots[0].params["dimension_numbers"][0] == ((1,), (0,))
    got = np.asarray(funcgrad.quantize(f)(x))
    np.testing.assert_allclose(got, ref.matmul_dynamic(x, w.T), rtol=1e-5, atol=1e-5)
    # the same weight reaching the product traced (quantized at run time, not transposed)
    traced = funcgrad.quantize(lambda a, v: a @ v.T, QuantizeConfig(weight_argnums=(1,)))
    np.testing.assert_allclose(got, np.asarray(traced(x, w)), rtol=0, atol=1e-6)


def test_transposed_affine_weights_keep_their_zero_points():
    w = (RNG.normal(size=(6, 10)) + 0.5).astype(np.float32)
    x = RNG.normal(size=(3, 10)).astype(np.float32)
    cfg = QuantizeConfig(symmetric=False, activation_symmetric=False)
    got = np.asarray(funcgrad.quantize(lambda a: a @ w.T, cfg)(x))
    traced = funcgrad.quantize(lambda a, v: a @ v.T, cfg.replace(weight_argnums=(1,)))
    np.testing.assert_allclose(got, np.asarray(traced(x, w)), rtol=0, atol=1e-6)
    qx, sx, zx = ref.affine_quant(x, (1,))                 # the scheme, in NumPy
    qw, sw, zw = ref.affine_quant(w.T, (0,))
    np.testing.assert_allclose(got, ((qx - zx) @ (qw - zw)) * sx * sw, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cfg", [products.DYNAMIC_X86, products.STATIC, products.WEIGHT_ONLY])
def test_linear_product_pretransposed_weight_is_the_same_product(cfg):
    w = RNG.normal(size=(12, 20)).astype(np.float32)
    s = (np.abs(w).max(axis=1) / 127).astype(np.float32)
    qw = quantize_weight_values(w, s, np.zeros(12), 0)
    x = jnp.asarray(np.abs(RNG.normal(size=(5, 20))).astype(np.float32))
    extra = (jnp.array([0.02]), jnp.array([3])) if cfg is products.STATIC else ()
    a = products.linear_product(x, jnp.asarray(qw), jnp.asarray(s), 0, cfg, *extra)
    b = products.linear_product(x, jnp.asarray(np.ascontiguousarray(qw.T)), jnp.asarray(s), 0,
                                cfg, *extra, transposed=True)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    xs = np.asarray(x)
    if cfg is products.DYNAMIC_X86:              # per tensor, affine, [0, 127]
        qx, sx, zx = ref.affine_quant(xs, (0, 1), 0, 127)
        want = ((qx - zx) @ qw.T.astype(np.int64)) * sx * s
    elif cfg is products.STATIC:
        qx = np.clip(np.round(xs / np.float32(0.02)) + 3, 0, 255)
        want = ((qx - 3) @ qw.T.astype(np.float64)) * np.float32(0.02) * s
    else:
        want = xs @ (qw.astype(np.float32) * s[:, None]).T
    np.testing.assert_allclose(np.asarray(a), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("precision", [None, "highest"])
def test_float_products_follow_default_matmul_precision(precision):
    # the dequantized (weight-only) float products of the quantized modules take
    # default_matmul_precision as lax.dot_general does (a GPU's TensorFloat-32 otherwise);
    # integers multiplied as floats need no more (TensorFloat-32 holds them exactly)
    w = RNG.normal(size=(12, 20)).astype(np.float32)
    s = (np.abs(w).max(axis=1) / 127).astype(np.float32)
    qw = jnp.asarray(quantize_weight_values(w, s, np.zeros(12), 0))
    x = RNG.normal(size=(5, 20)).astype(np.float32)
    kernel = jnp.asarray(RNG.integers(-127, 128, size=(4, 3, 3, 3)).astype(np.int8))
    img = RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)
    with funcgrad.default_matmul_precision(precision):
        dot = funcgrad.make_jaxpr(lambda a: products.linear_product(
            a, qw, jnp.asarray(s), 0, products.WEIGHT_ONLY))(x)
        conv = funcgrad.make_jaxpr(lambda a: products.conv_product(
            a, kernel, jnp.asarray(np.full(4, 0.01, np.float32)), 0, products.WEIGHT_ONLY,
            (1, 1), ((1, 1), (1, 1)), (1, 1), 1))(img)
    want = None if precision is None else ("HIGHEST", "HIGHEST")
    for closed, name in ((dot, "dot_general"), (conv, "conv_general_dilated")):
        eqns = [e for e in all_eqns(closed.jaxpr) if e.prim.name == name
                and str(e.invars[0].aval.dtype) == "float32"]
        assert eqns and all(e.params["precision"] == want for e in eqns), name


def test_quantized_lstm_transposes_the_recurrent_weight_outside_its_loop():
    funcgrad.manual_seed(0)
    lstm = nn.LSTM(6, 8)
    q = DynamicQuantizedLSTM.from_float(lstm)
    x = jnp.asarray(RNG.normal(size=(5, 2, 6)).astype(np.float32))
    closed = funcgrad.make_jaxpr(lambda m, v: m(v)[0])(q, x)
    scans = [e for e in all_eqns(closed.jaxpr) if e.prim.name == "scan"]
    assert len(scans) == 1
    # the input projection is scanned as one array per gate (one array read at four offsets
    # made XLA:CPU's cell kernel several times slower)
    params = scans[0].params
    xs = scans[0].invars[params["num_consts"] + params["num_carry"]:]
    assert [tuple(v.aval.shape) for v in xs] == [(5, 2, 8)] * 4
    body = scans[0].params["jaxpr"].jaxpr
    body_eqns = list(all_eqns(body))
    # (scales are moved to the output's layout by transposes of size-1 axes, which is free)
    moved = [tuple(e.invars[0].aval.shape) for e in body_eqns if e.prim.name == "transpose"]
    assert all(np.prod(shape) == max(shape) for shape in moved), moved
    dots = [e for e in body_eqns if e.prim.name == "dot_general"]
    assert [tuple(e.invars[1].aval.shape) for e in dots] == [(8, 32)]      # (in, out)
    # one range reduction per step (the dynamic quantization of the hidden state)
    assert [e.prim.name for e in body_eqns].count("reduce") == 1
    out_q = np.asarray(funcgrad.jit(lambda m, v: m(v)[0])(q, x))
    out_f = np.asarray(lstm(x)[0])
    assert np.abs(out_q - out_f).max() < 0.03
