"""A spread of array operations, jitted, in funcgrad against JAX and NumPy.

Ops: an elementwise chain, reductions (sum, variance, logsumexp), matmul, a 2-D convolution,
gather and scatter-add, sort, cumsum and a scan (a linear recurrence). Every op is written once
against a namespace (``funcgrad.numpy``/``jax.numpy``/``numpy``); funcgrad and JAX run it under
their ``jit``, NumPy eagerly (NumPy has no convolution or scan: those use a sliding-window
einsum and a Python loop). Results are checked against each other before timing.

Each variant is warmed up, then timed in ``--runs`` rounds (the variants take turns each round,
so machine load hits all alike) of enough calls to take about ``--min-time`` seconds; the table
shows the median time per call and the ratios funcgrad/JAX and funcgrad/NumPy (< 1.0 means
funcgrad is faster).

Run: python bench/numpy_ops.py [--runs 7] [--min-time 0.05] [--only matmul,sort]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import funcgrad  # noqa: E402
import funcgrad.lax as flax  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402

try:
    import jax
    import jax.numpy as jjnp
    from jax import lax as jlax
    jax.config.update("jax_platforms", "cpu")
    # funcgrad tells the shared jaxlib runtime to keep 64-bit types (it canonicalizes dtypes
    # itself); JAX in the same process must then run with x64 on too, or its weak float
    # constants lower as f64 against f32 operands. All inputs here are 32-bit, so JAX still
    # computes in float32/int32.
    jax.config.update("jax_enable_x64", True)
except ImportError:  # pragma: no cover
    jax = None


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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.05)
    ap.add_argument("--only", default="", help="comma-separated substrings of op names")
    args = ap.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    rows = []
    for name, op, host in inputs():
        if only and not any(s in name for s in only):
            continue
        fg_args = [funcgrad.device_put(a) for a in host]
        variants = {"funcgrad": (funcgrad.jit(lambda *a, op=op: op(fnp, flax, *a)), fg_args)}
        if jax is not None:
            variants["jax"] = (jax.jit(lambda *a, op=op: op(jjnp, jlax, *a)),
                               [jax.device_put(a) for a in host])
        variants["numpy"] = (lambda *a, op=op: op(np, None, *a), list(host))
        try:
            ref = variants["numpy"][0](*host)
            for key, (fn, a) in variants.items():
                _check(f"{name} [{key}]", _block(fn(*a)), ref)
        except Exception as exc:  # noqa: BLE001  (report and go on with the other ops)
            print(f"{name}: skipped ({type(exc).__name__}: {str(exc)[:120]})")
            continue
        iters = {}
        for key, (fn, a) in variants.items():
            t = _time(fn, a, 1)
            iters[key] = max(1, int(args.min_time / max(t, 1e-7)))
        samples = {key: [] for key in variants}
        for _ in range(args.runs):
            for key, (fn, a) in variants.items():
                samples[key].append(_time(fn, a, iters[key]))
        med = {key: statistics.median(v) for key, v in samples.items()}
        rows.append((name, med))
        print(f"measured {name}", file=sys.stderr)
    header = f"{'op':28s} {'funcgrad':>11s} {'jax':>11s} {'numpy':>11s} {'fg/jax':>7s} " \
             f"{'fg/numpy':>8s}"
    print(header)
    print("-" * len(header))
    for name, med in rows:
        fg, jx, npy = med["funcgrad"], med.get("jax"), med["numpy"]
        fmt = lambda t: f"{t * 1e3:9.3f}ms" if t is not None else f"{'n/a':>11s}"  # noqa: E731
        print(f"{name:28s} {fmt(fg):>11s} {fmt(jx):>11s} {fmt(npy):>11s} "
              f"{(fg / jx if jx else float('nan')):7.2f} {fg / npy:8.2f}")
    print(f"\nmedian of {args.runs} rounds; times per call; {os.cpu_count()} CPU cores; "
          f"device {funcgrad.devices()[0]}")


if __name__ == "__main__":
    main()
