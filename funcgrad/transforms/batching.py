"""``vmap``: automatic vectorization, the user API over ``funcgrad.core.batching``.

``vmap(f, in_axes, out_axes)`` checks and flattens the arguments, runs ``f`` under a batching
interpreter (each primitive applied to batched values runs its batching rule) and moves each
output's batch axis where ``out_axes`` asks.

Named axes: ``vmap(f, axis_name="i")`` lets collectives (``lax.psum(x, "i")``,
``lax.axis_index("i")``...) inside ``f`` operate across the batch.

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> funcgrad.vmap(jnp.dot)(jnp.ones((4, 3)), jnp.ones((4, 3)))
    Array([3., 3., 3., 3.], dtype=float32)
"""
import functools
import inspect

from funcgrad import tree_util
from funcgrad.core import interpreters
from funcgrad.core.batching import BatchInterpreter
from funcgrad.core.batching_util import bdim_at, not_mapped
from funcgrad.core.values import aval_of, is_arraylike


# --- vmap --------------------------------------------------------------------------------------
def _is_none(x):
    return x is None


def _check_axes_spec(spec, what):
    for leaf in tree_util.tree_leaves(spec, is_leaf=_is_none):
        if leaf is not None and (isinstance(leaf, bool) or not isinstance(leaf, int)):
            raise TypeError(f"vmap: {what} must be ints, None, or pytrees of them, got "
                            f"{spec!r}")


def _leaf_axes(spec, tree, what):
    """One axis (int/None) per leaf of ``tree`` from the prefix tree ``spec``."""
    if spec is None or isinstance(spec, int):
        return [spec] * len(tree_util.tree_leaves(tree))
    prefix = tree_util.tree_structure(spec, is_leaf=_is_none)
    try:
        subtrees = prefix.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ValueError(f"vmap: {what} {spec!r} is not a tree prefix of the value "
                         f"{tree_util.tree_structure(tree)}: {e}") from None
    specs = tree_util.tree_leaves(spec, is_leaf=_is_none)
    out = []
    for s, sub in zip(specs, subtrees):
        out.extend([s] * len(tree_util.tree_leaves(sub)))
    return out


def _arg_names(fun, n):
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY,
                                                   params[i].POSITIONAL_OR_KEYWORD):
            names.append(params[i].name)
        else:
            names.append(f"args[{i}]")
    return names


def _leaf_labels(prefix, tree):
    paths = tree_util.tree_flatten_with_path(tree)[0]
    return [prefix + tree_util.keystr(p) for p, _ in paths]


def vmap(fun, in_axes=0, out_axes=0, axis_size=None, axis_name=None):
    """Vectorize ``fun`` over an axis of its arguments.

    ``in_axes``: for each positional argument the axis to map over (an int, negative allowed),
    None (not mapped: the same value for every batch member), or a pytree prefix of the
    argument giving an axis per leaf; one int/None applies to every argument. Keyword arguments
    are mapped over axis 0. ``out_axes``: where the batch axis goes in each output (int, None for
    outputs that do not depend on the batch, or a pytree prefix of the output).
    ``axis_size``: needed when no argument is mapped. ``axis_name``: a name for the mapped axis
    that collectives (``lax.psum(x, axis_name)``...) inside ``fun`` refer to.

    Example:
        >>> def f(x, w):
        ...     return jnp.dot(w, x)
        >>> funcgrad.vmap(f, in_axes=(0, None))(jnp.ones((8, 3)), jnp.ones((2, 3))).shape
        (8, 2)
    """
    if not callable(fun):
        raise TypeError(f"vmap: expected a callable, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    fname = getattr(fun, "__name__", type(fun).__name__)

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        if isinstance(in_axes, tuple):
            if len(in_axes) != len(args):
                raise ValueError(f"vmap({fname}): in_axes has {len(in_axes)} entries but the "
                                 f"function was called with {len(args)} positional arguments")
            per_arg = in_axes
        elif in_axes is None or isinstance(in_axes, int):
            per_arg = (in_axes,) * len(args)
        elif len(args) == 1:
            per_arg = (in_axes,)
        else:
            raise ValueError(f"vmap({fname}): in_axes {in_axes!r} must be an int, None or a "
                             f"tuple with one entry per positional argument")
        leaves, dims = [], []
        for i, (arg, spec) in enumerate(zip(args, per_arg)):
            leaves.extend(tree_util.tree_leaves(arg))
            dims.extend(_leaf_axes(spec, arg, f"in_axes[{i}]"))
        kw_leaves = tree_util.tree_leaves(kwargs)
        leaves.extend(kw_leaves)
        dims.extend([0] * len(kw_leaves))
        _, treedef = tree_util.tree_flatten((args, kwargs))

        def labels():   # argument names with pytree paths, for error messages only
            names = _arg_names(fun, len(args))
            out = []
            for i, arg in enumerate(args):
                out.extend(_leaf_labels(names[i], arg))
            return out + _leaf_labels("kwargs", kwargs)

        sizes = []
        canon = []
        for k, (leaf, d) in enumerate(zip(leaves, dims)):
            if d is None:
                canon.append(None)
                continue
            if not is_arraylike(leaf):
                raise TypeError(f"vmap({fname}): argument {labels()[k]} of type "
                                f"{type(leaf).__name__} is mapped (axis {d}) but is not an "
                                f"array; give it in_axes None")
            aval = aval_of(leaf)
            if not -aval.ndim <= d < aval.ndim:
                raise ValueError(f"vmap({fname}): in_axes {d} is out of range for argument "
                                 f"{labels()[k]} of rank {aval.ndim} (shape {aval.shape})")
            d = d % aval.ndim
            canon.append(d)
            sizes.append((k, d, aval.shape[d]))
        distinct = {s for _, _, s in sizes}
        if axis_size is not None:
            distinct.add(axis_size)
        if len(distinct) > 1:
            labs = labels()
            detail = ", ".join(f"{labs[k]} has size {s} along axis {d}" for k, d, s in sizes)
            extra = f" and axis_size={axis_size}" if axis_size is not None else ""
            raise ValueError(f"vmap({fname}) got inconsistent sizes for the mapped axes: "
                             f"{detail}{extra}")
        size = axis_size
        if size is None:
            if not sizes:
                raise ValueError(f"vmap({fname}): no argument is mapped (all in_axes are None) "
                                 f"and no axis_size was given")
            size = sizes[0][2]

        interp = BatchInterpreter(interpreters.current(), size, axis_name, fname)
        tracers = [interp.wrap(x, d) for x, d in zip(leaves, canon)]
        in_args, in_kwargs = treedef.unflatten(tracers)
        with interpreters.using(interp):
            out = fun(*in_args, **in_kwargs)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        out_dims = _leaf_axes(out_axes, out, "out_axes")
        results = []
        for i, (o, want) in enumerate(zip(out_leaves, out_dims)):
            v, d = interp.unwrap(o)
            if want is None:
                if d is not not_mapped:
                    raise ValueError(f"vmap({fname}): out_axes is None for output {i} "
                                     f"({aval_of(o).str_short()}) but it depends on the "
                                     f"mapped axis; give it an int out_axes")
                results.append(v)
                continue
            if not is_arraylike(v):
                raise TypeError(f"vmap({fname}): output {i} of type {type(v).__name__} is not "
                                f"an array")
            rank = aval_of(v).ndim + (1 if d is not_mapped else 0)
            if not -rank <= want < rank:
                raise ValueError(f"vmap({fname}): out_axes {want} is out of range for output "
                                 f"{i} of rank {rank} (batched shape)")
            results.append(bdim_at(v, d, want % rank, size))
        return out_tree.unflatten(results)

    return batched
