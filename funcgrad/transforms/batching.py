"""``vmap``: automatic vectorization by a batching interpreter.

Inside ``vmap(f)`` every value that differs across the batch is a ``BatchTracer`` holding the
batched value (an array, or a tracer of the enclosing transformation) and the axis along which
it is batched. Each primitive applied to such tracers runs its batching rule (the ``batch``
slot, see ``funcgrad.core.batching_util``), which computes the whole batch with ordinary
primitives under the parent interpreter. Values that do not depend on the batch stay plain
values, so unbatched work is not repeated.

Named axes: ``vmap(f, axis_name="i")`` lets collectives (``lax.psum(x, "i")``,
``lax.axis_index("i")``...) inside ``f`` operate across the batch.
"""
import contextvars
import functools
import inspect
import weakref

from funcgrad.core import errors
from funcgrad import tree_util
from funcgrad.core import interpreters
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching_util import bdim_at, collective_rules, not_mapped
from funcgrad.core.interpreters import Interpreter, Tracer
from funcgrad.core.jaxpr import eval_jaxpr
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of, is_arraylike


class AxisData:
    """The axis a batching interpreter maps over: its ``name`` (or None) and ``size``."""

    __slots__ = ("name", "size")

    def __init__(self, name, size):
        self.name, self.size = name, size

    def __repr__(self):
        return f"AxisData(name={self.name!r}, size={self.size})"


# The axis of the batching interpreter whose rule is running: higher-order rules (jit, control
# flow) read it to batch their bodies with the same axis name.
_rule_axis = contextvars.ContextVar("funcgrad_batch_rule_axis", default=None)


def current_rule_axis():
    """The AxisData of the batching rule being run (None outside batching rules)."""
    return _rule_axis.get()


class BatchTracer(Tracer):
    """A batched value inside ``vmap``: ``val`` has the batch along axis ``bdim``."""

    __slots__ = ("aval", "val", "bdim")

    def __init__(self, interp, val, bdim):
        self._interp, self.val, self.bdim = interp, val, bdim
        a = aval_of(val)
        self.aval = ShapedArray(a.shape[:bdim] + a.shape[bdim + 1:], a.dtype, a.weak_type)

    def __repr__(self):
        return (f"BatchTracer<{self.aval.str_short()}, batch axis {self.bdim} of size "
                f"{self._interp.axis.size}>")


def _axis_names(names):
    return names if isinstance(names, tuple) else (names,)


class BatchInterpreter(Interpreter):
    """Runs batching rules for primitives applied to its own ``BatchTracer``s."""

    def __init__(self, parent, axis_size, axis_name=None, debug_name=None):
        self.parent = parent
        self.axis = AxisData(axis_name, axis_size)
        self.debug_name = debug_name

    def wrap(self, val, bdim):
        return val if bdim is not_mapped else BatchTracer(self, val, bdim)

    def unwrap(self, x):
        if type(x) is BatchTracer and x._interp is self:
            return x.val, x.bdim
        return x, not_mapped

    def process_primitive(self, prim, args, params):
        own = False
        for a in args:
            if type(a) is BatchTracer and a._interp is self:
                own = True
                break
        rule = None
        if self.axis.name is not None and prim in collective_rules:
            names = params.get("axis_name")
            if names is not None and self.axis.name in _axis_names(names):
                rule = functools.partial(collective_rules[prim], self.axis)
        if rule is None:
            if not own:
                return self.forward_to_parent(prim, args, params)
            rule = prim.batch
            if rule is None:
                raise errors.MissingRuleError(
                    f"vmap: primitive '{prim.name}' has no batching rule (used on "
                    f"{', '.join(aval_of(a).str_short() for a in args)})")
        vals, dims = [], []
        for a in args:
            v, d = self.unwrap(a)
            vals.append(v)
            dims.append(d)
        token = _rule_axis.set(self.axis)
        try:
            with interpreters.using(self.parent):
                out, out_dim = rule(vals, dims, **params)
        finally:
            _rule_axis.reset(token)
        if prim.multiple_results:
            return [self.wrap(o, d) for o, d in zip(out, out_dim)]
        return self.wrap(out, out_dim)


# --- batching a Jaxpr (for higher-order primitives) -------------------------------------------
_batched_jaxprs = weakref.WeakKeyDictionary()


def _batched_aval(aval, d, size):
    if d is not_mapped:
        return aval
    shape = list(aval.shape)
    shape.insert(d, size)
    return ShapedArray(shape, aval.dtype, aval.weak_type)


def batch_jaxpr(closed, axis_size, in_dims, out_dims=None, axis_name=None):
    """Batch ``closed`` (a ClosedJaxpr): returns ``(batched ClosedJaxpr, out_dims)``.

    ``in_dims``: per input, its batch axis or None. ``out_dims``: None (each output keeps the
    axis its computation gives it, None when it does not depend on the batch), one int for every
    output, or a list whose ints force an output to that axis (broadcasting if needed) and whose
    Nones leave it natural. ``axis_name`` defaults to the axis of the batching rule being run,
    so collectives in the body see the enclosing vmap's name. Results are cached per Jaxpr.

    Example:
        >>> new, dims = batch_jaxpr(closed, 8, [0, None])
    """
    in_dims = tuple(in_dims)
    n_out = len(closed.jaxpr.outvars)
    if out_dims is None or isinstance(out_dims, int):
        forced = (out_dims,) * n_out
    else:
        forced = tuple(out_dims)
        if len(forced) != n_out:
            raise ValueError(f"batch_jaxpr: {len(forced)} out_dims for {n_out} outputs")
    if axis_name is None:
        rule_axis = _rule_axis.get()
        if rule_axis is not None and rule_axis.size == axis_size:
            axis_name = rule_axis.name
    key = (axis_size, in_dims, forced, axis_name)
    cacheable = not any(isinstance(c, Tracer) for c in closed.consts)
    if cacheable:
        per_jaxpr = _batched_jaxprs.get(closed)
        if per_jaxpr is not None and key in per_jaxpr:
            return per_jaxpr[key]
    in_avals = [_batched_aval(a, d, axis_size) for a, d in zip(closed.in_avals, in_dims)]
    found = []

    def fun(*args):
        interp = BatchInterpreter(interpreters.current(), axis_size, axis_name, "batch_jaxpr")
        tracers = [interp.wrap(a, d) for a, d in zip(args, in_dims)]
        with interpreters.using(interp):
            outs = eval_jaxpr(closed.jaxpr, closed.consts, *tracers)
        res, dims = [], []
        for o, want in zip(outs, forced):
            v, d = interp.unwrap(o)
            if want is not None:
                v = bdim_at(v, d, want, axis_size)
                d = want
            res.append(v)
            dims.append(d)
        found.append(dims)
        return res

    new, _ = trace_to_jaxpr(fun, in_avals, debug_name="batched")
    result = (new, found[0])
    if cacheable:
        _batched_jaxprs.setdefault(closed, {})[key] = result
    return result


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
