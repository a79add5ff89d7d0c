"""Implicitly differentiated solvers: ``custom_linear_solve`` and ``custom_root``.

Both run a user's solver forward and differentiate through the equation it solves, never through
its iterations:

* ``custom_linear_solve(matvec, b, solve)``: ``x = A^-1 b`` where ``A`` is the linear map
  ``matvec``. Forward mode: ``dx = A^-1 (db - dA x)`` (another solve); reverse mode transposes a
  solve into a solve with ``transpose_solve`` (or ``solve`` itself when ``symmetric``), against
  the transposed ``matvec``. The primitive ``custom_linear_solve`` (``lax.linear_solve_p``)
  carries the three functions as Jaxprs, their closed-over values as operands.
* ``custom_root(f, x0, solve, tangent_solve)``: ``x*`` with ``f(x*) = 0``. By the implicit
  function theorem ``dx* = -(df/dx)^-1 (df/dtheta) dtheta`` for the values ``theta`` that ``f``
  closes over, computed with ``tangent_solve(g, y)`` (solve the linear ``g(x) = y``).
"""
from funcgrad import tree_util
from funcgrad.core import interpreters
from funcgrad.core.ad import jvp_flat, transpose_jaxpr
from funcgrad.core.ad_util import Zero, instantiate, is_undefined_primal
from funcgrad.core.batching import BatchInterpreter, batch_jaxpr
from funcgrad.core.batching_util import bdim_at, not_mapped
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, consts_as_args
from funcgrad.core.primitive import Primitive
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax import elementwise as ew
from funcgrad.lax.decomposed import FunctionParam

__all__ = ["custom_linear_solve", "custom_root", "linear_solve_p"]


# --- tracing user functions on pytrees to Jaxprs with their consts as leading arguments ---------
def _trace(fn, in_tree, in_avals, where):
    """(ClosedJaxpr taking (consts..., leaves...), consts, output treedef)."""
    box = []

    def flat(*leaves):
        out = fn(tree_util.tree_unflatten(in_tree, list(leaves)))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        box.append(out_tree)
        return out_leaves

    closed, _ = trace_to_jaxpr(flat, list(in_avals), debug_name=where)
    jaxpr, consts = consts_as_args(closed)
    return jaxpr, list(consts), box[0]


def _check_like(where, what, tree, avals, want_tree, want_avals):
    got = [(a.shape, a.dtype) for a in avals]
    want = [(a.shape, a.dtype) for a in want_avals]
    if tree != want_tree or got != want:
        raise TypeError(f"{where}: {what} must return the structure, shapes and dtypes of b "
                        f"{want_tree} {want}, got {tree} {got}")


def _flatten_and_trace(where, value, fn, what):
    """The leaves, treedef and (strongly typed) avals of ``value``, and ``fn`` traced at them
    (a map from ``value``'s structure to itself) as (Jaxpr taking consts first, consts)."""
    leaves, tree = tree_util.tree_flatten(value)
    avals = [aval_of(v).update(weak_type=False) for v in leaves]
    leaves = [ew.convert_element_type(v, a.dtype) for v, a in zip(leaves, avals)]
    jaxpr, consts, out_tree = _trace(fn, tree, avals, what)
    _check_like(where, what, out_tree, jaxpr.out_avals, tree, avals)
    return leaves, tree, avals, jaxpr, consts


def _drop_outputs(closed, n):
    """``closed`` returning only its first ``n`` outputs."""
    j = closed.jaxpr
    if len(j.outvars) == n:
        return closed
    return ClosedJaxpr(Jaxpr(j.constvars, j.invars, j.eqns, j.outvars[:n]), closed.consts)


# --- the primitive ----------------------------------------------------------------------------
# operands: matvec consts, solve consts, transpose_solve consts, then the leaves of b.
# ``solve`` may return ``num_aux`` auxiliary outputs after x (their tangents are zero).
linear_solve_p = Primitive("custom_linear_solve", multiple_results=True)


def _split(args, const_counts):
    nm, ns, nt = const_counts
    return (list(args[:nm]), list(args[nm:nm + ns]), list(args[nm + ns:nm + ns + nt]),
            list(args[nm + ns + nt:]))


@linear_solve_p.def_abstract_eval
def _abstract(*avals, matvec, solve, transpose_solve, const_counts, num_aux):
    return list(solve.out_avals)


@linear_solve_p.def_lowering
def _lowering(ctx, *args, matvec, solve, transpose_solve, const_counts, num_aux):
    _, sc, _, b = _split(args, const_counts)
    return list(ctx.lower_jaxpr(solve, [], sc + b))


@linear_solve_p.def_jvp
def _jvp(primals, tangents, matvec, solve, transpose_solve, const_counts, num_aux):
    params = dict(matvec=matvec, solve=solve, transpose_solve=transpose_solve,
                  const_counts=const_counts, num_aux=num_aux)
    outs = linear_solve_p.bind(*primals, **params)
    n_x = len(outs) - num_aux
    x = outs[:n_x]
    mc, sc, tc, _ = _split(primals, const_counts)
    tm, _, _, tb = _split(tangents, const_counts)
    rhs = [None if type(t) is Zero else t for t in tb]
    if any(type(t) is not Zero for t in tm):
        # d(A x) along the change of A's closed-over values, at the solution
        _, dax = jvp_flat(lambda *cs: matvec(*cs, *x), mc, tm)
        rhs = [r if type(d) is Zero else (ew.neg(d) if r is None else ew.sub(r, d))
               for r, d in zip(rhs, dax)]
    zeros_aux = [Zero(aval_of(o).update(weak_type=False)) for o in outs[n_x:]]
    if all(r is None for r in rhs):
        return outs, [Zero(aval_of(o).update(weak_type=False)) for o in x] + zeros_aux
    rhs = [instantiate(Zero(aval_of(o).update(weak_type=False))) if r is None else r
           for r, o in zip(rhs, x)]
    dx = linear_solve_p.bind(*mc, *sc, *tc, *rhs, **params)[:n_x]
    return outs, list(dx) + zeros_aux


@linear_solve_p.def_transpose
def _transpose(cts, *args, matvec, solve, transpose_solve, const_counts, num_aux):
    mc, sc, tc, b = _split(args, const_counts)
    if any(is_undefined_primal(c) for c in mc + sc + tc):
        raise TypeError("lax.custom_linear_solve: the solution is linear in b only; its "
                        "transpose with respect to matvec's or solve's values does not exist")
    if transpose_solve is None:
        raise TypeError("lax.custom_linear_solve: reverse-mode differentiation needs "
                        "transpose_solve= (or symmetric=True when matvec is symmetric)")
    n_x = len(b)
    cts = [instantiate(c) for c in cts[:n_x]]
    nm = len(mc)
    matvec_t = transpose_jaxpr(matvec, [False] * nm + [True] * n_x, [True] * n_x)
    out = linear_solve_p.bind(*mc, *tc, *sc, *cts, matvec=matvec_t, solve=transpose_solve,
                              transpose_solve=_drop_outputs(solve, n_x),
                              const_counts=(nm, len(tc), len(sc)), num_aux=0)
    return [None] * (len(mc) + len(sc) + len(tc)) + list(out)


@linear_solve_p.def_batch
def _batch(args, dims, matvec, solve, transpose_solve, const_counts, num_aux):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not not_mapped)
    mc_d, sc_d, tc_d, b_d = _split(list(dims), const_counts)
    n_b = len(b_d)
    # every x is batched once anything is: b moves to axis 0, consts keep theirs (at 0)
    args = [a if d is not_mapped else bdim_at(a, d, 0) for a, d in zip(args, dims)]
    mc, sc, tc, b = _split(args, const_counts)
    b = [bdim_at(v, d if d is not_mapped else 0, 0, size) for v, d in zip(b, b_d)]
    zero = [None if d is not_mapped else 0 for d in mc_d + sc_d + tc_d]
    zm, zs, zt = _split(zero + [0] * n_b, const_counts)[:3]
    mv, _ = batch_jaxpr(matvec, size, zm + [0] * n_b, 0)
    sv, _ = batch_jaxpr(solve, size, zs + [0] * n_b, 0)
    tv = None if transpose_solve is None else batch_jaxpr(transpose_solve, size,
                                                          zt + [0] * n_b, 0)[0]
    out = linear_solve_p.bind(*mc, *sc, *tc, *b, matvec=mv, solve=sv, transpose_solve=tv,
                              const_counts=const_counts, num_aux=num_aux)
    return list(out), [0] * len(out)


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False, has_aux=False):
    """``x = solve(matvec, b)`` for the linear map ``matvec``, differentiated implicitly.

    ``solve(matvec, b)`` may be any solver (iterative, with loops); derivatives never go
    through it: the tangent of ``x`` is another solve, and reverse mode solves with
    ``transpose_solve(vecmat, b)`` (``solve`` itself when ``symmetric=True``). ``b`` and ``x``
    are pytrees of one structure; with ``has_aux``, ``solve`` returns ``(x, aux)`` and so does
    this function.

    Example:
        >>> A = jnp.array([[4.0, 1.0], [1.0, 3.0]])
        >>> def solve_ls(b, A):
        ...     return lax.custom_linear_solve(lambda v: A @ v, b,
        ...                                    lambda mv, r: jnp.linalg.solve(A, r),
        ...                                    symmetric=True)
        >>> solve_ls(jnp.array([1.0, 2.0]), A)
        Array([0.09090909, 0.6363636 ], dtype=float32)
        >>> funcgrad.grad(lambda b: solve_ls(b, A).sum())(jnp.array([1.0, 2.0]))
        Array([0.18181819, 0.27272728], dtype=float32)
    """
    where = "lax.custom_linear_solve"
    b_leaves, b_tree, b_avals, mv, mc = _flatten_and_trace(where, b, matvec, "matvec")

    def run_solve(fn, mat, has):
        def call(rhs):
            out = fn(mat, rhs)
            return out if has else (out, None)
        return _trace(call, b_tree, b_avals, "solve")

    s_jaxpr, sc, s_tree = run_solve(solve, matvec, has_aux)
    x_tree, aux_tree = _pair_trees(where, s_tree)
    n_x = len(b_avals)
    _check_like(where, "solve", x_tree, s_jaxpr.out_avals[:n_x], b_tree, b_avals)
    num_aux = len(s_jaxpr.out_avals) - n_x
    if symmetric:
        t_jaxpr, tc = _drop_outputs(s_jaxpr, n_x), sc
    elif transpose_solve is not None:
        def vecmat(v):
            return _transpose_apply(matvec, b_tree, b_avals, v)
        t_jaxpr, tc, t_tree = run_solve(transpose_solve, vecmat, False)
        tx_tree, _ = _pair_trees(where, t_tree)
        _check_like(where, "transpose_solve", tx_tree, t_jaxpr.out_avals[:n_x], b_tree, b_avals)
        t_jaxpr = _drop_outputs(t_jaxpr, n_x)
    else:
        t_jaxpr, tc = None, []
    outs = linear_solve_p.bind(*mc, *sc, *tc, *b_leaves, matvec=mv, solve=s_jaxpr,
                               transpose_solve=t_jaxpr, const_counts=(len(mc), len(sc), len(tc)),
                               num_aux=num_aux)
    x = tree_util.tree_unflatten(b_tree, list(outs[:n_x]))
    if has_aux:
        return x, tree_util.tree_unflatten(aux_tree, list(outs[n_x:]))
    return x


def _pair_trees(where, tree):
    """The treedefs of x and aux in the ``(x, aux)`` pair a traced solve returned."""
    pair = tree_util.tree_unflatten(tree, list(range(tree.num_leaves)))
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise TypeError(f"{where}: with has_aux=True, solve must return a pair (x, aux)")
    return tree_util.tree_structure(pair[0]), tree_util.tree_structure(pair[1])


def _transpose_apply(matvec, b_tree, b_avals, v):
    """``A^T v`` for the linear ``matvec``, by transposing its Jaxpr."""
    mv, mc, _ = _trace(matvec, b_tree, b_avals, "matvec")
    n = len(b_avals)
    mt = transpose_jaxpr(mv, [False] * len(mc) + [True] * n, [True] * n)
    return tree_util.tree_unflatten(b_tree, list(mt(*mc, *tree_util.tree_leaves(v))))


# --- custom_root ------------------------------------------------------------------------------
custom_root_p = Primitive("custom_root", multiple_results=True)


@custom_root_p.def_abstract_eval
def _root_abstract(*avals, f, solve, tangent_solve, const_counts, num_aux, x_tree):
    return list(solve.out_avals)


@custom_root_p.def_lowering
def _root_lowering(ctx, *args, f, solve, tangent_solve, const_counts, num_aux, x_tree):
    nf, _ = const_counts
    return list(ctx.lower_jaxpr(solve, [], list(args[nf:])))


@custom_root_p.def_jvp
def _root_jvp(primals, tangents, f, solve, tangent_solve, const_counts, num_aux, x_tree):
    params = dict(f=f, solve=solve, tangent_solve=tangent_solve, const_counts=const_counts,
                  num_aux=num_aux, x_tree=x_tree)
    outs = custom_root_p.bind(*primals, **params)
    nf, _ = const_counts
    n_x = len(outs) - num_aux
    x = list(outs[:n_x])
    fc, tfc = list(primals[:nf]), list(tangents[:nf])
    zeros = [Zero(aval_of(o).update(weak_type=False)) for o in outs]
    if all(type(t) is Zero for t in tfc):
        return outs, zeros
    # df/dtheta . dtheta at the root, then solve (df/dx) dx = -that
    _, dfc = jvp_flat(lambda *cs: f(*cs, *x), fc, tfc)
    rhs = [instantiate(d) for d in dfc]

    def f_lin(v):
        _, t = jvp_flat(lambda *xs: f(*fc, *xs), x, tree_util.tree_leaves(v))
        return tree_util.tree_unflatten(x_tree, [instantiate(u) for u in t])

    dx = tangent_solve.fn(f_lin, tree_util.tree_unflatten(x_tree, rhs))
    dx = [ew.neg(v) for v in tree_util.tree_leaves(dx)]
    return outs, dx + zeros[n_x:]


@custom_root_p.def_batch
def _root_batch(args, dims, f, solve, tangent_solve, const_counts, num_aux, x_tree):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not not_mapped)
    nf, _ = const_counts
    args = [bdim_at(a, d, 0) if d is not not_mapped else a for a, d in zip(args, dims)]
    cdims = [None if d is not_mapped else 0 for d in dims]
    n_x = len(solve.out_avals) - num_aux
    guess = [bdim_at(a, d, 0, size) for a, d in zip(args[nf:][-n_x:], cdims[nf:][-n_x:])]
    args = list(args[:len(args) - n_x]) + guess
    cdims = cdims[:len(cdims) - n_x] + [0] * n_x
    fv, _ = batch_jaxpr(f, size, cdims[:nf] + [0] * n_x, 0)
    sv, _ = batch_jaxpr(solve, size, cdims[nf:], 0)
    vts = FunctionParam(_vmapped_tangent_solve(tangent_solve.fn, size))
    out = custom_root_p.bind(*args, f=fv, solve=sv, tangent_solve=vts, const_counts=const_counts,
                             num_aux=num_aux, x_tree=x_tree)
    return list(out), [0] * len(out)


def _vmapped_tangent_solve(tangent_solve, size):
    """``tangent_solve`` for a batch of independent problems (batch axis 0 of every leaf): it
    runs on one problem's view under a batching interpreter, and the batched map ``g`` is applied
    to whole batches underneath it (it is block-diagonal across the batch)."""
    def run(g, y):
        interp = BatchInterpreter(interpreters.current(), size, None, "tangent_solve")

        def g_one(v):
            leaves, tree = tree_util.tree_flatten(v)
            whole = [bdim_at(*interp.unwrap(u), 0, size) for u in leaves]
            with interpreters.using(interp.parent):
                out = g(tree_util.tree_unflatten(tree, whole))
            return tree_util.tree_map(lambda u: interp.wrap(u, 0), out)

        y_one = tree_util.tree_map(lambda u: interp.wrap(u, 0), y)
        with interpreters.using(interp):
            x_one = tangent_solve(g_one, y_one)
        return tree_util.tree_map(lambda u: bdim_at(*interp.unwrap(u), 0, size), x_one)
    return run


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """A root ``x*`` of ``f`` found by ``solve(f, initial_guess)``, differentiated implicitly
    with respect to the values ``f`` closes over (never through the solver's iterations).

    ``tangent_solve(g, y)`` solves the linear ``g(x) = y`` (``g`` is ``f``'s derivative at the
    root), e.g. ``lambda g, y: y / g(1.0)`` for a scalar. With ``has_aux``, ``solve`` returns
    ``(x, aux)`` and so does this function.

    Example:
        >>> def newton(f, x):
        ...     for _ in range(20):
        ...         x = x - f(x) / funcgrad.grad(f)(x)
        ...     return x
        >>> def sqrt(a):
        ...     return lax.custom_root(lambda x: x * x - a, 1.0, newton,
        ...                            lambda g, y: y / g(1.0))
        >>> sqrt(2.0), funcgrad.grad(sqrt)(2.0)     # d sqrt(a)/da = 1 / (2 sqrt(a))
        (Array(1.4142135, dtype=float32), Array(0.35355338, dtype=float32, weak_type=True))
    """
    where = "lax.custom_root"
    g_leaves, g_tree, g_avals, fj, fc = _flatten_and_trace(where, initial_guess, f, "f")

    def call(x0):
        out = solve(f, x0)
        return out if has_aux else (out, None)
    sj, sc, s_tree = _trace(call, g_tree, g_avals, "solve")
    x_tree, aux_tree = _pair_trees(where, s_tree)
    n_x = len(g_avals)
    _check_like(where, "solve", x_tree, sj.out_avals[:n_x], g_tree, g_avals)
    outs = custom_root_p.bind(*fc, *sc, *g_leaves, f=fj, solve=sj, tangent_solve=FunctionParam(
        tangent_solve), const_counts=(len(fc), len(sc)), num_aux=len(sj.out_avals) - n_x,
        x_tree=g_tree)
    x = tree_util.tree_unflatten(g_tree, list(outs[:n_x]))
    if has_aux:
        return x, tree_util.tree_unflatten(aux_tree, list(outs[n_x:]))
    return x
