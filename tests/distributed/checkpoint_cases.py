"""Sharded checkpoints on one process with 4 host CPU devices (run by test_checkpoint.py in a
subprocess with FUNCGRAD_CPU_DEVICES=4): saved under several NamedShardings, loaded under
others and on one device, with each block written once."""
import json
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.distributed.checkpoint as dcp
from funcgrad import nn, optim
from funcgrad.sharding import NamedSharding, P, SingleDeviceSharding
import checkpoint_state as cs

H = np.arange(48, dtype=np.float32).reshape(4, 12) - 7.5


@pytest.fixture(scope="module")
def mesh():
    assert funcgrad.local_device_count() == 4
    return funcgrad.make_mesh((2, 2), ("data", "model"))


def _blocks(path):
    """{tensor name: shape} of every shard file of the checkpoint in ``path``."""
    from safetensors_reader import tensors_of
    out = {}
    for name in os.listdir(path):
        if name.endswith(".safetensors"):
            out.update({k: v.shape for k, v in tensors_of(os.path.join(path, name)).items()})
    return out


SAVE_SPECS = [P("data", "model"), P("data"), P(None, "model"), P(), P(("data", "model"))]
LOAD_SPECS = [P("model", "data"), P(None, ("model", "data")), P("model"), P(), P("data", None)]


@pytest.mark.parametrize("spec", SAVE_SPECS, ids=str)
def test_each_block_is_written_once(tmp_path, mesh, spec):
    x = funcgrad.device_put(H, NamedSharding(mesh, spec))
    dcp.save({"x": x}, checkpoint_id=tmp_path)
    blocks = _blocks(tmp_path)
    distinct = {tuple((s.start, s.stop) for s in idx)
                for idx in x.sharding.devices_indices_map(H.shape).values()}
    assert len(blocks) == len(distinct)                       # replicas are not written again
    assert sum(np.prod(s) for s in blocks.values()) == H.size  # the blocks tile the array
    assert x.sharding.shard_shape(H.shape) in set(blocks.values())


@pytest.mark.parametrize("saved", SAVE_SPECS, ids=str)
def test_reshard_on_load(tmp_path, mesh, saved):
    dcp.save({"x": funcgrad.device_put(H, NamedSharding(mesh, saved)), "n": 3},
             checkpoint_id=tmp_path)
    other = funcgrad.make_mesh((4,), ("x",))
    for spec in LOAD_SPECS:
        target_mesh = other if spec == P() else mesh
        want = NamedSharding(target_mesh, spec)
        out = dcp.load({"x": want, "n": 0}, checkpoint_id=tmp_path)
        assert out["n"] == 3 and out["x"].sharding == want.with_rank(2)
        for shard in out["x"].addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), H[shard.index])
    one = funcgrad.local_devices()[2]
    out = dcp.load({"x": SingleDeviceSharding(one)}, checkpoint_id=tmp_path)
    assert out["x"].device == one
    np.testing.assert_array_equal(np.asarray(out["x"]), H)


def test_target_arrays_keep_their_sharding_and_dtype(tmp_path, mesh):
    dcp.save({"x": funcgrad.device_put(H, NamedSharding(mesh, P("data")))},
             checkpoint_id=tmp_path)
    template = funcgrad.device_put(np.zeros((4, 12), np.int32), NamedSharding(mesh, P("model")))
    target = {"x": template}
    out = dcp.load(target, checkpoint_id=tmp_path)
    assert out is target                                   # filled in place, as torch DCP does
    assert out["x"].sharding == template.sharding and out["x"].dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out["x"]), H.astype(np.int32))


def test_state_on_a_2x2_mesh_loads_resharded_and_on_one_device(tmp_path):
    dcp.save(cs.state(funcgrad.local_devices()), checkpoint_id=tmp_path)
    assert cs.mismatches(dcp.load(cs.targets(funcgrad.local_devices()),
                                  checkpoint_id=tmp_path)) == []
    assert cs.mismatches(dcp.load(cs.targets(funcgrad.local_devices()[:1]),
                                  checkpoint_id=tmp_path)) == []
    assert cs.mismatches(dcp.load(None, checkpoint_id=tmp_path)) == []
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["process_count"] == 1
    assert len(manifest["arrays"]["opt.0.m"]["shards"]) == 2     # two column blocks, 1 copy


def test_module_and_optimizer_state_dicts(tmp_path, mesh):
    model = nn.Linear(12, 4)
    opt = optim.Adam(model.parameters(), lr=0.1)
    for p in model.parameters():
        p.grad = funcgrad.numpy.ones(p.shape)
    opt.step()
    sharded = {k: funcgrad.device_put(v, NamedSharding(mesh, P("data")))
               for k, v in model.state_dict().items()}
    dcp.save({"model": sharded, "optim": opt.state_dict()}, checkpoint_id=tmp_path)
    fresh = nn.Linear(12, 4)
    fresh_opt = optim.Adam(fresh.parameters(), lr=0.5)
    loaded = dcp.load(None, checkpoint_id=tmp_path)
    fresh.load_state_dict(loaded["model"])
    fresh_opt.load_state_dict(loaded["optim"])
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(np.asarray(fresh.state_dict()[k]), np.asarray(v))
    before, after = opt.state_dict(), fresh_opt.state_dict()
    assert after["param_groups"] == before["param_groups"]
    for i, s in before["state"].items():
        for k, v in s.items():
            np.testing.assert_array_equal(np.asarray(after["state"][i][k]), np.asarray(v))
