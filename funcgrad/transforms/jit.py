"""``jit``, the user API: compile a function with XLA (``funcgrad.lowering.dispatch`` traces,
caches and calls it); ``make_jaxpr`` to look at what it stages; ``disable_jit`` to debug.

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> funcgrad.jit(lambda x: jnp.sum(x * x))(jnp.arange(3.0))
    Array(5., dtype=float32)
"""
import contextlib
import functools
import types

from funcgrad import tree_util
from funcgrad.core.dce import dce_closed_jaxpr
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.lowering import eager
from funcgrad.lowering.dispatch import JitFunction, clear_jit_caches


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(),
        in_shardings=None, out_shardings=None):
    """Compile ``fun`` with XLA: traced once per input signature (pytree structure, shapes,
    dtypes, static arguments, device), then cached.

    With ``in_shardings``/``out_shardings`` (``funcgrad.sharding.NamedSharding``s: one for all,
    or a tuple with one pytree prefix per positional argument / output, None taking an
    argument's own NamedSharding or replicating it, and letting XLA choose an output's) the
    program is compiled for the mesh's devices by XLA's SPMD partitioner and returns sharded
    Arrays (docs/parallel.md, "jit with shardings"). Without them, a call whose argument leaves
    (module parameters included) are Arrays placed by a ``NamedSharding`` is compiled the same
    way, each leaf keeping its sharding ("jit of sharded arrays"): both are one call path.

    Example:
        >>> @funcgrad.jit
        ... def f(x):
        ...     return jnp.sin(x) * 2.0
        >>> f(jnp.ones(3))
        Array([1.68294..., 1.68294..., 1.68294...], dtype=float32)
    """
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 in_shardings=in_shardings, out_shardings=out_shardings)
    if _is_callable_pytree(fun):
        return _jit_callable_pytree(fun, static_argnums, static_argnames, donate_argnums,
                                    in_shardings, out_shardings)
    return JitFunction(fun, static_argnums, static_argnames, donate_argnums,
                       in_shardings=in_shardings, out_shardings=out_shardings)


def _is_callable_pytree(fun):
    """A callable object that is a pytree node (an ``nn.Module``): its arrays must be read at
    each call, not baked into the trace as constants."""
    return not isinstance(fun, (types.FunctionType, types.MethodType, functools.partial)) \
        and not tree_util.treedef_is_leaf(tree_util.tree_structure(fun))


def _jit_callable_pytree(obj, static_argnums, static_argnames, donate_argnums,
                         in_shardings=None, out_shardings=None):
    """``jit(model)``: the object travels as the first (pytree) argument of a jitted call, so
    its current parameters are used and the state it writes is written back (its leaves keep
    their own shardings when ``in_shardings`` is a tuple)."""
    shift = lambda nums: tuple(n + 1 for n in ((nums,) if isinstance(nums, int) else nums))

    def call(obj_, *args, **kwargs):
        return obj_(*args, **kwargs)
    call.__name__ = type(obj).__name__
    if isinstance(in_shardings, (tuple, list)):
        in_shardings = (None,) + tuple(in_shardings)
    jitted = JitFunction(call, shift(static_argnums), static_argnames, shift(donate_argnums),
                         in_shardings=in_shardings, out_shardings=out_shardings)
    bound = functools.partial(jitted, obj)
    bound.lower = functools.partial(jitted.lower, obj)
    return bound


def clear_caches():
    """Forget every trace and compiled executable that ``jit`` and eager operations cached, so
    the next call traces and compiles again (e.g. to time compilation).

    Example:
        >>> f = funcgrad.jit(lambda x: x + 1.0)
        >>> _ = f(1.0); funcgrad.clear_caches(); _ = f(1.0)
        >>> f.trace_count
        2
    """
    clear_jit_caches()
    eager.clear_caches()


@contextlib.contextmanager
def disable_jit(disable=True):
    """Inside the block, jitted functions run as plain Python, one eager operation at a time:
    values are concrete, so ``print``, ``float(x)``, Python branches on values and ``pdb``
    work where a trace would not. Nothing is traced or compiled (the setting is process-wide).

    Example:
        >>> f = funcgrad.jit(lambda x: x * 2 if float(x.sum()) > 0 else -x)
        >>> with funcgrad.disable_jit():
        ...     f(jnp.ones(3))
        Array([2., 2., 2.], dtype=float32)
    """
    if not disable:
        yield
        return
    saved = JitFunction.__call__
    JitFunction.__call__ = JitFunction.call_unjitted
    try:
        yield
    finally:
        JitFunction.__call__ = saved


def make_jaxpr(fun, static_argnums=()):
    """A function returning the ClosedJaxpr that ``fun`` stages for given arguments.

    Example:
        >>> print(funcgrad.make_jaxpr(lambda x: jnp.sin(x) + 1.0)(jnp.float32(1.0)))
        { lambda ; a:f32[]. let
            b:f32[] = sin a
            c:f32[] = add b 1.0
          in (c,) }
        >>> print(funcgrad.make_jaxpr(lambda x: jnp.sin(x) + 1.0)(1.0))   # a Python float is weak
        { lambda ; a:f32[]{weak}. let
            b:f32[]{weak} = sin a
            c:f32[]{weak} = add b 1.0
          in (c,) }
    """
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)

    @functools.wraps(fun)
    def make(*args, **kwargs):
        static = {i: a for i, a in enumerate(args) if i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static_argnums]
        leaves, treedef = tree_util.tree_flatten((dyn, kwargs))
        from funcgrad.transforms.eval_shape import abstractify
        avals = [abstractify(x) for x in leaves]

        def flat_fun(*flat):
            d, kw = treedef.unflatten(flat)
            it = iter(d)
            full = [static[i] if i in static else next(it) for i in range(len(args))]
            return tree_util.tree_leaves(fun(*full, **kw))

        closed, _ = trace_to_jaxpr(flat_fun, avals, debug_name=getattr(fun, "__name__", None))
        closed, _ = dce_closed_jaxpr(closed)
        return closed
    return make
