"""Helpers shared by the control-flow primitives: tracing user functions to bodies, interning
bodies by structure, carry checks, and the Jaxpr surgery their rules do."""
import numpy as np

from funcgrad import tree_util
from funcgrad.core import dtypes, interpreters, vma
from funcgrad.core.ad_util import Zero, instantiate
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, consts_as_args, pretty_print
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax.elementwise import convert_element_type


# --- tracing and interning user functions ---------------------------------------------------
_INTERNED = {}
_INTERN_MAX = 2048


_PLAIN = (int, float, bool, str, complex, type(None), np.dtype, np.generic)


def _opaque_params(jaxpr, out):
    """Collect what the printed form of ``jaxpr`` does not pin down: the identity of callables
    and other objects in params (two lambdas print alike), the bytes of arrays."""
    def visit(v):
        if isinstance(v, ClosedJaxpr):
            _opaque_params(v.jaxpr, out)
            for c in v.consts:
                out.append(("const", id(c)))
        elif isinstance(v, Jaxpr):
            _opaque_params(v, out)
        elif isinstance(v, (tuple, list)):
            for x in v:
                visit(x)
        elif isinstance(v, dict):
            for x in v.values():
                visit(x)
        elif isinstance(v, np.ndarray):
            out.append(("array", v.dtype.str, v.shape, v.tobytes()))
        elif not isinstance(v, _PLAIN):
            out.append(("object", id(v)))

    for eqn in jaxpr.eqns:
        for v in eqn.params.values():
            visit(v)
    return out


def _intern(closed):
    """One ClosedJaxpr object per structure, so caches keyed on identity hit across traces."""
    opaque = _opaque_params(closed.jaxpr, [])
    key = (pretty_print(closed.jaxpr), tuple(closed.in_avals), tuple(closed.out_avals),
           tuple(opaque))
    found = _INTERNED.get(key)
    if found is not None:
        return found
    if len(_INTERNED) >= _INTERN_MAX:
        _INTERNED.clear()
    _INTERNED[key] = closed
    return closed


def _trace(fun, in_tree, in_avals, name):
    """Stage ``fun`` (taking the pytree ``in_tree`` of arrays) at ``in_avals``.

    Returns (ClosedJaxpr taking (consts..., args...), consts, out_tree).
    """
    out_tree = []

    def flat(*leaves):
        out = fun(*tree_util.tree_unflatten(in_tree, list(leaves)))
        out_leaves, tree = tree_util.tree_flatten(out)
        for leaf in out_leaves:
            try:
                aval_of(leaf)
            except TypeError:
                raise TypeError(f"{name}: the function returned a {type(leaf).__name__} leaf "
                                f"({leaf!r}); outputs must be arrays or scalars") from None
        out_tree.append(tree)
        return out_leaves

    closed, _ = trace_to_jaxpr(flat, list(in_avals), debug_name=name)
    jaxpr, consts = consts_as_args(closed)
    return jaxpr, list(consts), out_tree[0]


def _abstractify(leaves):
    return [aval_of(x) for x in leaves]


def _strong(aval):
    return aval.strip_weak()


def _types_str(avals):
    return "(" + ", ".join(a.str_short() for a in avals) + ")"


def _same_types(a, b):
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype
                                    for x, y in zip(a, b))


def _to_strong(x, aval):
    """A carry leaf as a strongly typed value of its dtype (weak Python scalars included)."""
    if isinstance(x, (bool, int, float, complex)) or (isinstance(x, (np.ndarray, np.generic))):
        return np.asarray(x, aval.dtype)
    if aval.weak_type:
        return convert_element_type(x, aval.dtype, weak_type=False)
    return x


def _carry_avals(leaves):
    return [_strong(a) for a in _abstractify(leaves)]


def _widen_carry(leaves, avals, out_avals):
    """In a typed ``shard_map`` body (``core/vma.py``): the carry made to vary over every
    mesh axis its new value varies over, where it does not yet (JAX asks for a ``pcast`` of
    the initial value instead), as (leaves, avals) to trace the loop body again; None when
    the types agree."""
    wider = [a.vma | o.vma for a, o in zip(avals, out_avals)]
    if all(w == a.vma for w, a in zip(wider, avals)):
        return None
    return ([vma.vary(x, w) for x, w in zip(leaves, wider)],
            [a.update(vma=w) for a, w in zip(avals, wider)])


def _check_carry(name, what, in_tree, in_avals, out_tree, out_avals):
    if in_tree != out_tree or not _same_types(in_avals, out_avals):
        raise TypeError(f"{name}: {what} must have the same structure and types as the initial "
                        f"carry: the carry is {in_tree} with types {_types_str(in_avals)} but "
                        f"{what} is {out_tree} with types {_types_str(out_avals)}")


# --- jaxpr surgery shared by the rules ---------------------------------------------------------
def _parts(closed):
    """(ClosedJaxpr without consts taking (consts..., args...), consts)."""
    j, consts = consts_as_args(closed)
    return j, list(consts)


def _permute(closed, in_order, out_order):
    """``closed`` with its invars and outvars reordered (indices into the old lists)."""
    j = closed.jaxpr
    return ClosedJaxpr(Jaxpr(j.constvars, [j.invars[i] for i in in_order], j.eqns,
                             [j.outvars[i] for i in out_order]), closed.consts)


def _groups(sizes):
    """Index ranges of consecutive groups of the given sizes."""
    out, start = [], 0
    for n in sizes:
        out.append(list(range(start, start + n)))
        start += n
    return out


def _split_linearize():
    """Whether a jvp rule runs under linearize's partial evaluation: then primal outputs must
    come from an application that sees only primal (known) inputs."""
    return bool(getattr(interpreters.current(), "forward_known", False))


def _inexact(aval):
    return dtypes.is_inexact(aval.dtype)


def _zero_tangents_to_values(ts, avals, wanted):
    return [instantiate(t) for t, a, w in zip(ts, avals, wanted) if w]


def _nonzero(t):
    return type(t) is not Zero
