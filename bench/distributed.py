"""All-reduce across 2 processes on this machine: funcgrad vs torch.distributed (gloo) vs JAX.

Row (1) of issue 18: the sum of 4 MB of float32 (1M elements) over 2 processes on 127.0.0.1,
one CPU device each, every library on its own gloo collectives over TCP:

* funcgrad ``funcgrad.distributed.all_reduce(x)`` on a device array, and on a NumPy value
  (which it first copies to the device);
* funcgrad ``pmap(lambda v: lax.psum(v, 'i'))`` over the run's devices (a compiled program);
* the compiled program behind ``all_reduce`` launched bare (jaxlib's ``execute_sharded`` on a
  prepared buffer, no funcgrad code per call): the time of XLA's gloo all-reduce itself;
* ``torch.distributed.all_reduce(t)`` (gloo, in place on a CPU tensor);
* JAX: ``jax.distributed.initialize`` + ``jax.pmap(lambda v: lax.psum(v, 'i'))``.

Each process times ``--number`` calls (the result awaited) after a barrier, ``--repeat``
rounds; funcgrad's three variants alternate rounds in one pair of processes. The libraries run
one after another (never at the same time), each in 2 fresh processes, and the whole set is run
``--cycles`` times so that a change of the machine's load affects every row alike; the table
gives the median over cycles of rank 0's median time per call, the ratio to the fastest row,
and each cycle's value (their spread says how much the load moved the numbers).
torch and jax are taken from ``--ref-python`` (default: this interpreter; rows whose library
is not importable there are skipped).

Run: ``python bench/distributed.py [--ref-python /path/to/python] [--quick]``.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 1 << 20          # float32 elements: 4 MB
ROWS = {                # row name -> (worker kind, variant)
    "funcgrad all_reduce (device array)": ("funcgrad", "eager"),
    "funcgrad all_reduce (NumPy value)": ("funcgrad", "eager_host"),
    "funcgrad pmap(psum)": ("funcgrad", "pmap"),
    "XLA psum program, bare launch": ("funcgrad", "bare"),
    "torch.distributed all_reduce (gloo)": ("torch", "all_reduce"),
    "JAX pmap(psum)": ("jax", "pmap"),
}


# --- one process of a run ---------------------------------------------------------------
def _timed(calls, ready, barrier, number, repeat, check=True):
    """{variant: per-call seconds of each round} for ``calls`` (variant -> (call, value of
    the result as a NumPy array)), their rounds alternating; and {variant: first element of
    the last result} (None without ``check``)."""
    for call, _ in calls.values():
        for _ in range(5):
            ready(call())
    times = {name: [] for name in calls}
    last = {}
    for _ in range(repeat):
        for name, (call, _) in calls.items():
            barrier()
            t0 = time.perf_counter()
            for _ in range(number):
                out = call()
            ready(out)
            times[name].append((time.perf_counter() - t0) / number)
            last[name] = out
    return times, {name: float(value(last[name]).reshape(-1)[0])
                   for name, (_, value) in calls.items()} if check else None


def _funcgrad(rank, port, number, repeat):
    import numpy as np
    sys.path.insert(0, ROOT)
    import funcgrad
    import funcgrad.distributed as dist
    from funcgrad import lax
    from funcgrad.core.avals import ShapedArray
    from funcgrad.lowering import sharding
    dist.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=rank,
                    initialization_timeout=60, heartbeat_timeout=30)
    host = np.full(SIZE, rank + 1.0, np.float32)
    device = funcgrad.device_put(host)
    devices = funcgrad.devices()
    row = funcgrad.device_put(host[None])   # this process's entry of the global pmap
    step = funcgrad.pmap(lambda v: lax.psum(v, "i"), axis_name="i", devices=devices)
    dist.all_reduce(device)   # compiles the program behind all_reduce, launched bare below
    from funcgrad.distributed import collectives
    (program, *_), = collectives._program("sum", tuple(devices))._cache.values()
    whole = sharding.assemble(ShapedArray((SIZE,), np.float32, False),
                              sharding.mapped_sharding(tuple(devices), 1, None), [device._buf])

    def bare():
        return program.loaded.execute_sharded([whole._buf]) \
            .disassemble_into_single_device_arrays()[0][0]
    calls = {
        "eager": (lambda: dist.all_reduce(device), np.asarray),
        "eager_host": (lambda: dist.all_reduce(host), np.asarray),
        # a pmap over every process's devices returns this process's part: its row
        "pmap": (lambda: step(row), lambda out: np.asarray(out)[0]),
        "bare": (bare, np.asarray),
    }
    result = _timed(calls, lambda o: o.block_until_ready(),
                    lambda: dist.sync_global_devices("round"), number, repeat)
    dist.shutdown()
    return result


def _torch(rank, port, number, repeat):
    import torch
    import torch.distributed as tdist
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                             world_size=2)
    # in place, as users call it, on zeros (which stay zeros, so no value grows to inf)
    t = torch.zeros(SIZE, dtype=torch.float32)
    times, _ = _timed({"all_reduce": (lambda: tdist.all_reduce(t), None)}, lambda o: None,
                      tdist.barrier, number, repeat, check=False)
    value = torch.full((SIZE,), rank + 1.0, dtype=torch.float32)
    tdist.all_reduce(value)
    result = times, {"all_reduce": float(value[0])}
    tdist.destroy_process_group()
    return result


def _jax(rank, port, number, repeat):
    import jax
    import numpy as np
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=rank)
    from jax.experimental import multihost_utils
    x = jax.device_put(np.full((1, SIZE), rank + 1.0, np.float32), jax.local_devices()[0])
    step = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")
    result = _timed({"pmap": (lambda: step(x),
                              lambda o: np.asarray(o.addressable_shards[0].data))},
                    lambda o: o.block_until_ready(),
                    lambda: multihost_utils.sync_global_devices("round"), number, repeat)
    jax.distributed.shutdown()
    return result


def worker(kind, rank, port, number, repeat):
    run = {"funcgrad": _funcgrad, "torch": _torch, "jax": _jax}[kind]
    times, check = run(rank, port, number, repeat)
    print(json.dumps({"times": times, "check": check}), flush=True)


# --- the driver ---------------------------------------------------------------------------
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _importable(python, module):
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True,
                          timeout=120).returncode == 0


def run_case(kind, python, number, repeat, timeout=300):
    """Rank 0's {variant: per-call times (seconds)} of worker ``kind`` over 2 fresh
    processes, after checking every process's sum (1 + 2 = 3)."""
    port = _free_port()
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="1", JAX_PLATFORMS="cpu",
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    env.pop("XLA_FLAGS", None)
    args = [os.path.abspath(__file__), "--worker", kind, "--port", str(port),
            "--number", str(number), "--repeat", str(repeat)]
    procs = [subprocess.Popen([python, *args, "--rank", str(r)], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True) for r in range(2)]
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(f"{kind} rank {len(results)} failed:\n{err.decode()[-3000:]}")
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    for r in results:
        for variant, value in r["check"].items():
            if abs(value - 3.0) > 1e-6:
                raise AssertionError(f"{kind} {variant}: the sum is {value}, not 1 + 2 = 3")
    return results[0]["times"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker")
    parser.add_argument("--rank", type=int)
    parser.add_argument("--port", type=int)
    parser.add_argument("--number", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ref-python", default=os.environ.get("FUNCGRAD_BENCH_REF_PYTHON",
                                                               sys.executable))
    parser.add_argument("--cases", help="comma-separated libraries to run: funcgrad, torch, "
                        "jax (default: all)")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.rank, args.port, args.number, args.repeat)
        return
    if args.quick:
        args.number, args.repeat, args.cycles = 5, 5, 1
    wanted = set(args.cases.split(",")) if args.cases else None
    kinds = {}
    for kind in ("funcgrad", "torch", "jax"):
        if wanted is not None and kind not in wanted:
            continue
        python = sys.executable if kind == "funcgrad" else args.ref_python
        if kind != "funcgrad" and not _importable(python, kind):
            print(f"({kind} is not importable by {python}; its row is skipped)")
            continue
        kinds[kind] = python
    runs = {name: [] for name, (kind, _) in ROWS.items() if kind in kinds}
    for _ in range(args.cycles):
        for kind, python in kinds.items():
            times = run_case(kind, python, args.number, args.repeat)
            for name, (k, variant) in ROWS.items():
                if k == kind:
                    runs[name].append(statistics.median(times[variant]))
    rows = {name: statistics.median(r) for name, r in runs.items()}
    fastest = min(rows.values())
    print(f"all-reduce of {SIZE * 4 / 2**20:.0f} MB float32 over 2 processes x 1 CPU device "
          f"(127.0.0.1, gloo); rank 0's median of {args.repeat} rounds of {args.number} calls, "
          f"median over {args.cycles} cycles")
    print(f"| {'':38} | ms per call | vs fastest | each cycle (ms) |")
    print(f"| {'-' * 38} | ----------: | ---------: | --- |")
    for name, t in rows.items():
        cycles = " / ".join(f"{r * 1e3:.1f}" for r in runs[name])
        print(f"| {name:38} | {t * 1e3:11.2f} | {t / fastest:9.2f}x | {cycles} |")


if __name__ == "__main__":
    main()
