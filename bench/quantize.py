"""Quantized inference next to float32, funcgrad and PyTorch side by side in one run.

Row (1): a Linear layer, 16x1024 input @ 1024x1024 weight (+ bias), float32 against dynamic
int8 (weights quantized once per channel, activations per row at run time): funcgrad's
``jit(quantize(f, QuantizeConfig()))`` and PyTorch's
``torch.ao.quantization.quantize_dynamic`` (when torch is installed; its default x86 engine,
fbgemm). Also funcgrad's weight-only int8 (dequantize into a float product).

Each number is the median over ``--repeats`` runs of the mean time of ``--calls`` calls (ms).
Rows (2) LSTM LM and (3) LeNet of issue 22 come with ``funcgrad.quantization``.

Run: python bench/quantize.py [--repeats 7] [--calls 50] [--threads N]
"""
import argparse
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


def median_ms(fn, sync, repeats, calls):
    for _ in range(3):
        sync(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn()
        sync(out)
        times.append((time.perf_counter() - t0) / calls * 1e3)
    return statistics.median(times)


def funcgrad_rows(x, w, b, repeats, calls):
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad.quantize import QuantizeConfig

    def linear(x):
        return x @ w.T + b
    xs = jnp.asarray(x)
    ref = x @ w.T + b
    rows = {}
    for name, fn in (("float32", funcgrad.jit(linear)),
                     ("dynamic int8", funcgrad.jit(funcgrad.quantize(linear, QuantizeConfig()))),
                     ("weight-only int8", funcgrad.jit(funcgrad.quantize(
                         linear, QuantizeConfig(activation="none"))))):
        err = float(np.abs(np.asarray(fn(xs)) - ref).max())
        rows[name] = (median_ms(lambda: fn(xs), lambda o: o.block_until_ready(), repeats, calls),
                      err)
    return rows


def torch_rows(x, w, b, repeats, calls):
    try:
        import torch
    except ImportError:
        return {}
    torch.manual_seed(0)
    lin = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qlin = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                      dtype=torch.qint8)
    xt = torch.from_numpy(x)
    ref = x @ w.T + b
    rows = {}
    with torch.inference_mode():
        for name, m in (("float32", lin), ("dynamic int8", qlin)):
            err = float(np.abs(m(xt).numpy() - ref).max())
            rows[name] = (median_ms(lambda: m(xt), lambda o: None, repeats, calls), err)
    return rows


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
    fg = funcgrad_rows(x, w, b, args.repeats, args.calls)
    tc = torch_rows(x, w, b, args.repeats, args.calls)
    print("(1) Linear 16x1024 @ 1024x1024, CPU; ms per call (median of "
          f"{args.repeats} x {args.calls} calls), max |error| against NumPy float32")
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
