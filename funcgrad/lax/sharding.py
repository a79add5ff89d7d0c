"""``with_sharding_constraint``: ask XLA's SPMD partitioner to lay out an intermediate value
as a sharding says (a ``stablehlo.custom_call @Sharding`` carrying its ``mhlo.sharding``).

Outside a program (eager values) it places the value as ``funcgrad.device_put`` would; inside
a single-device ``jit`` it changes nothing (XLA drops the annotation). The eager placement is
registered by ``funcgrad.lowering.spmd_jit``.
"""
import contextvars

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy, stablehlo

from funcgrad import tree_util
from funcgrad.core.ad_util import Zero
from funcgrad.core.primitive import Primitive
from funcgrad.lax import _hlo

sharding_constraint_p = Primitive("sharding_constraint")
sharding_constraint_p.def_abstract_eval(lambda x, sharding: x)


# While a program partitioned by Shardy is lowered (``lowering/spmd_jit.py``): {mesh: name of
# its ``sdy.mesh`` symbol}, to which constraints add the meshes they name; else None (GSPMD).
shardy_meshes = contextvars.ContextVar("funcgrad_shardy_meshes", default=None)


def _lowering(ctx, x, sharding):
    meshes = shardy_meshes.get()
    if meshes is not None:
        name = meshes.get(sharding.mesh)
        if name is None:
            name = meshes[sharding.mesh] = f"mesh_{len(meshes)}"
        attr = ir.Attribute.parse(sharding._to_sdy_text(ctx.avals_out[0].ndim, name))
        return sdy.sharding_constraint(x, attr)
    op = stablehlo.CustomCallOp([_hlo.ir_type(ctx.avals_out[0])], [x], "Sharding")
    op.attributes["mhlo.sharding"] = ir.StringAttr.get(
        str(sharding._to_xla_hlo_sharding(ctx.avals_out[0].ndim)))
    return op.results[0]


def _jvp(primals, tangents, sharding):
    (x,), (t,) = primals, tangents
    out = sharding_constraint_p.bind(x, sharding=sharding)
    return out, t if type(t) is Zero else sharding_constraint_p.bind(t, sharding=sharding)


def _transpose(ct, x, sharding):
    return [ct if type(ct) is Zero else sharding_constraint_p.bind(ct, sharding=sharding)]


def _batch(args, dims, sharding):
    (x,), (d,) = args, dims
    spec = list(sharding.spec) + [None] * (x.ndim - 1 - len(sharding.spec))
    spec.insert(d, None)                     # the batch dimension stays whole
    batched = type(sharding)(sharding.mesh, type(sharding.spec)(*spec))
    return sharding_constraint_p.bind(x, sharding=batched), d


sharding_constraint_p.def_lowering(_lowering)
sharding_constraint_p.def_jvp(_jvp)
sharding_constraint_p.def_transpose(_transpose)
sharding_constraint_p.def_batch(_batch)


def with_sharding_constraint(x, shardings):
    """``x`` (a pytree) laid out as ``shardings`` (one ``funcgrad.sharding.NamedSharding`` for
    every leaf, or a matching pytree) inside ``jit(..., in_shardings=/out_shardings=)``; eager
    values are placed that way at once.

    Example:
        >>> from funcgrad.sharding import NamedSharding, P
        >>> mesh = funcgrad.make_mesh((funcgrad.local_device_count(),), ("d",))
        >>> y = lax.with_sharding_constraint(jnp.ones((4, 2)), NamedSharding(mesh, P(None)))
        >>> y.sharding.spec, float(y.sum())
        (PartitionSpec(None), 8.0)
    """
    leaves, treedef = tree_util.tree_flatten(x)
    if hasattr(shardings, "spec"):
        shardings = [shardings] * len(leaves)
    else:
        shardings = treedef.flatten_up_to(shardings)
    out = []
    for leaf, s in zip(leaves, shardings):
        if not (hasattr(s, "spec") and hasattr(s, "mesh")):
            raise TypeError(f"with_sharding_constraint: expected a NamedSharding, got {s!r}")
        shape = getattr(leaf, "shape", ())
        s = s.with_rank(len(shape), "with_sharding_constraint")
        s.check_shape(shape, "with_sharding_constraint")
        out.append(sharding_constraint_p.bind(leaf, sharding=s))
    return tree_util.tree_unflatten(treedef, out)
