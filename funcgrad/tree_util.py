"""Pytrees: nested containers (tuples, lists, dicts, None, registered classes) of leaves.

Built on jaxlib's C++ pytree registry, in a registry of funcgrad's own.

Example:
    >>> from funcgrad.tree_util import tree_flatten, tree_map
    >>> leaves, treedef = tree_flatten({"w": (1, 2), "b": [3]})
    >>> leaves
    [3, 1, 2]
    >>> tree_map(lambda x: x * 10, {"w": (1, 2), "b": [3]})
    {'b': [30], 'w': (10, 20)}
"""
import collections
import dataclasses
import functools

from jaxlib import _jax

_pytree = _jax.pytree
registry = _pytree.PyTreeRegistry()
PyTreeDef = _pytree.PyTreeDef
DictKey = _pytree.DictKey
GetAttrKey = _pytree.GetAttrKey
SequenceKey = _pytree.SequenceKey
FlattenedIndexKey = _pytree.FlattenedIndexKey


def tree_flatten(tree, is_leaf=None):
    """(leaves, treedef) of ``tree``; ``is_leaf(x)`` may stop the descent early.

    Example:
        >>> from funcgrad.tree_util import tree_flatten
        >>> tree_flatten([1, (2, None)])
        ([1, 2], PyTreeDef([*, (*, None)]))
    """
    return registry.flatten(tree, is_leaf)


def tree_unflatten(treedef, leaves):
    """Rebuild a tree of ``treedef``'s structure from ``leaves``.

    Example:
        >>> from funcgrad.tree_util import tree_flatten, tree_unflatten
        >>> _, td = tree_flatten((1, [2]))
        >>> tree_unflatten(td, ["a", "b"])
        ('a', ['b'])
    """
    return treedef.unflatten(leaves)


def tree_leaves(tree, is_leaf=None):
    """The leaves of ``tree`` in flattening order. Example: ``tree_leaves({"a": 1}) == [1]``."""
    return registry.flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    """The treedef of ``tree``. Example: ``tree_structure((1, 2)).num_leaves == 2``."""
    return registry.flatten(tree, is_leaf)[1]


def treedef_is_leaf(treedef):
    return treedef.num_nodes == 1


def tree_map(f, tree, *rest, is_leaf=None):
    """Apply ``f`` to the leaves of ``tree`` (and the matching leaves of ``rest``).

    Example:
        >>> from funcgrad.tree_util import tree_map
        >>> tree_map(lambda a, b: a + b, (1, [2]), (10, [20]))
        (11, [22])
    """
    leaves, treedef = registry.flatten(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(*xs) for xs in zip(leaves, *others))


def tree_flatten_with_path(tree, is_leaf=None):
    """([(key_path, leaf), ...], treedef): each leaf with the keys leading to it.

    Example:
        >>> from funcgrad.tree_util import tree_flatten_with_path
        >>> tree_flatten_with_path({"a": [5]})[0]
        [((DictKey(key='a'), SequenceKey(idx=0)), 5)]
    """
    return registry.flatten_with_path(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf=None):
    return registry.flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None):
    """``tree_map`` where ``f`` also receives each leaf's key path first."""
    path_leaves, treedef = registry.flatten_with_path(tree, is_leaf)
    others = [treedef.flatten_up_to(r) for r in rest]
    return treedef.unflatten(f(p, x, *xs) for (p, x), *xs in zip(path_leaves, *others))


def keystr(path):
    """A readable string for a key path, e.g. ``['w'][0]``."""
    parts = []
    for k in path:
        if isinstance(k, DictKey):
            parts.append(f"[{k.key!r}]")
        elif isinstance(k, SequenceKey):
            parts.append(f"[{k.idx}]")
        elif isinstance(k, GetAttrKey):
            parts.append(f".{k.name}")
        elif isinstance(k, FlattenedIndexKey):
            parts.append(f"[<flat index {k.key}>]")
        else:
            parts.append(str(k))
    return "".join(parts)


def tree_reduce(f, tree, initializer=None, is_leaf=None):
    """Fold ``f`` over the leaves. Example: ``tree_reduce(operator.add, [1, (2, 3)]) == 6``."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is None:
        return functools.reduce(f, leaves)
    return functools.reduce(f, leaves, initializer)


def tree_all(tree):
    return all(tree_leaves(tree))


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """Swap the outer and inner levels of a tree of trees."""
    flat = outer_treedef.flatten_up_to(pytree_to_transpose)
    inner = [inner_treedef.flatten_up_to(x) for x in flat]
    columns = list(zip(*inner)) if inner else [[] for _ in range(inner_treedef.num_leaves)]
    return inner_treedef.unflatten(outer_treedef.unflatten(c) for c in columns)


def register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func=None):
    """Make ``nodetype`` a pytree node.

    ``flatten_func(x) -> (children, aux_data)``; ``unflatten_func(aux_data, children) -> x``.

    Example:
        >>> from funcgrad.tree_util import register_pytree_node, tree_leaves
        >>> class Pair:
        ...     def __init__(self, a, b): self.a, self.b = a, b
        >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
        <class 'Pair'>
        >>> tree_leaves(Pair(1, [2, 3]))
        [1, 2, 3]
    """
    if flatten_with_keys_func is None:
        registry.register_node(nodetype, flatten_func, unflatten_func)
    else:
        registry.register_node(nodetype, flatten_func, unflatten_func, flatten_with_keys_func)
    return nodetype


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """Like ``register_pytree_node`` with a flatten that yields ((key, child), ...), aux."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
    return register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_dataclass(nodetype=None, *, data_fields=None, meta_fields=None):
    """Register a dataclass: ``data_fields`` are children, ``meta_fields`` static aux data.

    Without field lists, fields marked ``field(metadata={"static": True})`` are meta fields.

    Example:
        >>> import dataclasses
        >>> from funcgrad.tree_util import register_dataclass, tree_map
        >>> @register_dataclass
        ... @dataclasses.dataclass
        ... class Params:
        ...     w: object
        ...     b: object
        >>> tree_map(lambda v: v * 2, Params(w=1, b=2))
        Params(w=2, b=4)
    """
    if nodetype is None:
        return functools.partial(register_dataclass, data_fields=data_fields,
                                 meta_fields=meta_fields)
    if data_fields is None:
        fields = dataclasses.fields(nodetype)
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    registry.register_dataclass_node(nodetype, list(data_fields), list(meta_fields or []))
    return nodetype


def register_static(cls):
    """Register ``cls`` as a pytree with no children (the whole object is aux data)."""
    registry.register_node(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


def all_leaves(iterable, is_leaf=None):
    return all(treedef_is_leaf(tree_structure(x, is_leaf)) for x in iterable)


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: its arguments are leaves, the function is not.

    Example:
        >>> import operator
        >>> from funcgrad.tree_util import Partial, tree_leaves
        >>> p = Partial(operator.add, 1)
        >>> tree_leaves(p)
        [1]
    """


registry.register_node(
    Partial, lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]))
registry.register_node(
    collections.OrderedDict, lambda d: (list(d.values()), list(d.keys())),
    lambda keys, values: collections.OrderedDict(zip(keys, values)),
    lambda d: ([(DictKey(k), v) for k, v in d.items()], list(d.keys())))
registry.register_node(
    collections.defaultdict,
    lambda d: (list(d.values()), (d.default_factory, list(d.keys()))),
    lambda aux, values: collections.defaultdict(aux[0], zip(aux[1], values)),
    lambda d: ([(DictKey(k), v) for k, v in d.items()], (d.default_factory, list(d.keys()))))
