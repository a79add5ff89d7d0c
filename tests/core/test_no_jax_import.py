"""funcgrad runs on jaxlib alone: a broad workload must never import the ``jax`` package
(even when it is installed, as in the benchmark environment)."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import funcgrad
    import funcgrad.numpy as jnp
    from funcgrad import nn, random

    x = jnp.arange(6.0).reshape(2, 3)
    f = funcgrad.jit(lambda w: jnp.tanh(x @ w).sum())
    w = jnp.ones((3, 2))
    g = funcgrad.grad(f)(w)
    per = funcgrad.vmap(lambda r: (r * 2.0).sum())(x)
    half = jnp.ones(3, dtype=jnp.bfloat16) * 1.5
    reads = [np.asarray(g), float(f(w)), per.tolist(), np.asarray(half), repr(x), x[0, 1].item()]
    key = random.key(0)
    sample = np.asarray(random.normal(key, (4,)))
    out = np.asarray(nn.Linear(3, 2)(x))
    assert np.asarray(half).dtype == jnp.bfloat16 and np.allclose(np.asarray(half), 1.5)
    loaded = [m for m in sys.modules if m == "jax" or m.startswith("jax.")]
    print("JAX_MODULES", len(loaded), loaded[:5])
""")


def test_workload_never_imports_jax():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "JAX_MODULES 0 []" in out.stdout, out.stdout
