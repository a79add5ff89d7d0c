"""Calling Python from compiled code: ``pure_callback`` and the debugging callbacks.

One primitive, ``python_callback``, runs a Python function on the host in the middle of a
computation. Eagerly it simply calls the function. Lowered, it is a custom call to the host
callback handler that jaxlib's PJRT clients provide (``xla_ffi_python_cpu_callback``, or the
GPU one); the Python function is handed to the compiler with the executable
(``LoweringRuleContext.add_host_callback``), and XLA passes it NumPy arrays and takes NumPy
arrays back.

* ``pure_callback(fn, result_shape_dtypes, *args)``: a function of its arguments whose result
  shapes and dtypes are declared; XLA may drop it when its results are unused.
* ``debug_callback(fn, *args)``: called for its effect (no results); never dropped.
  ``funcgrad.debug.print`` is built on it.

Under ``vmap`` the function is called once per batch element on the host (``"sequential"``)
unless ``vmap_method`` says it takes the batched arrays (``"expand_dims"``: unbatched
arguments get a leading axis of 1; ``"broadcast_all"``: they are broadcast to the batch).
Under ``grad``/``jvp`` a debug callback sees the primal values; a pure callback has no
derivative (wrap it in ``custom_jvp``).

Example:
    >>> f = funcgrad.jit(lambda x: lax.pure_callback(np.sin, x, x) * 2)
    >>> f(jnp.arange(3.0))
    Array([0.       , 1.682942 , 1.818594...], dtype=float32)
"""
import threading

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad import tree_util
from funcgrad.core import dtypes, interpreters
from funcgrad.core.ad_util import Zero, is_zero, tangent_aval
from funcgrad.core.avals import ShapedArray
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of
from funcgrad.lax import _hlo

python_callback_p = Primitive("python_callback", multiple_results=True)
# a debug callback is kept by dead-code elimination; a pure one is dropped when unused
python_callback_p.effectful = lambda params: params["host_fn"].effect

VMAP_METHODS = ("sequential", "expand_dims", "broadcast_all")

# Exceptions raised by callbacks inside compiled code: XLA reports them as a runtime error
# whose text holds the traceback; the dispatchers re-raise the original (reraise_host_error).
_host_errors = []
_host_errors_lock = threading.Lock()


def reraise_host_error(runtime_error):
    """Raise the exception a host callback raised, if ``runtime_error`` (from executing a
    compiled program) reports one; otherwise return. The original is chained to it.

    Example:
        >>> from funcgrad.lax import callbacks
        >>> callbacks.reraise_host_error(RuntimeError("no callback failed"))   # returns: nothing to re-raise
    """
    with _host_errors_lock:
        if not _host_errors:
            return
        pending = _host_errors[:]
        _host_errors.clear()
    text = str(runtime_error)
    for err in reversed(pending):
        if f"{type(err).__name__}: {err}" in text:
            raise err from runtime_error


class _HostFunction:
    """A flat-argument Python function with what the primitive needs to know about it. Equal
    only to itself, so each traced call site keeps its own function."""

    __slots__ = ("fn", "name", "result_avals", "effect")

    def __init__(self, fn, name, result_avals, effect):
        self.fn, self.name = fn, name
        self.result_avals, self.effect = tuple(result_avals), effect

    def __call__(self, *arrays):
        """Run on NumPy arrays; returns the results as NumPy arrays of the declared avals."""
        try:
            outs = self.fn(*arrays)
        except Exception as err:
            with _host_errors_lock:
                del _host_errors[:-7]           # keep only the latest few
                _host_errors.append(err)
            raise
        if self.effect:
            return ()
        outs = list(outs)
        if len(outs) != len(self.result_avals):
            raise TypeError(f"{self.name}: the callback returned {len(outs)} values, "
                            f"result_shape_dtypes declares {len(self.result_avals)}")
        checked = []
        for i, (out, aval) in enumerate(zip(outs, self.result_avals)):
            arr = np.asarray(out)
            if arr.shape != aval.shape:
                raise TypeError(f"{self.name}: result {i} of the callback has shape "
                                f"{arr.shape}, result_shape_dtypes declares {aval.str_short()}")
            checked.append(np.ascontiguousarray(arr, dtype=aval.dtype))
        return tuple(checked)

    def __repr__(self):
        return self.name


@python_callback_p.def_abstract_eval
def _abstract(*avals, host_fn, vmap_method):
    return list(host_fn.result_avals)


@python_callback_p.def_impl
def _impl(*args, host_fn, vmap_method):
    outs = host_fn(*[np.asarray(a) for a in args])
    return [interpreters.to_device(o) for o in outs]


def _lowering(ctx, *operands, host_fn, vmap_method):
    index = ctx.add_host_callback(host_fn)
    target = "xla_ffi_python_cpu_callback" if ctx.platform == "cpu" else \
        "xla_ffi_python_gpu_callback"
    result_types = [_hlo.ir_type(a) for a in ctx.avals_out]
    op = stablehlo.CustomCallOp(
        result_types, list(operands), target,
        has_side_effect=ir.BoolAttr.get(bool(host_fn.effect)),
        backend_config=ir.DictAttr.get(
            {"index": ir.IntegerAttr.get(ir.IntegerType.get_unsigned(64), index)}),
        api_version=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), 4))
    return list(op.results)


python_callback_p.def_lowering(_lowering)


def _batch(args, dims, host_fn, vmap_method):
    size = next(aval_of(a).shape[d] for a, d in zip(args, dims) if d is not None)
    from funcgrad.lax import shapes
    front = []
    for a, d in zip(args, dims):
        if d is None:
            if vmap_method == "broadcast_all":
                av = aval_of(a)
                a = shapes.broadcast_in_dim(a, (size,) + av.shape,
                                            tuple(range(1, av.ndim + 1)))
            elif vmap_method == "expand_dims":
                a = shapes.expand_dims(a, (0,))
        elif d != 0:
            nd = aval_of(a).ndim
            a = shapes.transpose(a, (d,) + tuple(i for i in range(nd) if i != d))
        front.append(a)
    batched = [d is not None or vmap_method == "broadcast_all" for d in dims]
    out_avals = [ShapedArray((size,) + a.shape, a.dtype) for a in host_fn.result_avals]
    if vmap_method == "sequential":
        inner = host_fn

        def run(*arrays):
            per = [[inner(*[x[i] if b else x for x, b in zip(arrays, batched)])]
                   for i in range(size)]
            if inner.effect:
                return ()
            return tuple(np.stack([p[0][k] for p in per]) for k in range(len(out_avals)))
        fn = _HostFunction(run, host_fn.name, out_avals, host_fn.effect)
    else:
        fn = _HostFunction(host_fn.fn, host_fn.name, out_avals, host_fn.effect)
    outs = python_callback_p.bind(*front, host_fn=fn, vmap_method=vmap_method)
    return outs, [0] * len(outs)


python_callback_p.def_batch(_batch)


def _jvp(primals, tangents, host_fn, vmap_method):
    if not host_fn.effect:
        if any(not is_zero(t) for t in tangents):
            raise TypeError(f"{host_fn.name}: pure_callback has no derivative; define one "
                            f"with funcgrad.custom_jvp around the callback")
    outs = python_callback_p.bind(*primals, host_fn=host_fn, vmap_method=vmap_method)
    return outs, [Zero(tangent_aval(aval_of(o))) for o in outs]


python_callback_p.def_jvp(_jvp)


def _flat_host_fn(fn, args, kwargs, name, result_avals, effect):
    """A function of the flattened argument leaves calling ``fn(*args, **kwargs)`` rebuilt."""
    leaves, in_tree = tree_util.tree_flatten((args, kwargs))

    def flat(*arrays):
        a, kw = in_tree.unflatten(list(arrays))
        out = fn(*a, **kw)
        return () if effect else tree_util.tree_leaves(out)
    return leaves, _HostFunction(flat, name, result_avals, effect)


def _check_vmap_method(where, vmap_method):
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"{where}: vmap_method must be one of {VMAP_METHODS}, got "
                         f"{vmap_method!r}")


def pure_callback(callback, result_shape_dtypes, *args, vmap_method="sequential", **kwargs):
    """Call the Python function ``callback(*args, **kwargs)`` on the host, also under ``jit``:
    it gets NumPy arrays and must return values of the shapes and dtypes that
    ``result_shape_dtypes`` (a pytree of anything with ``shape`` and ``dtype``, e.g.
    ``funcgrad.ShapeDtypeStruct`` or an array) declares. It should be a pure function: XLA may
    skip a call whose results are unused.

    Example:
        >>> f = funcgrad.jit(lambda x: lax.pure_callback(np.sin, x, x))
        >>> f(jnp.zeros(2))
        Array([0., 0.], dtype=float32)
    """
    _check_vmap_method("pure_callback", vmap_method)
    spec_leaves, out_tree = tree_util.tree_flatten(result_shape_dtypes)
    result_avals = []
    for s in spec_leaves:
        if not (hasattr(s, "shape") and hasattr(s, "dtype")):
            raise TypeError(f"pure_callback: result_shape_dtypes leaves need shape and dtype, "
                            f"got {type(s).__name__}")
        result_avals.append(ShapedArray(s.shape, dtypes.canonicalize(s.dtype)))
    name = f"pure_callback({getattr(callback, '__name__', type(callback).__name__)})"
    leaves, host_fn = _flat_host_fn(callback, args, kwargs, name, result_avals, False)
    outs = python_callback_p.bind(*[_as_operand(x) for x in leaves], host_fn=host_fn,
                                  vmap_method=vmap_method)
    return out_tree.unflatten(outs)


def debug_callback(callback, *args, **kwargs):
    """Call ``callback(*args, **kwargs)`` on the host for its effect (printing, logging), also
    under ``jit``, ``grad`` (with the primal values) and ``vmap`` (once per batch element). It
    returns nothing; the call is never dropped as unused, but calls of one compiled program
    may run in any order.

    Example:
        >>> y = funcgrad.jit(lambda x: lax.debug_callback(print, x) or x + 1)(jnp.ones(2))
        [1. 1.]
        >>> y
        Array([2., 2.], dtype=float32)
    """
    name = f"debug_callback({getattr(callback, '__name__', type(callback).__name__)})"
    leaves, host_fn = _flat_host_fn(callback, args, kwargs, name, (), True)
    python_callback_p.bind(*[_as_operand(x) for x in leaves], host_fn=host_fn,
                           vmap_method="sequential")


def _as_operand(x):
    if isinstance(x, interpreters.Value):
        return x
    return interpreters.to_device(x)
