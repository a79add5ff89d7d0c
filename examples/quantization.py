"""Quantization workflows on two small models (funcgrad.quantization, PyTorch's names):

1. dynamic quantization of the character LSTM language model (int8 weights, activations
   quantized at run time): perplexity, file size and inference time, float vs int8;
2. post-training static quantization of a LeNet (fuse conv+bn+relu, calibrate with the x86
   qconfig's histogram observers, convert): accuracy, size and time;
3. quantization-aware training: the same LeNet fine-tuned with fake quantization in an
   ordinary jitted training step, then converted.

Data: examples/data/tiny_text.txt and a synthetic MNIST-shaped problem, so it runs anywhere in
a few minutes:

    python examples/quantization.py [--lm-steps 150] [--lenet-epochs 2]
"""
import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad import quantization as tq
from funcgrad.data import DataLoader, datasets

from lstm_language_model import CharLM

HERE = os.path.dirname(os.path.abspath(__file__))


class QuantLeNet(nn.Module):
    """LeNet-5 with its ReLUs as modules (so they can be fused) and quant/dequant stubs."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(1, 6, 5, padding=2), nn.BatchNorm2d(6), \
            nn.ReLU()
        self.conv2, self.bn2, self.relu2 = nn.Conv2d(6, 16, 5), nn.BatchNorm2d(16), nn.ReLU()
        self.fc1, self.relu3 = nn.Linear(16 * 5 * 5, 120), nn.ReLU()
        self.fc2, self.relu4 = nn.Linear(120, 84), nn.ReLU()
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = self.quant(x)
        x = F.max_pool2d(self.relu1(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(self.relu2(self.bn2(self.conv2(x))), 2)
        x = x.reshape(x.shape[0], -1)
        x = self.relu4(self.fc2(self.relu3(self.fc1(x))))
        return self.dequant(self.fc3(x))


FUSE = [["conv1", "bn1", "relu1"], ["conv2", "bn2", "relu2"], ["fc1", "relu3"],
        ["fc2", "relu4"]]


def file_kb(model):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.safetensors")
        funcgrad.save(model, path)
        return os.path.getsize(path) / 1024


def median_ms(fn, repeats=15):
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        funcgrad.tree_util.tree_map(lambda a: a.block_until_ready(), out)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def report(title, metric, rows):
    print(f"\n{title}")
    print(f"{'model':<14} {metric:>12} {'size (KiB)':>11} {'time (ms)':>10}")
    for name, value, kb, ms in rows:
        print(f"{name:<14} {value:>12.4f} {kb:>11.1f} {ms:>10.2f}")


# --- 1. dynamic quantization of the LSTM language model -------------------------------------------
def train_char_lm(steps, seq_len=32, batch=32):
    """(trained CharLM, held-out inputs, targets, jitted mean NLL(model, x, y))."""
    text = open(os.path.join(HERE, "data", "tiny_text.txt"), encoding="utf-8").read()
    chars = sorted(set(text))
    data = np.array([chars.index(c) for c in text], np.int32)
    split = int(len(data) * 0.8)
    train, held = data[:split], data[split:]
    funcgrad.manual_seed(0)
    model = CharLM(len(chars))
    opt = optim.Adam(model.parameters(), lr=3e-3)

    @funcgrad.jit
    def step(model, opt, x, y):
        def loss_fn(m):
            logits, _ = m(x)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss, grads = funcgrad.value_and_grad(loss_fn)(model)
        opt.step(grads)
        return loss

    rng = np.random.default_rng(0)
    for _ in range(steps):
        idx = rng.integers(0, len(train) - seq_len - 1, batch)
        x = np.stack([train[i:i + seq_len] for i in idx])
        y = np.stack([train[i + 1:i + seq_len + 1] for i in idx])
        step(model, opt, jnp.asarray(x), jnp.asarray(y))
    model.eval()
    n = (len(held) - 1) // seq_len
    hx = jnp.asarray(held[:n * seq_len].reshape(n, seq_len))
    hy = jnp.asarray(held[1:n * seq_len + 1].reshape(n, seq_len))

    @funcgrad.jit
    def nll(model, x, y):
        logits, _ = model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    return model, hx, hy, nll


def lstm_lm(steps):
    model, hx, hy, nll = train_char_lm(steps)
    qmodel = tq.quantize_dynamic(model, {nn.LSTM, nn.Linear}, dtype=tq.qint8)
    print(qmodel)
    rows = []
    for name, m in (("float32", model), ("dynamic int8", qmodel)):
        ppl = float(np.exp(float(nll(m, hx, hy))))
        ms = median_ms(lambda m=m: nll(m, hx, hy))
        rows.append((name, ppl, file_kb(m), ms))
    report(f"(1) LSTM LM, dynamic quantization ({hx.shape[0]}x{hx.shape[1]} held-out "
           f"characters)",
           "perplexity", rows)
    return rows


# --- 2. static post-training quantization and 3. QAT of the LeNet ---------------------------------
def batches(ds, batch_size, shuffle=False):
    for x, y in DataLoader(ds, batch_size=batch_size, shuffle=shuffle, drop_last=shuffle):
        yield jnp.asarray(np.asarray(x, np.float32)), jnp.asarray(np.asarray(y, np.int32))


def accuracy(model, test):
    @funcgrad.jit
    def correct(model, x, y):
        return jnp.sum(jnp.argmax(model(x), axis=1) == y)
    hits = sum(int(correct(model, x, y)) for x, y in batches(test, 256))
    return hits / len(test)


def train(model, train_set, epochs, lr):
    opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    @funcgrad.jit
    def step(model, opt, x, y):
        loss, grads = funcgrad.value_and_grad(lambda m: F.cross_entropy(m(x), y))(model)
        opt.step(grads)
        return loss
    model.train()
    for _ in range(epochs):
        for x, y in batches(train_set, 64, shuffle=True):
            step(model, opt, x, y)
    return model.eval()


def train_lenet(epochs):
    """(trained float QuantLeNet in eval mode, training set, test set)."""
    train_set = datasets.Synthetic(n=2048, shape=(1, 28, 28), num_classes=10, seed=0, noise=2.0)
    test = datasets.Synthetic(n=1024, shape=(1, 28, 28), num_classes=10, seed=0, noise=2.0)
    funcgrad.manual_seed(0)
    return train(QuantLeNet(), train_set, epochs, 0.02), train_set, test


def calibration_batches(train_set, n=8):
    """The first ``n`` batches of 128 training images (what static quantization observes)."""
    out = []
    for x, _ in batches(train_set, 128):
        out.append(x)
        if len(out) == n:
            return out
    return out


def lenet(epochs):
    model, train_set, test = train_lenet(epochs)
    x_time = next(batches(test, 64))[0]
    forward = funcgrad.jit(lambda m, x: m(x))

    # static: fuse (eval mode), observe, calibrate on a few batches, convert
    fused = tq.fuse_modules(model, FUSE)
    prepared = tq.prepare(fused, tq.get_default_qconfig("x86"))
    for x in calibration_batches(train_set):
        forward(prepared, x)
    static = tq.convert(prepared)
    print(static)

    # QAT: fuse, prepare_qat, fine-tune with fake quantization, convert
    qat = tq.prepare_qat(tq.fuse_modules(model, FUSE).train(), tq.get_default_qat_qconfig("x86"))
    qat = tq.convert(train(qat, train_set, 1, 0.002))
    rows = []
    for name, m in (("float32", model), ("static int8", static), ("QAT int8", qat)):
        rows.append((name, accuracy(m, test), file_kb(m),
                     median_ms(lambda m=m: forward(m, x_time))))
    report("(2, 3) LeNet on synthetic MNIST-shaped data, 64-image batches", "accuracy", rows)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--lm-steps", type=int, default=150)
    ap.add_argument("--lenet-epochs", type=int, default=2)
    args = ap.parse_args(argv)
    lstm_lm(args.lm_steps)
    lenet(args.lenet_epochs)


if __name__ == "__main__":
    main()
