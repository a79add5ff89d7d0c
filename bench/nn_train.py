"""Training-step and dispatch benchmarks for funcgrad.nn.

1. LeNet (batch 64, MNIST shapes): one training step (forward, backward, SGD momentum update
   written back to the model), funcgrad ``jit`` vs PyTorch eager vs JAX ``jit`` (when installed).
2. LSTM language model (embedding 64, LSTM 128, vocab 96, batch 32, seq 35): same comparison.
3. Module dispatch: a jitted function taking a 3-Linear model vs the same jit over a plain list
   of its arrays (target: within 1.2x).

Every framework runs in its own process (so that two XLA runtimes or thread pools never share
one), the processes alternate round by round, and each number is the median over the rounds of
a process's median step time. PyTorch runs with its default threads (all cores, as XLA's CPU
runtime uses) and with one thread.

Run: python bench/nn_train.py [--rounds 5] [--steps 30]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

VOCAB, EMB, HIDDEN, BATCH, SEQ = 96, 64, 128, 32, 35


def lenet(nn_):
    """LeNet-5 written once against a torch.nn-like namespace (funcgrad.nn or torch.nn)."""
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
    """Embedding -> LSTM -> Linear language model, written once for funcgrad.nn or torch.nn."""
    class LM(nn_.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn_.Embedding(VOCAB, EMB)
            self.lstm = nn_.LSTM(EMB, HIDDEN, batch_first=True)
            self.head = nn_.Linear(HIDDEN, VOCAB)

        def forward(self, idx):
            h, _ = self.lstm(self.emb(idx))
            return self.head(h)
    return LM()


def data(case):
    rng = np.random.default_rng(0)
    if case == "lenet":
        return (rng.standard_normal((64, 1, 28, 28)).astype(np.float32),
                rng.integers(0, 10, 64).astype(np.int32))
    return (rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32),
            rng.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32))


def median_step_ms(step, steps, rounds=5, warmup=3):
    """Median over ``rounds`` of the mean wall time of ``steps`` calls of ``step`` (which must
    block until its result is ready)."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        times.append((time.perf_counter() - t0) / steps * 1e3)
    return statistics.median(times)


# --- one framework per process ------------------------------------------------------------------
def run_funcgrad(case, steps):
    import funcgrad
    import funcgrad.nn as nn
    import funcgrad.nn.functional as F
    import funcgrad.optim as optim
    funcgrad.manual_seed(0)
    model = (lenet if case == "lenet" else lstm_lm)(nn)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def loss(out, y):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    @funcgrad.jit
    def train_step(m, o, x, y):
        value, grads = funcgrad.value_and_grad(lambda mm: loss(mm(x), y))(m)
        o.step(grads)
        return value
    x, y = (funcgrad.numpy.asarray(a) for a in data(case))
    return median_step_ms(lambda: train_step(model, opt, x, y).block_until_ready(), steps)


def run_torch(case, steps, threads):
    import torch
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = (lenet if case == "lenet" else lstm_lm)(torch.nn)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = (torch.as_tensor(a.astype(np.int64) if a.dtype == np.int32 else a)
            for a in data(case))

    def train_step():
        opt.zero_grad()
        out = model(x)
        value = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                  y.reshape(-1))
        value.backward()
        opt.step()
        return value.item()
    return median_step_ms(train_step, steps)


def run_jax(case, steps):
    """The same models written the way a JAX user would (jax.lax conv/scan, pytrees of arrays)."""
    import jax
    import jax.numpy as jnp
    from jax import lax
    rng = np.random.default_rng(0)

    def uniform(shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        return jnp.asarray(rng.uniform(-bound, bound, shape).astype(np.float32))

    def linear(p, x):
        return x @ p["w"].T + p["b"]

    if case == "lenet":
        params = {
            "c1": {"w": uniform((6, 1, 5, 5), 25), "b": uniform((6,), 25)},
            "c2": {"w": uniform((16, 6, 5, 5), 150), "b": uniform((16,), 150)},
            "f1": {"w": uniform((120, 400), 400), "b": uniform((120,), 400)},
            "f2": {"w": uniform((84, 120), 120), "b": uniform((84,), 120)},
            "f3": {"w": uniform((10, 84), 84), "b": uniform((10,), 84)}}

        def conv(p, x, pad):
            y = lax.conv_general_dilated(x, p["w"], (1, 1), [(pad, pad)] * 2)
            return y + p["b"][None, :, None, None]

        def pool(x):
            return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def forward(p, x):
            x = pool(jax.nn.relu(conv(p["c1"], x, 2)))
            x = pool(jax.nn.relu(conv(p["c2"], x, 0)))
            x = x.reshape(x.shape[0], -1)
            x = jax.nn.relu(linear(p["f1"], x))
            return linear(p["f3"], jax.nn.relu(linear(p["f2"], x)))
    else:
        params = {"emb": jnp.asarray(rng.standard_normal((VOCAB, EMB)).astype(np.float32)),
                  "w_ih": uniform((4 * HIDDEN, EMB), HIDDEN),
                  "w_hh": uniform((4 * HIDDEN, HIDDEN), HIDDEN),
                  "b": uniform((4 * HIDDEN,), HIDDEN),
                  "head": {"w": uniform((VOCAB, HIDDEN), HIDDEN),
                           "b": uniform((VOCAB,), HIDDEN)}}

        def forward(p, idx):
            xw = p["emb"][idx.T] @ p["w_ih"].T + p["b"]          # (seq, batch, 4H)

            def cell(carry, z):
                h, c = carry
                i, f, g, o = jnp.split(z + h @ p["w_hh"].T, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                return (h, c), h
            zeros = jnp.zeros((idx.shape[0], HIDDEN), jnp.float32)
            _, hs = lax.scan(cell, (zeros, zeros), xw)
            return linear(p["head"], jnp.swapaxes(hs, 0, 1))

    def loss(p, x, y):
        out = forward(p, x)
        logp = jax.nn.log_softmax(out.reshape(-1, out.shape[-1]))
        return -jnp.mean(jnp.take_along_axis(logp, y.reshape(-1, 1), 1))

    @jax.jit
    def train_step(p, m, x, y):
        value, g = jax.value_and_grad(loss)(p, x, y)
        m = jax.tree_util.tree_map(lambda mm, gg: 0.9 * mm + gg, m, g)
        p = jax.tree_util.tree_map(lambda pp, mm: pp - 0.01 * mm, p, m)
        return p, m, value
    state = [params, jax.tree_util.tree_map(jnp.zeros_like, params)]
    x, y = (jnp.asarray(a) for a in data(case))

    def step():
        state[0], state[1], value = train_step(state[0], state[1], x, y)
        value.block_until_ready()
    return median_step_ms(step, steps)


FRAMEWORKS = {
    "funcgrad": lambda case, steps: run_funcgrad(case, steps),
    "torch": lambda case, steps: run_torch(case, steps, 0),
    "torch-1thread": lambda case, steps: run_torch(case, steps, 1),
    "jax": lambda case, steps: run_jax(case, steps),
}
REQUIRES = {"torch": "torch", "torch-1thread": "torch", "jax": "jax"}


def available(name):
    mod = REQUIRES.get(name)
    if mod is None:
        return True
    import importlib.util
    return importlib.util.find_spec(mod) is not None


def in_subprocess(framework, case, steps):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", framework,
                          case, "--steps", str(steps)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["ms"]


# --- dispatch ----------------------------------------------------------------------------------
def bench_dispatch(number=2000, repeat=7):
    """(us per call with a 3-Linear module argument, us per call with a list of its arrays)."""
    import funcgrad
    import funcgrad.nn as nn
    import funcgrad.numpy as jnp
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
    times = {"module": [], "list": []}
    calls = {"module": lambda: f_mod(model, x), "list": lambda: f_list(arrays, x)}
    for fn in calls.values():
        for _ in range(200):
            fn()
    for _ in range(repeat):
        for name, fn in calls.items():       # alternate so drifting load hits both alike
            t0 = time.process_time()
            for _ in range(number):
                fn()
            times[name].append((time.process_time() - t0) / number * 1e6)
    return statistics.median(times["module"]), statistics.median(times["list"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "CASE"))
    args = ap.parse_args()
    if args.worker:
        framework, case = args.worker
        print(json.dumps({"ms": FRAMEWORKS[framework](case, args.steps)}))
        return
    names = [n for n in FRAMEWORKS if available(n)]
    cases = {"lenet": "LeNet train step (batch 64)", "lstm": "LSTM LM train step (32x35)"}
    results = {(c, n): [] for c in cases for n in names}
    for _ in range(args.rounds):
        for case in cases:
            for name in names:
                results[case, name].append(in_subprocess(name, case, args.steps))
    med = {k: statistics.median(v) for k, v in results.items()}
    others = [n for n in names if n != "funcgrad"]
    print(f"median of {args.rounds} processes per framework, each the median of 5 x "
          f"{args.steps} steps (ms per step; ratio = funcgrad / other)")
    print("| benchmark | funcgrad | " + " | ".join(others) + " | "
          + " | ".join(f"vs {n}" for n in others) + " |")
    print("| --- " * (2 + 2 * len(others)) + "|")
    for case, title in cases.items():
        fg = med[case, "funcgrad"]
        print(f"| {title} | {fg:.2f} | " + " | ".join(f"{med[case, n]:.2f}" for n in others)
              + " | " + " | ".join(f"{fg / med[case, n]:.2f}x" for n in others) + " |")
    missing = [n for n in ("flax", "equinox") if not available(n) and
               __import__("importlib.util").util.find_spec(n) is None]
    if missing:
        print(f"(not installed, so not measured: {', '.join(missing)})")
    t_mod, t_list = bench_dispatch()
    print()
    print("| dispatch of a jitted call (process CPU time) | us per call |")
    print("| --- | --- |")
    print(f"| 3-Linear nn.Sequential argument | {t_mod:.1f} |")
    print(f"| plain list of its 6 arrays | {t_list:.1f} |")
    print(f"| ratio | {t_mod / t_list:.2f}x (target <= 1.2x) |")


if __name__ == "__main__":
    main()
