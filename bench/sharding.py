"""jit with shardings on 4 host CPU devices (a 2x2 data x model mesh): funcgrad vs JAX side by
side in one run.

(1) dispatch of a tiny sharded jitted function (already-placed input, result awaited), (2) an
MLP training step (64-256-256-10, batch 64) with the batch split over "data" and the hidden
layers split over "model" (Megatron-style column then row split), the gradient and an SGD
update in one jitted program, parameters and batch already placed. Both libraries compile the
same shardings with XLA's SPMD partitioner. With 4 devices on 2 cores only the ratio means
anything; each number is the median over rounds alternating between the two libraries.

Run: ``python bench/sharding.py`` (``--quick`` for fewer repeats).
"""
import argparse
import os
import sys

# bench/pmap.py sets up 4 host CPU devices for both libraries when imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pmap import per_call_us  # noqa: E402  (the same alternating-rounds timer)

import numpy as np  # noqa: E402

SIZES = (64, 256, 256, 10)
BATCH = 64


def data():
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(a, b)).astype(np.float32) / np.sqrt(a),
               np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]
    x = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=BATCH)
    return params, x, y


def make_case(lib):
    """(tiny call, training step call) for ``lib`` in {"funcgrad", "jax"}."""
    if lib == "jax":
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P
        # Mesh() gives Auto axes (jax.make_mesh's Explicit axes would reject the row split)
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
        put, jit, grad, nn_log_softmax = jax.device_put, jax.jit, jax.grad, jax.nn.log_softmax
        block = jax.block_until_ready
    else:
        import funcgrad as jax_like
        import funcgrad.numpy as jnp
        from funcgrad.sharding import NamedSharding, P
        mesh = jax_like.make_mesh((2, 2), ("data", "model"))
        put, jit, grad = jax_like.device_put, jax_like.jit, jax_like.grad
        block = jax_like.block_until_ready

        def nn_log_softmax(z):
            return z - jnp.log(jnp.sum(jnp.exp(z - z.max(1, keepdims=True)), 1,
                                       keepdims=True)) - z.max(1, keepdims=True)
    S = lambda *spec: NamedSharding(mesh, P(*spec))                 # noqa: E731
    # column split, row split, replicated head
    pspecs = [(S(None, "model"), S("model")), (S("model", None), S()), (S(), S())]
    params, x, y = data()
    params = [(put(w, sw), put(b, sb)) for (w, b), (sw, sb) in zip(params, pspecs)]
    x, y = put(x, S("data")), put(y.astype(np.int32), S("data"))
    onehot = jnp.eye(SIZES[-1])

    def loss(ps, xb, yb):
        h = xb
        for i, (w, b) in enumerate(ps):
            h = h @ w + b
            if i < len(ps) - 1:
                h = jnp.tanh(h)
        return -jnp.mean(jnp.sum(nn_log_softmax(h) * onehot[yb], 1))

    def step(ps, xb, yb):
        g = grad(loss)(ps, xb, yb)
        return [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(ps, g)]

    flat = [s for pair in pspecs for s in pair]
    pshard = [tuple(p) for p in pspecs]
    jstep = jit(step, in_shardings=(pshard, S("data"), S("data")), out_shardings=pshard) \
        if lib == "jax" else jit(step, in_shardings=(None, S("data"), S("data")),
                                 out_shardings=tuple(flat))
    tiny = jit(lambda v: v + 1.0, in_shardings=S("data"), out_shardings=S("data"))
    v = put(np.ones((8, 4), np.float32), S("data"))
    state = {"p": params}

    def run_step():
        state["p"] = [tuple(p) for p in jstep(state["p"], x, y)]
        block(state["p"])
    return (lambda: block(tiny(v))), run_step, (lambda: float(loss(state["p"], x, y)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    number, repeat = (20, 3) if args.quick else (100, 7)
    cases = {lib: make_case(lib) for lib in ("funcgrad", "jax")}
    tiny = per_call_us({lib: c[0] for lib, c in cases.items()}, number, repeat)
    step = per_call_us({lib: c[1] for lib, c in cases.items()}, max(number // 5, 4), repeat)
    losses = {lib: c[2]() for lib, c in cases.items()}
    print("| case | funcgrad | JAX | ratio |\n| --- | --- | --- | --- |")
    for name, t in (("tiny sharded jit call", tiny), ("MLP step, 2x2 data x model", step)):
        print(f"| {name} | {t['funcgrad']:.0f} µs | {t['jax']:.0f} µs | "
              f"{t['funcgrad'] / t['jax']:.2f} |")
    print(f"loss after the timed steps: funcgrad {losses['funcgrad']:.6f}, "
          f"JAX {losses['jax']:.6f}")


if __name__ == "__main__":
    main()
