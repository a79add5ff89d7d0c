"""Datasets and functions used by the DataLoader tests.

They live in a module (not in the test files) so that worker processes, which receive them by
pickling, can import them by name.
"""
import os
import signal
import sys
import time

import numpy as np

from funcgrad.data import Dataset, IterableDataset, get_worker_info
from funcgrad.data import transforms as T


def xla_thread_count():
    """Threads of this process started by the XLA runtime (named tf_*)."""
    count = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                count += f.read().startswith("tf_")
        except OSError:
            pass
    return count


class Images(Dataset):
    """n small uint8 images (3, 8, 8) whose pixels encode their index; optional transform."""

    def __init__(self, n=40, transform=None):
        self.images = (np.arange(n, dtype=np.uint8)[:, None, None, None]
                       + np.zeros((1, 3, 8, 8), np.uint8))
        self.labels = np.arange(n) % 10
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        img = self.images[i]
        if self.transform is not None:
            img = self.transform(img)
        return {"image": img, "label": int(self.labels[i]), "index": i}


class BatchedImages(Images):
    """Images with a batched ``__getitems__`` (one fancy index, then per-item transforms)."""

    def __getitems__(self, indices):
        imgs = self.images[np.asarray(indices)]
        t = self.transform
        return [{"image": img if t is None else t(img), "label": int(self.labels[i]),
                 "index": i} for img, i in zip(imgs, indices)]


def random_augment():
    """Augmentation that depends on the loader's per-batch generator (no seed of its own)."""
    return T.Compose([T.RandomCrop(8, padding=2), T.RandomHorizontalFlip(),
                      T.Normalize([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])])


class FailAt(Dataset):
    """Raises ValueError for one index."""

    def __init__(self, n, bad):
        self.n, self.bad = n, bad

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"item {i} is corrupt")
        return np.float32(i)


class DieAt(Dataset):
    """The worker process exits (os._exit or SIGKILL) when it reaches index ``bad``."""

    def __init__(self, n, bad, how="exit"):
        self.n, self.bad, self.how = n, bad, how

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.bad and get_worker_info() is not None:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(7)
        return np.float32(i)


class Slow(Dataset):
    """Each item takes ``delay`` seconds."""

    def __init__(self, n, delay):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delay)
        return np.float32(i)


class Shards(IterableDataset):
    """Streams 0..n-1; each worker yields every num_workers-th number starting at its id."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for k in range(start, self.n, step):
            yield {"x": np.float32(k), "worker": -1 if info is None else info.id}

    def __len__(self):
        return self.n


class WorkerFacts(Dataset):
    """Reports what the worker sees: its info, the pid, and what worker_init_fn stored."""

    def __init__(self, n):
        self.n = n
        self.tag = None

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        info = get_worker_info()
        return {"worker": -1 if info is None else info.id, "pid": os.getpid(),
                "tag": -1 if self.tag is None else self.tag,
                "xla_threads": xla_thread_count(), "jax_imported": int("jax" in sys.modules),
                "xla_clients": xla_client_count()}


def xla_client_count():
    """PJRT clients funcgrad has made in this process (0 when the runtime never started)."""
    backend = sys.modules.get("funcgrad.lowering.backend")
    return len(getattr(backend, "_clients", ())) if backend is not None else 0


def tag_worker(worker_id):
    """worker_init_fn: mark the worker's copy of the dataset."""
    get_worker_info().dataset.tag = 100 + worker_id


def failing_init(worker_id):
    """worker_init_fn that always fails."""
    raise RuntimeError(f"init of worker {worker_id} failed on purpose")


class FailingStream(IterableDataset):
    """Yields 0, 1, 2 in worker 0, then raises; other workers yield nothing."""

    def __iter__(self):
        info = get_worker_info()
        if info is not None and info.id != 0:
            return
        for k in range(3):
            yield np.float32(k)
        raise OSError("stream broke after 3 items")


class HoldsArray(Dataset):
    """A dataset whose only item is whatever array-like object it was given."""

    def __init__(self, value):
        self.value = value

    def __len__(self):
        return 1

    def __getitem__(self, i):
        return np.asarray(self.value)


class PairsWithFacts(Dataset):
    """Items (x[i], y[i], XLA threads, XLA clients) as seen by the process that loads them."""

    def __init__(self, x, y):
        self.x, self.y = np.asarray(x), np.asarray(y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i], np.int32(xla_thread_count()), np.int32(xla_client_count())
