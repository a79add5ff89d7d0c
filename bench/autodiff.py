"""Reverse mode of a 4-layer tanh MLP (batch 128, width 256): funcgrad
``jit(grad(loss))`` against JAX ``jax.jit(jax.grad(loss))`` and PyTorch eager autograd.

Two numbers per framework:
* step: the median time of one gradient call on warm, compiled code (``--iters`` calls per
  round, ``--runs`` rounds, in ``--rounds`` worker processes per framework; each framework runs
  in its own process and the frameworks take turns, so machine load hits all alike);
* trace+compile: the median time of the first call of a freshly jitted function (tracing,
  differentiation, lowering, XLA compilation), over ``--compiles`` fresh functions. PyTorch
  eager has none.

All frameworks compute the same gradients (checked before timing). Ratios are funcgrad/JAX
(<= 1.0 means funcgrad is at least as fast).

Run: python bench/autodiff.py [--batch 128] [--width 256] [--layers 4] [--rounds 3] [--runs 5]
     [--iters 50] [--compiles 2]        (TORCH_THREADS=n sets PyTorch's intra-op threads)
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


def _jitted_setup(jit, grad, np_mod, tree_util, put, params_np, x_np, y_np):
    """setup() for a framework with jit/grad (funcgrad or JAX)."""
    leaves = tree_util.tree_leaves
    params = tree_util.tree_map(put, params_np)
    x, y = put(x_np), put(y_np)

    def compile_once():
        f = jit(grad(make_loss(np_mod)))
        t0 = time.perf_counter()
        _block(f(params, x, y), leaves)
        return time.perf_counter() - t0
    return (jit(grad(make_loss(np_mod))), (params, x, y), lambda t: _block(t, leaves),
            compile_once)


def setup(name, batch, width, layers):
    """(step function, args, block function, fresh-compile timer) for one framework."""
    params_np, x_np, y_np = make_data(batch, width, layers)
    if name == "funcgrad":
        return _jitted_setup(funcgrad.jit, funcgrad.grad, fnp, funcgrad.tree_util,
                             funcgrad.device_put, params_np, x_np, y_np)
    if name == "jax":
        import jax
        import jax.numpy as jnp_
        jax.config.update("jax_platforms", "cpu")
        return _jitted_setup(jax.jit, jax.grad, jnp_, jax.tree_util, jnp_.asarray, params_np,
                             x_np, y_np)
    import torch
    # One intra-op thread by default: on a small, loaded machine OpenMP's spinning barriers
    # make multi-threaded PyTorch erratic (100x slower when a thread gets descheduled).
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "1")))
    params = [(torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True))
              for w, b in params_np]
    flat = [t for wb in params for t in wb]
    loss = make_loss(torch)

    def step(params, x, y):
        return torch.autograd.grad(loss(params, x, y), flat)
    return step, (params, torch.tensor(x_np), torch.tensor(y_np)), lambda t: None, None


def worker(name, args):
    """Measure one framework in this process; print a JSON line."""
    import json
    fn, a, block, compile_once = setup(name, args.batch, args.width, args.layers)
    out = fn(*a)
    block(out)
    grads = [np.asarray(g.detach().numpy() if hasattr(g, "detach") else g)
             for g in (out if isinstance(out, (tuple, list)) and name.startswith("torch")
                       else _leaves_any(out))]
    for _ in range(5):
        block(fn(*a))
    steps = [time_calls(fn, a, args.iters, block) for _ in range(args.runs)]
    compiles = [compile_once() for _ in range(args.compiles)] if compile_once else []
    np.save(os.path.join(args.tmp, f"{name}.npy"), np.concatenate([g.ravel() for g in grads]))
    print(json.dumps({"step": steps, "compile": compiles}))


def _leaves_any(tree):
    return funcgrad.tree_util.tree_leaves(tree) if not isinstance(tree, (tuple, list)) or \
        not tree or not hasattr(tree[0], "detach") else list(tree)


def main():
    import json
    import subprocess
    import tempfile
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--runs", type=int, default=5, help="timing rounds per worker process")
    ap.add_argument("--iters", type=int, default=50, help="calls per timing round")
    ap.add_argument("--compiles", type=int, default=2, help="fresh compiles per worker")
    ap.add_argument("--rounds", type=int, default=3,
                    help="worker processes per framework (frameworks alternate)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args)

    frameworks = ["funcgrad"]
    for name, module in (("jax", "jax"), ("torch (eager autograd)", "torch")):
        try:
            __import__(module)
            frameworks.append(name)
        except ImportError:
            print(f"{module} not importable: skipping the {name} column")
    step_times = {n: [] for n in frameworks}
    compile_times = {n: [] for n in frameworks}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for name in frameworks:
                # Each framework runs in its own process: XLA CPU clients of two libraries in
                # one process compete for threads and distort each other's timings.
                cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--tmp", tmp]
                for k in ("batch", "width", "layers", "runs", "iters", "compiles"):
                    cmd += [f"--{k}", str(getattr(args, k))]
                res = subprocess.run(cmd, capture_output=True, text=True)
                if res.returncode != 0:
                    raise SystemExit(f"worker {name} failed:\n{res.stderr[-3000:]}")
                data = json.loads(res.stdout.strip().splitlines()[-1])
                step_times[name] += data["step"]
                compile_times[name] += data["compile"]
        ref = np.load(os.path.join(tmp, "funcgrad.npy"))
        for name in frameworks[1:]:
            np.testing.assert_allclose(np.load(os.path.join(tmp, f"{name}.npy")), ref,
                                       rtol=2e-3, atol=1e-6)

    step = {n: statistics.median(t) for n, t in step_times.items()}
    comp = {n: statistics.median(t) for n, t in compile_times.items() if t}
    print(f"grad of a {args.layers}-layer tanh MLP, batch {args.batch}, width {args.width} "
          f"(float32, CPU; gradients agree across frameworks; median over {args.rounds} "
          f"processes x {args.runs} rounds x {args.iters} calls; {args.rounds * args.compiles} "
          f"fresh trace+compiles)")
    print(f"{'framework':<24}{'step (us)':>12}{'trace+compile (ms)':>22}")
    for name in frameworks:
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
