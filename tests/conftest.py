import numpy as np
import pytest

import funcgrad


@pytest.fixture
def x64():
    """Run a test with 64-bit types enabled, restoring the previous setting afterwards."""
    with funcgrad.config.override("enable_x64", True):
        yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def on_cpu():
    """Run a test on the CPU backend even where a GPU is the default (tests of CPU-only
    lowerings, host pointers and compile options)."""
    with funcgrad.config.override("platform", "cpu"):
        yield


# On a GPU, XLA runs float32 products on TensorFloat-32 by default; the suite compares against
# NumPy and float64 finite differences, so it asks for full float32 there (no effect on CPU).
if funcgrad.default_backend() != "cpu":
    funcgrad.config.update("default_matmul_precision", "highest")
