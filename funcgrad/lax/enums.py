"""``jax.lax``'s option types: gather/scatter modes, rounding, RNG and FFT kinds, dot algorithms,
accuracy requests and the type aliases of dimension numbers and precisions.

Each is accepted where JAX accepts it: ``GatherScatterMode`` members are the strings funcgrad's
gather and scatter take (``mode=lax.GatherScatterMode.CLIP`` is ``mode="clip"``),
``RoundingMethod`` by ``lax.round``, ``FftType`` by ``lax.fft``, ``DotAlgorithmPreset`` by the
``precision=`` of products.

Example:
    >>> lax.round(jnp.array([0.5, 1.5]), lax.RoundingMethod.TO_NEAREST_EVEN)
    Array([0., 2.], dtype=float32)
    >>> lax.GatherScatterMode.from_any("clip") is lax.GatherScatterMode.CLIP
    True
"""
import dataclasses
import enum
import typing

import numpy as np

from funcgrad.lax.convolution import ConvDimensionNumbers
from funcgrad.lax.precision import Precision

__all__ = ["AccuracyMode", "ConvGeneralDilatedDimensionNumbers", "DotAlgorithm",
           "DotAlgorithmPreset", "DotDimensionNumbers", "FftType", "GatherScatterMode",
           "PrecisionLike", "RaggedDotDimensionNumbers", "RandomAlgorithm", "RoundingMethod",
           "Tolerance"]


class GatherScatterMode(str, enum.Enum):
    """How gathers and scatters treat out-of-bounds indices: ``CLIP`` clamps them,
    ``FILL_OR_DROP`` fills gathered values (``fill_value``) and drops scattered updates,
    ``PROMISE_IN_BOUNDS`` lets the implementation choose (clamping here), ``ONE_HOT`` is JAX's
    TPU-only strategy.

    Example:
        >>> lax.GatherScatterMode.from_any("fill") is lax.GatherScatterMode.FILL_OR_DROP
        True
    """
    CLIP = "clip"
    FILL_OR_DROP = "fill"
    PROMISE_IN_BOUNDS = "promise_in_bounds"
    ONE_HOT = "one_hot"

    @staticmethod
    def from_any(s):
        """A member from a member, its name, one of the mode strings or ``None`` (FILL_OR_DROP,
        JAX's default).

        Example:
            >>> lax.GatherScatterMode.from_any(None)
            <GatherScatterMode.FILL_OR_DROP: 'fill'>
        """
        if isinstance(s, GatherScatterMode):
            return s
        if s is None:
            return GatherScatterMode.FILL_OR_DROP
        key = str(s).lower()
        for m in GatherScatterMode:
            if key in (m.value, m.name.lower()) or (key == "drop" and m.value == "fill"):
                return m
        raise ValueError(f"lax.GatherScatterMode: unknown mode {s!r}; use one of "
                         f"{[m.name.lower() for m in GatherScatterMode]}")


class RoundingMethod(enum.IntEnum):
    """``lax.round``'s tie rule: halves away from zero (0) or to the nearest even (1).

    Example:
        >>> int(lax.RoundingMethod.TO_NEAREST_EVEN)
        1
    """
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


class RandomAlgorithm(enum.IntEnum):
    """The bit generator of ``lax.rng_bit_generator``.

    Example:
        >>> lax.RandomAlgorithm.RNG_THREE_FRY.name
        'RNG_THREE_FRY'
    """
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


class FftType(enum.IntEnum):
    """The transform of ``lax.fft``.

    Example:
        >>> lax.fft(jnp.array([1.0, 0.0, -1.0, 0.0]), lax.FftType.RFFT, (4,))
        Array([0.+0.j, 2.+0.j, 0.+0.j], dtype=complex64)
    """
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3

    def __str__(self):
        return self.name


class AccuracyMode(enum.Enum):
    """An accuracy request for transcendental functions (``accuracy=``).

    Example:
        >>> lax.AccuracyMode.HIGHEST.value
        1
    """
    HIGHEST = 1
    DEFAULT = 2


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """An accuracy request as absolute, relative and ulp tolerances (``accuracy=``).

    Example:
        >>> lax.Tolerance(atol=1e-6, rtol=0.0, ulps=2)
        Tolerance(atol=1e-06, rtol=0.0, ulps=2)
    """
    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0


@dataclasses.dataclass(frozen=True)
class DotAlgorithm:
    """A dot product algorithm spelled out: operand and accumulation types and how many
    component products make one (JAX's ``lax.DotAlgorithm``).

    Example:
        >>> import numpy as np
        >>> lax.DotAlgorithm(np.float32, np.float32, np.float32).accumulation_type
        <class 'numpy.float32'>
    """
    lhs_precision_type: typing.Any
    rhs_precision_type: typing.Any
    accumulation_type: typing.Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False

    @property
    def precision(self):
        """The ``lax.Precision`` name giving at least this algorithm's accuracy: full
        float32/float64 operands are HIGHEST, anything narrower DEFAULT."""
        wide = all(np.dtype(t).itemsize >= 4 for t in (self.lhs_precision_type,
                                                       self.rhs_precision_type))
        return Precision.HIGHEST if wide else Precision.DEFAULT


class DotAlgorithmPreset(enum.Enum):
    """Named dot algorithms (``precision=lax.DotAlgorithmPreset.F32_F32_F32``). funcgrad maps
    each to the ``Precision`` of equal or better accuracy (``.precision``).

    Example:
        >>> lax.DotAlgorithmPreset.BF16_BF16_F32_X3.precision
        'HIGH'
        >>> a = jnp.ones((2, 2))
        >>> lax.dot(a, a, precision=lax.DotAlgorithmPreset.F32_F32_F32)
        Array([[2., 2.],
               [2., 2.]], dtype=float32)
    """
    DEFAULT = 0
    ANY_F8_ANY_F8_F32 = 1
    ANY_F8_ANY_F8_F32_FAST_ACCUM = 2
    ANY_F8_ANY_F8_ANY = 3
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = 4
    F16_F16_F16 = 5
    F16_F16_F32 = 6
    BF16_BF16_BF16 = 7
    BF16_BF16_F32 = 8
    BF16_BF16_F32_X3 = 9
    BF16_BF16_F32_X6 = 10
    BF16_BF16_F32_X9 = 11
    TF32_TF32_F32 = 12
    TF32_TF32_F32_X3 = 13
    F32_F32_F32 = 14
    F64_F64_F64 = 15

    @property
    def precision(self):
        """The ``lax.Precision`` name giving at least this algorithm's accuracy."""
        if self.name in ("F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32_X6", "BF16_BF16_F32_X9",
                         "TF32_TF32_F32_X3"):
            return Precision.HIGHEST
        if self.name in ("BF16_BF16_F32_X3", "TF32_TF32_F32"):
            return Precision.HIGH
        return Precision.DEFAULT


class RaggedDotDimensionNumbers(typing.NamedTuple):
    """The dimension numbers of ``lax.ragged_dot_general``: ordinary dot dimension numbers,
    the lhs dimensions split into groups by ``group_sizes`` and the rhs group dimensions.

    Example:
        >>> lax.RaggedDotDimensionNumbers((((1,), (1,)), ((), ())), (0,), (0,))[1]
        (0,)
    """
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple


PrecisionLike = typing.Union[None, str, tuple, DotAlgorithm, DotAlgorithmPreset]
DotDimensionNumbers = tuple[tuple[typing.Sequence[int], typing.Sequence[int]],
                            tuple[typing.Sequence[int], typing.Sequence[int]]]
ConvGeneralDilatedDimensionNumbers = typing.Union[tuple[str, str, str], ConvDimensionNumbers,
                                                  None]
