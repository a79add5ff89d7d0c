"""pmap on 4 host CPU devices: funcgrad vs JAX side by side in one run.

(1) dispatch of a tiny pmapped function (one call, result awaited), (2) a data-parallel MLP
training step (per-device gradients, ``pmean`` over the devices, SGD update), (3) the gradient
of a pmapped loss taken outside the pmap (``grad(lambda p: pmap(loss)(p, x, y).sum())``: the
backward pass is a second program over the devices; neither library compiles the whole
gradient, so tracing is part of each call). All use
``FUNCGRAD_CPU_DEVICES=4`` and ``XLA_FLAGS=--xla_force_host_platform_device_count=4``. With 4
devices on 2 cores only the ratio means anything. Each number is the median over rounds that
alternate between the two libraries.

Run: ``python bench/pmap.py`` (``--quick`` for fewer repeats).
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["FUNCGRAD_CPU_DEVICES"] = "4"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                           + " --xla_force_host_platform_device_count=4").strip()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

N = 4


def per_call_us(fns, number, repeat):
    times = {name: [] for name in fns}
    for fn in fns.values():
        for _ in range(10):
            fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(number):
                fn()
            times[name].append((time.perf_counter() - t0) / number * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def mlp_params(rng, sizes):
    return [((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32),
             np.zeros(b, np.float32)) for a, b in zip(sizes[:-1], sizes[1:])]


def make_loss(lib):
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = lib.tanh(h @ w + b)
        w, b = params[-1]
        return lib.mean((h @ w + b - y) ** 2)
    return loss


def make_step(lib, lax, grad, pmap):
    loss = make_loss(lib)

    def step(params, x, y):
        g = lax.pmean(grad(loss)(params, x, y), "d")
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(params, g)], \
            lax.pmean(loss(params, x, y), "d")
    return pmap(step, axis_name="d", in_axes=(None, 0, 0), out_axes=(None, None))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    number, repeat = (50, 3) if args.quick else (300, 7)

    import funcgrad
    import funcgrad.numpy as fnp
    import jax
    import jax.numpy as jjnp
    assert funcgrad.local_device_count() == N and jax.local_device_count() == N

    x = np.arange(N * 8, dtype=np.float32).reshape(N, 8)
    f_fg = funcgrad.pmap(lambda v: v * 2 + 1)
    f_jx = jax.pmap(lambda v: v * 2 + 1)
    xs_fg, xs_jx = f_fg(x), f_jx(x)           # already-sharded inputs: pure dispatch
    tiny = per_call_us({"funcgrad": lambda: f_fg(xs_fg).block_until_ready(),
                        "jax": lambda: f_jx(xs_jx).block_until_ready()}, number, repeat)

    rng = np.random.default_rng(0)
    sizes = [64, 256, 256, 10]
    params = mlp_params(rng, sizes)
    bx = rng.standard_normal((N, 32, 64)).astype(np.float32)
    by = rng.standard_normal((N, 32, 10)).astype(np.float32)
    step_fg = make_step(fnp, funcgrad.lax, funcgrad.grad, funcgrad.pmap)
    step_jx = make_step(jjnp, jax.lax, jax.grad, jax.pmap)
    p_fg = [tuple(funcgrad.device_put(a) for a in layer) for layer in params]
    p_jx = [tuple(jax.device_put(a) for a in layer) for layer in params]
    bx_fg, by_fg = funcgrad.pmap(lambda a: a)(bx), funcgrad.pmap(lambda a: a)(by)
    bx_jx, by_jx = jax.pmap(lambda a: a)(bx), jax.pmap(lambda a: a)(by)
    _, l_fg = step_fg(p_fg, bx_fg, by_fg)
    _, l_jx = step_jx(p_jx, bx_jx, by_jx)
    np.testing.assert_allclose(float(l_fg), float(l_jx), rtol=1e-4)
    state = {"fg": p_fg, "jx": p_jx}

    def run_fg():
        state["fg"], loss = step_fg(state["fg"], bx_fg, by_fg)
        loss.block_until_ready()

    def run_jx():
        state["jx"], loss = step_jx(state["jx"], bx_jx, by_jx)
        loss.block_until_ready()
    train = per_call_us({"funcgrad": run_fg, "jax": run_jx}, max(number // 5, 10), repeat)

    def grad_of_pmap(lib, grad, pmap):
        per_device = pmap(make_loss(lib), in_axes=(None, 0, 0))
        return grad(lambda p, x, y: per_device(p, x, y).sum())
    g_fg = grad_of_pmap(fnp, funcgrad.grad, funcgrad.pmap)
    g_jx = grad_of_pmap(jjnp, jax.grad, jax.pmap)
    for a, b in zip(funcgrad.tree_util.tree_leaves(g_fg(p_fg, bx_fg, by_fg)),
                    jax.tree_util.tree_leaves(g_jx(p_jx, bx_jx, by_jx))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-3, atol=1e-5)
    outer = per_call_us(
        {"funcgrad": lambda: funcgrad.tree_util.tree_leaves(
            g_fg(p_fg, bx_fg, by_fg))[0].block_until_ready(),
         "jax": lambda: jax.tree_util.tree_leaves(
             g_jx(p_jx, bx_jx, by_jx))[0].block_until_ready()},
        max(number // 10, 5), repeat)

    print(f"pmap on {N} host CPU devices (wall time per call, median of {repeat} rounds)")
    print(f"{'case':<36}{'funcgrad us':>14}{'jax us':>12}{'ratio':>8}")
    for name, t in (("tiny pmapped function", tiny), ("MLP data-parallel train step", train),
                    ("grad of a pmapped MLP loss", outer)):
        print(f"{name:<36}{t['funcgrad']:>14.1f}{t['jax']:>12.1f}"
              f"{t['funcgrad'] / t['jax']:>8.2f}")


if __name__ == "__main__":
    main()
