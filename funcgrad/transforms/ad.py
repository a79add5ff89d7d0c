"""Automatic differentiation: forward mode as an interpreter, reverse mode as linearize + transpose.

* ``jvp``: the JVP interpreter carries (primal, tangent) pairs through each primitive's jvp rule.
* ``linearize``: the same JVP, run with the tangents as staged values of a partially evaluating
  staging interpreter: primal operations run now (on the parent interpreter), tangent operations
  are recorded into a linear Jaxpr.
* ``vjp``/``grad``: transpose the linear Jaxpr (``backward_pass``) with each primitive's transpose
  rule, walking its equations backwards.

Tangents and cotangents may be symbolic zeros (``ad_util.Zero``): no work is done for them.
Everything composes: rules bind primitives under the parent interpreter, so derivatives of
derivatives, derivatives under ``jit`` and of ``jit`` all nest.
"""
import functools

import numpy as np

from funcgrad.core import errors
from funcgrad import tree_util
from funcgrad.core import dtypes, interpreters
from funcgrad.core.ad_util import (UndefinedPrimal, Zero, add_tangents, instantiate,
                                   is_undefined_primal, tangent_aval)
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.interpreters import Interpreter, Tracer
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, Var, consts_as_args
from funcgrad.core.staging import StagingInterpreter, trace_to_jaxpr
from funcgrad.core.values import aval_of, is_arraylike


# --- the JVP interpreter -------------------------------------------------------------------
class JVPTracer(Tracer):
    """A value inside ``jvp``: its primal and its tangent (never a Zero: those are dropped)."""

    __slots__ = ("primal", "tangent")

    def __init__(self, interp, primal, tangent):
        self._interp, self.primal, self.tangent = interp, primal, tangent

    @property
    def aval(self):
        return aval_of(self.primal)

    def _concrete(self, operation):
        p = self.primal
        if isinstance(p, Tracer):
            return p._concrete(operation)
        return np.asarray(p)


class JVPInterpreter(Interpreter):
    """Applies jvp rules to applications that involve its own tracers."""

    def __init__(self, parent, debug_name=None):
        self.parent = parent
        self.debug_name = debug_name

    def new(self, primal, tangent):
        if type(tangent) is Zero:
            return primal
        return JVPTracer(self, primal, tangent)

    def process_primitive(self, prim, args, params):
        primals, tangents, own = [], [], False
        for a in args:
            if type(a) is JVPTracer and a._interp is self:
                own = True
                primals.append(a.primal)
                tangents.append(a.tangent)
            else:
                primals.append(a)
                tangents.append(None)
        parent = self.parent
        if not own:
            return self.forward_to_parent(prim, primals, params)
        rule = prim.jvp
        if rule is None:
            raise errors.MissingRuleError(
                f"differentiation of primitive {prim.name} is not implemented: it has no jvp "
                f"rule (inputs {', '.join(aval_of(p).str_short() for p in primals)})")
        tangents = [Zero(tangent_aval(aval_of(p))) if t is None else t
                    for p, t in zip(primals, tangents)]
        with interpreters.using(parent):
            out, tout = rule(primals, tangents, **params)
        if prim.multiple_results:
            return [self.new(o, t) for o, t in zip(out, tout)]
        return self.new(out, tout)

    def split(self, x):
        """(primal, tangent) of a value seen at the end of the traced function."""
        if type(x) is JVPTracer and x._interp is self:
            return x.primal, x.tangent
        return x, Zero(tangent_aval(aval_of(x)))


class _FlatFun:
    """``fun`` over pytrees as a function of flat leaf lists, for the flat transforms. After a
    call, ``out_tree`` is the output treedef and ``aux`` the auxiliary value (``has_aux``)."""

    def __init__(self, fname, fun, in_tree, has_aux=False):
        self.fname, self.fun, self.in_tree, self.has_aux = fname, fun, in_tree, has_aux
        self.out_tree = self.aux = None

    def __call__(self, *leaves):
        out = self.fun(*tree_util.tree_unflatten(self.in_tree, leaves))
        if self.has_aux:
            out, self.aux = _split_aux(self.fname, out)
        o_leaves, self.out_tree = tree_util.tree_flatten(out)
        return o_leaves


def _check_leaf(fname, x, what):
    if not is_arraylike(x):
        raise TypeError(f"{fname}: {what} must be arrays or scalars, got {type(x).__name__} "
                        f"{x!r}")


def _zero_if_float0(t, aval):
    if type(t) is Zero:
        return t
    if getattr(t, "dtype", None) == dtypes.float0 or not dtypes.is_inexact(aval.dtype):
        return Zero(tangent_aval(aval))
    return t


def jvp_flat(fun, primals, tangents):
    """Forward mode on flat lists; tangents may be Zero. Returns (primal outs, tangent outs)
    where tangent outs may be Zero."""
    interp = JVPInterpreter(interpreters.current(), getattr(fun, "__name__", None))
    args = [interp.new(p, t) for p, t in zip(primals, tangents)]
    with interpreters.using(interp):
        outs = fun(*args)
    pairs = [interp.split(o) for o in outs]
    return [p for p, _ in pairs], [t for _, t in pairs]


def jvp(fun, primals, tangents, has_aux=False):
    """Forward-mode derivative: ``(fun(*primals), d fun(primals) . tangents)``.

    ``primals`` and ``tangents`` are tuples (or lists) of pytrees of the same structure.

    Example:
        >>> funcgrad.jvp(jnp.sin, (0.5,), (1.0,))
        (Array(0.479..., dtype=float32), Array(0.877..., dtype=float32))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"jvp: primals and tangents must be tuples or lists, got "
                        f"{type(primals).__name__} and {type(tangents).__name__}")
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
    if p_tree != t_tree:
        raise TypeError(f"jvp: primals and tangents must have the same tree structure, got "
                        f"{p_tree} and {t_tree}")
    ts = []
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        _check_leaf("jvp", p, "primals")
        pa = aval_of(p)
        ta = aval_of(t) if getattr(t, "dtype", None) != dtypes.float0 else None
        expected = dtypes.tangent_dtype(pa.dtype)
        if ta is not None and (ta.shape != pa.shape or (ta.dtype != expected and not (
                ta.weak_type and dtypes.is_inexact(expected)))):
            raise TypeError(f"jvp: primal and tangent leaf {i} must match in shape and the "
                            f"tangent dtype must be {np.dtype(expected).name}, got primal "
                            f"{pa.str_short()} and tangent {ta.str_short()}")
        ts.append(_zero_if_float0(_as_dtype(t, tangent_aval(pa)), pa))
    flat_fun = _FlatFun("jvp", fun, p_tree, has_aux)

    interp = JVPInterpreter(interpreters.current(), getattr(fun, "__name__", None))
    args = [interp.new(p, t) for p, t in zip(p_leaves, ts)]
    with interpreters.using(interp):
        outs = flat_fun(*args)
    pairs = [interp.split(o) for o in outs]
    out_tree = flat_fun.out_tree
    primal_out = tree_util.tree_unflatten(out_tree, [p for p, _ in pairs])
    tangent_out = tree_util.tree_unflatten(out_tree, [_on_device(instantiate(t))
                                                      for _, t in pairs])
    if has_aux:
        aux = _strip_tracers(interp, flat_fun.aux)
        return primal_out, tangent_out, aux
    return primal_out, tangent_out


def _strip_tracers(interp, tree):
    return tree_util.tree_map(lambda x: interp.split(x)[0] if isinstance(x, Tracer) else x, tree)


def _split_aux(fname, out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"{fname}(..., has_aux=True): the function must return a pair "
                        f"(output, aux), got {type(out).__name__}")
    return out[0], out[1]


# --- linearize: jvp + partial evaluation ---------------------------------------------------
class LinearFunction:
    """A linear Jaxpr mapping the nonzero input tangents to the nonzero output tangents.

    ``in_nz[i]``/``out_nz[j]``: whether input i / output j has a (possibly) nonzero tangent;
    ``in_avals``/``out_avals``: tangent avals of every input / output.
    """

    __slots__ = ("closed", "in_nz", "out_nz", "in_avals", "out_avals", "interp")

    def __init__(self, closed, in_nz, out_nz, in_avals, out_avals, interp=None):
        self.closed, self.in_nz, self.out_nz = closed, in_nz, out_nz
        self.in_avals, self.out_avals = in_avals, out_avals
        self.interp = interp    # the JVP interpreter that ran (to strip tracers from aux data)

    def primal_only(self, tree):
        """``tree`` (aux data) with the linearization's tracers replaced by their primals."""
        return _strip_tracers(self.interp, tree)

    def jvp(self, tangents):
        """Push tangents (one per input; Zero allowed) forward."""
        args = [instantiate(t) for t, nz in zip(tangents, self.in_nz) if nz]
        outs = iter(self.closed(*args)) if self.closed.jaxpr.outvars else iter(())
        return [next(outs) if nz else Zero(a) for nz, a in zip(self.out_nz, self.out_avals)]

    def transpose(self, cts):
        """Pull cotangents (one per output; Zero allowed) back to the inputs (Zero or array)."""
        cts_nz = [ct for ct, nz in zip(cts, self.out_nz) if nz]
        j = self.closed.jaxpr
        args = [UndefinedPrimal(v.aval) for v in j.invars]
        in_cts = iter(backward_pass(j, self.closed.consts, args, cts_nz))
        return [next(in_cts) if nz else Zero(a) for nz, a in zip(self.in_nz, self.in_avals)]


def linearize_flat(fun, primals, debug_name=None):
    """(primal outs, LinearFunction) for ``fun`` on flat lists at ``primals``."""
    parent = interpreters.current()
    staging = StagingInterpreter(parent, forward_known=True, debug_name=debug_name)
    jvp_interp = JVPInterpreter(staging, debug_name)
    in_avals = [tangent_aval(aval_of(p)) for p in primals]
    in_nz = [dtypes.is_inexact(a.dtype) for a in in_avals]
    tangent_args = [staging.new_arg(a) for a, nz in zip(in_avals, in_nz) if nz]
    it = iter(tangent_args)
    args = [jvp_interp.new(p, next(it)) if nz else p for p, nz in zip(primals, in_nz)]
    with interpreters.using(jvp_interp):
        outs = fun(*args)
    pairs = [jvp_interp.split(o) for o in outs]
    primal_outs = []
    for p, _ in pairs:
        if staging.is_own(p):
            raise TypeError(f"linearize({debug_name or 'fun'}): a primal output depends on a "
                            f"tangent; some jvp rule mixes them up")
        primal_outs.append(p)
    out_avals = [tangent_aval(aval_of(p)) for p in primal_outs]
    out_nz, tangent_outs = [], []
    for (_, t), a in zip(pairs, out_avals):
        nz = type(t) is not Zero and getattr(t, "dtype", None) != dtypes.float0 and \
            dtypes.is_inexact(a.dtype)
        out_nz.append(nz)
        if nz:
            tangent_outs.append(t)
    closed = staging.finish([t.var for t in tangent_args], tangent_outs)
    closed, _ = dce_closed_jaxpr(closed)
    return primal_outs, LinearFunction(closed, in_nz, out_nz, in_avals, out_avals, jvp_interp)


def linearize(fun, *primals):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the staged linear map.

    The primal computation runs once now; ``f_jvp`` replays only the tangent computation.

    Example:
        >>> y, f_jvp = funcgrad.linearize(jnp.sin, 0.5)
        >>> f_jvp(1.0)          # cos(0.5)
    """
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    for p in p_leaves:
        _check_leaf("linearize", p, "primals")
    flat_fun = _FlatFun("linearize", fun, p_tree)

    primal_outs, lin = linearize_flat(flat_fun, p_leaves, getattr(fun, "__name__", None))
    out_tree = flat_fun.out_tree

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.tree_flatten(tuple(tangents))
        if t_tree != p_tree:
            raise TypeError(f"linearize: the tangents must have the structure of the primals "
                            f"{p_tree}, got {t_tree}")
        ts = [_zero_if_float0(_as_dtype(t, tangent_aval(aval_of(p))), aval_of(p))
              for t, p in zip(t_leaves, p_leaves)]
        outs = lin.jvp(ts)
        return tree_util.tree_unflatten(out_tree, [instantiate(t) for t in outs])

    return tree_util.tree_unflatten(out_tree, primal_outs), f_jvp


# --- transposition ----------------------------------------------------------------------------
def backward_pass(jaxpr, consts, args, cts):
    """Transpose ``jaxpr`` with respect to its ``UndefinedPrimal`` arguments.

    ``args``: one per invar, a value (non-linear input) or an ``UndefinedPrimal``;
    ``cts``: one cotangent per outvar (Zero allowed). Equations that do not depend on a linear
    input are evaluated forwards first (this is where rematerialized values are recomputed).
    Returns one cotangent per invar: Zero or an array for linear ones, None for the others.
    """
    env = {}
    linear = set()
    for v, c in zip(jaxpr.constvars, consts):
        env[v] = c
    for v, a in zip(jaxpr.invars, args):
        if is_undefined_primal(a):
            linear.add(v)
        else:
            env[v] = a

    def read(atom):
        return atom.val if type(atom) is Literal else env[atom]

    lin_eqns = []
    interp = interpreters.current()
    for eqn in jaxpr.eqns:
        if any(type(x) is Var and x in linear for x in eqn.invars):
            lin_eqns.append(eqn)
            linear.update(eqn.outvars)
        else:
            outs = interp.process_primitive(eqn.prim, [read(x) for x in eqn.invars], eqn.params)
            if not eqn.prim.multiple_results:
                outs = [outs]
            for v, o in zip(eqn.outvars, outs):
                env[v] = o

    ct_env = {}

    def add_ct(v, ct):
        if type(v) is Var and v in linear and ct is not None and type(ct) is not Zero:
            prev = ct_env.get(v)
            ct_env[v] = ct if prev is None else add_tangents(prev, ct)

    for v, ct in zip(jaxpr.outvars, cts):
        add_ct(v, ct)
    for eqn in reversed(lin_eqns):
        cts_out = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(c is None for c in cts_out):
            continue
        cts_out = [Zero(v.aval) if c is None else c for v, c in zip(eqn.outvars, cts_out)]
        rule = eqn.prim.transpose
        if rule is None:
            raise errors.MissingRuleError(
                f"transpose of primitive {eqn.prim.name} is not implemented: it has no "
                f"transpose rule (reverse-mode differentiation needs one for every primitive "
                f"applied to a tangent)")
        eargs = [UndefinedPrimal(x.aval) if type(x) is Var and x in linear else read(x)
                 for x in eqn.invars]
        cts_in = rule(cts_out if eqn.prim.multiple_results else cts_out[0], *eargs,
                      **eqn.params)
        for x, ct in zip(eqn.invars, cts_in):
            add_ct(x, ct)
    out = []
    for v in jaxpr.invars:
        if v in linear:
            ct = ct_env.get(v)
            out.append(Zero(v.aval) if ct is None else ct)
        else:
            out.append(None)
    return out


# --- vjp, grad ---------------------------------------------------------------------------------
def _vjp_flat(fun, primals, debug_name=None):
    outs, lin = linearize_flat(fun, primals, debug_name)
    return outs, lin


def vjp(fun, *primals, has_aux=False):
    """``(fun(*primals), f_vjp)`` where ``f_vjp(cotangent)`` returns one cotangent per primal.

    Example:
        >>> y, f_vjp = funcgrad.vjp(jnp.sin, 0.5)
        >>> f_vjp(1.0)          # (cos(0.5),)
    """
    p_leaves, p_tree = tree_util.tree_flatten(tuple(primals))
    for p in p_leaves:
        _check_leaf("vjp", p, "primals")
    flat_fun = _FlatFun("vjp", fun, p_tree, has_aux)

    parent = interpreters.current()
    primal_outs, lin = linearize_flat(flat_fun, p_leaves, getattr(fun, "__name__", None))
    out_tree = flat_fun.out_tree
    in_avals = [aval_of(p) for p in p_leaves]

    def f_vjp(ct):
        ct_leaves, ct_tree = tree_util.tree_flatten(ct)
        if ct_tree != out_tree:
            raise TypeError(f"vjp: the cotangent must have the structure of the output "
                            f"{out_tree}, got {ct_tree}")
        cts = []
        for i, (c, a) in enumerate(zip(ct_leaves, lin.out_avals)):
            ca = aval_of(c) if getattr(c, "dtype", None) != dtypes.float0 else None
            if ca is not None and ca.shape != a.shape:
                raise TypeError(f"vjp: cotangent leaf {i} has shape {ca.shape}, but the output "
                                f"has shape {a.shape}")
            cts.append(_zero_if_float0(_as_dtype(c, a), a))
        in_cts = lin.transpose(cts)
        res = [_on_device(instantiate(c) if type(c) is Zero else _as_dtype(c, tangent_aval(a)))
               for c, a in zip(in_cts, in_avals)]
        return tree_util.tree_unflatten(p_tree, res)

    primal_out = tree_util.tree_unflatten(out_tree, primal_outs)
    del parent
    if has_aux:
        return primal_out, f_vjp, lin.primal_only(flat_fun.aux)
    return primal_out, f_vjp


def _on_device(x):
    """Host values (a cotangent passed straight through) become device arrays when running
    eagerly, so users always get ``funcgrad.Array`` results (float0 stays on the host)."""
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype != dtypes.float0 and \
            interpreters.current() is interpreters.root():
        from funcgrad.lowering.array import device_put
        return device_put(x)
    return x


def _as_dtype(x, aval):
    """Cast a (co)tangent to the dtype of ``aval`` when it differs (a weakly typed scalar...)."""
    if type(x) is Zero or aval.dtype == dtypes.float0:
        return x
    xa = aval_of(x)
    if xa.dtype != aval.dtype:
        from funcgrad.lax.elementwise import convert_element_type
        return convert_element_type(x, aval.dtype)
    if not isinstance(x, (Tracer, interpreters.Value)):
        from funcgrad.lax.elementwise import convert_element_type
        return convert_element_type(np.asarray(x, aval.dtype), aval.dtype)
    return x


def _argnums_tuple(fname, argnums, nargs):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    for n in nums:
        if not isinstance(n, int) or not -nargs <= n < nargs:
            raise TypeError(f"{fname}: argnums {argnums} out of range for a function called "
                            f"with {nargs} positional arguments")
    return single, tuple(n % nargs for n in nums)


def _arg_name(fun, i):
    import inspect
    try:
        params = list(inspect.signature(fun).parameters)
        if i < len(params):
            return f" ('{params[i]}')"
    except (TypeError, ValueError):
        pass
    return ""


def _check_inputs(fname, fun, args, nums, holomorphic, allow_int):
    for i in nums:
        for leaf in tree_util.tree_leaves(args[i]):
            _check_leaf(fname, leaf, "differentiated arguments")
            dt = aval_of(leaf).dtype
            if holomorphic:
                if not dtypes.is_complex(dt):
                    raise TypeError(f"{fname}(..., holomorphic=True) requires complex inputs, "
                                    f"but argument {i}{_arg_name(fun, i)} has dtype {dt.name}")
            elif dtypes.is_complex(dt):
                raise TypeError(f"{fname} requires real-valued inputs, but argument "
                                f"{i}{_arg_name(fun, i)} is complex ({dt.name}); use "
                                f"holomorphic=True for holomorphic functions")
            elif not dtypes.is_inexact(dt) and not allow_int:
                raise TypeError(f"{fname} requires real- or complex-valued inputs (a float "
                                f"dtype), but argument {i}{_arg_name(fun, i)} has dtype "
                                f"{dt.name}; convert it with .astype(float) or pass "
                                f"allow_int=True to get a float0 zero gradient")


def _partial_args(fun, args, kwargs, nums):
    def f_partial(*dyn):
        full = list(args)
        for n, d in zip(nums, dyn):
            full[n] = d
        return fun(*full, **kwargs)
    f_partial.__name__ = getattr(fun, "__name__", "fun")
    return f_partial


def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """A function returning ``(fun(*args), gradient)`` of a scalar-valued ``fun``.

    ``argnums`` (int or tuple) picks the differentiated positional arguments (pytrees);
    ``has_aux``: ``fun`` returns ``(value, aux)`` and the result is ``((value, aux), grad)``;
    ``holomorphic``: complex inputs and output, returns ``f'(z)``.

    Example:
        >>> funcgrad.value_and_grad(lambda x: jnp.sum(x ** 2))(jnp.ones(3))
        (Array(3., dtype=float32), Array([2., 2., 2.], dtype=float32))
    """
    fname = f"grad({getattr(fun, '__name__', 'fun')})"

    @functools.wraps(fun)
    def value_and_grad_fun(*args, **kwargs):
        single, nums = _argnums_tuple(fname, argnums, len(args))
        _check_inputs(fname, fun, args, nums, holomorphic, allow_int)
        f_partial = _partial_args(fun, args, kwargs, nums)
        res = vjp(f_partial, *[args[n] for n in nums], has_aux=has_aux)
        out, f_vjp = res[0], res[1]
        out_leaves = tree_util.tree_leaves(out)
        if len(out_leaves) != 1 or not hasattr(out_leaves[0], "shape") and not isinstance(
                out_leaves[0], (int, float, complex)):
            raise TypeError(f"{fname}: the function must return a scalar, got "
                            f"{type(out).__name__}")
        oa = aval_of(out_leaves[0])
        if oa.shape != ():
            raise TypeError(f"{fname}: the function must return a scalar (shape ()), got an "
                            f"array of shape {oa.shape}; use vjp or jacrev for non-scalar "
                            f"outputs")
        if holomorphic:
            if not dtypes.is_complex(oa.dtype):
                raise TypeError(f"{fname}(..., holomorphic=True): the output must be complex, "
                                f"got {oa.dtype.name}")
        elif not dtypes.is_float(oa.dtype):
            raise TypeError(f"{fname}: the output must be a real float scalar, got "
                            f"{oa.str_short()}" + ("; use holomorphic=True for complex "
                                                   "outputs" if dtypes.is_complex(oa.dtype)
                                                   else ""))
        one = np.ones((), oa.dtype)
        g = f_vjp(tree_util.tree_unflatten(tree_util.tree_structure(out), [one]))
        g = g[0] if single else tuple(g)
        if has_aux:
            return (out, res[2]), g
        return out, g

    return value_and_grad_fun


def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The gradient of a scalar-valued ``fun`` with respect to argument(s) ``argnums``.

    Example:
        >>> funcgrad.grad(jnp.sin)(0.5)            # cos(0.5)
        >>> funcgrad.grad(lambda p: jnp.sum(p["w"] ** 2))({"w": jnp.ones(2)})
    """
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int)

    @functools.wraps(fun)
    def grad_fun(*args, **kwargs):
        if has_aux:
            (_, aux), g = vg(*args, **kwargs)
            return g, aux
        return vg(*args, **kwargs)[1]

    return grad_fun


# --- Jacobians ---------------------------------------------------------------------------------
def _basis(avals, dtype_of):
    """One-hot basis vectors of all leaves together: for leaf i an array of shape
    (N, *avals[i].shape) where N is the total size; row k is 1 at flat position k."""
    sizes = [a.size for a in avals]
    total = sum(sizes)
    eye = np.eye(total)
    out, offset = [], 0
    for a, n in zip(avals, sizes):
        out.append(eye[:, offset:offset + n].reshape((total,) + a.shape).astype(dtype_of(a)))
        offset += n
    return out, sizes


def _split_rows(x, sizes, leaf_avals, lead_shape, rows_first):
    """Split the stacked axis (axis 0, length sum(sizes)) of ``x`` (shape (N, *lead_shape)) by
    leaf: for each leaf an array of shape lead_shape + leaf.shape."""
    from funcgrad import numpy as jnp
    res, offset = [], 0
    nlead = len(lead_shape)
    for n, a in zip(sizes, leaf_avals):
        part = x[offset:offset + n]                      # (n, *lead)
        part = jnp.moveaxis(part, 0, -1) if nlead else part
        res.append(jnp.reshape(part, tuple(lead_shape) + a.shape))
        offset += n
    return res


def _map_basis(linear_map, src_avals, dst_avals):
    """Apply ``linear_map`` (leaves of ``src_avals`` -> leaves of ``dst_avals``, Zero-aware) to
    every one-hot basis vector of the inexact source leaves at once (vmapped).

    Returns (source leaves used, destination leaves produced, basis size per source leaf,
    one (N, *dst.shape) array per destination leaf).
    """
    from funcgrad import numpy as jnp
    from funcgrad.transforms.batching import vmap
    src = [i for i, a in enumerate(src_avals) if dtypes.is_inexact(a.dtype)]
    dst = [j for j, a in enumerate(dst_avals) if dtypes.is_inexact(a.dtype)]
    if not src or not dst:
        return src, dst, [], []
    basis, sizes = _basis([src_avals[i] for i in src], lambda a: a.dtype)

    def apply(*vectors):
        full = [Zero(tangent_aval(a)) for a in src_avals]
        for i, v in zip(src, vectors):
            full[i] = v
        res = linear_map(full)
        return [instantiate(res[j]) if type(res[j]) is not Zero
                else jnp.zeros(dst_avals[j].shape, dst_avals[j].dtype) for j in dst]
    return src, dst, sizes, vmap(apply)(*basis)


def _jac_fun(fname, fun, argnums, has_aux, holomorphic, allow_int, forward):
    @functools.wraps(fun)
    def jac_fun(*args, **kwargs):
        from funcgrad import numpy as jnp
        single, nums = _argnums_tuple(fname, argnums, len(args))
        _check_inputs(fname, fun, args, nums, holomorphic, allow_int)
        f_partial = _partial_args(fun, args, kwargs, nums)
        in_leaves, in_tree = tree_util.tree_flatten(tuple(args[n] for n in nums))
        flat_fun = _FlatFun(fname, f_partial, in_tree, has_aux)

        outs, lin = linearize_flat(flat_fun, in_leaves, fname)
        out_tree = flat_fun.out_tree
        in_avals = [aval_of(x) for x in in_leaves]
        out_avals = [aval_of(o) for o in outs]
        blocks = [[None] * len(in_avals) for _ in out_avals]   # [out j][in i]

        def zeros_block(oa, ia):
            dt = oa.dtype if dtypes.is_inexact(oa.dtype) else dtypes.float0
            if forward and dtypes.is_inexact(oa.dtype):
                dt = oa.dtype
            elif not forward:
                dt = ia.dtype if dtypes.is_inexact(ia.dtype) else dtypes.float0
            return np.zeros(oa.shape + ia.shape, dt)

        if forward:
            diff, wanted, sizes, cols = _map_basis(lin.jvp, in_avals, out_avals)
            for j, c in zip(wanted, cols):
                # c: (N, *out.shape) -> per input leaf out.shape + in.shape
                parts = _split_rows(c, sizes, [in_avals[i] for i in diff],
                                    out_avals[j].shape, True)
                for i, part in zip(diff, parts):
                    blocks[j][i] = part
        else:
            diff, wanted, sizes, rows = _map_basis(lin.transpose, out_avals, in_avals)
            for i, r in zip(wanted, rows):
                # r: (N, *in.shape): rows of out leaf j are its flat positions
                offset = 0
                for j, n in zip(diff, sizes):
                    part = r[offset:offset + n]
                    blocks[j][i] = jnp.reshape(part, out_avals[j].shape + in_avals[i].shape)
                    offset += n
        for j, oa in enumerate(out_avals):
            for i, ia in enumerate(in_avals):
                if blocks[j][i] is None:
                    blocks[j][i] = zeros_block(oa, ia)
        jac = [tree_util.tree_unflatten(in_tree, blocks[j]) for j in range(len(out_avals))]
        jac = [j[0] if single else j for j in jac]
        res = tree_util.tree_unflatten(out_tree, jac)
        if has_aux:
            return res, lin.primal_only(flat_fun.aux)
        return res

    return jac_fun


def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian of ``fun`` by forward mode: the linearized function pushes all basis
    vectors at once (vmapped).

    The result has, for each output leaf, ``out.shape + in.shape`` per input leaf (nested as the
    output and input pytrees; a tuple over ``argnums`` when it is a tuple).

    Example:
        >>> funcgrad.jacfwd(lambda x: jnp.sin(x) * 2)(jnp.ones(3)).shape
        (3, 3)
    """
    return _jac_fun(f"jacfwd({getattr(fun, '__name__', 'fun')})", fun, argnums, has_aux,
                    holomorphic, False, True)


def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian of ``fun`` by reverse mode: the transposed linear function pulls all output
    basis vectors back at once (vmapped).

    Example:
        >>> funcgrad.jacrev(lambda x: jnp.sin(x) * 2)(jnp.ones(3)).shape
        (3, 3)
    """
    return _jac_fun(f"jacrev({getattr(fun, '__name__', 'fun')})", fun, argnums, has_aux,
                    holomorphic, allow_int, False)


def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Hessian of a scalar ``fun``: ``jacfwd(jacrev(fun))``.

    Example:
        >>> funcgrad.hessian(lambda x: jnp.sum(x ** 3))(jnp.ones(2))    # diag(6, 6)
    """
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)


# --- Jaxpr-level helpers for higher-order primitives (jit, remat, control flow) -----------------
def cast_like(x, aval):
    """A (co)tangent converted to the dtype a staged body expects (weak scalars...)."""
    x = instantiate(x)
    if aval_of(x).dtype != aval.dtype and aval.dtype != dtypes.float0:
        from funcgrad.lax.elementwise import convert_element_type
        x = convert_element_type(x, aval.dtype)
    return x


def transpose_call(jaxpr, cts, args, cache, bind_body):
    """The transpose rule of a call-like primitive carrying ``jaxpr`` (jit, remat).

    Stages the transposed body once per (linear inputs, nonzero cotangents) in ``cache`` (a
    WeakKeyDictionary keyed by the body) and binds it with ``bind_body(operands, body)``;
    returns one cotangent per argument (None for non-linear ones).
    """
    linear = tuple(is_undefined_primal(a) for a in args)
    cts_nz = tuple(type(c) is not Zero for c in cts)
    if not any(cts_nz):
        return [Zero(a.aval) if lin else None for a, lin in zip(args, linear)]
    per_body = cache.get(jaxpr)
    if per_body is None:
        per_body = cache[jaxpr] = {}
    entry = per_body.get((linear, cts_nz))
    if entry is None:
        entry = per_body[(linear, cts_nz)] = consts_as_args(
            transpose_jaxpr(jaxpr, linear, cts_nz))
    body, consts = entry
    operands = list(consts) + [a for a, lin in zip(args, linear) if not lin] + [
        cast_like(c, a) for c, a, nz in zip(cts, jaxpr.out_avals, cts_nz) if nz]
    outs = iter(bind_body(operands, body))
    return [next(outs) if lin else None for lin in linear]


def jvp_jaxpr(closed, in_nz, instantiate_out=False):
    """Stage the JVP of ``closed``: (ClosedJaxpr taking primals + nonzero tangents and returning
    primal outs + nonzero tangent outs, out_nz)."""
    in_avals = closed.in_avals
    out_nz_box = []

    def fun(*args):
        primals = args[:len(in_avals)]
        it = iter(args[len(in_avals):])
        tangents = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(in_avals, in_nz)]
        p_out, t_out = jvp_flat(lambda *xs: closed(*xs), primals, tangents)
        nz = [type(t) is not Zero and dtypes.is_inexact(aval_of(p).dtype)
              for p, t in zip(p_out, t_out)]
        if instantiate_out is True:
            nz = [dtypes.is_inexact(aval_of(p).dtype) for p in p_out]
        out_nz_box.append(nz)
        return list(p_out) + [instantiate(t) for t, n in zip(t_out, nz) if n]

    tangent_avals = [tangent_aval(a) for a, nz in zip(in_avals, in_nz) if nz]
    jaxpr, _ = trace_to_jaxpr(fun, list(in_avals) + tangent_avals, debug_name="jvp")
    return jaxpr, out_nz_box[0]


def transpose_jaxpr(closed, linear, cts_nz):
    """Stage the transpose of ``closed`` w.r.t. the inputs flagged ``linear``: a ClosedJaxpr
    taking (non-linear inputs, nonzero cotangents) and returning the cotangent of every linear
    input (instantiated as zeros when symbolic)."""
    j = closed.jaxpr
    in_avals = closed.in_avals
    nonlin_avals = [a for a, lin in zip(in_avals, linear) if not lin]
    ct_avals = [a for a, nz in zip(closed.out_avals, cts_nz) if nz]

    def fun(*args):
        it = iter(args[:len(nonlin_avals)])
        eargs = [UndefinedPrimal(a) if lin else next(it) for a, lin in zip(in_avals, linear)]
        cit = iter(args[len(nonlin_avals):])
        cts = [next(cit) if nz else Zero(a) for a, nz in zip(closed.out_avals, cts_nz)]
        res = backward_pass(j, closed.consts, eargs, cts)
        return [instantiate(c) for c, lin in zip(res, linear) if lin]

    jaxpr, _ = trace_to_jaxpr(fun, nonlin_avals + ct_avals, debug_name="transpose")
    return jaxpr
