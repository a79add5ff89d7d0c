"""Global programs across processes: ``global_worker.py`` run as 2 processes x 2 host CPU
devices on 127.0.0.1 and, at the same time, as 1 process x 4 devices; what each process holds
and computes is compared with the one-process run and with the 1-device training run."""
import json

import numpy as np
import pytest

import distributed_procs as procs

WORKER = ["tests/distributed/global_worker.py"]


@pytest.fixture(scope="module")
def runs():
    port = procs.free_port()
    started = []
    try:
        for rank in range(2):
            started.append(procs.start(WORKER, procs.environment(
                FUNCGRAD_CPU_DEVICES=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                WORLD_SIZE=2, RANK=rank, LOCAL_RANK=rank)))
        started.append(procs.start(WORKER, procs.environment(FUNCGRAD_CPU_DEVICES=4)))
        results = procs.finish(started, timeout=180)
    finally:
        procs.kill(started)
    for code, out, err in results:
        assert code == 0, err[-3000:]
    seen = [json.loads(out.strip().splitlines()[-1]) for _, out, _ in results]
    return seen[:2], seen[2]


def _union(pair, key):
    return sorted(s for view in pair for s in view["global_arrays"][key]["shards"])


@pytest.mark.slow
def test_each_process_holds_its_own_shards(runs):
    pair, alone = runs
    assert [v["process_index"] for v in pair] == [0, 1] and alone["process_count"] == 1
    whole = np.arange(8.0).reshape(4, 2)
    for p, view in enumerate(pair):
        made = view["global_arrays"]["local_data"]
        assert made["shape"] == [4, 2] and made["fully_addressable"] is False
        assert [s[0] for s in made["shards"]] == [2 * p, 2 * p + 1]    # its devices only
        assert made["indices_map"] == [2 * p, 2 * p + 1]
        for position, index, replica, data in made["shards"]:
            assert index == [[position, position + 1], [None, None]] and replica == 0
            np.testing.assert_array_equal(data, whole[position:position + 1])
        # rows over the mesh axis inside a process, copies across processes: replica ids
        replicated = view["global_arrays"]["replicated"]
        assert replicated["shape"] == [2, 1]
        assert [s[2] for s in replicated["shards"]] == [p, p]
        assert [s[3] for s in replicated["shards"]] == [[[10.0]], [[20.0]]]
    # the two processes together hold exactly what the one process holds
    for key in ("local_data", "replicated", "single_device_arrays", "callback"):
        assert _union(pair, key) == sorted(alone["global_arrays"][key]["shards"]), key
    assert alone["global_arrays"]["local_data"]["fully_addressable"] is True


@pytest.mark.slow
def test_sharded_jit_over_the_global_mesh(runs):
    pair, alone = runs
    for view in pair + [alone]:
        arrays = view["global_arrays"]
        np.testing.assert_allclose(arrays["jit"], arrays["jit_expected"], rtol=1e-6)
    # each process's first block of 3 * x, gathered: one per process
    assert pair[0]["global_arrays"]["jit_gathered"] == [[[0.0, 3.0]], [[12.0, 15.0]]]
    assert alone["global_arrays"]["jit_gathered"] == [[[0.0, 3.0]]]
    assert sorted(s for v in pair for s in v["global_arrays"]["jit_sharded_out"]) == \
        sorted(alone["global_arrays"]["jit_sharded_out"])
    # shard_map over the same mesh: the column sums of x * x, psummed over every process
    for view in pair + [alone]:
        assert view["global_arrays"]["shard_map"] == [[56.0, 84.0]]
    assert all("process_allgather" in v["global_arrays"]["read_error"] for v in pair)
    assert alone["global_arrays"]["read_error"] is None


@pytest.mark.slow
def test_pmap_over_every_process(runs):
    pair, alone = runs
    # x = 0, 1, 2, 3 over the 4 devices; x + psum(x); gradient of the sum of squares
    assert [v["pmap"]["shape"] for v in pair] == [[2], [2]]
    assert pair[0]["pmap"]["values"] + pair[1]["pmap"]["values"] == alone["pmap"]["values"] \
        == [6.0, 7.0, 8.0, 9.0]
    assert pair[0]["pmap"]["grad"] + pair[1]["pmap"]["grad"] == alone["pmap"]["grad"] \
        == [72.0, 74.0, 76.0, 78.0]


@pytest.mark.slow
def test_data_parallel_lenet_losses_equal_the_one_device_run(runs):
    pair, alone = runs
    single = alone["single"]
    assert len(single) == 3 and all(2.0 < v < 2.6 for v in single)
    for view in pair + [alone]:
        np.testing.assert_allclose(view["single"], single, atol=1e-6)
        np.testing.assert_allclose(view["pmap_losses"], single, atol=1e-5)
        np.testing.assert_allclose(view["ddp_losses"], single, atol=1e-5)
        assert view["ddp_weight_spread"] == 0.0     # the processes' weights stay equal


@pytest.mark.slow
def test_ddp_forward_starts_from_process_0_buffers(runs):
    pair, alone = runs
    # process 1's running mean was changed after construction; its output still uses process 0's
    assert pair[0]["ddp_buffers"] == pair[1]["ddp_buffers"]
    np.testing.assert_allclose(pair[0]["ddp_buffers"], alone["ddp_buffers"], atol=1e-6)


@pytest.mark.slow
def test_ddp_no_sync_keeps_each_process_gradient(runs):
    pair, alone = runs
    # 4 rows per process of value p + 1: own gradient 4 (p + 1), averaged (4 + 8) / 2 = 6
    assert [v["ddp_own"] for v in pair] == [[[4.0] * 3], [[8.0] * 3]]
    assert [v["ddp_synced"] for v in pair] == [[[6.0] * 3], [[6.0] * 3]]
    assert alone["ddp_own"] == alone["ddp_synced"] == [[8.0] * 3]     # 8 rows of 1
