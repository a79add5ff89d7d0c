"""One of two processes (2 host CPU devices each) that save ``checkpoint_state`` into DIR
together, then load it back re-sharded over the 4 devices of the run; prints one JSON line."""
import json
import os
import sys

import funcgrad
import funcgrad.distributed.checkpoint as dcp
import checkpoint_state as cs

funcgrad.distributed.initialize(initialization_timeout=30, heartbeat_timeout=10,
                                shutdown_timeout=10)
path = sys.argv[1]
devices = funcgrad.devices()
dcp.save(cs.state(devices), checkpoint_id=path)
files = sorted(os.listdir(path))
back = dcp.load(cs.targets(devices), checkpoint_id=path)
print(json.dumps({"process": funcgrad.process_index(), "files": files,
                  "bad": cs.local_mismatches(back)}), flush=True)
funcgrad.distributed.shutdown()
