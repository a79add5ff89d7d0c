"""One process of the multi-process tests: joins the run described by its environment and
prints what it sees as one JSON line."""
import json
import sys

import numpy as np

import funcgrad
import funcgrad.distributed as dist
import funcgrad.numpy as jnp

funcgrad.distributed.initialize(initialization_timeout=30, heartbeat_timeout=10,
                                shutdown_timeout=10)
me = funcgrad.process_index()
x = jnp.arange(3.0) + me
mine = np.array([me + 1, 10 * (me + 1)], np.float32)
dist.sync_global_devices("start")
print(json.dumps({
    "process_index": funcgrad.process_index(),
    "process_count": funcgrad.process_count(),
    "device_count": funcgrad.device_count(),
    "devices": [[d.id, d.process_index] for d in funcgrad.devices()],
    "local_devices": [d.id for d in funcgrad.local_devices()],
    "local_device_count": funcgrad.local_device_count(),
    "source": funcgrad.distributed.environment_source(),
    "coordinator": funcgrad.distributed.coordinator_address(),
    "default_device": funcgrad.lowering.backend.default_device().id,
    "eager": [float(v) for v in x],
    "reduce": {op: np.asarray(dist.all_reduce(mine, op)).tolist()
               for op in ("sum", "mean", "max", "min")},
    "int_sum": int(dist.all_reduce(np.int32(me + 5))),
    "gather": np.asarray(dist.process_allgather(np.array([me, me + 1], np.int32))).tolist(),
    "gather_tiled": np.asarray(dist.process_allgather(np.array([[me]]), tiled=True)).tolist(),
    "broadcast": np.asarray(dist.broadcast_one_to_all(np.array([7.0 + me]))).tolist(),
    "broadcast_from_1": np.asarray(dist.broadcast_one_to_all(
        np.array([7 + me], np.int32), is_source=me == 1)).tolist(),
}), flush=True)
funcgrad.distributed.shutdown()
sys.exit(0)
