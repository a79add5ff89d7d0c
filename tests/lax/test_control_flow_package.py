"""The ``funcgrad.lax.control_flow`` package: its modules, what it re-exports, the rules each
primitive registers, and the one helper that gives cond's branches a shared operand list."""
import importlib
import types

import numpy as np

import funcgrad
from funcgrad import lax, tree_util
from funcgrad.core.jaxpr import eval_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax import control_flow
from funcgrad.lax.control_flow.common import _trace
from funcgrad.lax.control_flow.conditionals import _share_consts

MODULES = ["common", "conditionals", "loops", "scans", "scan_lowering", "scan_reverse"]


def test_modules_are_not_shadowed_by_functions():
    # `import funcgrad.lax.control_flow.<name> as m` reads the package attribute: a module
    # named like a function it re-exports (cond, scan) would come back as that function.
    for name in MODULES:
        mod = importlib.import_module(f"funcgrad.lax.control_flow.{name}")
        assert isinstance(getattr(control_flow, name), types.ModuleType), name
        assert getattr(control_flow, name) is mod


def test_reexports_match_lax():
    assert sorted(control_flow.__all__) == ["associative_scan", "cond", "cond_p", "fori_loop",
                                            "map", "scan", "scan_p", "switch", "while_loop",
                                            "while_p"]
    for name in ["associative_scan", "cond", "fori_loop", "map", "scan", "switch",
                 "while_loop"]:
        assert getattr(lax, name) is getattr(control_flow, name)
        assert callable(getattr(lax, name)) and getattr(lax, name).__doc__


def test_every_primitive_has_all_rules():
    for prim in (control_flow.cond_p, control_flow.while_p, control_flow.scan_p):
        for kind in ("abstract_eval", "lowering", "jvp", "transpose", "batch"):
            assert prim.get_rule(kind) is not None, (prim, kind)


def _branch(fn, arg):
    leaves, tree = tree_util.tree_flatten((arg,))
    jaxpr, consts, _ = _trace(fn, tree, [aval_of(x) for x in leaves], "b")
    return jaxpr, consts


def test_share_consts_gives_every_branch_the_same_operands():
    x = np.linspace(-1.0, 1.0, 6).astype(np.float32).reshape(2, 3)
    a = np.arange(3, dtype=np.float32)
    w = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
    b = np.full(3, 2.5, np.float32)
    fns = [lambda v: v * b + a, lambda v: v @ w, lambda v: -v]
    parts = [_branch(fn, x) for fn in fns]
    assert [len(c) for _, c in parts] == [2, 1, 0]
    padded, consts = _share_consts(parts, 1)
    assert len(consts) == 3
    in_avals = [[(v.shape, v.dtype) for v in br.in_avals] for br in padded]
    assert in_avals[0] == in_avals[1] == in_avals[2]
    assert in_avals[0][-1] == ((2, 3), np.float32)
    for (jaxpr, own), br, fn in zip(parts, padded, fns):
        got = eval_jaxpr(br.jaxpr, br.consts, *consts, x)[0]
        want = eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *own, x)[0]
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(got), fn(x), rtol=1e-6)


def test_branches_with_different_constants_under_jvp_grad_vmap():
    a = np.array([0.5, -1.0, 2.0])
    w = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, -1.0], [3.0, 0.0, 1.0]])

    def f(i, v):
        return lax.switch(i, [lambda u: u * a, lambda u: np.sin(1.0) * u @ w,
                              lambda u: u + 1.0], v)

    x = np.array([0.3, -0.2, 0.9])
    t = np.array([1.0, 2.0, -1.0])
    with funcgrad.config.override("enable_x64", True):
        for i, want_t in [(0, t * a), (1, np.sin(1.0) * t @ w), (2, t)]:
            y, y_t = funcgrad.jvp(lambda v: f(i, v), (x,), (t,))
            np.testing.assert_allclose(np.asarray(y_t), want_t, rtol=1e-12)
        g = funcgrad.jit(funcgrad.grad(lambda v, i: funcgrad.numpy.sum(f(i, v) ** 2)))
        y1 = np.sin(1.0) * x @ w
        np.testing.assert_allclose(np.asarray(g(x, np.int32(1))),
                                   2 * np.sin(1.0) * w @ y1, rtol=1e-12)
        xs = np.stack([x, 2 * x, -x])
        got = funcgrad.vmap(f)(np.array([0, 1, 2], np.int32), xs)
        want = np.stack([xs[0] * a, np.sin(1.0) * xs[1] @ w, xs[2] + 1.0])
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
