"""All-reduce across 2 processes on this machine: funcgrad vs torch.distributed (gloo) vs JAX.

Row (1) of issue 18: the sum of 4 MB of float32 (1M elements) over 2 processes on 127.0.0.1,
one CPU device each, every library on its own gloo collectives over TCP:

* funcgrad ``funcgrad.distributed.all_reduce(x)`` on a device array, and on a NumPy value
  (which it first copies to the device);
* funcgrad ``pmap(lambda v: lax.psum(v, 'i'))`` over the run's devices (a compiled program);
* ``torch.distributed.all_reduce(t)`` (gloo, in place on a CPU tensor);
* JAX: ``jax.distributed.initialize`` + ``jax.pmap(lambda v: lax.psum(v, 'i'))``.

Each process times ``--number`` calls (the result awaited) after a barrier, ``--repeat``
rounds. The libraries run one after another (never at the same time), each in 2 fresh
processes, and the whole set is run ``--cycles`` times so that a change of the machine's load
affects every row alike; the table gives the median over cycles of rank 0's median time per
call, and the ratio to the fastest row.
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
CASES = {               # row name -> (worker kind, needs the reference interpreter)
    "funcgrad all_reduce (device array)": ("fg_eager", False),
    "funcgrad all_reduce (NumPy value)": ("fg_eager_host", False),
    "funcgrad pmap(psum)": ("fg_pmap", False),
    "torch.distributed all_reduce (gloo)": ("torch", True),
    "JAX pmap(psum)": ("jax", True),
}


# --- one process of a run ---------------------------------------------------------------
def _timed(call, ready, barrier, number, repeat):
    for _ in range(5):
        ready(call())
    times = []
    for _ in range(repeat):
        barrier()
        t0 = time.perf_counter()
        for _ in range(number):
            out = call()
        ready(out)
        times.append((time.perf_counter() - t0) / number)
    return times, out


def _funcgrad(kind, rank, port, number, repeat):
    import numpy as np
    sys.path.insert(0, ROOT)
    import funcgrad
    import funcgrad.distributed as dist
    from funcgrad import lax
    dist.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=rank,
                    initialization_timeout=60, heartbeat_timeout=30)
    host = np.full(SIZE, rank + 1.0, np.float32)
    if kind == "fg_pmap":
        from funcgrad.lowering import sharding
        devices = funcgrad.devices()
        local = funcgrad.local_devices()
        x = sharding.put_pieces(funcgrad.core.avals.ShapedArray((2, SIZE), np.float32, False),
                                sharding.mapped_sharding(tuple(devices), 2, 0),
                                [host[None]], local)
        step = funcgrad.pmap(lambda v: lax.psum(v, "i"), axis_name="i", devices=devices)

        def call():
            return step(x)

        def local_value(out):    # this process's row of the pmap's output
            return np.asarray(out._buf._arrays[0])
    else:
        x = host if kind == "fg_eager_host" else funcgrad.device_put(host)

        def call():
            return dist.all_reduce(x)
        local_value = np.asarray
    times, out = _timed(call, lambda o: o.block_until_ready(),
                        lambda: dist.sync_global_devices("round"), number, repeat)
    check = float(local_value(out).reshape(-1)[0])
    dist.shutdown()
    return times, check


def _torch(rank, port, number, repeat):
    import torch
    import torch.distributed as tdist
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                             world_size=2)
    t = torch.full((SIZE,), rank + 1.0, dtype=torch.float32)
    # in place, as users call it; the value grows, which does not change the time
    times, _ = _timed(lambda: tdist.all_reduce(t), lambda o: None, tdist.barrier, number,
                      repeat)
    check = torch.full((SIZE,), rank + 1.0)
    tdist.all_reduce(check)
    tdist.destroy_process_group()
    return times, float(check[0])


def _jax(rank, port, number, repeat):
    import jax
    import numpy as np
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=rank)
    from jax.experimental import multihost_utils
    x = jax.device_put(np.full((1, SIZE), rank + 1.0, np.float32), jax.local_devices()[0])
    step = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")
    times, out = _timed(lambda: step(x), lambda o: o.block_until_ready(),
                        lambda: multihost_utils.sync_global_devices("round"), number, repeat)
    check = float(np.asarray(out.addressable_shards[0].data)[0, 0])
    jax.distributed.shutdown()
    return times, check


def worker(kind, rank, port, number, repeat):
    if kind == "torch":
        times, check = _torch(rank, port, number, repeat)
    elif kind == "jax":
        times, check = _jax(rank, port, number, repeat)
    else:
        times, check = _funcgrad(kind, rank, port, number, repeat)
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
    """Rank 0's per-call times (seconds) of ``kind`` over 2 fresh processes."""
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
        if abs(r["check"] - 3.0) > 1e-6 and kind != "torch":
            raise AssertionError(f"{kind}: the sum is {r['check']}, not 1 + 2 = 3")
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
    parser.add_argument("--cases", help="comma-separated worker kinds to run (default: all)")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.rank, args.port, args.number, args.repeat)
        return
    if args.quick:
        args.number, args.repeat, args.cycles = 5, 5, 1
    wanted = set(args.cases.split(",")) if args.cases else None
    cases = {}
    for name, (kind, ref) in CASES.items():
        if wanted is not None and kind not in wanted:
            continue
        python = args.ref_python if ref else sys.executable
        if ref and not _importable(python, kind):
            print(f"({name}: {kind} is not importable by {python}; skipped)")
            continue
        cases[name] = (kind, python)
    runs = {name: [] for name in cases}
    for _ in range(args.cycles):
        for name, (kind, python) in cases.items():
            runs[name].append(statistics.median(
                run_case(kind, python, args.number, args.repeat)))
    rows = {name: statistics.median(r) for name, r in runs.items()}
    fastest = min(rows.values())
    print(f"all-reduce of {SIZE * 4 / 2**20:.0f} MB float32 over 2 processes x 1 CPU device "
          f"(127.0.0.1, gloo); rank 0's median of {args.repeat} rounds of {args.number} calls, "
          f"median over {args.cycles} cycles")
    print(f"| {'':38} | ms per call | vs fastest |")
    print(f"| {'-' * 38} | ----------: | ---------: |")
    for name, t in rows.items():
        print(f"| {name:38} | {t * 1e3:11.2f} | {t / fastest:9.2f}x |")


if __name__ == "__main__":
    main()
