"""config.parse_flags_with_absl() / config.config_with_absl() read JAX-style --jax_* flags,
as jax.config does (checked against JAX in a subprocess when it is installed)."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
from absl import flags

import funcgrad
from funcgrad import absl_flags

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def restore_config():
    saved = {k: getattr(funcgrad.config, k) for k in ("enable_x64", "debug_nans",
                                                      "default_matmul_precision")}
    yield
    for k, v in saved.items():
        funcgrad.config.update(k, v)


def test_parse_jax_flags_sets_options(restore_config):
    fv = flags.FlagValues()
    absl_flags.parse_jax_flags(funcgrad.config, ["prog", "--jax_enable_x64", "--other=1",
                                                 "--jax_default_matmul_precision=highest",
                                                 "--", "--jax_debug_nans"], fv)
    assert funcgrad.config.enable_x64 is True
    assert funcgrad.config.default_matmul_precision == "highest"
    assert funcgrad.config.debug_nans is False        # after "--": not ours
    assert funcgrad.numpy.ones(2).dtype == "float64"
    absl_flags.parse_jax_flags(funcgrad.config, ["prog", "--nojax_enable_x64"], fv)
    assert funcgrad.config.enable_x64 is False


def test_flags_left_out_change_nothing(restore_config):
    funcgrad.config.update("debug_nans", True)
    fv = flags.FlagValues()
    absl_flags.parse_jax_flags(funcgrad.config, ["prog", "--jax_enable_x64=true"], fv)
    assert funcgrad.config.debug_nans is True and funcgrad.config.enable_x64 is True
    # a later parse does not re-apply a flag given before
    funcgrad.config.update("enable_x64", False)
    absl_flags.parse_jax_flags(funcgrad.config, ["prog", "--jax_debug_nans=false"], fv)
    assert funcgrad.config.enable_x64 is False and funcgrad.config.debug_nans is False


def test_config_with_absl_applies_when_the_program_parses(restore_config):
    fv = absl_flags.define_flags(funcgrad.config, flags.FlagValues())
    assert "jax_enable_x64" in fv and "jax_platforms" in fv
    fv(["prog", "--jax_debug_nans", "--jax_enable_x64"])
    assert funcgrad.config.debug_nans is True and funcgrad.config.enable_x64 is True


def test_public_methods_use_absl_global_flags(restore_config):
    funcgrad.config.config_with_absl()
    funcgrad.config.config_with_absl()          # twice is fine
    assert "jax_enable_x64" in flags.FLAGS
    funcgrad.config.parse_flags_with_absl(["prog", "--jax_debug_nans", "--unrelated"])
    assert funcgrad.config.debug_nans is True


def test_bad_value_names_the_option(restore_config):
    with pytest.raises(flags.IllegalFlagValueError, match="jax_num_cpu_devices"):
        absl_flags.parse_jax_flags(funcgrad.config, ["prog", "--jax_num_cpu_devices=two"],
                                   flags.FlagValues())


SCRIPT = textwrap.dedent('''
    import sys
    lib = sys.argv[1]
    sys.argv = ["prog", "--jax_enable_x64", "--something_else=3"]
    if lib == "jax":
        import jax, jax.numpy as np_
        jax.config.parse_flags_with_absl()
        print(jax.config.jax_enable_x64, np_.ones(2).dtype)
    else:
        import funcgrad, funcgrad.numpy as np_
        funcgrad.config.parse_flags_with_absl()
        print(funcgrad.config.jax_enable_x64, np_.ones(2).dtype)
''')


def _run(lib):
    out = subprocess.run([sys.executable, "-c", SCRIPT, lib], capture_output=True, text=True,
                         env=dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=ROOT),
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_sys_argv_in_a_script():
    assert _run("funcgrad") == ["True", "float64"]


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_same_as_jax():
    assert _run("jax") == _run("funcgrad")
