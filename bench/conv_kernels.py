"""Which XLA:CPU kernels run convolutions: 2-d convolutions forward and backward (input and
weight gradients, under ``jit(value_and_grad(...))``) for LeNet and ResNet shapes, with
funcgrad's CPU compile options (XLA's own convolution kernels, YNNPACK for matrix products and
reductions; 1x1 convolutions with at least 256 output positions per example as matrix
products, ``F._conv_pointwise``) against the same program compiled with YNNPACK convolutions
(XLA's default), and against PyTorch eager and JAX ``jit`` when installed.

funcgrad's two variants are compiled in this process and timed in turns, round by round; the
table shows medians in ms and the ratio default/YNNPACK (< 1.0: the default is faster). PyTorch
and JAX run in their own processes (``--worker``), as in ``bench/nn_train.py``.

Run: python bench/conv_kernels.py [--rounds 7] [--iters 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from nn_train import median_step_ms  # noqa: E402

# (name, x shape NCHW, weight shape OIHW, stride, padding[, groups])
CASES = [
    ("LeNet conv2 5x5 6->16, 14x14, batch 64", (64, 6, 14, 14), (16, 6, 5, 5), 1, 0),
    ("ResNet 3x3 64->64, 56x56, batch 8", (8, 64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("ResNet 3x3 256->256, 14x14, batch 8", (8, 256, 14, 14), (256, 256, 3, 3), 1, 1),
    ("ResNet 1x1 64->256, 56x56, batch 8", (8, 64, 56, 56), (256, 64, 1, 1), 1, 0),
    ("ResNet stem 7x7/2 3->64, 112x112, batch 8", (8, 3, 112, 112), (64, 3, 7, 7), 2, 3),
    ("3x3/2 64->128, 56x56, batch 8", (8, 64, 56, 56), (128, 64, 3, 3), 2, 1),
    ("ResNet downsample 1x1/2 64->128, 56x56, batch 8", (8, 64, 56, 56), (128, 64, 1, 1), 2, 0),
    ("1x1/2 256->512, 14x14, batch 8", (8, 256, 14, 14), (512, 256, 1, 1), 2, 0),
    ("ResNet-18 at 64x64: 3x3 512->512, 2x2, batch 8", (8, 512, 2, 2), (512, 512, 3, 3), 1, 1),
    ("ResNet-18 at 64x64: 3x3/2 256->512, 4x4, batch 8", (8, 256, 4, 4), (512, 256, 3, 3), 2,
     1),
    ("MNIST-style 3x3 1->32, 28x28, batch 64", (64, 1, 28, 28), (32, 1, 3, 3), 1, 1),
    ("depthwise 3x3 64ch, 56x56, batch 8", (8, 64, 56, 56), (64, 1, 3, 3), 1, 1, 64),
    ("depthwise 3x3 x2 64->128ch, 28x28, batch 8", (8, 64, 28, 28), (128, 1, 3, 3), 1, 1, 64),
]
YNN_ALL = ("LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_INDIVIDUAL_CONVOLUTION,"
           "LIBRARY_FUSION_TYPE_REDUCE")


def groups(case):
    return case[5] if len(case) > 5 else 1


def inputs(case):
    xs, ws = case[1], case[2]
    rng = np.random.default_rng(0)
    return (rng.standard_normal(xs).astype(np.float32),
            (rng.standard_normal(ws) * 0.1).astype(np.float32))


def timed(fn, rounds, iters):
    """Median over rounds of the mean ms of ``iters`` calls of ``fn`` (which blocks)."""
    return median_step_ms(fn, iters, rounds=rounds, warmup=1)


def funcgrad_variants(case, rounds, iters):
    """{variant: (forward ms, grad ms)} for funcgrad's options and for YNNPACK convolutions."""
    import funcgrad
    import funcgrad.nn.functional as F
    import funcgrad.numpy as jnp
    from funcgrad.lowering import executable
    stride, pad, g = case[3], case[4], groups(case)
    x, w = (jnp.asarray(a) for a in inputs(case))
    key = "xla_cpu_experimental_ynn_fusion_type"
    default = executable.CPU_COMPILE_OPTIONS[key]
    fns = {}
    for name, value in (("funcgrad", default), ("ynn conv", YNN_ALL)):
        executable.CPU_COMPILE_OPTIONS[key] = value
        fwd = funcgrad.jit(lambda x, w: F.conv2d(x, w, stride=stride, padding=pad, groups=g))
        grad = funcgrad.jit(funcgrad.value_and_grad(
            lambda x, w: jnp.sum(F.conv2d(x, w, stride=stride, padding=pad, groups=g) ** 2),
            argnums=(0, 1)))
        fwd(x, w).block_until_ready()
        grad(x, w)[0].block_until_ready()      # compiled now, with this option
        fns[name] = (lambda f=fwd: f(x, w).block_until_ready(),
                     lambda g=grad: g(x, w)[0].block_until_ready())
    executable.CPU_COMPILE_OPTIONS[key] = default
    res = {n: ([], []) for n in fns}
    for _ in range(rounds):
        for n, (f, g) in fns.items():
            res[n][0].append(timed(f, 1, iters))
            res[n][1].append(timed(g, 1, iters))
    return {n: (statistics.median(a), statistics.median(b)) for n, (a, b) in res.items()}


def torch_times(case, rounds, iters):
    import torch
    stride, pad, g = case[3], case[4], groups(case)
    x, w = (torch.tensor(a) for a in inputs(case))
    x.requires_grad_(True)
    w.requires_grad_(True)

    def fwd():
        with torch.no_grad():
            torch.nn.functional.conv2d(x, w, stride=stride, padding=pad, groups=g)

    def grad():
        x.grad = w.grad = None
        (torch.nn.functional.conv2d(x, w, stride=stride, padding=pad, groups=g) ** 2).sum() \
            .backward()
    return timed(fwd, rounds, iters), timed(grad, rounds, iters)


def jax_times(case, rounds, iters):
    import jax
    import jax.numpy as jnp
    stride, pad, g = case[3], case[4], groups(case)
    x, w = (jnp.asarray(a) for a in inputs(case))

    def conv(x, w):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad)] * 2,
                                            dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                            feature_group_count=g)
    fwd = jax.jit(conv)
    grad = jax.jit(jax.value_and_grad(lambda x, w: jnp.sum(conv(x, w) ** 2), argnums=(0, 1)))
    return (timed(lambda: fwd(x, w).block_until_ready(), rounds, iters),
            timed(lambda: grad(x, w)[0].block_until_ready(), rounds, iters))


WORKERS = {"torch": torch_times, "jax": jax_times}


def available(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "CASE"))
    args = ap.parse_args()
    if args.worker:
        name, i = args.worker
        print(json.dumps(WORKERS[name](CASES[int(i)], args.rounds, args.iters)))
        return
    others = [n for n in WORKERS if available(n)]
    cols = ["funcgrad", "ynn conv"] + others
    print(f"ms per call, median of {args.rounds} rounds of {args.iters} calls "
          f"(fwd: forward; grad: value_and_grad w.r.t. input and weight)")
    print("| convolution | " + " | ".join(f"{c} fwd | {c} grad" for c in cols)
          + " | funcgrad / ynn conv (grad) |")
    print("| --- " * (2 + 2 * len(cols)) + "|")
    for i, case in enumerate(CASES):
        t = funcgrad_variants(case, args.rounds, args.iters)
        for n in others:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", n,
                                  str(i), "--rounds", str(args.rounds), "--iters",
                                  str(args.iters)], capture_output=True, text=True, check=True)
            t[n] = tuple(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"| {case[0]} | " + " | ".join(f"{t[c][0]:.2f} | {t[c][1]:.2f}" for c in cols)
              + f" | {t['funcgrad'][1] / t['ynn conv'][1]:.2f}x |", flush=True)
    missing = [n for n in WORKERS if not available(n)]
    if missing:
        print(f"(not installed, so not measured: {', '.join(missing)})")


if __name__ == "__main__":
    main()
