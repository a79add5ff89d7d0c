"""Every foundation primitive's jvp/transpose rule against finite differences (check_grads),
and the rule checklist."""

import numpy as np
import pytest

import funcgrad
from funcgrad.test_util import registered_primitives
import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.test_util import check_grads

rng = np.random.default_rng(0)
X = rng.uniform(0.2, 0.8, (2, 3))          # in the domain of every unary function below
Y = rng.uniform(0.3, 0.9, (2, 3))
POS = rng.uniform(1.2, 2.0, (2, 3))
I = np.array([1, 0, 1], np.int32)

UNARY = {
    "neg": lax.neg, "exp": lax.exp, "log": lax.log, "log1p": lax.log1p, "expm1": lax.expm1,
    "tanh": lax.tanh, "logistic": lax.logistic, "sin": lax.sin, "cos": lax.cos,
    "tan": lax.tan, "asin": lax.asin, "acos": lax.acos, "atan": lax.atan, "sinh": lax.sinh,
    "cosh": lax.cosh, "asinh": lax.asinh, "atanh": lax.atanh, "sqrt": lax.sqrt,
    "rsqrt": lax.rsqrt, "cbrt": lax.cbrt, "abs": lambda x: lax.abs(x - 0.5),
    "square": lax.square, "reciprocal": lax.reciprocal,
    "integer_pow3": lambda x: lax.integer_pow(x, 3),
    "integer_pow-2": lambda x: lax.integer_pow(x, -2),
    "acosh": lambda x: lax.acosh(x + 1.5),
    "convert": lambda x: lax.convert_element_type(
        lax.convert_element_type(x, np.complex128) * (1.0 + 2.0j), np.float64),
    "sign_floor_round": lambda x: x * lax.sign(x) + lax.floor(x) + lax.ceil(x) + lax.round(x),
}

BINARY = {
    "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "pow": lax.pow,
    "max": lax.max, "min": lax.min, "atan2": lax.atan2, "rem": lambda x, y: lax.rem(x, y * 0.3),
    "select": lambda x, y: lax.select(x > y, x, y * 2.0),
    "select_n3": lambda x, y: lax.select_n(np.array([[0, 1, 2], [2, 1, 0]], np.int32),
                                           x, y, x * y),
    "clamp": lambda x, y: lax.clamp(0.4, x, 0.7) * y,
    "clamp_bounds": lambda x, y: lax.clamp(x * 0.5, y, x + 0.2),
    "complex_parts": lambda x, y: lax.real(lax.complex(x, y) * lax.complex(y, x))
    + lax.imag(lax.conj(lax.complex(x, y)) ** 2),
}

SHAPES = {
    "broadcast_in_dim": lambda x: lax.broadcast_in_dim(x[0], (4, 3), (1,)),
    "broadcast_expand": lambda x: lax.broadcast_in_dim(x[:1], (2, 2, 3), (1, 2)),
    "reshape": lambda x: lax.reshape(x, (3, 2)),
    "transpose": lambda x: lax.transpose(x, (1, 0)),
    "squeeze_expand": lambda x: lax.squeeze(lax.expand_dims(x, (0, 2)), (0,)),
    "concatenate": lambda x: lax.concatenate([x, x * 2.0, lax.sin(x)], 1),
    "pad": lambda x: lax.pad(x, 0.5, [(1, -1, 1), (0, 2, 0)]),
    "pad_value": lambda x: lax.pad(x, x[0, 0], [(1, 1, 0), (2, 0, 1)]),
    "slice": lambda x: lax.slice(x, (0, 1), (2, 3), (1, 2)),
    "split": lambda x: (lambda a, b, c: a * 2.0 + lax.sin(c) * b[:, :1])(
        *lax.split(x, (1, 1, 1), 1)),
    "split_unused_piece": lambda x: lax.split(x, (2, 1), 1)[1] ** 2,
    "rev": lambda x: lax.rev(x, (0, 1)),
}

REDUCTIONS = {
    "reduce_sum": lambda x: lax.reduce_sum(x, (1,)),
    "reduce_max": lambda x: lax.reduce_max(x, (0, 1)),
    "reduce_min": lambda x: lax.reduce_min(x, (0,)),
    "reduce_prod": lambda x: lax.reduce_prod(x, (1,)),
    "reduce_prod_zero": lambda x: lax.reduce_prod(x * np.array([[1., 0., 1.], [0., 1., 0.]]),
                                                  (0, 1)),
    "cumsum": lambda x: lax.cumsum(x, 1, reverse=True),
    "cumprod": lambda x: lax.cumprod(x, 1),
    "cummax": lambda x: lax.cummax(x, 1),
    "cummin": lambda x: lax.cummin(x, 0, reverse=True),
    "argmax_masked": lambda x: x * lax.argmax(x, 1, "int32")[:, None],
}

INDEXING = {
    "dynamic_slice": lambda x: lax.dynamic_slice(x, (np.int32(1), np.int32(1)), (1, 2)),
    "dynamic_update_slice": lambda x: lax.dynamic_update_slice(
        x, x[:1, :2] * 3.0, (np.int32(1), np.int32(0))),
    "gather": lambda x: x[np.array([1, 0, 1])],
    "gather_fill": lambda x: jnp.asarray(x).at[np.array([0, 5])].get(mode="fill",
                                                                       fill_value=0.0),
    "scatter_add": lambda x: jnp.zeros((4, 3), x.dtype).at[np.array([0, 2, 2])].add(x[:1] * x[1:]),
    "scatter": lambda x: jnp.asarray(x).at[np.array([0, 1, 1])].set(jnp.sin(x[:1]) * 2.0),
    "scatter_mul": lambda x: jnp.asarray(x).at[np.array([1, 1])].multiply(x[:1] + 1.0),
    "scatter_max": lambda x: jnp.asarray(x).at[np.array([0, 0])].max(x[::-1] + 0.1),
    "scatter_min": lambda x: jnp.asarray(x).at[np.array([1])].min(x[:1]),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    check_grads(UNARY[name], (X,), 2)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    check_grads(BINARY[name], (X, Y), 2)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shapes(name):
    check_grads(SHAPES[name], (X,), 2)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions(name):
    check_grads(REDUCTIONS[name], (X,), 2)


@pytest.mark.parametrize("name", sorted(INDEXING))
def test_indexing(name):
    check_grads(INDEXING[name], (X,), 2)


@pytest.mark.parametrize("dn", [
    (((1,), (0,)), ((), ())),           # matmul
    (((0,), (1,)), ((), ())),           # x^T y^T
    (((1,), (1,)), ((0,), (0,))),       # batched dot
    (((), ()), ((), ())),               # outer product
])
def test_dot_general(dn):
    lhs = rng.standard_normal((2, 3))
    rhs = {(((1,), (0,)), ((), ())): rng.standard_normal((3, 2)),
           (((0,), (1,)), ((), ())): rng.standard_normal((4, 2)),
           (((1,), (1,)), ((0,), (0,))): rng.standard_normal((2, 3)),
           (((), ()), ((), ())): rng.standard_normal((2,))}[dn]
    check_grads(lambda a, b: lax.dot_general(a, b, dn), (lhs, rhs), 2)


def test_dot_general_batch_and_contract_3d():
    a = rng.standard_normal((2, 3, 4))
    b = rng.standard_normal((2, 4, 5))
    check_grads(lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))), (a, b), 2)
    c = rng.standard_normal((4, 2, 3))
    check_grads(lambda x, y: lax.dot_general(x, y, (((0, 2), (1, 0)), ((), ()))),
                (rng.standard_normal((3, 5, 4)), rng.standard_normal((4, 3, 2))), 1)
    del c


@pytest.mark.parametrize("dn, shapes, transposes", [
    # x @ w.T with w (out, in), as nn.Linear: both cotangents come out in order, no transpose
    ((((1,), (1,)), ((), ())), ((5, 3), (4, 3)), 0),
    # x @ w with w (in, out)
    ((((1,), (0,)), ((), ())), ((5, 3), (3, 4)), 0),
    # x.T @ w.T: both come out in order when the factors are swapped
    ((((0,), (1,)), ((), ())), ((3, 5), (4, 3)), 0),
    # contracting the lhs's middle axis with a vector: its cotangent (an outer product) needs
    # a transpose whichever way round it is computed
    ((((1,), (0,)), ((), ())), ((2, 3, 4), (3,)), 1),
    # batched, contracting the lhs's middle axis against the rhs's last one
    ((((1,), (2,)), ((0,), (0,))), ((2, 3, 5), (2, 4, 3)), 0),
])
def test_dot_general_cotangents_in_order(dn, shapes, transposes):
    """The cotangents of dot_general are products laid out as their operand wherever one order
    of the two factors gives that layout (a transposed weight gradient costs XLA a copy), and
    they are still right (checked against float64 finite differences)."""
    a, b = (rng.standard_normal(s) for s in shapes)
    f = lambda x, y: lax.dot_general(x, y, dn)   # noqa: E731
    check_grads(f, (a, b), 2)
    jaxpr = funcgrad.make_jaxpr(funcgrad.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1)))(a, b)
    assert [e.prim.name for e in jaxpr.jaxpr.eqns].count("transpose") == transposes


def test_complex_holomorphic_unary():
    z = X + 1j * Y
    for f in (lax.sin, lax.exp, lax.log, lambda v: v * v, lax.tanh, lax.sqrt):
        check_grads(f, (z,), 2)


def test_complex_abs_and_parts():
    z = X + 1j * Y
    check_grads(lambda v: lax.abs(v), (z,), 2)
    check_grads(lambda v: lax.real(v) * lax.imag(v), (z,), 2)


def test_stop_gradient():
    f = lambda x: x * lax.stop_gradient(x)
    np.testing.assert_allclose(funcgrad.grad(f)(3.0), 3.0)
    np.testing.assert_allclose(funcgrad.jit(funcgrad.grad(f))(3.0), 3.0)
    tree = lax.stop_gradient({"a": jnp.ones(2)})
    np.testing.assert_allclose(tree["a"], np.ones(2))


# --- the rule checklist ---------------------------------------------------------------------
def _all_lax_primitives():
    return registered_primitives()


# Linear primitives: applied to tangents by jvp rules, so reverse mode needs their transpose.
LINEAR = {
    "neg", "add", "sub", "mul", "div", "convert_element_type", "real", "imag", "conj",
    "complex", "select_n", "dot_general", "broadcast_in_dim", "reshape", "transpose",
    "squeeze", "expand_dims", "concatenate", "pad", "slice", "split", "rev", "reduce_sum", "cumsum",
    "dynamic_slice", "dynamic_update_slice", "gather", "scatter_add", "scatter_mul", "jit",
    "remat", "custom_lin",
}

# Genuinely non-differentiable primitives: their jvp rule must still exist and give zero
# (float0 for integer/bool outputs) tangents.
NON_DIFFERENTIABLE = {
    "sign", "floor", "ceil", "round", "is_finite", "not", "population_count", "clz",
    "nextafter", "and", "or", "xor", "shift_left", "shift_right_arithmetic",
    "shift_right_logical", "eq", "ne", "lt", "le", "gt", "ge", "bitcast_convert_type", "iota",
    "reduce_and", "reduce_or", "reduce_xor", "argmax", "argmin",
}


def test_every_primitive_has_a_jvp_rule():
    missing = sorted(where for p, where in _all_lax_primitives().items() if p.jvp is None)
    assert not missing, f"primitives without a jvp rule (prim.def_jvp): {missing}"


def test_linear_primitives_have_transpose_rules():
    from funcgrad.transforms import custom_derivatives
    prims = dict(_all_lax_primitives())
    prims[custom_derivatives.custom_lin_p] = "custom_lin_p"
    by_name = {p.name: p for p in prims}
    missing = sorted(n for n in LINEAR if n in by_name and by_name[n].transpose is None)
    assert not missing, f"linear primitives without a transpose rule: {missing}"
    assert LINEAR <= set(by_name), sorted(LINEAR - set(by_name))


@pytest.mark.parametrize("name", sorted(NON_DIFFERENTIABLE - {"iota"}))
def test_non_differentiable_rules_give_zero_tangents(name):
    from funcgrad.core import dtypes
    prims = {p.name: p for p in _all_lax_primitives()}
    p = prims[name]
    if name in ("and", "or", "xor", "shift_left", "shift_right_arithmetic",
                "shift_right_logical", "not", "population_count", "clz"):
        args = (I,) if name in ("not", "population_count", "clz") else (I, I)
        params = {}
    elif name in ("reduce_and", "reduce_or", "reduce_xor"):
        args, params = (I,), {"axes": (0,)}
    elif name in ("argmax", "argmin"):
        args, params = (X,), {"axes": (1,), "index_dtype": np.dtype(np.int32)}
    elif name == "round":
        args, params = (X,), {"rounding_method": 0}
    elif name == "bitcast_convert_type":
        args, params = (X.astype(np.float32),), {"new_dtype": np.dtype(np.int32)}
    elif name in ("sign", "floor", "ceil", "is_finite"):
        args, params = (X.astype(np.float32),), {}
    else:
        args, params = (X.astype(np.float32), Y.astype(np.float32)), {}
    args = tuple(np.asarray(a) for a in args)
    tangents = [np.ones_like(a) if a.dtype.kind == "f" else np.zeros(a.shape, dtypes.float0)
                for a in args]
    out, t = funcgrad.jvp(lambda *xs: p.bind(*xs, **params), args, tuple(tangents))
    t = np.asarray(t)
    if t.dtype == dtypes.float0:
        assert t.shape == np.shape(out)
    else:
        assert not np.any(t)
