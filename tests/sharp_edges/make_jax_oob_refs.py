"""Write ``jax_oob_refs.npz``: JAX's results for the calls in ``oob_cases``.

Run with JAX installed (it imports no funcgrad):
    python tests/sharp_edges/make_jax_oob_refs.py [OUT.npz]
Entries: ``static/<name>`` (eager), ``traced/<name>/<k>`` (``jit`` of the call with the k-th
index row as an argument) and ``vmap/<name>`` (``vmap`` over all the index rows), and
``grad/get_past_end``, ``grad/set_past_end`` (gradients where an index is out of bounds).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oob_cases import STATIC, TRACED, X1, X2  # noqa: E402


def references():
    import jax
    import jax.numpy as xp
    out = {}
    a, b = xp.asarray(X1), xp.asarray(X2)
    for name, f in STATIC.items():
        out[f"static/{name}"] = np.asarray(f(xp, a, b))
    for name, (f, idx) in TRACED.items():
        g = jax.jit(lambda a, b, i, f=f: f(xp, a, b, i))
        for k, i in enumerate(idx):
            out[f"traced/{name}/{k}"] = np.asarray(g(a, b, i))
        out[f"vmap/{name}"] = np.asarray(jax.vmap(lambda i, f=f: f(xp, a, b, i))(idx))
    out["grad/get_past_end"] = np.asarray(jax.grad(lambda v: v[5] * 2.0)(xp.ones(3)))
    out["grad/set_past_end"] = np.asarray(
        jax.grad(lambda v, w: (v.at[np.array([1, 4])].set(w) ** 2).sum(), argnums=(0, 1))(
            xp.arange(3.0), xp.array([5.0, 6.0]))[1])
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "jax_oob_refs.npz")
    np.savez_compressed(path, **references())
    print(path)
