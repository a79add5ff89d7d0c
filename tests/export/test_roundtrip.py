"""funcgrad.export round trips: export, serialize, deserialize, save, load and call give the
values of the original function (NumPy references), for functions, jitted functions, modules,
pytrees of arguments and results, constants and integer arguments."""
import collections

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import export, nn

rng = np.random.default_rng(0)


def _f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _roundtrips(exp):
    """The exported object, its deserialized bytes, and a file saved and loaded."""
    return [exp, export.deserialize(exp.serialize())]


def test_function_of_a_pytree_with_kwargs_and_constants():
    table = _f32(3, 2)             # closed over: stored as a constant

    def f(xs, scale, *, bias):
        return {"prod": jnp.tanh(xs[0] @ xs[1]) * scale, "sum": (xs[0].sum() + bias, None)}

    args = ([_f32(2, 3), _f32(3, 3)], np.float32(2.0))
    kw = {"bias": np.float32(0.5)}
    g = lambda xs, scale, *, bias: f(xs, scale, bias=bias) | {"t": xs[1] @ table}  # noqa: E731
    exp = export.export(g)(*args, **kw)
    assert exp.in_tree == funcgrad.tree_util.tree_structure((args, kw))
    assert exp.weight_names == ("const.0",)
    want_prod = np.tanh(args[0][0] @ args[0][1]) * 2.0
    for e in _roundtrips(exp):
        out = e.call(*args, **kw)
        assert set(out) == {"prod", "sum", "t"} and out["sum"][1] is None
        np.testing.assert_allclose(out["prod"], want_prod, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out["sum"][0], args[0][0].sum() + 0.5, rtol=1e-5)
        np.testing.assert_allclose(out["t"], args[0][1] @ table, rtol=1e-5, atol=1e-6)


def test_jitted_function_and_shape_dtype_struct_arguments():
    f = funcgrad.jit(lambda x, i: jnp.sin(x) * i.astype(jnp.float32))
    exp = export.export(f)(funcgrad.ShapeDtypeStruct((4,), jnp.float32),
                           funcgrad.ShapeDtypeStruct((4,), jnp.int32))
    assert exp.fun_name == "<lambda>"
    assert [(a.shape, a.dtype) for a in exp.in_avals] == [((4,), np.float32), ((4,), np.int32)]
    assert exp.out_avals == (funcgrad.ShapeDtypeStruct((4,), jnp.float32),)
    x, i = _f32(4), np.arange(4, dtype=np.int32)
    for e in _roundtrips(exp):
        np.testing.assert_allclose(e.call(x, i), np.sin(x) * i, rtol=1e-6)


def test_static_arguments_of_a_jitted_function_are_fixed_at_export():
    f = funcgrad.jit(lambda x, n, *, mode: x ** n if mode == "pow" else x * n,
                     static_argnums=1, static_argnames="mode")
    exp = export.deserialize(export.export(f)(_f32(3), 3, mode="pow").serialize())
    assert len(exp.in_avals) == 1
    x = _f32(3)
    np.testing.assert_allclose(exp.call(x), x ** 3, rtol=1e-6)


class _ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3, padding=1)
        self.norm = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3 * 4 * 4, 5)

    def forward(self, x):
        h = funcgrad.nn.functional.relu(self.norm(self.conv(x)))
        return self.fc(h.reshape(h.shape[0], -1))


def test_module_weights_are_stored_and_match_the_state_dict(tmp_path):
    model = _ConvNet().eval()
    x = _f32(2, 1, 4, 4)
    exp = export.export(model)(x)
    state = {k: np.asarray(v) for k, v in model.state_dict().items()}
    stored = dict(zip(exp.weight_names, exp.weights))
    for name in ("conv.weight", "conv.bias", "fc.weight", "norm.running_mean"):
        np.testing.assert_array_equal(stored[name], state[name])
    path = tmp_path / "convnet.fgx"
    export.save(exp, path)
    for e in _roundtrips(exp) + [export.load(path)]:
        np.testing.assert_allclose(e.call(x), model(x), rtol=1e-5, atol=1e-5)


def test_exported_calls_compose_with_jit_and_inside_another_export():
    inner = export.deserialize(export.export(lambda x: x * 3.0 + 1.0)(_f32(3)).serialize())
    x = _f32(3)
    np.testing.assert_allclose(funcgrad.jit(lambda x: inner.call(x) ** 2)(x), (x * 3 + 1) ** 2,
                               rtol=1e-6)
    outer = export.export(lambda x: inner.call(inner.call(x)))(x)
    again = export.deserialize(outer.serialize())
    np.testing.assert_allclose(again.call(x), (x * 3 + 1) * 3 + 1, rtol=1e-5)
    assert "call @exported" in again.mlir_module()


def test_vmap_of_an_exported_function_loops_over_the_batch():
    w = _f32(3, 2)
    exp = export.deserialize(export.export(lambda x, w: jnp.tanh(x @ w))(_f32(3), w).serialize())
    xs = _f32(4, 3)
    np.testing.assert_allclose(funcgrad.vmap(exp.call, in_axes=(0, None))(xs, w),
                               np.tanh(xs @ w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(funcgrad.jit(funcgrad.vmap(exp.call, in_axes=(1, None)))(xs.T, w),
                               np.tanh(xs @ w), rtol=1e-5, atol=1e-6)


def test_mlir_module_is_stablehlo_text():
    exp = export.export(lambda x: jnp.exp(x))(_f32(2, 2))
    text = exp.mlir_module()
    assert text.startswith("module @funcgrad_") and "stablehlo.exponential" in text
    assert "tensor<2x2xf32>" in text


def test_calls_with_the_wrong_arguments_fail_clearly():
    exp = export.export(lambda x, y: x + y)(_f32(2), _f32(2))
    with pytest.raises(TypeError, match="structure"):
        exp.call(_f32(2))
    with pytest.raises(TypeError, match="argument leaf 1 has dtype int32.*float32"):
        exp.call(_f32(2), np.arange(2, dtype=np.int32))
    with pytest.raises(export.ShapeError, match=r"argument 0 has shape \(3,\), expected \(2,\)"):
        exp.call(_f32(3), _f32(2))
    scaled = export.export(lambda x, s: x * s)(_f32(2), np.float32(1))
    np.testing.assert_allclose(scaled.call(np.ones(2, np.float32), 1.5), [1.5, 1.5])  # a scalar
    with pytest.raises(TypeError, match="argument leaf 0: object is not a valid array type"):
        export.export(lambda x: x)(object())
    with pytest.raises(TypeError, match=r"export\(<lambda>\): output leaf 1 is a str"):
        export.export(lambda x: (x, "label"))(_f32(2))
    pair = collections.namedtuple("Pair", "a b")
    with pytest.raises(TypeError, match="result contains a Pair.*tuples, lists, dicts"):
        export.export(lambda x: pair(x, x))(_f32(2)).serialize()
    with pytest.raises(ValueError, match="host callback"):
        export.export(lambda x: funcgrad.pure_callback(np.sin, x, x))(_f32(2))


def test_export_of_a_module_does_not_change_it():
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    before = {k: np.asarray(v).copy() for k, v in model.state_dict().items()}
    exp = export.export(model)(_f32(5, 3))
    after = model.state_dict()
    for k in before:
        np.testing.assert_array_equal(before[k], after[k])
    assert exp.weight_names == ("0.weight", "0.bias", "2.weight", "2.bias")


def test_dtypes_round_trip(x64):
    def f(x, h, i):
        return x * 2.0, (h * 2).astype(jnp.float32), i // 2, jnp.arange(3)
    x = np.linspace(0, 1, 3)                                  # float64
    h = np.asarray(jnp.ones(3, jnp.bfloat16))
    i = np.array([4, 7, -3], np.int64)
    exp = export.deserialize(export.export(f)(x, h, i).serialize())
    assert [a.dtype.name for a in exp.in_avals] == ["float64", "bfloat16", "int64"]
    assert [a.dtype.name for a in exp.out_avals] == ["float64", "float32", "int64", "int64"]
    y, g, q, r = exp.call(x, h, i)
    np.testing.assert_array_equal(y, x * 2.0)
    np.testing.assert_array_equal(g, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(q, [2, 3, -2])
    np.testing.assert_array_equal(r, [0, 1, 2])
