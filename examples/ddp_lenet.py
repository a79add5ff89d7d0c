"""LeNet-5 trained on several processes with ``nn.parallel.DistributedDataParallel``, in
PyTorch's manner: each process loads its share of every batch (``DistributedSampler``), the
jitted step is the usual one with the wrapper in place of the model, and the gradients are
averaged across the processes inside it.

    python -m funcgrad.distributed.run --nproc-per-node 2 examples/ddp_lenet.py --epochs 2
    python examples/ddp_lenet.py          # one process: the same script, nothing to average

Uses a synthetic MNIST-shaped problem (funcgrad.data.datasets.Synthetic). Each process may
have several devices (``FUNCGRAD_CPU_DEVICES``): its share of the batch is split over them.
"""
import argparse
import os

import numpy as np

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.optim as optim
from funcgrad.data import DataLoader, DistributedSampler, datasets
from funcgrad.nn.parallel import DistributedDataParallel


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.reshape(x.shape[0], -1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=64, help="per process")
    ap.add_argument("--n-train", type=int, default=2048)
    args = ap.parse_args(argv)
    if "MASTER_ADDR" in os.environ or "FUNCGRAD_COORDINATOR_ADDRESS" in os.environ:
        funcgrad.distributed.initialize()
    rank, world = funcgrad.process_index(), funcgrad.process_count()

    funcgrad.manual_seed(0)
    model = DistributedDataParallel(LeNet())
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    train = datasets.Synthetic(n=args.n_train, shape=(1, 28, 28), num_classes=10, seed=0,
                               noise=2.0)
    sampler = DistributedSampler(train, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    @funcgrad.jit
    def train_step(m, opt, x, y):
        loss, grads = funcgrad.value_and_grad(lambda m: F.cross_entropy(m(x), y))(m)
        opt.step(grads)
        return loss

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        losses = [train_step(model, opt, np.asarray(x, np.float32), np.asarray(y, np.int32))
                  for x, y in loader]
        mine = float(np.mean([float(v) for v in losses]))
        everyone = float(funcgrad.distributed.all_reduce(np.float32(mine), "mean"))
        if rank == 0:
            print(f"epoch {epoch + 1}: mean loss {everyone:.4f} over {world} process(es), "
                  f"{len(losses)} steps of {args.batch_size * world} samples")
    return everyone


if __name__ == "__main__":
    main()
