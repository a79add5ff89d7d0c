"""``QuantizeConfig``: what ``funcgrad.quantize`` rewrites, and how.

Example:
    >>> from funcgrad.quantize import QuantizeConfig
    >>> cfg = QuantizeConfig(weight_dtype="int4", granularity="per_block", block_size=32)
    >>> cfg.mode, cfg.activation, cfg.weight_format.qmax
    ('int', 'dynamic', 7)
"""
import dataclasses
from typing import Any, Callable, Optional, Tuple

from funcgrad.quantize.schemes import get_format

MODES = ("int", "fake")
ACTIVATIONS = ("none", "dynamic", "static")
ACTIVATION_GRANULARITIES = ("per_row", "per_tensor")
GRANULARITIES = ("per_tensor", "per_channel", "per_block")


@dataclasses.dataclass(frozen=True)
class ProductInfo:
    """What a selection predicate sees of one product: ``primitive`` ("dot_general" or
    "conv_general_dilated"), ``path`` (equation indices from the top, through sub-Jaxprs: the
    key of its calibrated range), the two operands' shapes and dtypes, which operand is the
    weight (0 = lhs, 1 = rhs), the equation's params and its ``name_stack`` (the
    ``funcgrad.named_scope``s it was staged in, "a/b")."""
    primitive: str
    path: Tuple
    lhs_shape: Tuple[int, ...]
    rhs_shape: Tuple[int, ...]
    dtype: Any
    weight_index: int
    params: dict
    name_stack: str = ""

    @property
    def weight_shape(self):
        return self.rhs_shape if self.weight_index else self.lhs_shape

    @property
    def weight_size(self):
        n = 1
        for s in self.weight_shape:
            n *= s
        return n


@dataclasses.dataclass(frozen=True)
class QuantizeConfig:
    """How ``funcgrad.quantize(f, config)`` rewrites the products of ``f``.

    * ``mode``: "int" (integer products: int8 x int8 -> int32 ``dot_general`` /
      ``conv_general_dilated`` with ``preferred_element_type``, then one rescale; weight-only
      configs dequantize stored integer weights into a float product) or "fake"
      (quantize-dequantize in float with straight-through gradients, for training).
    * ``weight_dtype``: "int8", "int4" (and emulated "int2".."int7", stored in int8) or
      "fp8_e4m3"; ``symmetric``: weights with a zero point of 0 (else affine).
    * ``granularity``: weight scales "per_tensor", "per_channel" (one per output channel: per
      element of the weight's non-contracted axes) or "per_block" (``block_size`` consecutive
      entries of the contracted axis per output channel; ``dot_general`` with one contracted
      axis only).
    * ``activation``: "none" (weight-only), "dynamic" (ranges of each row, i.e. per element
      of the activation's non-contracted axes, computed at run time; per example for
      convolutions) or "static" (one range per product, from ``static_ranges``, which
      ``funcgrad.quantize.calibrate`` returns); ``activation_dtype`` and
      ``activation_symmetric`` as for weights; ``activation_granularity`` "per_row" (default)
      or "per_tensor" (one dynamic range for the whole activation, as PyTorch's dynamic
      quantization); ``activation_narrow``: symmetric activation scales ``max|x| / qmax``
      (default) or PyTorch's ``max|x| / ((qmax - qmin) / 2)``.
    * which products: all ``dot_general`` and ``conv_general_dilated`` equations with a
      floating result whose weight has at least ``min_weight_size`` elements and for which
      ``select(info)`` (a ``ProductInfo`` predicate, if given) is true; ``convolutions=False``
      leaves convolutions alone; ``scopes`` (names of ``funcgrad.named_scope``s, "a" or
      "a/b") keeps only products staged inside one of them (a scope matches whole names
      anywhere in the stack: "dense" matches "encoder/dense/x" but not "encoder/dense2").
    * ``weight_argnums``: the positional arguments of ``f`` that hold weights. The weight of a
      product is its rhs (the kernel of a convolution, ``w`` in ``x @ w``) unless the lhs is
      weight-derived and the rhs is not; weight-derived values are closed-over arrays,
      constants, the ``weight_argnums`` arguments and what is computed from those alone.
      Weights that are concrete (closed-over arrays under ``jit`` or eagerly) are quantized
      once, when the function is traced, and stored as integers.

    Example:
        >>> from funcgrad.quantize import QuantizeConfig
        >>> QuantizeConfig(mode="fake", activation="none").weight_format.name
        'int8'
        >>> QuantizeConfig(mode="turbo")
        Traceback (most recent call last):
        ...
        ValueError: QuantizeConfig: mode must be one of ('int', 'fake'), got 'turbo'
    """
    mode: str = "int"
    weight_dtype: str = "int8"
    symmetric: bool = True
    granularity: str = "per_channel"
    block_size: Optional[int] = None
    activation: str = "dynamic"
    activation_dtype: str = "int8"
    activation_symmetric: bool = True
    activation_granularity: str = "per_row"
    activation_narrow: bool = True
    static_ranges: Any = None
    min_weight_size: int = 0
    select: Optional[Callable] = None
    convolutions: bool = True
    scopes: Tuple[str, ...] = ()
    weight_argnums: Tuple[int, ...] = ()

    def __post_init__(self):
        for field, allowed in (("mode", MODES), ("activation", ACTIVATIONS),
                               ("granularity", GRANULARITIES),
                               ("activation_granularity", ACTIVATION_GRANULARITIES)):
            if getattr(self, field) not in allowed:
                raise ValueError(f"QuantizeConfig: {field} must be one of {allowed}, got "
                                 f"{getattr(self, field)!r}")
        wf = get_format(self.weight_dtype, "QuantizeConfig (weight_dtype)")
        af = get_format(self.activation_dtype, "QuantizeConfig (activation_dtype)")
        if self.granularity == "per_block":
            if not isinstance(self.block_size, int) or self.block_size < 1:
                raise ValueError(f"QuantizeConfig: per_block granularity needs a positive int "
                                 f"block_size, got {self.block_size!r}")
            if not self.symmetric:
                raise ValueError("QuantizeConfig: per_block weights are symmetric only "
                                 "(symmetric=True)")
        if wf.is_float and not self.symmetric or af.is_float and not self.activation_symmetric:
            raise ValueError("QuantizeConfig: fp8_e4m3 is symmetric only")
        if self.mode == "int" and self.activation != "none" and wf.is_float != af.is_float:
            raise ValueError(f"QuantizeConfig: mode='int' multiplies weights and activations "
                             f"in one format family; got weight_dtype={wf.name!r} and "
                             f"activation_dtype={af.name!r} (use mode='fake' to mix)")
        if wf.storage.itemsize > 1 or af.storage.itemsize > 1:
            raise ValueError("QuantizeConfig: weight_dtype and activation_dtype must be 8-bit "
                             "or narrower formats")
        object.__setattr__(self, "scopes", (self.scopes,) if isinstance(self.scopes, str)
                           else tuple(self.scopes))
        object.__setattr__(self, "weight_argnums", tuple(
            (self.weight_argnums,) if isinstance(self.weight_argnums, int)
            else self.weight_argnums))

    @property
    def weight_format(self):
        return get_format(self.weight_dtype)

    @property
    def activation_format(self):
        return get_format(self.activation_dtype)

    def in_scopes(self, name_stack):
        """Whether a product staged under ``name_stack`` is inside one of ``scopes`` (always
        true when ``scopes`` is empty).

        Example:
            >>> from funcgrad.quantize import QuantizeConfig
            >>> cfg = QuantizeConfig(scopes=("dense",))
            >>> cfg.in_scopes("encoder/dense/x"), cfg.in_scopes("encoder/dense2")
            (True, False)
        """
        if not self.scopes:
            return True
        stack = "/" + name_stack + "/"
        return any("/" + s.strip("/") + "/" in stack for s in self.scopes)

    def replace(self, **changes):
        """A copy with ``changes`` (e.g. ``static_ranges`` after calibration).

        Example:
            >>> from funcgrad.quantize import QuantizeConfig
            >>> QuantizeConfig().replace(mode="fake").mode
            'fake'
        """
        return dataclasses.replace(self, **changes)
