"""Primitives defined by a decomposition into other lax operations.

``decomposed_primitive(name, decompose)`` makes a primitive whose every rule follows from one
lax function ``decompose(*operands, **params)``: its output avals come from staging it, it lowers
to the StableHLO of the decomposition (inlined with ``ctx.lower_fun``), it differentiates by
running the decomposition under forward mode (so reverse mode transposes the decomposition's own
linear primitives) and it batches by running the decomposition under a batching interpreter. The
primitive still appears as one equation in a Jaxpr, under JAX's name (``tile``, ``square``...),
which is what programs that look for it see. ``composite`` (``lax.composite``) is the user-facing
form: any function becomes one named equation.
"""
from funcgrad import tree_util
from funcgrad.core import interpreters
from funcgrad.core.ad import jvp_flat
from funcgrad.core.batching import BatchInterpreter, current_rule_axis
from funcgrad.core.batching_util import not_mapped
from funcgrad.core.primitive import Primitive
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of


def _as_list(out, multiple_results):
    return list(out) if multiple_results else [out]


def decomposed_primitive(name, decompose, multiple_results=False):
    """A primitive ``name`` with all of its rules derived from ``decompose``.

    ``lax.square_p`` is made this way from ``lambda x: x * x``:

    Example:
        >>> lax.square_p.bind(jnp.array([2.0, 3.0]))
        Array([4., 9.], dtype=float32)
        >>> funcgrad.grad(lambda x: lax.square_p.bind(x))(jnp.float32(3.0))
        Array(6., dtype=float32)
    """
    prim = Primitive(name, multiple_results=multiple_results)

    def flat(params):
        return lambda *xs: _as_list(decompose(*xs, **params), multiple_results)

    @prim.def_abstract_eval
    def _abstract(*avals, **params):
        closed, _ = trace_to_jaxpr(flat(params), list(avals), debug_name=name)
        outs = list(closed.out_avals)
        return outs if multiple_results else outs[0]

    @prim.def_lowering
    def _lowering(ctx, *args, **params):
        outs = ctx.lower_fun(flat(params), args, name=name)
        return list(outs) if multiple_results else outs[0]

    @prim.def_jvp
    def _jvp(primals, tangents, **params):
        outs, touts = jvp_flat(flat(params), list(primals), list(tangents))
        if multiple_results:
            return outs, touts
        return outs[0], touts[0]

    @prim.def_batch
    def _batch(args, dims, **params):
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not not_mapped)
        axis = current_rule_axis()
        interp = BatchInterpreter(interpreters.current(), size,
                                  axis.name if axis is not None and axis.size == size else None,
                                  name)
        tracers = [interp.wrap(a, d) for a, d in zip(args, dims)]
        with interpreters.using(interp):
            outs = flat(params)(*tracers)
        pairs = [interp.unwrap(o) for o in outs]
        vals, out_dims = [p[0] for p in pairs], [p[1] for p in pairs]
        if multiple_results:
            return vals, out_dims
        return vals[0], out_dims[0]

    return prim


class FunctionParam:
    """A Python function as a primitive parameter: hashable, compared by identity, printed by
    name (user decompositions, batching rules, tangent solvers).

    Example:
        >>> from funcgrad.lax.decomposed import FunctionParam
        >>> FunctionParam(jnp.sin)
        sin
    """
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __repr__(self):
        return getattr(self.fn, "__name__", "function")


def _run_composite(*args, decomposition, name, version, kwargs):
    return tree_util.tree_leaves(decomposition.fn(*args, **dict(kwargs)))


composite_p = decomposed_primitive("composite", _run_composite, multiple_results=True)


def composite(decomposition, name, version=0):
    """Wrap ``decomposition`` as one named operation (JAX's ``lax.composite``).

    The result stages as a single ``composite`` equation carrying ``name`` and ``version``
    (what a compiler that knows the operation would match); it computes, differentiates and
    batches as ``decomposition`` does. Keyword arguments of the call are static attributes.

    Example:
        >>> tangent = lax.composite(lambda x: lax.sin(x) / lax.cos(x), "my.tangent")
        >>> tangent(jnp.array([0.0, 0.5]))
        Array([0.       , 0.5463025], dtype=float32)
        >>> funcgrad.make_jaxpr(tangent)(1.0).jaxpr.eqns[0].params["name"]
        'my.tangent'
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"lax.composite: name must be a non-empty string, got {name!r}")
    holder = FunctionParam(decomposition)

    def call(*args, **kwargs):
        leaves = composite_p.bind(*args, decomposition=holder, name=name, version=int(version),
                                  kwargs=tuple(sorted(kwargs.items())))
        return tree_util.tree_unflatten(_out_tree(decomposition, args, kwargs), list(leaves))

    call.__name__ = getattr(decomposition, "__name__", name)
    call.__doc__ = getattr(decomposition, "__doc__", None)
    return call


def _out_tree(decomposition, args, kwargs):
    """The output pytree structure of ``decomposition`` (found by staging it)."""
    trees = []

    def fn(*xs):
        leaves, tree = tree_util.tree_flatten(decomposition(*xs, **kwargs))
        trees.append(tree)
        return leaves
    trace_to_jaxpr(fn, [aval_of(a) for a in args])
    return trees[0]
