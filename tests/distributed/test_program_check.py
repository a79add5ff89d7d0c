"""Processes that launch different multi-process programs raise ProgramMismatchError instead of
hanging: the check against a stand-in coordination service (fast), and two real processes
(``mismatch_worker.py``) feeding different shapes and dtypes to ``all_reduce``, a ``pmap`` and a
sharded ``jit`` over the global mesh."""
import json
import types

import numpy as np
import pytest

import distributed_procs as procs
import funcgrad.distributed as dist
from funcgrad.core.avals import ShapedArray
from funcgrad.distributed import program_check
from funcgrad.lowering import backend


class _Store:
    """The coordination service's key-value store, as one dict shared by the fake clients."""

    def __init__(self):
        self.values = {}

    def key_value_set(self, key, value, allow_overwrite=False):
        self.values[key] = value

    def blocking_key_value_get(self, key, timeout_in_ms):
        if key not in self.values:
            raise RuntimeError(f"DEADLINE_EXCEEDED: GetKeyValue() timed out with key: {key}")
        return self.values[key]


def _device(i, process):
    return types.SimpleNamespace(id=i, process_index=process)


DEVICES = [_device(0, 0), _device(1, 0), _device(2, 1), _device(3, 1)]


def _as_process(monkeypatch, store, pid):
    runtime = types.SimpleNamespace(client=store, process_id=pid, num_processes=2)
    monkeypatch.setattr(backend, "distributed_runtime", lambda: runtime)


def _publish(store, monkeypatch, pid, name, text, avals):
    """What process ``pid`` does at its next check (it does not wait: the store may lack the
    other's entry yet; the caller checks as the other process afterwards)."""
    program_check.reset()
    _as_process(monkeypatch, store, pid)
    try:
        program_check.check(name, text, avals, DEVICES, timeout=0.01)
    except dist.DistributedError:
        pass   # the other process's entry is not there yet


def test_matching_programs_pass_and_differing_shapes_raise(monkeypatch):
    store = _Store()
    f32 = [ShapedArray((4, 3), np.float32)]
    _publish(store, monkeypatch, 1, "pmap_f", "module text", f32)
    program_check.reset()
    _as_process(monkeypatch, store, 0)
    program_check.check("pmap_f", "module text", f32, DEVICES, timeout=1)   # agrees
    _publish(store, monkeypatch, 1, "pmap_f", "other text", [ShapedArray((4, 5), np.float32)])
    program_check.reset()
    _as_process(monkeypatch, store, 0)
    with pytest.raises(dist.ProgramMismatchError) as info:
        program_check.check("pmap_f", "module text", f32, DEVICES, timeout=1)
    err = info.value
    assert isinstance(err, dist.DistributedError)
    assert (err.function, err.process, err.mine, err.theirs) == (
        "pmap_f", 1, "(float32[4,3])", "(float32[4,5])")
    assert "process 0 passes (float32[4,3]), process 1 passes (float32[4,5])" in str(err)
    assert str(err).startswith("pmap_f: processes 0 and 1 launched different programs")
    assert "multi-process program 0 of this process, over 4 devices of processes 0, 1" in str(err)


def test_same_arguments_but_another_function_or_program(monkeypatch):
    store = _Store()
    avals = [ShapedArray((), np.int32)]
    _publish(store, monkeypatch, 1, "pmap_g", "text g", avals)
    program_check.reset()
    _as_process(monkeypatch, store, 0)
    with pytest.raises(dist.ProgramMismatchError, match="process 1 launched pmap_g at this point"):
        program_check.check("pmap_f", "text f", avals, DEVICES, timeout=1)
    _publish(store, monkeypatch, 1, "pmap_f", "text g", avals)
    program_check.reset()
    _as_process(monkeypatch, store, 0)
    with pytest.raises(dist.ProgramMismatchError,
                       match=r"same arguments \(int32\[\]\), but process 1 lowered another"):
        program_check.check("pmap_f", "text f", avals, DEVICES, timeout=1)


def test_a_process_that_never_arrives_times_out(monkeypatch):
    program_check.reset()
    _as_process(monkeypatch, _Store(), 0)
    with pytest.raises(dist.DistributedError,
                       match=r"process 1 did not reach this program within "
                             r"program_check_timeout=0.05 s") as info:
        program_check.check("pmap_f", "text", [], DEVICES, timeout=0.05)
    assert not isinstance(info.value, dist.ProgramMismatchError)


def test_checks_are_numbered_per_process_set(monkeypatch):
    store = _Store()
    program_check.reset()
    _as_process(monkeypatch, store, 0)
    for _ in range(2):
        with pytest.raises(dist.DistributedError, match="did not reach"):
            program_check.check("f", "t", [], DEVICES, timeout=0.01)
    assert sorted(k.rsplit("/", 2)[-2] for k in store.values) == ["0", "1"]
    assert program_check.describe([ShapedArray((2, 0), np.bool_)]) == "(bool[2,0])"


def test_initialize_checks_its_timeout():
    with pytest.raises(ValueError, match="program_check_timeout must be a number of seconds "
                                         ">= 0 .*got -1"):
        dist.initialize("127.0.0.1:1", 2, 0, program_check_timeout=-1)


@pytest.mark.slow
def test_two_processes_raise_on_mismatched_shapes_and_go_on():
    results, _ = procs.run_ranks(["tests/distributed/mismatch_worker.py"], timeout=90,
                                 FUNCGRAD_CPU_DEVICES=2)
    views = []
    for code, out, err in results:
        assert code == 0, err[-3000:]
        views.append(json.loads(out.strip().splitlines()[-1]))
    for me, view in enumerate(views):
        other = 1 - me
        assert view["reduce_ok"]["value"] == [3.0] * 4
        assert view["pmap_ok"]["value"] == [[6.0] * 3] * 2      # 2 devices x (1 + 2) each
        assert view["checks_after_matching"] == 2               # once per compiled program
        assert view["jit_ok"]["value"] == [6.0, 6.0, 12.0, 12.0]  # rows of 1s / 2s, x2, summed
        shapes = {"reduce_shape": ("(float32[5])", "(float32[6])"),
                  "reduce_dtype": ("(float32[7])", "(int32[7])"),
                  "pmap_shape": ("(float32[4,4])", "(float32[4,5])"),
                  "jit_shape": ("(float32[4,4])", "(float32[4,5])")}
        for step, pair in shapes.items():
            got = view[step]
            assert got["error"] == "ProgramMismatchError", got
            assert got["seconds"] < 30
            assert (got["mine"], got["theirs"], got["process"]) == (pair[me], pair[other],
                                                                    other)
            assert f"process {me} passes {pair[me]}, process {other} passes {pair[other]}" \
                in got["message"]
        assert view["reduce_shape"]["function"] == "funcgrad.distributed.all_reduce"
        assert view["reduce_shape"]["message"].startswith("funcgrad.distributed.all_reduce: ")
        assert view["pmap_shape"]["function"] == "pmap_<lambda>"
        assert view["reduce_after"]["value"] == [3.0, 3.0]


LOST_WHILE_CHECKING = """
import os, sys, time, numpy as np, funcgrad, funcgrad.distributed as dist
dist.initialize(initialization_timeout=30, heartbeat_timeout=3, shutdown_timeout=10,
                program_check_timeout=60)
start = time.monotonic()
if funcgrad.process_index() == 1:
    time.sleep(2)
    os._exit(3)                       # never reaches the all_reduce
try:
    dist.all_reduce(np.ones(3, np.float32))   # waits in the check for process 1
except dist.ProcessLostError as error:
    print(f"LOST after {time.monotonic() - start:.1f} s: {error.lost}", flush=True)
    sys.exit(0)
"""


@pytest.mark.slow
def test_a_process_lost_during_the_check_raises_process_lost():
    """The check waits in short steps, so the watchdog's ProcessLostError still arrives."""
    ((code0, out0, err0), (code1, _, _)), _ = procs.run_ranks(
        ["-c", LOST_WHILE_CHECKING], timeout=45, FUNCGRAD_CPU_DEVICES=1)
    assert code1 == 3
    assert code0 == 0, err0[-3000:]
    lost = next(line for line in out0.splitlines() if line.startswith("LOST"))
    assert float(lost.split()[2]) < 2 + 3 + 5 and lost.endswith("(1,)")
