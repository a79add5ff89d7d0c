"""Dataset types: map-style (``Dataset``) and streaming (``IterableDataset``), plus combinators.

A map-style dataset answers ``len(ds)`` and ``ds[i]``; it may also answer ``ds.__getitems__(indices)``
with a list of items, which the DataLoader uses to fetch a whole batch in one call. An iterable
dataset yields items from ``__iter__``; in worker processes each worker runs its own copy and should
read ``get_worker_info()`` to produce only its share.

Example:
    >>> import numpy as np
    >>> from funcgrad.data import TensorDataset, random_split
    >>> ds = TensorDataset(np.arange(10.0), np.arange(10) % 2)
    >>> train, val = random_split(ds, [0.8, 0.2], seed=0)
    >>> len(train), len(val)
    (8, 2)
"""
import bisect
import numbers
import operator

import numpy as np

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "ArrayDataset", "Subset",
           "ConcatDataset", "ChainDataset", "StackDataset", "random_split"]


def _as_index(index, length, where):
    """Validate an integer index (negative counts from the end) against ``length``."""
    try:
        i = operator.index(index)
    except TypeError:
        raise TypeError(f"{where}: index must be an integer, got {index!r} "
                        f"of type {type(index).__name__}") from None
    if i < 0:
        i += length
    if not 0 <= i < length:
        raise IndexError(f"{where}: index {index} is out of range for a dataset of length {length}")
    return i


class Dataset:
    """Base class of map-style datasets: subclasses define ``__getitem__`` and ``__len__``.

    Optionally define ``__getitems__(self, indices) -> list`` to fetch a batch at once (the
    DataLoader then calls it instead of ``__getitem__`` once per index). ``ds1 + ds2`` concatenates.

    Example:
        >>> from funcgrad.data import Dataset
        >>> class Squares(Dataset):
        ...     def __len__(self):
        ...         return 4
        ...     def __getitem__(self, i):
        ...         return i * i
        >>> [Squares()[i] for i in range(4)]
        [0, 1, 4, 9]
    """

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__}.__getitem__: this Dataset subclass does not "
                        f"define __getitem__ (asked for index {index!r}); map-style datasets "
                        f"must define __getitem__ and __len__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset:
    """Base class of streaming datasets: subclasses define ``__iter__``.

    With ``num_workers > 0`` every worker iterates its own copy of the dataset, so ``__iter__``
    should use ``funcgrad.data.get_worker_info()`` to yield only its share (otherwise every item
    appears once per worker).

    Example:
        >>> from funcgrad.data import IterableDataset
        >>> from funcgrad.data import get_worker_info
        >>> class Range(IterableDataset):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         info = get_worker_info()
        ...         start, step = (0, 1) if info is None else (info.id, info.num_workers)
        ...         return iter(range(start, self.n, step))
        >>> list(Range(5))
        [0, 1, 2, 3, 4]
    """

    def __iter__(self):
        raise TypeError(f"{type(self).__name__}.__iter__: this IterableDataset subclass does "
                        f"not define __iter__")

    def __add__(self, other):
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Items are tuples of rows of equally long arrays: ``ds[i] == (a[i], b[i], ...)``.

    The arrays are converted to NumPy (a ``funcgrad.Array`` is copied to the host once, here), so
    worker processes never touch device arrays. Batches are fetched with one fancy-index per array.

    Example:
        >>> from funcgrad.data import TensorDataset
        >>> import numpy as np
        >>> ds = TensorDataset(np.arange(6).reshape(3, 2), np.array([0, 1, 0]))
        >>> x, y = ds[1]
        >>> x.tolist(), int(y)
        ([2, 3], 1)
    """

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("TensorDataset: needs at least one array, got none")
        converted = []
        for k, a in enumerate(arrays):
            arr = np.asarray(a)
            if arr.ndim == 0:
                raise ValueError(f"TensorDataset: array {k} is a scalar (shape ()); every array "
                                 f"needs a leading item axis")
            converted.append(arr)
        lengths = [a.shape[0] for a in converted]
        if len(set(lengths)) != 1:
            raise ValueError(f"TensorDataset: all arrays need the same length along axis 0, got "
                             f"lengths {lengths} (shapes {[a.shape for a in converted]})")
        self.arrays = tuple(converted)

    def __len__(self):
        return self.arrays[0].shape[0]

    def __getitem__(self, index):
        i = _as_index(index, len(self), "TensorDataset.__getitem__")
        return tuple(a[i] for a in self.arrays)

    def __getitems__(self, indices):
        idx = np.asarray(indices, dtype=np.int64)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            bad = [int(i) for i in idx if not -n <= i < n][:5]
            raise IndexError(f"TensorDataset.__getitems__: indices {bad} are out of range for a "
                             f"dataset of length {n}")
        columns = [a[idx] for a in self.arrays]
        return [tuple(col[j] for col in columns) for j in range(idx.size)]


ArrayDataset = TensorDataset
"""Alias of :class:`TensorDataset` (the name says what funcgrad stores: NumPy arrays)."""


class Subset(Dataset):
    """The items of ``dataset`` at ``indices``, in that order: ``Subset(ds, idx)[k] == ds[idx[k]]``.

    Example:
        >>> from funcgrad.data import Subset, TensorDataset
        >>> import numpy as np
        >>> ds = TensorDataset(np.arange(10))
        >>> sub = Subset(ds, [7, 2])
        >>> len(sub), int(sub[0][0])
        (2, 7)
    """

    def __init__(self, dataset, indices):
        self.dataset = dataset
        if isinstance(indices, np.ndarray):
            indices = indices.reshape(-1).tolist()
        self.indices = [operator.index(i) for i in indices]

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[self.indices[_as_index(index, len(self), "Subset.__getitem__")]]

    def __getitems__(self, indices):
        mapped = [self.indices[_as_index(i, len(self), "Subset.__getitems__")] for i in indices]
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            return getitems(mapped)
        return [self.dataset[i] for i in mapped]


class StackDataset(Dataset):
    """Datasets of the same length side by side: ``StackDataset(a, b)[i] == (a[i], b[i])`` and
    ``StackDataset(image=a, label=b)[i] == {"image": a[i], "label": b[i]}`` (as
    ``torch.utils.data.StackDataset``); batches use each dataset's ``__getitems__`` if any.

    Example:
        >>> import numpy as np
        >>> from funcgrad.data import StackDataset, TensorDataset
        >>> ds = StackDataset(x=np.arange(3) * 10, y=TensorDataset(np.arange(3)))
        >>> ds[1]["x"], int(ds[1]["y"][0]), len(ds)
        (np.int64(10), 1, 3)
    """

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("StackDataset: give the datasets either positionally (items are "
                             "tuples) or by keyword (items are dicts), not both")
        if not args and not kwargs:
            raise ValueError("StackDataset: at least one dataset is required")
        self.datasets = args if args else kwargs
        parts = args if args else tuple(kwargs.values())
        lengths = [len(d) for d in parts]
        if len(set(lengths)) != 1:
            named = list(kwargs) if kwargs else list(range(len(args)))
            raise ValueError(f"StackDataset: the datasets have different lengths "
                             f"{dict(zip(named, lengths))}")
        self._length = lengths[0]

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        i = _as_index(index, self._length, "StackDataset.__getitem__")
        if isinstance(self.datasets, dict):
            return {k: d[i] for k, d in self.datasets.items()}
        return tuple(d[i] for d in self.datasets)

    def __getitems__(self, indices):
        idx = [_as_index(i, self._length, "StackDataset.__getitems__") for i in indices]

        def column(d):
            getitems = getattr(d, "__getitems__", None)
            rows = getitems(idx) if getitems is not None else [d[i] for i in idx]
            if len(rows) != len(idx):
                raise ValueError(f"StackDataset.__getitems__: a dataset returned {len(rows)} "
                                 f"items for {len(idx)} indices")
            return rows
        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: cols[k][j] for k in cols} for j in range(len(idx))]
        cols = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols) for j in range(len(idx))]


class ConcatDataset(Dataset):
    """Map-style datasets joined end to end: indices run through the first, then the second...

    Example:
        >>> from funcgrad.data import ConcatDataset, TensorDataset
        >>> import numpy as np
        >>> ds = ConcatDataset([TensorDataset(np.arange(3)), TensorDataset(np.arange(10, 12))])
        >>> len(ds), int(ds[3][0])
        (5, 10)
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: needs at least one dataset, got an empty list")
        for k, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(f"ConcatDataset: dataset {k} is an IterableDataset "
                                f"({type(d).__name__}); use ChainDataset for streams")
        self.cumulative_sizes = np.cumsum([len(d) for d in self.datasets]).tolist()

    def __len__(self):
        return self.cumulative_sizes[-1]

    def _locate(self, index):
        i = _as_index(index, len(self), "ConcatDataset.__getitem__")
        which = bisect.bisect_right(self.cumulative_sizes, i)
        start = self.cumulative_sizes[which - 1] if which else 0
        return which, i - start

    def __getitem__(self, index):
        which, local = self._locate(index)
        return self.datasets[which][local]


class ChainDataset(IterableDataset):
    """Iterable datasets chained one after another.

    Example:
        >>> from funcgrad.data import ChainDataset, IterableDataset
        >>> class Count(IterableDataset):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(range(self.n))
        >>> list(ChainDataset([Count(2), Count(3)]))
        [0, 1, 0, 1, 2]
    """

    def __init__(self, datasets):
        self.datasets = list(datasets)

    def __iter__(self):
        for d in self.datasets:
            yield from d

    def __len__(self):
        return sum(len(d) for d in self.datasets)


def _split_lengths(lengths, n, where):
    """Turn counts or fractions into counts that add up to ``n``."""
    lengths = list(lengths)
    if not lengths:
        raise ValueError(f"{where}: lengths is empty")
    is_fraction = (all(isinstance(x, numbers.Real) for x in lengths)
                   and any(isinstance(x, float) for x in lengths)
                   and abs(sum(lengths) - 1.0) < 1e-6)
    if is_fraction:
        if any(not 0.0 <= x <= 1.0 for x in lengths):
            raise ValueError(f"{where}: fractions must lie in [0, 1], got {lengths}")
        counts = [int(np.floor(n * frac)) for frac in lengths]
        for k in range(n - sum(counts)):       # hand out the remainder one by one, round robin
            counts[k % len(counts)] += 1
        return counts
    counts = []
    for x in lengths:
        try:
            c = operator.index(x)
        except TypeError:
            raise TypeError(f"{where}: lengths must be integer counts or fractions that sum to 1, "
                            f"got {lengths} (sum {sum(lengths)})") from None
        if c < 0:
            raise ValueError(f"{where}: lengths must be non-negative, got {lengths}")
        counts.append(c)
    if sum(counts) != n:
        raise ValueError(f"{where}: the lengths {counts} add up to {sum(counts)} but the dataset "
                         f"has {n} items")
    return counts


def random_split(dataset, lengths, seed=None, generator=None):
    """Split ``dataset`` into non-overlapping random ``Subset``s of the given lengths.

    ``lengths`` are item counts adding up to ``len(dataset)``, or fractions adding up to 1 (the
    rounding remainder goes to the first splits, one item each). The permutation comes from
    ``numpy.random.default_rng(seed)`` (or the given ``generator``), so a fixed seed gives a fixed split.

    Example:
        >>> from funcgrad.data import TensorDataset, random_split
        >>> import numpy as np
        >>> a, b = random_split(TensorDataset(np.arange(5)), [3, 2], seed=0)
        >>> sorted(a.indices + b.indices)
        [0, 1, 2, 3, 4]
    """
    n = len(dataset)
    counts = _split_lengths(lengths, n, "random_split")
    rng = generator if generator is not None else np.random.default_rng(seed)
    perm = rng.permutation(n).tolist()
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, perm[start:start + c]))
        start += c
    return out
