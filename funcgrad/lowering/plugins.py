"""PJRT plugins for GPUs, TPUs and other devices: which wheel each platform needs, where its
library is, and whether it matches the installed jaxlib.

A plugin is found by its platform name ('cuda', 'rocm', 'tpu', or any other), in this order:

1. ``PJRT_NAMES_AND_LIBRARY_PATHS='name:/path/plugin.so,name2:/path/config.json'`` (JAX's
   variable; a ``.json`` file gives ``library_path`` and optional ``create_options``);
2. the wheels funcgrad knows (``PLUGINS``: NVIDIA's CUDA, AMD's ROCm, Google's libtpu, whose
   library ``TPU_LIBRARY_PATH`` may also name), checked against jaxlib's version;
3. any other installed plugin package in JAX's manner: an entry point of the ``jax_plugins``
   group or a module of the ``jax_plugins`` namespace package, named after its module
   (``xla_cuda13`` -> 'cuda', ``xla_rocm7`` -> 'rocm', ``my_npu`` -> 'my_npu'); its package's
   shared library is the plugin (the module itself is never imported: it would import jax).

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
import json
import os
import pkgutil
import re

from funcgrad.lowering.jaxlib_compat import JAXLIB_VERSION

SKIP_CHECK_ENV = "FUNCGRAD_SKIP_PLUGIN_VERSION_CHECK"
PATHS_ENV = "PJRT_NAMES_AND_LIBRARY_PATHS"
ENTRY_POINT_GROUP = "jax_plugins"


class PluginError(RuntimeError):
    """A platform's PJRT plugin is missing, incomplete or built for another jaxlib."""


@dataclasses.dataclass(frozen=True)
class Plugin:
    """One installable PJRT plugin: its platform, pip distributions and where its library is."""
    platform: str              # funcgrad's platform name: 'cuda', 'rocm' or 'tpu'
    distribution: str          # the wheel users install (pip name)
    extra: str                 # funcgrad's extra that installs it at the matching version ('': none)
    packages: tuple            # importable packages that may hold the shared library
    library_glob: str
    library_distribution: str = ""   # the wheel that ships the library, when it is another one
    pinned_to_jaxlib: bool = True    # built with one jaxlib release, and must equal its version


PLUGINS = (
    Plugin("cuda", "jax-cuda13-plugin", "cuda13", ("jax_cuda13_plugin", "jax_plugins.xla_cuda13"),
           "xla_cuda_plugin*.so", "jax-cuda13-pjrt"),
    Plugin("cuda", "jax-cuda12-plugin", "cuda12", ("jax_cuda12_plugin", "jax_plugins.xla_cuda12"),
           "xla_cuda_plugin*.so", "jax-cuda12-pjrt"),
    Plugin("rocm", "jax-rocm7-plugin", "", ("jax_rocm7_plugin", "jax_plugins.xla_rocm7"),
           "xla_rocm_plugin*.so", "jax-rocm7-pjrt"),
    Plugin("tpu", "libtpu", "tpu", ("libtpu",), "libtpu*.so", pinned_to_jaxlib=False),
)
PLATFORMS = ("cuda", "rocm", "tpu")


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
    if plugin.platform == "cuda":
        return f"pip install '{plugin.distribution}[with-cuda]=={JAXLIB_VERSION}'"
    if plugin.library_distribution:
        return (f"pip install '{plugin.distribution}=={JAXLIB_VERSION}' "
                f"'{plugin.library_distribution}=={JAXLIB_VERSION}'")
    return f"pip install 'funcgrad[{plugin.extra}]'"


def _matched_pair(plugin):
    return f"(or a matched pair: pip install 'funcgrad[{plugin.extra}]'; " if plugin.extra \
        else "("


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
            f"{_matched_pair(plugin)}{SKIP_CHECK_ENV}=1 skips this check)")


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


def install_hint(platform):
    """The pip command that installs ``platform``'s plugin (for messages).

    Example:
        >>> from funcgrad.lowering import plugins
        >>> plugins.install_hint("tpu")
        'pip install libtpu'
    """
    if platform == "cuda":
        return "pip install 'funcgrad[cuda13]'"
    if platform == "tpu":
        return "pip install libtpu"
    if platform == "rocm":
        return (f"pip install 'jax-rocm7-plugin=={JAXLIB_VERSION}' "
                f"'jax-rocm7-pjrt=={JAXLIB_VERSION}'")
    return f"{PATHS_ENV}='{platform}:/path/to/pjrt_plugin.so'"


def _missing_message(platform):
    head = f"funcgrad: platform {platform!r} needs"
    if platform == "cuda":
        return (f"{head} NVIDIA's CUDA PJRT plugin, and none is installed (jaxlib "
                f"{JAXLIB_VERSION}). Install it with: pip install 'funcgrad[cuda13]' (CUDA 13; "
                "'funcgrad[cuda12]' for CUDA 12), or, keeping this jaxlib: pip install "
                f"'jax-cuda13-plugin[with-cuda]=={JAXLIB_VERSION}'")
    if platform == "tpu":
        return (f"{head} the libtpu PJRT plugin, and it is not installed (jaxlib "
                f"{JAXLIB_VERSION}). Install it with: pip install libtpu (the release JAX pairs "
                "with this jaxlib: pip install 'funcgrad[tpu]'), or name its library with "
                "TPU_LIBRARY_PATH=/path/to/libtpu.so")
    if platform == "rocm":
        return (f"{head} AMD's ROCm PJRT plugin, and none is installed (jaxlib "
                f"{JAXLIB_VERSION}). Install it with: {install_hint('rocm')}")
    return (f"funcgrad: no PJRT plugin for platform {platform!r} was found (looked at "
            f"{PATHS_ENV}, the '{ENTRY_POINT_GROUP}' entry points and the {ENTRY_POINT_GROUP} "
            f"namespace package; found: {', '.join(sorted(discovered())) or 'none'}). Name "
            f"its library with {PATHS_ENV}='{platform}:/path/to/pjrt_plugin.so'")


@dataclasses.dataclass(frozen=True)
class Discovered:
    """A plugin found by name outside ``PLUGINS``: its library (None when its package holds
    none), the client options of a ``.json`` configuration, and where it was found."""
    name: str
    library: str | None
    options: dict | None
    source: str


def platform_name(module):
    """The platform name of a ``jax_plugins`` entry point or module: ``xla_cuda13`` -> 'cuda'.

    Example:
        >>> from funcgrad.lowering.plugins import platform_name
        >>> platform_name("jax_plugins.xla_rocm7"), platform_name("my_npu_plugin:init")
        ('rocm', 'my_npu_plugin')
    """
    name = module.split(":")[0].rsplit(".", 1)[-1]
    if name.startswith("xla_"):
        name = re.sub(r"\d+$", "", name[4:]) or name
    return name


def _read_config(name, path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as exc:
        raise PluginError(f"funcgrad: {PATHS_ENV} names {path} for plugin {name!r}, which "
                          f"cannot be read as JSON: {exc}") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("library_path"), str):
        raise PluginError(f"funcgrad: {path} (plugin {name!r} of {PATHS_ENV}) must be a JSON "
                          "object with a \"library_path\" string")
    options = cfg.get("create_options")
    if options is not None and not isinstance(options, dict):
        raise PluginError(f"funcgrad: {path}: \"create_options\" must be an object of "
                          f"option names to values, got {type(options).__name__}")
    return cfg["library_path"], options


def from_environment():
    """{name: Discovered} of ``PJRT_NAMES_AND_LIBRARY_PATHS`` ('name:path,...'; 'name;path'
    on Windows).

    Example:
        >>> import os
        >>> from funcgrad.lowering import plugins
        >>> os.environ["PJRT_NAMES_AND_LIBRARY_PATHS"] = "npu:/opt/npu/pjrt.so"
        >>> plugins.from_environment()["npu"].library
        '/opt/npu/pjrt.so'
        >>> del os.environ["PJRT_NAMES_AND_LIBRARY_PATHS"]
    """
    text = os.environ.get(PATHS_ENV, "").strip()
    sep = ";" if os.name == "nt" else ":"
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, found, path = item.partition(sep)
        if not found or not name or not path:
            raise PluginError(f"funcgrad: {PATHS_ENV}={text!r}: the entry {item!r} is not "
                              f"'name{sep}/path/to/plugin.so'")
        options = None
        if path.endswith(".json"):
            path, options = _read_config(name, path)
        out[name] = Discovered(name, path, options, PATHS_ENV)
    return out


def _folder_library(module):
    """The PJRT library in the folder of package ``module`` (not imported), or None."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = list(spec.submodule_search_locations or []) or (
        [os.path.dirname(spec.origin)] if spec.origin else [])
    for folder in folders:
        found = sorted(glob.glob(os.path.join(folder, "*.so")),
                       key=lambda p: ("plugin" not in os.path.basename(p)
                                      and "pjrt" not in os.path.basename(p), p))
        if found:
            return found[0]
    return None


def from_packages():
    """{name: Discovered} of the plugins installed in JAX's manner: entry points of the
    ``jax_plugins`` group and modules of the ``jax_plugins`` namespace package.

    Example:
        >>> from funcgrad.lowering import plugins
        >>> sorted(plugins.from_packages())     # e.g. ['cuda'] with jax-cuda13-plugin
        []
    """
    modules = {}   # module -> (platform name, where it was found)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(getattr(ep, "dist", None), "name", None)
        modules.setdefault(ep.value.split(":")[0], (
            platform_name(ep.name),
            f"entry point {ep.group}:{ep.name}" + (f" of {dist}" if dist else "")))
    try:
        spec = importlib.util.find_spec(ENTRY_POINT_GROUP)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for info in pkgutil.iter_modules(list(spec.submodule_search_locations)):
            modules.setdefault(f"{ENTRY_POINT_GROUP}.{info.name}", (
                platform_name(info.name), f"namespace package {ENTRY_POINT_GROUP}"))
    out = {}
    for module, (name, source) in sorted(modules.items()):
        found = Discovered(name, _folder_library(module), None, f"{source} ({module})")
        if name not in out or out[name].library is None:
            out[name] = found
    return out


def discovered():
    """{name: Discovered} of every plugin found outside ``PLUGINS``; the variable's entries
    win over packages of the same name."""
    return {**from_packages(), **from_environment()}


def find(platform):
    """Whether a plugin for ``platform`` can be looked for: a known one or a discovered one."""
    return platform in PLATFORMS or platform in discovered()


def create_options(platform):
    """The client options of ``platform``'s ``.json`` configuration, or None."""
    found = from_environment().get(platform)
    return found.options if found is not None else None


def library_path(platform):
    """The shared library of ``platform``'s plugin ('cuda', 'rocm', 'tpu' or any name a plugin
    is found by), checked against jaxlib where its wheel is pinned to it; raises
    :class:`PluginError` naming what is installed and what to install.

    Example:
        >>> from funcgrad.lowering import plugins
        >>> plugins.library_path("metal")
        Traceback (most recent call last):
        funcgrad.lowering.plugins.PluginError: funcgrad: no PJRT plugin for platform 'metal' was found ...
    """
    named = from_environment().get(platform)
    if named is not None:
        if not os.path.isfile(named.library):
            raise PluginError(f"funcgrad: {PATHS_ENV} names {named.library} as the PJRT plugin "
                              f"of {platform!r}, and there is no such file")
        return named.library
    found = installed(platform)
    if found:
        if found[0].problem is not None:
            raise PluginError(f"funcgrad: cannot use platform {platform!r}: {found[0].problem}")
        return found[0].library
    package = from_packages().get(platform)
    if package is not None:
        if package.library is None:
            raise PluginError(f"funcgrad: the PJRT plugin {package.source} for platform "
                              f"{platform!r} holds no shared library")
        return package.library
    raise PluginError(_missing_message(platform))


def load_failure(platform, exc):
    """A :class:`PluginError` for a plugin library that failed to load or start, with the
    versions involved and what to install."""
    found = installed(platform)
    if not found:
        where = discovered().get(platform)
        what = f"{where.library} from {where.source}" if where is not None else "no plugin"
        return PluginError(f"funcgrad: the {platform!r} PJRT plugin ({what}, with jaxlib "
                           f"{JAXLIB_VERSION}) failed to load: {exc}")
    extra = found[0].plugin.extra
    fix = f"pip install 'funcgrad[{extra}]'" if extra else _wanted(found[0].plugin)
    return PluginError(f"funcgrad: the {platform!r} PJRT plugin ({found[0].describe()}, with "
                       f"jaxlib {JAXLIB_VERSION}) failed to load: {exc}. If the versions do not "
                       f"belong together, install a matched pair: {fix}")
