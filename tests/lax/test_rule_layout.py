"""Layout of the lax family modules: each primitive's rules sit right under its definition.

A rule registration is a module-level call on a primitive (``foo_p.def_jvp(...)``,
``@foo_p.def_abstract_eval``, ``defjvp(foo_p, ...)``, ``foo_p.def_batch(...)``). Between
``foo_p = ...`` and every registration for ``foo_p`` no other primitive may be defined, so
searching for ``foo_p`` finds all of its rules together. Rules are not installed by wrapper
functions (``_def_*``) or by loops over ``globals()``.
"""
import ast
import pathlib

import pytest

import funcgrad

LAX = pathlib.Path(funcgrad.__file__).parent / "lax"
FAMILIES = ("elementwise", "shapes", "reductions", "dot", "indexing", "windowed", "sorting",
            "fft", "special", "parallel", "autodiff")


def _tree(name):
    return ast.parse((LAX / f"{name}.py").read_text())


def _primitive_definitions(tree):
    """{name: line} of module-level ``foo_p = ...``."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name) and node.targets[0].id.endswith("_p"):
            out[node.targets[0].id] = node.lineno
    return out


def _registered_primitive(call, prims):
    """The primitive a module-level call registers a rule for, or None."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
            func.value.id in prims and func.attr.startswith("def_"):
        return func.value.id
    if call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in prims:
        return call.args[0].id
    return None


def _registrations(tree, prims):
    """[(primitive, line)] for every module-level rule registration."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            p = _registered_primitive(node.value, prims)
            if p is not None:
                out.append((p, node.lineno))
        for dec in getattr(node, "decorator_list", []):
            target = dec.func if isinstance(dec, ast.Call) else dec
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and \
                    target.value.id in prims:
                out.append((target.value.id, dec.lineno))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_rules_follow_their_primitive(family):
    tree = _tree(family)
    prims = _primitive_definitions(tree)
    assert prims, f"lax/{family}.py defines no primitive"
    regs = _registrations(tree, prims)
    assert regs, f"lax/{family}.py registers no rule at module level"
    misplaced = []
    for prim, line in regs:
        start = prims[prim]
        between = sorted(other for other, at in prims.items() if start < at < line)
        if line < start or between:
            misplaced.append(f"{prim} (defined line {start}): rule at line {line}, after "
                             f"{', '.join(between) or 'nothing'}")
    assert not misplaced, f"lax/{family}.py: rules away from their primitive: {misplaced}"


@pytest.mark.parametrize("family", FAMILIES)
def test_no_rule_wrappers_or_globals_loops(family):
    tree = _tree(family)
    wrappers = [n.name for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef) and n.name.startswith("_def_")]
    globals_calls = [n.lineno for n in ast.walk(tree)
                     if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id == "globals"]
    assert not wrappers, f"lax/{family}.py: rule-installing wrappers {wrappers}"
    assert not globals_calls, f"lax/{family}.py: globals() at lines {globals_calls}"


def test_layout_check_catches_a_distant_rule():
    src = ("a_p = Primitive('a')\n"
           "b_p = Primitive('b')\n"
           "a_p.def_jvp(rule)\n"
           "defjvp(b_p, rule)\n")
    tree = ast.parse(src)
    prims = _primitive_definitions(tree)
    regs = _registrations(tree, prims)
    assert regs == [("a_p", 3), ("b_p", 4)]
    between = [other for other, at in prims.items() if prims["a_p"] < at < 3]
    assert between == ["b_p"]
