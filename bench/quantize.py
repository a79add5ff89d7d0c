"""Quantized inference next to float32, funcgrad and PyTorch side by side in one run.

Row (1): a Linear layer, 16x1024 input @ 1024x1024 weight (+ bias), float32 against dynamic
int8 (weights quantized once per channel, activations per row at run time): funcgrad's
``jit(quantize(f, QuantizeConfig()))`` and PyTorch's
``torch.ao.quantization.quantize_dynamic`` (when torch is installed; its default x86 engine,
fbgemm). Also funcgrad's weight-only int8 (dequantize into a float product).

Each number is the median over ``--repeats`` rounds of the mean time of ``--calls`` calls (ms);
the variants alternate within each round, so the load of a shared machine falls on all alike.
Rows (2) LSTM LM and (3) LeNet of issue 22 come with ``funcgrad.quantization``.

Run: python bench/quantize.py [--repeats 7] [--calls 50] [--threads N]
"""
import argparse
import functools
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("FUNCGRAD_PLATFORM", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402


def time_ms(fn, sync, calls):
    """Mean time of ``calls`` calls of ``fn`` (ms), synchronized at the end."""
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn()
    sync(out)
    return (time.perf_counter() - t0) / calls * 1e3


def funcgrad_variants(x, w, b):
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad.quantize import QuantizeConfig

    def linear(x):
        return x @ w.T + b
    xs = jnp.asarray(x)
    sync = lambda o: o.block_until_ready()
    out = {}
    for name, fn in (("float32", funcgrad.jit(linear)),
                     ("dynamic int8", funcgrad.jit(funcgrad.quantize(linear, QuantizeConfig()))),
                     ("weight-only int8", funcgrad.jit(funcgrad.quantize(
                         linear, QuantizeConfig(activation="none"))))):
        out[name] = (functools.partial(fn, xs), sync, lambda fn=fn: np.asarray(fn(xs)))
    return out


def torch_variants(x, w, b):
    try:
        import torch
    except ImportError:
        return {}
    lin = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qlin = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                      dtype=torch.qint8)
    xt = torch.from_numpy(x)

    def call(m):
        with torch.inference_mode():
            return m(xt)
    return {name: (functools.partial(call, m), lambda o: None,
                   lambda m=m: call(m).numpy())
            for name, m in (("float32", lin), ("dynamic int8", qlin))}


def measure(variants, repeats, calls):
    """Median (over ``repeats`` rounds, every variant once per round, interleaved so that the
    machine's load falls on all alike) of each variant's mean call time."""
    for fn, sync, _ in variants.values():
        for _ in range(3):
            sync(fn())
    times = {key: [] for key in variants}
    for _ in range(repeats):
        for key, (fn, sync, _) in variants.items():
            times[key].append(time_ms(fn, sync, calls))
    return {key: statistics.median(t) for key, t in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 1024)).astype(np.float32)
    w = (rng.normal(size=(1024, 1024)) / 32).astype(np.float32)
    b = (rng.normal(size=1024) / 10).astype(np.float32)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    ref = x @ w.T + b
    variants = {("funcgrad", k): v for k, v in funcgrad_variants(x, w, b).items()}
    variants.update({("torch", k): v for k, v in torch_variants(x, w, b).items()})
    ms = measure(variants, args.repeats, args.calls)
    err = {key: float(np.abs(v[2]() - ref).max()) for key, v in variants.items()}
    fg = {k: (ms[f, k], err[f, k]) for f, k in ms if f == "funcgrad"}
    tc = {k: (ms[f, k], err[f, k]) for f, k in ms if f == "torch"}
    print("(1) Linear 16x1024 @ 1024x1024, CPU; ms per call (median of "
          f"{args.repeats} x {args.calls} calls), max |error| against NumPy float32")
    if tc:
        import torch
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, quantized engine "
              f"{torch.backends.quantized.engine}; {os.cpu_count()} CPUs")
    print(f"{'variant':<18} {'funcgrad ms':>12} {'error':>9} {'torch ms':>10} {'error':>9}")
    for name in ("float32", "dynamic int8", "weight-only int8"):
        f_ms, f_err = fg[name]
        t = tc.get(name)
        t_str = f"{t[0]:10.3f} {t[1]:9.4f}" if t else f"{'-':>10} {'-':>9}"
        print(f"{name:<18} {f_ms:12.3f} {f_err:9.4f} {t_str}")
    f32, i8 = fg["float32"][0], fg["dynamic int8"][0]
    print(f"funcgrad int8 / float32: {i8 / f32:.2f}x time", end="")
    if tc:
        print(f"; funcgrad int8 / torch int8: {i8 / tc['dynamic int8'][0]:.2f}x time")
    else:
        print(" (torch not installed)")


if __name__ == "__main__":
    main()
