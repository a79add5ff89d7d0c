import numpy as np
import pytest

import funcgrad


@pytest.fixture
def x64():
    """Run a test with 64-bit types enabled, restoring the previous setting afterwards."""
    old = funcgrad.config.enable_x64
    funcgrad.config.update("enable_x64", True)
    try:
        yield
    finally:
        funcgrad.config.update("enable_x64", old)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
