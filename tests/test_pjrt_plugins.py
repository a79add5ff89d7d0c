"""Finding PJRT plugins by name (issue 18): PJRT_NAMES_AND_LIBRARY_PATHS, jax_plugins entry
points and namespace modules, TPU_LIBRARY_PATH, the ROCm and TPU platforms, and the errors when
a plugin is missing or does not load. No real plugin is needed: the libraries are fake files."""
import json
import os
import re
import subprocess
import sys

import pytest
from jaxlib import version as jaxlib_version

import funcgrad
from funcgrad.lowering import backend, pjrt_plugin, platforms, plugins

JAXLIB = jaxlib_version.__version__
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def clean(monkeypatch):
    """No plugin variables from the outside; platforms found during the test are forgotten;
    no accelerator client or default backend carried over."""
    for name in (plugins.PATHS_ENV, "TPU_LIBRARY_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(platforms, "_platforms", dict(platforms._platforms))
    monkeypatch.setattr(backend, "_clients", {k: v for k, v in backend._clients.items()
                                              if k == "cpu"})
    monkeypatch.setattr(backend, "_failed", {})
    monkeypatch.setattr(backend, "_default", {})
    with funcgrad.config.override("platform", None):
        yield monkeypatch


def _library(folder, name):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(b"\0" * 16)                 # not a loadable library
    return path


def test_the_variable_names_plugins_and_json_configurations(tmp_path, clean):
    lib = _library(tmp_path, "pjrt_npu.so")
    cfg = tmp_path / "acc.json"
    cfg.write_text(json.dumps({"library_path": lib, "create_options": {"cores": 2}}))
    clean.setenv(plugins.PATHS_ENV, f"npu:{lib}, acc:{cfg}")
    found = plugins.from_environment()
    assert sorted(found) == ["acc", "npu"]
    assert (found["npu"].library, found["npu"].options) == (lib, None)
    assert (found["acc"].library, found["acc"].options) == (lib, {"cores": 2})
    assert plugins.library_path("npu") == lib and plugins.create_options("acc") == {"cores": 2}
    assert plugins.discovered()["npu"].source == plugins.PATHS_ENV


@pytest.mark.parametrize("value, message", [
    ("npu", "the entry 'npu' is not 'name:/path/to/plugin.so'"),
    ("npu:/x.so,:/y.so", "the entry ':/y.so' is not"),
])
def test_a_malformed_variable_names_the_entry(value, message, clean):
    clean.setenv(plugins.PATHS_ENV, value)
    with pytest.raises(plugins.PluginError, match=re.escape(message)):
        plugins.library_path("npu")


def test_a_bad_json_configuration(tmp_path, clean):
    cfg = tmp_path / "bad.json"
    cfg.write_text(json.dumps({"path": "/x.so"}))
    clean.setenv(plugins.PATHS_ENV, f"npu:{cfg}")
    with pytest.raises(plugins.PluginError, match='must be a JSON object with a "library_path"'):
        plugins.from_environment()


def test_a_named_library_that_does_not_exist(tmp_path, clean):
    clean.setenv(plugins.PATHS_ENV, f"tpu:{tmp_path}/libtpu.so")
    with pytest.raises(plugins.PluginError, match=re.escape(
            f"names {tmp_path}/libtpu.so as the PJRT plugin of 'tpu', and there is no such file")):
        plugins.library_path("tpu")


def _fake_packages(tmp_path, monkeypatch):
    """An entry-point plugin (``fake-npu-plugin``, module ``fake_npu_pkg``) and a module of the
    ``jax_plugins`` namespace package, each with a library and an ``__init__`` that must never
    be imported (it would import jax)."""
    pkg = tmp_path / "fake_npu_pkg"
    ep_lib = _library(pkg, "xla_npu_plugin.so")
    (pkg / "__init__.py").write_text("raise ImportError('imported the plugin module')\n")
    info = tmp_path / "fake_npu_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-npu-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[jax_plugins]\nxla_npu7 = fake_npu_pkg\n")
    ns = tmp_path / "jax_plugins" / "my_accel"
    ns_lib = _library(ns, "libmy_accel_pjrt.so")
    _library(ns, "helper.so")              # a plugin's own name wins over another library
    (ns / "__init__.py").write_text("raise ImportError('imported the plugin module')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return ep_lib, ns_lib


def test_plugins_installed_in_jax_manner_are_found_by_name(tmp_path, clean):
    ep_lib, ns_lib = _fake_packages(tmp_path, clean)
    found = plugins.from_packages()
    assert found["npu"].library == ep_lib
    assert found["npu"].source == ("entry point jax_plugins:xla_npu7 of fake-npu-plugin "
                                   "(fake_npu_pkg)")
    assert found["my_accel"].library == ns_lib
    assert found["my_accel"].source == "namespace package jax_plugins (jax_plugins.my_accel)"
    assert plugins.library_path("npu") == ep_lib
    other = _library(tmp_path / "elsewhere", "npu.so")
    clean.setenv(plugins.PATHS_ENV, f"npu:{other}")      # the variable wins
    assert plugins.library_path("npu") == other


def test_platform_names_of_plugin_modules():
    assert [plugins.platform_name(m) for m in (
        "jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12", "jax_plugins.xla_rocm7",
        "my_pkg.plugin:initialize", "xla_", "iree_cpu")] == [
        "cuda", "cuda", "rocm", "plugin", "xla_", "iree_cpu"]


def test_a_found_plugin_becomes_a_platform_and_its_load_failure_is_reported(tmp_path, clean):
    lib = _library(tmp_path, "libnpu.so")
    clean.setenv(plugins.PATHS_ENV, f"npu:{lib}")
    platform = platforms.get("npu")
    assert isinstance(platform, pjrt_plugin.PluginPlatform) and platform.name == "npu"
    assert platform.is_installed() and platforms.get("npu") is platform
    default = funcgrad.numpy.ones(2).device.platform       # "cpu", or "gpu" on a GPU
    with funcgrad.config.override("platform", "npu"):
        with pytest.raises(plugins.PluginError, match=re.escape(
                f"the 'npu' PJRT plugin ({lib} from {plugins.PATHS_ENV}, with jaxlib {JAXLIB}) "
                "failed to load")):
            funcgrad.numpy.ones(2)
    assert funcgrad.numpy.ones(2).device.platform == default   # the default is unaffected


def test_an_unknown_platform_says_how_to_name_a_plugin(clean):
    with pytest.raises(ValueError, match=re.escape(
            "unknown platform 'nosuch' (known: 'cpu', 'cuda', 'rocm', 'tpu'; a PJRT plugin of "
            "another name is found through PJRT_NAMES_AND_LIBRARY_PATHS='name:/path/to/plugin.so'"
            )):
        platforms.get("nosuch")
    with pytest.raises(plugins.PluginError, match=re.escape(
            "no PJRT plugin for platform 'nosuch' was found (looked at "
            "PJRT_NAMES_AND_LIBRARY_PATHS, the 'jax_plugins' entry points")):
        plugins.library_path("nosuch")


def test_rocm_without_its_wheels_says_what_to_install(clean):
    assert not platforms.get("rocm").is_installed()
    with funcgrad.config.override("platform", "rocm"):
        with pytest.raises(plugins.PluginError, match=re.escape(
                f"Install it with: pip install 'jax-rocm7-plugin=={JAXLIB}' "
                f"'jax-rocm7-pjrt=={JAXLIB}'")):
            funcgrad.numpy.ones(2)


def test_tpu_library_path_variable(tmp_path, clean):
    lib = _library(tmp_path, "libtpu.so")
    clean.setenv("TPU_LIBRARY_PATH", lib)
    assert plugins.library_path("tpu") == lib and platforms.get("tpu").is_installed()


def test_funcgrad_platform_tpu_without_libtpu():
    """``FUNCGRAD_PLATFORM=tpu`` where libtpu is not installed: the first use raises, saying
    which package to install."""
    if plugins.installed("tpu"):
        pytest.skip("libtpu is installed here")
    env = {k: v for k, v in os.environ.items() if k not in ("TPU_LIBRARY_PATH",
                                                           plugins.PATHS_ENV)}
    env.update(FUNCGRAD_PLATFORM="tpu", PYTHONPATH=ROOT)
    script = ("import funcgrad\n"
              "try:\n"
              "    funcgrad.numpy.ones(2)\n"
              "except funcgrad.lowering.plugins.PluginError as e:\n"
              "    print('RAISED', e)\n")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "RAISED funcgrad: platform 'tpu' needs the libtpu PJRT plugin, and it is not " \
        f"installed (jaxlib {JAXLIB}). Install it with: pip install libtpu" in out.stdout


@pytest.mark.parametrize("name, expect_run_options", [("npu", True), ("tpu", False)])
def test_plugin_clients_join_a_multi_process_run(name, expect_run_options, tmp_path, clean):
    """In a multi-process run the plugin's client gets the coordination-service client and,
    for GPU-style plugins, node_id / num_nodes (as JAX makes them); libtpu only the client."""
    lib = _library(tmp_path, "libplugin.so")
    clean.setenv(plugins.PATHS_ENV, f"{name}:{lib}")
    calls = []
    clean.setattr(pjrt_plugin.xc, "pjrt_plugin_loaded", lambda n: True)
    clean.setattr(pjrt_plugin.xc, "pjrt_plugin_initialized", lambda n: True)
    clean.setattr(pjrt_plugin.xc, "make_c_api_client", lambda *a: calls.append(a) or "client")
    platform = platforms.get(name)
    assert platform.make_client(funcgrad.config) == "client"
    assert calls[-1] == (name, {})
    run = backend.DistributedRuntime("coordination client", 1, 2, 30.0)
    clean.setattr(backend, "distributed_runtime", lambda: run)
    assert platform.make_client(funcgrad.config) == "client"
    options = {"node_id": 1, "num_nodes": 2} if expect_run_options else {}
    assert calls[-1] == (name, options, "coordination client")
