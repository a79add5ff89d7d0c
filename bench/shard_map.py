"""shard_map on 4 host CPU devices (a 2x2 data x model mesh): funcgrad vs JAX side by side in
one run.

(1) an eager call of a tiny shard_map (a ``psum`` over "model" of an already placed (8, 4)
array, result awaited; JAX traces an eager shard_map at every call), (2) the same under
``jit``; (3) a plain ``jit`` of that shard_map with elementwise work before and after it, the
argument an array on one device (both libraries compile one program over the mesh and place
the argument on it at each call); (4) a Megatron-style MLP training step (64-256-256-10, batch 64):
the loss is a shard_map whose body holds the first layer's columns and the second layer's
rows of the "model" axis and the batch rows of the "data" axis (``psum`` over "model",
``pmean`` over "data"), its gradient is taken outside the shard_map and the SGD update runs in
the same ``jit`` with the parameters' shardings, so both libraries compile one program with
manual regions for XLA's SPMD partitioner. With 4 devices on 2 cores only the ratio means
anything; each number is the median over rounds alternating between the two libraries.

Run: ``python bench/shard_map.py`` (``--quick`` for fewer repeats).
"""
import os
import sys

# bench/pmap.py sets up 4 host CPU devices for both libraries when imported
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pmap import per_call_us  # noqa: E402  (the same alternating-rounds timer)

import numpy as np  # noqa: E402

SIZES = (64, 256, 10)
BATCH = 64


def data():
    rng = np.random.default_rng(0)
    w1 = (rng.normal(size=SIZES[:2]) / np.sqrt(SIZES[0])).astype(np.float32)
    b1 = np.zeros(SIZES[1], np.float32)
    w2 = (rng.normal(size=SIZES[1:]) / np.sqrt(SIZES[1])).astype(np.float32)
    x = rng.normal(size=(BATCH, SIZES[0])).astype(np.float32)
    y = rng.normal(size=(BATCH, SIZES[2])).astype(np.float32)
    return (w1, b1, w2), x, y


def make_case(lib):
    """(tiny call, jitted tiny call, jit around it, jitted scan of shard_maps, training step,
    loss now) for ``lib`` in {"funcgrad", "jax"}."""
    if lib == "jax":
        import jax
        import jax.numpy as jnp
        from jax import lax
        from jax.sharding import NamedSharding, PartitionSpec as P
        mesh = jax.sharding.Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("data", "model"))
        smap = jax.shard_map
    else:
        import funcgrad as jax
        import funcgrad.numpy as jnp
        from funcgrad import lax
        from funcgrad.sharding import NamedSharding, P
        mesh = jax.make_mesh((2, 2), ("data", "model"))
        smap = jax.shard_map
    S = lambda *spec: NamedSharding(mesh, P(*spec))                 # noqa: E731
    pspecs = (P(None, "model"), P("model"), P("model", None))
    pshard = tuple(NamedSharding(mesh, s) for s in pspecs)
    params, x, y = data()
    params = tuple(jax.device_put(p, s) for p, s in zip(params, pshard))
    x, y = jax.device_put(x, S("data")), jax.device_put(y, S("data"))

    def body(w1, b1, w2, xb, yb):
        pred = lax.psum(jnp.tanh(xb @ w1 + b1) @ w2, "model")
        return lax.pmean(jnp.mean((pred - yb) ** 2), "data")
    loss = smap(body, mesh=mesh, in_specs=pspecs + (P("data"), P("data")), out_specs=P())

    def step(ps, xb, yb):
        g = jax.grad(lambda q: loss(*q, xb, yb))(ps)
        return tuple(p - 0.05 * d for p, d in zip(ps, g))
    # funcgrad's in_shardings take one sharding per argument: None keeps the placed params'
    jstep = jax.jit(step, in_shardings=(pshard if lib == "jax" else None, S("data"), S("data")),
                    out_shardings=pshard)

    tiny = smap(lambda b: lax.psum(b, "model"), mesh=mesh, in_specs=P("data", "model"),
                out_specs=P("data"))
    v = jax.device_put(np.ones((8, 4), np.float32), S("data", "model"))
    state = {"p": params}

    def run_step():
        state["p"] = jstep(state["p"], x, y)
        jax.block_until_ready(state["p"])
    jtiny = jax.jit(tiny)
    around = jax.jit(lambda a: tiny(jnp.tanh(a) * 2.0) + 1.0)
    u = jnp.asarray(np.ones((8, 4), np.float32))        # on one device (JAX: uncommitted)
    layer = smap(lambda b: lax.psum(b, "model") * 0.5, mesh=mesh, in_specs=P("data", "model"),
                 out_specs=P("data", "model"))
    steps = jax.jit(lambda a: lax.scan(lambda c, _: (jnp.tanh(layer(c)), None), a, None,
                                       length=8)[0])
    return ((lambda: jax.block_until_ready(tiny(v))), (lambda: jax.block_until_ready(jtiny(v))),
            (lambda: jax.block_until_ready(around(u))), (lambda: jax.block_until_ready(steps(u))),
            run_step, (lambda: float(loss(*state["p"], x, y))))


def main(argv):
    number, repeat = (20, 3) if "--quick" in argv else (100, 7)
    cases = {lib: make_case(lib) for lib in ("funcgrad", "jax")}
    rows = [("tiny eager shard_map call", max(number // 10, 2)), ("the same, jitted", number),
            ("plain jit with work around it, argument on one device", number),
            ("plain jit of a scan of 8 shard_map steps, argument on one device", number),
            ("tensor x data parallel MLP step", max(number // 5, 4))]
    print(f"load average at the start: {os.getloadavg()[0]:.2f}")
    print("| case | funcgrad | JAX | ratio |\n| --- | --- | --- | --- |")
    for i, (name, calls) in enumerate(rows):
        t = per_call_us({lib: c[i] for lib, c in cases.items()}, calls, repeat)
        print(f"| {name} | {t['funcgrad']:.0f} µs | {t['jax']:.0f} µs | "
              f"{t['funcgrad'] / t['jax']:.2f} |")
    loss = {lib: c[5]() for lib, c in cases.items()}
    print(f"loss after the timed steps: funcgrad {loss['funcgrad']:.6f}, JAX {loss['jax']:.6f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
