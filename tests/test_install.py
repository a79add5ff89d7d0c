"""Installation checks: PJRT plugin discovery and version matching, the jaxlib compatibility
module, print_environment_info, and that docs/install.md's table agrees with pyproject.toml and
.ci/run."""
import importlib.util
import pathlib
import re
import sys
import warnings

import numpy as np
import pytest
from jaxlib import version as jaxlib_version
from jaxlib import xla_client as xc

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.lowering import backend, jaxlib_compat, plugins

ROOT = pathlib.Path(__file__).resolve().parents[1]
JAXLIB = jaxlib_version.__version__


# --- a fake CUDA plugin on sys.path, so discovery runs on real files and wheel metadata -------

def _fake_plugin(tmp_path, monkeypatch, *, version, library_version, with_library=True):
    """Install a fake pair of wheels (``fake-cuda-plugin`` + ``fake-cuda-pjrt``) under
    ``tmp_path`` and make it the only CUDA plugin funcgrad knows."""
    package = tmp_path / "funcgrad_fake_cuda"
    package.mkdir()
    (package / "__init__.py").write_text("")
    if with_library:
        (package / "xla_cuda_plugin.so").write_bytes(b"")     # not a real library
    for name, ver in (("fake_cuda_plugin", version), ("fake_cuda_pjrt", library_version)):
        if ver is not None:
            info = tmp_path / f"{name}-{ver}.dist-info"
            info.mkdir()
            (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}"
                                           f"\nVersion: {ver}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = plugins.Plugin("cuda", "fake-cuda-plugin", "cuda13", ("funcgrad_fake_cuda",),
                          "xla_cuda_plugin*.so", "fake-cuda-pjrt")
    monkeypatch.setattr(plugins, "PLUGINS", (fake,))
    monkeypatch.delenv(plugins.SKIP_CHECK_ENV, raising=False)
    return str(package / "xla_cuda_plugin.so")


@pytest.fixture
def fresh_backends(monkeypatch):
    """Forget which accelerator clients were made or failed, and the default backend."""
    monkeypatch.setattr(backend, "_clients", {k: v for k, v in backend._clients.items()
                                              if k == "cpu"})
    monkeypatch.setattr(backend, "_failed", {})
    monkeypatch.setattr(backend, "_default", {})
    with funcgrad.config.override("platform", None):
        yield


def test_matching_plugin_is_found_with_its_library(tmp_path, monkeypatch):
    path = _fake_plugin(tmp_path, monkeypatch, version=JAXLIB, library_version=JAXLIB)
    [found] = plugins.installed("cuda")
    assert (found.version, found.library_version, found.problem) == (JAXLIB, JAXLIB, None)
    assert found.describe() == f"fake-cuda-plugin {JAXLIB} (fake-cuda-pjrt {JAXLIB})"
    assert plugins.library_path("cuda") == path
    assert plugins.installed("tpu") == []


def test_mismatched_plugin_names_both_versions_and_the_fix(tmp_path, monkeypatch):
    _fake_plugin(tmp_path, monkeypatch, version="0.9.1", library_version="0.9.1")
    with pytest.raises(plugins.PluginError) as info:
        plugins.library_path("cuda")
    msg = str(info.value)
    assert "fake-cuda-plugin 0.9.1 and fake-cuda-pjrt 0.9.1 do not match jaxlib " + JAXLIB in msg
    assert f"pip install 'fake-cuda-plugin[with-cuda]=={JAXLIB}'" in msg
    assert "pip install 'funcgrad[cuda13]'" in msg
    # one mismatched wheel of the pair is named alone
    monkeypatch.setattr(plugins, "_version", {"fake-cuda-plugin": JAXLIB,
                                              "fake-cuda-pjrt": "0.9.1"}.get)
    assert "fake-cuda-pjrt 0.9.1 does not match" in plugins.installed("cuda")[0].problem


def test_skip_variable_accepts_a_mismatched_plugin(tmp_path, monkeypatch):
    path = _fake_plugin(tmp_path, monkeypatch, version="0.9.1", library_version="0.9.1")
    monkeypatch.setenv(plugins.SKIP_CHECK_ENV, "1")
    assert plugins.library_path("cuda") == path


def test_plugin_without_its_library_wheel(tmp_path, monkeypatch):
    _fake_plugin(tmp_path, monkeypatch, version=JAXLIB, library_version=None, with_library=False)
    with pytest.raises(plugins.PluginError, match=re.escape(
            f"fake-cuda-plugin {JAXLIB} is installed but its PJRT library (fake-cuda-pjrt) is "
            f"not; install it with: pip install 'fake-cuda-pjrt=={JAXLIB}'")):
        plugins.library_path("cuda")


def test_missing_plugins_say_what_to_install(monkeypatch):
    monkeypatch.setattr(plugins, "PLUGINS", ())
    with pytest.raises(plugins.PluginError, match=re.escape(
            "pip install 'funcgrad[cuda13]' (CUDA 13; 'funcgrad[cuda12]' for CUDA 12)")):
        plugins.library_path("cuda")
    with pytest.raises(plugins.PluginError, match=re.escape(
            "Install it with: pip install libtpu (the release JAX pairs with this jaxlib: pip "
            "install 'funcgrad[tpu]')")):
        plugins.library_path("tpu")
    with pytest.raises(plugins.PluginError, match=re.escape(
            f"needs AMD's ROCm PJRT plugin, and none is installed (jaxlib {JAXLIB}). Install it "
            f"with: pip install 'jax-rocm7-plugin=={JAXLIB}' 'jax-rocm7-pjrt=={JAXLIB}'")):
        plugins.library_path("rocm")


def test_first_use_of_a_mismatched_device_raises(tmp_path, monkeypatch, fresh_backends):
    _fake_plugin(tmp_path, monkeypatch, version="0.9.1", library_version="0.9.1")
    for use in (lambda: funcgrad.devices("cuda"), lambda: backend.get_client("gpu")):
        with pytest.raises(plugins.PluginError, match="cannot use platform 'cuda'.*0.9.1"):
            use()
    with pytest.warns(RuntimeWarning, match="do not match jaxlib"):   # made on the CPU
        layer = funcgrad.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match=r"Linear.to\('cuda'\): .*do not match jaxlib"):
        layer.to("cuda")


def test_default_backend_warns_about_a_mismatched_plugin_and_uses_the_cpu(
        tmp_path, monkeypatch, fresh_backends):
    _fake_plugin(tmp_path, monkeypatch, version="0.9.1", library_version="0.9.1")
    monkeypatch.setattr(plugins, "PLATFORMS", ("cuda",))
    with pytest.warns(RuntimeWarning, match="do not match jaxlib.*; using the CPU"):
        assert backend.default_backend() == "cpu"
    assert isinstance(backend.failures()["cuda"], plugins.PluginError)
    np.testing.assert_allclose(np.asarray(jnp.arange(3.0) * 2), [0.0, 2.0, 4.0])


@pytest.mark.skipif(xc.pjrt_plugin_loaded("cuda"), reason="a real CUDA plugin is loaded")
def test_a_library_that_fails_to_load_is_reported_with_versions(
        tmp_path, monkeypatch, fresh_backends):
    _fake_plugin(tmp_path, monkeypatch, version=JAXLIB, library_version=JAXLIB)
    with pytest.raises(plugins.PluginError, match=re.escape(
            f"the 'cuda' PJRT plugin (fake-cuda-plugin {JAXLIB} (fake-cuda-pjrt {JAXLIB}), with "
            f"jaxlib {JAXLIB}) failed to load")):
        backend.get_client("cuda")
    assert not xc.pjrt_plugin_loaded("cuda")


# --- jaxlib_compat ------------------------------------------------------------------------------

def test_version_tuple():
    assert jaxlib_compat.version_tuple("0.12.0.1") == (0, 12, 0, 1)
    assert jaxlib_compat.version_tuple("0.11.2.dev20250101") == (0, 11, 2)
    assert jaxlib_compat.version_tuple("1.0rc1") == (1,)


def test_result_handler_variant_follows_the_installed_jaxlib():
    assert jaxlib_compat.JAXLIB_VERSION == JAXLIB
    # jaxlib 0.10 needs the _skip_checks keyword; 0.11 and later dropped it
    assert jaxlib_compat._HANDLER_TAKES_SKIP_CHECKS == (
        jaxlib_compat.version_tuple(JAXLIB) < (0, 11))
    f = funcgrad.jit(lambda x, y: (x * y, x + y))
    prod, total = f(jnp.arange(3.0), 2.0)
    np.testing.assert_allclose(np.asarray(prod), [0.0, 2.0, 4.0])
    np.testing.assert_allclose(np.asarray(total), [2.0, 3.0, 4.0])


# --- print_environment_info ---------------------------------------------------------------------

def test_print_environment_info(capsys, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    monkeypatch.setenv("FUNCGRAD_FAKE_SETTING", "7")
    with funcgrad.config.override("debug_nans", not funcgrad.config.debug_nans):
        assert funcgrad.print_environment_info() is None
        text = capsys.readouterr().out
        assert funcgrad.print_environment_info(return_string=True).splitlines()[1:7] == \
            text.splitlines()[1:7]
    lines = text.splitlines()
    assert lines[0].startswith(f"funcgrad:    {funcgrad.__version__} (")
    assert lines[1] == f"jaxlib:      {JAXLIB}"
    assert lines[2] == f"numpy:       {np.__version__}"
    assert lines[5].startswith(f"python:      {sys.version.split()[0]} ")
    devices = funcgrad.devices("cpu")
    assert f"  cpu: {len(devices)} device(s) {devices}" in text
    assert f"  {funcgrad.default_backend()}: " in text and "(default)" in text
    assert f"  debug_nans = {funcgrad.config.debug_nans is False!r}  (set in this process)" \
        in text
    assert "  XLA_FLAGS=--xla_cpu_enable_fast_math=false" in text
    assert "  FUNCGRAD_FAKE_SETTING=7" in text
    for heading in ("plugins:", "backends:", "config:", "environment:"):
        assert heading in lines


def test_environment_info_lists_plugins_and_failures(tmp_path, monkeypatch, fresh_backends):
    _fake_plugin(tmp_path, monkeypatch, version="0.9.1", library_version="0.9.1")
    monkeypatch.setattr(plugins, "PLATFORMS", ("cuda",))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        text = funcgrad.print_environment_info(return_string=True)
    assert "  fake-cuda-plugin 0.9.1 (fake-cuda-pjrt 0.9.1): fake-cuda-plugin 0.9.1 and " \
        "fake-cuda-pjrt 0.9.1 do not match jaxlib" in text
    assert "  cuda: unavailable: funcgrad: cannot use platform 'cuda'" in text


# --- docs/install.md's table, pyproject.toml and .ci/run agree ----------------------------------

def _check_versions():
    spec = importlib.util.spec_from_file_location("check_versions",
                                                  ROOT / "tools" / "check_versions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_install_table_agrees_with_pyproject():
    check = _check_versions()
    rows = check.table_rows()
    assert [r["python"] for r in rows] == ["3.11", "3.12", "3.13"]
    assert rows[0]["jaxlib"] == "0.10.2"
    assert check.check_pyproject() == []


def test_version_check_finds_a_stale_table(tmp_path):
    check = _check_versions()
    (tmp_path / "docs").mkdir()
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    table = (ROOT / "docs" / "install.md").read_text()
    (tmp_path / "docs" / "install.md").write_text(
        table.replace("| 3.12 | 0.12.0.1 | 0.12.0.1 |", "| 3.12 | 0.12.1 | 0.12.0.1 |"))
    problems = check.check_pyproject(tmp_path)
    assert "Python 3.12: jax-cuda13-plugin 0.12.0.1 is not at jaxlib's version 0.12.1" in problems
    assert any("extra [cuda13] pins ['jaxlib==0.12.0.1'" in p for p in problems)
    assert check.check_running(ROOT, "3.12", "0.12.1") == [
        "Python 3.12 runs jaxlib 0.12.1 (the newest pip offers within pyproject's range), but "
        "docs/install.md's row says 0.12.0.1: update the table and the extras' pins in "
        "pyproject.toml"]
    assert check.check_running(ROOT, "3.11", "0.10.2") == []
    assert check.check_running(ROOT, "3.9", "0.4.30") == ["docs/install.md has no row for "
                                                          "Python 3.9"]


def test_ci_ends_with_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    readme_blocks = re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)
    assert readme_blocks[1] == ".venv/bin/python -m pytest -q -n 2 tests"
    assert ci[-1] == "python -m pytest -q -n 2 tests"
    assert "tools/check_versions.py --running" in "\n".join(ci)
