"""Run by test_compilation_cache.py in a fresh process: a small model's forward and training
step with the persistent cache in argv[1]; prints a JSON line with the loss, the cache
statistics and the time from import to the first result."""
import json
import sys
import time

start = time.perf_counter()
import funcgrad  # noqa: E402
import funcgrad.numpy as jnp  # noqa: E402
from funcgrad.lowering import compilation_cache  # noqa: E402

funcgrad.config.update("compilation_cache_dir", sys.argv[1])


def loss(params, x):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean((h @ params["w2"]) ** 2)


@funcgrad.jit
def step(params, x):
    g = funcgrad.grad(loss)(params, x)
    return {k: params[k] - 0.1 * g[k] for k in params}, loss(params, x)


params = {"w1": jnp.full((8, 16), 0.1), "w2": jnp.full((16, 4), 0.2)}
x = jnp.linspace(-1.0, 1.0, 32).reshape(4, 8)
for _ in range(3):
    params, value = step(params, x)
print(json.dumps({"loss": float(value), "stats": compilation_cache.stats(),
                  "seconds": time.perf_counter() - start}))
