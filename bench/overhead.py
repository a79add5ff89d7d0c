"""Dispatch overhead: funcgrad vs JAX vs PyTorch (when importable).

Measures (a) jit dispatch of a tiny function, (b) eager latency of adding two small arrays,
(c) trace + compile time of a 4-layer MLP forward. Each number is the median over several
repeats; the table gives ratios against JAX.

Run: ``.venv/bin/python bench/overhead.py`` (``--quick`` for fewer repeats).
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


# Per-call costs are process CPU time (all threads of this process), which other load on the
# machine barely disturbs; ``--wall`` measures wall-clock time instead.
_clock = time.process_time


def per_call_us(fn, number, repeat):
    """Median over ``repeat`` runs of the mean time of ``number`` calls, in microseconds."""
    for _ in range(min(number, 200)):
        fn()
    times = []
    for _ in range(repeat):
        t0 = _clock()
        for _ in range(number):
            fn()
        times.append((_clock() - t0) / number * 1e6)
    return statistics.median(times)


def median_ms(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


SIZES = [64, 256, 256, 256, 10]


def mlp_params(rng):
    return [(rng.standard_normal((a, b)).astype(np.float32) * 0.1,
             np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]


def bench_funcgrad(number, repeat, compile_repeat):
    import funcgrad
    import funcgrad.numpy as jnp

    x = jnp.ones((4,))
    y = jnp.ones((4,))
    tiny = funcgrad.jit(lambda a: a + 1.0)
    out = {"jit dispatch (us)": per_call_us(lambda: tiny(x), number, repeat),
           "eager add (us)": per_call_us(lambda: x + y, number, repeat)}
    rng = np.random.default_rng(0)
    params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in mlp_params(rng)]
    batch = jnp.ones((32, 64))

    def mlp(params, h):
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jnp.tanh(h)
        return h

    def compile_once():
        funcgrad.jit(mlp)(params, batch).block_until_ready()
    compile_once()
    out["MLP trace+compile (ms)"] = median_ms(compile_once, compile_repeat)
    return out


def bench_jax(number, repeat, compile_repeat):
    import jax
    import jax.numpy as jnp

    x = jnp.ones((4,))
    y = jnp.ones((4,))
    tiny = jax.jit(lambda a: a + 1.0)
    out = {"jit dispatch (us)": per_call_us(lambda: tiny(x), number, repeat),
           "eager add (us)": per_call_us(lambda: x + y, number, repeat)}
    rng = np.random.default_rng(0)
    params = [(jnp.asarray(w), jnp.asarray(b)) for w, b in mlp_params(rng)]
    batch = jnp.ones((32, 64))

    def mlp(params, h):
        for i, (w, b) in enumerate(params):
            h = h @ w + b
            if i < len(params) - 1:
                h = jnp.tanh(h)
        return h

    def compile_once():
        jax.clear_caches()
        jax.jit(mlp)(params, batch).block_until_ready()
    compile_once()
    out["MLP trace+compile (ms)"] = median_ms(compile_once, compile_repeat)
    return out


def bench_torch(number, repeat, compile_repeat):
    import torch

    torch.set_num_threads(1)
    x = torch.ones(4)
    y = torch.ones(4)
    out = {"eager add (us)": per_call_us(lambda: x + y, number, repeat)}
    try:
        scripted = torch.jit.script(_torch_tiny)
    except Exception:   # TorchScript is deprecated and may be missing
        return out
    out["jit dispatch (us)"] = per_call_us(lambda: scripted(x), number, repeat)
    return out


def _torch_tiny(a):
    return a + 1.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--wall", action="store_true", help="wall-clock instead of CPU time")
    args = parser.parse_args()
    global _clock
    if args.wall:
        _clock = time.perf_counter
    number, repeat, compile_repeat = (2000, 5, 3) if args.quick else (10000, 9, 5)
    results = {"funcgrad": bench_funcgrad(number, repeat, compile_repeat)}
    for name, fn in (("jax", bench_jax), ("torch", bench_torch)):
        try:
            results[name] = fn(number, repeat, compile_repeat)
        except ImportError as exc:
            print(f"({name} not importable: {exc}; skipped)")
    rows = list(results["funcgrad"])
    libs = list(results)
    header = f"{'measurement':<24}" + "".join(f"{lib:>12}" for lib in libs)
    if "jax" in results:
        header += f"{'funcgrad/jax':>14}"
    print(header)
    print("-" * len(header))
    for row in rows:
        line = f"{row:<24}"
        for lib in libs:
            v = results[lib].get(row)
            line += f"{v:>12.2f}" if v is not None else f"{'-':>12}"
        if "jax" in results:
            line += f"{results['funcgrad'][row] / results['jax'][row]:>13.2f}x"
        print(line)
    clock = "wall-clock" if args.wall else "process CPU"
    print(f"\nMedians of {clock} time; MLP compile is wall-clock. The torch 'jit dispatch' row is "
          f"TorchScript. Targets: funcgrad/jax <= 1.0x for jit dispatch and eager add.")


if __name__ == "__main__":
    main()
