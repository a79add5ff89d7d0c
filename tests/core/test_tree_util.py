"""funcgrad.tree_util on jaxlib's C++ registry."""
import collections
import dataclasses

import numpy as np
import pytest

import funcgrad
from funcgrad import tree_util as tu


def test_flatten_unflatten_roundtrip():
    tree = {"b": [1, (2, None)], "a": 3, "c": {"x": 4.0}}
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [3, 1, 2, 4.0]          # dict keys sorted, None is an empty node
    assert treedef.num_leaves == 4
    assert tu.tree_unflatten(treedef, leaves) == tree
    assert tu.tree_unflatten(treedef, ["p", "q", "r", "s"]) == {
        "b": ["q", ("r", None)], "a": "p", "c": {"x": "s"}}
    assert tu.tree_leaves(tree) == leaves
    assert tu.tree_structure(tree) == treedef
    assert tu.tree_structure([1, 2]) != tu.tree_structure((1, 2))
    with pytest.raises(Exception):
        tu.tree_unflatten(treedef, [1, 2])


def test_tree_map_multiple_trees_and_is_leaf():
    a = {"w": (1, 2), "b": [3]}
    b = {"w": (10, 20), "b": [30]}
    assert tu.tree_map(lambda x, y: x + y, a, b) == {"w": (11, 22), "b": [33]}
    with pytest.raises(ValueError):
        tu.tree_map(lambda x, y: x, a, {"w": (1, 2), "b": [3, 4]})
    pairs = [(1, 2), (3, 4)]
    out = tu.tree_map(lambda p: p[0] * p[1], pairs, is_leaf=lambda x: isinstance(x, tuple))
    assert out == [2, 12]
    assert tu.tree_leaves([None, (None,)]) == []


def test_arrays_are_leaves():
    x = funcgrad.numpy.ones(3)
    leaves, _ = tu.tree_flatten({"x": x, "n": np.zeros(2)})
    assert leaves[1] is x and isinstance(leaves[0], np.ndarray)


def test_register_pytree_node_and_key_paths():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), "aux"), lambda aux, c: Pair(*c))
    leaves, td = tu.tree_flatten([Pair(1, {"k": 2})])
    assert leaves == [1, 2]
    rebuilt = tu.tree_unflatten(td, [5, 6])[0]
    assert isinstance(rebuilt, Pair) and rebuilt.a == 5 and rebuilt.b == {"k": 6}
    paths = [tu.keystr(p) for p, _ in tu.tree_flatten_with_path({"w": [7, (8,)]})[0]]
    assert paths == ["['w'][0]", "['w'][1][0]"]
    out = tu.tree_map_with_path(lambda p, x: (tu.keystr(p), x), {"a": 1, "b": [2]})
    assert out == {"a": ("['a']", 1), "b": [("['b'][0]", 2)]}


def test_register_with_keys():
    class Box:
        def __init__(self, v):
            self.v = v

    tu.register_pytree_with_keys(Box, lambda b: (((tu.GetAttrKey("v"), b.v),), None),
                                 lambda aux, c: Box(*c))
    (path, leaf), = tu.tree_leaves_with_path(Box(3))
    assert tu.keystr(path) == ".v" and leaf == 3
    assert tu.tree_map(lambda x: x + 1, Box(3)).v == 4


def test_register_dataclass():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Params:
        w: object
        b: object
        name: str = dataclasses.field(default="p", metadata={"static": True})

    p = Params(1.0, 2.0, "layer")
    leaves, td = tu.tree_flatten(p)
    assert leaves == [1.0, 2.0]
    q = tu.tree_unflatten(td, [3.0, 4.0])
    assert q == Params(3.0, 4.0, "layer")
    assert tu.tree_structure(Params(1, 2, "x")) != tu.tree_structure(Params(1, 2, "y"))
    paths = [tu.keystr(k) for k, _ in tu.tree_flatten_with_path(p)[0]]
    assert paths == [".w", ".b"]

    @dataclasses.dataclass
    class Explicit:
        x: object
        k: int

    tu.register_dataclass(Explicit, data_fields=["x"], meta_fields=["k"])
    assert tu.tree_leaves(Explicit(5, 9)) == [5]


def test_ordered_and_default_dict_namedtuple_partial():
    od = collections.OrderedDict([("z", 1), ("a", 2)])
    assert tu.tree_leaves(od) == [1, 2]                     # insertion order kept
    assert tu.tree_map(lambda x: -x, od) == collections.OrderedDict([("z", -1), ("a", -2)])
    dd = collections.defaultdict(list, {"a": 1})
    out = tu.tree_map(lambda x: x * 3, dd)
    assert out == {"a": 3} and out.default_factory is list
    NT = collections.namedtuple("NT", "x y")
    assert tu.tree_map(lambda v: v + 1, NT(1, 2)) == NT(2, 3)
    p = tu.Partial(lambda a, b: a + b, 1)
    assert tu.tree_leaves(p) == [1]
    assert tu.tree_map(lambda v: v * 10, p)(2) == 12


def test_reduce_transpose_all():
    import operator
    assert tu.tree_reduce(operator.add, [1, (2, 3)]) == 6
    assert tu.tree_reduce(operator.add, [], 0) == 0
    assert tu.tree_all([True, (1, True)]) and not tu.tree_all([True, (0,)])
    outer = tu.tree_structure([0, 0])
    inner = tu.tree_structure((0, 0, 0))
    assert tu.tree_transpose(outer, inner, [(1, 2, 3), (4, 5, 6)]) == ([1, 4], [2, 5], [3, 6])


def test_registry_separate_from_jax():
    # Registering with funcgrad's registry must not affect another library's default registry.
    from jaxlib import _jax

    class Node:
        pass
    tu.register_static(Node)
    assert tu.tree_leaves([Node()]) == []
    assert len(_jax.pytree.default_registry().flatten([Node()])[0]) == 1
