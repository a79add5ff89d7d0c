"""Loads a checkpoint of ``checkpoint_state`` on this process's devices and prints one JSON
line: the keys whose values differ, and how the arrays came to lie.

    python checkpoint_load.py DIR none        # everything on the default device
    python checkpoint_load.py DIR resharded   # checkpoint_state.targets() over the devices
"""
import json
import sys

import funcgrad
import funcgrad.distributed.checkpoint as dcp
from funcgrad.lowering.sharding import ShardedArray
import checkpoint_state as cs

path, mode = sys.argv[1], sys.argv[2]
target = None if mode == "none" else cs.targets(funcgrad.local_devices())
loaded = dcp.load(target, checkpoint_id=path)
leaves = cs.flat(loaded)
print(json.dumps({
    "devices": funcgrad.device_count(),
    "bad": cs.mismatches(loaded),
    "layout": {k: repr(v.sharding) if isinstance(v, ShardedArray) else type(v).__name__
               for k, v in leaves.items()},
}), flush=True)
