"""examples/sharded_transformer.py: the per-step losses of the 2x2 (data x model) mesh run
equal those of the single-device run (each in its own process with 4 host CPU devices)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "examples", "sharded_transformer.py")


def _losses(*flags):
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4", FUNCGRAD_PLATFORM="cpu", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, SCRIPT, "--steps", "8", *flags], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$", proc.stdout, re.M)]
    assert len(losses) == 8, proc.stdout
    return losses, proc.stdout


@pytest.mark.slow
def test_mesh_losses_equal_single_device_losses():
    mesh, out = _losses()
    one, _ = _losses("--single-device")
    assert "Mesh('data': 2, 'model': 2)" in out and "per-device block (64, 32)" in out
    np.testing.assert_allclose(mesh, one, rtol=1e-5, atol=1e-5)
    assert one[-1] < one[0] - 0.5        # it learns
