"""The lowerings that differ on CUDA (``lowering/cuda.py``), checked from any machine: the
program exported for "cuda" holds what XLA:GPU accepts, and the replacement computation gives
the integer results on the CPU."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import export, lax
from funcgrad.lax.convolution import conv_general_dilated_p
from funcgrad.lowering import cuda

RNG = np.random.default_rng(7)


def _conv(a, b):
    return lax.conv_general_dilated(a, b, (1, 1), [(1, 1), (1, 1)],
                                    preferred_element_type=jnp.int32)


def _ints(shape, dtype, bound):
    return RNG.integers(-bound, bound + 1, size=shape).astype(dtype)


def _exact_conv(x, k):
    """Direct int64 NCHW x OIHW convolution, stride 1, padding 1."""
    x = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(x, k.shape[2:], axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, k.astype(np.int64))


def test_integer_convolution_is_exported_for_cuda_as_a_float_convolution():
    x, k = _ints((2, 3, 8, 8), np.int8, 127), _ints((6, 3, 3, 3), np.int8, 127)
    text = export.export(funcgrad.jit(_conv), platforms=["cuda"])(x, k).mlir_module()
    convs = [line for line in text.splitlines() if "stablehlo.convolution" in line]
    assert len(convs) == 1 and "xf32>" in convs[0] and "xi8>" not in convs[0]
    assert "HIGHEST" in convs[0]
    # the CPU's own program keeps the integer convolution
    cpu = export.export(funcgrad.jit(_conv), platforms=["cpu"])(x, k).mlir_module()
    assert any("stablehlo.convolution" in line and "xi8>" in line for line in cpu.splitlines())


@pytest.fixture
def cuda_conv_lowering_on_cpu():
    """The CUDA lowering of convolutions, registered for the CPU for one test: its program
    then runs here."""
    prim = conv_general_dilated_p
    saved = prim.get_rule("lowering:cpu")
    prim.def_lowering(cuda._conv_lowering_cuda, platform="cpu")
    try:
        yield
    finally:
        prim.def_lowering(saved, platform="cpu")


# int16 and int32 sums beyond 2**24 (float32 would round them), within int32
@pytest.mark.parametrize("dtype, bound", [(np.int8, 127), (np.int16, 3000), (np.int32, 4000)])
def test_integer_convolution_as_float_is_exact(dtype, bound, cuda_conv_lowering_on_cpu):
    x, k = _ints((2, 4, 6, 6), dtype, bound), _ints((5, 4, 3, 3), dtype, bound)
    conv = lambda a, b: _conv(a, b) * 1        # a new function: a program of its own
    text = funcgrad.jit(conv).lower(x, k).as_text()
    ftype = "f32" if dtype == np.int8 else "f64"
    assert any("stablehlo.convolution" in line and f"x{ftype}>" in line
               for line in text.splitlines())
    got = funcgrad.jit(conv)(x, k)
    assert got.dtype == np.int32
    want = _exact_conv(x, k)
    assert np.abs(want).max() > (2 ** 24 if dtype != np.int8 else 2 ** 16)
    np.testing.assert_array_equal(np.asarray(got), want)
