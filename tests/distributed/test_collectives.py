"""The eager collectives in a one-process run (the two-process values are checked by
test_multiprocess.py): results, dtypes and errors."""
import numpy as np
import pytest

import funcgrad.distributed as dist


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_all_reduce_of_one_process_is_its_value(op):
    x = np.array([[1.5, -2.0], [3.0, 4.25]], np.float32)
    out = dist.all_reduce(x, op)
    assert out.dtype == np.float32 and out.shape == (2, 2)
    np.testing.assert_array_equal(np.asarray(out), x)


def test_integer_sum_stays_integer_and_mean_is_float():
    assert dist.all_reduce(np.arange(4, dtype=np.int32)).dtype == np.int32
    mean = dist.all_reduce(np.arange(4, dtype=np.int32), "mean")
    assert np.issubdtype(mean.dtype, np.floating)
    np.testing.assert_array_equal(np.asarray(mean), [0.0, 1.0, 2.0, 3.0])


def test_allgather_stacks_or_tiles():
    x = np.array([[1, 2], [3, 4]], np.int32)
    np.testing.assert_array_equal(np.asarray(dist.process_allgather(x)), x[None])
    np.testing.assert_array_equal(np.asarray(dist.process_allgather(x, tiled=True)), x)
    with pytest.raises(ValueError, match="tiled=True needs values with at least one axis"):
        dist.process_allgather(np.float32(1.0), tiled=True)


def test_broadcast_needs_exactly_one_source():
    np.testing.assert_array_equal(np.asarray(dist.broadcast_one_to_all(np.array([9.0]))), [9.0])
    with pytest.raises(dist.DistributedError, match="0 processes said is_source=True"):
        dist.broadcast_one_to_all(np.array([9.0]), is_source=False)


def test_bad_inputs():
    with pytest.raises(ValueError, match="op must be one of .*got 'prod'"):
        dist.all_reduce(np.ones(2), "prod")
    with pytest.raises(TypeError, match="all_reduce: cannot send a list holding Python objects"):
        dist.all_reduce([object()])
    assert dist.sync_global_devices("checkpoint written") is None


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_a_device_array_is_reduced_without_host_copies(op):
    import funcgrad
    device = funcgrad.local_devices()[-1]
    x = funcgrad.device_put(np.array([1.0, -2.5, 4.0], np.float32), device)
    with funcgrad.transfer_guard("disallow"):     # any implicit host transfer raises
        out = dist.all_reduce(x, op)
    assert out.device == device and out.shape == (3,)
    np.testing.assert_array_equal(np.asarray(out), [1.0, -2.5, 4.0])
    half = dist.all_reduce(funcgrad.device_put(np.array([3], np.int32), device), "mean")
    assert half.device == device and np.issubdtype(half.dtype, np.floating)
    assert float(half[0]) == 3.0


ONE_DEVICE_WORKER = """
import json, numpy as np, funcgrad, funcgrad.distributed as dist
dist.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10)
me = funcgrad.process_index()
x = funcgrad.device_put(np.array([me + 1.0, -2.0 * (me + 1)], np.float32))
with funcgrad.transfer_guard("disallow"):
    out = {op: dist.all_reduce(x, op) for op in ("sum", "mean", "max", "min")}
# launches queued without waiting for each other (one replica per process): each sums right
queued = [dist.all_reduce(funcgrad.device_put(np.full(3, 10.0 * i + me, np.float32)))
          for i in range(30)]
print(json.dumps({"values": {op: np.asarray(v).tolist() for op, v in out.items()},
                  "queued": [np.asarray(q).tolist() for q in queued],
                  "on_own_device": all(v.device == x.device for v in out.values()),
                  "host": np.asarray(dist.all_reduce(np.int32(me + 5))).tolist()}))
dist.shutdown()
"""


@pytest.mark.slow
def test_two_processes_of_one_device_each():
    """One device per process (as one process per GPU): the result is the run's buffer itself,
    re-labelled as a single-device Array on the process's device."""
    import json
    import distributed_procs as procs
    results, _ = procs.run_ranks(["-c", ONE_DEVICE_WORKER], timeout=60, FUNCGRAD_CPU_DEVICES=1)
    for code, out, err in results:
        assert code == 0, err[-3000:]
        view = json.loads(out.strip().splitlines()[-1])
        assert view["values"] == {"sum": [3.0, -6.0], "mean": [1.5, -3.0], "max": [2.0, -2.0],
                                  "min": [1.0, -4.0]}
        assert view["on_own_device"] and view["host"] == 11
        assert view["queued"] == [[20.0 * i + 1] * 3 for i in range(30)]
