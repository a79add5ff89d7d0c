"""``export(f, platforms=None, vjp_order=0, constraints=())(*args)``: trace and lower a function
(or an ``nn.Module``, or a jitted function) to an ``Exported``.

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> from funcgrad import export
    >>> exp = export.export(funcgrad.jit(lambda x: jnp.tanh(x) * 2))(jnp.zeros(3))
    >>> exp.call(jnp.ones(3))
    Array([1.52..., 1.52..., 1.52...], dtype=float32)
"""
import numpy as np
from jaxlib import _jax
from jaxlib.mlir.dialects import stablehlo as hlo

from funcgrad import tree_util
from funcgrad.core import dtypes, mutable_state
from funcgrad.core.avals import ShapedArray
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of
from funcgrad.export import symbolic
from funcgrad.export.exported import MAX_VJP_ORDER, Exported
from funcgrad.lowering import backend, mlir, platforms as _platforms
from funcgrad.lowering.dispatch import JitFunction, _callable_name
from funcgrad.transforms.eval_shape import ShapeDtypeStruct


def export(fun, platforms=None, *, vjp_order=0, constraints=()):
    """``export(fun)(*args, **kwargs)`` -> ``Exported``: ``fun`` traced and lowered to
    StableHLO for each of ``platforms`` (default: the default backend's), at the shapes and
    dtypes of ``args`` (arrays or ``ShapeDtypeStruct``\\ s, whose shapes may be symbolic:
    ``symbolic_shape("b, 784")``).

    ``fun`` may be a function, a ``jit``-ted function, or a module (any callable pytree, such
    as an ``nn.Module``): a module's arrays are stored in the artifact as its weights.
    ``vjp_order=1`` exports the backward pass too, so ``grad`` works on the loaded function
    (``vjp_order=2``: also the backward pass of the backward pass, for second derivatives).
    ``constraints``: conditions on the symbols checked at every call (``"b >= 2"``,
    ``"b % 8 == 0"``); every symbol must be at least 1 in any case. Lowering for a platform
    needs no device of it (``platforms=("cpu", "cuda")`` works on a CPU-only machine).

    Example:
        >>> from funcgrad import export
        >>> model = funcgrad.nn.Linear(3, 2)
        >>> x = funcgrad.ShapeDtypeStruct(export.symbolic_shape("b, 3"), jnp.float32)
        >>> exp = export.export(model, vjp_order=1)(x)
        >>> exp.weight_names, exp.out_avals
        (('weight', 'bias'), (ShapeDtypeStruct(shape=(b, 2), dtype=float32),))
        >>> bool(jnp.allclose(exp.call(jnp.ones((5, 3))), model(jnp.ones((5, 3)))))
        True
    """
    if not callable(fun):
        raise TypeError(f"export: expected a function or a module, got {type(fun).__name__}")
    if not isinstance(vjp_order, int) or not 0 <= vjp_order <= MAX_VJP_ORDER:
        raise ValueError(f"export: vjp_order must be an int from 0 to {MAX_VJP_ORDER}, got "
                         f"{vjp_order!r}")
    name = _callable_name(fun)
    chosen = None if platforms is None else _platform_list(platforms)

    def exporter(*args, **kwargs):
        return _export(fun, name, args, kwargs, chosen or _platform_list(None), vjp_order,
                       tuple(constraints))
    exporter.__name__ = exporter.__qualname__ = f"export({name})"
    return exporter


def _platform_list(platforms):
    if platforms is None:
        return (backend.default_backend(),)
    if isinstance(platforms, str):
        platforms = (platforms,)
    names = []
    for p in platforms:
        n = _platforms.get(p).name       # ValueError naming the known platforms
        if n not in names:
            names.append(n)
    if not names:
        raise ValueError("export: platforms must name at least one platform")
    return tuple(names)


def _split_static(fun, args, kwargs):
    """(dynamic args, dynamic kwargs, rebuild): the static arguments of a jitted ``fun``
    (``static_argnums`` / ``static_argnames``) are fixed at export time and left out of the
    exported signature; ``rebuild(args, kwargs)`` puts them back."""
    nums = getattr(fun, "_static_argnums", ()) if isinstance(fun, JitFunction) else ()
    names = getattr(fun, "_static_argnames", ()) if isinstance(fun, JitFunction) else ()
    static_pos = {i: a for i, a in enumerate(args) if i in nums}
    static_kw = {k: v for k, v in kwargs.items() if k in names}
    dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in static_kw}

    def rebuild(a, kw):
        it = iter(a)
        full = [static_pos[i] if i in static_pos else next(it)
                for i in range(len(a) + len(static_pos))]
        return full, dict(kw, **static_kw)
    return dyn_args, dyn_kwargs, rebuild


def _spec_of(x, i):
    """(shape, dtype) of argument leaf ``x``: a ShapeDtypeStruct (possibly symbolic) or a
    value."""
    if isinstance(x, ShapeDtypeStruct) or (hasattr(x, "shape") and hasattr(x, "dtype")
                                           and not hasattr(x, "__array__")
                                           and not hasattr(x, "aval")):
        return tuple(x.shape), dtypes.canonicalize(x.dtype)
    try:
        a = aval_of(x)
    except TypeError as e:
        raise TypeError(f"export: argument leaf {i}: {e}; pass arrays or "
                        f"ShapeDtypeStructs") from None
    return a.shape, a.dtype


def _export(fun, name, args, kwargs, platforms, vjp_order, constraints):
    # a module (a callable pytree with arrays): its arrays become stored weights
    w_paths, module_def = tree_util.tree_flatten_with_path(fun)
    is_module = not tree_util.treedef_is_leaf(module_def)
    weight_names = [tree_util.keystr(p).lstrip(".") or f"w{i}"
                    for i, (p, _) in enumerate(w_paths)] if is_module else []
    weights = [np.asarray(v) for _, v in w_paths] if is_module else []
    w_specs = [(w.shape, dtypes.canonicalize(w.dtype)) for w in weights]

    args, kwargs, rebuild = _split_static(fun, args, kwargs)
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))
    a_specs = [_spec_of(x, i) for i, x in enumerate(leaves)]
    out_tree_box = []

    def flat_fun(*flat):
        n = len(w_specs)
        f = module_def.unflatten(flat[:n]) if is_module else fun
        a, kw = rebuild(*in_tree.unflatten(flat[n:]))
        with mutable_state.collecting(mutable_state.StateLog()):   # state writes are dropped
            out = f(*a, **kw)
        out_leaves, out_tree = tree_util.tree_flatten(out)
        for i, leaf in enumerate(out_leaves):
            try:
                aval_of(leaf)
            except TypeError:
                raise TypeError(f"export({name}): output leaf {i} is a {type(leaf).__name__}; "
                                f"exported functions return arrays (in tuples, lists, dicts)"
                                ) from None
        out_tree_box[:] = [out_tree]
        return out_leaves

    constraint_objs = [symbolic.Constraint(c) for c in constraints]
    lowered = _lower(flat_fun, name, w_specs + a_specs, platforms, constraint_objs)
    consts, modules, out_specs, symbols, version = lowered
    vjp = None
    if vjp_order:
        vjp = _export_vjp(flat_fun, name, w_specs, a_specs, out_specs, platforms,
                          constraint_objs, vjp_order)
    const_names = [f"const.{i}" for i in range(len(consts))]
    in_avals = [ShapeDtypeStruct(s, d) for s, d in a_specs]
    exp = Exported(fun_name=name, in_tree=in_tree, out_tree=out_tree_box[0],
                   in_avals=in_avals,
                   out_avals=[ShapeDtypeStruct(s, d) for s, d in out_specs],
                   platforms=platforms, modules=modules,
                   weight_names=const_names + weight_names,
                   weights=[np.asarray(c) for c in consts] + weights,
                   symbols=symbols, constraints=[c.text for c in constraint_objs], vjp=vjp,
                   stablehlo_version=version)
    return exp


def _export_vjp(flat_fun, name, w_specs, a_specs, out_specs, platforms, constraints, order):
    """The backward pass as an ``Exported`` of flat arrays: (weights, args, output cotangents
    of the floating outputs) -> cotangents of the floating args; with ``order`` > 1 its own
    backward pass is exported too (for derivatives of derivatives)."""
    from funcgrad.transforms.ad import vjp
    n_w, n_a = len(w_specs), len(a_specs)
    diff_in = [i for i, (_, d) in enumerate(a_specs) if dtypes.is_inexact(d)]
    diff_out = [j for j, (_, d) in enumerate(out_specs) if dtypes.is_inexact(d)]
    ct_specs = [out_specs[j] for j in diff_out]

    def backward(*flat):
        w, a, cts = flat[:n_w], list(flat[n_w:n_w + n_a]), list(flat[n_w + n_a:])

        def primal(*xs):
            full = list(a)
            for i, x in zip(diff_in, xs):
                full[i] = x
            outs = flat_fun(*w, *full)
            return [outs[j] for j in diff_out]
        _, pullback = vjp(primal, *[a[i] for i in diff_in])
        return list(pullback(cts))

    specs = w_specs + a_specs + ct_specs
    consts, modules, outs, symbols, version = _lower(backward, f"{name}_vjp", specs, platforms,
                                                     constraints)
    tree = tree_util.tree_structure(((0,) * len(specs), {}))
    higher = None
    if order > 1:
        higher = _export_vjp(backward, f"{name}_vjp", [], specs, outs, platforms, constraints,
                             order - 1)
    return Exported(fun_name=f"{name}_vjp", in_tree=tree, vjp=higher,
                    out_tree=tree_util.tree_structure([0] * len(outs)),
                    in_avals=[ShapeDtypeStruct(s, d) for s, d in specs],
                    out_avals=[ShapeDtypeStruct(s, d) for s, d in outs], platforms=platforms,
                    modules=modules, weight_names=[f"const.{i}" for i in range(len(consts))],
                    weights=[np.asarray(c) for c in consts], symbols=symbols,
                    constraints=[c.text for c in constraints], stablehlo_version=version)


def _trace(flat_fun, name, specs, env):
    avals = [ShapedArray(symbolic.concrete_shape(s, env), d) for s, d in specs]
    closed, _ = trace_to_jaxpr(flat_fun, avals, debug_name=name)
    closed, _ = dce_closed_jaxpr(closed)
    return closed


def _lower(flat_fun, name, specs, platforms, constraints):
    """Trace and lower ``flat_fun`` at ``specs``; with symbolic dimensions, twice (at two sets
    of primes) to check that the program depends on the symbols only through its shapes.

    Returns (consts, {platform: portable artifact}, output specs, {symbol: prime}, version).
    """
    names = symbolic.symbols_of([s for s, _ in specs])
    for c in constraints:
        unknown = [s for s in c.symbols if s not in names]
        if unknown:
            raise ValueError(f"export({name}): constraint {c} names {unknown[0]!r}, which no "
                             f"argument shape uses (symbols: {names})")
    env_a = symbolic.sentinel_env(names, "A")
    closed = _trace(flat_fun, name, specs, env_a)
    version = hlo.get_version_from_compatibility_requirement(
        hlo.StablehloCompatibilityRequirement.WEEK_4)
    modules = {p: _portable(closed, name, p, version) for p in platforms}
    out_shapes = [a.shape for a in closed.out_avals]
    if names:
        env_b = symbolic.sentinel_env(names, "B")
        closed_b = _trace(flat_fun, name, specs, env_b)
        out_shapes = _symbolic_out_shapes(name, out_shapes,
                                          [a.shape for a in closed_b.out_avals], env_a, env_b)
        if len(closed_b.consts) != len(closed.consts):
            raise _not_polymorphic(name, names, "the two traces close over different constants")
        for p in platforms:
            from funcgrad.export.exported import _module_text
            text_a = _module_text(modules[p])
            text_b = _module_text(_portable(closed_b, name, p, version))
            diff = symbolic.compare_templates(symbolic.make_template(text_a, env_a),
                                              symbolic.make_template(text_b, env_b))
            if diff is not None:
                raise _not_polymorphic(name, names, f"lowered for {p}, the program differs "
                                       f"beyond its shapes:\n    {diff}")
    consts = [np.asarray(c) for c in closed.consts]
    out_specs = list(zip(out_shapes, [a.dtype for a in closed.out_avals]))
    return consts, modules, out_specs, env_a, version


def _not_polymorphic(name, names, why):
    return ValueError(
        f"export({name}): the function cannot be exported with symbolic dimensions "
        f"{', '.join(names)}: {why}. Symbolic export supports programs whose sizes are "
        f"products of the symbols and integers (and element counts used as numbers, as in a "
        f"mean); sizes like b + 1 or code that branches on a size are not supported: export "
        f"at concrete shapes instead")


def _symbolic_out_shapes(name, shapes_a, shapes_b, env_a, env_b):
    out = []
    for sa, sb in zip(shapes_a, shapes_b):
        dims = []
        for da, db in zip(sa, sb):
            if da == db:
                dims.append(da)
                continue
            found = symbolic._factor(da, env_a)
            dim = symbolic.Dim(found[0], dict(found[1])) if found else None
            if dim is None or dim.evaluate(env_b) != db:
                raise _not_polymorphic(name, list(env_a), f"an output dimension is {da} at "
                                       f"{env_a} and {db} at {env_b}")
            dims.append(dim)
        out.append(tuple(dims))
    return out


def _portable(closed, name, platform, version):
    """``closed`` lowered for ``platform`` (consts as leading arguments) as a StableHLO
    portable artifact; lowering needs no device of the platform."""
    try:
        module, ctx = mlir.lower_closed_jaxpr(closed, name=name, platform=platform)
    except mlir.LoweringError as e:
        if "host callback" in str(e):
            raise ValueError(f"export({name}): the function uses a host callback (debug.print, "
                             f"debug.callback, pure_callback), whose Python code cannot be "
                             f"stored in an artifact") from None
        raise ValueError(f"export({name}): lowering for platform {platform!r} failed: "
                         f"{e}") from e
    with ctx:
        return _jax.mlir.serialize_portable_artifact(str(module), version, False)
