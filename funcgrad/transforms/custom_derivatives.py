"""User-defined derivatives: ``custom_jvp`` and ``custom_vjp``.

A decorated function is staged to a Jaxpr when called under a transformation and bound as one
higher-order primitive (``custom_jvp_call`` / ``custom_vjp_call``) whose params carry the user's
rules. The primal meaning (eager, ``jit`` lowering) is the staged body; the jvp rule of the
primitive calls the user's rule instead of differentiating the body.

``custom_vjp`` in reverse mode: the jvp rule runs ``fwd`` (the primal part, now) and emits a
``custom_lin`` application that is linear in the tangents and whose transpose rule calls
``bwd``. Forward mode (``jvp``/``jacfwd``) of a ``custom_vjp`` function is not possible (as
in JAX): ``custom_lin`` cannot be evaluated.

Closed-over values of the decorated function are passed as operands but treated as constants
for differentiation (their tangents are ignored).

Batching: the batching rules of these primitives live in the ``# --- batching rules ---``
section at the end of this file (vmap of the body and of the user's rules).
"""
import functools
import inspect

from funcgrad import tree_util
from funcgrad.core import batching, batching_util, dtypes, interpreters
from funcgrad.core.ad import JVPInterpreter, JVPTracer
from funcgrad.core.ad_util import Zero, instantiate, tangent_aval
from funcgrad.core.interpreters import Tracer
from funcgrad.core.jaxpr import consts_as_args, eval_jaxpr
from funcgrad.core.primitive import Primitive, current_policy, policy_scope
from funcgrad.core.staging import StagingInterpreter, trace_to_jaxpr
from funcgrad.core.values import aval_of


def _resolve_args(fun, args, kwargs):
    if not kwargs:
        return tuple(args)
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{getattr(fun, '__name__', 'fun')}: {e}") from None
    bound.apply_defaults()
    return tuple(bound.args) + tuple(bound.kwargs.values())


def _is_traced(args):
    return any(isinstance(x, Tracer) for x in tree_util.tree_leaves(args))


_STAGED = object()


def _concrete_owner(leaves):
    """Whether nothing is being staged: every traced leaf is a JVP tracer over a concrete value
    (eager ``grad``/``jvp``) and every interpreter from the current one down is a JVP
    interpreter or linearize's partial evaluation. Then the innermost JVP interpreter owning
    one of ``leaves`` (None when no leaf is traced: the function can just run); else _STAGED.
    On that path the user's function and rules run on concrete values, so Python control flow
    on the inputs works (as in JAX), instead of the body being staged abstractly."""
    owner = None
    for x in leaves:
        if not isinstance(x, Tracer):
            continue
        if type(x) is not JVPTracer:
            return _STAGED
        y = x
        while type(y) is JVPTracer:
            y = y.primal
        if isinstance(y, Tracer):
            return _STAGED
        if owner is None or x._interp.depth() > owner.depth():
            owner = x._interp
    root = interpreters.root()
    interp = interpreters.current()
    while interp is not owner and interp is not root:
        if interp is None or not (type(interp) is JVPInterpreter or (
                isinstance(interp, StagingInterpreter) and interp.forward_known)):
            return _STAGED
        interp = interp.parent
    return owner if interp is owner or owner is None else _STAGED


def _jvp_at(owner, leaves, rule):
    """Apply ``rule(primals, tangents) -> (outs, tangent outs)`` the way ``owner`` (a JVP
    interpreter) applies a primitive's jvp rule: under its parent, wrapping the results."""
    primals, tangents = [], []
    for a in leaves:
        if type(a) is JVPTracer and a._interp is owner:
            primals.append(a.primal)
            tangents.append(a.tangent)
        else:
            primals.append(a)
            tangents.append(Zero(tangent_aval(aval_of(a))))
    with interpreters.using(owner.parent):
        outs, touts = rule(primals, tangents)
    return [owner.new(o, t) for o, t in zip(outs, touts)]


def _stage(fun, dyn_args, rebuild):
    """Stage ``fun`` on the leaves of ``dyn_args``: (body, consts, leaves, in_tree, out_tree)."""
    leaves, in_tree = tree_util.tree_flatten(dyn_args)
    box = []

    def flat_fun(*flat):
        out = fun(*rebuild(tree_util.tree_unflatten(in_tree, flat)))
        o_leaves, o_tree = tree_util.tree_flatten(out)
        box.append(o_tree)
        return o_leaves

    closed, _ = trace_to_jaxpr(flat_fun, [aval_of(x) for x in leaves],
                               debug_name=getattr(fun, "__name__", None))
    body, consts = consts_as_args(closed)
    return body, consts, leaves, in_tree, box[0]


def _split_nondiff(args, nondiff_argnums):
    nondiff = {i: args[i] for i in nondiff_argnums}
    dyn = tuple(a for i, a in enumerate(args) if i not in nondiff)

    def rebuild(dyn_args):
        it = iter(dyn_args)
        return [nondiff[i] if i in nondiff else next(it) for i in range(len(args))]
    return nondiff, dyn, rebuild


def _call_body(*args, call_jaxpr, num_consts, **_):
    return eval_jaxpr(call_jaxpr.jaxpr, [], *args)


def _lower_body(ctx, *args, call_jaxpr, **_):
    return ctx.lower_jaxpr(call_jaxpr, [], args)


def _check_outs(name, what, outs, avals):
    if len(outs) != len(avals):
        raise TypeError(f"{name}: the {what} returned {len(outs)} outputs, the function "
                        f"returns {len(avals)}")
    for o, a in zip(outs, avals):
        oa = aval_of(o)
        if oa.shape != a.shape:
            raise TypeError(f"{name}: the {what} returned {oa.str_short()} where the function "
                            f"returns {a.str_short()}")


# --- custom_jvp ----------------------------------------------------------------------------------
custom_jvp_call_p = Primitive("custom_jvp_call", multiple_results=True)
custom_jvp_call_p.def_abstract_eval(lambda *avals, call_jaxpr, **_: list(call_jaxpr.out_avals))
custom_jvp_call_p.def_impl(_call_body)
custom_jvp_call_p.def_lowering(_lower_body)


def _custom_jvp_call_jvp(primals, tangents, call_jaxpr, jvp, num_consts, name):
    args = primals[num_consts:]
    ts = [instantiate(t) if dtypes.is_inexact(aval_of(p).dtype) else instantiate(t)
          for p, t in zip(args, tangents[num_consts:])]
    outs, touts = jvp(args, ts)
    out_avals = [aval_of(o) for o in outs] if call_jaxpr is None else call_jaxpr.out_avals
    _check_outs(name, "custom jvp rule's primal output", outs, out_avals)
    res_t = []
    for o, t, a in zip(outs, touts, out_avals):
        if t is None or type(t) is Zero or not dtypes.is_inexact(a.dtype):
            res_t.append(Zero(tangent_aval(a)))
        else:
            ta = aval_of(t)
            if ta.shape != a.shape:
                raise TypeError(f"{name}: the custom jvp rule returned a tangent "
                                f"{ta.str_short()} for an output {a.str_short()}")
            if ta.dtype != a.dtype:
                from funcgrad.lax.elementwise import convert_element_type
                t = convert_element_type(t, a.dtype)
            res_t.append(t)
    return list(outs), res_t


custom_jvp_call_p.def_jvp(_custom_jvp_call_jvp)


class custom_jvp:
    """A function with a user-defined JVP (forward-mode) rule; reverse mode follows by
    transposing the rule, which must then be linear in the tangents.

    Example:
        >>> @funcgrad.custom_jvp
        ... def f(x):
        ...     return jnp.log1p(jnp.exp(x))
        >>> @f.defjvp
        ... def f_jvp(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     return f(x), t * funcgrad.nn.sigmoid(x)
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp = None

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def defjvp(self, jvp, symbolic_zeros=False):
        """Set the rule ``jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out)``.

        Example:
            >>> f = funcgrad.custom_jvp(jnp.sin)
            >>> _ = f.defjvp(lambda primals, tangents: (f(*primals), tangents[0] * 2.0))
            >>> funcgrad.grad(f)(0.5)      # the rule's 2.0, not cos(0.5)
            Array(2., dtype=float32)
        """
        self.jvp = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, ``rule(tangent, primal_out, *primals)`` (None: not
        differentiable); the output tangent is their sum.

        Example:
            >>> f = funcgrad.custom_jvp(lambda x, y: x * y)
            >>> _ = f.defjvps(lambda t, ans, x, y: t * y, lambda t, ans, x, y: t * x)
            >>> funcgrad.grad(f, argnums=(0, 1))(2.0, 3.0)
            (Array(3., dtype=float32), Array(2., dtype=float32))
        """
        def jvp(primals, tangents):
            ans = self.fun(*primals)
            out = None
            for rule, t in zip(jvps, tangents):
                if rule is None:
                    continue
                contrib = rule(t, ans, *primals)
                out = contrib if out is None else tree_util.tree_map(
                    lambda a, b: a + b, out, contrib)
            if out is None:
                out = tree_util.tree_map(lambda a: a * 0, ans)
            return ans, out
        self.jvp = jvp
        return jvp

    def __call__(self, *args, **kwargs):
        name = getattr(self.fun, "__name__", "custom_jvp function")
        if self.jvp is None:
            raise AttributeError(f"custom_jvp function {name} has no JVP rule: define one with "
                                 f"@{name}.defjvp")
        args = _resolve_args(self.fun, args, kwargs)
        if interpreters.is_eager() and not _is_traced(args):
            return self.fun(*args)
        nondiff, dyn, rebuild = _split_nondiff(args, self.nondiff_argnums)
        leaves, in_tree = tree_util.tree_flatten(dyn)
        owner = _concrete_owner(leaves)
        if owner is None:
            return self.fun(*args)
        if owner is _STAGED:
            body, consts, leaves, in_tree, out_tree = _stage(self.fun, dyn, rebuild)
        else:
            out_tree = None     # known once the rule has run
        tree_box = [out_tree]
        user_jvp, nondiff_vals = self.jvp, [nondiff[i] for i in sorted(nondiff)]
        policy = current_policy()   # the rule computes the primal as the body did (autocast)

        def jvp_flat(primals, tangents):
            p = tree_util.tree_unflatten(in_tree, primals)
            t = tree_util.tree_unflatten(in_tree, tangents)
            with policy_scope(policy):
                res = user_jvp(*nondiff_vals, tuple(p), tuple(t))
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"{name}: the custom jvp rule must return a pair "
                                f"(primal_out, tangent_out), got {type(res).__name__}")
            out, tout = res
            o_leaves, o_tree = tree_util.tree_flatten(out)
            if tree_box[0] is None:
                tree_box[0] = o_tree
            elif o_tree != tree_box[0]:
                raise TypeError(f"{name}: the custom jvp rule's primal output has structure "
                                f"{o_tree}, the function returns {tree_box[0]}")
            t_leaves = tree_util.tree_leaves(tout, is_leaf=lambda x: x is None)
            if len(t_leaves) != len(o_leaves):
                raise TypeError(f"{name}: the custom jvp rule's tangent output must have the "
                                f"structure of the primal output {o_tree}")
            return o_leaves, t_leaves

        if owner is not _STAGED:
            outs = _jvp_at(owner, leaves, lambda p, t: _custom_jvp_call_jvp(
                p, t, call_jaxpr=None, jvp=jvp_flat, num_consts=0, name=name))
        else:
            outs = custom_jvp_call_p.bind(*consts, *leaves, call_jaxpr=body, jvp=jvp_flat,
                                          num_consts=len(consts), name=name)
        return tree_util.tree_unflatten(tree_box[0], outs)


# --- custom_vjp ----------------------------------------------------------------------------------
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True)
custom_vjp_call_p.def_abstract_eval(lambda *avals, call_jaxpr, **_: list(call_jaxpr.out_avals))
custom_vjp_call_p.def_impl(_call_body)
custom_vjp_call_p.def_lowering(_lower_body)

custom_lin_p = Primitive("custom_lin", multiple_results=True, internal=True)
custom_lin_p.def_abstract_eval(lambda *avals, out_avals, **_: list(out_avals))


def _custom_lin_impl(*args, name, **_):
    raise TypeError(f"{name}: forward-mode differentiation (jvp, jacfwd) of a custom_vjp "
                    f"function is not supported; use reverse mode (vjp, grad, jacrev) or "
                    f"define the function with custom_jvp")


custom_lin_p.def_impl(_custom_lin_impl)


def _custom_lin_lowering(ctx, *args, name, **_):
    raise TypeError(f"{name}: forward-mode differentiation of a custom_vjp function cannot be "
                    f"compiled; use reverse mode (grad, vjp) or custom_jvp")


custom_lin_p.def_lowering(_custom_lin_lowering)


def _custom_lin_transpose(cts, *args, num_res, bwd, out_avals, in_avals, name):
    res = args[:num_res]
    cts = [instantiate(c) if type(c) is Zero and dtypes.is_inexact(a.dtype) else c
           for c, a in zip(cts, out_avals)]
    in_cts = bwd(list(res), cts)
    out = [None] * num_res
    for c, a in zip(in_cts, in_avals):
        out.append(Zero(tangent_aval(a)) if c is None else c)
    return out


custom_lin_p.def_transpose(_custom_lin_transpose)


def _custom_vjp_call_jvp(primals, tangents, call_jaxpr, fwd, bwd, num_consts, name):
    args = primals[num_consts:]
    outs, res = fwd(args)
    primal_avals = [aval_of(o) for o in outs] if call_jaxpr is None else call_jaxpr.out_avals
    _check_outs(name, "fwd rule's primal output", outs, primal_avals)
    arg_ts = tangents[num_consts:]
    if all(type(t) is Zero for t in arg_ts):
        return list(outs), [Zero(tangent_aval(a)) for a in primal_avals]
    in_avals = [aval_of(a) for a in args]
    out_avals = [tangent_aval(a) for a in primal_avals]
    t_outs = custom_lin_p.bind(*res, *[instantiate(t) for t in arg_ts], num_res=len(res),
                               bwd=bwd, out_avals=tuple(out_avals), in_avals=tuple(in_avals),
                               name=name)
    t_outs = [t if dtypes.is_inexact(a.dtype) else Zero(a) for t, a in zip(t_outs, out_avals)]
    return list(outs), t_outs


custom_vjp_call_p.def_jvp(_custom_vjp_call_jvp)


class custom_vjp:
    """A function with a user-defined VJP (reverse-mode) rule.

    ``fwd(*args) -> (out, residuals)``; ``bwd(*nondiff_args, residuals, cotangent) -> tuple``
    with one cotangent per differentiable argument (``None`` for zero).

    Example:
        >>> @funcgrad.custom_vjp
        ... def clip_gradient(x):
        ...     return x
        >>> clip_gradient.defvjp(lambda x: (x, None),
        ...                      lambda res, g: (jnp.clip(g, -1.0, 1.0),))
    """

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = self.bwd = None

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def defvjp(self, fwd, bwd, symbolic_zeros=False):
        """Set the forward rule ``fwd`` and the backward rule ``bwd`` (see the class doc)."""
        self.fwd, self.bwd = fwd, bwd

    def __call__(self, *args, **kwargs):
        name = getattr(self.fun, "__name__", "custom_vjp function")
        if self.fwd is None:
            raise AttributeError(f"custom_vjp function {name} has no VJP rule: define one with "
                                 f"{name}.defvjp(fwd, bwd)")
        args = _resolve_args(self.fun, args, kwargs)
        if interpreters.is_eager() and not _is_traced(args):
            return self.fun(*args)
        nondiff, dyn, rebuild = _split_nondiff(args, self.nondiff_argnums)
        leaves, in_tree = tree_util.tree_flatten(dyn)
        owner = _concrete_owner(leaves)
        if owner is None:
            return self.fun(*args)
        if owner is _STAGED:
            body, consts, leaves, in_tree, out_tree = _stage(self.fun, dyn, rebuild)
        else:
            out_tree = None     # known once fwd has run
        tree_box = [out_tree]
        user_fwd, user_bwd = self.fwd, self.bwd
        nondiff_vals = [nondiff[i] for i in sorted(nondiff)]
        dyn_trees = [tree_util.tree_structure(d) for d in dyn]
        policy = current_policy()   # fwd computes the output as the body did (autocast)

        def fwd_flat(primals):
            full = rebuild(tree_util.tree_unflatten(in_tree, primals))
            with policy_scope(policy):
                res = user_fwd(*full)
            if not (isinstance(res, (tuple, list)) and len(res) == 2):
                raise TypeError(f"{name}: the fwd rule must return a pair (output, residuals), "
                                f"got {type(res).__name__}")
            out, residuals = res
            o_leaves, o_tree = tree_util.tree_flatten(out)
            if tree_box[0] is None:
                tree_box[0] = o_tree
            elif o_tree != tree_box[0]:
                raise TypeError(f"{name}: the fwd rule's output has structure {o_tree}, the "
                                f"function returns {tree_box[0]}")
            r_leaves, r_tree = tree_util.tree_flatten(residuals)
            res_tree_box[:] = [r_tree]
            return o_leaves, r_leaves

        res_tree_box = []

        def bwd_flat(res_leaves, cts):
            residuals = tree_util.tree_unflatten(res_tree_box[0], res_leaves)
            ct = tree_util.tree_unflatten(tree_box[0], cts)
            in_cts = user_bwd(*nondiff_vals, residuals, ct)
            if not isinstance(in_cts, (tuple, list)) or len(in_cts) != len(dyn):
                raise TypeError(f"{name}: the bwd rule must return a tuple with one cotangent "
                                f"per differentiable argument ({len(dyn)}), got {in_cts!r}")
            flat = []
            for c, d, t in zip(in_cts, dyn, dyn_trees):
                if c is None:
                    flat.extend([None] * t.num_leaves)
                else:
                    c_leaves = tree_util.tree_leaves(c, is_leaf=lambda x: x is None)
                    if len(c_leaves) != t.num_leaves:
                        raise TypeError(f"{name}: a cotangent returned by bwd does not have "
                                        f"the structure of its argument ({t})")
                    flat.extend(c_leaves)
            return flat

        if owner is not _STAGED:
            outs = _jvp_at(owner, leaves, lambda p, t: _custom_vjp_call_jvp(
                p, t, call_jaxpr=None, fwd=fwd_flat, bwd=bwd_flat, num_consts=0, name=name))
        else:
            outs = custom_vjp_call_p.bind(*consts, *leaves, call_jaxpr=body, fwd=fwd_flat,
                                          bwd=bwd_flat, num_consts=len(consts), name=name)
        return tree_util.tree_unflatten(tree_box[0], outs)


# --- batching rules ---
# The body is batched with outputs on axis 0; the user's rules are vmapped to match.
def _batched_body(call_jaxpr, args, dims):
    size = batching_util.batch_size(args, dims)
    n_out = len(call_jaxpr.out_avals)
    batched, _ = batching.batch_jaxpr(call_jaxpr, size, list(dims), out_dims=[0] * n_out)
    body, consts = consts_as_args(batched)
    return size, body, consts, n_out


def _custom_jvp_call_batch(args, dims, call_jaxpr, jvp, num_consts, name):
    from funcgrad.transforms.batching import vmap
    size, body, new_consts, n_out = _batched_body(call_jaxpr, args, dims)
    arg_dims = tuple(dims[num_consts:])

    def batched_jvp(primals, tangents):
        outs, touts = vmap(lambda p, t: tuple(jvp(list(p), list(t))), in_axes=(arg_dims, arg_dims),
                           out_axes=0, axis_size=size)(tuple(primals), tuple(tangents))
        return list(outs), list(touts)

    outs = custom_jvp_call_p.bind(*new_consts, *args, call_jaxpr=body, jvp=batched_jvp,
                                  num_consts=len(new_consts) + num_consts, name=name)
    return outs, [0] * n_out


def _custom_vjp_call_batch(args, dims, call_jaxpr, fwd, bwd, num_consts, name):
    from funcgrad.lax.reductions import reduce_sum
    from funcgrad.transforms.batching import vmap
    size, body, new_consts, n_out = _batched_body(call_jaxpr, args, dims)
    arg_dims = tuple(dims[num_consts:])

    def batched_fwd(primals):
        outs, res = vmap(lambda p: tuple(fwd(list(p))), in_axes=(arg_dims,), out_axes=0,
                         axis_size=size)(tuple(primals))
        return list(outs), list(res)

    def batched_bwd(res, cts):
        in_cts = vmap(lambda r, c: tuple(bwd(list(r), list(c))), in_axes=(0, 0), out_axes=0,
                      axis_size=size)(tuple(res), tuple(cts))
        out = []
        for c, d in zip(in_cts, arg_dims):
            if c is None:
                out.append(None)
            elif d is None:
                out.append(reduce_sum(c, (0,)))
            else:
                out.append(batching_util.moveaxis(c, 0, d))
        return out

    outs = custom_vjp_call_p.bind(*new_consts, *args, call_jaxpr=body, fwd=batched_fwd,
                                  bwd=batched_bwd, num_consts=len(new_consts) + num_consts,
                                  name=name)
    return outs, [0] * n_out


custom_jvp_call_p.def_batch(_custom_jvp_call_batch)
custom_vjp_call_p.def_batch(_custom_vjp_call_batch)
