"""The example ResNet-18 and MobileNetV3-Small have torchvision's exact state-dict keys, order
and shapes (tests/nn/data/torchvision_keys.json was written from torchvision's models), load
such a state dict, and run."""
import json
import os
import sys

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
import vision_models as V  # noqa: E402

REF = json.load(open(os.path.join(HERE, "data", "torchvision_keys.json")))


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
def test_state_dict_matches_torchvision(name):
    model = getattr(V, name)()
    got = [[k, list(v.shape)] for k, v in model.state_dict().items()]
    assert got == REF[name]
    rng = np.random.default_rng(0)
    sd = {k: (np.array(3, np.int64) if k.endswith("num_batches_tracked")
              else rng.standard_normal(s).astype(np.float32)) for k, s in REF[name]}
    model.load_state_dict(sd)
    k0 = REF[name][0][0]
    np.testing.assert_array_equal(np.asarray(model.state_dict()[k0]), sd[k0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small"])
def test_forward_runs(name):
    model = getattr(V, name)(num_classes=10).eval()
    out = funcgrad.jit(lambda m, x: m(x))(model, jnp.ones((2, 3, 32, 32)))
    assert out.shape == (2, 10) and np.isfinite(np.asarray(out)).all()
