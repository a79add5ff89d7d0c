"""Device prefetch: batches are put on the device ahead of use, optionally split over devices."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import collections
import dataclasses

from funcgrad.data import DataLoader, TensorDataset, prefetch_to_device, shard
from funcgrad.data.prefetch import _prefetch_gen, _tree_map

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

Point = collections.namedtuple("Point", "a b")


@dataclasses.dataclass
class Pair:
    x: object
    names: list


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
    import funcgrad
    from funcgrad.data import prefetch_to_device
    dev = funcgrad.devices()[0]
    batches = [{"x": np.full((4, 2), k, np.float32), "y": np.arange(4) + k} for k in range(3)]
    out = list(prefetch_to_device(iter(batches), size=2, devices=dev))
    assert len(out) == 3
    for k, b in enumerate(out):
        assert type(b["x"]) is funcgrad.Array and type(b["y"]) is funcgrad.Array
        assert b["x"].device == dev and b["y"].device == dev
        assert b["x"].dtype == np.float32 and b["x"].shape == (4, 2)
        assert np.asarray(b["x"]).tolist() == [[k, k]] * 4
        assert np.asarray(b["y"]).tolist() == (np.arange(4) + k).tolist()


def test_loader_device_batches_are_arrays_in_order_with_their_structure():
    import funcgrad
    dev = funcgrad.devices()[0]
    ds = TensorDataset(np.arange(12, dtype=np.float32).reshape(6, 2), np.arange(6))
    for kwargs in (dict(), dict(num_workers=2, worker_type="thread")):
        loader = DataLoader(ds, batch_size=2, shuffle=True, seed=3, device=dev,
                            device_prefetch=3, **kwargs)
        host = DataLoader(ds, batch_size=2, shuffle=True, seed=3)
        for (x, y), (hx, hy) in zip(loader, host, strict=True):
            assert type(x) is funcgrad.Array and x.device == dev
            assert type(y) is funcgrad.Array and y.device == dev
            assert np.array_equal(np.asarray(x), hx) and np.array_equal(np.asarray(y), hy)
    # nested structure: dataclasses, namedtuples, dicts, strings
    batch = {"p": Pair(np.ones((2, 3), np.float32), ["a", "b"]),
             "n": Point(np.zeros(2), None)}
    (out,) = list(prefetch_to_device([batch], devices=dev))
    assert isinstance(out["p"], Pair) and isinstance(out["n"], Point)
    assert type(out["p"].x) is funcgrad.Array and out["p"].names == ["a", "b"]
    assert type(out["n"].a) is funcgrad.Array and out["n"].b is None


def test_prefetch_issues_device_put_ahead_of_use(monkeypatch):
    """With the real device_put: when batch k is handed out, batches up to k + size have been
    given to device_put already (their copies are in flight), and k is a device array."""
    import funcgrad
    real, calls = funcgrad.device_put, []

    def recording_put(x, device=None):
        calls.append(int(np.asarray(x).ravel()[0]))
        return real(x, device)

    from funcgrad.lowering import array   # prefetch puts through funcgrad.lowering.array
    monkeypatch.setattr(array, "device_put", recording_put)
    batches = (np.full(3, k, np.float32) for k in range(6))
    for k, b in enumerate(prefetch_to_device(batches, size=2)):
        assert type(b) is funcgrad.Array and float(b[0]) == k
        assert calls == list(range(min(k + 3, 6)))


def test_prefetch_argument_errors():
    with pytest.raises(ValueError, match="prefetch_to_device: size must be >= 1, got 0"):
        prefetch_to_device([np.zeros(2)], size=0)
    with pytest.raises(ValueError, match="devices is an empty list"):
        prefetch_to_device([np.zeros(2)], devices=[])


_MULTI_DEVICE_SCRIPT = textwrap.dedent("""
    import numpy as np
    import funcgrad
    from funcgrad.data import DataLoader, TensorDataset, prefetch_to_device
    devs = funcgrad.devices()
    assert len(devs) == 4, devs
    ds = TensorDataset(np.arange(32, dtype=np.float32).reshape(16, 2), np.arange(16))
    loader = DataLoader(ds, batch_size=8, device=devs)
    batches = list(loader)
    assert len(batches) == 2
    for b, (x, y) in enumerate(batches):
        # one sharded Array per leaf: part i on device i, as pmap takes it (no copy there)
        assert isinstance(x, funcgrad.Array) and x.shape == (4, 2, 2) and y.shape == (4, 2)
        for i, (xs, ys) in enumerate(zip(x.addressable_shards, y.addressable_shards)):
            assert xs.device == devs[i] and ys.device == devs[i]
            rows = 8 * b + 2 * i + np.arange(2)
            assert np.asarray(ys.data)[0].tolist() == rows.tolist()
            assert np.asarray(xs.data)[0].tolist() == np.asarray(ds.arrays[0][rows]).tolist()
        step = funcgrad.pmap(lambda a, c: (a.sum() + c.sum()))
        assert np.asarray(step(x, y)).tolist() == [float(np.asarray(x)[i].sum()
                                                         + np.asarray(y)[i].sum())
                                                   for i in range(4)]
    # "all" means every device; one device other than the default is honoured
    (x,) = next(iter(prefetch_to_device([(np.zeros((4, 1)),)], devices="all")))
    assert [s.device for s in x.addressable_shards] == devs
    (x, y), = list(DataLoader(ds, batch_size=16, device=devs[2]))
    assert type(x) is funcgrad.Array and x.device == devs[2] and x.shape == (16, 2)
    # 2 "processes" (ranks) of 2 devices each: every item lands on exactly one device per epoch
    from funcgrad.data import DistributedSampler
    for epoch in range(2):
        placed = {}
        for rank in range(2):
            sampler = DistributedSampler(ds, num_replicas=2, rank=rank, seed=3)
            local = devs[2 * rank:2 * rank + 2]
            loader = DataLoader(ds, batch_size=4, sampler=sampler, drop_last=True, device=local)
            loader.set_epoch(epoch)
            for _, y in loader:
                for part in y.addressable_shards:
                    for v in np.asarray(part.data).ravel().tolist():
                        assert v not in placed, (v, placed)
                        placed[v] = part.device
        assert sorted(placed) == list(range(16)), sorted(placed)
        assert set(placed.values()) == set(devs)
    try:
        list(DataLoader(ds, batch_size=6, device=devs))
    except ValueError as e:
        assert "into 4 equal parts" in str(e), e
    else:
        raise AssertionError("a batch of 6 split over 4 devices did not fail")
    print("OK")
""")


def test_prefetch_to_several_devices_in_a_fresh_process():
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4", FUNCGRAD_PLATFORM="cpu", PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-c", _MULTI_DEVICE_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
