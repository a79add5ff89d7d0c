"""Runs ``pmap_cases.py`` on 4 host CPU devices in a subprocess (the device count is fixed when
funcgrad makes its client), and the single-device checks of pmap here."""
import os
import subprocess
import sys

import numpy as np
import pytest

import funcgrad
from funcgrad import lax

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def test_pmap_cases_on_four_host_devices():
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4", FUNCGRAD_PLATFORM="cpu", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p",
                           "no:cacheprovider", os.path.join(HERE, "pmap_cases.py")],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=540)
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, tail


def test_pmap_on_one_device_and_errors():
    n = funcgrad.local_device_count()
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    out = funcgrad.pmap(lambda v: lax.psum(v, "i") * 2, axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), 2 * np.broadcast_to(x.sum(0), x.shape))
    with pytest.raises(ValueError, match=f"only {n} device"):
        funcgrad.pmap(lambda v: v)(np.zeros((n + 1, 2)))
