"""Short names for the pytree utilities, as ``jax.tree``: ``funcgrad.tree.map(f, tree)``.

Each is the ``funcgrad.tree_util`` function of the longer name (``map`` is ``tree_map``).

Example:
    >>> funcgrad.tree.map(lambda x: x * 2, {"a": 1, "b": (2, 3)})
    {'a': 2, 'b': (4, 6)}
    >>> funcgrad.tree.leaves([1, (2, 3)])
    [1, 2, 3]
"""
from funcgrad.tree_util import (  # noqa: F401
    tree_all as all,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)
