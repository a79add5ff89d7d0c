"""funcgrad and JAX in one process: the x64 flag that jaxlib's runtime reads is shared, and
funcgrad must leave it as JAX's config says (issue 23)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from jaxlib import _jax

import funcgrad
import funcgrad.numpy as fnp
from funcgrad.lowering import backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs JAX and funcgrad computations interleaved; argv: import order, JAX x64, funcgrad x64.
SCRIPT = textwrap.dedent('''
    import sys
    import numpy as np
    order, jax_x64, fg_x64 = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
    if order == "jax-first":
        import jax, jax.numpy as jnp
        import funcgrad, funcgrad.numpy as fnp
    else:
        import funcgrad, funcgrad.numpy as fnp
        if order == "funcgrad-used-first":
            funcgrad.config.update("enable_x64", True)
            assert np.asarray(fnp.asarray(np.float64(1 + 1e-12)) * 1) == 1 + 1e-12
        import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", jax_x64)
    funcgrad.config.update("enable_x64", fg_x64)
    jf = jax.jit(lambda a, b: a * b + 1)
    wide = 1.0 + 1e-12

    def jax_round(tag):
        a = jnp.asarray(np.arange(3.0))
        assert a.dtype == (np.float64 if jax_x64 else np.float32), (tag, a.dtype)
        i = jnp.asarray(np.arange(3))
        assert i.dtype == (np.int64 if jax_x64 else np.int32), (tag, i.dtype)
        r = jf(a, a)
        np.testing.assert_allclose(np.asarray(r), [1, 2, 5])
        assert r.dtype == a.dtype, (tag, r.dtype)
        assert jf(np.arange(3.0), 2.0).dtype == a.dtype, tag
        assert (float(jnp.asarray(np.float64(wide))) == wide) == jax_x64, tag

    def fg_round(tag):
        x = fnp.asarray(np.array([1.0, wide]))
        assert x.dtype == (np.float64 if fg_x64 else np.float32), (tag, x.dtype)
        y = np.asarray(funcgrad.jit(lambda v: v * 3 - 1)(x))
        if fg_x64:
            np.testing.assert_array_equal(y, np.array([1.0, wide]) * 3 - 1)
        i = fnp.asarray(np.array([2**40, 1])) if fg_x64 else fnp.asarray(np.array([7, 1]))
        np.testing.assert_array_equal(np.asarray(i + 1), [2**40 + 1, 2] if fg_x64 else [8, 2])

    for k in range(3):
        jax_round(f"jax {k}")
        fg_round(f"funcgrad {k}")
    with jax.enable_x64(not jax_x64) if hasattr(jax, "enable_x64") else open(__file__):
        fg_round("funcgrad inside jax's x64 context")
    jax_round("jax last")
    print("ok")
''')


@pytest.mark.parametrize("fg_x64", [False, True])
@pytest.mark.parametrize("jax_x64", [False, True])
@pytest.mark.parametrize("order", ["jax-first", "funcgrad-first", "funcgrad-used-first"])
def test_interleaved_with_jax(order, jax_x64, fg_x64):
    pytest.importorskip("jax")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               JAX_PLATFORMS="cpu", FUNCGRAD_PLATFORM="cpu")
    env.pop("FUNCGRAD_ENABLE_X64", None)
    env.pop("JAX_ENABLE_X64", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, order, str(int(jax_x64)),
                           str(int(fg_x64))], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]


def test_wide_transfer_restores_a_foreign_x64_flag(monkeypatch):
    """Without JAX installed: a stand-in for JAX's config module holds a flag set to False;
    funcgrad's 64-bit copies still arrive whole and leave that flag as it was."""
    flag = _jax.config.Config("stand_in_enable_x64", False, include_in_jit_key=True)
    fake = type(sys)("jax._src.config")
    fake.enable_x64 = flag
    monkeypatch.setitem(sys.modules, "jax._src.config", fake)
    _jax.jax_jit.set_enable_x64_state(flag)
    try:
        with funcgrad.config.override("enable_x64", True):
            wide = 1.0 + 1e-12
            x = fnp.asarray(np.array([wide, 2.0]))
            assert x.dtype == np.float64
            np.testing.assert_array_equal(np.asarray(x * 2), np.array([wide, 2.0]) * 2)
            big = fnp.asarray(np.array([2**40], np.int64))
            assert int(np.asarray(big)[0]) == 2**40
        assert flag.value is False and flag.get_global() is False
        backend._set_x64_state_once()     # a new client must not install funcgrad's flag
        assert flag.value is False
    finally:
        monkeypatch.delitem(sys.modules, "jax._src.config")
        backend._set_x64_state_once()
