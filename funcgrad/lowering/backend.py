"""PJRT clients and devices: one client per platform, created on first use.

The CPU client is always there (``FUNCGRAD_CPU_DEVICES=N`` or ``config.update("cpu_devices", N)``
before first use gives N host devices, for testing multi-device code on one machine). A CUDA or
TPU client is made from the PJRT plugin wheel (``funcgrad[cuda13]``, ``[cuda12]``, ``[tpu]``;
``plugins.py`` finds it and checks it against jaxlib); the default backend is the first of tpu,
cuda, cpu that works. ``FUNCGRAD_PLATFORM=cpu`` or ``config.update("platform", "cpu")`` forces
the CPU.
"""
import importlib
import threading
import warnings

from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.config import config
from funcgrad.lowering import plugins

_lock = threading.Lock()
_clients = {}
client_listeners = []   # called after each new client (funcgrad.lowering.array uses it)
_failed = {}
_x64_transfer_state = None
_cuda_c_api = None      # the CUDA plugin's PJRT_Api capsule, kept for registering custom calls


def _set_x64_state_once():
    # The C++ runtime needs this flag set before any transfer. funcgrad canonicalizes dtypes in
    # Python, so the runtime is told to keep whatever 64-bit types it is given.
    global _x64_transfer_state
    if _x64_transfer_state is None:
        _x64_transfer_state = _jax.config.Config("funcgrad_enable_x64", True,
                                                 include_in_jit_key=True)
    _jax.jax_jit.set_enable_x64_state(_x64_transfer_state)


def keep_64bit_transfers():
    """Re-assert the runtime's 64-bit transfer flag before a 64-bit host-to-device copy.

    The flag is process state that another library in the same process (JAX, when a benchmark
    imports it) may switch off; without it float64 data would silently arrive as float32.
    """
    _jax.jax_jit.set_enable_x64_state(_x64_transfer_state)


def _make_client(platform):
    global _cuda_c_api
    if platform == "cpu":
        return xc.make_cpu_client(num_devices=int(config.cpu_devices))
    if platform not in plugins.PLATFORMS:
        raise ValueError(f"funcgrad: unknown platform {platform!r} (known: 'cpu', 'cuda', 'tpu')")
    path = plugins.library_path(platform)   # PluginError when missing or mismatched
    try:
        if not xc.pjrt_plugin_loaded(platform):
            api = xc.load_pjrt_plugin_dynamically(platform, path)
            if platform == "cuda":
                _cuda_c_api = api
        if not xc.pjrt_plugin_initialized(platform):
            xc.initialize_pjrt_plugin(platform)
    except Exception as exc:
        raise plugins.load_failure(platform, exc) from exc
    options = xc.generate_pjrt_gpu_plugin_options() if platform == "cuda" else None
    return xc.make_c_api_client(platform, options)


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
    """The PJRT client for ``platform`` ('cpu', 'cuda', 'tpu'); the default platform when None."""
    platform = platform or default_backend()
    platform = "cuda" if platform == "gpu" else platform
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


def _available(platform):
    if platform in _clients:
        return True
    if platform in _failed or not plugins.installed(platform):
        return False
    try:
        get_client(platform)
        return True
    except Exception as exc:  # no such device, a broken driver: fall back to the CPU
        _failed[platform] = exc
        if isinstance(exc, plugins.PluginError):   # installed but mismatched: say so once
            warnings.warn(f"{exc}; using the CPU", RuntimeWarning, stacklevel=3)
        return False


def started_platforms():
    """The platforms whose client has been made so far."""
    return sorted(_clients)


def failures():
    """Platform -> the exception that made its plugin unusable, for each one tried so far."""
    return dict(_failed)


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
            name = next((p for p in ("tpu", "cuda") if _available(p)), "cpu")
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
