"""Throughput of funcgrad.data.DataLoader against torch.utils.data.DataLoader.

An in-memory image dataset (default 10,000 uint8 images of 3x32x32) goes through the same
NumPy transform (pad-4 random crop + per-channel normalize) in both loaders, at num_workers
0, 1 and 2. Each setting runs one warm-up epoch (which also starts the persistent workers),
then ``--runs`` timed epochs; the table shows the median items/second and the ratio
funcgrad/torch (>= 1.0 means funcgrad is at least as fast). Torch is optional: without it
only the funcgrad column is printed.

Run: python bench/dataloader.py [--n 10000] [--batch-size 128] [--runs 5] [--workers 0 1 2]
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


def time_epochs(loader, runs):
    """Median items/second over ``runs`` epochs after one warm-up epoch."""
    def epoch():
        n = 0
        for x, y in loader:
            n += x.shape[0]
        return n

    epoch()
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        n = epoch()
        rates.append(n / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_funcgrad(ds, workers, batch_size, runs):
    kwargs = dict(num_workers=workers, persistent_workers=workers > 0)
    loader = DataLoader(ds, batch_size=batch_size, shuffle=True, seed=0, **kwargs)
    try:
        return time_epochs(loader, runs)
    finally:
        loader.shutdown()


def bench_torch(ds, workers, batch_size, runs):
    import torch.utils.data as tud
    kwargs = dict(num_workers=workers, persistent_workers=workers > 0)
    loader = tud.DataLoader(ds, batch_size=batch_size, shuffle=True, **kwargs)
    rate = time_epochs(loader, runs)
    del loader
    return rate


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="images in the dataset")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--runs", type=int, default=5, help="timed epochs per setting")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args(argv)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    ds = InMemoryImages(args.n, make_transform())
    print(f"{args.n} images 3x32x32 uint8, batch {args.batch_size}, RandomCrop(32, padding=4) + "
          f"Normalize, median of {args.runs} epochs, {os.cpu_count()} CPUs")
    header = f"{'num_workers':>11} | {'funcgrad items/s':>16}"
    if have_torch:
        header += f" | {'torch items/s':>13} | {'ratio':>5}"
    print(header)
    print("-" * len(header))
    for w in args.workers:
        ours = bench_funcgrad(ds, w, args.batch_size, args.runs)
        row = f"{w:>11} | {ours:>16,.0f}"
        if have_torch:
            theirs = bench_torch(ds, w, args.batch_size, args.runs)
            row += f" | {theirs:>13,.0f} | {ours / theirs:>5.2f}"
        print(row, flush=True)
    if not have_torch:
        print("(torch is not installed: no comparison)")


if __name__ == "__main__":
    main()
