"""Reverse mode of a 4-layer tanh MLP (batch 128, width 256): funcgrad
``jit(grad(loss))`` against JAX ``jax.jit(jax.grad(loss))`` and PyTorch eager autograd.

Two numbers per framework:
* step: the median time of one gradient call on warm, compiled code (``--iters`` calls per
  round, ``--runs`` rounds; the frameworks take turns each round so machine load hits all alike);
* trace+compile: the median time of the first call of a freshly jitted function (tracing,
  differentiation, lowering, XLA compilation), over ``--compiles`` fresh functions. PyTorch
  eager has none.

All frameworks compute the same gradients (checked before timing). Ratios are funcgrad/JAX
(<= 1.0 means funcgrad is at least as fast).

Run: python bench/autodiff.py [--batch 128] [--width 256] [--layers 4] [--runs 7] [--iters 100]
     [--compiles 5]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import funcgrad  # noqa: E402
import funcgrad.numpy as fnp  # noqa: E402


def make_data(batch, width, layers, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for _ in range(layers):
        params.append(((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
                       np.zeros(width, np.float32)))
    x = rng.standard_normal((batch, width)).astype(np.float32)
    y = rng.standard_normal((batch, width)).astype(np.float32)
    return params, x, y


def make_loss(np_):
    def loss(params, x, y):
        h = x
        for w, b in params:
            h = np_.tanh(h @ w + b)
        return np_.mean((h - y) ** 2)
    return loss


def _block(tree, leaves_of):
    for leaf in leaves_of(tree):
        leaf.block_until_ready()


def time_calls(fn, args, iters, block):
    t0 = time.perf_counter()
    for _ in range(iters):
        out = fn(*args)
    block(out)
    return (time.perf_counter() - t0) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--compiles", type=int, default=5)
    args = ap.parse_args()

    params_np, x_np, y_np = make_data(args.batch, args.width, args.layers)
    fg_loss = make_loss(fnp)
    fg_params = funcgrad.tree_util.tree_map(funcgrad.device_put, params_np)
    fg_x, fg_y = funcgrad.device_put(x_np), funcgrad.device_put(y_np)
    fg_leaves = funcgrad.tree_util.tree_leaves
    fg_step = funcgrad.jit(funcgrad.grad(fg_loss))
    ref = [np.asarray(g) for g in fg_leaves(fg_step(fg_params, fg_x, fg_y))]

    variants = {"funcgrad": (fg_step, (fg_params, fg_x, fg_y),
                             lambda t: _block(t, fg_leaves))}
    compile_fns = {}

    def fg_compile():
        f = funcgrad.jit(funcgrad.grad(make_loss(fnp)))
        t0 = time.perf_counter()
        _block(f(fg_params, fg_x, fg_y), fg_leaves)
        return time.perf_counter() - t0
    compile_fns["funcgrad"] = fg_compile

    try:
        import jax
        import jax.numpy as jnp_
        jax.config.update("jax_platforms", "cpu")
        jx_params = jax.tree_util.tree_map(jnp_.asarray, params_np)
        jx_x, jx_y = jnp_.asarray(x_np), jnp_.asarray(y_np)
        jx_step = jax.jit(jax.grad(make_loss(jnp_)))
        got = [np.asarray(g) for g in jax.tree_util.tree_leaves(jx_step(jx_params, jx_x, jx_y))]
        for a, b in zip(ref, got):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-6)
        variants["jax"] = (jx_step, (jx_params, jx_x, jx_y),
                           lambda t: _block(t, jax.tree_util.tree_leaves))

        def jx_compile():
            f = jax.jit(jax.grad(make_loss(jnp_)))
            t0 = time.perf_counter()
            _block(f(jx_params, jx_x, jx_y), jax.tree_util.tree_leaves)
            return time.perf_counter() - t0
        compile_fns["jax"] = jx_compile
    except ImportError:
        print("jax not importable: skipping the JAX column")

    try:
        import torch
        torch.set_num_threads(len(os.sched_getaffinity(0)))
        th_params = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
                     for w, b in params_np]
        th_x, th_y = torch.tensor(x_np), torch.tensor(y_np)
        th_loss = make_loss(torch)
        flat = [t for wb in th_params for t in wb]

        def th_step(params, x, y):
            loss = th_loss(params, x, y)
            return torch.autograd.grad(loss, flat)

        got = [g.numpy() for g in th_step(th_params, th_x, th_y)]
        for a, b in zip(ref, got):
            np.testing.assert_allclose(a, b, rtol=2e-3, atol=1e-6)
        variants["torch (eager autograd)"] = (th_step, (th_params, th_x, th_y), lambda t: None)
    except ImportError:
        print("torch not importable: skipping the PyTorch column")

    for name, (fn, a, block) in variants.items():      # warm up
        for _ in range(5):
            block(fn(*a))
    step_times = {name: [] for name in variants}
    for _ in range(args.runs):
        for name, (fn, a, block) in variants.items():
            step_times[name].append(time_calls(fn, a, args.iters, block))
    compile_times = {name: [] for name in compile_fns}
    for _ in range(args.compiles):
        for name, fn in compile_fns.items():
            compile_times[name].append(fn())

    step = {n: statistics.median(t) for n, t in step_times.items()}
    comp = {n: statistics.median(t) for n, t in compile_times.items()}
    print(f"grad of a {args.layers}-layer tanh MLP, batch {args.batch}, width {args.width} "
          f"(float32, CPU; medians of {args.runs} rounds x {args.iters} calls, "
          f"{args.compiles} fresh compiles)")
    print(f"{'framework':<24}{'step (us)':>12}{'trace+compile (ms)':>22}")
    for name in variants:
        c = f"{comp[name] * 1e3:.1f}" if name in comp else "-"
        print(f"{name:<24}{step[name] * 1e6:>12.1f}{c:>22}")
    if "jax" in step:
        print(f"{'funcgrad / jax':<24}{step['funcgrad'] / step['jax']:>12.2f}"
              f"{comp['funcgrad'] / comp['jax']:>22.2f}")
    if "torch (eager autograd)" in step:
        print(f"{'funcgrad / torch':<24}{step['funcgrad'] / step['torch (eager autograd)']:>12.2f}"
              f"{'-':>22}")


if __name__ == "__main__":
    main()
