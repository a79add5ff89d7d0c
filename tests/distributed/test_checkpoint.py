"""funcgrad.distributed.checkpoint: a 2-process x 2-device save loaded on 1 x 4 and 1 x 1,
the 4-device cases (checkpoint_cases.py, in a subprocess), atomic commits, the file format
against the safetensors package, and errors."""
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import funcgrad
import funcgrad.distributed.checkpoint as dcp
import funcgrad.numpy as jnp
from funcgrad import CheckpointError
import checkpoint_state as cs
import distributed_procs as procs
from safetensors_reader import tensors_of

HERE = os.path.dirname(os.path.abspath(__file__))


def _json_line(out):
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.slow
def test_saved_on_2x2_loads_on_1x4_and_1x1(tmp_path):
    port = procs.free_port()
    path = str(tmp_path / "ckpt")
    workers = []
    try:
        for rank in range(2):
            workers.append(procs.start(["tests/distributed/checkpoint_worker.py", path],
                                       procs.environment(
                FUNCGRAD_CPU_DEVICES=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                WORLD_SIZE=2, RANK=rank, PYTHONPATH=f"{procs.ROOT}{os.pathsep}{HERE}")))
        results = procs.finish(workers, timeout=90)
    finally:
        procs.kill(workers)
    for code, out, err in results:
        assert code == 0, err[-3000:]
    views = [_json_line(out) for _, out, _ in results]
    assert [v["process"] for v in views] == [0, 1]
    assert all(v["bad"] == [] for v in views)           # re-sharded over the 2 x 2 run itself
    manifest = json.loads(open(os.path.join(path, "manifest.json")).read())
    writers = {k: sorted({s["file"][-18:-12] for s in a["shards"]})
               for k, a in manifest["arrays"].items()}
    # each process wrote its own blocks; replicated blocks only by the first device's process
    assert writers == {"params.w": ["p00000", "p00001"], "params.b": ["p00000", "p00001"],
                       "opt.0.m": ["p00000"], "opt.0.r": ["p00000"], "opt.1": ["p00000"],
                       "opt.2": ["p00000"], "mapped": ["p00000", "p00001"]}
    assert manifest["process_count"] == 2

    loader = [procs.start(["tests/distributed/checkpoint_load.py", path, mode],
                          procs.environment(FUNCGRAD_CPU_DEVICES=4,
                                            PYTHONPATH=f"{procs.ROOT}{os.pathsep}{HERE}"))
              for mode in ("resharded",)]
    [(code, out, err)] = procs.finish(loader, timeout=90)
    assert code == 0, err[-3000:]
    view = _json_line(out)
    assert view["devices"] == 4 and view["bad"] == []
    assert view["layout"]["params.w"] == ("NamedSharding(mesh=Mesh('x': 4), "
                                          "spec=PartitionSpec(None, 'x'))")
    assert view["layout"]["opt.2"] == "ndarray" and view["layout"]["opt.3"] == "int"

    one = funcgrad.local_devices()[:1]                  # this process: loaded on 1 x 1
    assert cs.mismatches(dcp.load(cs.targets(one), checkpoint_id=path)) == []
    assert cs.mismatches(dcp.load(None, checkpoint_id=path)) == []


@pytest.mark.slow
def test_four_device_cases():
    env = procs.environment(FUNCGRAD_CPU_DEVICES=4, FUNCGRAD_PLATFORM="cpu",
                            PYTHONPATH=f"{procs.ROOT}{os.pathsep}{HERE}")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p",
                           "no:cacheprovider", os.path.join(HERE, "checkpoint_cases.py")],
                          env=env, cwd=procs.ROOT, capture_output=True, text=True, timeout=300)
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, tail


STATE = {"a": np.arange(6, dtype=np.float32).reshape(2, 3),
         "half": np.array([1.5, -2.25], ml_dtypes.bfloat16), "flag": np.array(True),
         "n": np.array([[1, 2]], np.int16), "empty": np.zeros((0, 3), np.float32),
         "nested": {"k": [np.float32(2.5), 4, "text", None, (1.0, 2)]}}


def _check(loaded, state=STATE):
    for k in ("a", "half", "flag", "n", "empty"):
        got = np.asarray(loaded[k])
        assert got.dtype == state[k].dtype and got.shape == state[k].shape
        np.testing.assert_array_equal(got, state[k])
    assert float(loaded["nested"]["k"][0]) == 2.5
    assert loaded["nested"]["k"][1:] == [4, "text", None, (1.0, 2)]


def test_round_trip_on_one_device(tmp_path):
    dcp.save(STATE, checkpoint_id=tmp_path)
    _check(dcp.load(None, checkpoint_id=tmp_path))
    host = dcp.load({k: np.zeros_like(v) for k, v in STATE.items() if k != "nested"},
                    checkpoint_id=tmp_path)
    assert isinstance(host["a"], np.ndarray)
    _check({**host, "nested": STATE["nested"]})


def test_a_single_array(tmp_path):
    x = jnp.arange(5.0)
    dcp.save(x, checkpoint_id=tmp_path)
    np.testing.assert_array_equal(np.asarray(dcp.load(None, checkpoint_id=tmp_path)),
                                  np.arange(5.0))
    assert isinstance(dcp.load(np.zeros(5, np.float32), checkpoint_id=tmp_path), np.ndarray)


def test_shard_files_are_safetensors(tmp_path):
    """The shard files read the same with the safetensors package (when installed) as the
    manifest says they hold."""
    dcp.save(STATE, checkpoint_id=tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    [name] = [n for n in os.listdir(tmp_path) if n.endswith(".safetensors")]
    tensors = tensors_of(str(tmp_path / name))
    assert sorted(tensors) == sorted(f"{k}@0" for k in manifest["arrays"])
    for k, v in STATE.items():
        if k != "nested":
            assert tensors[f"{k}@0"].dtype == v.dtype
            np.testing.assert_array_equal(tensors[f"{k}@0"], v)


def test_safetensors_package_reads_every_block(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    dcp.save({"w": np.arange(12, dtype=np.int64).reshape(3, 4),
              "h": np.ones((2, 2), ml_dtypes.bfloat16)}, checkpoint_id=tmp_path)
    [name] = [n for n in os.listdir(tmp_path) if n.endswith(".safetensors")]
    ref = st.load_file(str(tmp_path / name))
    np.testing.assert_array_equal(ref["w@0"], np.arange(12).reshape(3, 4))
    assert ref["h@0"].dtype == ml_dtypes.bfloat16


def _shard_files(path):
    return sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))


def test_a_failed_write_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    dcp.save({"w": np.ones(4, np.float32), "step": 1}, checkpoint_id=tmp_path)
    before = _shard_files(tmp_path)
    real = dcp.write_file

    def half_then_fail(path, tensors, metadata=None, fn=""):
        with open(path, "wb") as f:        # a partial shard file, as a crash leaves it
            f.write(b"\x10\0\0\0\0\0\0\0{")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(dcp, "write_file", half_then_fail)
    with pytest.raises(CheckpointError, match=r"failed on 1 of 1 processes; the previous "
                                              r"checkpoint there is unchanged.*No space left"):
        dcp.save({"w": np.zeros(4, np.float32), "step": 2}, checkpoint_id=tmp_path)
    out = dcp.load(None, checkpoint_id=tmp_path)
    assert out["step"] == 1 and np.asarray(out["w"]).tolist() == [1.0] * 4
    monkeypatch.setattr(dcp, "write_file", real)
    dcp.save({"w": np.full(4, 3.0, np.float32), "step": 3}, checkpoint_id=tmp_path)
    after = _shard_files(tmp_path)
    assert len(after) == 1 and after != before          # the stale files are gone
    assert dcp.load(None, checkpoint_id=tmp_path)["step"] == 3


def test_a_failed_commit_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    dcp.save({"w": np.ones(2, np.float32)}, checkpoint_id=tmp_path)

    def no_commit(path, manifest):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(dcp, "_commit", no_commit)
    with pytest.raises(CheckpointError, match="could not commit the manifest"):
        dcp.save({"w": np.zeros(2, np.float32)}, checkpoint_id=tmp_path)
    assert len(_shard_files(tmp_path)) == 2             # the new files exist, unreferenced
    assert np.asarray(dcp.load(None, checkpoint_id=tmp_path)["w"]).tolist() == [1.0, 1.0]


@pytest.mark.slow
def test_a_killed_save_leaves_the_previous_checkpoint(tmp_path):
    """A process killed (SIGKILL-like ``os._exit``) after writing its shards, just before the
    manifest's rename: the checkpoint on disk is still the previous one."""
    script = (
        "import os, sys, numpy as np\n"
        "import funcgrad.distributed.checkpoint as dcp\n"
        "path = sys.argv[1]\n"
        "dcp.save({'w': np.arange(3.0), 'step': 1}, checkpoint_id=path)\n"
        "real = os.replace\n"
        "def die(src, dst):\n"
        "    if dst.endswith('manifest.json'):\n"
        "        os._exit(9)\n"
        "    real(src, dst)\n"
        "os.replace = die\n"
        "dcp.save({'w': np.zeros(3), 'step': 2}, checkpoint_id=path)\n")
    [(code, _, err)] = procs.finish([procs.start(["-c", script, str(tmp_path)],
                                                 procs.environment())], timeout=60)
    assert code == 9, err[-2000:]
    assert len(_shard_files(tmp_path)) == 2             # the killed save's shards were written
    out = dcp.load(None, checkpoint_id=tmp_path)
    assert out["step"] == 1 and np.asarray(out["w"]).tolist() == [0.0, 1.0, 2.0]


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no committed checkpoint"):
        dcp.load(None, checkpoint_id=tmp_path / "nothing")
    dcp.save({"w": np.ones((2, 3), np.float32)}, checkpoint_id=tmp_path)
    with pytest.raises(KeyError, match=r"holds nothing at 'v' \(it holds w\)"):
        dcp.load({"v": None}, checkpoint_id=tmp_path)
    with pytest.raises(ValueError, match=r"w was saved with shape \(2, 3\), the target has "
                                         r"shape \(3, 2\)"):
        dcp.load({"w": np.zeros((3, 2), np.float32)}, checkpoint_id=tmp_path)
    with pytest.raises(TypeError, match="the target at 'w' is a set"):
        dcp.load({"w": {1}}, checkpoint_id=tmp_path)
    with pytest.raises(TypeError, match="cannot save a set at x"):
        dcp.save({"x": {1}}, checkpoint_id=tmp_path / "other")
    [name] = _shard_files(tmp_path)
    os.unlink(tmp_path / name)
    with pytest.raises(CheckpointError, match=f"{name}, named by the manifest, is missing"):
        dcp.load(None, checkpoint_id=tmp_path)
    (tmp_path / "manifest.json").write_text('{"format": "something else"}')
    with pytest.raises(CheckpointError, match="is not a funcgrad.distributed.checkpoint"):
        dcp.load(None, checkpoint_id=tmp_path)


def test_torch_tensors_are_saved_as_their_values(tmp_path):
    torch = pytest.importorskip("torch")
    dcp.save({"t": torch.arange(4, dtype=torch.float32), "h": torch.ones(2, dtype=torch.bfloat16)},
             checkpoint_id=tmp_path)
    out = dcp.load(None, checkpoint_id=tmp_path)
    np.testing.assert_array_equal(np.asarray(out["t"]), [0.0, 1.0, 2.0, 3.0])
    assert out["h"].dtype == ml_dtypes.bfloat16


def test_a_new_save_never_reuses_the_files_of_the_committed_one(tmp_path, monkeypatch):
    draws = iter([0x1234, 0x1234, 0x1234, 0x5678])
    monkeypatch.setattr(dcp.secrets, "randbits", lambda bits: next(draws))
    dcp.save({"w": np.ones(2, np.float32)}, checkpoint_id=tmp_path)
    assert _shard_files(tmp_path) == ["shards-00001234-p00000.safetensors"]
    dcp.save({"w": np.zeros(2, np.float32)}, checkpoint_id=tmp_path)   # 0x1234 is taken
    assert _shard_files(tmp_path) == ["shards-00005678-p00000.safetensors"]
    assert np.asarray(dcp.load(None, checkpoint_id=tmp_path)["w"]).tolist() == [0.0, 0.0]
