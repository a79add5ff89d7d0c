"""DataLoader with worker processes and threads: determinism, sharding of streams, errors,
deaths, timeouts, shutdown, and safety with a running XLA runtime in the parent."""
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

from funcgrad.data import DataLoader, WorkerDiedError, WorkerTimeoutError

from data_helpers import (BatchedImages, DieAt, FailAt, FailingStream, HoldsArray, Images, Shards,
                          Slow, WorkerFacts, failing_init, random_augment, tag_worker,
                          xla_thread_count)


def _alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids, seconds=5.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _epoch(loader):
    out = [(b["index"].copy(), b["image"].copy()) for b in loader]
    return np.concatenate([i for i, _ in out]), np.concatenate([x for _, x in out])


def test_same_batches_whatever_the_workers():
    """Shuffled order and random augmentation depend only on (seed, epoch)."""
    ds = BatchedImages(40, transform=random_augment())
    reference = DataLoader(ds, batch_size=6, shuffle=True, seed=21)
    ref = [_epoch(reference) for _ in range(2)]
    assert not np.array_equal(ref[0][0], ref[1][0])          # epochs differ
    assert sorted(ref[0][0].tolist()) == list(range(40))
    settings = [dict(num_workers=1), dict(num_workers=2),
                dict(num_workers=2, worker_type="thread"), dict(num_workers=3, worker_type="thread")]
    for kwargs in settings:
        loader = DataLoader(ds, batch_size=6, shuffle=True, seed=21, persistent_workers=True,
                            prefetch_factor=3, **kwargs)
        try:
            for epoch in range(2):
                idx, img = _epoch(loader)
                assert np.array_equal(idx, ref[epoch][0]), (kwargs, epoch)
                assert np.array_equal(img, ref[epoch][1]), (kwargs, epoch)
            loader.set_epoch(0)
            assert np.array_equal(_epoch(loader)[1], ref[0][1]), kwargs
        finally:
            loader.shutdown()


def test_getitem_without_getitems_in_workers():
    ds = Images(9)
    got = [b["index"].tolist() for b in DataLoader(ds, batch_size=4, num_workers=2)]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]


@pytest.mark.parametrize("worker_type", ["process", "thread"])
def test_iterable_dataset_split_per_worker(worker_type):
    loader = DataLoader(Shards(10), batch_size=2, num_workers=2, worker_type=worker_type)
    batches = list(loader)
    # worker 0 streams 0,2,4,6,8 and worker 1 streams 1,3,5,7,9; batches alternate
    assert [b["x"].tolist() for b in batches] == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]
    assert [b["worker"].tolist() for b in batches] == [[0, 0], [1, 1], [0, 0], [1, 1], [0], [1]]


def test_worker_info_and_worker_init_fn():
    loader = DataLoader(WorkerFacts(8), batch_size=2, num_workers=2, worker_init_fn=tag_worker)
    facts = list(loader)
    workers = sorted({int(w) for b in facts for w in b["worker"]})
    tags = sorted({int(t) for b in facts for t in b["tag"]})
    pids = {int(p) for b in facts for p in b["pid"]}
    assert workers == [0, 1] and tags == [100, 101]
    assert len(pids) == 2 and os.getpid() not in pids
    assert all(int(v) == 0 for b in facts for v in b["xla_threads"])  # no runtime in workers
    assert all(int(v) == 0 for b in facts for v in b["jax_imported"])


def test_worker_exception_is_reraised_with_traceback_and_index():
    loader = DataLoader(FailAt(12, bad=6), batch_size=4, num_workers=2)
    it = iter(loader)
    assert next(it).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError) as err:
        next(it)
    msg = str(err.value)
    assert "Caught ValueError in DataLoader worker" in msg
    assert "loading index 6 (batch 1)" in msg
    assert "item 6 is corrupt" in msg
    assert "Original traceback in the worker" in msg and "data_helpers.py" in msg
    assert "__getitem__" in err.value.worker_traceback
    assert next(it).tolist() == [8, 9, 10, 11]               # the loader goes on
    with pytest.raises(StopIteration):
        next(it)


def test_worker_exception_in_thread_worker():
    loader = DataLoader(FailAt(4, bad=1), batch_size=2, num_workers=1, worker_type="thread")
    with pytest.raises(ValueError, match=r"worker 0 .* loading index 1 \(batch 0\): item 1 is corrupt"):
        list(loader)


def test_failing_worker_init_fn_is_reported():
    loader = DataLoader(Images(4), batch_size=2, num_workers=1, worker_init_fn=failing_init)
    with pytest.raises(RuntimeError, match="(?s)running worker_init_fn.*init of worker 0 failed on purpose"):
        list(loader)


@pytest.mark.parametrize("how,expected", [("exit", "exited with code 7"),
                                          ("kill", r"killed by signal 9 \(SIGKILL\)")])
def test_dead_worker_is_reported_quickly(how, expected):
    loader = DataLoader(DieAt(40, bad=9, how=how), batch_size=4, num_workers=2)
    start = time.monotonic()
    it = iter(loader)
    pids = list(it._pool.pids)
    with pytest.raises(WorkerDiedError, match=expected) as err:
        for _ in it:
            pass
    assert time.monotonic() - start < 5.0                     # no timeout set: still no hang
    # batch 2 was being loaded; batch 0 may still have been unsent when the worker died
    assert "batch 2 (indices [8, 9, 10, 11])" in str(err.value)
    assert _wait_gone(pids)                                   # the other worker is stopped too


def test_timeout_reports_a_stuck_worker():
    loader = DataLoader(Slow(4, delay=5.0), batch_size=2, num_workers=1, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match=r"timed out after 0.5 s waiting for batch 0 from worker 0"):
        next(iter(loader))
    assert time.monotonic() - start < 3.0


def test_unpicklable_collate_fn_has_a_clear_error():
    loader = DataLoader(Images(4), batch_size=2, num_workers=1, collate_fn=lambda items: items)
    with pytest.raises(TypeError, match="could not send the dataset, collate_fn or worker_init_fn"):
        list(loader)
    ok = DataLoader(Images(4), batch_size=2, num_workers=1, worker_type="thread",
                    collate_fn=lambda items: [it["index"] for it in items])
    assert list(ok) == [[0, 1], [2, 3]]


def test_persistent_workers_survive_epochs_and_stop_on_gc():
    loader = DataLoader(WorkerFacts(6), batch_size=3, num_workers=2, persistent_workers=True)
    pids_per_epoch = [{int(p) for b in loader for p in b["pid"]} for _ in range(3)]
    assert pids_per_epoch[0] == pids_per_epoch[1] == pids_per_epoch[2]
    first = iter(loader)
    second = iter(loader)
    with pytest.raises(RuntimeError, match="superseded by a newer iter"):
        next(first)
    assert len(list(second)) == 2
    pids = list(loader._pool.pids)
    assert all(_alive(p) for p in pids)
    del loader, first, second
    gc.collect()
    assert _wait_gone(pids)


def test_abandoned_iterator_stops_its_workers():
    it = iter(DataLoader(Slow(20, delay=0.01), batch_size=2, num_workers=2))
    next(it)
    pids = list(it._pool.pids)
    del it
    gc.collect()
    assert _wait_gone(pids)


def test_dead_persistent_worker_is_replaced_with_a_warning():
    loader = DataLoader(WorkerFacts(4), batch_size=2, num_workers=1, persistent_workers=True)
    assert len(list(loader)) == 2
    old = loader._pool.pids[0]
    os.kill(old, signal.SIGKILL)
    loader._pool.procs[0].join(5.0)                           # until its exit is reported
    with pytest.warns(RuntimeWarning, match=r"worker 0 .* was killed by signal 9"):
        batches = list(loader)
    assert {int(p) for b in batches for p in b["pid"]} != {old}
    loader.shutdown()


def test_ctrl_c_stops_the_workers():
    loader = DataLoader(Slow(8, delay=2.0), batch_size=2, num_workers=2)
    it = iter(loader)
    pids = list(it._pool.pids)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(it)
    finally:
        timer.cancel()
    assert _wait_gone(pids, seconds=4.0)


def test_no_shared_memory_is_left_behind():
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm on this system")
    before = set(os.listdir("/dev/shm"))
    loader = DataLoader(BatchedImages(30), batch_size=8, num_workers=2)
    assert sum(b["image"].shape[0] for b in loader) == 30
    del loader
    gc.collect()
    assert set(os.listdir("/dev/shm")) - before == set()


def _start_xla_in_parent():
    """Compile and run something with funcgrad (or, before the core exists, with the raw XLA
    client) so the runtime's threads are running in this process."""
    try:
        import funcgrad
        jit = getattr(funcgrad, "jit", None)
        jnp = getattr(funcgrad, "numpy", None)
        if jit is not None and jnp is not None and hasattr(jnp, "sin"):
            f = jit(lambda x: jnp.sin(x) * 2.0)
            out = np.asarray(f(np.arange(4, dtype=np.float32)))
            assert np.allclose(out, np.sin(np.arange(4)) * 2.0, atol=1e-5)
            return "funcgrad.jit"
    except ImportError:
        pass
    from jaxlib import xla_client
    client = xla_client.make_cpu_client()
    module = ("module @double { func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {"
              " %0 = stablehlo.add %x, %x : tensor<4xf32>\n return %0 : tensor<4xf32> } }")
    devices = xla_client.DeviceList(tuple(client.devices()[:1]))
    assert client.compile_and_load(module.encode(), devices, xla_client.CompileOptions())
    return "xla_client"


def test_workers_are_safe_after_the_parent_started_xla():
    how = _start_xla_in_parent()
    assert how in ("funcgrad.jit", "xla_client")
    assert xla_thread_count() > 0                             # runtime threads are running
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # no fork warning by default
        loader = DataLoader(BatchedImages(24), batch_size=5, num_workers=2, timeout=30)
        got = np.concatenate([b["index"] for b in loader])
    assert got.tolist() == list(range(24))
    facts = list(DataLoader(WorkerFacts(4), batch_size=2, num_workers=2, timeout=30))
    assert all(int(v) == 0 for b in facts for v in b["xla_threads"])


def test_iterable_dataset_unbatched_and_failing_streams():
    items = list(DataLoader(Shards(5), batch_size=None, num_workers=2))
    assert [float(it["x"]) for it in items] == [0, 1, 2, 3, 4]
    loader = DataLoader(FailingStream(), batch_size=2, num_workers=2)
    it = iter(loader)
    assert next(it).tolist() == [0.0, 1.0]
    with pytest.raises(OSError, match=r"(?s)worker 0 .*producing batch \d+: stream broke after 3 items"):
        next(it)


class _FakeDeviceArray:
    """Looks like a funcgrad array to the loader's check (module and __array__)."""

    __module__ = "funcgrad.core.values"

    def __init__(self):
        self.shape = (3,)

    def __array__(self, dtype=None, copy=None):
        return np.zeros(3)


def test_device_arrays_are_refused_before_workers_start():
    loader = DataLoader(HoldsArray(_FakeDeviceArray()), num_workers=1)
    with pytest.raises(TypeError, match=r"holds a funcgrad.core.values._FakeDeviceArray of shape \(3,\); worker processes must not touch funcgrad device arrays"):
        iter(loader)
    threaded = DataLoader(HoldsArray(_FakeDeviceArray()), num_workers=1, worker_type="thread")
    assert next(iter(threaded)).tolist() == [[0.0, 0.0, 0.0]]
    funcgrad = pytest.importorskip("funcgrad")
    if not hasattr(funcgrad, "device_put"):
        return
    real = funcgrad.device_put(np.arange(3.0))
    with pytest.raises(TypeError, match="worker processes must not touch funcgrad device arrays"):
        iter(DataLoader(HoldsArray(real), num_workers=1))


def test_more_workers_than_batches():
    loader = DataLoader(Images(5), batch_size=2, num_workers=3, worker_type="thread",
                        prefetch_factor=1)
    assert [b["index"].tolist() for b in loader] == [[0, 1], [2, 3], [4]]


def test_spawn_context_works_and_fork_warns_once_xla_is_loaded():
    loader = DataLoader(Images(6), batch_size=3, num_workers=1, multiprocessing_context="spawn")
    it = iter(loader)
    assert it._pool.start_method == "spawn"
    assert [b["index"].tolist() for b in it] == [[0, 1, 2], [3, 4, 5]]
    import jaxlib.xla_client  # noqa: F401  (the runtime library, as funcgrad loads it)
    with pytest.warns(RuntimeWarning, match="forking a process whose runtime threads hold locks"):
        DataLoader(Images(2), num_workers=1, multiprocessing_context="fork")
    default = iter(DataLoader(Images(2), num_workers=1))
    assert default._pool.start_method in ("forkserver", "spawn")
    default.close()


_AFTER_XLA_SCRIPT = textwrap.dedent("""
    import os
    import numpy as np
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad.data import DataLoader
    from data_helpers import PairsWithFacts, xla_thread_count

    TOP_LEVEL = os.environ.get("TOP_LEVEL_COMPUTE") == "1"
    if TOP_LEVEL:      # computes on import, so again in every worker that imports this module
        np.asarray(funcgrad.jit(lambda v: v + 1.0)(np.ones(2, np.float32)))


    def main():
        f = funcgrad.jit(lambda v: jnp.tanh(v) * 2.0)
        np.asarray(f(np.ones((4, 2), np.float32)))       # compiled and run in this process
        assert xla_thread_count() > 0
        ds = PairsWithFacts(np.linspace(-2, 2, 64, dtype=np.float32).reshape(32, 2),
                            np.arange(32))
        dev = funcgrad.devices()[0]
        # (spawn starts each worker with exec, so it has nothing to inherit: tested elsewhere)
        settings = [dict(), dict(persistent_workers=True)]
        for kwargs in settings[1:] if TOP_LEVEL else settings:
            loader = DataLoader(ds, batch_size=4, shuffle=True, seed=1, num_workers=2,
                                timeout=60, device=dev, **kwargs)
            for epoch in range(2):
                seen = []
                for x, y, threads, clients in loader:
                    assert type(x) is funcgrad.Array and x.device == dev
                    out = np.asarray(f(x))
                    assert np.allclose(out, np.tanh(np.asarray(x)) * 2.0, atol=1e-6)
                    seen += np.asarray(y).tolist()
                    threads, clients = np.asarray(threads), np.asarray(clients)
                    if TOP_LEVEL:
                        # each worker started its own runtime (its threads exist): none holds
                        # a runtime's memory without the threads, as a fork would leave it
                        assert ((threads > 0) == (clients > 0)).all(), (threads, clients)
                    else:
                        assert (threads == 0).all() and (clients == 0).all(), (threads, clients)
                assert sorted(seen) == list(range(32)), (kwargs, epoch, seen)
            loader.shutdown()
        print("OK")


    if __name__ == "__main__":
        main()
""")


@pytest.mark.parametrize("top_level", [False, True], ids=["guarded", "top-level-compute"])
def test_workers_are_safe_after_a_jit_model_ran_in_a_fresh_parent(tmp_path, top_level):
    """A script that has compiled and run a funcgrad.jit function (XLA threads running) then
    loads with worker processes (the default forkserver; fresh or persistent workers) and
    feeds the batches, on the device, to the function."""
    script = tmp_path / "train_script.py"
    script.write_text(_AFTER_XLA_SCRIPT)
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([repo, here]),
               TOP_LEVEL_COMPUTE="1" if top_level else "0")
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=150, cwd=str(tmp_path))
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
