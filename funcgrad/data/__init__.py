"""funcgrad.data: datasets, samplers and a DataLoader that keeps the device fed.

The names follow ``torch.utils.data``. Batches are NumPy arrays (nested as the items are);
``DataLoader(..., device=dev)`` or ``prefetch_to_device`` moves them to funcgrad devices ahead
of use. Importing this package starts nothing: the XLA runtime starts when device arrays are
first made, and worker processes (started with 'forkserver' or 'spawn') never start it.

Example:
    >>> import numpy as np
    >>> from funcgrad.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(np.random.rand(100, 3).astype(np.float32), np.arange(100) % 10)
    >>> loader = DataLoader(ds, batch_size=32, shuffle=True, seed=0, drop_last=True)
    >>> [x.shape for x, y in loader]
    [(32, 3), (32, 3), (32, 3)]
"""
from ._main_rerun import UnguardedMainError
from ._pool import WorkerDiedError, WorkerTimeoutError
from ._worker import WorkerInfo, current_rng, get_worker_info
from .collate import default_collate, default_convert
from .dataloader import DataLoader
from .dataset import (ArrayDataset, ChainDataset, ConcatDataset, Dataset, IterableDataset,
                      StackDataset, Subset, TensorDataset, random_split)
from .prefetch import prefetch_to_device, shard
from .progress import progress
from .sampler import (BatchSampler, DistributedSampler, RandomSampler, Sampler,
                      SequentialSampler, SubsetRandomSampler, WeightedRandomSampler)
from . import datasets, transforms

__all__ = [
    "DataLoader", "Dataset", "IterableDataset", "TensorDataset", "ArrayDataset", "Subset",
    "ConcatDataset", "ChainDataset", "StackDataset", "random_split",
    "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler",
    "WeightedRandomSampler", "DistributedSampler",
    "default_collate", "default_convert", "get_worker_info", "WorkerInfo", "current_rng",
    "prefetch_to_device", "shard", "progress", "WorkerDiedError", "WorkerTimeoutError",
    "UnguardedMainError", "datasets", "transforms",
]
