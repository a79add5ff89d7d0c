"""``eval_shape``: the shapes and dtypes a function would return, found by tracing it (nothing
is computed or allocated), and ``ShapeDtypeStruct``, the placeholder it takes and returns."""
import numpy as np

from funcgrad import tree_util
from funcgrad.core import dtypes
from funcgrad.core.avals import ShapeAndDtype, ShapedArray
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of


class ShapeDtypeStruct(ShapeAndDtype):
    """A shape and a dtype standing in for an array (``eval_shape``, ``make_jaxpr``).

    Example:
        >>> funcgrad.ShapeDtypeStruct((2, 3), jnp.float32)
        ShapeDtypeStruct(shape=(2, 3), dtype=float32)
    """
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        # symbolic dimensions (``funcgrad.export.symbolic_shape``) stay as they are
        self.shape = tuple(d if getattr(d, "is_symbolic_dim", False) else int(d)
                           for d in shape)
        self.dtype = np.dtype(dtype)
        self.weak_type = bool(weak_type)

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"

    def __eq__(self, other):
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype, self.weak_type) \
            == (other.shape, other.dtype, other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))


def abstractify(x):
    """The aval a traced argument gets: a ShapeDtypeStruct (or any object with ``shape`` and
    ``dtype`` that is not an array) becomes one of that shape and (canonical) dtype."""
    if isinstance(x, ShapedArray):
        return x
    if isinstance(x, ShapeDtypeStruct):
        return ShapedArray(x.shape, dtypes.canonicalize(x.dtype), x.weak_type)
    return aval_of(x)


def eval_shape(fun, *args, **kwargs):
    """The ``ShapeDtypeStruct`` pytree that ``fun(*args, **kwargs)`` would return, without
    computing it. Arguments may be arrays, NumPy values or ``ShapeDtypeStruct`` placeholders.

    Example:
        >>> funcgrad.eval_shape(lambda x: x @ x.T, funcgrad.ShapeDtypeStruct((4, 3), "float32"))
        ShapeDtypeStruct(shape=(4, 4), dtype=float32)
    """
    leaves, treedef = tree_util.tree_flatten((args, kwargs))
    out_tree = []

    def flat_fun(*flat):
        a, kw = treedef.unflatten(flat)
        out_leaves, out_def = tree_util.tree_flatten(fun(*a, **kw))
        out_tree.append(out_def)
        return out_leaves

    closed, _ = trace_to_jaxpr(flat_fun, [abstractify(x) for x in leaves],
                               debug_name=getattr(fun, "__name__", None))
    return out_tree[0].unflatten([ShapeDtypeStruct(a.shape, a.dtype, a.weak_type)
                                  for a in closed.out_avals])
