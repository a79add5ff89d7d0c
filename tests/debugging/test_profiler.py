"""funcgrad.profiler: the trace files TensorBoard and Perfetto open, and what they contain.

The events are read from the run's ``<host>.trace.json.gz`` (Chrome trace-event JSON, written
by XLA's profiler next to the ``.xplane.pb``) with gzip and json alone, and from the
``.xplane.pb`` with ``xplane.py`` beside this file, a reader of the protobuf wire format for the
few XSpace fields needed, so no protobuf package is needed.
"""
import gzip
import json
import os

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import profiler
from funcgrad.lowering import dispatch

import xplane  # tests/debugging/xplane.py


def train_step(w, x):
    return w - 0.1 * jnp.tanh(x @ w).sum(0)


def test_trace_has_steps_annotations_compile_and_execution(tmp_path):
    step = funcgrad.jit(train_step)
    w, x = jnp.ones((4, 4)), jnp.ones((2, 4))

    @profiler.annotate_function
    def load_batch():
        return x + 0.0

    with profiler.trace(tmp_path, create_perfetto_trace=True):
        assert dispatch._slow_only[0]                   # each jitted call is named
        for i in range(3):
            with profiler.StepTraceAnnotation("train", step_num=i):
                with profiler.TraceAnnotation("forward", layer="all"):
                    w = step(w, load_batch())
                w.block_until_ready()
    assert not dispatch._slow_only[0]

    files = profiler.trace_files(tmp_path)
    assert sorted(files) == ["perfetto", "trace_json", "xplane"]
    run_dir = os.path.dirname(files["xplane"][0])
    assert os.path.dirname(run_dir) == os.path.join(str(tmp_path), "plugins", "profile")

    events = profiler.read_trace_events(tmp_path)
    by_name = {}
    for e in events:
        by_name.setdefault(e.get("name"), []).append(e)
    steps = sorted(by_name["train"], key=lambda e: e["ts"])
    assert [e["args"]["step_num"] for e in steps] == ["0", "1", "2"]
    assert all(e["ph"] == "X" and e["dur"] > 0 for e in steps)
    assert by_name["forward"][0]["args"]["layer"] == "all"
    assert len(by_name["test_trace_has_steps_annotations_compile_and_execution.<locals>."
                       "load_batch"]) == 3
    # one compilation of the step, three named executions, each inside its step's span
    assert len(by_name["compile train_step"]) == 1
    runs = sorted(by_name["jit(train_step)"], key=lambda e: e["ts"])
    assert len(runs) == 3
    for s, r in zip(steps, runs):
        assert s["ts"] <= r["ts"] and r["ts"] + r["dur"] <= s["ts"] + s["dur"] + 1e-3
    # XLA's own events: the compiler's passes on the module, the runtime's execution
    assert any("funcgrad_train_step" in json.dumps(e.get("args", {})) for e in events)
    assert any(n and "Execute" in n for n in by_name)
    # host Python calls (python_tracer_level=1)
    assert any(n and n.startswith("$") and "train_step" in n for n in by_name)

    # the .xplane.pb that TensorBoard reads holds the same events on the host plane's lines
    space = xplane.planes(open(files["xplane"][0], "rb").read())
    host = space["/host:CPU"]
    on_host = [name for events in host.values() for name in events]
    assert on_host.count("train") == 3 and on_host.count("jit(train_step)") == 3
    assert on_host.count("compile train_step") == 1 and on_host.count("forward") == 3
    python_line = host["python"]          # the thread that ran the steps
    assert python_line.count("train") == 3
    with gzip.open(files["perfetto"][0], "rb") as f:
        perfetto = json.load(f)
    assert "metadata" not in perfetto
    assert len(perfetto["traceEvents"]) == len(events)


def test_start_stop_errors_and_results_unchanged(tmp_path):
    with pytest.raises(RuntimeError, match="no trace is running"):
        profiler.stop_trace()
    f = funcgrad.jit(lambda a: a * 3.0)
    profiler.start_trace(tmp_path)
    try:
        with pytest.raises(RuntimeError, match="already running"):
            profiler.start_trace(tmp_path / "other")
        traced = np.asarray(f(jnp.arange(3.0)))
    finally:
        run_dir = profiler.stop_trace()
    np.testing.assert_array_equal(traced, [0.0, 3.0, 6.0])
    assert os.path.isdir(run_dir)
    np.testing.assert_array_equal(np.asarray(f(jnp.arange(3.0))), [0.0, 3.0, 6.0])


def test_annotate_function_with_a_name():
    @profiler.annotate_function(name="scaled", kind="demo")
    def scale(v):
        return v * 2.0
    np.testing.assert_array_equal(np.asarray(scale(jnp.ones(2))), [2.0, 2.0])
    assert scale.__name__ == "scale"


def test_device_memory_profile_is_gzipped_pprof(tmp_path):
    keep = jnp.ones((512, 512))                 # 1 MiB alive while profiling
    data = profiler.device_memory_profile()
    raw = gzip.decompress(data)
    # a pprof Profile message: field 1 (sample_type) or 2 (sample) first, and string table
    assert raw[0] in (0x0A, 0x12) and b"bytes" in raw
    path = tmp_path / "mem.prof"
    profiler.save_device_memory_profile(path)
    assert gzip.decompress(path.read_bytes())[:1] == raw[:1]
    del keep
