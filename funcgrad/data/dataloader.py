"""DataLoader: batches from a dataset, loaded by worker processes or threads, optionally
moved to devices ahead of use.

Example:
    >>> import numpy as np
    >>> from funcgrad.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(np.arange(10, dtype=np.float32), np.arange(10) % 2)
    >>> loader = DataLoader(ds, batch_size=4, shuffle=True, seed=0)
    >>> [x.shape for x, y in loader]
    [(4,), (4,), (2,)]
"""
import operator
import pickle
import time
import warnings
import weakref

import numpy as np

from . import _main_rerun, _pool, _worker
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler, _fresh_seed

__all__ = ["DataLoader"]

_MAP_KEY = 0        # seed keys: [seed, epoch, _MAP_KEY, batch] / [seed, epoch, _ITER_KEY, worker]
_ITER_KEY = 1


def _describe_indices(key):
    if isinstance(key, (list, tuple)):
        shown = list(key)[:16]
        return f"indices {shown}{'...' if len(key) > 16 else ''}"
    return f"index {key}"


def _reraise_worker_error(info, task):
    """Raise the worker's exception in this process, carrying the worker's traceback."""
    msg = (f"Caught {info['type_name']} in DataLoader worker {info['worker_id']} "
           f"(pid {info['pid']}) while {info['where']}: {info['message']}\n\n"
           f"Original traceback in the worker:\n{info['traceback']}")
    exc_type = None
    if info["type"] is not None:
        try:
            exc_type = pickle.loads(info["type"])
        except Exception:
            exc_type = None
    exc = None
    if exc_type is not None and issubclass(exc_type, BaseException):
        try:
            exc = exc_type(msg)
        except Exception:
            exc = None
    if exc is None or not isinstance(exc, Exception):
        exc = RuntimeError(msg)
    exc.worker_traceback = info["traceback"]
    exc.worker_id = info["worker_id"]
    exc.where = info["where"]
    exc.batch_index = task
    raise exc


class DataLoader:
    """Iterate over ``dataset`` in batches, optionally with worker processes or threads.

    Arguments (as in ``torch.utils.data.DataLoader`` unless noted):
        dataset: a map-style ``Dataset`` (``__getitem__``/``__len__``, optionally
            ``__getitems__``) or an ``IterableDataset``.
        batch_size: items per batch (default 1); None yields single items, unbatched.
        shuffle: visit the items in a seeded random order (map-style only).
        sampler / batch_sampler: a custom order of indices / of index lists.
        num_workers: 0 loads in the calling thread; N > 0 starts N workers.
        collate_fn: turns a list of items into a batch (default: ``default_collate``, which
            stacks into NumPy arrays).
        drop_last: drop the last incomplete batch.
        timeout: seconds to wait for a batch from the workers before raising
            ``WorkerTimeoutError`` (0: wait as long as the workers are alive; a worker that
            dies is reported at once either way).
        worker_init_fn: called as ``worker_init_fn(worker_id)`` in each worker at start.
        multiprocessing_context: start method for worker processes; default 'forkserver'
            where available, else 'spawn' (never 'fork': see docs/data.md).
        prefetch_factor: batches loaded ahead per worker (default 2).
        persistent_workers: keep the workers between epochs (saves their start-up time).
        seed: seeds shuffling and the per-batch ``current_rng()`` that random transforms use;
            a given seed and epoch give the same batches whatever ``num_workers`` and
            ``worker_type``. None draws a seed from the operating system. (funcgrad only.)
        worker_type: "process" (default) or "thread" (cheap items; no pickling). (funcgrad only.)
        device: a funcgrad device: every array leaf of a batch arrives as a ``funcgrad.Array``
            on it, transferred ahead of use. Or a list of devices (or "all"): every leaf is split
            along axis 0 into one part per device, arriving as one sharded Array of shape
            (devices, batch // devices, ...) that pmap consumes without a copy. (funcgrad only; see ``prefetch_to_device``.)
        device_prefetch: how many batches to keep in flight to the device (default 2).
        progress: show a progress bar on stderr (a TTY only, and not when CI is set), or a
            string to use as its label. (funcgrad only.)
        pin_memory: accepted so that PyTorch code runs unchanged, and changes nothing: batches
            are NumPy arrays, and ``funcgrad.device_put`` (or ``device=``) copies them to the
            device asynchronously without pinned buffers.
        generator: a ``numpy.random.Generator`` to draw ``seed`` from (instead of ``seed``).

    Each ``iter(loader)`` is one epoch; the epoch advances by itself, and ``set_epoch(e)``
    chooses it (and forwards it to a custom sampler that has ``set_epoch``).

    Example:
        >>> from funcgrad.data import DataLoader
        >>> import numpy as np
        >>> from funcgrad.data import TensorDataset
        >>> loader = DataLoader(TensorDataset(np.arange(6)), batch_size=4)
        >>> [b[0].tolist() for b in loader], len(loader)
        ([[0, 1, 2, 3], [4, 5]], 2)
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, prefetch_factor=None,
                 persistent_workers=False, seed=None, worker_type="process", device=None,
                 device_prefetch=2, progress=False, pin_memory=False, generator=None):
        self.dataset = dataset
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable and not hasattr(dataset, "__iter__"):
            raise TypeError("DataLoader: the IterableDataset has no __iter__")
        if not self._iterable and not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader: dataset must be a map-style dataset (with "
                            f"__getitem__ and __len__) or an IterableDataset, got "
                            f"{type(dataset).__name__}")
        try:
            num_workers = operator.index(num_workers)
        except TypeError:
            raise TypeError(f"DataLoader: num_workers must be an int >= 0, got "
                            f"{num_workers!r}") from None
        if num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be >= 0, got {num_workers}")
        if worker_type not in ("process", "thread"):
            raise ValueError(f"DataLoader: worker_type must be 'process' or 'thread', got "
                             f"{worker_type!r}")
        if timeout is None or timeout < 0:
            raise ValueError(f"DataLoader: timeout must be a number of seconds >= 0, got "
                             f"{timeout!r}")
        if prefetch_factor is None:
            prefetch_factor = 2
        elif num_workers == 0:
            raise ValueError(f"DataLoader: prefetch_factor={prefetch_factor} needs "
                             f"num_workers > 0 (it counts batches loaded ahead per worker)")
        if operator.index(prefetch_factor) < 1:
            raise ValueError(f"DataLoader: prefetch_factor must be >= 1, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers=True needs num_workers > 0")
        if self._iterable:
            if shuffle:
                raise ValueError("DataLoader: shuffle=True is not possible with an "
                                 "IterableDataset (it has no indices); shuffle inside it")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader: sampler/batch_sampler are not possible with an "
                                 "IterableDataset (it has no indices)")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: pass either sampler or shuffle=True, not both "
                             "(the sampler decides the order)")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(f"DataLoader: batch_sampler excludes batch_size, shuffle, "
                                 f"sampler and drop_last (got batch_size={batch_size}, "
                                 f"shuffle={shuffle}, sampler={sampler!r}, "
                                 f"drop_last={drop_last})")
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise ValueError("DataLoader: drop_last=True needs a batch_size (got None)")
        else:
            try:
                batch_size = operator.index(batch_size)
            except TypeError:
                raise TypeError(f"DataLoader: batch_size must be a positive int or None, got "
                                f"{batch_size!r}") from None
            if batch_size <= 0:
                raise ValueError(f"DataLoader: batch_size must be a positive int or None, got "
                                 f"{batch_size}")
        if generator is not None:
            if seed is not None:
                raise ValueError("DataLoader: pass seed= or generator=, not both")
            if not isinstance(generator, np.random.Generator):
                raise TypeError(f"DataLoader: generator must be a numpy.random.Generator (it "
                                f"draws the loader's seed), got {type(generator).__name__}; "
                                f"funcgrad takes seed= where PyTorch takes a torch.Generator")
            seed = int(generator.integers(0, 2 ** 63 - 1))
        if not isinstance(pin_memory, bool):
            raise TypeError(f"DataLoader: pin_memory must be a bool, got {pin_memory!r}")
        self.pin_memory = pin_memory
        self.seed = _fresh_seed() if seed is None else operator.index(seed)
        self._own_sampler = sampler is None and batch_sampler is None
        if not self._iterable and sampler is None:
            sampler = (RandomSampler(dataset, seed=self.seed) if shuffle
                       else SequentialSampler(dataset))
        if not self._iterable and batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = num_workers
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = bool(persistent_workers)
        self.worker_type = worker_type
        self.device = device
        self.device_prefetch = device_prefetch
        self.progress = progress
        self._epoch = 0
        self._pool = None
        self._current = None
        if num_workers > 0 and worker_type == "process":
            _pool.resolve_context(multiprocessing_context)    # validate early

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    @property
    def epoch(self):
        """The epoch the next ``iter(loader)`` will use."""
        return self._epoch

    def set_epoch(self, epoch):
        """Make the next pass epoch ``epoch``: reshuffles deterministically and reseeds random
        transforms; a custom sampler with ``set_epoch`` (e.g. ``DistributedSampler``) gets it too.

        Example:
            >>> from funcgrad.data import DataLoader
            >>> import numpy as np
            >>> from funcgrad.data import TensorDataset
            >>> loader = DataLoader(TensorDataset(np.arange(8)), batch_size=8, shuffle=True, seed=1)
            >>> loader.set_epoch(2); a = next(iter(loader))[0]
            >>> loader.set_epoch(2); b = next(iter(loader))[0]
            >>> bool((a == b).all())
            True
        """
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError(f"DataLoader.set_epoch: epoch must be >= 0, got {epoch}")
        self._epoch = epoch
        if not self._own_sampler:
            for s in (self.batch_sampler, self.sampler):
                if s is not None and hasattr(s, "set_epoch"):
                    s.set_epoch(epoch)
                    break

    def __len__(self):
        if self._iterable:
            try:
                n = len(self.dataset)
            except TypeError:
                raise TypeError(f"DataLoader.__len__: the IterableDataset "
                                f"{type(self.dataset).__name__} has no __len__, so the number "
                                f"of batches is unknown") from None
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    def _worker_config(self):
        return _worker._WorkerConfig(
            num_workers=self.num_workers, iterable=self._iterable,
            auto_collation=self._auto_collation, collate_fn=self.collate_fn,
            batch_size=self.batch_size, drop_last=self.drop_last,
            worker_init_fn=self.worker_init_fn, base_seed=self.seed,
            worker_type=self.worker_type)

    def _start_pool(self):
        cfg = self._worker_config()
        if self.worker_type == "thread":
            return _pool.ThreadPool(self.dataset, cfg)
        return _pool.ProcessPool(self.dataset, cfg, self.multiprocessing_context)

    def _host_iter(self):
        _main_rerun.stop_if_rerunning("iterates a DataLoader")
        epoch = self._epoch
        self._epoch += 1
        if self._own_sampler and self.sampler is not None and hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
        if self.num_workers == 0:
            return _SingleProcessIter(self, epoch)
        if self.persistent_workers:
            # A new pass takes over the shared workers: an older iterator on them must stop.
            # (Without persistent workers every iterator has its own, and all keep working.)
            old = self._current() if self._current is not None else None
            if old is not None:
                old._superseded = True
            if self._pool is not None:
                try:
                    self._pool.check_alive()
                except _pool.WorkerDiedError as exc:
                    warnings.warn(f"{exc}; starting new workers", RuntimeWarning, stacklevel=3)
                    self._pool.shutdown()
                    self._pool = None
            if self._pool is None:
                self._pool = self._start_pool()
            pool = self._pool
        else:
            pool = self._start_pool()
        it = _MultiWorkerIter(self, pool, epoch, owns_pool=not self.persistent_workers)
        self._current = weakref.ref(it)
        return it

    def __iter__(self):
        it = self._host_iter()
        if self.progress:
            from .progress import progress as _progress
            try:
                total = len(self)
            except TypeError:
                total = None
            label = self.progress if isinstance(self.progress, str) else None
            it = iter(_progress(it, total=total, desc=label))
        if self.device is not None:
            from .prefetch import prefetch_to_device
            it = prefetch_to_device(it, size=self.device_prefetch, devices=self.device)
        return it

    def shutdown(self):
        """Stop persistent workers now (they also stop when the loader is garbage collected).

        Example:
            >>> from funcgrad.data import DataLoader
            >>> import numpy as np
            >>> from funcgrad.data import TensorDataset
            >>> DataLoader(TensorDataset(np.arange(3))).shutdown()
        """
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __repr__(self):
        return (f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size},"
                f" num_workers={self.num_workers}, worker_type={self.worker_type!r}, "
                f"seed={self.seed})")


class _SingleProcessIter:
    """Loads each batch in the calling thread when it is asked for."""

    def __init__(self, loader, epoch):
        self._loader = loader
        self._epoch = epoch
        self._task = 0
        if loader._iterable:
            self._iterator = None
            self._keys = None
            self._rng = np.random.default_rng([loader.seed, epoch, _ITER_KEY, 0])
        else:
            self._keys = iter(loader.batch_sampler if loader._auto_collation else loader.sampler)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        loader = self._loader
        state = _worker._FetchState()
        task = self._task
        try:
            if loader._iterable:
                with _worker._RngScope(self._rng):
                    if self._iterator is None:
                        self._iterator = iter(loader.dataset)
                    data = _worker._fetch_iter(self._iterator, loader.batch_size,
                                               loader.drop_last, loader._auto_collation,
                                               loader.collate_fn, state)
            else:
                k = next(self._keys)
                with _worker._RngScope([loader.seed, self._epoch, _MAP_KEY, task]):
                    data = _worker._fetch_map(loader.dataset, k, loader._auto_collation,
                                              loader.collate_fn, state)
        except StopIteration:
            raise
        except Exception as exc:
            exc.add_note(f"(funcgrad.data.DataLoader: raised while "
                         f"{_worker._describe_where(state, task)})")
            raise
        self._task += 1
        return data


class _MultiWorkerIter:
    """Hands tasks to the workers, keeps ``prefetch_factor`` per worker in flight, and yields
    the results in task order."""

    def __init__(self, loader, pool, epoch, owns_pool):
        self._loader = loader
        self._pool = pool
        self._owns_pool = owns_pool
        self._epoch = epoch
        self._superseded = False
        self._finished = False
        pool.generation += 1
        self._gen = pool.generation
        self._timeout = loader.timeout if loader.timeout > 0 else None
        self._send_idx = 0
        self._rcvd_idx = 0
        self._pending = {}          # task -> (worker, key)
        self._done = {}             # task -> message
        self._exhausted = False
        self._rr = 0                # round-robin cursor
        nw = pool.num_workers
        if loader._iterable:
            self._keys = None
            self._active = list(range(nw))
            for wid in range(nw):
                pool.send(wid, ("reset", self._gen, [loader.seed, epoch, _ITER_KEY, wid]))
        else:
            self._keys = iter(loader.batch_sampler if loader._auto_collation else loader.sampler)
            self._active = list(range(nw))
        try:
            for _ in range(loader.prefetch_factor * nw):
                self._put()
        except BaseException:
            self._finish(broken=True)
            raise

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _choose_worker(self):
        active = self._active
        if self._keys is None:                       # iterable: strict round robin
            wid = active[self._rr % len(active)]
            self._rr += 1
            return wid
        out = self._pool.outstanding
        best = None
        for k in range(len(active)):
            wid = active[(self._rr + k) % len(active)]
            if best is None or out[wid] < out[best]:
                best = wid
        self._rr = (active.index(best) + 1) % len(active)
        return best

    def _put(self):
        if self._exhausted or not self._active:
            return
        task = self._send_idx
        if self._keys is None:
            wid = self._choose_worker()
            msg, key = ("next", self._gen, task), None
        else:
            try:
                key = next(self._keys)
            except StopIteration:
                self._exhausted = True
                return
            wid = self._choose_worker()
            msg = ("batch", self._gen, task, key,
                   [self._loader.seed, self._epoch, _MAP_KEY, task])
        self._pool.send(wid, msg, self._doing)
        self._pool.outstanding[wid] += 1
        self._pending[task] = (wid, key)
        self._send_idx += 1

    def _doing(self, wid):
        tasks = sorted(t for t, (w, _) in self._pending.items() if w == wid and t not in self._done)
        if not tasks:
            return ""

        def one(t):
            key = self._pending[t][1]
            return f"batch {t}" + (f" ({_describe_indices(key)})" if key is not None else "")
        if len(tasks) == 1:
            return f" while loading {one(tasks[0])}"
        return f" with {len(tasks)} batches unfinished: " + ", ".join(one(t) for t in tasks[:4])

    def __next__(self):
        if self._finished:
            raise StopIteration
        if self._superseded:
            raise RuntimeError("DataLoader: this iterator was superseded by a newer "
                               "iter(loader) on the same persistent workers; use the new one")
        try:
            return self._next()
        except StopIteration:
            self._finish()
            raise
        except (KeyboardInterrupt, _pool.WorkerDiedError, _pool.WorkerTimeoutError):
            self._finish(broken=True)
            raise

    def _next(self):
        pool = self._pool
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            task = self._rcvd_idx
            if task in self._done:
                msg = self._done.pop(task)
                wid, key = self._pending.pop(task)
                self._rcvd_idx += 1
                if msg[0] == "end":
                    if wid in self._active:
                        self._active.remove(wid)
                    self._put()
                    continue
                self._put()
                if msg[0] == "err":
                    _reraise_worker_error(msg[3], task)
                return msg[3]
            if not self._pending:
                raise StopIteration
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            got = pool.recv(left, self._doing)
            if got is None:
                wid = self._pending[task][0]
                raise _pool.WorkerTimeoutError(
                    f"DataLoader: timed out after {self._loader.timeout} s waiting for batch "
                    f"{task} from worker {wid} (pid {pool.pids[wid]}); raise timeout= if "
                    f"batches are slow to load")
            wid, msg = got
            if msg[0] == "init_err":
                self._finish(broken=True)
                _reraise_worker_error(msg[3], None)
            pool.outstanding[wid] -= 1
            if msg[1] != self._gen:
                continue                            # from an abandoned earlier epoch
            self._done[msg[2]] = msg

    def close(self):
        """Stop this pass early; workers that are not persistent are shut down."""
        self._finish()

    def _finish(self, broken=False):
        if self._finished:
            return
        self._finished = True
        if self._owns_pool or broken:
            self._pool.shutdown()
            if not self._owns_pool and self._loader._pool is self._pool:
                self._loader._pool = None

    def __del__(self):
        try:
            if not self._finished and self._owns_pool:
                self._pool.shutdown()
        except Exception:
            pass

