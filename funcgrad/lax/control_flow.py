"""Structured control flow: ``cond``/``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``.

Each is a higher-order primitive whose params carry the traced bodies as ClosedJaxprs with no
consts: values the bodies close over travel as ordinary operands (``consts_as_args``), so an
enclosing transformation sees them like any other input.

| primitive | operands | params |
| --- | --- | --- |
| ``cond`` | index, *ops | ``branches``: one jaxpr per branch, each taking ops |
| ``while`` | *cond_consts, *body_consts, *carry | ``cond_jaxpr``, ``body_jaxpr``, ``cond_nconsts``, ``body_nconsts`` |
| ``scan`` | *consts, *carry, *xs | ``jaxpr`` (consts, carry, x -> carry, y), ``num_consts``, ``num_carry``, ``length``, ``reverse``, ``unroll`` |

``cond`` lowers to ``stablehlo.case``, ``while`` to ``stablehlo.while`` and ``scan`` to a
``while`` whose body slices ``xs`` and writes ``ys`` at the loop counter. The eager interpreter
compiles each application as one executable; traced bodies are interned by structure so that
re-running eager control flow with a fresh lambda reuses the compiled executable.
"""
import builtins

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad import tree_util
from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.interpreters import Tracer
from funcgrad.core.jaxpr import ClosedJaxpr, Jaxpr, Var, consts_as_args, pretty_print
from funcgrad.core.primitive import Primitive
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo


# --- tracing helpers ---------------------------------------------------------------------------
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
    from funcgrad.lax.elementwise import convert_element_type
    if isinstance(x, (bool, int, float, complex)) or (isinstance(x, (np.ndarray, np.generic))):
        return np.asarray(x, aval.dtype)
    if aval.weak_type:
        return convert_element_type(x, aval.dtype, weak_type=False)
    return x


def _pad_invars(jaxpr, n_before, n_after_consts, other_avals_before, other_avals_after):
    """``jaxpr`` (taking (consts, args)) with unused invars added around its consts."""
    j = jaxpr.jaxpr
    n_own = len(j.invars) - n_after_consts
    before = [Var(a) for a in other_avals_before]
    after = [Var(a) for a in other_avals_after]
    invars = before + j.invars[:n_own] + after + j.invars[n_own:]
    return ClosedJaxpr(Jaxpr([], invars, j.eqns, j.outvars), [])


# --- cond ----------------------------------------------------------------------------------------
cond_p = Primitive("cond", multiple_results=True)


@cond_p.def_abstract_eval
def _cond_abstract(index, *ops, branches):
    if index.shape != () or index.dtype != np.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got "
                        f"{index.str_short()}")
    for i, br in enumerate(branches):
        if not _same_types(br.in_avals, list(ops)):
            raise TypeError(f"cond: branch {i} takes {_types_str(br.in_avals)} but the operands "
                            f"are {_types_str(ops)}")
    outs = branches[0].out_avals
    weak = [all(br.out_avals[k].weak_type for br in branches) for k in range(len(outs))]
    return [a.update(weak_type=w) for a, w in zip(outs, weak)]


def _cond_lowering(ctx, index, *ops, branches):
    out_types = [_hlo.ir_type(a) for a in ctx.avals_out]
    if len(branches) == 1:
        return ctx.lower_jaxpr(branches[0], [], ops)
    case = stablehlo.CaseOp(out_types, index, len(branches))
    for i, br in enumerate(branches):
        block = case.regions[i].blocks.append()
        with ir.InsertionPoint(block):
            stablehlo.return_(list(ctx.lower_jaxpr(br, [], ops)))
    return list(case.results)


cond_p.def_lowering(_cond_lowering)


def _branch_error(name, i, tree_i, avals_i, tree_0, avals_0):
    return TypeError(
        f"{name}: branch {i} returns {tree_i} with types {_types_str(avals_i)} but branch 0 "
        f"returns {tree_0} with types {_types_str(avals_0)}; every branch must return the same "
        f"structure with the same shapes and dtypes")


def _bind_cond(name, index, branches, operands):
    leaves, in_tree = tree_util.tree_flatten(tuple(operands))
    in_avals = _abstractify(leaves)
    traced = []
    for i, fn in enumerate(branches):
        jaxpr, consts, out_tree = _trace(lambda *ops, fn=fn: fn(*ops), in_tree, in_avals,
                                         f"{name} branch {i}")
        traced.append((jaxpr, consts, out_tree))
    tree0, avals0 = traced[0][2], traced[0][0].out_avals
    for i, (jaxpr, _, tree) in enumerate(traced[1:], 1):
        if tree != tree0 or not _same_types(jaxpr.out_avals, avals0):
            raise _branch_error(name, i, tree, jaxpr.out_avals, tree0, avals0)
    # Every branch takes (all branches' consts..., operands...).
    const_avals = [[aval_of(c) for c in consts] for _, consts, _ in traced]
    jaxprs = []
    for i, (jaxpr, consts, _) in enumerate(traced):
        before = [a for avs in const_avals[:i] for a in avs]
        after = [a for avs in const_avals[i + 1:] for a in avs]
        padded = _pad_invars(jaxpr, len(before), len(leaves), before, after)
        jaxprs.append(_intern(padded))
    all_consts = [c for _, consts, _ in traced for c in consts]
    outs = cond_p.bind(index, *all_consts, *leaves, branches=tuple(jaxprs))
    return tree_util.tree_unflatten(tree0, outs)


def _scalar_index(name, x, n):
    """``x`` as an int32 scalar clamped to [0, n-1] (bool: False -> 0, True -> 1)."""
    from funcgrad.lax import elementwise as ew
    aval = aval_of(x)
    if aval.shape != ():
        raise TypeError(f"{name}: the predicate/index must be a scalar, got {aval.str_short()}")
    if not (aval.dtype == dtypes.bool_ or dtypes.is_integer(aval.dtype)):
        raise TypeError(f"{name}: the predicate/index must be a bool or integer scalar, got "
                        f"{aval.str_short()}")
    if not isinstance(x, Tracer) and not hasattr(x, "_buf"):
        return np.int32(builtins.min(builtins.max(int(x), 0), n - 1))
    x = ew.convert_element_type(x, np.int32)
    if n == 2 and aval.dtype == dtypes.bool_:
        return x
    return ew.clamp(np.int32(0), x, np.int32(n - 1))


def cond(pred, true_fun, false_fun, *operands):
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)``, staged as one op.

    Both branches are traced; they must return the same pytree of shapes and dtypes.

    Example:
        >>> lax.cond(x > 0, lambda v: v * 2.0, lambda v: -v, x)
    """
    if not callable(true_fun) or not callable(false_fun):
        raise TypeError("cond: true_fun and false_fun must be callable (signature "
                        "cond(pred, true_fun, false_fun, *operands))")
    aval = aval_of(pred)
    if aval.shape != ():
        raise TypeError(f"cond: pred must be a scalar, got {aval.str_short()}; use "
                        f"funcgrad.numpy.where for elementwise selection")
    if aval.dtype != dtypes.bool_:
        from funcgrad.lax import elementwise as ew
        if isinstance(pred, Tracer) or hasattr(pred, "_buf"):
            pred = ew.ne(pred, np.zeros((), aval.dtype))
        else:
            pred = bool(pred)
    index = _scalar_index("cond", pred, 2)
    return _bind_cond("cond", index, (false_fun, true_fun), operands)


def switch(index, branches, *operands):
    """``branches[index](*operands)`` with ``index`` clamped to ``[0, len(branches) - 1]``.

    Example:
        >>> lax.switch(i, [lambda v: v, lambda v: v * 2.0, jnp.sin], x)
    """
    branches = list(branches)
    if not branches or not all(callable(b) for b in branches):
        raise TypeError("switch: branches must be a non-empty sequence of callables")
    idx = _scalar_index("switch", index, len(branches))
    return _bind_cond("switch", idx, branches, operands)


# --- while -------------------------------------------------------------------------------------
while_p = Primitive("while", multiple_results=True)


@while_p.def_abstract_eval
def _while_abstract(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    carry = args[cond_nconsts + body_nconsts:]
    return [_strong(a) for a in carry]


def _while_lowering(ctx, *args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    types = [_hlo.ir_type(a) for a in ctx.avals_in]
    op = stablehlo.WhileOp(types, list(args))
    nc = cond_nconsts + body_nconsts
    cond_block = op.cond.blocks.append(*types)
    with ir.InsertionPoint(cond_block):
        a = list(cond_block.arguments)
        pred, = ctx.lower_jaxpr(cond_jaxpr, [], a[:cond_nconsts] + a[nc:])
        stablehlo.return_([pred])
    body_block = op.body.blocks.append(*types)
    with ir.InsertionPoint(body_block):
        a = list(body_block.arguments)
        new = ctx.lower_jaxpr(body_jaxpr, [], a[cond_nconsts:nc] + a[nc:])
        stablehlo.return_(a[:nc] + list(new))
    return list(op.results)[nc:]


while_p.def_lowering(_while_lowering)


def _carry_avals(leaves):
    return [_strong(a) for a in _abstractify(leaves)]


def _check_carry(name, what, in_tree, in_avals, out_tree, out_avals):
    if in_tree != out_tree or not _same_types(in_avals, out_avals):
        raise TypeError(f"{name}: {what} must have the same structure and types as the initial "
                        f"carry: the carry is {in_tree} with types {_types_str(in_avals)} but "
                        f"{what} is {out_tree} with types {_types_str(out_avals)}")


def while_loop(cond_fun, body_fun, init_val):
    """Repeat ``val = body_fun(val)`` while ``cond_fun(val)``; returns the final ``val``.

    ``val`` is any pytree; ``body_fun`` must keep its structure, shapes and dtypes. Forward-mode
    differentiable (jvp) and batchable; use ``fori_loop`` with static bounds or ``scan`` for
    reverse mode.

    Example:
        >>> lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2.0), (0, 1.0))
    """
    leaves, tree = tree_util.tree_flatten(init_val)
    avals = _carry_avals(leaves)
    leaves = [_to_strong(x, a) for x, a in zip(leaves, _abstractify(leaves))]
    wrapped = tree_util.tree_structure((tree_util.tree_unflatten(tree, leaves),))
    cond_jaxpr, cond_consts, cond_tree = _trace(cond_fun, wrapped, avals, "while_loop cond_fun")
    outs = cond_jaxpr.out_avals
    if len(outs) != 1 or outs[0].shape != () or outs[0].dtype != dtypes.bool_:
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got "
                        f"{cond_tree} with types {_types_str(outs)}")
    body_jaxpr, body_consts, body_tree = _trace(body_fun, wrapped, avals, "while_loop body_fun")
    _check_carry("while_loop", "body_fun's output", tree, avals, body_tree,
                 body_jaxpr.out_avals)
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond_jaxpr=_intern(cond_jaxpr),
                        body_jaxpr=_intern(body_jaxpr), cond_nconsts=len(cond_consts),
                        body_nconsts=len(body_consts))
    return tree_util.tree_unflatten(tree, outs)


# --- scan ----------------------------------------------------------------------------------------
scan_p = Primitive("scan", multiple_results=True)


@scan_p.def_abstract_eval
def _scan_abstract(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    carry = args[num_consts:num_consts + num_carry]
    xs = args[num_consts + num_carry:]
    for x in xs:
        if not x.shape or x.shape[0] != length:
            raise TypeError(f"scan: every xs leaf needs leading dimension {length}, got "
                            f"{x.str_short()}")
    ys = jaxpr.out_avals[num_carry:]
    return [_strong(a) for a in carry] + [ShapedArray((length,) + y.shape, y.dtype)
                                          for y in ys]


def _pretranspose_invariant_dot_operands(j, num_consts, consts):
    """Rewrite a loop body so that matrix products read loop constants in natural layout,
    transposed once before the loop: a ``transpose`` of a constant moves out of the body, and a
    product contracting a 2-d constant on its last axis (``x @ w.T`` as the autodiff transpose
    writes it) reads a transposed copy. XLA:CPU's in-loop product is faster on natural-layout
    operands, and it cannot fold a transpose made outside the loop back into the product.
    Returns (body, consts) with the new constants appended."""
    from funcgrad.core.jaxpr import Eqn
    from funcgrad.lax.shapes import transpose
    index = {v: i for i, v in enumerate(j.invars[:num_consts])}
    hoisted = []                  # (new body invar, const position, permutation)
    by_const = {}
    eqns = []
    for eqn in j.eqns:
        if eqn.prim.name == "transpose" and type(eqn.invars[0]) is Var \
                and eqn.invars[0] in index:
            hoisted.append((eqn.outvars[0], index[eqn.invars[0]], eqn.params["permutation"]))
            continue
        if eqn.prim.name == "dot_general":
            (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
            rhs = eqn.invars[1]
            if type(rhs) is Var and rhs in index and not lb and len(rhs.aval.shape) == 2 \
                    and tuple(rc) == (1,):
                if rhs not in by_const:
                    by_const[rhs] = Var(ShapedArray(rhs.aval.shape[::-1], rhs.aval.dtype))
                    hoisted.append((by_const[rhs], index[rhs], (1, 0)))
                params = dict(eqn.params, dimension_numbers=((tuple(lc), (0,)), ((), ())))
                eqn = Eqn(eqn.prim, [eqn.invars[0], by_const[rhs]], params, eqn.outvars)
        eqns.append(eqn)
    if not hoisted:
        return j, consts
    body = Jaxpr(j.constvars, j.invars[:num_consts] + [v for v, _, _ in hoisted]
                 + j.invars[num_consts:], eqns, j.outvars)
    return body, consts + [transpose(consts[i], tuple(perm)) for _, i, perm in hoisted]


def _reuse_xs_buffers(body, num_consts, num_carry, xs, length):
    """{ys index: xs index} pairing a per-step output y with an xs input x of the same stacked
    shape and dtype (each input at most once) when everything the body computes from x[t]
    goes into y[t], or reads x[t] only through y[t]. Step t then reads x[t] before it writes
    y[t] into the same buffer, and XLA sees that order from the data flow alone (whichever
    fusions it copies the read into), so the write is in place: no zero-filled buffer for the
    output and no copy per step. (Any pairing would be correct, as XLA copies a buffer whose
    reads it cannot order before the write; this rule picks the pairings where it need not.)"""
    producer = {v: e for e in body.eqns for v in e.outvars}
    readers = {}
    for e in body.eqns:
        for a in e.invars:
            if type(a) is Var:
                readers.setdefault(a, []).append(e)

    def walk(v, upstream):
        """{id: eqn} of the equations v is computed from (upstream) or that use it."""
        seen, stack = {}, [v]
        while stack:
            u = stack.pop()
            nxt = ([producer[u]] if u in producer else []) if upstream else readers.get(u, [])
            for e in nxt:
                if id(e) not in seen:
                    seen[id(e)] = e
                    stack.extend(a for a in (e.invars if upstream else e.outvars)
                                 if type(a) is Var)
        return seen

    outs = {v for v in body.outvars if type(v) is Var}
    x_vars = body.invars[num_consts + num_carry:]
    from_xs = {}                  # x var -> (equations computed from it, values they make)
    pairs, used = {}, set()
    for j, y in enumerate(body.outvars[num_carry:]):
        if type(y) is not Var or y not in producer:
            continue
        before_y, after_y = walk(y, True), walk(y, False)
        via_y = {y} | {v for e in after_y.values() for v in e.outvars}
        for i, (xv, x) in enumerate(zip(x_vars, xs)):
            x_aval = aval_of(x)
            if i in used or xv not in readers or xv in outs \
                    or x_aval.shape != (length,) + y.aval.shape or x_aval.dtype != y.aval.dtype:
                continue
            if xv not in from_xs:
                down = walk(xv, False)
                from_xs[xv] = (down, {xv} | {v for e in down.values() for v in e.outvars})
            from_x, x_vals = from_xs[xv]
            if all(k in before_y or (k in after_y and all(
                    a in via_y for a in e.invars if type(a) is Var and a in x_vals))
                   for k, e in from_x.items()):
                pairs[j] = i
                used.add(i)
                break
    return pairs


def _scan_via_while(*args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    """scan expressed with ``while`` and dynamic slices (traced to lower it).

    A per-step output with the stacked shape and dtype of an xs input is written into that
    input's buffer (``_reuse_xs_buffers``). When several other ys share a shape and dtype, the
    first step runs before the loop and each of their buffers starts as that step's output
    padded with zeros: distinct initial values, so XLA does not copy one shared zero broadcast
    into every loop-carried buffer (on CPU those copies can cost more than the loop).
    Otherwise the buffers start as zeros and the body is compiled once.
    """
    from funcgrad.core.jaxpr import eval_jaxpr
    from funcgrad.lax import elementwise as ew
    from funcgrad.lax import indexing, shapes
    consts = list(args[:num_consts])
    carry = list(args[num_consts:num_consts + num_carry])
    xs = list(args[num_consts + num_carry:])
    zero = np.int32(0)
    body, consts = _pretranspose_invariant_dot_operands(jaxpr.jaxpr, num_consts, consts)
    y_avals = jaxpr.out_avals[num_carry:]
    reuse = _reuse_xs_buffers(body, len(consts), num_carry, xs, length) if length > 0 else {}
    x_from_y = {i: j for j, i in reuse.items()}

    def body_outputs(pos, carry, ys):
        x_t = [indexing.dynamic_index_in_dim(ys[x_from_y[i]] if i in x_from_y else x, pos, 0,
                                             keepdims=False) for i, x in enumerate(xs)]
        outs = eval_jaxpr(body, [], *consts, *carry, *x_t)
        return outs[:num_carry], [shapes.expand_dims(v, (0,)) for v in outs[num_carry:]]

    def write(ys, y_t, pos):
        return [indexing.dynamic_update_slice(y, v, [pos] + [zero] * (aval_of(v).ndim - 1))
                for y, v in zip(ys, y_t)]

    def step(t, carry, ys):
        # t: int32 step number (traced or static); reads xs[t'] and writes ys[t'].
        pos = ew.sub(np.int32(length - 1), t) if reverse else t
        carry, y_t = body_outputs(pos, carry, ys)
        return carry, write(ys, y_t, pos)

    kinds = [(a.shape, a.dtype) for j, a in enumerate(y_avals) if j not in reuse]
    peel = length > 0 and len(set(kinds)) < len(kinds)
    ys = [xs[reuse[j]] if j in reuse else None for j in range(len(y_avals))]
    if peel:
        first = length - 1 if reverse else 0
        carry, y_0 = body_outputs(np.int32(first), carry, ys)
        ys = [write([y], [v], np.int32(first))[0] if y is not None else
              shapes.pad(v, np.zeros((), aval_of(v).dtype),
                         [(first, length - 1 - first, 0)] + [(0, 0, 0)] * (aval_of(v).ndim - 1))
              for y, v in zip(ys, y_0)]
    else:
        ys = [y if y is not None else shapes.full((length,) + a.shape, np.zeros((), a.dtype),
                                                  a.dtype)
              for y, a in zip(ys, y_avals)]
    start = int(peel)
    u = builtins.max(1, builtins.min(int(unroll), builtins.max(length - start, 1)))
    n_iter = (length - start) // u

    if n_iter > 0:
        def cond_fn(state):
            return ew.lt(state[0], np.int32(n_iter))

        def body_fn(state):
            it, carry, ys = state
            for k in range(u):
                carry, ys = step(ew.add(ew.mul(it, np.int32(u)), np.int32(k + start)), carry,
                                 ys)
            return ew.add(it, np.int32(1)), carry, ys

        _, carry, ys = while_loop(cond_fn, body_fn, (np.int32(0), carry, ys))
    for t in range(n_iter * u + start, length):
        carry, ys = step(np.int32(t), carry, ys)
    return list(carry) + list(ys)


def _scan_lowering(ctx, *args, **params):
    return ctx.lower_fun(lambda *a: _scan_via_while(*a, **params), args, "scan")


scan_p.def_lowering(_scan_lowering)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """Loop ``carry, y = f(carry, x)`` over the leading axis of ``xs``; returns (carry, ys).

    ``xs`` may be any pytree (or None with ``length``); ``ys`` stacks the per-step outputs.
    ``reverse`` walks from the end; ``unroll`` runs that many steps per loop iteration (True:
    all). Differentiable in forward and reverse mode, and batchable.

    Example:
        >>> def step(c, x):
        ...     return c + x, c * x
        >>> total, partial = lax.scan(step, 0.0, jnp.arange(5.0))
    """
    if not callable(f):
        raise TypeError(f"scan: f must be callable, got {type(f).__name__}")
    x_leaves, x_tree = tree_util.tree_flatten(xs)
    x_avals = _abstractify(x_leaves)
    lengths = {a.shape[0] if a.shape else None for a in x_avals}
    if None in lengths:
        bad = [a.str_short() for a in x_avals if not a.shape]
        raise TypeError(f"scan: xs leaves must have a leading axis to scan over, got "
                        f"{', '.join(bad)}")
    if length is not None:
        try:
            length = int(length)
        except TypeError:
            raise TypeError(f"scan: length must be a static int, got {length!r}") from None
        if lengths and lengths != {length}:
            raise ValueError(f"scan: length={length} but xs have leading sizes "
                             f"{sorted(lengths)}")
    elif len(lengths) == 1:
        length = lengths.pop()
    elif not lengths:
        raise ValueError("scan: with no xs, pass length=")
    else:
        raise ValueError(f"scan: xs leaves have different leading sizes {sorted(lengths)}; "
                         f"{', '.join(a.str_short() for a in x_avals)}")
    if unroll is True:
        unroll = builtins.max(length, 1)
    elif unroll is False:
        unroll = 1
    unroll = int(unroll)
    if unroll < 1:
        raise ValueError(f"scan: unroll must be >= 1, got {unroll}")
    c_leaves, c_tree = tree_util.tree_flatten(init)
    c_avals = _carry_avals(c_leaves)
    c_leaves = [_to_strong(x, a) for x, a in zip(c_leaves, _abstractify(c_leaves))]
    slice_avals = [ShapedArray(a.shape[1:], a.dtype) for a in x_avals]
    in_tree = tree_util.tree_structure((tree_util.tree_unflatten(c_tree, c_leaves),
                                        tree_util.tree_unflatten(x_tree, x_leaves)))
    out_trees = []

    def body(carry, x):
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan: f must return a pair (new_carry, y), got "
                            f"{type(out).__name__}")
        new_carry, y = out
        c_out, c_out_tree = tree_util.tree_flatten(new_carry)
        y_out, y_tree = tree_util.tree_flatten(y)
        out_trees.append((c_out_tree, y_tree))
        return tuple(c_out) + tuple(y_out)

    jaxpr, consts, _ = _trace(body, in_tree, c_avals + slice_avals, "scan f")
    c_out_tree, y_tree = out_trees[0]
    _check_carry("scan", "f's new carry", c_tree, c_avals, c_out_tree,
                 jaxpr.out_avals[:len(c_avals)])
    outs = scan_p.bind(*consts, *c_leaves, *x_leaves, jaxpr=_intern(jaxpr),
                       num_consts=len(consts), num_carry=len(c_leaves), length=length,
                       reverse=bool(reverse), unroll=unroll)
    carry = tree_util.tree_unflatten(c_tree, outs[:len(c_leaves)])
    ys = tree_util.tree_unflatten(y_tree, outs[len(c_leaves):])
    return carry, ys


def _static_int(x):
    """``x`` as a Python int if it is concrete (not a tracer), else None."""
    if isinstance(x, Tracer):
        return None
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """``for i in range(lower, upper): val = body_fun(i, val)``; returns ``val``.

    With static bounds this is a ``scan`` (differentiable in reverse mode); with traced bounds
    a ``while_loop`` (forward mode only).

    Example:
        >>> lax.fori_loop(0, 5, lambda i, s: s + i, 0)
    """
    lo_aval, hi_aval = aval_of(lower), aval_of(upper)
    for b, a in (("lower", lo_aval), ("upper", hi_aval)):
        if a.shape != () or not dtypes.is_integer(a.dtype):
            raise TypeError(f"fori_loop: {b} must be an integer scalar, got {a.str_short()}")
    idx_dtype = dtypes.promote_types(lo_aval.dtype, hi_aval.dtype) if not (
        lo_aval.weak_type and hi_aval.weak_type) else lo_aval.dtype
    lo, hi = _static_int(lower), _static_int(upper)
    if lo is not None and hi is not None:
        n = builtins.max(hi - lo, 0)

        def step(carry, _):
            i, val = carry
            return (i + np.asarray(1, idx_dtype), body_fun(i, val)), None

        (_, out), _ = scan(step, (np.asarray(lo, idx_dtype), init_val), None, length=n,
                           unroll=unroll or 1)
        return out
    if unroll not in (None, 1):
        raise ValueError("fori_loop: unroll needs static lower and upper bounds")
    from funcgrad.lax import elementwise as ew
    lower = ew.convert_element_type(lower, idx_dtype)
    upper = ew.convert_element_type(upper, idx_dtype)

    def cond_fn(c):
        return ew.lt(c[0], c[1])

    def body_fn(c):
        i, u, val = c
        return ew.add(i, np.asarray(1, idx_dtype)), u, body_fun(i, val)

    return while_loop(cond_fn, body_fn, (lower, upper, init_val))[2]


def map(f, xs, *, batch_size=None):
    """``f`` applied to each slice of ``xs`` along its leading axis, results stacked (a scan).

    ``batch_size`` processes that many slices per step with ``funcgrad.vmap``.

    Example:
        >>> lax.map(lambda r: r @ r, jnp.ones((4, 3)))
    """
    if batch_size is None:
        _, ys = scan(lambda c, x: (c, f(x)), (), xs)
        return ys
    from funcgrad.core.batching import map_leading_axis
    leaves, tree = tree_util.tree_flatten(xs)
    n = aval_of(leaves[0]).shape[0]
    b = int(batch_size)
    n_main = (n // b) * b
    from funcgrad.lax import shapes
    main = [shapes.reshape(shapes.slice_in_dim(x, 0, n_main), (n // b, b) + aval_of(x).shape[1:])
            for x in leaves]
    _, ys = scan(lambda c, x: (c, map_leading_axis(f)(tree_util.tree_unflatten(tree, list(x)))), (),
                 tuple(main))
    ys = tree_util.tree_map(lambda y: shapes.reshape(y, (n_main,) + aval_of(y).shape[2:]), ys)
    if n_main < n:
        rest = [shapes.slice_in_dim(x, n_main, n) for x in leaves]
        ys_rest = map_leading_axis(f)(tree_util.tree_unflatten(tree, rest))
        ys = tree_util.tree_map(lambda a, r: shapes.concatenate([a, r], 0), ys, ys_rest)
    return ys



# --- associative_scan (composed of slices, pads and the user's function) ---------------------
def associative_scan(fn, elems, reverse=False, axis=0):
    """All prefix combinations ``fn(...fn(fn(e0, e1), e2)..., ek)`` along ``axis``, computed in
    ``O(log n)`` rounds of vectorized ``fn`` calls (``fn`` must be associative and act
    elementwise on slices). ``elems`` is a pytree of arrays sharing the axis length.

    Built from slicing, padding and ``fn`` itself, so it differentiates and batches through them.

    Example:
        >>> lax.associative_scan(lax.add, jnp.arange(5.0))     # cumulative sum
        Array([ 0.,  1.,  3.,  6., 10.], dtype=float32)
    """
    from funcgrad.lax import elementwise as ew
    from funcgrad.lax import shapes
    leaves, tree = tree_util.tree_flatten(elems)
    if not leaves:
        return elems
    ndim = aval_of(leaves[0]).ndim
    if ndim == 0:
        raise TypeError("associative_scan: elems must have at least one axis")
    axis = int(axis) % ndim
    n = aval_of(leaves[0]).shape[axis]
    for x in leaves:
        if aval_of(x).ndim <= axis or aval_of(x).shape[axis] != n:
            raise ValueError(f"associative_scan: every leaf needs length {n} along axis {axis}, "
                             f"got {', '.join(aval_of(y).str_short() for y in leaves)}")
    if reverse:
        leaves = [shapes.rev(x, (axis,)) for x in leaves]

    def sl(xs, start, stop, step=1):
        return [shapes.slice_in_dim(x, start, stop, step, axis) for x in xs]

    def combine(a, b):
        out = fn(tree_util.tree_unflatten(tree, a), tree_util.tree_unflatten(tree, b))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return the structure of elems {tree}, "
                            f"got {out_tree}")
        return out_leaves

    def interleave(a, b):
        # a holds positions 0, 2, 4...; b holds 1, 3, 5...
        out = []
        for x, y in zip(a, b):
            na, nb = aval_of(x).shape[axis], aval_of(y).shape[axis]
            cfg_a = [(0, 0, 0)] * ndim
            cfg_b = [(0, 0, 0)] * ndim
            cfg_a[axis] = (0, 1 if na == nb else 0, 1)
            cfg_b[axis] = (1, 0 if na == nb else 1, 1)
            dt = aval_of(x).dtype
            zero = np.zeros((), dt)
            xa, yb = shapes.pad(x, zero, cfg_a), shapes.pad(y, zero, cfg_b)
            out.append(ew.bitwise_or(xa, yb) if dt == dtypes.bool_ else ew.add(xa, yb))
        return out

    def rec(xs):
        m = aval_of(xs[0]).shape[axis]
        if m < 2:
            return xs
        pairs = combine(sl(xs, 0, m - 1, 2), sl(xs, 1, m, 2))
        odd = rec(pairs)
        if m % 2 == 0:
            even = combine(sl(odd, 0, aval_of(odd[0]).shape[axis] - 1), sl(xs, 2, m, 2))
        else:
            even = combine(odd, sl(xs, 2, m, 2))
        even = [shapes.concatenate([f, e], axis) for f, e in zip(sl(xs, 0, 1), even)]
        return interleave(even, odd)

    out = rec(leaves)
    if reverse:
        out = [shapes.rev(x, (axis,)) for x in out]
    return tree_util.tree_unflatten(tree, out)

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
    from funcgrad.core import interpreters
    return bool(getattr(interpreters.current(), "forward_known", False))


def _inexact(aval):
    return dtypes.is_inexact(aval.dtype)


def _zero_tangents_to_values(ts, avals, wanted):
    from funcgrad.core.ad_util import instantiate
    return [instantiate(t) for t, a, w in zip(ts, avals, wanted) if w]


def _nonzero(t):
    from funcgrad.core.ad_util import Zero
    return type(t) is not Zero


# --- cond: jvp, transpose, batching ------------------------------------------------------
def _cond_jvp(primals, tangents, branches):
    from funcgrad.core.ad_util import Zero, tangent_aval
    from funcgrad.core.ad import jvp_jaxpr
    index, ops = primals[0], list(primals[1:])
    op_avals = [aval_of(o) for o in ops]
    in_nz = [_nonzero(t) and _inexact(a) for t, a in zip(tangents[1:], op_avals)]
    jvps = [_parts(jvp_jaxpr(br, in_nz, instantiate_out=True)[0]) for br in branches]
    # Every branch takes (all branches' consts..., primals..., nonzero tangents...).
    n_args = len(ops) + sum(in_nz)
    const_avals = [[aval_of(c) for c in consts] for _, consts in jvps]
    padded = []
    for i, (j, _) in enumerate(jvps):
        before = [a for avs in const_avals[:i] for a in avs]
        after = [a for avs in const_avals[i + 1:] for a in avs]
        padded.append(_intern(_pad_invars(j, len(before), n_args, before, after)))
    all_consts = [c for _, consts in jvps for c in consts]
    t_in = [t for t, nz in zip(tangents[1:], in_nz) if nz]
    outs = cond_p.bind(index, *all_consts, *ops, *t_in, branches=tuple(padded))
    out_avals = branches[0].out_avals
    n = len(out_avals)
    it = iter(outs[n:])
    t_out = [next(it) if _inexact(a) else Zero(tangent_aval(a)) for a in out_avals]
    p_out = outs[:n]
    if _split_linearize():
        p_out = cond_p.bind(index, *ops, branches=branches)
    return p_out, t_out


def _cond_transpose(cts, index, *ops, branches):
    from funcgrad.core.ad_util import is_undefined_primal
    from funcgrad.core.ad import transpose_jaxpr
    if is_undefined_primal(index):
        raise TypeError("cond: cannot transpose with respect to the branch index")
    linear = [is_undefined_primal(o) for o in ops]
    cts_nz = [_nonzero(c) for c in cts]
    trs = [_parts(transpose_jaxpr(br, linear, cts_nz)) for br in branches]
    nonlin = [o for o, lin in zip(ops, linear) if not lin]
    n_args = len(nonlin) + sum(cts_nz)
    const_avals = [[aval_of(c) for c in consts] for _, consts in trs]
    padded = []
    for i, (j, _) in enumerate(trs):
        before = [a for avs in const_avals[:i] for a in avs]
        after = [a for avs in const_avals[i + 1:] for a in avs]
        padded.append(_pad_invars(j, len(before), n_args, before, after))
    all_consts = [c for _, consts in trs for c in consts]
    ct_args = [c for c in cts if _nonzero(c)]
    res = iter(cond_p.bind(index, *all_consts, *nonlin, *ct_args, branches=tuple(padded)))
    return [None] + [next(res) if lin else None for lin in linear]


def _cond_batch(args, dims, branches):
    from funcgrad.core import batching_util as bu
    from funcgrad.core.batching import batch_jaxpr
    index, ops = args[0], list(args[1:])
    idx_dim, op_dims = dims[0], list(dims[1:])
    size = bu.batch_size(args, dims)
    if idx_dim is not None:
        # A batched predicate: every branch runs on the whole batch, then select per lane.
        ops = [bu.bdim_to_front(o, d) if d is not None else o for o, d in zip(ops, op_dims)]
        in_dims = [0 if d is not None else None for d in op_dims]
        outs_per_branch = []
        for br in branches:
            bj, _ = batch_jaxpr(br, size, in_dims, out_dims=0)
            outs_per_branch.append(bj(*ops))
        from funcgrad.lax import elementwise as ew
        from funcgrad.lax import shapes
        idx = bu.bdim_to_front(index, idx_dim)
        outs = []
        for k in range(len(outs_per_branch[0])):
            cases = [o[k] for o in outs_per_branch]
            shape = aval_of(cases[0]).shape
            which = shapes.broadcast_in_dim(idx, shape, (0,))
            if len(cases) == 2:
                which = ew.convert_element_type(which, dtypes.bool_)
            outs.append(ew.select_n(which, *cases))
        return outs, [0] * len(outs)
    # Find which outputs are batched in any branch, then force those to axis 0 everywhere.
    out_batched = [False] * len(branches[0].out_avals)
    for br in branches:
        _, od = batch_jaxpr(br, size, op_dims)
        out_batched = [a or d is not None for a, d in zip(out_batched, od)]
    forced = [0 if b else None for b in out_batched]
    new = []
    for br in branches:
        bj, _ = batch_jaxpr(br, size, op_dims, out_dims=forced)
        new.append(bj)
    consts = [[aval_of(c) for c in bj.consts] for bj in new]
    parts = [_parts(bj) for bj in new]
    n_args = len(ops)
    padded = []
    for i, (j, _) in enumerate(parts):
        before = [a for avs in consts[:i] for a in avs]
        after = [a for avs in consts[i + 1:] for a in avs]
        padded.append(_pad_invars(j, len(before), n_args, before, after))
    all_consts = [c for _, cs in parts for c in cs]
    outs = cond_p.bind(index, *all_consts, *ops, branches=tuple(padded))
    return outs, forced


cond_p.def_jvp(_cond_jvp)
cond_p.def_transpose(_cond_transpose)
cond_p.def_batch(_cond_batch)


# --- while: jvp (forward mode only), batching --------------------------------------------
def _while_jvp(primals, tangents, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    from funcgrad.core.ad_util import Zero, tangent_aval
    from funcgrad.core.ad import jvp_jaxpr
    nc = cond_nconsts
    cconsts, bconsts = primals[:nc], primals[nc:nc + body_nconsts]
    carry = primals[nc + body_nconsts:]
    bconst_t = tangents[nc:nc + body_nconsts]
    carry_t = tangents[nc + body_nconsts:]
    carry_avals = [aval_of(c) for c in carry]
    bc_nz = [_nonzero(t) and _inexact(aval_of(c)) for t, c in zip(bconst_t, bconsts)]
    c_nz = [_inexact(a) for a in carry_avals]   # every float carry gets a tangent
    jvp_closed, _ = jvp_jaxpr(body_jaxpr, bc_nz + c_nz, instantiate_out=True)
    j, extra = _parts(jvp_closed)
    n_e, n_bc, n_c = len(extra), len(bconsts), len(carry)
    e, pb, pc, tb, tc = _groups([n_e, n_bc, n_c, sum(bc_nz), sum(c_nz)])
    body = _permute(j, e + pb + tb + pc + tc, list(range(len(j.jaxpr.outvars))))
    t_carry_avals = [tangent_aval(a) for a, nz in zip(carry_avals, c_nz) if nz]
    # The predicate ignores the tangent carries.
    cj = cond_jaxpr.jaxpr
    cond_new = ClosedJaxpr(Jaxpr([], cj.invars + [Var(a) for a in t_carry_avals], cj.eqns,
                                 cj.outvars), [])
    t_b = _zero_tangents_to_values(bconst_t, [aval_of(b) for b in bconsts], bc_nz)
    t_c = _zero_tangents_to_values(carry_t, carry_avals, c_nz)
    outs = while_p.bind(*cconsts, *extra, *bconsts, *t_b, *carry, *t_c,
                        cond_jaxpr=_intern(cond_new), body_jaxpr=_intern(body),
                        cond_nconsts=nc, body_nconsts=n_e + n_bc + len(t_b))
    p_out = outs[:n_c]
    it = iter(outs[n_c:])
    t_out = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(carry_avals, c_nz)]
    if _split_linearize():
        p_out = while_p.bind(*cconsts, *bconsts, *carry, cond_jaxpr=cond_jaxpr,
                             body_jaxpr=body_jaxpr, cond_nconsts=nc, body_nconsts=body_nconsts)
    return p_out, t_out


def _while_transpose(cts, *args, **params):
    raise TypeError("while_loop: reverse-mode differentiation (grad/vjp) of a while_loop is not "
                    "supported because its trip count is dynamic; use lax.fori_loop with static "
                    "bounds or lax.scan, or forward mode (jvp/jacfwd)")


def _while_batch(args, dims, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    from funcgrad.core import batching_util as bu
    from funcgrad.core.jaxpr import eval_jaxpr
    from funcgrad.lax import elementwise as ew
    from funcgrad.lax import reductions, shapes
    from funcgrad.core.batching import batch_jaxpr
    size = bu.batch_size(args, dims)
    nc, nb = cond_nconsts, body_nconsts
    cconsts, bconsts, carry = args[:nc], args[nc:nc + nb], list(args[nc + nb:])
    cdims, bdims, carry_dims = dims[:nc], dims[nc:nc + nb], list(dims[nc + nb:])
    cconsts = [bu.bdim_to_front(c, d) if d is not None else c for c, d in zip(cconsts, cdims)]
    bconsts = [bu.bdim_to_front(c, d) if d is not None else c for c, d in zip(bconsts, bdims)]
    cdims = [0 if d is not None else None for d in cdims]
    bdims = [0 if d is not None else None for d in bdims]
    batched = [d is not None for d in carry_dims]
    # Fixed point: a carry is batched if it starts batched or the body makes it so; the
    # predicate being batched makes every carry batched (lanes stop at different times).
    while True:
        cin = [0 if b else None for b in batched]
        _, pd = batch_jaxpr(cond_jaxpr, size, cdims + cin)
        pred_batched = pd[0] is not None
        if pred_batched:
            new_batched = [True] * len(batched)
        else:
            _, od = batch_jaxpr(body_jaxpr, size, bdims + cin)
            new_batched = [b or d is not None for b, d in zip(batched, od)]
        if new_batched == batched:
            break
        batched = new_batched
    cin = [0 if b else None for b in batched]
    carry = [bu.bdim_to_front(c, d, size) if b else c
             for c, d, b in zip(carry, carry_dims, batched)]
    cond_b, _ = batch_jaxpr(cond_jaxpr, size, cdims + cin, out_dims=[0 if pred_batched else None])
    body_b, _ = batch_jaxpr(body_jaxpr, size, bdims + cin, out_dims=cin)

    if not pred_batched:
        def cond_fn(c):
            return eval_jaxpr(cond_b.jaxpr, cond_b.consts, *cconsts, *c)[0]

        def body_fn(c):
            return list(eval_jaxpr(body_b.jaxpr, body_b.consts, *bconsts, *c))
    else:
        def cond_fn(c):
            pred = eval_jaxpr(cond_b.jaxpr, cond_b.consts, *cconsts, *c)[0]
            return reductions.reduce_or(pred, (0,))

        def body_fn(c):
            pred = eval_jaxpr(cond_b.jaxpr, cond_b.consts, *cconsts, *c)[0]
            new = eval_jaxpr(body_b.jaxpr, body_b.consts, *bconsts, *c)
            out = []
            for old, n in zip(c, new):
                p = shapes.broadcast_in_dim(pred, aval_of(old).shape, (0,))
                out.append(ew.select(p, n, old))
            return out

    outs = while_loop(cond_fn, body_fn, list(carry))
    return list(outs), cin


while_p.def_jvp(_while_jvp)
while_p.def_transpose(_while_transpose)
while_p.def_batch(_while_batch)


# --- scan: jvp, transpose (reverse mode), batching ----------------------------------------
def _scan_jvp(primals, tangents, jaxpr, num_consts, num_carry, length, reverse, unroll):
    from funcgrad.core.ad_util import Zero, tangent_aval
    from funcgrad.core.ad import jvp_jaxpr
    n_c, n_k = num_consts, num_carry
    n_x = len(primals) - n_c - n_k
    avals = [aval_of(p) for p in primals]
    nz = [_nonzero(t) and _inexact(a) for t, a in zip(tangents, avals)]
    for i in range(n_c, n_c + n_k):
        nz[i] = _inexact(avals[i])        # every float carry gets a tangent
    jvp_closed, _ = jvp_jaxpr(jaxpr, nz, instantiate_out=True)
    j, extra = _parts(jvp_closed)
    nz_c, nz_k, nz_x = nz[:n_c], nz[n_c:n_c + n_k], nz[n_c + n_k:]
    e, pc, pk, px, tc, tk, tx = _groups([len(extra), n_c, n_k, n_x, sum(nz_c), sum(nz_k),
                                         sum(nz_x)])
    y_avals = jaxpr.out_avals[n_k:]
    y_nz = [_inexact(a) for a in y_avals]
    ok, oy, otk, oty = _groups([n_k, len(y_avals), sum(nz_k), sum(y_nz)])
    body = _permute(j, e + pc + tc + pk + tk + px + tx, ok + otk + oy + oty)
    t_vals = [_zero_tangents_to_values(tangents[s], avals[s], nz[s]) for s in
              (builtins.slice(0, n_c), builtins.slice(n_c, n_c + n_k),
               builtins.slice(n_c + n_k, None))]
    consts, carry, xs = primals[:n_c], primals[n_c:n_c + n_k], primals[n_c + n_k:]
    if _split_linearize():
        split = _scan_jvp_split(body, _groups([len(g) for g in (e, pc, tc, pk, tk, px, tx)]),
                                _groups([len(g) for g in (ok, otk, oy, oty)]), extra,
                                consts, carry, xs, t_vals, length, reverse, unroll)
        if split is not None:
            p_out, t_lin = split
            t_carry_it = iter(t_lin[:sum(nz_k)])
            t_ys_it = iter(t_lin[sum(nz_k):])
            carry_avals = avals[n_c:n_c + n_k]
            t_out = [next(t_carry_it) if z else Zero(tangent_aval(a))
                     for a, z in zip(carry_avals, nz_k)]
            ys_full = [ShapedArray((length,) + a.shape, a.dtype) for a in y_avals]
            t_out += [next(t_ys_it) if z else Zero(tangent_aval(a))
                      for a, z in zip(ys_full, y_nz)]
            return p_out, t_out
    outs = scan_p.bind(*extra, *consts, *t_vals[0], *carry, *t_vals[1], *xs, *t_vals[2],
                       jaxpr=_intern(body), num_consts=len(extra) + n_c + len(t_vals[0]),
                       num_carry=n_k + len(t_vals[1]), length=length, reverse=reverse,
                       unroll=unroll)
    p_carry = outs[:n_k]
    t_carry_it = iter(outs[n_k:n_k + sum(nz_k)])
    rest = outs[n_k + sum(nz_k):]
    p_ys, t_ys_it = rest[:len(y_avals)], iter(rest[len(y_avals):])
    carry_avals = avals[n_c:n_c + n_k]
    t_out = [next(t_carry_it) if z else Zero(tangent_aval(a))
             for a, z in zip(carry_avals, nz_k)]
    ys_full = [ShapedArray((length,) + a.shape, a.dtype) for a in y_avals]
    t_out += [next(t_ys_it) if z else Zero(tangent_aval(a)) for a, z in zip(ys_full, y_nz)]
    p_out = list(p_carry) + list(p_ys)
    if _split_linearize():
        p_out = scan_p.bind(*primals, jaxpr=jaxpr, num_consts=n_c, num_carry=n_k,
                            length=length, reverse=reverse, unroll=unroll)
    return p_out, t_out


# Cheap elementwise primitives whose per-step results the backward loop recomputes from
# another saved value rather than saving them too (e.g. 1 - t**2 from a saved t = tanh(x)).
# Transcendental functions (tanh, logistic, exp) are saved, not recomputed: XLA:CPU copies a
# recomputation into every fusion that reads it, which made LSTM steps ~7% slower.
_REMAT = frozenset(["add", "sub", "mul", "neg", "div", "max", "min",
                    "integer_pow", "square", "broadcast_in_dim", "convert_element_type",
                    "select_n", "abs", "sign"])


def _size(aval):
    return int(np.prod(aval.shape, dtype=np.int64))


def _remat_residuals(residuals, known_eqns, invariant):
    """Replace saved per-step residuals made by a cheap elementwise equation from at most one
    other per-step value (no bigger than it) by that value; returns (residuals, equations to
    recompute on the linear side, in program order)."""
    producer = {v: eqn for eqn in known_eqns for v in eqn.outvars}
    residuals, moved, moved_out = list(residuals), set(), set()
    changed = True
    while changed:
        changed = False
        res_set = set(residuals)
        for r in residuals:
            eqn = producer.get(r)
            if eqn is None or r in invariant or eqn.prim.name not in _REMAT \
                    or eqn.prim.multiple_results:
                continue
            ins = [a for a in eqn.invars
                   if type(a) is Var and a not in res_set and a not in moved_out]
            new = {a for a in ins if a not in invariant}
            if len(new) > 1 or builtins.any(_size(a.aval) > _size(r.aval) for a in new):
                continue
            residuals = [v for v in residuals if v is not r]
            for a in ins:
                if a not in residuals:
                    residuals.append(a)
            moved.add(id(eqn))
            moved_out.update(eqn.outvars)
            changed = True
            break
    return residuals, [e for e in known_eqns if id(e) in moved]


def _recompute_carry_free(residuals, known_eqns, invariant, known_xs):
    """Residuals computed from known xs and loop invariants alone (no known carry) are
    recomputed in the reverse loop from those xs: the same work per step, but no forward scan
    and no stacked copy for them (e.g. the derivative coefficients a hand-written tangent scan
    derives from saved activations). Returns (residuals, equations to move, in order)."""
    free = set(known_xs) | set(invariant)
    free_eqns = []
    for eqn in known_eqns:
        if all(type(a) is not Var or a in free for a in eqn.invars):
            free.update(eqn.outvars)
            free_eqns.append(eqn)
    targets = [r for r in residuals if r in free and r not in invariant and r not in known_xs]
    if not targets:
        return residuals, []
    producer = {v: e for e in free_eqns for v in e.outvars}
    needed, stack = set(), list(targets)
    while stack:
        eqn = producer.get(stack.pop())
        if eqn is None or id(eqn) in needed:
            continue
        needed.add(id(eqn))
        stack.extend(a for a in eqn.invars
                     if type(a) is Var and a not in invariant and a not in known_xs)
    moved = [e for e in free_eqns if id(e) in needed]
    inputs = [a for e in moved for a in e.invars
              if type(a) is Var and (a in invariant or a in known_xs)]
    drop = set(targets)
    out = [r for r in residuals if r not in drop]
    for a in inputs:
        if a not in out:
            out.append(a)
    return out, moved


def _hoist_const_cts(jt, n_lc, n_lk, stacked_in):
    """For the backward body ``jt``: {const cotangent index: (eqn, operand vars, tail eqns)}
    for each const cotangent made by dot_general (no batch dims) or reduce_sum of per-step
    values, possibly followed by transposes, and read by nothing else in the body."""
    producer = {v: e for e in jt.eqns for v in e.outvars}
    uses = {}
    for e in jt.eqns:
        for a in e.invars:
            if type(a) is Var:
                uses[a] = uses.get(a, 0) + 1
    for a in jt.outvars:
        if type(a) is Var:
            uses[a] = uses.get(a, 0) + 1
    invars = set(jt.invars)
    per_step_in = set(stacked_in)
    out = {}
    for i in range(n_lc):
        v, tail = jt.outvars[i], []
        if type(v) is not Var or uses.get(v) != 1:
            continue
        while v in producer and producer[v].prim.name == "transpose" \
                and type(producer[v].invars[0]) is Var and uses.get(producer[v].invars[0]) == 1:
            tail.append(producer[v])
            v = producer[v].invars[0]
        e = producer.get(v)
        if e is None or uses.get(v) != 1:
            continue
        if e.prim.name == "dot_general" and e.params["dimension_numbers"][1] == ((), ()):
            ops = e.invars
        elif e.prim.name == "reduce_sum":
            ops = e.invars[:1]
        else:
            continue
        # Operands must vary per step: stacked inputs or values computed in the body from them.
        if not all(type(a) is Var and (a in per_step_in or a not in invars) for a in ops):
            continue
        if any(a not in per_step_in and a not in producer for a in ops):
            continue
        out[i] = (e, list(ops), tail[::-1])
    return out


def _apply_hoisted(h, env):
    """The sum over steps of a hoisted const cotangent, from the stacked operands in env."""
    eqn, ops, tail = h
    args = [env[v] for v in ops]
    if eqn.prim.name == "dot_general":
        (lc, rc), _ = eqn.params["dimension_numbers"]
        params = dict(eqn.params)
        params["dimension_numbers"] = (((0,) + tuple(d + 1 for d in lc),
                                        (0,) + tuple(d + 1 for d in rc)), ((), ()))
    else:
        params = dict(eqn.params)
        params["axes"] = (0,) + tuple(d + 1 for d in eqn.params["axes"])
    val = eqn.prim.bind(*args, **params)
    for t in tail:
        val = t.prim.bind(val, **t.params)
    return val


def _split_known_linear(eqns, linear_inputs):
    """(equations not reading linear values, equations that do, the set of linear vars):
    a value is linear when it depends on one of ``linear_inputs``."""
    lin_vars = set(linear_inputs)
    known_eqns, lin_eqns = [], []
    for eqn in eqns:
        if any(type(a) is Var and a in lin_vars for a in eqn.invars):
            lin_eqns.append(eqn)
            lin_vars.update(eqn.outvars)
        else:
            known_eqns.append(eqn)
    return known_eqns, lin_eqns, lin_vars


def _scan_jvp_split(body, in_groups, out_groups, extra, consts, carry, xs, t_vals, length,
                    reverse, unroll):
    """Under linearize, split the jvp body into a known scan (primal outputs and the per-step
    values the tangent part reads, computed once) and a tangent scan that reads them as xs, so
    the forward loop does not run a second time. Returns (primal outs, tangent outs), or None
    when the body does not split cleanly (the caller then uses the plain rule)."""
    from funcgrad.core.jaxpr import eval_jaxpr
    bj = body.jaxpr
    if body.consts or bj.constvars:
        return None
    e, pc, tc, pk, tk, px, tx = [[bj.invars[i] for i in g] for g in in_groups]
    ok, otk, oy, oty = [[bj.outvars[i] for i in g] for g in out_groups]
    known_eqns, lin_eqns, lin_vars = _split_known_linear(bj.eqns, tc + tk + tx)
    if any(type(v) is Var and v in lin_vars for v in ok + oy):
        return None
    invariant, hoisted = set(e + pc), []
    for eqn in known_eqns:
        if all(type(a) is not Var or a in invariant for a in eqn.invars):
            hoisted.append(eqn)
            invariant.update(eqn.outvars)
    residuals, seen = [], set()
    for a in [a for eqn in lin_eqns for a in eqn.invars] + otk + oty:
        if type(a) is Var and a not in lin_vars and a not in seen:
            seen.add(a)
            residuals.append(a)
    residuals, remat = _remat_residuals(residuals, known_eqns, invariant)
    lin_eqns = remat + lin_eqns
    const_res = [v for v in residuals if v in invariant]
    px_set = set(px)
    xs_res = [v for v in residuals if v in px_set]
    iter_res = [v for v in residuals if v not in invariant and v not in px_set]
    # A residual that is a carry's value entering each step (an RNN's previous hidden state)
    # is the stacked carry leaving each step, shifted by one, when that is stacked anyway (a
    # primal ys output or another residual): one copy after the loop, one per-step output less.
    stacked_src = {v: ("y", i) for i, v in enumerate(oy) if type(v) is Var}
    stacked_src.update((v, ("r", v)) for v in iter_res if v not in stacked_src)
    shifted = {v: k for k, v in enumerate(pk)
               if v in set(iter_res) and length > 0 and type(ok[k]) is Var
               and ok[k] in stacked_src and ok[k] is not v}
    shifted = {v: k for v, k in shifted.items() if ok[k] not in shifted}
    scan_res = [v for v in iter_res if v not in shifted]
    known = ClosedJaxpr(Jaxpr([], e + pc + pk + px, known_eqns, ok + oy + scan_res), [])
    outs = scan_p.bind(*extra, *consts, *carry, *xs, jaxpr=_intern(known),
                       num_consts=len(e) + len(pc), num_carry=len(pk), length=length,
                       reverse=reverse, unroll=unroll)
    n_p = len(ok) + len(oy)
    p_out = outs[:n_p]
    env = dict(zip(scan_res, outs[n_p:]))
    for v, k in shifted.items():
        kind, where = stacked_src[ok[k]]
        src = p_out[len(ok) + where] if kind == "y" else env[where]
        env[v] = _carry_in_per_step(carry[k], src, length, reverse)
    stacked = [env[v] for v in iter_res]
    const_vals = eval_jaxpr(Jaxpr([], e + pc, hoisted, const_res), [], *extra, *consts) \
        if const_res else []
    xs_env = dict(zip(px, xs))
    lin = ClosedJaxpr(Jaxpr([], const_res + tc + tk + xs_res + iter_res + tx, lin_eqns,
                            otk + oty), [])
    t_out = scan_p.bind(*const_vals, *t_vals[0], *t_vals[1], *[xs_env[v] for v in xs_res],
                        *stacked, *t_vals[2], jaxpr=_intern(lin),
                        num_consts=len(const_res) + len(tc), num_carry=len(tk), length=length,
                        reverse=reverse, unroll=unroll)
    return list(p_out), list(t_out)


def _carry_in_per_step(init, carry_outs, length, reverse):
    """The carry entering each step, stacked, from its initial value and the stacked carry
    leaving each step (step t starts from step t-1's result, or t+1's when reversed)."""
    from funcgrad.lax import shapes
    from funcgrad.lax.elementwise import convert_element_type
    dtype = aval_of(carry_outs).dtype
    first = shapes.expand_dims(init if aval_of(init).dtype == dtype
                               else convert_element_type(init, dtype), (0,))
    if length == 1:
        return first
    if reverse:
        return shapes.concatenate([shapes.slice_in_dim(carry_outs, 1, length, axis=0), first], 0)
    return shapes.concatenate([first, shapes.slice_in_dim(carry_outs, 0, length - 1, axis=0)], 0)


def _scan_transpose(cts, *args, jaxpr, num_consts, num_carry, length, reverse, unroll):
    """Reverse mode through scan: a forward scan of the body's non-linear part saves the values
    the linear part needs (residuals); a reverse scan runs the transposed linear part."""
    from funcgrad.core.ad_util import instantiate, is_undefined_primal
    from funcgrad.core.jaxpr import eval_jaxpr
    from funcgrad.lax import elementwise as ew
    from funcgrad.core.ad import transpose_jaxpr
    n_c, n_k = num_consts, num_carry
    j = jaxpr.jaxpr
    undefined = [is_undefined_primal(a) for a in args]
    lin_in = list(undefined)
    ct_carry_in, ct_ys_in = list(cts[:n_k]), list(cts[n_k:])
    carry_out = j.outvars[:n_k]
    # Which body values depend on linear inputs. A carry whose update depends on them is linear
    # too, even when its initial value is known (an instantiated zero tangent): fixed point.
    while True:
        known_eqns, lin_eqns, lin_vars = _split_known_linear(
            j.eqns, [v for v, lin in zip(j.invars, lin_in) if lin])
        changed = False
        for k in range(n_k):
            if type(carry_out[k]) is Var and carry_out[k] in lin_vars and not lin_in[n_c + k]:
                lin_in[n_c + k] = changed = True
        if not changed:
            break
    lin_outs = [i for i, v in enumerate(j.outvars)
                if (i < n_k and lin_in[n_c + i]) or (i >= n_k and type(v) is Var
                                                     and v in lin_vars)]
    # Residuals: known values read by the linear equations or returned as linear outputs.
    known_invars = [v for v, lin in zip(j.invars, lin_in) if not lin]
    const_known = set(v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if not lin)
    residuals, seen = [], set()

    def note(a):
        if type(a) is Var and a not in lin_vars and a not in seen:
            seen.add(a)
            residuals.append(a)

    for eqn in lin_eqns:
        for a in eqn.invars:
            note(a)
    for i in lin_outs:
        note(j.outvars[i])
    # Loop-invariant known values (computed from known consts only, e.g. a transposed weight)
    # are residuals computed once outside the loops, not stacked once per step.
    invariant, hoisted = set(const_known), []
    for eqn in known_eqns:
        if all(type(a) is not Var or a in invariant for a in eqn.invars):
            hoisted.append(eqn)
            invariant.update(eqn.outvars)
    residuals, remat = _remat_residuals(residuals, known_eqns, invariant)
    residuals, carry_free = _recompute_carry_free(
        residuals, known_eqns, invariant,
        set(v for v, lin in zip(j.invars[n_c + n_k:], lin_in[n_c + n_k:]) if not lin))
    moved = {id(e) for e in remat + carry_free}
    lin_eqns = [e for e in known_eqns if id(e) in moved] + lin_eqns
    const_res = [v for v in residuals if v in invariant]
    iter_res = [v for v in residuals if v not in invariant]
    # Forward scan of the known part: known carry -> known carry, residuals per step.
    k_consts = [a for a, lin in zip(args[:n_c], lin_in[:n_c]) if not lin]
    k_carry_idx = [k for k in range(n_k) if not lin_in[n_c + k]]
    k_carry = [args[n_c + k] for k in k_carry_idx]
    k_xs = [a for a, lin in zip(args[n_c + n_k:], lin_in[n_c + n_k:]) if not lin]
    # A residual that is a known xs input is that input's array: no forward scan restacks it.
    env_xs = dict(zip([v for v, lin in zip(j.invars[n_c + n_k:], lin_in[n_c + n_k:])
                       if not lin], k_xs))
    scan_res = [v for v in iter_res if v not in env_xs]
    known = ClosedJaxpr(Jaxpr([], known_invars, known_eqns,
                              [carry_out[k] for k in k_carry_idx] + scan_res), [])
    if scan_res:
        outs = scan_p.bind(*k_consts, *k_carry, *k_xs, jaxpr=_intern(known),
                           num_consts=len(k_consts), num_carry=len(k_carry), length=length,
                           reverse=reverse, unroll=unroll)
        env_scan = dict(zip(scan_res, outs[len(k_carry):]))
    else:
        env_scan = {}
    stacked_res = [env_xs[v] if v in env_xs else env_scan[v] for v in iter_res]
    env_const = dict(zip([v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if not lin],
                         k_consts))
    if any(v not in const_known for v in const_res):
        k_const_vars = [v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if not lin]
        const_res_vals = eval_jaxpr(Jaxpr([], k_const_vars, hoisted, const_res), [], *k_consts)
    else:
        const_res_vals = [env_const[v] for v in const_res]
    # The linear part: (const residuals, step residuals, linear consts, carry, xs) -> outputs.
    lin_c = [v for v, lin in zip(j.invars[:n_c], lin_in[:n_c]) if lin]
    lin_k = [j.invars[n_c + k] for k in range(n_k) if lin_in[n_c + k]]
    lin_x = [v for v, lin in zip(j.invars[n_c + n_k:], lin_in[n_c + n_k:]) if lin]
    lin_out_vars = []
    for i in lin_outs:
        v = j.outvars[i]
        lin_out_vars.append(v)
    lin_jaxpr = ClosedJaxpr(Jaxpr([], const_res + iter_res + lin_c + lin_k + lin_x, lin_eqns,
                                  lin_out_vars), [])
    n_res = len(const_res) + len(iter_res)
    linear_mask = [False] * n_res + [True] * (len(lin_c) + len(lin_k) + len(lin_x))
    tr = transpose_jaxpr(lin_jaxpr, linear_mask, [True] * len(lin_outs))
    tr_j, tr_consts = _parts(tr)
    lin_carry_outs = [i for i in lin_outs if i < n_k]
    lin_y_outs = [i - n_k for i in lin_outs if i >= n_k]
    ct_carry = [instantiate(ct_carry_in[i]) for i in lin_carry_outs]
    y_avals = jaxpr.out_avals[n_k:]
    ct_ys = []
    for i in lin_y_outs:
        c = ct_ys_in[i]
        if not _nonzero(c):
            from funcgrad.lax import shapes
            a = y_avals[i]
            c = shapes.full((length,) + a.shape, np.zeros((), a.dtype), a.dtype)
        ct_ys.append(c)
    from funcgrad.lax import shapes
    acc0 = [shapes.full(v.aval.shape, np.zeros((), v.aval.dtype), v.aval.dtype) for v in lin_c]
    n_lc, n_lk = len(lin_c), len(lin_k)

    # A const's cotangent summed over the steps of dot_general(a_t, b_t) (a weight gradient)
    # or reduce_sum(b_t) (a bias gradient) is one op on the stacked a, b after the loop.
    jt = tr_j.jaxpr
    n_pre = len(tr_consts) + len(const_res_vals)
    stacked_in = dict(zip(jt.invars[n_pre:n_pre + len(iter_res)], stacked_res))
    stacked_in.update(zip(jt.invars[n_pre + len(iter_res) + n_lk:], ct_ys))
    hoist = _hoist_const_cts(jt, n_lc, n_lk, stacked_in)
    x_out_pos = {v: k for k, v in enumerate(jt.outvars[n_lc + n_lk:]) if type(v) is Var}
    extra = [v for v in dict.fromkeys(v for h in hoist.values() for v in h[1])
             if v not in stacked_in and v not in x_out_pos]
    # An operand concatenated in the body from values stacked anyway (the per-gate input
    # cotangents of an LSTM, joined for the recurrent weight's gradient) is joined once after
    # the loop instead of being stacked a second time.
    producer = {o: e for e in jt.eqns for o in e.outvars}
    joined = {v: producer[v] for v in extra
              if v in producer and producer[v].prim.name == "concatenate"
              and all(type(a) is Var and (a in stacked_in or a in x_out_pos)
                      for a in producer[v].invars)}
    extra = [v for v in extra if v not in joined]
    jt_run = Jaxpr(jt.constvars, jt.invars, jt.eqns, jt.outvars + extra) if extra else jt
    acc_idx = [i for i in range(n_lc) if i not in hoist]
    n_xo = len(jt.outvars) - n_lc - n_lk

    def body(carry, x):
        acc, ct_k = carry
        res_t, ct_y = x
        outs = eval_jaxpr(jt_run, [], *tr_consts, *const_res_vals, *res_t, *ct_k, *ct_y)
        ct_c_t, ct_k_new = outs[:n_lc], outs[n_lc:n_lc + n_lk]
        ct_x_t = outs[n_lc + n_lk:]
        acc = [ew.add(a, ct_c_t[i]) for a, i in zip(acc, acc_idx)]
        return (acc, list(ct_k_new)), list(ct_x_t)

    (acc_l, ct_k0), ct_xs = scan(body, ([acc0[i] for i in acc_idx], ct_carry),
                                 (list(stacked_res), ct_ys), length=length,
                                 reverse=not reverse, unroll=unroll)
    stacked_env = dict(stacked_in)
    stacked_env.update(zip(extra, ct_xs[n_xo:]))
    stacked_env.update((v, ct_xs[k]) for v, k in x_out_pos.items())
    for v, e in joined.items():
        stacked_env[v] = shapes.concatenate([stacked_env[a] for a in e.invars],
                                            e.params["dimension"] + 1)
    ct_xs = ct_xs[:n_xo]
    acc, acc_l = [None] * n_lc, iter(acc_l)
    for i in range(n_lc):
        if i in hoist:
            acc[i] = _apply_hoisted(hoist[i], stacked_env)
        else:
            acc[i] = next(acc_l)
    acc_it, k_it, x_it = iter(acc), iter(ct_k0), iter(ct_xs)
    result = []
    for i, lin in enumerate(lin_in):
        if not lin:
            result.append(None)
        elif not undefined[i]:
            next(k_it)     # a known carry start (a zero tangent): no cotangent to return
            result.append(None)
        elif i < n_c:
            result.append(next(acc_it))
        elif i < n_c + n_k:
            result.append(next(k_it))
        else:
            result.append(next(x_it))
    return result


def _scan_batch(args, dims, jaxpr, num_consts, num_carry, length, reverse, unroll):
    from funcgrad.core import batching_util as bu
    from funcgrad.core.batching import batch_jaxpr
    size = bu.batch_size(args, dims)
    n_c, n_k = num_consts, num_carry
    consts, carry, xs = args[:n_c], list(args[n_c:n_c + n_k]), args[n_c + n_k:]
    cdims, kdims, xdims = dims[:n_c], list(dims[n_c:n_c + n_k]), dims[n_c + n_k:]
    consts = [bu.bdim_to_front(c, d) if d is not None else c for c, d in zip(consts, cdims)]
    xs = [bu.bdim_at(x, d, 1) if d is not None else x for x, d in zip(xs, xdims)]
    c_in = [0 if d is not None else None for d in cdims]
    x_in = [0 if d is not None else None for d in xdims]
    batched = [d is not None for d in kdims]
    while True:
        k_in = [0 if b else None for b in batched]
        _, od = batch_jaxpr(jaxpr, size, c_in + k_in + x_in)
        new = [b or d is not None for b, d in zip(batched, od[:n_k])]
        if new == batched:
            break
        batched = new
    k_in = [0 if b else None for b in batched]
    _, od = batch_jaxpr(jaxpr, size, c_in + k_in + x_in)
    y_out = [0 if d is not None else None for d in od[n_k:]]
    body, _ = batch_jaxpr(jaxpr, size, c_in + k_in + x_in, out_dims=k_in + y_out)
    j, extra = _parts(body)
    carry = [bu.bdim_to_front(c, d, size) if b else c for c, d, b in zip(carry, kdims, batched)]
    outs = scan_p.bind(*extra, *consts, *carry, *xs, jaxpr=_intern(j),
                       num_consts=len(extra) + n_c, num_carry=n_k, length=length,
                       reverse=reverse, unroll=unroll)
    return outs, k_in + [1 if d is not None else None for d in y_out]


scan_p.def_jvp(_scan_jvp)
scan_p.def_transpose(_scan_transpose)
scan_p.def_batch(_scan_batch)
