"""Repeated calls must not make the process grow: no Python blocks, objects or device buffers
left behind per jitted call, eager operation, gradient or DataLoader batch.

Each case runs its loop once to warm the caches, then twice more while counting; a leak of one
small block per call (the runtime's deferred frees, before funcgrad asked it to run them) shows
as thousands of blocks, so the bounds below leave room only for noise.
"""
import gc
import tracemalloc

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.data import DataLoader, TensorDataset
from funcgrad.lowering import backend

CALLS = 2000


def _jit_call():
    f = funcgrad.jit(lambda x: jnp.tanh(x @ x) + 1.0)
    x = jnp.ones((4, 4))
    return lambda: f(x).block_until_ready()


def _eager_ops():
    x = jnp.ones((8,))
    return lambda: ((x + 1.0) * 2.0).block_until_ready()


def _eager_grad():
    g = funcgrad.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2))
    w, x = jnp.ones((3, 2)), jnp.ones((5, 3))
    return lambda: g(w, x).block_until_ready()


def _loader_epoch():
    data = TensorDataset(np.arange(64, dtype=np.float32).reshape(32, 2),
                         np.arange(32, dtype=np.int32))
    loader = DataLoader(data, batch_size=4, shuffle=True)
    step = funcgrad.jit(lambda x, y: jnp.sum(x) + jnp.sum(y))

    def run():
        for xb, yb in loader:
            step(xb, yb).block_until_ready()
    return run


def _counts():
    gc.collect()
    snapshot = tracemalloc.take_snapshot()
    blocks = sum(stat.count for stat in snapshot.statistics("filename"))
    return blocks, len(gc.get_objects()), len(backend.get_client().live_arrays())


# (case, calls per window, runtime calls per call: the loader makes 8 batches per epoch)
@pytest.mark.parametrize("make, calls, inner", [(_jit_call, CALLS, 1), (_eager_ops, CALLS, 1),
                                                (_eager_grad, 300, 1), (_loader_epoch, 40, 8)],
                         ids=["jit", "eager", "grad", "dataloader"])
def test_repeated_calls_do_not_grow_the_process(make, calls, inner):
    step = make()
    tracemalloc.start()
    try:
        for _ in range(calls):       # warm every cache and pool the loop touches
            step()
        before = _counts()
        windows = []
        for _ in range(3):
            for _ in range(calls):
                step()
            windows.append(_counts())
    finally:
        tracemalloc.stop()
    middle, after = windows[0], windows[-1]
    # the later windows may not grow by more than noise: a per-call leak adds `calls` blocks
    # (or objects) in every window, while host buffers whose release the runtime defers (to
    # its next garbage hook, later under load) can swell one window; so the smaller growth of
    # the last two windows is checked
    grown_blocks = min(b[0] - a[0] for a, b in zip(windows, windows[1:]))
    grown_objects = min(b[1] - a[1] for a, b in zip(windows, windows[1:]))
    bound = calls * inner // 2
    assert grown_blocks < bound, (before, middle, after)
    assert grown_objects < bound, (before, middle, after)
    assert after[2] == middle[2] == before[2], (before, middle, after)


def test_runtime_garbage_hook_is_installed_once():
    backend.get_client()
    backend._install_runtime_gc_hook()
    hooks = [cb for cb in gc.callbacks if cb is backend._collect_runtime_garbage]
    assert len(hooks) == 1
