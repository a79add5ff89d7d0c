"""Where a sharded training step's time goes: each library's compiled executable run bare
(``execute_sharded`` on the arguments' buffers, the first output awaited on every device) next
to the whole call, for the training cases of ``bench/sharding.py`` on 4 host CPU devices.

The bare loops take the same arguments every step and do the same result handling in both
libraries, so "bare funcgrad / bare JAX" compares the two partitioned programs as XLA runs them,
and "call / bare" of each library what its call path (flatten, cache lookup, launch, output
wrapping, state write-back) adds around the launch. Rounds alternate between the four loops
(order reversed every other round); medians per step, ratios the median of per-round ratios.

Run: ``python bench/sharding_bare.py`` (``--rounds N``, ``--cases mlp,transformer,module``).
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sharding  # noqa: E402  (sets up 4 host CPU devices for both libraries)

CASES = {"mlp": sharding.mlp_case, "transformer": sharding.transformer_case,
         "module": sharding.module_case}


def _await_first(results):
    for shard in results.disassemble_into_single_device_arrays()[0]:
        shard.block_until_ready()


def funcgrad_bare(run_step):
    """A step of funcgrad's compiled program on the current arguments, nothing around it."""
    from funcgrad import tree_util
    from funcgrad.lowering import spmd_dispatch
    run_step()                                    # compiled, and the arguments placed
    (entry,) = run_step.jitted._caches.spmd.values()
    leaves = tree_util.registry.flatten(run_step.args())[0]
    bufs = entry.consts + [leaf._buf if hasattr(leaf, "_buf") else
                           spmd_dispatch._scalar_buffer(leaf, s)
                           for leaf, s in zip(leaves, entry.shardings)]
    loaded = entry.program.loaded
    return lambda: _await_first(loaded.execute_sharded(bufs))


def jax_bare(run_step):
    import jax
    run_step()
    args = run_step.args()
    loaded = run_step.jitted.lower(*args).compile()._executable.xla_executable
    bufs = jax.tree.leaves(args)
    return lambda: _await_first(loaded.execute_sharded(bufs))


def measure(name, rounds, number=10):
    make = CASES[name]
    fg, jx = make("funcgrad")[0], make("jax")[0]
    fns = {"bare funcgrad": funcgrad_bare(fg), "bare JAX": jax_bare(jx),
           "call funcgrad": fg, "call JAX": jx}
    for fn in fns.values():
        for _ in range(5):
            fn()
    times = {k: [] for k in fns}
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            t0 = time.perf_counter()
            for _ in range(number):
                fns[k]()
            times[k].append((time.perf_counter() - t0) / number * 1e6)

    def ratio(a, b):
        return statistics.median(x / y for x, y in zip(times[a], times[b]))
    med = {k: statistics.median(t) for k, t in times.items()}
    return (f"| {name} | {med['bare funcgrad']:.0f} / {med['bare JAX']:.0f} µs "
            f"({ratio('bare funcgrad', 'bare JAX'):.2f}) | {med['call funcgrad']:.0f} / "
            f"{med['call JAX']:.0f} µs ({ratio('call funcgrad', 'call JAX'):.2f}) | "
            f"{ratio('call funcgrad', 'bare funcgrad'):.2f} / {ratio('call JAX', 'bare JAX'):.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--cases", default="mlp,transformer,module")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    rows = [measure(name, args.rounds) for name in args.cases.split(",")]
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after "
          f"({os.cpu_count()} cores)")
    print("| case | bare: funcgrad / JAX (ratio) | call: funcgrad / JAX (ratio) | "
          "call / bare: funcgrad / JAX |\n| --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
