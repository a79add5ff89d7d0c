"""Write ``jax_streams.npz``: the outputs of ``stream_cases.CASES`` under ``jax.random``, for
both settings of ``jax_threefry_partitionable``, eagerly and under ``vmap`` over keys.

Run with JAX installed (it imports no funcgrad):
    python tests/random/make_jax_streams.py [OUT.npz]
Entries are named ``"{partitionable:d}/{seed}/{case}"`` and ``"{...}/vmap/{case}"``.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stream_cases import CASES, SEEDS, VMAP_CASES  # noqa: E402


def streams():
    import jax
    import jax.numpy as xp
    from jax import random as r

    out = {}
    for part in (True, False):
        jax.config.update("jax_threefry_partitionable", part)
        for seed in SEEDS:
            for key_kind, key in (("raw", r.PRNGKey(seed)), ("typed", r.key(seed))):
                for name, case in CASES.items():
                    value = case(r, xp, key)
                    if value.dtype == jax.dtypes.prng_key or str(value.dtype).startswith("key"):
                        value = r.key_data(value)
                    if key_kind == "typed":
                        # typed keys must give the same numbers as the raw ones
                        assert np.array_equal(np.asarray(value),
                                              out[f"{part:d}/{seed}/{name}"], equal_nan=True), name
                        continue
                    out[f"{part:d}/{seed}/{name}"] = np.asarray(value)
            keys = r.split(r.PRNGKey(seed), 3)
            for name in VMAP_CASES:
                out[f"{part:d}/{seed}/vmap/{name}"] = np.asarray(
                    jax.vmap(lambda k, f=CASES[name]: f(r, xp, k))(keys))
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "jax_streams.npz")
    np.savez_compressed(path, **streams())
    print(path)
