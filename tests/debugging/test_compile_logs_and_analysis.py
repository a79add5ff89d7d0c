"""log_compiles and the compiled executable's cost, memory and text."""
import logging

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp


def affine_relu(w, b, x):
    return jnp.maximum(x @ w + b, 0.0)


def test_log_compiles_names_function_shapes_and_time(caplog):
    w, b, x = jnp.ones((3, 5)), jnp.zeros(5), jnp.ones((2, 3))
    f = funcgrad.jit(affine_relu)
    f.clear_cache()
    with funcgrad.config.override("log_compiles", True), \
            caplog.at_level(logging.WARNING, logger="funcgrad"):
        f(w, b, x)
        f(w, b, x)                                  # cached: no second record
        f(w, b, jnp.ones((4, 3)))                   # new shape: compiled again
    records = [r.getMessage() for r in caplog.records
               if r.name == "funcgrad" and "affine_relu" in r.getMessage()]
    assert len(records) == 2, records
    assert records[0].startswith("Compiled affine_relu(f32[3,5], f32[5], f32[2,3]) for ")
    assert records[1].startswith("Compiled affine_relu(f32[3,5], f32[5], f32[4,3]) for ")
    ms = float(records[0].rsplit(" in ", 1)[1].split()[0])
    assert 0.0 < ms < 60_000.0


def test_log_compiles_off_is_silent(caplog):
    f = funcgrad.jit(lambda a: a - 1.0)
    with caplog.at_level(logging.DEBUG, logger="funcgrad"):
        f(jnp.ones(7))
    assert not [r for r in caplog.records if r.name == "funcgrad"]


def test_log_compiles_reports_cache_loads(caplog, tmp_path):
    def g(a):
        return a * 5.0 + 0.25
    x = jnp.ones(6)
    with funcgrad.config.override("compilation_cache_dir", str(tmp_path)), \
            funcgrad.config.override("log_compiles", True), \
            caplog.at_level(logging.WARNING, logger="funcgrad"):
        funcgrad.jit(g)(x)
        funcgrad.jit(g).clear_cache()
        funcgrad.jit(g)(x)
    records = [r.getMessage() for r in caplog.records if "g(f32[6])" in r.getMessage()]
    assert records[0].startswith("Compiled g(")
    assert records[1].startswith("Loaded from the persistent compilation cache g(")


def test_cost_analysis_counts_the_product():
    m, k, n = 8, 16, 4
    exe = funcgrad.jit(lambda a, b: a @ b).lower(jnp.ones((m, k)), jnp.ones((k, n))).compile()
    cost = exe.cost_analysis()
    assert cost["flops"] == 2 * m * k * n
    assert cost["bytes accessed"] == 4 * (m * k + k * n + m * n)


def test_memory_analysis_sizes():
    exe = funcgrad.jit(affine_relu).lower(jnp.ones((3, 5)), jnp.zeros(5),
                                          jnp.ones((2, 3))).compile()
    mem = exe.memory_analysis()
    assert mem.argument_size_in_bytes == 4 * (15 + 5 + 6)
    assert mem.output_size_in_bytes == 4 * 10
    assert mem.temp_size_in_bytes >= 0


def test_compiled_text_and_call():
    lowered = funcgrad.jit(affine_relu).lower(jnp.ones((3, 5)), jnp.zeros(5), jnp.ones((2, 3)))
    assert "stablehlo.dot_general" in lowered.as_text()
    exe = lowered.compile()
    text = exe.as_text()
    assert text.startswith("HloModule") and "dot(" in text and "maximum" in text
    w = np.arange(15, dtype=np.float32).reshape(3, 5) - 7
    out = exe(jnp.asarray(w), jnp.zeros(5), jnp.ones((2, 3)))
    np.testing.assert_allclose(np.asarray(out), np.maximum(np.ones((2, 3)) @ w, 0.0))
    with pytest.raises(TypeError, match=r"compiled for arguments \(f32\[3,5\], f32\[5\], "
                                        r"f32\[2,3\]\), called with \(f32\[3,5\], f32\[5\], "
                                        r"f32\[4,3\]\)"):
        exe(jnp.asarray(w), jnp.zeros(5), jnp.ones((4, 3)))


def test_jax_flags_and_names_set_the_new_options(tmp_path):
    pytest.importorskip("absl")
    from absl import flags
    from funcgrad import absl_flags
    saved = {k: getattr(funcgrad.config, k)
             for k in ("debug_infs", "log_compiles", "compilation_cache_dir")}
    try:
        absl_flags.parse_jax_flags(funcgrad.config, [
            "prog", "--jax_debug_infs", "--jax_log_compiles",
            f"--jax_compilation_cache_dir={tmp_path}"], flags.FlagValues())
        assert funcgrad.config.debug_infs is True and funcgrad.config.log_compiles is True
        assert funcgrad.config.compilation_cache_dir == str(tmp_path)
        funcgrad.config.update("jax_compilation_cache_max_size", "4096")
        assert funcgrad.config.compilation_cache_max_size == 4096
    finally:
        for k, v in saved.items():
            funcgrad.config.update(k, v)
        funcgrad.config.update("compilation_cache_max_size", 2 ** 30)
