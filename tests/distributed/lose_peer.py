"""One process of the lost-process test: rank ``argv[1]`` dies hard two seconds in; the other
keeps computing until funcgrad tells it that a process was lost."""
import os
import sys
import time

import funcgrad

funcgrad.distributed.initialize(initialization_timeout=30, heartbeat_timeout=3,
                                shutdown_timeout=10)
x = funcgrad.numpy.ones(4)
print("up", flush=True)
start = time.monotonic()
if funcgrad.process_index() == int(sys.argv[1]):
    time.sleep(2)
    os._exit(3)
try:
    while time.monotonic() - start < 40:
        x = (x * 1.0).block_until_ready()
        time.sleep(0.05)
except funcgrad.distributed.ProcessLostError as error:
    print(f"LOST after {time.monotonic() - start:.1f} s: {error} {error.lost}", flush=True)
    raise
print("NOT LOST", flush=True)
