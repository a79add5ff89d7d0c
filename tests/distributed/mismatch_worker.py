"""One process of test_program_check.py's two-process run: matching collective programs, then
process 1 feeding different shapes / dtypes to ``all_reduce``, a global ``pmap`` and a sharded
``jit`` over the global mesh; prints what each step gave as one JSON line."""
import json
import sys
import time

import numpy as np

import funcgrad
import funcgrad.distributed as dist
from funcgrad import lax
from funcgrad.distributed import program_check
from funcgrad.sharding import NamedSharding
from funcgrad.sharding import PartitionSpec as P

dist.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10,
                program_check_timeout=20)
me = funcgrad.process_index()
n = funcgrad.local_device_count()
report = {}


def attempt(label, fn):
    start = time.monotonic()
    try:
        value = fn()
        report[label] = {"value": np.asarray(value).tolist()}
    except dist.ProgramMismatchError as exc:
        report[label] = {"error": type(exc).__name__, "message": str(exc),
                         "function": exc.function, "process": exc.process, "mine": exc.mine,
                         "theirs": exc.theirs}
    report[label]["seconds"] = time.monotonic() - start


pmap_sum = funcgrad.pmap(lambda x: lax.psum(x, "i"), axis_name="i")
# matching programs, each called several times: one check per compiled program
attempt("reduce_ok", lambda: [dist.all_reduce(np.full(4, me + 1.0, np.float32))
                              for _ in range(5)][-1])
attempt("pmap_ok", lambda: [pmap_sum(np.full((n, 3), me + 1.0, np.float32))
                            for _ in range(5)][-1])
report["checks_after_matching"] = sum(program_check._counts.values())
# process 1 feeds another shape, then another dtype, to all_reduce; then another shape to pmap
# (each a program new to both processes: the check runs once per compiled program)
attempt("reduce_shape", lambda: dist.all_reduce(np.ones(5 if me == 0 else 6, np.float32)))
attempt("reduce_dtype", lambda: dist.all_reduce(np.ones(7, np.float32 if me == 0 else np.int32)))
attempt("pmap_shape", lambda: pmap_sum(np.ones((n, 4 if me == 0 else 5), np.float32)))
# a sharded jit over the global mesh, fed rows of 4 / 5 columns
rows = NamedSharding(funcgrad.make_mesh((2 * n,), ("d",)), P("d"))
scaled = funcgrad.jit(lambda a: (a * 2.0).sum(1), in_shardings=rows,
                      out_shardings=NamedSharding(rows.mesh, P()))
attempt("jit_ok", lambda: scaled(funcgrad.make_array_from_process_local_data(
    rows, np.full((n, 3), me + 1.0, np.float32))))
attempt("jit_shape", lambda: scaled(funcgrad.make_array_from_process_local_data(
    rows, np.ones((n, 4 if me == 0 else 5), np.float32))))
# nothing was launched: the run goes on
attempt("reduce_after", lambda: dist.all_reduce(np.full(2, me + 1.0, np.float32)))
print(json.dumps(report), flush=True)
dist.shutdown()
sys.exit(0)
