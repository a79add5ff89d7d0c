"""Training-step and dispatch benchmarks for funcgrad.nn.

1. LeNet (batch 64, MNIST shapes): one training step (forward, backward, SGD momentum update
   written back to the model), funcgrad ``jit`` vs PyTorch eager, JAX ``jit``, Flax NNX
   (``nnx.jit``) and Equinox (``eqx.filter_jit``), each when installed.
2. LSTM language model (embedding 64, LSTM 128, vocab 96, batch 32, seq 35): same comparison.
3. Module dispatch: a jitted function taking a 3-Linear model vs the same jit over a plain list
   of its arrays (target: within 1.2x), for funcgrad and, for reference, Flax NNX and Equinox
   (each against ``jax.jit`` over a list).

Every framework runs in its own process (so that two XLA runtimes or thread pools never share
one), the processes alternate round by round, and each number is the median over the rounds of
a process's median step time. PyTorch runs with its default threads (all cores, as XLA's CPU
runtime uses) and with one thread.

With ``--gpu`` the training steps run on the GPU for every framework (funcgrad and JAX through
their CUDA plugins, PyTorch on ``cuda``); the one-thread PyTorch variant and the dispatch
measurement are skipped. Without it everything stays on the CPU, GPU or not.

With ``--eager`` the same training steps run without ``jit`` (funcgrad and JAX; PyTorch is
eager anyway): what a user's first PyTorch-style loop costs.

Run: python bench/nn_train.py [--rounds 5] [--steps 30] [--gpu] [--eager]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

if "--gpu" not in sys.argv:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("FUNCGRAD_PLATFORM", "cpu")
TORCH_DEVICE = "cuda" if "--gpu" in sys.argv else "cpu"
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


def dump_compiled(framework, case, jitted, *args):
    """With ``FUNCGRAD_BENCH_DUMP=<folder>``: write the optimized HLO of a jitted step there (to
    compare what two libraries hand the backend)."""
    folder = os.environ.get("FUNCGRAD_BENCH_DUMP")
    if folder:
        os.makedirs(folder, exist_ok=True)
        text = jitted.lower(*args).compile().as_text()
        with open(os.path.join(folder, f"{framework}_{case}.hlo.txt"), "w") as f:
            f.write(text)


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
def run_funcgrad(case, steps, jit=True):
    import funcgrad
    import funcgrad.nn as nn
    import funcgrad.nn.functional as F
    import funcgrad.optim as optim
    funcgrad.manual_seed(0)
    model = (lenet if case == "lenet" else lstm_lm)(nn)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def loss(out, y):
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    def train_step(m, o, x, y):
        value, grads = funcgrad.value_and_grad(lambda mm: loss(mm(x), y))(m)
        o.step(grads)
        return value
    if jit:
        train_step = funcgrad.jit(train_step)
    x, y = (funcgrad.numpy.asarray(a) for a in data(case))
    if jit:
        dump_compiled("funcgrad", case, train_step, model, opt, x, y)
    return median_step_ms(lambda: train_step(model, opt, x, y).block_until_ready(), steps)


def run_torch(case, steps, threads):
    import torch
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = (lenet if case == "lenet" else lstm_lm)(torch.nn).to(TORCH_DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = (torch.as_tensor(a.astype(np.int64) if a.dtype == np.int32 else a,
                            device=TORCH_DEVICE) for a in data(case))

    def train_step():
        opt.zero_grad()
        out = model(x)
        value = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                  y.reshape(-1))
        value.backward()
        opt.step()
        return value.item()
    return median_step_ms(train_step, steps)


def run_jax(case, steps, jit=True):
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

    def train_step(p, m, x, y):
        value, g = jax.value_and_grad(loss)(p, x, y)
        m = jax.tree_util.tree_map(lambda mm, gg: 0.9 * mm + gg, m, g)
        p = jax.tree_util.tree_map(lambda pp, mm: pp - 0.01 * mm, p, m)
        return p, m, value
    if jit:
        train_step = jax.jit(train_step)
    state = [params, jax.tree_util.tree_map(jnp.zeros_like, params)]
    x, y = (jnp.asarray(a) for a in data(case))
    if jit:
        dump_compiled("jax", case, train_step, state[0], state[1], x, y)

    def step():
        state[0], state[1], value = train_step(state[0], state[1], x, y)
        value.block_until_ready()
    return median_step_ms(step, steps)


def _optax_sgd():
    import optax
    return optax.sgd(0.01, momentum=0.9)


def _xent(logits, y):
    import jax
    import jax.numpy as jnp
    logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
    return -jnp.mean(jnp.take_along_axis(logp, y.reshape(-1, 1), 1))


def run_equinox(case, steps):
    """Equinox modules (eqx.nn layers, eqx.filter_jit / filter_value_and_grad, optax SGD)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import optax
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 8))
    if case == "lenet":
        class Model(eqx.Module):
            c1: eqx.nn.Conv2d
            c2: eqx.nn.Conv2d
            f1: eqx.nn.Linear
            f2: eqx.nn.Linear
            f3: eqx.nn.Linear

            def __init__(self):
                self.c1 = eqx.nn.Conv2d(1, 6, 5, padding=2, key=next(keys))
                self.c2 = eqx.nn.Conv2d(6, 16, 5, key=next(keys))
                self.f1 = eqx.nn.Linear(400, 120, key=next(keys))
                self.f2 = eqx.nn.Linear(120, 84, key=next(keys))
                self.f3 = eqx.nn.Linear(84, 10, key=next(keys))

            def __call__(self, x):                      # one example (1, 28, 28)
                pool = eqx.nn.MaxPool2d(2, 2)
                x = pool(jax.nn.relu(self.c1(x)))
                x = pool(jax.nn.relu(self.c2(x))).reshape(-1)
                return self.f3(jax.nn.relu(self.f2(jax.nn.relu(self.f1(x)))))
    else:
        class Model(eqx.Module):
            emb: eqx.nn.Embedding
            cell: eqx.nn.LSTMCell
            head: eqx.nn.Linear

            def __init__(self):
                self.emb = eqx.nn.Embedding(VOCAB, EMB, key=next(keys))
                self.cell = eqx.nn.LSTMCell(EMB, HIDDEN, key=next(keys))
                self.head = eqx.nn.Linear(HIDDEN, VOCAB, key=next(keys))

            def __call__(self, idx):                    # one sequence (SEQ,)
                xs = jax.vmap(self.emb)(idx)
                zeros = jnp.zeros(HIDDEN)
                _, hs = jax.lax.scan(lambda c, x: (lambda hc: (hc, hc[0]))(self.cell(x, c)),
                                     (zeros, zeros), xs)
                return jax.vmap(self.head)(hs)
    model = Model()
    tx = _optax_sgd()
    opt_state = tx.init(eqx.filter(model, eqx.is_array))

    @eqx.filter_jit
    def train_step(model, opt_state, x, y):
        value, grads = eqx.filter_value_and_grad(
            lambda m: _xent(jax.vmap(m)(x), y))(model)
        updates, opt_state = tx.update(grads, opt_state)
        return eqx.apply_updates(model, updates), opt_state, value
    x, y = (jnp.asarray(a) for a in data(case))
    state = [model, opt_state]

    def step():
        state[0], state[1], value = train_step(state[0], state[1], x, y)
        value.block_until_ready()
    del optax
    return median_step_ms(step, steps)


def run_flax(case, steps):
    """Flax NNX modules (nnx layers, nnx.jit / nnx.value_and_grad, nnx.Optimizer, NHWC)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    rngs = nnx.Rngs(0)
    if case == "lenet":
        class Model(nnx.Module):
            def __init__(self):
                self.c1 = nnx.Conv(1, 6, (5, 5), padding=2, rngs=rngs)
                self.c2 = nnx.Conv(6, 16, (5, 5), padding="VALID", rngs=rngs)
                self.f1 = nnx.Linear(400, 120, rngs=rngs)
                self.f2 = nnx.Linear(120, 84, rngs=rngs)
                self.f3 = nnx.Linear(84, 10, rngs=rngs)

            def __call__(self, x):                      # (N, 28, 28, 1)
                x = nnx.max_pool(jax.nn.relu(self.c1(x)), (2, 2), (2, 2))
                x = nnx.max_pool(jax.nn.relu(self.c2(x)), (2, 2), (2, 2))
                x = x.reshape(x.shape[0], -1)
                return self.f3(jax.nn.relu(self.f2(jax.nn.relu(self.f1(x)))))
    else:
        class Model(nnx.Module):
            def __init__(self):
                self.emb = nnx.Embed(VOCAB, EMB, rngs=rngs)
                self.rnn = nnx.RNN(nnx.OptimizedLSTMCell(EMB, HIDDEN, rngs=rngs))
                self.head = nnx.Linear(HIDDEN, VOCAB, rngs=rngs)

            def __call__(self, idx):                    # (N, SEQ), batch major
                return self.head(self.rnn(self.emb(idx)))
    model = Model()
    opt = nnx.Optimizer(model, _optax_sgd(), wrt=nnx.Param)

    @nnx.jit
    def train_step(model, opt, x, y):
        value, grads = nnx.value_and_grad(lambda m: _xent(m(x), y))(model)
        opt.update(model, grads)
        return value
    x, y = data(case)
    x = jnp.asarray(x.transpose(0, 2, 3, 1) if case == "lenet" else x)
    y = jnp.asarray(y)
    return median_step_ms(lambda: train_step(model, opt, x, y).block_until_ready(), steps)


FRAMEWORKS = {
    "funcgrad": lambda case, steps: run_funcgrad(case, steps),
    "torch": lambda case, steps: run_torch(case, steps, 0),
    "torch-1thread": lambda case, steps: run_torch(case, steps, 1),
    "jax": lambda case, steps: run_jax(case, steps),
    "flax-nnx": lambda case, steps: run_flax(case, steps),
    "equinox": lambda case, steps: run_equinox(case, steps),
    # --eager: the same steps without jit, as a PyTorch user writes them first
    "funcgrad-eager": lambda case, steps: run_funcgrad(case, steps, jit=False),
    "jax-eager": lambda case, steps: run_jax(case, steps, jit=False),
}
REQUIRES = {"torch": "torch", "torch-1thread": "torch", "jax": "jax", "flax-nnx": "flax",
            "equinox": "equinox", "jax-eager": "jax"}
EAGER_ONLY = ("funcgrad-eager", "jax-eager")
JIT_ONLY = ("funcgrad", "jax", "flax-nnx", "equinox")


def available(name):
    mod = REQUIRES.get(name)
    if mod is None:
        return True
    import importlib.util
    return importlib.util.find_spec(mod) is not None


def in_subprocess(framework, case, steps):
    gpu = ["--gpu"] if TORCH_DEVICE == "cuda" else []
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", framework,
                          case, "--steps", str(steps)] + gpu, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["ms"]


# --- dispatch ----------------------------------------------------------------------------------
def _per_call_us(calls, number=2000, repeat=7):
    """{name: median over rounds of process CPU time per call}; rounds alternate between the
    callables so drifting load hits them alike."""
    for fn in calls.values():
        for _ in range(200):
            fn()
    times = {name: [] for name in calls}
    for _ in range(repeat):
        for name, fn in calls.items():
            t0 = time.process_time()
            for _ in range(number):
                fn()
            times[name].append((time.process_time() - t0) / number * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def dispatch_funcgrad():
    """A jitted call taking a 3-Linear nn.Sequential vs the same jit over a list of arrays."""
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
    return _per_call_us({"module": lambda: f_mod(model, x), "list": lambda: f_list(arrays, x)})


def _jax_list_fn():
    import jax
    import jax.numpy as jnp

    def plain(ps, x):
        for i in range(0, 6, 2):
            x = x @ ps[i] + ps[i + 1]
            if i < 4:
                x = jnp.maximum(x, 0.0)
        return x
    return jax.jit(plain)


def dispatch_flax():
    """nnx.jit over a 3-Linear nnx.Sequential vs jax.jit over a list of its arrays."""
    import jax
    import jax.numpy as jnp
    from flax import nnx
    rngs = nnx.Rngs(0)
    model = nnx.Sequential(nnx.Linear(8, 8, rngs=rngs), jax.nn.relu,
                           nnx.Linear(8, 8, rngs=rngs), jax.nn.relu,
                           nnx.Linear(8, 8, rngs=rngs))
    arrays = [a for layer in (model.layers[0], model.layers[2], model.layers[4])
              for a in (layer.kernel[...], layer.bias[...])]
    x = jnp.ones((1, 8))
    f_mod = nnx.jit(lambda m, x: m(x))
    f_list = _jax_list_fn()
    return _per_call_us({"module": lambda: f_mod(model, x), "list": lambda: f_list(arrays, x)})


def dispatch_equinox():
    """eqx.filter_jit over a 3-Linear eqx.nn.Sequential vs jax.jit over a list of arrays."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    k = jax.random.split(jax.random.PRNGKey(0), 3)
    model = eqx.nn.Sequential([eqx.nn.Linear(8, 8, key=k[0]), eqx.nn.Lambda(jax.nn.relu),
                               eqx.nn.Linear(8, 8, key=k[1]), eqx.nn.Lambda(jax.nn.relu),
                               eqx.nn.Linear(8, 8, key=k[2])])
    arrays = [a for layer in (model.layers[0], model.layers[2], model.layers[4])
              for a in (layer.weight.T, layer.bias)]
    x = jnp.ones(8)
    f_mod = eqx.filter_jit(lambda m, x: m(x))
    f_list = _jax_list_fn()
    return _per_call_us({"module": lambda: f_mod(model, x), "list": lambda: f_list(arrays, x)})


DISPATCH = {"funcgrad": dispatch_funcgrad, "flax-nnx": dispatch_flax,
            "equinox": dispatch_equinox}


def dispatch_in_subprocess(framework):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--dispatch", framework],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "CASE"))
    ap.add_argument("--dispatch", metavar="FRAMEWORK")
    ap.add_argument("--gpu", action="store_true", help="train on the GPU (every framework)")
    ap.add_argument("--eager", action="store_true",
                    help="the training steps without jit (funcgrad, JAX) vs PyTorch eager")
    ap.add_argument("--cases", default="lenet,lstm", help="comma-separated: lenet, lstm")
    ap.add_argument("--frameworks", default="",
                    help="comma-separated subset of the frameworks to compare (default: all "
                         "installed)")
    args = ap.parse_args()
    if args.dispatch:
        print(json.dumps(DISPATCH[args.dispatch]()))
        return
    if args.worker:
        framework, case = args.worker
        print(json.dumps({"ms": FRAMEWORKS[framework](case, args.steps)}))
        return
    base = "funcgrad-eager" if args.eager else "funcgrad"
    names = [n for n in FRAMEWORKS if available(n) and not (args.gpu and n == "torch-1thread")
             and n not in (JIT_ONLY if args.eager else EAGER_ONLY)
             and (not args.frameworks or n in args.frameworks.split(",") or n == base)]
    cases = {"lenet": "LeNet train step (batch 64)", "lstm": "LSTM LM train step (32x35)"}
    cases = {c: t for c, t in cases.items() if c in args.cases.split(",")}
    results = {(c, n): [] for c in cases for n in names}
    for _ in range(args.rounds):
        for case in cases:
            for name in names:
                results[case, name].append(in_subprocess(name, case, args.steps))
    med = {k: statistics.median(v) for k, v in results.items()}
    others = [n for n in names if n != base]
    print(f"median of {args.rounds} processes per framework, each the median of 5 x "
          f"{args.steps} steps (ms per step; ratio = {base} / other)")
    print(f"| benchmark | {base} | " + " | ".join(others) + " | "
          + " | ".join(f"vs {n}" for n in others) + " |")
    print("| --- " * (2 + 2 * len(others)) + "|")
    for case, title in cases.items():
        fg = med[case, base]
        print(f"| {title} | {fg:.2f} | " + " | ".join(f"{med[case, n]:.2f}" for n in others)
              + " | " + " | ".join(f"{fg / med[case, n]:.2f}x" for n in others) + " |")
    missing = [n for n in FRAMEWORKS if not available(n)]
    if missing:
        print(f"(not installed, so not measured: {', '.join(missing)})")
    if args.gpu or args.eager:
        return
    print()
    print("| jitted call taking a 3-Linear model vs the same jit over a list of its arrays "
          "(process CPU time) | module (us) | list (us) | ratio |")
    print("| --- | --- | --- | --- |")
    for name in DISPATCH:
        if available(name):
            r = dispatch_in_subprocess(name)
            target = " (target <= 1.2x)" if name == "funcgrad" else ""
            print(f"| {name} | {r['module']:.1f} | {r['list']:.1f} | "
                  f"{r['module'] / r['list']:.2f}x{target} |")


if __name__ == "__main__":
    main()
