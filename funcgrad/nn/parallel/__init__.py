"""PyTorch-style parallelism over devices: ``DistributedDataParallel`` (``torch.nn.parallel``)
for data parallelism over every process's devices; ``parallelize_module`` with
``ColwiseParallel``/``RowwiseParallel``/``SequenceParallel`` (and
``PrepareModuleInput``/``PrepareModuleOutput``) plans, as
``torch.distributed.tensor.parallel``, and ``fully_shard``, as FSDP2, which place a module's
parameters over a ``funcgrad.sharding.Mesh``; a plain ``funcgrad.jit`` training step then runs
over the mesh, partitioned by XLA (docs/parallel.md).

Example:
    >>> from funcgrad.nn import parallel
    >>> sorted(n for n in parallel.__all__ if n.endswith("Parallel"))
    ['ColwiseParallel', 'DistributedDataParallel', 'RowwiseParallel', 'SequenceParallel']
"""
from funcgrad.nn.parallel.api import distribute_tensor, fully_shard, parallelize_module
from funcgrad.nn.parallel.ddp import DistributedDataParallel
from funcgrad.nn.parallel.placement import Placement, Replicate, Shard
from funcgrad.nn.parallel.style import (ColwiseParallel, ParallelStyle, PrepareModuleInput,
                                        PrepareModuleOutput, RowwiseParallel, SequenceParallel)

__all__ = ["DistributedDataParallel", "parallelize_module", "fully_shard", "distribute_tensor",
           "ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel",
           "PrepareModuleInput", "PrepareModuleOutput", "Placement", "Shard", "Replicate"]
