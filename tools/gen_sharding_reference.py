"""Writes tests/sharding/jax_reference.json: for each PartitionSpec of a (4, 8) array on a 2x2
("x", "y") mesh of 4 host CPU devices, JAX's HloSharding and each device's block, which
tests/sharding/sharding_cases.py compares funcgrad's NamedSharding with.

Run with the environment that has JAX: ``/work/venv-ref/bin/python tools/gen_sharding_reference.py``.
"""
import json
import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

SPECS = [("x", "y"), ("y", "x"), ("x",), (None, "y"), (("x", "y"),), (("y", "x"), None), (),
         ("y",), (None, ("y", "x"))]
SHAPE = (4, 8)


def main():
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    out = []
    for spec in SPECS:
        s = NamedSharding(mesh, P(*spec))
        blocks = {str(d.id): [list(ix.indices(n)[:2]) for ix, n in zip(index, SHAPE)]
                  for d, index in s.devices_indices_map(SHAPE).items()}
        out.append({"spec": [list(p) if isinstance(p, tuple) else p for p in spec],
                    "hlo": str(s._to_xla_hlo_sharding(len(SHAPE))), "blocks": blocks})
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests",
                        "sharding", "jax_reference.json")
    with open(path, "w") as f:
        json.dump({"jax": jax.__version__, "shape": SHAPE, "cases": out}, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
