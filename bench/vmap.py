"""Per-example gradients of a small MLP: funcgrad ``jit(vmap(grad(loss)))`` against JAX's
``jax.jit(jax.vmap(jax.grad(loss)))`` and a hand-batched funcgrad version (the per-example
gradients derived by hand with batched einsums, under ``jit``).

All three compute the same numbers (checked before timing). Each variant is compiled and
warmed up, then timed in ``--runs`` rounds of ``--iters`` calls (the variants take turns each
round, so machine load hits all alike); the table shows the median time per call and the ratios
funcgrad/JAX and funcgrad/hand-batched (<= 1.0 means funcgrad is at least as fast).

If ``funcgrad.grad`` is not available, the forward pass (per-example losses) is benchmarked
instead: ``jit(vmap(loss))`` vs ``jax.jit(jax.vmap(loss))`` vs a hand-batched forward pass; the
output says which mode ran.

Run: python bench/vmap.py [--batch 128] [--din 32] [--hidden 64] [--dout 10] [--runs 7]
     [--iters 200] [--forward]
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


def make_data(batch, din, hidden, dout, seed=0):
    rng = np.random.default_rng(seed)
    params = {"w1": (rng.standard_normal((din, hidden)) / np.sqrt(din)).astype(np.float32),
              "b1": np.zeros(hidden, np.float32),
              "w2": (rng.standard_normal((hidden, dout)) / np.sqrt(hidden)).astype(np.float32),
              "b2": np.zeros(dout, np.float32)}
    x = rng.standard_normal((batch, din)).astype(np.float32)
    y = rng.standard_normal((batch, dout)).astype(np.float32)
    return params, x, y


def make_loss(np_):
    def loss(params, x, y):
        h = np_.tanh(x @ params["w1"] + params["b1"])
        out = h @ params["w2"] + params["b2"]
        return 0.5 * np_.sum((out - y) ** 2)
    return loss


def hand_batched_grads(params, x, y):
    """Per-example gradients of ``loss`` for a batch, by hand: outer products by broadcasting."""
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    e = h @ params["w2"] + params["b2"] - y
    dz = (e @ params["w2"].T) * (1.0 - h * h)
    return {"w1": x[:, :, None] * dz[:, None, :], "b1": dz,
            "w2": h[:, :, None] * e[:, None, :], "b2": e}


def hand_batched_grads_einsum(params, x, y):
    """The same with one einsum per weight."""
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    e = h @ params["w2"] + params["b2"] - y
    dz = (e @ params["w2"].T) * (1.0 - h * h)
    return {"w1": fnp.einsum("bi,bj->bij", x, dz), "b1": dz,
            "w2": fnp.einsum("bi,bj->bij", h, e), "b2": e}


def hand_batched_forward(params, x, y):
    h = fnp.tanh(x @ params["w1"] + params["b1"])
    out = h @ params["w2"] + params["b2"]
    return 0.5 * fnp.sum((out - y) ** 2, axis=1)


def time_calls(fn, args, iters, block):
    t0 = time.perf_counter()
    for _ in range(iters):
        out = fn(*args)
    block(out)
    return (time.perf_counter() - t0) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--din", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--dout", type=int, default=10)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--forward", action="store_true", help="benchmark the forward pass only")
    args = ap.parse_args()

    import jax
    import jax.numpy as jnp
    jax.config.update("jax_platforms", "cpu")

    params, x, y = make_data(args.batch, args.din, args.hidden, args.dout)
    grad = getattr(funcgrad, "grad", None)
    if grad is None:
        from funcgrad.transforms import ad     # before funcgrad.grad is exported
        grad = getattr(ad, "grad", None)
    use_grad = grad is not None and not args.forward
    fg_loss, jax_loss = make_loss(fnp), make_loss(jnp)
    if use_grad:
        mode = "per-example gradients: jit(vmap(grad(loss)))"
        fg_fn = funcgrad.jit(funcgrad.vmap(grad(fg_loss), in_axes=(None, 0, 0)))
        jax_fn = jax.jit(jax.vmap(jax.grad(jax_loss), in_axes=(None, 0, 0)))
        hand_fn = funcgrad.jit(hand_batched_grads)
        hand2_fn = funcgrad.jit(hand_batched_grads_einsum)
    else:
        mode = ("per-example losses (forward only; funcgrad.grad not available): "
                "jit(vmap(loss))" if not args.forward else "per-example losses: jit(vmap(loss))")
        fg_fn = funcgrad.jit(funcgrad.vmap(fg_loss, in_axes=(None, 0, 0)))
        jax_fn = jax.jit(jax.vmap(jax_loss, in_axes=(None, 0, 0)))
        hand_fn = funcgrad.jit(hand_batched_forward)
        hand2_fn = None

    fg_args = (funcgrad.device_put(params), funcgrad.device_put(x), funcgrad.device_put(y))
    jax_args = (jax.device_put(params), jax.device_put(x), jax.device_put(y))
    outs = {"funcgrad": fg_fn(*fg_args), "jax": jax_fn(*jax_args), "hand": hand_fn(*fg_args)}
    if hand2_fn is not None:
        outs["hand (einsum)"] = hand2_fn(*fg_args)
    ref = jax.tree_util.tree_map(np.asarray, outs["jax"])
    for name in [k for k in outs if k != "jax"]:
        got = funcgrad.tree_util.tree_map(np.asarray, outs[name])
        got_l = funcgrad.tree_util.tree_leaves(got)
        ref_l = jax.tree_util.tree_leaves(ref)
        for g, r in zip(got_l, ref_l):
            np.testing.assert_allclose(g, r, rtol=2e-4, atol=2e-5, err_msg=name)

    fg_block = funcgrad.block_until_ready
    jax_block = jax.block_until_ready
    variants = [("funcgrad vmap", fg_fn, fg_args, fg_block), ("JAX vmap", jax_fn, jax_args,
                                                               jax_block),
                ("funcgrad hand-batched", hand_fn, fg_args, fg_block)]
    if hand2_fn is not None:
        variants.append(("funcgrad hand-batched (einsum)", hand2_fn, fg_args, fg_block))
    for _, fn, a, block in variants:      # warm up
        time_calls(fn, a, max(args.iters // 10, 5), block)
    times = {name: [] for name, *_ in variants}
    for _ in range(args.runs):
        for name, fn, a, block in variants:
            times[name].append(time_calls(fn, a, args.iters, block))
    med = {k: statistics.median(v) for k, v in times.items()}

    print(f"{mode}; batch={args.batch}, MLP {args.din}-{args.hidden}-{args.dout}, "
          f"median of {args.runs} runs x {args.iters} calls, device "
          f"{funcgrad.devices()[0].platform}")
    print()
    print("| variant | time per call (us) | funcgrad vmap / this |")
    print("| --- | ---: | ---: |")
    for name, *_ in variants:
        print(f"| {name} | {med[name] * 1e6:.1f} | {med['funcgrad vmap'] / med[name]:.2f} |")
    print()
    print(f"funcgrad vmap / JAX: {med['funcgrad vmap'] / med['JAX vmap']:.2f}x (target <= 1.0); "
          f"funcgrad vmap / hand-batched: "
          f"{med['funcgrad vmap'] / med['funcgrad hand-batched']:.2f}x (target <= 1.1)")


if __name__ == "__main__":
    main()
