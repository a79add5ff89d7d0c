"""LeNet-5 on MNIST with funcgrad.nn: a jitted training step, a progress bar, checkpoints.

Uses the MNIST IDX files under --data-dir when they exist, else a synthetic MNIST-shaped
problem (funcgrad.data.datasets.Synthetic), so it runs anywhere in about a minute:

    python examples/lenet_mnist.py --epochs 2
    python examples/lenet_mnist.py --epochs 3 --resume     # continues from the checkpoint
"""
import argparse
import os
import time

import numpy as np

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad.data import DataLoader, datasets, progress

import checkpointing


class LeNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.drop = nn.Dropout(0.1)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = x.reshape(x.shape[0], -1)
        x = self.drop(F.relu(self.fc2(F.relu(self.fc1(x)))))
        return self.fc3(x)


def load_data(data_dir, n_train, n_test):
    try:
        train = datasets.MNIST(data_dir, train=True)
        test = datasets.MNIST(data_dir, train=False)
        norm = lambda x: ((np.asarray(x, np.float32) / 255.0 - 0.1307) / 0.3081)[None]
        train.transform = test.transform = norm
        return train, test, "MNIST"
    except (FileNotFoundError, OSError, RuntimeError):
        train = datasets.Synthetic(n=n_train, shape=(1, 28, 28), num_classes=10, seed=0,
                                   noise=2.0)
        test = datasets.Synthetic(n=n_test, shape=(1, 28, 28), num_classes=10, seed=0,
                                  noise=2.0)
        return train, test, "synthetic MNIST-shaped data"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", default=os.path.expanduser("~/data"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--n-train", type=int, default=4096)
    ap.add_argument("--n-test", type=int, default=1024)
    ap.add_argument("--checkpoint", default="lenet_checkpoint")
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)

    train, test, what = load_data(args.data_dir, args.n_train, args.n_test)
    print(f"training LeNet on {what}: {len(train)} train / {len(test)} test images")
    funcgrad.manual_seed(0)
    model = LeNet()
    opt = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    steps_per_epoch = len(train) // args.batch_size
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(args.epochs, 1))
    start_epoch = checkpointing.resume(model, opt, args.checkpoint, sched) if args.resume else 0

    @funcgrad.jit
    def train_step(model, opt, x, y):
        def loss_fn(m):
            logits = m(x)
            return F.cross_entropy(logits, y), jnp.sum(jnp.argmax(logits, axis=1) == y)
        (loss, correct), grads = funcgrad.value_and_grad(loss_fn, has_aux=True)(model)
        opt.step(grads)
        return loss, correct

    @funcgrad.jit
    def eval_step(model, x, y):
        return jnp.sum(jnp.argmax(model(x), axis=1) == y)

    loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, drop_last=True)
    test_loader = DataLoader(test, batch_size=256)
    for epoch in range(start_epoch, args.epochs):
        model.train()
        t0 = time.time()
        total, correct, loss_sum = 0, 0, 0.0
        for x, y in progress(loader, desc=f"epoch {epoch + 1}/{args.epochs}",
                             total=steps_per_epoch):
            x, y = jnp.asarray(np.asarray(x, np.float32)), jnp.asarray(np.asarray(y, np.int32))
            loss, c = train_step(model, opt, x, y)
            loss_sum += float(loss) * len(y)
            correct += int(c)
            total += len(y)
        sched.step()
        model.eval()
        tc = tt = 0
        for x, y in test_loader:
            x, y = jnp.asarray(np.asarray(x, np.float32)), jnp.asarray(np.asarray(y, np.int32))
            tc += int(eval_step(model, x, y))
            tt += len(y)
        print(f"epoch {epoch + 1}: loss {loss_sum / total:.4f}  train acc {correct / total:.3f}"
              f"  test acc {tc / tt:.3f}  ({time.time() - t0:.1f}s)")
        checkpointing.save(model, opt, args.checkpoint, progress=epoch + 1)
    return model


if __name__ == "__main__":
    main()
