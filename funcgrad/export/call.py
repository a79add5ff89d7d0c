"""Calling an exported module from funcgrad: the ``call_exported`` primitive.

One equation stands for a call of an exported program; its lowering inlines the stored
StableHLO module (at the call's concrete sizes) into the module being built and calls its
``main``, so an exported function runs eagerly, inside ``jit`` and inside other exported
functions alike. Under ``vmap`` the call runs once per batch member (a loop of calls,
``lax.map``, whose results are stacked); differentiation goes through the exported backward pass
(``export(..., vjp_order=1)``, or 2 for second derivatives), wrapped around the call as a
``custom_vjp`` by ``Exported``.

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> from funcgrad import export
    >>> exp = export.export(jnp.sin)(funcgrad.ShapeDtypeStruct((3,), jnp.float32))
    >>> funcgrad.make_jaxpr(exp.call)(jnp.zeros(3))
    { lambda ; a:f32[3]. let
        b:f32[3] = jit[jaxpr=
            { lambda ; a:f32[3]. let
                b:f32[3] = call_exported[target=Exported(sin: (float32[3]) -> (float32[3]), ...) sizes=()] a
              in (b,) } name='sin' donated=(False,)] a
      in (b,) }
"""
import itertools
import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func as func_dialect

from funcgrad import lax
from funcgrad.core import batching_util
from funcgrad.core.primitive import Primitive
from funcgrad.lax import _hlo, linalg
from funcgrad.lowering.mlir import LoweringError

call_exported_p = Primitive("call_exported", multiple_results=True)


def _abstract_eval(*avals, target, sizes):
    return target.out_avals_at(dict(sizes))


call_exported_p.def_abstract_eval(_abstract_eval)

_uid = itertools.count()
_FUNC_DEF = re.compile(r"func\.func\s+(?:public\s+|private\s+)?@([\w$.]+)")
_SYMBOL_USE = re.compile(r"@([\w$.]+)")


def inline_module(ctx, text, args, result_types):
    """Add the functions of module ``text`` to the module being lowered (renamed apart, ``main``
    made private) and call its ``main`` on ``args``; returns the call's results."""
    prefix = f"exported{next(_uid)}_"
    defined = set(_FUNC_DEF.findall(text))
    text = _SYMBOL_USE.sub(lambda m: "@" + prefix + m.group(1) if m.group(1) in defined
                           else m.group(0), text)
    text = text.replace(f"func.func public @{prefix}", f"func.func private @{prefix}")
    parsed = ir.Module.parse(text)
    with ir.InsertionPoint(ctx.module.body):
        for op in list(parsed.body.operations):
            op.detach_from_parent()
            ir.InsertionPoint.current.insert(op)
    call = func_dialect.CallOp(result_types, ir.FlatSymbolRefAttr.get(prefix + "main"),
                               list(args))
    return list(call.results)


_CUSTOM_CALL = re.compile(r"custom_call\s+@([\w$.]+)")


def register_kernels(text, platform):
    """Register the linear-algebra kernels (LAPACK, cuSOLVER) that module ``text`` calls
    with ``platform``'s runtime: a module loaded in a fresh process was not lowered here, so
    nothing has registered them yet."""
    kernels = linalg.KERNELS.get(platform)
    if kernels is None:
        return
    for name in sorted(set(_CUSTOM_CALL.findall(text))):
        if name.startswith(kernels.family + "_"):
            kernels.ensure_registered(name, "export", platform)


def _lowering(ctx, *args, target, sizes):
    text = target.module_text_at(ctx.platform, dict(sizes))
    if text is None:
        raise LoweringError(f"{target.describe()} was exported for platforms "
                            f"{target.platforms}, not for {ctx.platform!r}; export it with "
                            f"platforms=(..., {ctx.platform!r})")
    register_kernels(text, ctx.platform)
    return inline_module(ctx, text, args, [_hlo.ir_type(a) for a in ctx.avals_out])


call_exported_p.def_lowering(_lowering)


def _batch(args, dims, target, sizes):
    """vmap of an exported call: the call runs once per batch member, in a loop (``lax.map``:
    one copy of the module inside a while loop), results stacked along axis 0."""
    size = batching_util.batch_size(args, dims)
    mapped = [i for i, d in enumerate(dims) if d is not batching_util.not_mapped]
    xs = [batching_util.bdim_to_front(args[i], dims[i], size) for i in mapped]

    def member(xs_i):
        full = list(args)
        for i, x in zip(mapped, xs_i):
            full[i] = x
        return call_exported_p.bind(*full, target=target, sizes=sizes)
    outs = lax.map(member, xs)
    return list(outs), [0] * len(outs)


call_exported_p.def_batch(_batch)


def _jvp(primals, tangents, target, sizes):
    raise TypeError(f"{target.describe()}: an exported function is differentiable only in "
                    f"reverse mode (grad, vjp) and only when exported with vjp_order >= 1, "
                    f"once per order (this one has vjp_order={target.vjp_order})")


call_exported_p.def_jvp(_jvp)
