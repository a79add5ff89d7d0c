"""The funcgrad tour: ``python -m funcgrad.demo``.

Shows a staged Jaxpr, the StableHLO that XLA compiles, jit caching and its speed-up over eager
dispatch, and (when the autodiff transforms are present) trains a small MLP on generated data.
"""
import time

import numpy as np

import funcgrad
import funcgrad.numpy as jnp


def _section(title):
    print(f"\n== {title} " + "=" * max(0, 66 - len(title)))


def show_tracing():
    _section("make_jaxpr: a function staged to funcgrad's IR")

    def f(x, w):
        return jnp.tanh(x @ w).sum(axis=1)

    x, w = jnp.ones((4, 3)), jnp.ones((3, 2))
    print(funcgrad.make_jaxpr(f)(x, w))
    _section("jit(f).lower(...).as_text(): the StableHLO handed to XLA")
    print("\n".join(funcgrad.jit(f).lower(x, w).as_text().splitlines()[:12]))


def show_jit_speed():
    _section("jit: one compiled executable instead of one dispatch per op")

    def step(x):
        for _ in range(20):
            x = jnp.sin(x) * 0.9 + 0.1
        return x

    x = jnp.ones((256,))
    fast = funcgrad.jit(step)
    fast(x).block_until_ready()
    step(x).block_until_ready()
    for name, fn in (("eager", step), ("jit", fast)):
        start = time.perf_counter()
        for _ in range(20):
            out = fn(x)
        out.block_until_ready()
        print(f"{name:>6}: {(time.perf_counter() - start) / 20 * 1e6:8.1f} us per call")
    print(f"traced {fast.trace_count} time(s); eager and jit agree: "
          f"{bool(np.allclose(np.asarray(step(x)), np.asarray(fast(x)), atol=1e-6))}")


def train_mlp(steps=300):
    if not hasattr(funcgrad, "value_and_grad"):
        print("\n(autodiff not available in this build: skipping training)")
        return None
    from funcgrad.demo_train import train
    return train(steps)


def main():
    print(f"funcgrad {funcgrad.__version__} on {funcgrad.default_backend()}: "
          f"{funcgrad.devices()}")
    show_tracing()
    show_jit_speed()
    train_mlp()
    print("\ndone.")


if __name__ == "__main__":
    main()
