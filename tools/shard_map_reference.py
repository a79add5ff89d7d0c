"""Write tests/sharding/shard_map_reference.json: JAX's shard_map values for the cases of
tests/sharding/shard_map_cases.py (``jax_values``), on 4 host CPU devices.

Run from the repository root with the environment that has jax:
    FUNCGRAD_CPU_DEVICES=4 XLA_FLAGS=--xla_force_host_platform_device_count=4 \\
        /work/venv-ref/bin/python tools/shard_map_reference.py
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "sharding")]


def main():
    import shard_map_cases
    values = shard_map_cases.jax_values()
    with open(shard_map_cases.REF_PATH, "w") as fh:
        json.dump(values, fh)
    print(f"wrote {shard_map_cases.REF_PATH}: {sorted(values)}")


if __name__ == "__main__":
    main()
