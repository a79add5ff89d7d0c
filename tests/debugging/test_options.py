"""The new config options: off by default, set by funcgrad's environment variable or JAX's
(funcgrad's wins), and readable under JAX's names."""
import pytest

import funcgrad
from funcgrad.config import Config

CASES = [  # option, variable suffix, value set, value read
    ("debug_nans", "DEBUG_NANS", "1", True),
    ("debug_infs", "DEBUG_INFS", "true", True),
    ("log_compiles", "LOG_COMPILES", "yes", True),
    ("compilation_cache_dir", "COMPILATION_CACHE_DIR", "/tmp/some-cache", "/tmp/some-cache"),
    ("compilation_cache_max_size", "COMPILATION_CACHE_MAX_SIZE", "4096", 4096),
]
DEFAULTS = {"debug_nans": False, "debug_infs": False, "log_compiles": False,
            "compilation_cache_dir": None, "compilation_cache_max_size": 2 ** 30}


@pytest.mark.parametrize("option, suffix, text, value", CASES)
@pytest.mark.parametrize("prefix", ["FUNCGRAD_", "JAX_"])
def test_environment_variables(monkeypatch, option, suffix, text, value, prefix):
    for p in ("FUNCGRAD_", "JAX_"):
        monkeypatch.delenv(p + suffix, raising=False)
    assert getattr(Config(), option) == DEFAULTS[option]
    monkeypatch.setenv(prefix + suffix, text)
    assert getattr(Config(), option) == value


def test_funcgrad_variable_wins(monkeypatch):
    monkeypatch.setenv("JAX_DEBUG_NANS", "1")
    monkeypatch.setenv("FUNCGRAD_DEBUG_NANS", "0")
    assert Config().debug_nans is False


@pytest.mark.parametrize("option", sorted(DEFAULTS))
def test_jax_names_read_the_same_switch(option):
    assert getattr(funcgrad.config, "jax_" + option) == getattr(funcgrad.config, option)
