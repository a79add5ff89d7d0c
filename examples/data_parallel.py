"""Data-parallel training of LeNet-5 with ``funcgrad.pmap`` on every local device.

The DataLoader splits each batch over the devices (one sharded Array per leaf, consumed by
pmap in place); the pmapped step computes each device's loss and gradient on its part of the
batch and averages both over the devices with ``lax.pmean``; the optimizer then updates the
(single copy of the) parameters. On a machine without accelerators the script asks for 4 host
CPU devices. ``--check`` runs a few steps both ways and compares the per-step losses with the
1-device run on the full batch.

    python examples/data_parallel.py --epochs 1
    python examples/data_parallel.py --check
    python examples/data_parallel.py --check --sync-bn

``--sync-bn`` adds a BatchNorm after each convolution with ``axis_name="batch"`` (PyTorch's
``SyncBatchNorm``): the batch statistics are taken over all devices, so the data-parallel run
still equals the 1-device run (whose BatchNorm sees the full batch), and the running
statistics written back after each step are the same too. Without ``axis_name`` each device
would normalize with its own quarter of the batch.
"""
import argparse
import os
import time

os.environ.setdefault("FUNCGRAD_CPU_DEVICES", "4")

import numpy as np  # noqa: E402

import funcgrad  # noqa: E402
import funcgrad.nn as nn  # noqa: E402
import funcgrad.nn.functional as F  # noqa: E402
import funcgrad.optim as optim  # noqa: E402
from funcgrad import lax  # noqa: E402
from funcgrad.data import DataLoader, datasets, progress  # noqa: E402

import checkpointing  # noqa: E402


class LeNet(nn.Module):
    def __init__(self, num_classes=10, batch_norm=False, axis_name=None):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        norm = (lambda c: nn.BatchNorm2d(c, axis_name=axis_name)) if batch_norm else (
            lambda c: nn.Identity())
        self.bn1, self.bn2 = norm(6), norm(16)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = x.reshape(x.shape[0], -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def loss_fn(model, x, y):
    return F.cross_entropy(model(x), y)


# every device: loss and gradient of its part of the batch, averaged over the devices
parallel_grads = funcgrad.pmap(
    lambda model, x, y: lax.pmean(funcgrad.value_and_grad(loss_fn)(model, x, y), "batch"),
    axis_name="batch", in_axes=(None, 0, 0), out_axes=None)
single_grads = funcgrad.jit(funcgrad.value_and_grad(loss_fn))


def make(seed, lr, batch_norm=False, axis_name=None):
    funcgrad.manual_seed(seed)
    model = LeNet(batch_norm=batch_norm, axis_name=axis_name)
    return model, optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def check(train, batch_size, steps, lr, batch_norm=False):
    """Per-step losses of the data-parallel run and the 1-device run on the full batches (and,
    with BatchNorm, the largest difference of the running statistics, as a last line)."""
    devices = funcgrad.local_devices()
    par, par_opt = make(0, lr, batch_norm, "batch")
    one, one_opt = make(0, lr, batch_norm)
    sharded = DataLoader(train, batch_size=batch_size, drop_last=True, device=devices)
    full = DataLoader(train, batch_size=batch_size, drop_last=True)
    worst = 0.0
    for step, ((xs, ys), (x, y)) in enumerate(zip(sharded, full)):
        if step == steps:
            break
        loss_p, g_p = parallel_grads(par, xs, ys)
        par_opt.step(g_p)
        loss_1, g_1 = single_grads(one, funcgrad.numpy.asarray(np.asarray(x, np.float32)),
                                   funcgrad.numpy.asarray(np.asarray(y, np.int32)))
        one_opt.step(g_1)
        diff = abs(float(loss_p) - float(loss_1))
        worst = max(worst, diff)
        print(f"step {step}: loss {float(loss_p):.6f} on {len(devices)} devices, "
              f"{float(loss_1):.6f} on 1 (|diff| {diff:.1e})")
    if batch_norm:
        stats = max(float(np.abs(np.asarray(getattr(bp, k)) - np.asarray(getattr(b1, k))).max())
                    for bp, b1 in ((par.bn1, one.bn1), (par.bn2, one.bn2))
                    for k in ("running_mean", "running_var"))
        print(f"running statistics: largest difference {stats:.1e}")
        worst = max(worst, stats)
    return worst


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--n-train", type=int, default=2048)
    ap.add_argument("--checkpoint", default="data_parallel_checkpoint")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--check", action="store_true", help="compare with the 1-device run")
    ap.add_argument("--check-steps", type=int, default=5)
    ap.add_argument("--sync-bn", action="store_true",
                    help="BatchNorm after each convolution, statistics over all devices")
    args = ap.parse_args(argv)

    train = datasets.Synthetic(n=args.n_train, shape=(1, 28, 28), num_classes=10, seed=0,
                               noise=2.0)
    devices = funcgrad.local_devices()
    if args.batch_size % len(devices):
        raise SystemExit(f"--batch-size {args.batch_size} must be a multiple of the "
                         f"{len(devices)} devices")
    if args.check:
        worst = check(train, args.batch_size, args.check_steps, args.lr, args.sync_bn)
        print(f"largest per-step loss difference: {worst:.2e}")
        return worst
    print(f"training LeNet on {len(devices)} devices, {args.batch_size // len(devices)} "
          f"images per device per step")
    model, opt = make(0, args.lr, args.sync_bn, "batch")
    start = checkpointing.resume(model, opt, args.checkpoint) if args.resume else 0
    loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, drop_last=True,
                        device=devices)
    for epoch in range(start, args.epochs):
        t0, total = time.time(), 0.0
        for x, y in progress(loader, desc=f"epoch {epoch + 1}/{args.epochs}",
                             total=len(train) // args.batch_size):
            loss, grads = parallel_grads(model, x, y)
            opt.step(grads)
            total += float(loss)
        print(f"epoch {epoch + 1}: mean loss {total / (len(train) // args.batch_size):.4f} "
              f"({time.time() - t0:.1f}s)")
        checkpointing.save(model, opt, args.checkpoint, progress=epoch + 1)
    return model


if __name__ == "__main__":
    main()
