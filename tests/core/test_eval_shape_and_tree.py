import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import nn
from funcgrad.core.interpreters import Tracer


def test_eval_shape_matches_the_computed_result(rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    f = lambda a, b, scale=1.0: {"prod": (a @ a.T) * scale, "parts": (a.sum(0), b.astype("int8"))}
    got = funcgrad.eval_shape(f, funcgrad.ShapeDtypeStruct((4, 3), jnp.float32),
                              np.arange(5), scale=2.0)
    real = f(jnp.asarray(x), jnp.arange(5), scale=2.0)
    assert funcgrad.tree.structure(got) == funcgrad.tree.structure(real)
    for s, r in zip(funcgrad.tree.leaves(got), funcgrad.tree.leaves(real)):
        assert isinstance(s, funcgrad.ShapeDtypeStruct)
        assert (s.shape, s.dtype, s.weak_type) == (r.shape, r.dtype, r.aval.weak_type)
    assert got["prod"] == funcgrad.ShapeDtypeStruct((4, 4), np.float32)
    assert repr(got["parts"][1]) == "ShapeDtypeStruct(shape=(5,), dtype=int8)"
    assert got["prod"].ndim == 2 and got["prod"].size == 16


def test_eval_shape_of_a_module_leaves_its_state_alone():
    model = nn.Sequential(nn.Linear(3, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    before = {k: np.asarray(v).copy() for k, v in model.state_dict().items()}
    out = funcgrad.eval_shape(lambda m, x: m(x), model, funcgrad.ShapeDtypeStruct((5, 3), "float32"))
    assert out == funcgrad.ShapeDtypeStruct((5, 2), np.float32)
    for k, v in model.state_dict().items():       # running statistics not updated, no tracers
        assert not isinstance(v, Tracer)
        np.testing.assert_array_equal(np.asarray(v), before[k])


def test_make_jaxpr_takes_shape_dtype_structs():
    jaxpr = funcgrad.make_jaxpr(lambda x: x * 2)(funcgrad.ShapeDtypeStruct((2,), jnp.float16))
    assert "a:f16[2]" in str(jaxpr)


def test_eval_shape_reports_shape_errors():
    with pytest.raises(ValueError, match="matmul"):
        funcgrad.eval_shape(jnp.matmul, funcgrad.ShapeDtypeStruct((2, 3), "float32"),
                            funcgrad.ShapeDtypeStruct((4, 5), "float32"))


def test_tree_namespace_is_tree_util():
    tree = {"a": 1, "b": (2, [3, 4])}
    assert funcgrad.tree.map(lambda v: v * 10, tree) == {"a": 10, "b": (20, [30, 40])}
    assert funcgrad.tree.leaves(tree) == [1, 2, 3, 4]
    leaves, treedef = funcgrad.tree.flatten(tree)
    assert funcgrad.tree.unflatten(treedef, [v + 1 for v in leaves]) == \
        {"a": 2, "b": (3, [4, 5])}
    assert funcgrad.tree.structure(tree) == treedef
    assert funcgrad.tree.reduce(lambda a, b: a + b, tree) == 10
    assert funcgrad.tree.all([True, (1, 2)]) and not funcgrad.tree.all([True, 0])
    paths = [funcgrad.tree_util.keystr(p) for p, _ in funcgrad.tree.leaves_with_path(tree)]
    assert paths == ["['a']", "['b'][0]", "['b'][1][0]", "['b'][1][1]"]
    assert funcgrad.tree.map_with_path(lambda p, v: len(p), tree) == {"a": 1, "b": (2, [3, 3])}
    outer = funcgrad.tree.structure([0, 0])
    inner = funcgrad.tree.structure((0, 0, 0))
    assert funcgrad.tree.transpose(outer, inner, [(1, 2, 3), (4, 5, 6)]) == \
        ([1, 4], [2, 5], [3, 6])


def test_config_override_restores_the_old_value_even_on_error():
    assert funcgrad.config.enable_x64 is False
    with funcgrad.config.override("enable_x64", True):
        assert jnp.ones(2).dtype == np.float64
    assert funcgrad.config.enable_x64 is False and jnp.ones(2).dtype == np.float32
    with pytest.raises(ZeroDivisionError):
        with funcgrad.config.override("default_matmul_precision", "highest"):
            1 / 0
    assert funcgrad.config.default_matmul_precision is None
    with pytest.raises(AttributeError, match="no option .nope."):
        with funcgrad.config.override("nope", 1):
            pass
