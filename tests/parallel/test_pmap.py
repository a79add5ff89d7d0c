"""Runs ``pmap_cases.py`` and ``pmap_transform_cases.py`` on 4 host CPU devices in a subprocess
(the device count is fixed when funcgrad makes its client), and the single-device checks of
pmap here."""
import os
import subprocess
import sys

import numpy as np
import pytest

import funcgrad
from funcgrad import lax

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def test_pmap_cases_on_four_host_devices(run_on_four_devices):
    run_on_four_devices(os.path.join(HERE, "pmap_cases.py"),
                        os.path.join(HERE, "pmap_transform_cases.py"), timeout=540)


def test_pmap_on_one_device_and_errors():
    n = funcgrad.local_device_count()
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    out = funcgrad.pmap(lambda v: lax.psum(v, "i") * 2, axis_name="i")(x)
    np.testing.assert_allclose(np.asarray(out), 2 * np.broadcast_to(x.sum(0), x.shape))
    with pytest.raises(ValueError, match=f"only {n} device"):
        funcgrad.pmap(lambda v: v)(np.zeros((n + 1, 2)))


def test_psum_scatter_and_all_to_all_under_vmap():
    import funcgrad.numpy as jnp
    x = np.arange(4 * 4 * 3, dtype=np.float32).reshape(4, 4, 3)
    got = funcgrad.vmap(lambda v: lax.psum_scatter(v, "i"), axis_name="i")(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), x.sum(0))
    got = funcgrad.vmap(lambda v: lax.all_to_all(v, "i", 0, 1), axis_name="i")(jnp.asarray(x))
    # member m: row m of every member's value, stacked along axis 1
    np.testing.assert_allclose(np.asarray(got), np.transpose(x, (1, 2, 0)))


def test_data_parallel_example_matches_one_device_run(tmp_path):
    # examples/data_parallel.py --check: per-step losses of the 4-device run against the
    # 1-device run on the full batches (also trains one short epoch and writes checkpoints)
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4", FUNCGRAD_PLATFORM="cpu",
               PYTHONPATH=os.pathsep.join([REPO, os.path.join(REPO, "examples")]))
    script = os.path.join(REPO, "examples", "data_parallel.py")
    proc = subprocess.run([sys.executable, script, "--check", "--check-steps", "4"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("step ")]
    assert len(lines) == 4, proc.stdout
    worst = float(proc.stdout.strip().splitlines()[-1].split(":")[-1])
    assert worst <= 1e-5, proc.stdout
    # with a synced BatchNorm: losses and running statistics equal the 1-device run's
    proc = subprocess.run([sys.executable, script, "--check", "--check-steps", "2", "--sync-bn"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "running statistics: largest difference" in proc.stdout, proc.stdout
    worst = float(proc.stdout.strip().splitlines()[-1].split(":")[-1])
    assert worst <= 1e-5, proc.stdout
    proc = subprocess.run([sys.executable, script, "--epochs", "1", "--n-train", "256"],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "epoch 1: mean loss" in proc.stdout
    assert (tmp_path / "data_parallel_checkpoint.model.safetensors").exists()
