"""Training-step and dispatch benchmarks for funcgrad.nn.

1. LeNet (batch 64, MNIST shapes): a jitted funcgrad training step (forward, backward, SGD
   momentum update written back to the model) vs PyTorch eager on the same shapes.
2. LSTM language model (embedding 64, LSTM 128, vocab 96, batch 32, seq 35): same comparison.
3. Module dispatch: a jitted function taking a 3-Linear model vs the same jit over a plain list
   of its arrays (target: within 1.2x).

Run: python bench/nn_train.py [--steps 50]
"""
import argparse
import time

import numpy as np

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim


def lenet(nn_):
    class LeNet(nn_.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn_.Conv2d(1, 6, 5, padding=2)
            self.conv2 = nn_.Conv2d(6, 16, 5)
            self.fc1 = nn_.Linear(400, 120)
            self.fc2 = nn_.Linear(120, 84)
            self.fc3 = nn_.Linear(84, 10)

        def forward(self, x):
            Fn = nn_.functional
            x = Fn.max_pool2d(Fn.relu(self.conv1(x)), 2)
            x = Fn.max_pool2d(Fn.relu(self.conv2(x)), 2)
            x = x.reshape(x.shape[0], -1)
            return self.fc3(Fn.relu(self.fc2(Fn.relu(self.fc1(x)))))
    return LeNet()


def lstm_lm(nn_):
    class LM(nn_.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn_.Embedding(96, 64)
            self.lstm = nn_.LSTM(64, 128, batch_first=True)
            self.head = nn_.Linear(128, 96)

        def forward(self, idx):
            h, _ = self.lstm(self.emb(idx))
            return self.head(h)
    return LM()


def timeit(fn, steps, warmup=3):
    for _ in range(warmup):
        fn()
    t = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t) / steps


def bench_funcgrad(build, x, y, loss, steps):
    funcgrad.manual_seed(0)
    model = build(nn)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    @funcgrad.jit
    def step(m, o, x, y):
        l, g = funcgrad.value_and_grad(lambda mm: loss(mm(x), y))(m)
        o.step(g)
        return l
    x, y = jnp.asarray(x), jnp.asarray(y)
    return timeit(lambda: step(model, opt, x, y).block_until_ready(), steps)


def bench_torch(build, x, y, loss, steps):
    import torch
    torch.set_num_threads(int(__import__("os").environ.get("TORCH_THREADS", "1")))
    model = build(torch.nn)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.as_tensor(x), torch.as_tensor(y)

    def step():
        opt.zero_grad()
        l = loss(model(x), y)
        l.backward()
        opt.step()
        return l.item()
    return timeit(step, steps)


def bench_dispatch(steps):
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(),
                          nn.Linear(8, 8))
    arrays = [p.data for p in model.parameters()]
    x = jnp.ones((1, 8))
    f_mod = funcgrad.jit(lambda m, x: m(x))

    def plain(ps, x):
        for i in range(0, 6, 2):
            x = x @ ps[i].T + ps[i + 1]
            if i < 4:
                x = jnp.maximum(x, 0.0)
        return x
    f_list = funcgrad.jit(plain)
    np.testing.assert_allclose(np.asarray(f_mod(model, x)), np.asarray(f_list(arrays, x)),
                               rtol=1e-5)
    n = steps * 200
    t_mod = min(timeit(lambda: f_mod(model, x), n) for _ in range(3))
    t_list = min(timeit(lambda: f_list(arrays, x), n) for _ in range(3))
    return t_mod, t_list


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 64).astype(np.int64)
    ce = lambda o, t: F.cross_entropy(o, t)
    rows.append(("LeNet train step (batch 64)", bench_funcgrad(lenet, x, y.astype(np.int32), ce,
                                                               args.steps), lenet, x, y))
    idx = rng.integers(0, 96, (32, 35)).astype(np.int64)
    tgt = rng.integers(0, 96, (32, 35)).astype(np.int64)
    lm_loss = lambda o, t: F.cross_entropy(o.reshape(-1, 96), t.reshape(-1))
    rows.append(("LSTM LM train step (32x35)", bench_funcgrad(
        lstm_lm, idx.astype(np.int32), tgt.astype(np.int32), lm_loss, args.steps), lstm_lm,
        idx, tgt))
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    print("| benchmark | funcgrad jit (ms) | PyTorch eager (ms) | ratio |")
    print("| --- | --- | --- | --- |")
    for name, t, build, xx, yy in rows:
        if have_torch:
            import torch
            tl = (lambda o, t: torch.nn.functional.cross_entropy(o, t)) if "LeNet" in name \
                else (lambda o, t: torch.nn.functional.cross_entropy(o.reshape(-1, 96),
                                                                     t.reshape(-1)))
            tt = bench_torch(build, xx, yy, tl, args.steps)
            print(f"| {name} | {t * 1e3:.2f} | {tt * 1e3:.2f} | {t / tt:.2f}x |")
        else:
            print(f"| {name} | {t * 1e3:.2f} | (torch not installed) | |")
    t_mod, t_list = bench_dispatch(args.steps)
    print()
    print("| dispatch of a jitted call | time (us) |")
    print("| --- | --- |")
    print(f"| 3-Linear nn.Sequential argument | {t_mod * 1e6:.1f} |")
    print(f"| plain list of its 6 arrays | {t_list * 1e6:.1f} |")
    print(f"| ratio | {t_mod / t_list:.2f}x (target <= 1.2x) |")


if __name__ == "__main__":
    main()
