"""The machinery of vectorization: the batching interpreter and batching of staged Jaxprs.

Inside a batched computation every value that differs across the batch is a ``BatchTracer``
holding the batched value (an array, or a tracer of the enclosing transformation) and the axis
along which it is batched. Each primitive applied to such tracers runs its batching rule (the
``batch`` rule; helpers for writing them are in ``funcgrad.core.batching_util``), which computes
the whole batch with ordinary primitives under the parent interpreter. Values that do not depend
on the batch stay plain values, so unbatched work is not repeated.

Named axes: a batching interpreter with an ``axis_name`` runs the ``collective`` rules of
primitives (``psum``, ``axis_index``...) that name its axis.

The user API, ``vmap``, is ``funcgrad.transforms.batching``; ``map_leading_axis`` is the plain
form that library code below the transforms layer uses.

Example:
    >>> import funcgrad.numpy as jnp
    >>> from funcgrad.core import batching
    >>> batching.map_leading_axis(lambda r: jnp.sum(r * r))(jnp.ones((4, 3)))
    Array([3., 3., 3., 3.], dtype=float32)
"""
import contextvars
import functools
import weakref

from funcgrad import tree_util
from funcgrad.core import errors, interpreters
from funcgrad.core.avals import ShapedArray
from funcgrad.core.batching_util import bdim_at, collective_rules, not_mapped
from funcgrad.core.interpreters import Interpreter, Tracer
from funcgrad.core.jaxpr import eval_jaxpr
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of


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
        self.aval = ShapedArray(a.shape[:bdim] + a.shape[bdim + 1:], a.dtype, a.weak_type,
                                a.vma)

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
    return ShapedArray(shape, aval.dtype, aval.weak_type, aval.vma)


def batch_jaxpr(closed, axis_size, in_dims, out_dims=None, axis_name=None):
    """Batch ``closed`` (a ClosedJaxpr): returns ``(batched ClosedJaxpr, out_dims)``.

    ``in_dims``: per input, its batch axis or None. ``out_dims``: None (each output keeps the
    axis its computation gives it, None when it does not depend on the batch), one int for every
    output, or a list whose ints force an output to that axis (broadcasting if needed) and whose
    Nones leave it natural. ``axis_name`` defaults to the axis of the batching rule being run,
    so collectives in the body see the enclosing vmap's name. Results are cached per Jaxpr.

    Example:
        >>> from funcgrad.core.batching import batch_jaxpr
        >>> closed = funcgrad.make_jaxpr(lambda x, y: x * y)(jnp.ones(3), 2.0)
        >>> new, dims = batch_jaxpr(closed, 8, [0, None])
        >>> print(new)
        { lambda ; a:f32[8,3] b:f32[]{weak}. let
            c:f32[] = convert_element_type[new_dtype=float32 weak_type=False] b
            d:f32[3] = broadcast_in_dim[shape=(3,) broadcast_dimensions=()] c
            e:f32[8,3] = broadcast_in_dim[shape=(8, 3) broadcast_dimensions=(1,)] d
            f:f32[8,3] = mul a e
          in (f,) }
        >>> dims
        [0]
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




# --- mapping a function over leading axes (for library code below ``vmap``) --------------------
def map_leading_axis(fun, debug_name=None):
    """``fun`` mapped over axis 0 of every array leaf of its positional arguments, with every
    output leaf batched at axis 0: ``vmap(fun)`` with default axes, for code below the
    transforms layer (``lax.map``, ``numpy.vectorize``...).

    Example:
        >>> from funcgrad.core.batching import map_leading_axis
        >>> map_leading_axis(lambda x, y: x * y)(jnp.arange(3.0), jnp.ones(3))
        Array([0., 1., 2.], dtype=float32)
    """
    name = debug_name or getattr(fun, "__name__", "map_leading_axis")

    def mapped(*args):
        leaves, tree = tree_util.tree_flatten(args)
        sizes = {aval_of(x).shape[0] for x in leaves if aval_of(x).ndim}
        if len(sizes) != 1 or any(not aval_of(x).ndim for x in leaves):
            raise ValueError(f"{name}: every argument must be an array with the same leading "
                             f"axis size, got shapes {[aval_of(x).shape for x in leaves]}")
        size = sizes.pop()
        interp = BatchInterpreter(interpreters.current(), size, None, name)
        tracers = [interp.wrap(x, 0) for x in leaves]
        with interpreters.using(interp):
            out = fun(*tree_util.tree_unflatten(tree, tracers))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        return out_tree.unflatten([bdim_at(*interp.unwrap(o), 0, size) for o in out_leaves])

    return mapped
