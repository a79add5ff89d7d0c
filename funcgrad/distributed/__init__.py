"""Many processes, one device set: ``funcgrad.distributed``.

Each process of a multi-process run (one per host, or several on one host) calls
``funcgrad.distributed.initialize()`` first; afterwards ``funcgrad.devices()`` lists every
process's devices and ``funcgrad.local_devices()`` its own. ``python -m
funcgrad.distributed.run --nproc-per-node N script.py`` starts such a run on one machine (or
one node of several), in the manner of torchrun; ``funcgrad.distributed.checkpoint`` saves and
loads sharded state with every process writing its own shards. See docs/parallel.md, "Many processes".

Example:
    >>> funcgrad.distributed.is_initialized(), funcgrad.process_count()
    (False, 1)
"""
from funcgrad.distributed import checkpoint  # noqa: F401  (.save / .load, sharded checkpoints)
from funcgrad.distributed.collectives import (all_reduce, broadcast_one_to_all,
                                              process_allgather, sync_global_devices)
from funcgrad.distributed.program_check import ProgramMismatchError
from funcgrad.distributed.runtime import (CoordinatorUnreachableError, DistributedError,
                                          ProcessLostError,
                                          coordinator_address, environment_source, initialize,
                                          is_initialized, shutdown)
from funcgrad.lowering.backend import device_count, devices, local_devices, process_count
from funcgrad.lowering.backend import process_index

__all__ = ["all_reduce", "process_allgather", "broadcast_one_to_all", "sync_global_devices",
           "initialize", "shutdown", "is_initialized", "coordinator_address",
           "environment_source", "DistributedError", "CoordinatorUnreachableError", "ProcessLostError",
           "ProgramMismatchError",
           "process_index", "process_count", "devices", "local_devices", "device_count"]
