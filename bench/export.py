"""funcgrad.export costs: export, serialize, load, first call (compile) and per-call time of a
loaded MLP (784-256-256-10) against the jitted model, for a static and a symbolic batch, the
per-call overhead of a loaded export against jit for a tiny function, and
``jax.export`` on the same MLP when JAX is importable (its serialize/deserialize columns
show nan without the flatbuffers package, and the call is then of the unserialized export).

Run: ``.venv/bin/python bench/export.py`` (``--quick`` for fewer repeats).
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

SIZES = (784, 256, 256, 10)
BATCH = 32


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e3


def per_call_us(fn, number, repeat):
    for _ in range(20):
        fn()
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(rounds)


def bench_funcgrad(weights, x, number, repeat):
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad import export

    def mlp(ws, x):
        for i, (w, b) in enumerate(ws):
            x = x @ w + b
            if i < len(ws) - 1:
                x = jnp.tanh(x)
        return x
    ws = [(jnp.asarray(w), jnp.asarray(b)) for w, b in weights]
    model = funcgrad.jit(lambda x: mlp(ws, x))
    xa = jnp.asarray(x)
    export.deserialize(export.export(model)(x).serialize()).call(xa)   # warm-up, untimed
    rows = {}
    for label, spec in (("static", x), ("symbolic b", funcgrad.ShapeDtypeStruct(
            export.symbolic_shape("b, 784"), jnp.float32))):
        exp, t_export = timed(lambda: export.export(model)(spec))
        blob, t_ser = timed(exp.serialize)
        loaded, t_load = timed(lambda: export.deserialize(blob))
        out, t_first = timed(lambda: loaded.call(xa).block_until_ready())
        np.testing.assert_allclose(out, model(xa), rtol=1e-5, atol=1e-5)
        us = per_call_us(lambda: loaded.call(xa).block_until_ready(), number, repeat)
        rows[f"funcgrad, {label}"] = (t_export, t_ser, len(blob), t_load, t_first, us)
    model(xa).block_until_ready()
    jit_us = per_call_us(lambda: model(xa).block_until_ready(), number, repeat)
    return rows, jit_us


def bench_overhead(number, repeat):
    """Per-call time of ``x + 1`` on 4 elements: jit against loaded exports."""
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad import export
    f = funcgrad.jit(lambda x: x + 1.0)
    x = jnp.ones(4)
    sym = funcgrad.ShapeDtypeStruct(export.symbolic_shape("b"), jnp.float32)
    fns = {"jit(f)": f,
           "loaded export": export.deserialize(export.export(f)(x).serialize()).call,
           "loaded export, symbolic b": export.deserialize(
               export.export(f)(sym).serialize()).call,
           "loaded export, vjp_order=1": export.deserialize(
               export.export(f, vjp_order=1)(x).serialize()).call}
    return {k: per_call_us(lambda fn=fn: fn(x).block_until_ready(), number * 10, repeat)
            for k, fn in fns.items()}


def bench_jax(weights, x, number, repeat):
    try:
        import jax
        import jax.numpy as jjnp
        from jax import export as jexport
    except ImportError:
        return {}, None
    ws = [(jjnp.asarray(w), jjnp.asarray(b)) for w, b in weights]

    def mlp(x):
        for i, (w, b) in enumerate(ws):
            x = x @ w + b
            if i < len(ws) - 1:
                x = jjnp.tanh(x)
        return x
    model = jax.jit(mlp)
    xa = jjnp.asarray(x)
    rows = {}
    for label, spec in (("static", jax.ShapeDtypeStruct(x.shape, x.dtype)),
                        ("symbolic b", jax.ShapeDtypeStruct(
                            jexport.symbolic_shape("b, 784"), x.dtype))):
        exp, t_export = timed(lambda: jexport.export(model)(spec))
        try:
            blob, t_ser = timed(exp.serialize)
            loaded, t_load = timed(lambda: jexport.deserialize(blob))
        except ImportError:       # JAX's serialization needs the flatbuffers package
            blob, t_ser, loaded, t_load = b"", float("nan"), exp, float("nan")
        call = jax.jit(loaded.call)
        out, t_first = timed(lambda: call(xa).block_until_ready())
        us = per_call_us(lambda: call(xa).block_until_ready(), number, repeat)
        rows[f"JAX, {label}"] = (t_export, t_ser, len(blob), t_load, t_first, us)
    model(xa).block_until_ready()
    return rows, per_call_us(lambda: model(xa).block_until_ready(), number, repeat)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    opts = parser.parse_args()
    number, repeat = (50, 3) if opts.quick else (300, 7)
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a),
                np.zeros(b, np.float32)) for a, b in zip(SIZES[:-1], SIZES[1:])]
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    rows, jit_us = bench_funcgrad(weights, x, number, repeat)
    jrows, jax_jit_us = bench_jax(weights, x, number, repeat)
    rows.update(jrows)
    print(f"MLP {SIZES}, batch {BATCH}; times in ms except the per-call column")
    print("| exporter | export | serialize | bytes | deserialize | first call | call (us) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, (te, ts, n, tl, tf, us) in rows.items():
        print(f"| {name} | {te:.1f} | {ts:.2f} | {n} | {tl:.2f} | {tf:.1f} | {us:.1f} |")
    print(f"\njit of the model itself, per call: funcgrad {jit_us:.1f} us"
          + (f", JAX {jax_jit_us:.1f} us" if jax_jit_us else ""))
    print("\nper call of x + 1.0 on 4 elements (us):")
    for name, us in bench_overhead(number, repeat).items():
        print(f"| {name} | {us:.1f} |")


if __name__ == "__main__":
    main()
