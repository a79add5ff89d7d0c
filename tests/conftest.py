import os
import subprocess
import sys

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
def run_on_four_devices():
    """Run pytest on case files in a subprocess with 4 host CPU devices (the device count is
    fixed when funcgrad makes its client): ``run(*paths, timeout=300, env=None,
    allow_skips=False)`` asserts that they pass (and that none skipped unless allowed) and
    returns the finished process."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def run(*paths, timeout=300, env=None, allow_skips=False):
        # (a jax imported by the cases for live comparisons gets 4 host devices too)
        xla_flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in xla_flags:
            xla_flags = (xla_flags + " --xla_force_host_platform_device_count=4").strip()
        full_env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4", FUNCGRAD_PLATFORM="cpu",
                        PYTHONPATH=repo, XLA_FLAGS=xla_flags, **(env or {}))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p",
                               "no:cacheprovider", "-rs", *paths], env=full_env, cwd=repo,
                              capture_output=True, text=True, timeout=timeout)
        tail = (proc.stdout + proc.stderr)[-4000:]
        assert proc.returncode == 0, tail
        assert " passed" in proc.stdout, tail
        assert allow_skips or "skipped" not in proc.stdout, tail
        return proc
    return run


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
