"""Throughput of funcgrad.data.DataLoader against torch.utils.data.DataLoader.

An in-memory image dataset (default 10,000 uint8 images of 3x32x32) goes through the same
NumPy transform (pad-4 random crop + per-channel normalize) in both loaders, at num_workers
0, 1 and 2. Each setting runs one warm-up epoch (which also starts the persistent workers),
then ``--runs`` timed epochs, the two loaders taking turns so that the machine's changing load
hits both alike; the table shows the median items/second and the ratio funcgrad/torch (>= 1.0
means funcgrad is at least as fast). Torch is optional: without it only the funcgrad column is
printed. Batches stay on the host (no device transfer) in both.

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


def epoch_rate(loader):
    """Items per second of one full pass over ``loader``."""
    start = time.perf_counter()
    n = 0
    for x, y in loader:
        n += x.shape[0]
    return n / (time.perf_counter() - start)


def make_loaders(ds, workers, batch_size, have_torch, thread=False):
    kwargs = dict(num_workers=workers, persistent_workers=workers > 0)
    loaders = {"funcgrad": DataLoader(ds, batch_size=batch_size, shuffle=True, seed=0,
                                      worker_type="thread" if thread else "process", **kwargs)}
    if have_torch:
        import torch.utils.data as tud
        loaders["torch"] = tud.DataLoader(ds, batch_size=batch_size, shuffle=True, **kwargs)
    return loaders


def compare(loaders, runs):
    """Median items/s per loader over ``runs`` epochs, after a warm-up epoch each (which also
    starts persistent workers). The loaders take turns epoch by epoch, in alternating order,
    so that a change in the machine's load hits both alike."""
    names = list(loaders)
    for name in names:
        epoch_rate(loaders[name])
    rates = {name: [] for name in names}
    for r in range(runs):
        for name in (names if r % 2 == 0 else names[::-1]):
            rates[name].append(epoch_rate(loaders[name]))
    return {name: statistics.median(v) for name, v in rates.items()}, rates


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
    header = f"{'num_workers':>11} | {'funcgrad items/s':>16}"
    if have_torch:
        header += f" | {'torch items/s':>13} | {'ratio':>5}"
    print(header)
    print("-" * len(header))
    settings = [(w, False) for w in args.workers]
    if args.threads:
        settings += [(w, True) for w in args.workers if w > 0]
    for w, thread in settings:
        loaders = make_loaders(ds, w, args.batch_size, have_torch and not thread, thread)
        medians, _ = compare(loaders, args.runs)
        loaders["funcgrad"].shutdown()
        label = f"{w} thread" if thread else f"{w}"
        row = f"{label:>11} | {medians['funcgrad']:>16,.0f}"
        if "torch" in medians:
            row += (f" | {medians['torch']:>13,.0f} | "
                    f"{medians['funcgrad'] / medians['torch']:>5.2f}")
        print(row, flush=True)
        del loaders
    print(f"(load average at the end {os.getloadavg()[0]:.2f})")
    if not have_torch:
        print("(torch is not installed: no comparison)")


if __name__ == "__main__":
    main()
