"""Symbolic dimensions: one export runs for every size that meets the constraints, with values
equal to the function's at that size; mismatches raise ShapeError naming the rule broken."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import export, nn
from funcgrad.export import symbolic

rng = np.random.default_rng(1)


def _spec(text, dtype=jnp.float32):
    return funcgrad.ShapeDtypeStruct(export.symbolic_shape(text), dtype)


def test_symbolic_shape_parses_products_of_symbols_and_integers():
    assert export.symbolic_shape("b, 784") == (symbolic.Dim(1, {"b": 1}), 784)
    assert [str(d) for d in export.symbolic_shape("2*b, b*t, 3")] == ["2*b", "b*t", "3"]
    with pytest.raises(ValueError, match=r"symbolic_shape\('b \+ 1'\).*not supported"):
        export.symbolic_shape("b + 1")
    with pytest.raises(TypeError, match="expected a string"):
        export.symbolic_shape(("b", 3))


def test_one_export_runs_at_every_batch_size_after_a_round_trip():
    model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))
    exp = export.export(model)(_spec("b, 6"))
    assert exp.out_avals[0].shape == (symbolic.Dim(1, {"b": 1}), 2)
    loaded = export.deserialize(exp.serialize())
    for b in (1, 2, 7, 64, 2):
        x = rng.standard_normal((b, 6)).astype(np.float32)
        np.testing.assert_allclose(loaded.call(x), model(x), rtol=1e-5, atol=1e-6)
    assert loaded._runner.trace_count == 4          # one specialization per size


def test_a_mean_over_the_symbolic_axis_uses_the_actual_count():
    def loss(x, y):
        return jnp.mean((x - y) ** 2), jnp.sum(x, axis=0) / x.shape[0]
    exp = export.deserialize(export.export(loss)(_spec("b, 3"), _spec("b, 3")).serialize())
    for b in (1, 4, 9):
        x, y = rng.standard_normal((2, b, 3)).astype(np.float32)
        mse, avg = exp.call(x, y)
        np.testing.assert_allclose(mse, np.mean((x - y) ** 2), rtol=1e-5)
        np.testing.assert_allclose(avg, x.mean(axis=0), rtol=1e-5, atol=1e-6)


def test_two_symbols_reshapes_and_derived_sizes():
    def f(x):                        # x: (b, t, 4) -> (b*t, 4) and (b, 2*t*4) ... products
        flat = x.reshape(-1, 4)
        doubled = jnp.concatenate([x, x], axis=1).reshape(x.shape[0], -1)
        return flat * 2.0, doubled.sum(axis=1)
    exp = export.deserialize(export.export(f)(_spec("b, t, 4")).serialize())
    assert [str(d) for d in exp.out_avals[0].shape] == ["b*t", "4"]
    for b, t in ((1, 1), (2, 3), (5, 2)):
        x = rng.standard_normal((b, t, 4)).astype(np.float32)
        flat, total = exp.call(x)
        np.testing.assert_allclose(flat, x.reshape(-1, 4) * 2.0, rtol=1e-6)
        np.testing.assert_allclose(total, 2 * x.reshape(b, -1).sum(axis=1), rtol=1e-5,
                                   atol=1e-5)


def test_divisibility_and_constraints_are_checked_at_every_call():
    exp = export.export(lambda x: x.reshape(2, -1, 3).sum(axis=0),
                        constraints=("b <= 4",))(_spec("2*b, 3"))
    assert str(exp.in_avals[0].shape[0]) == "2*b"
    x = rng.standard_normal((6, 3)).astype(np.float32)
    np.testing.assert_allclose(exp.call(x), x.reshape(2, 3, 3).sum(axis=0), rtol=1e-6)
    with pytest.raises(export.ShapeError, match="dimension 0 is 5, which is not a multiple of 2"):
        exp.call(np.ones((5, 3), np.float32))
    with pytest.raises(export.ShapeError, match="b=5, which breaks the constraint b <= 4"):
        exp.call(np.ones((10, 3), np.float32))
    with pytest.raises(export.ShapeError, match="b=0, which breaks the constraint b >= 1"):
        export.export(lambda x: x * 2)(_spec("b, 3")).call(np.ones((0, 3), np.float32))
    with pytest.raises(export.ShapeError, match=r"dimension 1 is 4, not 3"):
        exp.call(np.ones((4, 4), np.float32))


def test_a_symbol_shared_by_two_arguments_must_agree():
    exp = export.export(lambda x, y: x @ y)(_spec("b, 3"), _spec("3, b"))
    x = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(exp.call(x, x.T), x @ x.T, rtol=1e-5)
    with pytest.raises(export.ShapeError, match=r"argument 1 has shape \(3, 4\).*but b = 2"):
        exp.call(x, np.ones((3, 4), np.float32))


def test_programs_that_depend_on_a_size_beyond_products_are_refused():
    with pytest.raises(ValueError, match="cannot be exported with symbolic dimensions b"):
        export.export(lambda x: jnp.pad(x, ((1, 0), (0, 0))))(_spec("b, 3"))
    with pytest.raises(ValueError, match="cannot be exported with symbolic dimensions b"):
        export.export(lambda x: x * (1.0 if x.shape[0] > 1030 else 2.0))(_spec("b, 3"))
    with pytest.raises(ValueError, match="constraint t >= 2 names 't'"):
        export.export(lambda x: x, constraints=("t >= 2",))(_spec("b, 3"))
    with pytest.raises(ValueError, match="one comparison"):
        export.export(lambda x: x, constraints=("b",))(_spec("b, 3"))


def test_symbolic_exports_compose_with_jit_and_vmap():
    exp = export.deserialize(export.export(lambda x: jnp.tanh(x).sum(axis=0))(
        _spec("b, 2")).serialize())
    xs = rng.standard_normal((3, 4, 2)).astype(np.float32)
    np.testing.assert_allclose(funcgrad.jit(exp.call)(xs[0]), np.tanh(xs[0]).sum(axis=0),
                               rtol=1e-5)
    np.testing.assert_allclose(funcgrad.vmap(exp.call)(xs), np.tanh(xs).sum(axis=1), rtol=1e-5)


def test_templates_keep_ssa_names_hex_floats_and_other_integers():
    text = ("%1009 = stablehlo.constant dense<0x3F800000> : tensor<1009x2018xf32>\n"
            "%c = stablehlo.constant dense<1009> : tensor<i32>\n"
            "%s = stablehlo.slice %a [0:1009, 7:2018] : tensor<4x1009xf32>\n"
            "%d = stablehlo.constant dense<2.018000e+03> : tensor<f32>\n")
    pieces = symbolic.make_template(text, {"b": 1009})
    out = symbolic.specialize(pieces, {"b": 3})
    assert out == ("%1009 = stablehlo.constant dense<0x3F800000> : tensor<3x6xf32>\n"
                   "%c = stablehlo.constant dense<3> : tensor<i32>\n"
                   "%s = stablehlo.slice %a [0:3, 7:6] : tensor<4x3xf32>\n"
                   "%d = stablehlo.constant dense<6.0> : tensor<f32>\n")
