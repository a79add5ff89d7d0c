"""Write ``jax_grad_refs.npz``: JAX's outputs, JVPs and VJPs for the cases in ``grad_cases``.

Run with JAX installed (it imports no funcgrad), 64-bit types on:
    python tests/linalg/make_jax_grad_refs.py [OUT.npz] [--only=case1,case2]
Entries per case ``c`` (``c`` is ``"<function>/<real|complex>"``): ``c/out<i>`` (the outputs),
``c/jvp<i>`` (their tangents along the case's tangents), ``c/vjp<j>`` (the cotangents of the
inputs for ``grad_cases.cotangents``); or ``c/unsupported``, JAX's error message, where JAX
does not differentiate the call.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grad_cases import CASES, cotangents  # noqa: E402


class _Namespace:
    def __init__(self):
        import jax
        import jax.numpy
        import jax.scipy.linalg
        self.numpy, self.lax, self.scipy_linalg = jax.numpy, jax.lax, jax.scipy.linalg


def references(only=None):
    import jax
    jax.config.update("jax_enable_x64", True)
    ns = _Namespace()
    out = {}
    for name in only or sorted(CASES):
        case = CASES[name]
        f = case.fn(ns)
        try:
            primals, tangents = jax.jvp(f, case.inputs, case.tangents)
            _, pullback = jax.vjp(f, *case.inputs)
            cts = pullback(cotangents([np.asarray(p) for p in primals], name))
        except Exception as e:      # noqa: BLE001  (recorded: JAX does not differentiate it)
            out[f"{name}/unsupported"] = np.asarray(f"{type(e).__name__}: {e}"[:300])
            continue
        for i, (p, t) in enumerate(zip(primals, tangents)):
            out[f"{name}/out{i}"] = np.asarray(p)
            out[f"{name}/jvp{i}"] = np.asarray(t)
        for j, c in enumerate(cts):
            out[f"{name}/vjp{j}"] = np.asarray(c)
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    path = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "jax_grad_refs.npz")
    only = [a[len("--only="):].split(",") for a in sys.argv if a.startswith("--only=")]
    if only:
        merged = dict(np.load(path)) if os.path.exists(path) else {}
        merged = {k: v for k, v in merged.items() if k.rsplit("/", 1)[0] not in only[0]}
        merged.update(references(only[0]))
        np.savez_compressed(path, **merged)
    else:
        np.savez_compressed(path, **references())
    print(path)
