"""jit's traces are cached per wrapped function (held weakly, keyed with the jit options), as in
JAX: inline ``jit(f)(x)``, ``jit(f).lower(x)`` and re-created jit objects trace once; and jit
wraps any callable (functools.partial, callable objects)."""
import functools
import gc
import importlib.util
import os
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.lowering import dispatch


def test_inline_jit_traces_once():
    def f(x):
        return jnp.tanh(x @ x)
    x = jnp.ones((8, 8)) * 0.1
    outs = [funcgrad.jit(f)(x) for _ in range(5)]
    assert funcgrad.jit(f).trace_count == 1
    np.testing.assert_allclose(np.asarray(outs[-1]), np.tanh(np.full((8, 8), 0.08)), rtol=1e-6)
    funcgrad.jit(f).lower(x)          # same signature: no new trace
    assert funcgrad.jit(f).trace_count == 1
    funcgrad.jit(f)(jnp.ones((4, 4)))  # a new signature traces
    assert funcgrad.jit(f).trace_count == 2


def test_lower_then_call_traces_once():
    def f(x, y):
        return x * y + 1.0
    lowered = funcgrad.jit(f).lower(jnp.ones(3), jnp.ones(3))
    assert "stablehlo" in lowered.as_text() or "mhlo" in lowered.as_text()
    np.testing.assert_allclose(np.asarray(funcgrad.jit(f)(jnp.ones(3), 2.0 * jnp.ones(3))), 3.0)
    assert funcgrad.jit(f).trace_count == 1


SCALE = 2.0


def _reads_global(x):
    return x * SCALE


def test_global_read_is_cached_as_in_jax():
    global SCALE
    x = jnp.ones(2)
    try:
        SCALE = 2.0
        np.testing.assert_allclose(np.asarray(funcgrad.jit(_reads_global)(x)), 2.0)
        SCALE = 5.0
        # JAX returns the cached (traced) value: the global was read at trace time
        np.testing.assert_allclose(np.asarray(funcgrad.jit(_reads_global)(x)), 2.0)
        funcgrad.clear_caches()
        np.testing.assert_allclose(np.asarray(funcgrad.jit(_reads_global)(x)), 5.0)
    finally:
        SCALE = 2.0
        funcgrad.clear_caches()


def test_new_closures_are_new_functions():
    outs = [float(funcgrad.jit(lambda x: x + k)(1.0)) for k in range(4)]
    assert outs == [1.0, 2.0, 3.0, 4.0]


def test_options_key_the_cache():
    def f(x, n):
        return x * n
    x = jnp.ones(2)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(f, static_argnums=1)(x, 3)), 3.0)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(f, static_argnums=1)(x, 4)), 4.0)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(f, static_argnames="n")(x, n=4)), 4.0)
    np.testing.assert_allclose(np.asarray(funcgrad.jit(f)(x, 5.0)), 5.0)
    # static_argnums=1 and static_argnames="n" name the same parameter: one cache
    assert funcgrad.jit(f, static_argnums=1).trace_count == 3
    assert funcgrad.jit(f).trace_count == 1


def test_cache_dies_with_the_function():
    def make():
        def f(x):
            return x + 1.0
        return f
    f = make()
    funcgrad.jit(f)(jnp.ones(2))
    ref = weakref.ref(f)
    assert f in dispatch._shared_caches
    del f
    gc.collect()
    assert ref() is None
    assert all(k is not None for k in dispatch._shared_caches.keys())
    assert not any(getattr(k, "__qualname__", "").startswith(
        "test_cache_dies_with_the_function.<locals>.make") for k in dispatch._shared_caches)


def test_config_change_retraces_inline_jit():
    def f(x):
        return x * 2
    assert funcgrad.jit(f)(1.5).dtype == np.float32
    with funcgrad.config.override("enable_x64", True):
        assert funcgrad.jit(f)(np.float64(1.5)).dtype == np.float64
    assert funcgrad.jit(f)(1.5).dtype == np.float32


def test_partial_and_callable_objects():
    def scale(a, x):
        """Multiply."""
        return a * x
    p = functools.partial(scale, 3.0)
    jp = funcgrad.jit(p)
    np.testing.assert_allclose(np.asarray(jp(jnp.ones(2))), 3.0)
    assert jp.__name__ == "scale" and jp.__wrapped__ is p
    assert "multiply" in funcgrad.jit(p).lower(jnp.ones(2)).as_text()
    assert funcgrad.jit(p).trace_count == 1

    class Affine:
        """An affine map."""

        def __call__(self, x):
            return 2.0 * x + 1.0
    obj = Affine()
    jo = funcgrad.jit(obj)
    np.testing.assert_allclose(np.asarray(jo(jnp.ones(3))), 3.0)
    assert jo.__name__ == "Affine" and jo.__doc__ == "An affine map." and jo.__wrapped__ is obj
    assert "Affine" in repr(jo)
    # under grad and vmap too
    np.testing.assert_allclose(float(funcgrad.grad(funcgrad.jit(p))(1.0)), 3.0)
    np.testing.assert_allclose(np.asarray(funcgrad.vmap(jo)(jnp.ones(4))), 3.0)

    def named(x):
        """Doc."""
        return x
    jn = funcgrad.jit(named)
    assert (jn.__name__, jn.__doc__, jn.__wrapped__) == ("named", "Doc.", named)


def test_not_callable_is_a_clear_error():
    with pytest.raises(TypeError, match="jit: expected a callable, got int"):
        funcgrad.jit(3)


def test_unhashable_callable_gets_its_own_cache():
    class Unhashable:
        __hash__ = None

        def __call__(self, x):
            return x - 1.0
    f = funcgrad.jit(Unhashable())
    np.testing.assert_allclose(np.asarray(f(jnp.ones(2))), 0.0)
    f(jnp.ones(2))
    assert f.trace_count == 1


JAX_SCRIPT = textwrap.dedent('''
    import functools
    import jax, jax.numpy as jnp
    SCALE = 2.0
    def f(x):
        return x * SCALE
    a = float(jax.jit(f)(1.0))
    SCALE = 5.0
    b = float(jax.jit(f)(1.0))
    c = float(jax.jit(functools.partial(lambda s, x: s * x, 3.0))(1.0))
    print(a, b, c)
''')


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_global_read_matches_jax():
    out = subprocess.run([sys.executable, "-c", JAX_SCRIPT], capture_output=True, text=True,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["2.0", "2.0", "3.0"]
