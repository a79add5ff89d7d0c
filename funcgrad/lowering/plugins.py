"""PJRT plugins for GPUs and TPUs: which wheel each platform needs, where its library is, and
whether it matches the installed jaxlib.

A CUDA plugin (``jax-cuda13-plugin``/``jax-cuda12-plugin`` with their ``-pjrt`` library wheels)
is built together with one jaxlib release and must be at exactly that version; ``libtpu`` is a
separate library that checks its own compatibility when loaded. ``pip install
'funcgrad[cuda13]'``, ``'funcgrad[cuda12]'`` or ``'funcgrad[tpu]'`` installs a matching pair.
:func:`library_path` is asked on the first use of a platform and raises :class:`PluginError`
saying what is installed and what to install when the plugin is missing or mismatched. Setting
``FUNCGRAD_SKIP_PLUGIN_VERSION_CHECK=1`` skips the version comparison (at your own risk).

Example:
    >>> from funcgrad.lowering import plugins
    >>> names = [p.distribution for p in plugins.installed()]   # ['jax-cuda13-plugin'] on a GPU box
    >>> import os
    >>> try:
    ...     usable = os.path.exists(plugins.library_path("cuda"))  # .../xla_cuda_plugin.so
    ... except plugins.PluginError as err:      # none installed: the message says what to install
    ...     usable = "pip install 'funcgrad[cuda13]'" in str(err)
    >>> usable
    True
"""
import dataclasses
import glob
import importlib.metadata
import importlib.util
import os

from funcgrad.lowering.jaxlib_compat import JAXLIB_VERSION

SKIP_CHECK_ENV = "FUNCGRAD_SKIP_PLUGIN_VERSION_CHECK"


class PluginError(RuntimeError):
    """A platform's PJRT plugin is missing, incomplete or built for another jaxlib."""


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One installable PJRT plugin: its platform, pip distributions and where its library is."""
    platform: str              # funcgrad's platform name: 'cuda' or 'tpu'
    distribution: str          # the wheel users install (pip name)
    extra: str                 # funcgrad's extra that installs it at the matching version
    packages: tuple            # importable packages that may hold the shared library
    library_glob: str
    library_distribution: str = ""   # the wheel that ships the library, when it is another one
    pinned_to_jaxlib: bool = True    # built with one jaxlib release, and must equal its version


PLUGINS = (
    Plugin("cuda", "jax-cuda13-plugin", "cuda13", ("jax_cuda13_plugin", "jax_plugins.xla_cuda13"),
           "xla_cuda_plugin*.so", "jax-cuda13-pjrt"),
    Plugin("cuda", "jax-cuda12-plugin", "cuda12", ("jax_cuda12_plugin", "jax_plugins.xla_cuda12"),
           "xla_cuda_plugin*.so", "jax-cuda12-pjrt"),
    Plugin("tpu", "libtpu", "tpu", ("libtpu",), "libtpu*.so", pinned_to_jaxlib=False),
)
PLATFORMS = ("cuda", "tpu")


@dataclasses.dataclass(frozen=True)
class Found:
    """An installed plugin: versions of its wheels (None when unknown), its library path (None
    when not found) and what is wrong with it (None when it can be used)."""
    plugin: Plugin
    version: str | None
    library_version: str | None
    library: str | None
    problem: str | None

    def describe(self):
        """One line for bug reports: ``jax-cuda13-plugin 0.12.0.1 (jax-cuda13-pjrt 0.12.0.1)``."""
        text = f"{self.plugin.distribution} {self.version or '(version unknown)'}"
        if self.plugin.library_distribution:
            text += f" ({self.plugin.library_distribution} {self.library_version or 'missing'})"
        return text


def _version(distribution):
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _library(plugin):
    if plugin.platform == "tpu" and os.environ.get("TPU_LIBRARY_PATH"):
        return os.environ["TPU_LIBRARY_PATH"]
    for name in plugin.packages:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            found = sorted(glob.glob(os.path.join(folder, plugin.library_glob)))
            if found:
                return found[0]
    return None


def _wanted(plugin):
    return f"pip install '{plugin.distribution}[with-cuda]=={JAXLIB_VERSION}'" \
        if plugin.platform == "cuda" else f"pip install 'funcgrad[{plugin.extra}]'"


def _problem(plugin, version, library_version, library):
    if library is None:
        if plugin.library_distribution:
            return (f"{plugin.distribution} {version} is installed but its PJRT library "
                    f"({plugin.library_distribution}) is not; install it with: pip install "
                    f"'{plugin.library_distribution}=={JAXLIB_VERSION}'")
        return (f"{plugin.distribution} {version} is installed but holds no "
                f"{plugin.library_glob} library; reinstall it with: {_wanted(plugin)}")
    if not plugin.pinned_to_jaxlib or os.environ.get(SKIP_CHECK_ENV, "0") not in ("", "0"):
        return None
    wrong = [f"{dist} {v}" for dist, v in ((plugin.distribution, version),
                                           (plugin.library_distribution, library_version))
             if v is not None and v != JAXLIB_VERSION]
    if not wrong:
        return None
    return (f"{' and '.join(wrong)} do{'es' if len(wrong) == 1 else ''} not match jaxlib "
            f"{JAXLIB_VERSION} (the plugin is built for one jaxlib release and must be at its "
            f"version); install the matching plugin with: {_wanted(plugin)}  "
            f"(or a matched pair: pip install 'funcgrad[{plugin.extra}]'; "
            f"{SKIP_CHECK_ENV}=1 skips this check)")


def installed(platform=None):
    """The installed plugins (of ``platform`` when given), first the one that would be used.

    Example:
        >>> from funcgrad.lowering import plugins
        >>> [f.describe() for f in plugins.installed("tpu")]   # e.g. ['libtpu 0.0.20'] on a TPU VM
        []
    """
    found = []
    for plugin in PLUGINS:
        if platform is not None and plugin.platform != platform:
            continue
        version = _version(plugin.distribution)
        library_version = _version(plugin.library_distribution) \
            if plugin.library_distribution else None
        library = _library(plugin)
        if version is None and library is None:
            continue
        found.append(Found(plugin, version, library_version, library,
                           _problem(plugin, version, library_version, library)))
    # a usable plugin goes first; among equals, the order of PLUGINS (CUDA 13 before 12)
    return sorted(found, key=lambda f: f.problem is not None)


def _missing_message(platform):
    if platform == "cuda":
        return ("funcgrad: platform 'cuda' needs NVIDIA's CUDA PJRT plugin, and none is "
                f"installed (jaxlib {JAXLIB_VERSION}). Install it with: pip install "
                "'funcgrad[cuda13]' (CUDA 13; 'funcgrad[cuda12]' for CUDA 12), or, keeping this "
                f"jaxlib: pip install 'jax-cuda13-plugin[with-cuda]=={JAXLIB_VERSION}'")
    return (f"funcgrad: platform 'tpu' needs the libtpu PJRT plugin, and it is not installed "
            f"(jaxlib {JAXLIB_VERSION}). Install it with: pip install 'funcgrad[tpu]'")


def library_path(platform):
    """The shared library of ``platform``'s plugin ('cuda' or 'tpu'), checked against jaxlib;
    raises :class:`PluginError` naming what is installed and what to install.

    Example:
        >>> from funcgrad.lowering import plugins
        >>> plugins.library_path("metal")
        Traceback (most recent call last):
        ValueError: funcgrad.lowering.plugins.library_path: unknown platform 'metal' ...
    """
    if platform not in PLATFORMS:
        raise ValueError(f"funcgrad.lowering.plugins.library_path: unknown platform "
                         f"{platform!r} (plugins exist for {', '.join(PLATFORMS)})")
    found = installed(platform)
    if not found:
        raise PluginError(_missing_message(platform))
    if found[0].problem is not None:
        raise PluginError(f"funcgrad: cannot use platform {platform!r}: {found[0].problem}")
    return found[0].library


def load_failure(platform, exc):
    """A :class:`PluginError` for a plugin library that failed to load or start, with the
    versions involved and what to install."""
    found = installed(platform)
    what = found[0].describe() if found else "no plugin"
    return PluginError(f"funcgrad: the {platform!r} PJRT plugin ({what}, with jaxlib "
                       f"{JAXLIB_VERSION}) failed to load: {exc}. If the versions do not belong "
                       f"together, install a matched pair: "
                       f"pip install 'funcgrad[{found[0].plugin.extra if found else platform}]'")
