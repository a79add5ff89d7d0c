"""One process of the multi-process tests: joins the run described by its environment and
prints what it sees as one JSON line."""
import json
import sys

import funcgrad
import funcgrad.numpy as jnp

funcgrad.distributed.initialize(initialization_timeout=30, heartbeat_timeout=10,
                                shutdown_timeout=10)
x = jnp.arange(3.0) + funcgrad.process_index()
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
}), flush=True)
funcgrad.distributed.shutdown()
sys.exit(0)
