"""Saving policies for ``funcgrad.checkpoint(policy=...)``, as ``jax.checkpoint_policies``.

A policy is called as ``policy(prim, *operand_avals, **params)`` for each equation of the
checkpointed function and says whether its outputs are saved in the forward pass (True) or
recomputed in the backward pass (False). ``checkpoint_name(x, name)`` marks a value so that the
name-based policies can select it.

Example:
    >>> from funcgrad import checkpoint_policies as cp
    >>> f = funcgrad.checkpoint(lambda x: jnp.sin(x @ x), policy=cp.dots_saveable)
    >>> funcgrad.grad(lambda x: jnp.sum(f(x)))(jnp.eye(2))
    Array([[1.0806046, 2.       ],
           [2.       , 1.0806046]], dtype=float32)
"""
from funcgrad.core.primitive import Primitive

__all__ = ["checkpoint_dots", "checkpoint_name", "dots_saveable",
           "dots_with_no_batch_dims_saveable", "everything_saveable", "nothing_saveable",
           "save_any_names_but_these", "save_anything_except_these_names",
           "save_from_both_policies", "save_only_these_names"]

# --- checkpoint_name: the identity, carrying a name the policies can see ---------------------
name_p = Primitive("name")
name_p.def_abstract_eval(lambda x, *, name: x)
name_p.def_impl(lambda x, *, name: x)
name_p.def_lowering(lambda ctx, x, *, name: x)
name_p.def_jvp(lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name),
                                                  tangents[0]))
name_p.def_batch(lambda args, dims, *, name: (name_p.bind(args[0], name=name), dims[0]))


def checkpoint_name(x, name):
    """``x`` unchanged, named ``name`` for ``save_only_these_names`` and
    ``save_any_names_but_these`` (works on pytrees), as ``jax.ad_checkpoint.checkpoint_name``.

    Example:
        >>> from funcgrad.ad_checkpoint import checkpoint_name
        >>> funcgrad.make_jaxpr(lambda x: checkpoint_name(jnp.sin(x), "h"))(jnp.ones(2))
        { lambda ; a:f32[2]. let
            b:f32[2] = sin a
            c:f32[2] = name[name='h'] b
          in (c,) }
    """
    from funcgrad import tree_util
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a str, got {type(name).__name__}")
    return tree_util.tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


# --- the policies --------------------------------------------------------------------------
def everything_saveable(*_, **__):
    """Save every intermediate value: as if ``checkpoint`` were not used.

    Example:
        >>> from funcgrad import checkpoint_policies as cp
        >>> cp.everything_saveable(cp.name_p, name="h")
        True
    """
    return True


def nothing_saveable(*_, **__):
    """Save nothing: recompute every intermediate value (``checkpoint``'s default).

    Example:
        >>> from funcgrad import checkpoint_policies as cp
        >>> cp.nothing_saveable(None)
        False
    """
    return False


class _DotsSaveable:
    """Save the outputs of matrix products (and convolutions), optionally only of those
    without batch dimensions."""

    def __init__(self, only_if_no_batch_dims):
        self.only_if_no_batch_dims = only_if_no_batch_dims

    def __call__(self, prim, *_, **params):
        if prim.name == "dot_general":
            if not self.only_if_no_batch_dims:
                return True
            (_, _), (lhs_batch, rhs_batch) = params["dimension_numbers"]
            return not lhs_batch and not rhs_batch
        return not self.only_if_no_batch_dims and prim.name == "conv_general_dilated"

    def __repr__(self):
        return ("dots_with_no_batch_dims_saveable" if self.only_if_no_batch_dims
                else "dots_saveable")


dots_saveable = checkpoint_dots = _DotsSaveable(False)
dots_with_no_batch_dims_saveable = _DotsSaveable(True)


class _Names:
    """Save values named by ``checkpoint_name``: those in ``names`` (``keep=True``), or those
    not in it (``keep=False``); unnamed values are recomputed."""

    def __init__(self, names, keep):
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"checkpoint policy: names must be str, got {n!r}")
        self.names, self.keep = frozenset(names), keep

    def __call__(self, prim, *_, **params):
        return prim is name_p and (params["name"] in self.names) == self.keep

    def __repr__(self):
        kind = "save_only_these_names" if self.keep else "save_any_names_but_these"
        return f"{kind}({', '.join(map(repr, sorted(self.names)))})"


def save_only_these_names(*names):
    """Save only the values named (``checkpoint_name``) with one of ``names``.

    Example:
        >>> from funcgrad import checkpoint_policies as cp
        >>> policy = cp.save_only_these_names("h")
        >>> policy(cp.name_p, name="h"), policy(cp.name_p, name="g")
        (True, False)
    """
    return _Names(names, keep=True)


def save_any_names_but_these(*names):
    """Save every named value (``checkpoint_name``) except those named with one of ``names``.

    Example:
        >>> from funcgrad import checkpoint_policies as cp
        >>> policy = cp.save_any_names_but_these("h")
        >>> policy(cp.name_p, name="h"), policy(cp.name_p, name="g")
        (False, True)
    """
    return _Names(names, keep=False)


def save_anything_except_these_names(*names):
    """As JAX's: saves every value (the names are accepted for compatibility and ignored).

    Example:
        >>> from funcgrad import checkpoint_policies as cp
        >>> cp.save_anything_except_these_names("h")(cp.name_p, name="h")
        True
    """
    for n in names:
        if not isinstance(n, str):
            raise TypeError(f"save_anything_except_these_names: names must be str, got {n!r}")
    return everything_saveable


def save_from_both_policies(policy_1, policy_2):
    """Save a value when either policy saves it.

    Example:
        >>> from funcgrad import checkpoint_policies as cp
        >>> policy = cp.save_from_both_policies(cp.save_only_these_names("a"),
        ...                                  cp.save_only_these_names("b"))
        >>> policy(cp.name_p, name="a"), policy(cp.name_p, name="b"), policy(cp.name_p, name="c")
        (True, True, False)
    """
    def policy(prim, *args, **params):
        return bool(policy_1(prim, *args, **params)) or bool(policy_2(prim, *args, **params))
    return policy
