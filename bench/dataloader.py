"""Throughput of funcgrad.data.DataLoader against torch.utils.data.DataLoader.

An in-memory image dataset (default 10,000 uint8 images of 3x32x32) goes through the same
NumPy transform (pad-4 random crop + per-channel normalize) in both loaders, at num_workers
0, 1 and 2. Each setting runs one warm-up epoch (which also starts the persistent workers),
then ``--runs`` timed epochs, the two loaders taking turns so that the machine's changing load
hits both alike; the table shows the median items/second and the median CPU time per item
(main process plus workers, read from /proc: on a shared machine it is steadier than
throughput), and the ratios funcgrad/torch (>= 1.0 means funcgrad is at least as fast, or
uses at most as much CPU). Torch is optional: without it only the funcgrad columns are printed.
Batches stay on the host (no device transfer) in both.

Run: python bench/dataloader.py [--n 10000] [--batch-size 128] [--runs 7] [--workers 0 1 2]
     [--threads]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from funcgrad.data import DataLoader, Dataset  # noqa: E402
from funcgrad.data import transforms as T  # noqa: E402

MEAN = (0.4914 * 255, 0.4822 * 255, 0.4465 * 255)
STD = (0.2470 * 255, 0.2435 * 255, 0.2616 * 255)


class InMemoryImages(Dataset):
    """N uint8 images (3, 32, 32) with labels; the transform runs per item."""

    def __init__(self, n, transform, seed=0):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        self.labels = rng.integers(0, 10, size=n).astype(np.int64)
        self.transform = transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.transform(self.images[i]), self.labels[i]

    def __getitems__(self, indices):
        imgs, labels = self.images[indices], self.labels[indices]
        t = self.transform
        return [(t(img), lab) for img, lab in zip(imgs, labels)]


def make_transform():
    return T.Compose([T.RandomCrop(32, padding=4), T.Normalize(MEAN, STD)])


def _proc_cpu(pid):
    """CPU seconds (user + system) used so far by process ``pid`` (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def worker_pids(loader):
    """The worker processes' pids of a loader with persistent workers (both libraries)."""
    pool = getattr(loader, "_pool", None)                       # funcgrad
    if pool is not None:
        return [p for p in set(pool.pids) if p != os.getpid()]
    workers = getattr(getattr(loader, "_iterator", None), "_workers", None)   # torch
    return [w.pid for w in workers] if workers else []


def epoch(loader):
    """One full pass: (items per second, CPU microseconds per item in all processes)."""
    pids = worker_pids(loader)
    cpu0 = time.process_time()
    w0 = [_proc_cpu(p) for p in pids]
    start = time.perf_counter()
    n = 0
    for x, y in loader:
        n += x.shape[0]
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    for p, c in zip(pids, w0):
        c1 = _proc_cpu(p)
        if c is None or c1 is None:
            return n / wall, float("nan")
        cpu += c1 - c
    return n / wall, cpu / n * 1e6


def make_loaders(ds, workers, batch_size, have_torch, thread=False):
    kwargs = dict(num_workers=workers, persistent_workers=workers > 0)
    loaders = {"funcgrad": DataLoader(ds, batch_size=batch_size, shuffle=True, seed=0,
                                      worker_type="thread" if thread else "process", **kwargs)}
    if have_torch:
        import torch.utils.data as tud
        loaders["torch"] = tud.DataLoader(ds, batch_size=batch_size, shuffle=True, **kwargs)
    return loaders


def compare(loaders, runs):
    """Medians over ``runs`` epochs per loader of items/s and of CPU time per item, after a
    warm-up epoch each (which also starts persistent workers). The loaders take turns epoch by
    epoch, in alternating order, so that a change in the machine's load hits both alike."""
    names = list(loaders)
    for name in names:
        epoch(loaders[name])
    got = {name: [] for name in names}
    for r in range(runs):
        for name in (names if r % 2 == 0 else names[::-1]):
            got[name].append(epoch(loaders[name]))
    return {name: (statistics.median(g[0] for g in v), statistics.median(g[1] for g in v))
            for name, v in got.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="images in the dataset")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--runs", type=int, default=7, help="timed epochs per loader and setting")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", action="store_true",
                        help="also time funcgrad with worker_type='thread'")
    args = parser.parse_args(argv)
    try:
        import torch
        have_torch = True
    except ImportError:
        have_torch = False
    ds = InMemoryImages(args.n, make_transform())
    print(f"{args.n} images 3x32x32 uint8, batch {args.batch_size}, RandomCrop(32, padding=4) + "
          f"Normalize, median of {args.runs} epochs (loaders alternating), {os.cpu_count()} CPUs"
          + (f", torch {torch.__version__}" if have_torch else "")
          + f", load average {os.getloadavg()[0]:.2f}")
    print("items/s: throughput; CPU us/item: CPU time of the main process and the workers "
          "per item (steadier than items/s when other programs share the CPUs)")
    header = f"{'num_workers':>11} | {'funcgrad items/s':>16} | {'CPU us/item':>11}"
    if have_torch:
        header += (f" | {'torch items/s':>13} | {'CPU us/item':>11} | {'speed ratio':>11} | "
                   f"{'CPU ratio':>9}")
    print(header)
    print("-" * len(header))
    settings = [(w, False) for w in args.workers]
    if args.threads:
        settings += [(w, True) for w in args.workers if w > 0]
    for w, thread in settings:
        loaders = make_loaders(ds, w, args.batch_size, have_torch and not thread, thread)
        medians = compare(loaders, args.runs)
        loaders["funcgrad"].shutdown()
        label = f"{w} thread" if thread else f"{w}"
        rate, cpu = medians["funcgrad"]
        row = f"{label:>11} | {rate:>16,.0f} | {cpu:>11.1f}"
        if "torch" in medians:
            trate, tcpu = medians["torch"]
            row += (f" | {trate:>13,.0f} | {tcpu:>11.1f} | {rate / trate:>11.2f} | "
                    f"{tcpu / cpu:>9.2f}")
        print(row, flush=True)
        del loaders
    print(f"(load average at the end {os.getloadavg()[0]:.2f}; ratios >= 1.0: funcgrad is "
          f"faster / uses less CPU)")
    if not have_torch:
        print("(torch is not installed: no comparison)")


if __name__ == "__main__":
    main()
