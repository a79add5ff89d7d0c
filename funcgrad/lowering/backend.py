"""PJRT clients and devices: one client per platform, created on first use.

The CPU client is always there (``FUNCGRAD_CPU_DEVICES=N`` or ``config.update("cpu_devices", N)``
before first use gives N host devices, for testing multi-device code on one machine). A CUDA
client is made when the CUDA PJRT plugin wheel (``jax-cuda13-plugin``/``jax-cuda12-plugin``) is
installed; ``FUNCGRAD_PLATFORM=cpu`` or ``config.update("platform", "cpu")`` forces the CPU.
"""
import contextlib
import glob
import importlib
import importlib.util
import os
import sys
import threading

from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.config import config

_lock = threading.Lock()
_clients = {}
client_listeners = []   # called after each new client (funcgrad.lowering.array uses it)
_failed = {}
_x64_transfer_state = None
_cuda_c_api = None      # the CUDA plugin's PJRT_Api capsule, kept for registering custom calls


def _jax_x64_flag():
    """JAX's own x64 flag object when JAX has been imported in this process, else None.

    funcgrad never imports JAX; it only looks for the module a user (or a library) loaded.
    """
    module = sys.modules.get("jax._src.config")
    return getattr(module, "enable_x64", None) if module is not None else None


def _set_x64_state_once():
    # The C++ runtime needs an x64 flag object installed before any transfer. The slot is
    # process-wide and shared with JAX, whose jit reads it for dtype canonicalization and its
    # cache keys: when JAX is loaded its own flag stays installed (JAX installs it again at
    # import if funcgrad came first), so JAX keeps behaving as its config says.
    global _x64_transfer_state
    if _x64_transfer_state is None:
        _x64_transfer_state = _jax.config.Config("funcgrad_enable_x64", True,
                                                 include_in_jit_key=True)
    if _jax_x64_flag() is None:
        _jax.jax_jit.set_enable_x64_state(_x64_transfer_state)


@contextlib.contextmanager
def wide_transfers():
    """Let the runtime keep 64-bit types during a host-to-device copy, then restore its flag.

    funcgrad canonicalizes dtypes in Python, so a 64-bit buffer it copies must arrive as such
    even when JAX, in the same process, runs with x64 off: JAX's flag is switched on for this
    thread only (as ``jax.enable_x64`` does) and switched back afterwards.
    """
    jax_flag = _jax_x64_flag()
    if jax_flag is None:
        _set_x64_state_once()
        yield
        return
    previous = jax_flag.swap_local(True)
    try:
        yield
    finally:
        jax_flag.set_local(previous)


def _cuda_plugin_path():
    for name in ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_plugins.xla_cuda13",
                 "jax_plugins.xla_cuda12"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        for folder in spec.submodule_search_locations:
            found = glob.glob(os.path.join(folder, "xla_cuda_plugin*.so"))
            if found:
                return found[0]
    return None


def _make_client(platform):
    global _cuda_c_api
    if platform == "cpu":
        return xc.make_cpu_client(num_devices=int(config.cpu_devices))
    if platform in ("cuda", "gpu"):
        path = _cuda_plugin_path()
        if path is None:
            raise RuntimeError("no CUDA PJRT plugin is installed (pip install jax-cuda13-plugin)")
        if not xc.pjrt_plugin_loaded("cuda"):
            _cuda_c_api = xc.load_pjrt_plugin_dynamically("cuda", path)
        if not xc.pjrt_plugin_initialized("cuda"):
            xc.initialize_pjrt_plugin("cuda")
        return xc.make_c_api_client("cuda", xc.generate_pjrt_gpu_plugin_options())
    raise ValueError(f"funcgrad: unknown platform {platform!r} (known: 'cpu', 'cuda')")


def register_cuda_custom_call(name, handler, api_version=1):
    """Register an XLA FFI handler (a PyCapsule, or a dict of stage name -> capsule) as custom
    call target ``name`` with the CUDA PJRT plugin; call it before compiling code that uses it.

    Plugin platforms take their handlers through the plugin's own extension module
    (``cuda_plugin_extension`` of the jax-cuda13/12-plugin wheel), not through jaxlib.

    Example:
        >>> backend.register_cuda_custom_call("cusolver_getrf_ffi", capsule)
    """
    get_client("cuda")
    if _cuda_c_api is None:
        raise RuntimeError(f"cannot register custom call {name!r}: the CUDA PJRT plugin was "
                           "loaded outside funcgrad, so its C API handle is unknown")
    failures = []
    for package in ("jax_cuda13_plugin", "jax_cuda12_plugin"):
        try:
            ext = importlib.import_module(package + ".cuda_plugin_extension")
        except ImportError as exc:
            failures.append(f"{package}: {exc}")
            continue
        ext.register_custom_call_target(_cuda_c_api, name, handler, "CUDA", api_version)
        return
    raise RuntimeError(f"cannot register custom call {name!r}: no CUDA plugin extension module "
                       f"could be imported ({'; '.join(failures)})")


def get_client(platform=None):
    """The PJRT client for ``platform`` ('cpu', 'cuda'); the default platform when None."""
    platform = platform or default_backend()
    client = _clients.get(platform)
    if client is not None:
        return client
    with _lock:
        if platform not in _clients:
            _set_x64_state_once()
            _clients[platform] = _make_client(platform)
            for listener in list(client_listeners):
                listener()
        return _clients[platform]


def _cuda_available():
    if "cuda" in _clients:
        return True
    if "cuda" in _failed or _cuda_plugin_path() is None:
        return False
    try:
        get_client("cuda")
        return True
    except Exception as exc:  # a broken driver or no GPU: fall back to the CPU
        _failed["cuda"] = exc
        return False


_default = {}


def _forget_default(name, value):
    if name in ("platform", "cpu_devices"):
        _default.clear()


config.on_change(_forget_default)


def default_backend():
    """The platform name of the default device: 'cuda' when a GPU is usable, else 'cpu'.

    Example:
        >>> funcgrad.default_backend()
        'cpu'
    """
    name = _default.get("backend")
    if name is None:
        forced = config.platform
        if forced:
            name = "cuda" if forced == "gpu" else forced
        else:
            name = "cuda" if _cuda_available() else "cpu"
        _default["backend"] = name
    return name


def devices(backend=None):
    """The devices of ``backend`` (default: the default backend).

    Example:
        >>> funcgrad.devices()
        [CpuDevice(id=0)]
    """
    return list(get_client(backend).devices())


def local_devices(backend=None):
    return list(get_client(backend).local_devices())


def device_count(backend=None):
    return len(devices(backend))


def default_device():
    """The device that new arrays and uncommitted computations go to."""
    device = _default.get("device")
    if device is None:
        device = _default["device"] = devices()[0]
    return device


def platform_of(device):
    """The lowering platform of ``device``: 'cpu' or 'cuda' (PJRT calls CUDA devices 'gpu')."""
    platform = device.platform
    return "cuda" if platform == "gpu" else platform


def total_device_count():
    """Devices over every client made so far (not only the default backend's)."""
    return sum(len(c.devices()) for c in list(_clients.values()))


def client_of(device):
    return device.client
