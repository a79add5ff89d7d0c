"""``custom_vmap``: a function with its own batching rule (``jax.custom_batching``).

``f = custom_vmap(fun)`` computes ``fun``; under ``vmap`` it calls the rule registered with
``f.def_vmap(rule)``: ``rule(axis_size, in_batched, *args) -> (out, out_batched)``, where
``in_batched``/``out_batched`` mirror the arguments/outputs with a bool per array (True: that
value carries the batch on its leading axis). The function stages as one ``custom_vmap_call``
equation; differentiation goes through ``fun`` itself.
"""
from funcgrad import tree_util
from funcgrad.core.batching_util import bdim_at, not_mapped
from funcgrad.core.jaxpr import consts_as_args
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax.decomposed import FunctionParam, decomposed_primitive

__all__ = ["custom_vmap"]


def _run(*args, call, rule, num_consts, in_tree, out_tree):
    return list(call(*args))


custom_vmap_p = decomposed_primitive("custom_vmap_call", _run, multiple_results=True)


@custom_vmap_p.def_batch
def _batch(args, dims, call, rule, num_consts, in_tree, out_tree):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not not_mapped)
    if any(d is not not_mapped for d in dims[:num_consts]):
        raise ValueError(f"custom_vmap: {rule.fn.__name__} closes over a value that is batched "
                         f"by the enclosing vmap; pass it as an argument instead")
    leaves = [a if d is not_mapped else bdim_at(a, d, 0) for a, d in zip(args[num_consts:],
                                                                          dims[num_consts:])]
    batched = [d is not not_mapped for d in dims[num_consts:]]
    out, out_batched = rule.fn(size, list(tree_util.tree_unflatten(in_tree, batched)),
                               *tree_util.tree_unflatten(in_tree, leaves))
    out_leaves = tree_util.tree_leaves(out)
    flags = tree_util.tree_leaves(out_batched)
    if len(flags) != len(out_leaves) or tree_util.tree_structure(out) != out_tree:
        raise TypeError(f"custom_vmap: the rule {rule.fn.__name__} must return (out, "
                        f"out_batched) with out of the function's structure {out_tree} and one "
                        f"bool per output array")
    return out_leaves, [0 if b else not_mapped for b in flags]


class custom_vmap:
    """A function whose batching rule is user-defined.

    Example:
        >>> from funcgrad.custom_batching import custom_vmap
        >>> @custom_vmap
        ... def f(x):
        ...     return jnp.sin(x)
        >>> @f.def_vmap
        ... def f_rule(axis_size, in_batched, x):
        ...     return jnp.cos(x), in_batched[0]      # a different (marked) batched result
        >>> f(0.0), funcgrad.vmap(f)(jnp.zeros(2))
        (Array(0., dtype=float32, weak_type=True), Array([1., 1.], dtype=float32))
    """

    def __init__(self, fun):
        self.fun = fun
        self.vmap_rule = None
        self.__name__ = getattr(fun, "__name__", "custom_vmap")
        self.__doc__ = getattr(fun, "__doc__", None)

    def def_vmap(self, rule):
        """Register ``rule(axis_size, in_batched, *args) -> (out, out_batched)``."""
        self.vmap_rule = rule
        return rule

    def __call__(self, *args):
        if self.vmap_rule is None:
            raise AttributeError(f"custom_vmap function {self.__name__} has no batching rule; "
                                 f"register one with @{self.__name__}.def_vmap")
        leaves, in_tree = tree_util.tree_flatten(args)
        trees = []

        def flat(*xs):
            out = self.fun(*tree_util.tree_unflatten(in_tree, list(xs)))
            out_leaves, out_tree = tree_util.tree_flatten(out)
            trees.append(out_tree)
            return out_leaves

        closed, _ = trace_to_jaxpr(flat, [aval_of(x) for x in leaves], debug_name=self.__name__)
        call, consts = consts_as_args(closed)
        outs = custom_vmap_p.bind(*consts, *leaves, call=call, rule=FunctionParam(self.vmap_rule),
                                  num_consts=len(consts), in_tree=in_tree, out_tree=trees[0])
        return tree_util.tree_unflatten(trees[0], list(outs))
