"""jit with shardings on 4 host CPU devices (a 2x2 data x model mesh): funcgrad vs JAX side by
side in one run.

Cases (both libraries compile the same shardings with XLA's SPMD partitioner; inputs already
placed; every call's result awaited):

1. a tiny sharded jitted function (an elementwise op on an (8, 4) array split over "data"):
   the call awaited (wall time), and its dispatch alone (the calling thread's CPU time per
   unawaited call, which the load of other jobs barely moves);
2. an MLP training step (64-256-256-10, batch 64): batch split over "data", hidden layers split
   over "model" (Megatron-style column then row split), gradient and SGD update in one program;
3. a transformer-block training step (batch 8, sequence 32, width 64, 4 heads, MLP 256; pre-
   layernorm attention + MLP): batch over "data", the q/k/v and first MLP matrices split by
   columns over "model", the attention output and second MLP matrices by rows;
4. the MLP of case 2 as a module training step under plain ``jit`` (no shardings given): an
   ``nn.Module`` whose parameters are placed by ``parallelize_module`` (Megatron column then
   row split over "model"), ``@funcgrad.jit def step(model, opt, x, y)`` with plain SGD
   written back into the module, against JAX's plain ``jit`` of the same step over the same
   placed parameters (a list of arrays in, the updated list out).

The machine is shared, so timings are taken in many short rounds that alternate between the
two libraries (the order flipping every round); each number is the median per-call time over
the rounds, the ratio the median of the per-round ratios, and the last column the fastest
round of each (the least disturbed by other jobs). The load average is printed
before and after. With 4 devices on a few cores only the ratio means anything.

``--separate`` runs each library in its own process instead (the processes alternating, the
order flipping every pair), so neither library's device threads share the process or the
cores' caches with the other's: for each training case, each process times its rounds and
reports its median per call; the table gives the median over the processes and the median
of the per-pair ratios.

Run: ``python bench/sharding.py`` (``--quick`` for fewer rounds, ``--runs N`` to repeat the
whole measurement N times and print every table, ``--separate [--pairs N]``).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# bench/pmap.py sets up 4 host CPU devices for both libraries when imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pmap  # noqa: E402,F401

import numpy as np  # noqa: E402

SIZES = (64, 256, 256, 10)
BATCH = 64
SEQ, WIDTH, HEADS, HIDDEN, TBATCH = 32, 64, 4, 256, 8


def interleaved_us(fns, number, rounds, clock=time.perf_counter, sync=None):
    """{name: median µs per call}, plus "ratio": the median over rounds of
    funcgrad's time / JAX's time in that round (rounds alternate which library runs first).
    ``clock``: wall time, or ``time.thread_time`` for the calling thread's CPU time;
    ``sync``: {name: function} run after each round, untimed (awaiting unawaited calls)."""
    names = list(fns)
    for fn in fns.values():
        for _ in range(5):
            fn()
    times = {n: [] for n in names}
    ratios = []
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        this = {}
        for n in order:
            fn = fns[n]
            t0 = clock()
            for _ in range(number):
                fn()
            this[n] = (clock() - t0) / number * 1e6
            times[n].append(this[n])
            if sync is not None:
                sync[n]()
        ratios.append(this["funcgrad"] / this["jax"])
    out = {n: statistics.median(t) for n, t in times.items()}
    out.update({f"best {n}": min(t) for n, t in times.items()})
    out["ratio"] = statistics.median(ratios)
    return out


def libs(lib):
    """(namespace of the library's functions, mesh, NamedSharding maker) for ``lib``."""
    if lib == "jax":
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        # Mesh() gives Auto axes (jax.make_mesh's Explicit axes would reject the row split)
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
        ns = dict(put=jax.device_put, jit=jax.jit, grad=jax.grad,
                  value_and_grad=jax.value_and_grad, block=jax.block_until_ready, np=jnp)
    else:
        import funcgrad
        import funcgrad.numpy as jnp
        from funcgrad.sharding import NamedSharding, P
        mesh = funcgrad.make_mesh((2, 2), ("data", "model"))
        ns = dict(put=funcgrad.device_put, jit=funcgrad.jit, grad=funcgrad.grad,
                  value_and_grad=funcgrad.value_and_grad, block=funcgrad.block_until_ready,
                  np=jnp)
    return ns, (lambda *spec: NamedSharding(mesh, P(*spec)))


def log_softmax(jnp, z):
    z = z - z.max(-1, keepdims=True)
    return z - jnp.log(jnp.sum(jnp.exp(z), -1, keepdims=True))


def tiny_case(lib):
    ns, S = libs(lib)
    f = ns["jit"](lambda v: v * 2.0 + 1.0, in_shardings=S("data"), out_shardings=S("data"))
    v = ns["put"](np.ones((8, 4), np.float32), S("data"))
    block = ns["block"]
    return (lambda: block(f(v))), (lambda: float(np.asarray(f(v)).sum())), (lambda: f(v)), \
        (lambda: block(f(v)))


def mlp_case(lib):
    ns, S = libs(lib)
    jnp = ns["np"]
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(a, b)).astype(np.float32) / np.sqrt(a), np.zeros(b, np.float32))
              for a, b in zip(SIZES[:-1], SIZES[1:])]
    x = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=BATCH).astype(np.int32)
    # column split, row split, replicated head
    pspecs = [(S(None, "model"), S("model")), (S("model", None), S()), (S(), S())]
    params = [(ns["put"](w, sw), ns["put"](b, sb)) for (w, b), (sw, sb) in zip(params, pspecs)]
    x, y = ns["put"](x, S("data")), ns["put"](y, S("data"))
    onehot = jnp.eye(SIZES[-1])

    def loss(ps, xb, yb):
        h = xb
        for i, (w, b) in enumerate(ps):
            h = h @ w + b
            if i < len(ps) - 1:
                h = jnp.tanh(h)
        return -jnp.mean(jnp.sum(log_softmax(jnp, h) * onehot[yb], 1))

    def step(ps, xb, yb):
        g = ns["grad"](loss)(ps, xb, yb)
        return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(ps, g)]

    pshard = [tuple(p) for p in pspecs]
    jstep = ns["jit"](step, in_shardings=(pshard, S("data"), S("data")), out_shardings=pshard)
    return _training(ns, jstep, loss, params, (x, y))


def transformer_case(lib):
    ns, S = libs(lib)
    jnp = ns["np"]
    rng = np.random.default_rng(1)
    d, h, f = WIDTH, HEADS, HIDDEN

    def w(*shape):
        return (rng.normal(size=shape) / np.sqrt(shape[0])).astype(np.float32)
    host = {"ln1": np.ones(d, np.float32), "ln2": np.ones(d, np.float32),
            "wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d),
            "w1": w(d, f), "b1": np.zeros(f, np.float32), "w2": w(f, d),
            "b2": np.zeros(d, np.float32)}
    specs = {"ln1": S(), "ln2": S(), "wq": S(None, "model"), "wk": S(None, "model"),
             "wv": S(None, "model"), "wo": S("model", None), "w1": S(None, "model"),
             "b1": S("model"), "w2": S("model", None), "b2": S()}
    params = {k: ns["put"](v, specs[k]) for k, v in host.items()}
    x = ns["put"](rng.normal(size=(TBATCH, SEQ, d)).astype(np.float32), S("data"))
    target = ns["put"](rng.normal(size=(TBATCH, SEQ, d)).astype(np.float32), S("data"))
    mask = np.tril(np.ones((SEQ, SEQ), bool))

    def norm(v, g):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) / jnp.sqrt(var + 1e-5) * g

    def heads(v):                       # (b, t, d) -> (b, h, t, d / h)
        b, t, _ = v.shape
        return v.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)

    def block(p, v):
        a = norm(v, p["ln1"])
        q, k, u = heads(a @ p["wq"]), heads(a @ p["wk"]), heads(a @ p["wv"])
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(d // h)
        s = jnp.where(mask, s, -1e9)
        att = jnp.exp(log_softmax(jnp, s))
        o = jnp.einsum("bhqk,bhkd->bhqd", att, u).transpose(0, 2, 1, 3).reshape(v.shape)
        v = v + o @ p["wo"]
        m = jnp.tanh(norm(v, p["ln2"]) @ p["w1"] + p["b1"])
        return v + m @ p["w2"] + p["b2"]

    def loss(p, v, t):
        return jnp.mean((block(p, v) - t) ** 2)

    def step(p, v, t):
        g = ns["grad"](loss)(p, v, t)
        return {k: p[k] - 0.05 * g[k] for k in p}

    jstep = ns["jit"](step, in_shardings=(specs, S("data"), S("data")), out_shardings=specs)
    return _training(ns, jstep, loss, params, (x, target))


def module_case(lib):
    """Plain ``jit`` of a training step over mesh-placed parameters (no shardings given)."""
    ns, S = libs(lib)
    jnp = ns["np"]
    rng = np.random.default_rng(0)
    x = ns["put"](rng.normal(size=(BATCH, SIZES[0])).astype(np.float32), S("data"))
    y = ns["put"](rng.integers(0, SIZES[-1], size=BATCH).astype(np.int32), S("data"))
    onehot = jnp.eye(SIZES[-1])

    def xent(h, yb):
        return -jnp.mean(jnp.sum(log_softmax(jnp, h) * onehot[yb], 1))
    import funcgrad
    from funcgrad import nn, optim
    from funcgrad.nn.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(SIZES[0], SIZES[1]), nn.Tanh(), nn.Linear(SIZES[1], SIZES[2]),
                          nn.Tanh(), nn.Linear(SIZES[2], SIZES[3]))
    if lib == "jax":
        # the module's initial (out, in) weights, laid out as parallelize_module lays them
        host = [(np.asarray(model[i].weight), np.asarray(model[i].bias)) for i in (0, 2, 4)]
        specs = [(S("model"), S("model")), (S(None, "model"), S()), (S(), S())]
        params = [(ns["put"](w, sw), ns["put"](b, sb)) for (w, b), (sw, sb) in zip(host, specs)]

        def loss(ps, xb, yb):
            h = xb
            for i, (w, b) in enumerate(ps):
                h = h @ w.T + b
                if i < len(ps) - 1:
                    h = jnp.tanh(h)
            return xent(h, yb)

        @ns["jit"]
        def step(ps, xb, yb):       # the same work as the module step: the loss returned too
            value, g = ns["value_and_grad"](loss)(ps, xb, yb)
            return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(ps, g)], value
        return _training(ns, step, loss, params, (x, y), with_value=True)
    parallelize_module(model, S().mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()},
                       axis="model")
    opt = optim.SGD(model.parameters(), lr=0.1)

    @funcgrad.jit
    def step(model, opt, xb, yb):
        value, grads = funcgrad.value_and_grad(lambda m: xent(m(xb), yb))(model)
        opt.step(grads)
        return value

    def run_step():
        ns["block"](step(model, opt, x, y))
    run_step.jitted, run_step.args = step, (lambda: (model, opt, x, y))
    return run_step, (lambda: float(xent(model(x), y)))


def _training(ns, jstep, loss, params, batch, with_value=False):
    """(one awaited step, the loss after the timed steps); ``with_value``: ``jstep`` returns
    (new params, loss) and the step waits on the loss, as the module step does."""
    state = {"p": params}

    def run_step():
        out = jstep(state["p"], *batch)
        state["p"] = out[0] if with_value else out
        ns["block"](out[1] if with_value else out)
    # for bench/sharding_bare.py: the jitted step and its current arguments
    run_step.jitted, run_step.args = jstep, (lambda: (state["p"], *batch))
    return run_step, (lambda: float(loss(state["p"], *batch)))


CASES = (("tiny sharded jit call", tiny_case, 1.0),
         ("MLP train step, 2x2 data x model", mlp_case, 0.2),
         ("transformer-block train step, 2x2", transformer_case, 0.1),
         ("module MLP train step, plain jit of placed parameters", module_case, 0.2))


def measure(number, rounds):
    rows = []
    for name, make, share in CASES:
        cases = {lib: make(lib) for lib in ("funcgrad", "jax")}
        t = interleaved_us({lib: c[0] for lib, c in cases.items()},
                           max(int(number * share), 3), rounds)
        vals = {lib: c[1]() for lib, c in cases.items()}
        rows.append((name, t, vals))
        if len(cases["jax"]) > 2:
            # the launch alone: the calling thread's CPU time per unawaited call (what the
            # dispatch path costs, whatever the other jobs on the machine do to wall time)
            t = interleaved_us({lib: c[2] for lib, c in cases.items()}, number, rounds,
                               clock=time.thread_time,
                               sync={lib: c[3] for lib, c in cases.items()})
            rows.append(("tiny call dispatch, calling thread's CPU time", t, None))
    return rows


def one_library(lib, case, number, rounds):
    """Time one case of one library in this process: JSON of the median µs per awaited call
    over ``rounds`` rounds of ``number`` calls, and the loss after them."""
    make = dict((n, m) for n, m, _ in CASES)[case]
    run_step, value = make(lib)[:2]
    for _ in range(5):
        run_step()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(number):
            run_step()
        times.append((time.perf_counter() - t0) / number * 1e6)
    print(json.dumps({"us": statistics.median(times), "value": value()}))


def separate(pairs, number, rounds):
    """Each library in its own process, alternating (see the module docstring)."""
    print(f"load average {os.getloadavg()[0]:.2f} before ({os.cpu_count()} cores); each "
          f"library in its own process, {pairs} pairs x {rounds} rounds x {number} calls")
    print("| case | funcgrad | JAX | funcgrad / JAX (median of pairs) | per pair |\n"
          "| --- | --- | --- | --- | --- |")
    for name, _, share in CASES[1:]:
        got = {"funcgrad": [], "jax": []}
        values = {}
        for pair in range(pairs):
            for lib in (("funcgrad", "jax") if pair % 2 == 0 else ("jax", "funcgrad")):
                out = subprocess.run(
                    [sys.executable, os.path.abspath(__file__), "--one", lib, name,
                     "--number", str(max(int(number * share), 3)), "--rounds", str(rounds)],
                    capture_output=True, text=True, timeout=600, check=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                got[lib].append(res["us"])
                values[lib] = res["value"]
        ratios = [f / j for f, j in zip(got["funcgrad"], got["jax"])]
        print(f"| {name} | {statistics.median(got['funcgrad']):.0f} µs | "
              f"{statistics.median(got['jax']):.0f} µs | {statistics.median(ratios):.2f} | "
              f"{', '.join(f'{r:.2f}' for r in ratios)} |")
        print(f"|   (loss after the timed calls: funcgrad {values['funcgrad']:.6f}, JAX "
              f"{values['jax']:.6f}) | | | | |")
    print(f"load average {os.getloadavg()[0]:.2f} after")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--separate", action="store_true")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--one", nargs=2, metavar=("LIBRARY", "CASE"), help=argparse.SUPPRESS)
    ap.add_argument("--number", type=int, default=100, help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=15, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return one_library(*args.one, args.number, args.rounds)
    if args.separate:
        return separate(args.pairs, *((20, 5) if args.quick else (100, 15)))
    number, rounds = (20, 5) if args.quick else (100, 15)
    for run in range(args.runs):
        load = os.getloadavg()[0]
        rows = measure(number, rounds)
        print(f"run {run + 1}: load average {load:.2f} before, {os.getloadavg()[0]:.2f} after "
              f"({os.cpu_count()} cores)")
        print("| case | funcgrad | JAX | funcgrad / JAX | fastest rounds: funcgrad / JAX |\n"
              "| --- | --- | --- | --- | --- |")
        for name, t, _ in rows:
            print(f"| {name} | {t['funcgrad']:.0f} µs | {t['jax']:.0f} µs | "
                  f"{t['ratio']:.2f} | {t['best funcgrad']:.0f} / {t['best jax']:.0f} µs |")
        for name, _, vals in rows:
            if vals is None:
                continue
            print(f"{name}: loss/value after the timed calls: funcgrad {vals['funcgrad']:.6f}, "
                  f"JAX {vals['jax']:.6f}")


if __name__ == "__main__":
    main()
