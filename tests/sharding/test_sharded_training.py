"""Runs ``sharded_training_cases.py`` (plain jit of mesh-placed arrays, funcgrad.nn.parallel)
on 4 host CPU devices in a subprocess, then loads the checkpoint that run saved from a
sharded model here, on one device."""
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.slow      # about 40 s: each case compiles SPMD training steps
def test_sharded_training_cases_on_four_host_devices(tmp_path, run_on_four_devices):
    path = str(tmp_path / "sharded_mlp.safetensors")
    run_on_four_devices(os.path.join(HERE, "sharded_training_cases.py"), timeout=600,
                        env={"SHARDED_SAVE_PATH": path})
    # the file a model split over 4 devices wrote loads unchanged into a one-device model
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(),
                          nn.Linear(8, 4))
    want = {k: np.asarray(v) for k, v in model.state_dict().items()}
    funcgrad.manual_seed(1)
    fresh = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(),
                          nn.Linear(8, 4))
    fresh.load_state_dict(funcgrad.load(path))
    for k, v in fresh.state_dict().items():
        assert v.sharding.device_set == {funcgrad.local_devices()[0]}
        np.testing.assert_array_equal(np.asarray(v), want[k], err_msg=k)
