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


def main(argv):
    """Write all references to ``argv[0]`` (default: beside this file); ``--only=a,b``
    recomputes the named cases and keeps the file's other entries."""
    paths = [a for a in argv if not a.startswith("--")]
    path = paths[0] if paths else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                               "jax_grad_refs.npz")
    only = next((a.split("=", 1)[1].split(",") for a in argv if a.startswith("--only=")), None)
    kept = {}
    if only and os.path.exists(path):
        kept = {k: v for k, v in np.load(path).items() if k.rsplit("/", 1)[0] not in only}
    np.savez_compressed(path, **kept, **references(only))
    return path


if __name__ == "__main__":
    print(main(sys.argv[1:]))
