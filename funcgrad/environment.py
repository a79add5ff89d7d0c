"""What funcgrad runs on, in one printout for bug reports: versions, plugins, devices, settings."""
import importlib.metadata
import os
import platform as _platform
import shutil
import subprocess
import sys

import numpy as np

from funcgrad.config import config
from funcgrad.lowering import backend, plugins
from funcgrad.lowering.jaxlib_compat import JAXLIB_VERSION

# environment variables that change what funcgrad, XLA or the plugins do
_ENV_PREFIXES = ("FUNCGRAD_", "XLA_", "TF_CPP_", "CUDA_", "NVIDIA_", "TPU_", "LIBTPU_")


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _backend_lines():
    lines = []
    default = backend.default_backend()     # tries each installed plugin once
    failures = backend.failures()
    for name in ("cpu",) + plugins.PLATFORMS:
        mark = "  (default)" if name == default else ""
        if name == "cpu" or name in backend.started_platforms():
            devs = backend.devices(name)
            lines.append(f"  {name}: {len(devs)} device(s) {devs}{mark}")
        elif name in failures:
            lines.append(f"  {name}: unavailable: {failures[name]}")
        else:
            lines.append(f"  {name}: no plugin installed ({plugins.install_hint(name)})")
    return lines


def _gpu_lines():
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        out = f"nvidia-smi failed: {exc}"
    return ["nvidia-smi:"] + [f"  {line}" for line in out.splitlines()]


def environment_info():
    """The text :func:`print_environment_info` prints.

    Example:
        >>> "jaxlib:" in funcgrad.environment.environment_info()
        True
    """
    funcgrad = sys.modules["funcgrad"]     # the package this module belongs to (always loaded)
    found = [plugins.installed(p) for p in plugins.PLATFORMS]
    plugin_lines = [f"  {f.describe()}: " + (f.problem or ("matches jaxlib" if
                                                           f.plugin.pinned_to_jaxlib else "found"))
                    for group in found for f in group] or ["  none"]
    defaults = {name: make() for name, make in config._defaults.items()}
    settings = [f"  {name} = {getattr(config, name)!r}"
                + ("" if getattr(config, name) == defaults[name] else "  (set in this process)")
                for name in sorted(defaults)]
    env = [f"  {k}={v}" for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES)]
    lines = [
        f"funcgrad:    {funcgrad.__version__} ({os.path.dirname(funcgrad.__file__)})",
        f"jaxlib:      {JAXLIB_VERSION}",
        f"numpy:       {np.__version__}",
        f"ml_dtypes:   {_version('ml_dtypes')}",
        f"opt_einsum:  {_version('opt_einsum')}",
        f"python:      {sys.version.split()[0]} ({sys.executable})",
        f"system:      {_platform.platform()}",
        "plugins:", *plugin_lines,
        "backends:", *_backend_lines(),
        "config:", *settings,
        "environment:", *(env or ["  (no FUNCGRAD_/XLA_/CUDA_/TPU_ variables set)"]),
        *_gpu_lines(),
    ]
    return "\n".join(lines)


def print_environment_info(return_string=False):
    """Print funcgrad's, jaxlib's, NumPy's and Python's versions, the installed GPU/TPU plugins,
    the platforms and devices found, and the settings and environment variables in effect (as
    ``jax.print_environment_info()``); paste it into bug reports. With ``return_string=True``
    the text is returned instead of printed.

    Example:
        >>> funcgrad.print_environment_info()
        funcgrad:    0.1.0 (/.../funcgrad)
        jaxlib:      ...
        numpy:       ...
        ...
    """
    text = environment_info()
    if return_string:
        return text
    print(text)
    return None
