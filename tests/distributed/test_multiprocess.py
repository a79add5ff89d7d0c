"""Two processes x 2 host CPU devices on 127.0.0.1 form one run of 4 devices."""
import json

import pytest

import funcgrad
import distributed_procs as procs


def _run_pair(env_of_rank):
    processes = []
    try:
        for rank in range(2):
            processes.append(procs.start(["tests/distributed/worker.py"], env_of_rank(rank)))
        results = procs.finish(processes)
    finally:
        procs.kill(processes)
    for code, out, err in results:
        assert code == 0, err[-3000:]
    return [json.loads(out.strip().splitlines()[-1]) for _, out, _ in results]


def _check(seen, port, source):
    ids = [device for device, _ in seen[0]["devices"]]
    for rank, view in enumerate(seen):
        assert view["process_index"] == rank
        assert view["process_count"] == 2
        assert view["device_count"] == 4
        assert view["devices"] == seen[0]["devices"]          # one global list, one order
        assert [p for _, p in view["devices"]] == [0, 0, 1, 1]
        assert view["local_devices"] == ids[2 * rank:2 * rank + 2]
        assert view["local_device_count"] == 2
        assert view["default_device"] == view["local_devices"][0]
        assert view["source"] == source
        assert view["coordinator"] == f"127.0.0.1:{port}"
        assert view["eager"] == [rank + 0.0, rank + 1.0, rank + 2.0]
        # process p sends [p + 1, 10 (p + 1)]: one contribution per process, not per device
        assert view["reduce"] == {"sum": [3.0, 30.0], "mean": [1.5, 15.0], "max": [2.0, 20.0],
                                  "min": [1.0, 10.0]}
        assert view["int_sum"] == 5 + 6
        assert view["gather"] == [[0, 1], [1, 2]]
        assert view["gather_tiled"] == [[0], [1]]
        assert view["broadcast"] == [7.0]
        assert view["broadcast_from_1"] == [8]


@pytest.mark.slow
def test_torchrun_environment():
    port = procs.free_port()
    seen = _run_pair(lambda rank: procs.environment(
        FUNCGRAD_CPU_DEVICES=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=2,
        RANK=rank, LOCAL_RANK=rank))
    _check(seen, port, "torchrun")


@pytest.mark.slow
def test_funcgrad_environment():
    port = procs.free_port()
    seen = _run_pair(lambda rank: procs.environment(
        FUNCGRAD_CPU_DEVICES=2, FUNCGRAD_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
        FUNCGRAD_NUM_PROCESSES=2, FUNCGRAD_PROCESS_ID=rank))
    _check(seen, port, "funcgrad")


@pytest.mark.slow
def test_unreachable_coordinator_names_the_address():
    port = procs.free_port()   # nothing listens there
    script = ("import funcgrad, time\n"
              "t = time.monotonic()\n"
              "try:\n"
              f"    funcgrad.distributed.initialize('127.0.0.1:{port}', num_processes=2, "
              "process_id=1, initialization_timeout=1)\n"
              "except funcgrad.distributed.CoordinatorUnreachableError as e:\n"
              "    print('RAISED', round(time.monotonic() - t, 1), e, flush=True)\n"
              "print('ALIVE', float(funcgrad.numpy.ones(2).sum()), flush=True)\n")
    [(code, out, err)] = procs.finish([procs.start(["-c", script], procs.environment())],
                                      timeout=45)
    assert code == 0, err[-3000:]
    raised = next(line for line in out.splitlines() if line.startswith("RAISED"))
    assert f"127.0.0.1:{port}" in raised and "initialization_timeout=1" in raised
    assert float(raised.split()[1]) < 30          # bounded, not jaxlib's process abort
    assert "ALIVE 2.0" in out                      # the process goes on, single-process


def test_initialize_after_first_client_is_refused():
    funcgrad.numpy.ones(1).block_until_ready()    # this test process has a client already
    with pytest.raises(funcgrad.distributed.DistributedError,
                       match="before funcgrad makes its first device client"):
        funcgrad.distributed.initialize("127.0.0.1:1", num_processes=2, process_id=1)
    assert not funcgrad.distributed.is_initialized()


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_processes=2, process_id=2), "process_id=2 is not below num_processes=2"),
    (dict(num_processes=0, process_id=0), "num_processes must be an int >= 1, got 0"),
    (dict(num_processes=2, process_id=-1), "process_id must be an int >= 0, got -1"),
    (dict(num_processes=2), "process_id not given"),
])
def test_bad_arguments(kwargs, message, monkeypatch):
    for name in ("MASTER_ADDR", "RANK", "FUNCGRAD_COORDINATOR_ADDRESS", "SLURM_JOB_ID",
                 "OMPI_MCA_orte_hnp_uri"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=message):
        funcgrad.distributed.initialize("127.0.0.1:1", **kwargs)


def test_bad_address():
    with pytest.raises(ValueError, match="'host:port', got 'localhost'"):
        funcgrad.distributed.initialize("localhost", num_processes=1, process_id=0)


@pytest.mark.slow
def test_lost_process_raises_in_the_survivor():
    port = procs.free_port()
    processes = []
    try:
        for rank in range(2):
            processes.append(procs.start(["tests/distributed/lose_peer.py", "1"], procs.environment(
                FUNCGRAD_CPU_DEVICES=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE=2,
                RANK=rank)))
        (code0, out0, err0), (code1, _, _) = procs.finish(processes, timeout=45)
    finally:
        procs.kill(processes)
    assert code1 == 3                      # the one that died
    assert code0 == 1, err0[-3000:]        # the survivor: an uncaught ProcessLostError
    lost = next(line for line in out0.splitlines() if line.startswith("LOST"))
    seconds = float(lost.split()[2])
    assert seconds < 2 + 3 + 5             # died at 2 s, heartbeat_timeout=3, slack for load
    assert "process 1 of 2 stopped answering" in lost and lost.endswith("(1,)")
    assert f"127.0.0.1:{port}" in lost
    assert "funcgrad.distributed.runtime.ProcessLostError" in err0


@pytest.mark.slow
def test_launcher_starts_a_run():
    port = procs.free_port()
    launcher = procs.start(["-m", "funcgrad.distributed.run", "--nproc-per-node", "2",
                            "--master-port", str(port), "tests/distributed/worker.py"],
                           procs.environment(FUNCGRAD_CPU_DEVICES=2))
    [(code, out, err)] = procs.finish([launcher])
    assert code == 0, err[-3000:]
    seen = {}
    for line in out.splitlines():
        prefix, _, rest = line.partition(": ")
        if rest.startswith("{"):
            seen[prefix] = json.loads(rest)
    assert sorted(seen) == ["[rank0]", "[rank1]"]
    _check([seen["[rank0]"], seen["[rank1]"]], port, "torchrun")
