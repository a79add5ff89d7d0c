"""Dispatch overhead: funcgrad vs JAX vs PyTorch (when importable).

Measures (a) jit dispatch of a tiny function, (b) ``jit(f)(x)`` written inline (a new jit
object per call, as in notebooks and ``jit(f).lower(...)``: the cache lives with ``f``) for a
64x64 matmul and tanh, (c) eager latency of adding two small arrays, (d) trace + compile time
of a 4-layer MLP forward. Each number is the median over several
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


def per_call_us(fns, number, repeat):
    """{name: median over ``repeat`` rounds of the mean time of ``number`` calls, in us}.

    Rounds alternate between the callables so that drifting machine load hits them alike.
    """
    for fn in fns.values():
        for _ in range(min(number, 200)):
            fn()
    times = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = _clock()
            for _ in range(number):
                fn()
            times[name].append((_clock() - t0) / number * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


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


def _jax_style_cases(jit, jnp, before_compile=lambda: None):
    """The three measurements for a library with JAX's API (funcgrad or JAX itself)."""
    x = jnp.ones((4,))
    y = jnp.ones((4,))
    tiny = jit(lambda a: a + 1.0)
    m = jnp.ones((64, 64)) * 0.01

    def matmul_tanh(a):
        return jnp.tanh(a @ a)
    calls = {"jit dispatch (us)": lambda: tiny(x),
             "inline jit(f)(x) (us)": lambda: jit(matmul_tanh)(m).block_until_ready(),
             "eager add (us)": lambda: x + y}
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
        before_compile()
        jit(mlp)(params, batch).block_until_ready()
    return calls, compile_once


def bench_funcgrad(number, repeat, compile_repeat):
    import funcgrad
    import funcgrad.numpy as jnp
    return _jax_style_cases(funcgrad.jit, jnp, funcgrad.clear_caches)


def bench_jax(number, repeat, compile_repeat):
    import jax
    import jax.numpy as jnp
    return _jax_style_cases(jax.jit, jnp, jax.clear_caches)


def bench_torch(number, repeat, compile_repeat):
    import torch

    torch.set_num_threads(1)
    x = torch.ones(4)
    y = torch.ones(4)
    calls = {"eager add (us)": lambda: x + y}
    try:
        scripted = torch.jit.script(_torch_tiny)
        scripted(x)
        calls["jit dispatch (us)"] = lambda: scripted(x)
    except Exception:   # TorchScript is deprecated and may be missing
        pass
    return calls, None


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
    setups = {"funcgrad": bench_funcgrad(number, repeat, compile_repeat)}
    for name, fn in (("jax", bench_jax), ("torch", bench_torch)):
        try:
            setups[name] = fn(number, repeat, compile_repeat)
        except ImportError as exc:
            print(f"({name} not importable: {exc}; skipped)")
    flat = {(lib, row): call for lib, (calls, _) in setups.items() for row, call in calls.items()}
    timed = per_call_us(flat, number, repeat)
    results = {lib: {} for lib in setups}
    for (lib, row), value in timed.items():
        results[lib][row] = value
    for lib, (_, compile_once) in setups.items():
        if compile_once is not None:
            compile_once()
            results[lib]["MLP trace+compile (ms)"] = median_ms(compile_once, compile_repeat)
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
          f"TorchScript. Targets: funcgrad/jax <= 1.0x for jit dispatch and eager add, "
          f"<= 1.5x for inline jit(f)(x).")


if __name__ == "__main__":
    main()
