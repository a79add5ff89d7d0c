"""funcgrad.nn.parallel: PyTorch's parallel wrappers (``torch.nn.parallel``).

Example:
    >>> from funcgrad.nn.parallel import DistributedDataParallel
    >>> DistributedDataParallel.__name__
    'DistributedDataParallel'
"""
from funcgrad.nn.parallel.ddp import DistributedDataParallel

__all__ = ["DistributedDataParallel"]
