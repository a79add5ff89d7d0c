"""Write ``jax_streams.npz``: the outputs of the calls in ``stream_cases`` under ``jax.random``,
for both settings of ``jax_threefry_partitionable``, eagerly and under ``vmap`` over keys, with
and without 64-bit types, and the key words of ``PRNGKey(seed)`` for a few seeds.

Run with JAX installed (it imports no funcgrad):
    python tests/random/make_jax_streams.py [OUT.npz] [--quick] [--only=case1,case2]
Entries: ``"{p}/{seed}/{case}"``, ``"{p}/{seed}/vmap/{case}"``, ``"x64/{p}/{seed}/{case}"`` and
``"seed/{x32|x64}/{seed}"`` (``p`` is 1 when partitionable). ``--quick`` writes only the cases
in ``QUICK`` for the first seed (what the test with JAX installed compares); ``--only`` refreshes
the named cases (all seeds, both layouts) in an existing file and keeps the rest.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stream_cases import (CASES, QUICK, SEED_VALUES, SEEDS, VMAP_CASES,  # noqa: E402
                          X64_CASES)


def _value(r, v):
    return np.asarray(r.key_data(v) if str(v.dtype).startswith("key") else v)


def streams(quick=False, only=None):
    import jax
    import jax.numpy as xp
    from jax import random as r

    out = {}
    seeds = SEEDS[:1] if quick else SEEDS
    cases = {n: CASES[n] for n in (only or QUICK)} if quick or only else CASES
    for part in (True, False):
        jax.config.update("jax_threefry_partitionable", part)
        for seed in seeds:
            for name, case in cases.items():
                out[f"{part:d}/{seed}/{name}"] = value = _value(r, case(r, xp, r.PRNGKey(seed)))
                # typed keys (random.key) give the same numbers as raw ones (PRNGKey)
                typed = _value(r, case(r, xp, r.key(seed)))
                assert np.array_equal(typed, value, equal_nan=True), name
            keys = r.split(r.PRNGKey(seed), 3)
            for name in VMAP_CASES:
                if name in cases:
                    out[f"{part:d}/{seed}/vmap/{name}"] = np.asarray(
                        jax.vmap(lambda k, f=CASES[name]: f(r, xp, k))(keys))
    for seed in SEED_VALUES:
        out[f"seed/x32/{seed}"] = np.asarray(r.PRNGKey(seed))
    if quick or only:
        return out
    jax.config.update("jax_enable_x64", True)
    for seed in SEED_VALUES:
        out[f"seed/x64/{seed}"] = np.asarray(r.PRNGKey(seed))
    for part in (True, False):
        jax.config.update("jax_threefry_partitionable", part)
        for seed in SEEDS:
            for name, case in X64_CASES.items():
                out[f"x64/{part:d}/{seed}/{name}"] = _value(r, case(r, xp, r.PRNGKey(seed)))
    return out


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    path = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "jax_streams.npz")
    only = [a[len("--only="):].split(",") for a in sys.argv if a.startswith("--only=")]
    if only:
        # refresh the named cases in an existing file, keeping the rest
        merged = dict(np.load(path)) if os.path.exists(path) else {}
        merged.update(streams(only=only[0]))
        np.savez_compressed(path, **merged)
    else:
        np.savez_compressed(path, **streams(quick="--quick" in sys.argv))
    print(path)
