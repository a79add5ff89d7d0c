"""A spread of array operations, jitted, in funcgrad against JAX and NumPy.

Ops: an elementwise chain, reductions (sum, variance, logsumexp), matmul, a 2-D convolution,
gather and scatter-add, sort, cumsum and a scan (a linear recurrence). Every op is written once
against a namespace (``funcgrad.numpy``/``jax.numpy``/``numpy``); funcgrad and JAX run it under
their ``jit``, NumPy eagerly (NumPy has no convolution or scan: those use a sliding-window
einsum and a Python loop). Results are checked against each other before timing.

Each framework runs in its own worker process (two XLA CPU runtimes in one process share the
cores badly and share jaxlib's global x64 state, which skews the numbers). Each variant is
warmed up, then timed in ``--runs`` rounds (the frameworks take turns each round, so machine
load hits all alike) of enough calls to take about ``--min-time`` seconds; the table shows the
median time per call and the ratios funcgrad/JAX and funcgrad/NumPy (< 1.0 means funcgrad is
faster).

Run: python bench/numpy_ops.py [--runs 7] [--min-time 0.05] [--only matmul,sort]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rng():
    return np.random.default_rng(0)


# --- the ops: (name, make_inputs, fn(ns, lax, *inputs)) -------------------------------------
def elementwise(ns, lax, x):
    return ns.tanh(x * 2.0 + 1.0) * ns.sin(x) + ns.exp(-x * x) / (1.0 + ns.abs(x))


def reductions(ns, lax, x):
    m = ns.max(x, axis=1, keepdims=True)
    lse = ns.log(ns.sum(ns.exp(x - m), axis=1)) + m[:, 0]
    return ns.sum(x, axis=0), ns.var(x, axis=1), lse


def matmul(ns, lax, a, b):
    return a @ b


def conv(ns, lax, x, w):
    if lax is None:  # NumPy: sliding windows and one einsum (VALID padding, stride 1)
        win = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
        return np.einsum("nchwij,ocij->nohw", win, w, optimize=True)
    return lax.conv_general_dilated(x, w, (1, 1), "VALID")


def gather(ns, lax, x, idx):
    return x[idx] * 2.0


def scatter_add(ns, lax, x, idx, v):
    if lax is None:
        out = x.copy()
        np.add.at(out, idx, v)
        return out
    return x.at[idx].add(v)


def sort(ns, lax, x):
    return ns.sort(x, axis=-1) if hasattr(ns, "sort") else lax.sort(x)


def cumsum(ns, lax, x):
    return ns.cumsum(x, axis=1)


def scan(ns, lax, a, xs):
    if lax is None:
        h = np.zeros(a.shape[0], a.dtype)
        for x in xs:
            h = np.tanh(a @ h + x)
        return h

    def step(h, x):
        h = ns.tanh(a @ h + x)
        return h, None
    h, _ = lax.scan(step, ns.zeros(a.shape[0], a.dtype), xs)
    return h


def inputs():
    r = _rng()
    f32 = np.float32
    return [
        ("elementwise (1000x1000)", elementwise, (r.standard_normal((1000, 1000)).astype(f32),)),
        ("reductions (1000x1000)", reductions, (r.standard_normal((1000, 1000)).astype(f32),)),
        ("matmul (512x512)", matmul, (r.standard_normal((512, 512)).astype(f32),
                                      r.standard_normal((512, 512)).astype(f32))),
        ("conv 3x3 (8,32,32,32)", conv, (r.standard_normal((8, 32, 32, 32)).astype(f32),
                                         r.standard_normal((32, 32, 3, 3)).astype(f32))),
        ("gather 100k of 1M", gather, (r.standard_normal(1_000_000).astype(f32),
                                       r.integers(0, 1_000_000, 100_000).astype(np.int32))),
        ("scatter-add 100k into 1M", scatter_add,
         (np.zeros(1_000_000, f32), r.integers(0, 1_000_000, 100_000).astype(np.int32),
          r.standard_normal(100_000).astype(f32))),
        ("sort (256x1024)", sort, (r.standard_normal((256, 1024)).astype(f32),)),
        ("cumsum (1000x1000)", cumsum, (r.standard_normal((1000, 1000)).astype(f32),)),
        ("scan 1000 steps (64)", scan, ((r.standard_normal((64, 64)) * 0.1).astype(f32),
                                        r.standard_normal((1000, 64)).astype(f32))),
    ]


def _block(tree):
    leaves = tree if isinstance(tree, (tuple, list)) else (tree,)
    for leaf in leaves:
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return tree


def _time(fn, args, iters):
    t0 = time.perf_counter()
    for _ in range(iters):
        out = fn(*args)
    _block(out)
    return (time.perf_counter() - t0) / iters


def _check(name, got, want):
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-3, atol=2e-3,
                                   err_msg=name)


def _variant(framework, op, host):
    """(jitted function, device arguments) of ``op`` for one framework."""
    if framework == "funcgrad":
        import funcgrad
        import funcgrad.lax as flax
        import funcgrad.numpy as fnp
        return (funcgrad.jit(lambda *a: op(fnp, flax, *a)),
                [funcgrad.device_put(a) for a in host])
    if framework == "jax":
        import jax
        import jax.numpy as jjnp
        from jax import lax as jlax
        jax.config.update("jax_platforms", "cpu")
        return jax.jit(lambda *a: op(jjnp, jlax, *a)), [jax.device_put(a) for a in host]
    return (lambda *a: op(np, None, *a)), list(host)


def worker(framework):
    """Serve timing requests on stdin for one framework (one process per framework, so the
    runtimes' thread pools and global state do not interfere)."""
    table = []
    for name, op, host in inputs():
        try:
            fn, args = _variant(framework, op, host)
            _check(f"{name} [{framework}]", _block(fn(*args)), op(np, None, *host))
            table.append((fn, args))
        except Exception as exc:  # noqa: BLE001  (reported to the parent, which skips the op)
            table.append(None)
            print(f"error {name}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
    print("ready", flush=True)
    for line in sys.stdin:
        cmd, index, iters = line.split()
        entry = table[int(index)]
        if entry is None:
            print("nan", flush=True)
            continue
        print(repr(_time(entry[0], entry[1], int(iters))), flush=True)


def main(argv=None):
    import subprocess
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.05)
    ap.add_argument("--only", default="", help="comma-separated substrings of op names")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker)
    frameworks = ["funcgrad"] + (["jax"] if jax_available() else []) + ["numpy"]
    procs = {}
    for fw in frameworks:
        procs[fw] = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", fw],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for fw, p in procs.items():
        line = p.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{fw} worker failed to start: {line!r}")

    def ask(fw, index, iters):
        procs[fw].stdin.write(f"time {index} {iters}\n")
        procs[fw].stdin.flush()
        return float(procs[fw].stdout.readline())

    only = [s for s in args.only.split(",") if s]
    rows = []
    for index, (name, _, _) in enumerate(inputs()):
        if only and not any(s in name for s in only):
            continue
        first = {fw: ask(fw, index, 1) for fw in frameworks}
        if any(np.isnan(t) for t in first.values()):
            print(f"{name}: skipped (see the worker errors above)")
            continue
        iters = {fw: max(1, int(args.min_time / max(t, 1e-7))) for fw, t in first.items()}
        samples = {fw: [] for fw in frameworks}
        for _ in range(args.runs):  # frameworks take turns, so load changes hit all alike
            for fw in frameworks:
                samples[fw].append(ask(fw, index, iters[fw]))
        rows.append((name, {fw: statistics.median(v) for fw, v in samples.items()}))
        print(f"measured {name}", file=sys.stderr)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    header = f"{'op':28s} {'funcgrad':>11s} {'jax':>11s} {'numpy':>11s} {'fg/jax':>7s} " \
             f"{'fg/numpy':>8s}"
    print(header)
    print("-" * len(header))
    for name, med in rows:
        fg, jx, npy = med["funcgrad"], med.get("jax"), med["numpy"]
        fmt = lambda t: f"{t * 1e3:9.3f}ms" if t is not None else f"{'n/a':>11s}"  # noqa: E731
        print(f"{name:28s} {fmt(fg):>11s} {fmt(jx):>11s} {fmt(npy):>11s} "
              f"{(fg / jx if jx else float('nan')):7.2f} {fg / npy:8.2f}")
    print(f"\nmedian of {args.runs} rounds; times per call; one process per framework; "
          f"{os.cpu_count()} CPU cores")


def jax_available():
    import importlib.util
    return importlib.util.find_spec("jax") is not None


if __name__ == "__main__":
    main()
