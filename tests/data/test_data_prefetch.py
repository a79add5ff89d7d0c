"""Device prefetch: batches are put on the device ahead of use, optionally split over devices."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from funcgrad.data import DataLoader, TensorDataset, shard
from funcgrad.data.prefetch import _prefetch_gen, _tree_map

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _funcgrad_with_device_put():
    try:
        import funcgrad
    except ImportError:
        pytest.skip("funcgrad core is not importable yet")
    if not hasattr(funcgrad, "device_put") or not hasattr(funcgrad, "devices"):
        pytest.skip("funcgrad.device_put / funcgrad.devices are not available yet")
    return funcgrad


def test_shard_adds_a_leading_device_axis():
    batch = {"x": np.arange(24).reshape(8, 3), "y": (np.arange(8), "name")}
    out = shard(batch, 4)
    assert out["x"].shape == (4, 2, 3) and out["y"][0].shape == (4, 2)
    assert out["x"][1].tolist() == [[6, 7, 8], [9, 10, 11]]
    assert out["y"][1] == "name"
    with pytest.raises(ValueError, match=r"shard: cannot split an array of shape \(6,\) along axis 0 into 4 equal parts"):
        shard(np.zeros(6), 4)


def test_prefetch_transfers_ahead_of_use():
    pulled, put = [], []

    def source():
        for k in range(5):
            pulled.append(k)
            yield k

    def fake_put(batch):
        put.append(batch)
        return ("on-device", batch)

    gen = _prefetch_gen(source(), 2, fake_put)
    first = next(gen)
    assert first == ("on-device", 0)
    assert put == [0, 1, 2]          # batches 1 and 2 were already in flight when 0 was used
    rest = list(gen)
    assert rest == [("on-device", k) for k in range(1, 5)]


def test_prefetch_closes_the_source_when_stopped_early():
    closed = []

    def source():
        try:
            yield from range(100)
        finally:
            closed.append(True)

    gen = _prefetch_gen(source(), 3, lambda b: b)
    assert next(gen) == 0
    gen.close()
    assert closed == [True]


def test_tree_map_keeps_structure():
    out = _tree_map(lambda a: a * 2, {"a": (np.ones(2), [np.zeros(1)]), "s": "txt", "n": None})
    assert out["a"][0].tolist() == [2, 2] and out["s"] == "txt" and out["n"] is None


def test_prefetch_to_device_single_device():
    funcgrad = _funcgrad_with_device_put()
    from funcgrad.data import prefetch_to_device
    batches = [{"x": np.full((4, 2), k, np.float32), "y": np.arange(4) + k} for k in range(3)]
    out = list(prefetch_to_device(iter(batches), size=2))
    assert len(out) == 3
    for k, b in enumerate(out):
        assert isinstance(b["x"], funcgrad.Array)
        assert np.asarray(b["x"]).tolist() == [[k, k]] * 4
        assert np.asarray(b["y"]).tolist() == (np.arange(4) + k).tolist()
    dev = funcgrad.devices()[0]
    loader = DataLoader(TensorDataset(np.arange(6, dtype=np.float32)), batch_size=3, device=dev)
    got = [np.asarray(x) for (x,) in loader]
    assert [g.tolist() for g in got] == [[0, 1, 2], [3, 4, 5]]


def test_prefetch_to_several_devices_in_a_fresh_process():
    _funcgrad_with_device_put()
    script = textwrap.dedent("""
        import numpy as np
        import funcgrad
        from funcgrad.data import DataLoader, TensorDataset, prefetch_to_device
        devs = funcgrad.devices()
        assert len(devs) == 4, devs
        ds = TensorDataset(np.arange(16, dtype=np.float32).reshape(8, 2), np.arange(8))
        loader = DataLoader(ds, batch_size=8, device=devs)
        (x, y), = list(loader)
        xs = np.asarray(x) if not isinstance(x, list) else np.stack([np.asarray(s) for s in x])
        assert xs.shape == (4, 2, 2), xs.shape
        assert xs[3].tolist() == [[12.0, 13.0], [14.0, 15.0]]
        shards = x if isinstance(x, list) else getattr(x, "addressable_shards", None)
        if isinstance(x, list):
            placed = [getattr(s, "device", None) for s in x]
            placed = [p() if callable(p) else p for p in placed]
            assert placed == devs, placed
        print("OK")
    """)
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
