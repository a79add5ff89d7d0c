"""Samplers: the order in which a DataLoader visits the indices of a map-style dataset.

Every random sampler draws from ``numpy.random.default_rng([seed, epoch])``: a fixed seed and
epoch always give the same order. ``set_epoch(e)`` selects the epoch; samplers other than
``DistributedSampler`` also move to the next epoch by themselves after each full pass, so
iterating twice gives two different shuffles (as in PyTorch), and ``set_epoch`` rewinds.

Example:
    >>> from funcgrad.data import RandomSampler
    >>> s = RandomSampler(range(5), seed=0)
    >>> s.set_epoch(3)
    >>> first = list(s)
    >>> s.set_epoch(3)
    >>> list(s) == first
    True
"""
import math
import operator

import numpy as np

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "BatchSampler", "WeightedRandomSampler", "DistributedSampler"]


def _fresh_seed():
    """A random 63-bit seed from the operating system's entropy."""
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))


def _check_seed(seed, where):
    if seed is None:
        return _fresh_seed()
    try:
        seed = operator.index(seed)
    except TypeError:
        raise TypeError(f"{where}: seed must be an int or None, got {seed!r}") from None
    if seed < 0:
        raise ValueError(f"{where}: seed must be non-negative, got {seed}")
    return seed


class Sampler:
    """Base class: an iterable of dataset indices (or of index lists, for batch samplers).

    Subclasses define ``__iter__`` and usually ``__len__``. A sampler with ``set_epoch`` gets the
    DataLoader's epoch before each pass.

    Example:
        >>> from funcgrad.data import Sampler
        >>> class Evens(Sampler):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(range(0, self.n, 2))
        ...     def __len__(self):
        ...         return (self.n + 1) // 2
        >>> list(Evens(5))
        [0, 2, 4]
    """

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise TypeError(f"{type(self).__name__}.__iter__: this Sampler subclass does not define "
                        f"__iter__")


class _EpochSampler(Sampler):
    """Shared epoch bookkeeping: ``indices()`` for the current epoch, then advance."""

    def __init__(self, seed):
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        """Make the next pass use ``epoch`` (an int >= 0)."""
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError(f"{type(self).__name__}.set_epoch: epoch must be >= 0, got {epoch}")
        self.epoch = epoch

    def _rng(self):
        return np.random.default_rng([self.seed, self.epoch])

    def _take(self):
        """This pass's indices as an array; then move to the next epoch."""
        idx = self.indices()
        self.epoch += 1
        return idx

    def __iter__(self):
        return iter(self._take().tolist())


class SequentialSampler(Sampler):
    """Indices ``0, 1, ..., len(data_source) - 1`` in order.

    Example:
        >>> from funcgrad.data import SequentialSampler
        >>> list(SequentialSampler(range(3)))
        [0, 1, 2]
    """

    def __init__(self, data_source):
        self.data_source = data_source

    def indices(self):
        """All indices as an int64 array."""
        return np.arange(len(self.data_source), dtype=np.int64)

    _take = indices

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(_EpochSampler):
    """A random permutation of the indices (or ``num_samples`` draws with ``replacement=True``).

    Without replacement and with ``num_samples > len(data_source)``, whole permutations are
    concatenated (each index appears ``num_samples // n`` or one more times).

    Example:
        >>> from funcgrad.data import RandomSampler
        >>> s = RandomSampler(range(4), seed=1)
        >>> sorted(s)
        [0, 1, 2, 3]
        >>> len(RandomSampler(range(4), replacement=True, num_samples=10, seed=1))
        10
    """

    def __init__(self, data_source, replacement=False, num_samples=None, seed=None):
        super().__init__(_check_seed(seed, "RandomSampler"))
        self.data_source = data_source
        self.replacement = bool(replacement)
        if num_samples is not None:
            num_samples = operator.index(num_samples)
            if num_samples <= 0:
                raise ValueError(f"RandomSampler: num_samples must be a positive int, got "
                                 f"{num_samples}")
        self._num_samples = num_samples

    @property
    def num_samples(self):
        """How many indices one pass yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def indices(self):
        """The current epoch's indices as an int64 array (does not advance the epoch)."""
        n, m, rng = len(self.data_source), self.num_samples, self._rng()
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        if self.replacement:
            return rng.integers(0, n, size=m, dtype=np.int64)
        reps = -(-m // n)
        return np.concatenate([rng.permutation(n) for _ in range(reps)])[:m].astype(np.int64)

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(_EpochSampler):
    """The given indices in a random order (a fresh order each epoch).

    Example:
        >>> from funcgrad.data import SubsetRandomSampler
        >>> sorted(SubsetRandomSampler([5, 7, 9], seed=0))
        [5, 7, 9]
    """

    def __init__(self, indices, seed=None):
        super().__init__(_check_seed(seed, "SubsetRandomSampler"))
        self.subset = np.asarray(list(indices), dtype=np.int64)

    def indices(self):
        """The current epoch's indices as an int64 array (does not advance the epoch)."""
        return self.subset[self._rng().permutation(len(self.subset))]

    def __len__(self):
        return len(self.subset)


class WeightedRandomSampler(_EpochSampler):
    """``num_samples`` indices drawn with probability proportional to ``weights``.

    Example:
        >>> from funcgrad.data import WeightedRandomSampler
        >>> s = WeightedRandomSampler([0.0, 1.0, 0.0], num_samples=4, seed=0)
        >>> list(s)
        [1, 1, 1, 1]
    """

    def __init__(self, weights, num_samples, replacement=True, seed=None):
        super().__init__(_check_seed(seed, "WeightedRandomSampler"))
        w = np.asarray(weights, dtype=np.float64).reshape(-1)
        if w.size == 0:
            raise ValueError("WeightedRandomSampler: weights is empty")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            bad = w[~(np.isfinite(w) & (w >= 0))][:5].tolist()
            raise ValueError(f"WeightedRandomSampler: weights must be finite and >= 0, got "
                             f"{bad} among them")
        if w.sum() <= 0:
            raise ValueError(f"WeightedRandomSampler: weights must not all be zero (got "
                             f"{w.size} weights summing to {w.sum()})")
        num_samples = operator.index(num_samples)
        if num_samples <= 0:
            raise ValueError(f"WeightedRandomSampler: num_samples must be a positive int, got "
                             f"{num_samples}")
        nonzero = int(np.count_nonzero(w))
        if not replacement and num_samples > nonzero:
            raise ValueError(f"WeightedRandomSampler: cannot draw num_samples={num_samples} "
                             f"without replacement from {nonzero} indices of non-zero weight")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = bool(replacement)

    def indices(self):
        """The current epoch's indices as an int64 array (does not advance the epoch)."""
        p = self.weights / self.weights.sum()
        return self._rng().choice(self.weights.size, size=self.num_samples,
                                  replace=self.replacement, p=p).astype(np.int64)

    def __len__(self):
        return self.num_samples


class DistributedSampler(_EpochSampler):
    """This replica's share of the indices when ``num_replicas`` copies of a model each see a part.

    A replica is one process, or one device of a process: with P processes of D devices each that
    load separately, use ``num_replicas=P*D`` and ``rank=process_index*D + device_index``.
    Every epoch the (optionally shuffled, seeded by ``seed`` and ``set_epoch``) index list is
    padded by repeating its start, or with ``drop_last=True`` cut, to a multiple of
    ``num_replicas``; rank ``r`` takes positions ``r, r + num_replicas, ...``. Shards never
    overlap except for the padding, and all have the same length. Unlike the other samplers,
    the epoch does not advance by itself: call ``set_epoch`` (the DataLoader's ``set_epoch``
    forwards it) or every epoch gets the same order.

    ``num_replicas``/``rank`` default to ``funcgrad.process_count()``/``process_index()`` in a
    run joined by ``funcgrad.distributed.initialize``, else to the environment variables
    ``WORLD_SIZE``/``RANK`` (1/0 when unset).

    Example:
        >>> from funcgrad.data import DistributedSampler
        >>> shards = [list(DistributedSampler(range(5), num_replicas=2, rank=r, shuffle=False))
        ...           for r in range(2)]
        >>> shards
        [[0, 2, 4], [1, 3, 0]]
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        import os

        from funcgrad.lowering import backend
        super().__init__(_check_seed(seed, "DistributedSampler"))
        run = backend.distributed_runtime()      # a joined run; None: one process
        if num_replicas is None:
            num_replicas = run.num_processes if run else int(os.environ.get("WORLD_SIZE", "1"))
        if rank is None:
            rank = run.process_id if run else int(os.environ.get("RANK", "0"))
        num_replicas, rank = operator.index(num_replicas), operator.index(rank)
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank must be in [0, {num_replicas - 1}] for "
                             f"num_replicas={num_replicas}, got rank={rank}")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        n = len(dataset)
        if self.drop_last:
            self.num_samples = n // num_replicas
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def indices(self):
        """This rank's indices for the current epoch as an int64 array."""
        n = len(self.dataset)
        order = self._rng().permutation(n) if self.shuffle else np.arange(n)
        if self.total_size <= n:
            order = order[:self.total_size]
        elif n > 0:
            order = np.resize(order, self.total_size)     # repeats from the start, cyclically
        return order[self.rank:self.total_size:self.num_replicas].astype(np.int64)

    def _take(self):
        return self.indices()

    def __iter__(self):
        return iter(self.indices().tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last may be shorter).

    Example:
        >>> from funcgrad.data import BatchSampler, SequentialSampler
        >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
        [[0, 1], [2, 3], [4]]
        >>> list(BatchSampler(range(5), batch_size=2, drop_last=True))
        [[0, 1], [2, 3]]
    """

    def __init__(self, sampler, batch_size, drop_last=False):
        try:
            batch_size = operator.index(batch_size)
        except TypeError:
            raise TypeError(f"BatchSampler: batch_size must be a positive int, got "
                            f"{batch_size!r}") from None
        if batch_size <= 0 or isinstance(batch_size, bool):
            raise ValueError(f"BatchSampler: batch_size must be a positive int, got {batch_size}")
        if not isinstance(drop_last, bool):
            raise TypeError(f"BatchSampler: drop_last must be a bool, got {drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def set_epoch(self, epoch):
        """Forward the epoch to the wrapped sampler (when it has ``set_epoch``)."""
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        if isinstance(self.sampler, (SequentialSampler, _EpochSampler)):
            # Our samplers: draw this pass's indices now (not at the first next()), so that an
            # iterator made earlier keeps the epoch it was made for; then slice one array.
            return self._slices(self.sampler._take())
        return self._group()

    def _slices(self, idx):
        bs = self.batch_size
        stop = (len(idx) // bs) * bs if self.drop_last else len(idx)
        flat = idx.tolist()
        for start in range(0, stop, bs):
            yield flat[start:start + bs]

    def _group(self):
        bs = self.batch_size
        batch = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == bs:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
