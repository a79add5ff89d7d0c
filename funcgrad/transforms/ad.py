"""Automatic differentiation, the user API: ``jvp``, ``linearize``, ``vjp``, ``grad``,
``value_and_grad``, ``jacfwd``, ``jacrev``, ``hessian``.

Each is a thin layer over the machinery of ``funcgrad.core.ad`` (the JVP interpreter,
``linearize_flat``, ``backward_pass``): flatten pytrees, check inputs, call the flat transform,
unflatten. Reverse mode is forward mode staged into a linear Jaxpr (``linearize``), then
transposed.

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> funcgrad.grad(lambda x: jnp.sum(x ** 2))(jnp.arange(3.0))
    Array([0., 2., 4.], dtype=float32)
"""
import functools

import numpy as np

from funcgrad import tree_util
from funcgrad.core import dtypes, interpreters
from funcgrad.core.ad import JVPInterpreter, linearize_flat, strip_tracers
from funcgrad.core.ad_util import Zero, instantiate, tangent_aval
from funcgrad.core.interpreters import Tracer
from funcgrad.core.values import aval_of, is_arraylike
from funcgrad.transforms import backward_program


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


def jvp(fun, primals, tangents, has_aux=False):
    """Forward-mode derivative: ``(fun(*primals), d fun(primals) . tangents)``.

    ``primals`` and ``tangents`` are tuples (or lists) of pytrees of the same structure.

    Example:
        >>> funcgrad.jvp(jnp.sin, (0.5,), (1.0,))           # (sin(0.5), cos(0.5))
        (Array(0.479..., dtype=float32, weak_type=True), Array(0.877..., dtype=float32))
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
        aux = strip_tracers(interp, flat_fun.aux)
        return primal_out, tangent_out, aux
    return primal_out, tangent_out


def _split_aux(fname, out):
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"{fname}(..., has_aux=True): the function must return a pair "
                        f"(output, aux), got {type(out).__name__}")
    return out[0], out[1]


def linearize(fun, *primals):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the staged linear map.

    The primal computation runs once now; ``f_jvp`` replays only the tangent computation.

    Example:
        >>> y, f_jvp = funcgrad.linearize(jnp.sin, 0.5)
        >>> f_jvp(1.0)          # cos(0.5)
        Array(0.877..., dtype=float32)
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


# --- vjp, grad ---------------------------------------------------------------------------------

def vjp(fun, *primals, has_aux=False):
    """``(fun(*primals), f_vjp)`` where ``f_vjp(cotangent)`` returns one cotangent per primal.

    Example:
        >>> y, f_vjp = funcgrad.vjp(jnp.sin, 0.5)
        >>> f_vjp(1.0)          # (cos(0.5),)
        (Array(0.877..., dtype=float32),)
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
        in_cts = backward_program.transpose(lin, cts)
        res = [_on_device(instantiate(c) if type(c) is Zero else _as_dtype(c, tangent_aval(a)))
               for c, a in zip(in_cts, in_avals)]
        return tree_util.tree_unflatten(p_tree, res)

    primal_out = tree_util.tree_unflatten(out_tree, primal_outs)
    del parent
    if has_aux:
        return primal_out, f_vjp, lin.primal_only(flat_fun.aux)
    return primal_out, f_vjp


_units = {}     # (dtype, device) -> the device scalar 1 (grad's output cotangent)


def _unit_cotangent(out, dtype):
    """The cotangent 1 of a scalar output: a cached device scalar when ``out`` is an eager
    single-device Array (no host-to-device copy per ``grad`` call), else a NumPy scalar."""
    from funcgrad.lowering.array import Array, device_put
    if type(out) is not Array or not interpreters.is_eager():
        return np.ones((), dtype)
    key = (dtype, out.device)
    one = _units.get(key)
    if one is None:
        one = _units[key] = device_put(np.ones((), dtype), out.device)
    return one


def _on_device(x):
    """Host values (a cotangent passed straight through) become device arrays when running
    eagerly, so users always get ``funcgrad.Array`` results (float0 stays on the host)."""
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype != dtypes.float0 and \
            interpreters.is_eager():
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


def _check_inputs(fname, fun, args, nums, holomorphic, allow_int, complex_ok=False):
    """``complex_ok``: reverse mode of a real-valued function accepts complex inputs (JAX's
    convention: the gradient is the conjugate of df/dz-bar, see docs/autodiff.md)."""
    for i in nums:
        for leaf in tree_util.tree_leaves(args[i]):
            _check_leaf(fname, leaf, "differentiated arguments")
            dt = aval_of(leaf).dtype
            if holomorphic:
                if not dtypes.is_complex(dt):
                    raise TypeError(f"{fname}(..., holomorphic=True) requires complex inputs, "
                                    f"but argument {i}{_arg_name(fun, i)} has dtype {dt.name}")
            elif dtypes.is_complex(dt):
                if complex_ok:
                    continue
                raise TypeError(f"{fname} requires real-valued inputs, but argument "
                                f"{i}{_arg_name(fun, i)} is complex ({dt.name}); use "
                                f"holomorphic=True for holomorphic functions, or reverse mode "
                                f"(grad, jacrev, vjp) for a real-valued function of complex "
                                f"inputs")
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
        _check_inputs(fname, fun, args, nums, holomorphic, allow_int, complex_ok=True)
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
        one = _unit_cotangent(out_leaves[0], oa.dtype)
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
        Array(0.877..., dtype=float32)
        >>> funcgrad.grad(lambda p: jnp.sum(p["w"] ** 2))({"w": jnp.ones(2)})
        {'w': Array([2., 2.], dtype=float32)}
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
        _check_inputs(fname, fun, args, nums, holomorphic, allow_int, complex_ok=not forward)
        f_partial = _partial_args(fun, args, kwargs, nums)
        in_leaves, in_tree = tree_util.tree_flatten(tuple(args[n] for n in nums))
        flat_fun = _FlatFun(fname, f_partial, in_tree, has_aux)

        outs, lin = linearize_flat(flat_fun, in_leaves, fname)
        out_tree = flat_fun.out_tree
        in_avals = [aval_of(x) for x in in_leaves]
        out_avals = [aval_of(o) for o in outs]
        if not holomorphic and any(dtypes.is_complex(a.dtype) for a in in_avals):
            bad = [a.str_short() for a in out_avals if dtypes.is_complex(a.dtype)]
            if bad:
                raise TypeError(f"{fname}: with complex inputs and holomorphic=False the "
                                f"outputs must be real, got {', '.join(bad)}; pass "
                                f"holomorphic=True for a holomorphic function, or use vjp "
                                f"directly for a non-holomorphic one")
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
        >>> funcgrad.hessian(lambda x: jnp.sum(x ** 3))(jnp.array([1.0, 2.0]))    # diag(6 x)
        Array([[ 6.,  0.],
               [ 0., 12.]], dtype=float32)
    """
    return jacfwd(jacrev(fun, argnums, has_aux, holomorphic), argnums, has_aux, holomorphic)

