"""Matrix-product precision: the ``precision=`` argument of ``dot_general`` and the convolutions,
and the global ``default_matmul_precision`` switch.

On GPUs, XLA runs float32 products at "DEFAULT" precision on TensorFloat-32 tensor cores (about
10 mantissa bits; bfloat16 passes on TPUs), as JAX does. "HIGHEST" asks for full float32. CPUs
always compute in full precision, so the setting changes nothing there.

Accepted names (case-insensitive): "default" (also "fastest", "bfloat16"), "high" (also
"tensorfloat32", "bfloat16_3x") and "highest" (also "float32"), or ``lax.Precision.X``, or a
pair of them (one per operand).

Example:
    >>> a, b = jnp.array([[1.0, 2.0]]), jnp.array([[3.0], [4.0]])
    >>> lax.dot(a, b, precision=lax.Precision.HIGHEST)
    Array([[11.]], dtype=float32)
    >>> with funcgrad.default_matmul_precision("highest"):
    ...     y = funcgrad.jit(jnp.matmul)(a, b)          # every product at full float32
"""
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from funcgrad.config import config


class Precision:
    """Names for the ``precision=`` argument: ``lax.Precision.HIGHEST`` and so on."""
    DEFAULT = "DEFAULT"
    HIGH = "HIGH"
    HIGHEST = "HIGHEST"


_NAMES = {"default": "DEFAULT", "fastest": "DEFAULT", "bfloat16": "DEFAULT",
          "high": "HIGH", "tensorfloat32": "HIGH", "bfloat16_3x": "HIGH",
          "highest": "HIGHEST", "float32": "HIGHEST"}


def _one(name, where):
    if not isinstance(name, str) and isinstance(getattr(name, "precision", None), str):
        name = name.precision     # lax.DotAlgorithmPreset / lax.DotAlgorithm
    key = name.lower() if isinstance(name, str) else None
    if key not in _NAMES:
        raise ValueError(f"{where}: unknown precision {name!r}; use one of "
                         f"{sorted(_NAMES)} or lax.Precision.DEFAULT/HIGH/HIGHEST")
    return _NAMES[key]


def canonicalize_precision(precision, where):
    """``None`` (then the ``default_matmul_precision`` switch), a name, or a pair of names ->
    ``None`` or a pair ``(lhs, rhs)`` of "DEFAULT"/"HIGH"/"HIGHEST" (the primitive's param)."""
    if precision is None:
        precision = config.default_matmul_precision
        if precision is None:
            return None
        where = f"{where} (funcgrad.config default_matmul_precision)"
    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise ValueError(f"{where}: precision must be one name or a pair (lhs, rhs), got "
                             f"{precision!r}")
        return (_one(precision[0], where), _one(precision[1], where))
    one = _one(precision, where)
    return (one, one)


def precision_config(precision):
    """The StableHLO ``precision_config`` attribute for a canonical precision, or None."""
    if precision is None:
        return None
    return ir.ArrayAttr.get([stablehlo.PrecisionAttr.get(p) for p in precision])


def check_default_precision(value):
    """Validate a value for ``config.update("default_matmul_precision", value)``."""
    if value is not None:
        canonicalize_precision(value, "funcgrad.config.update('default_matmul_precision')")


def default_matmul_precision(name):
    """Run the block with ``default_matmul_precision`` set to ``name`` (then restore it).

    Example:
        >>> with funcgrad.default_matmul_precision("highest"):
        ...     print(funcgrad.config.default_matmul_precision)
        highest
        >>> print(funcgrad.config.default_matmul_precision)
        None
    """
    return config.override("default_matmul_precision", name)
