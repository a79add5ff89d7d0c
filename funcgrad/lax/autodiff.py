"""Primitives that exist for differentiation: ``stop_gradient``."""
from funcgrad import tree_util
from funcgrad.core import interpreters
from funcgrad.core.ad_util import Zero, tangent_aval
from funcgrad.core.primitive import Primitive
from funcgrad.core.values import aval_of

stop_gradient_p = Primitive("stop_gradient")
stop_gradient_p.def_abstract_eval(lambda x: x)
stop_gradient_p.def_lowering(lambda ctx, x: x)


def _stop_gradient_jvp(primals, tangents):
    (x,) = primals
    out = stop_gradient_p.bind(x)
    return out, Zero(tangent_aval(aval_of(out)))


stop_gradient_p.def_jvp(_stop_gradient_jvp)
stop_gradient_p.def_batch(lambda args, dims: (stop_gradient_p.bind(args[0]), dims[0]))


def stop_gradient(x):
    """The identity, but with a zero derivative: gradients do not flow through it.

    Works on pytrees of arrays.

    Example:
        >>> funcgrad.grad(lambda x: x * lax.stop_gradient(x))(3.0)     # 3.0, not 6.0
        Array(3., dtype=float32)
    """
    def stop(leaf):
        if interpreters.is_eager() and not isinstance(
                leaf, interpreters.Tracer):
            return leaf
        return stop_gradient_p.bind(leaf)
    return tree_util.tree_map(stop, x)
