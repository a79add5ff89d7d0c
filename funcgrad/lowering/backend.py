"""PJRT clients and devices: one client per platform, created on first use.

The platforms themselves (how to make a client, compile options, kernels) are one file each,
``lowering/cpu.py`` and ``lowering/cuda.py``, registered in ``lowering/platforms.py``. The
default backend is the installed platform of highest priority whose client starts (CUDA when
the plugin wheel is installed and a GPU answers, else the CPU); ``FUNCGRAD_PLATFORM=cpu`` or
``config.update("platform", "cpu")`` forces one.

Example:
    >>> from funcgrad.lowering import backend
    >>> backend.default_backend()
    'cpu'
"""
import threading

from jaxlib import _jax

from funcgrad.config import config
from funcgrad.lowering import cpu, cuda, platforms  # noqa: F401  (each registers its platform)

_lock = threading.Lock()
_clients = {}
client_listeners = []   # called after each new client (funcgrad.lowering.array uses it)
_failed = {}
_x64_transfer_state = None


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


def register_cuda_custom_call(name, handler, api_version=1):
    """Register an XLA FFI handler as custom call target ``name`` with the CUDA PJRT plugin
    (``lowering/cuda.py``); call it before compiling code that uses it.

    Example:
        >>> from funcgrad.lowering import backend
        >>> from jax_cuda13_plugin import _solver           # doctest: +SKIP
        >>> capsule = _solver.registrations()["cusolver_getrf_ffi"]   # doctest: +SKIP
        >>> backend.register_cuda_custom_call("cusolver_getrf_ffi", capsule)   # doctest: +SKIP
    """
    cuda.CUDA.register_custom_call(name, handler, api_version)


def get_client(platform=None):
    """The PJRT client for ``platform`` ('cpu', 'cuda'); the default platform when None."""
    platform = platforms.get(platform).name if platform else default_backend()
    client = _clients.get(platform)
    if client is not None:
        return client
    with _lock:
        if platform not in _clients:
            _set_x64_state_once()
            _clients[platform] = platforms.get(platform).make_client(config)
            for listener in list(client_listeners):
                listener()
        return _clients[platform]


def _usable(platform):
    """Whether ``platform`` is installed and its client starts (a broken driver or no GPU
    makes it unusable, and the next platform is the default)."""
    if platform.name in _clients:
        return True
    if platform.name in _failed or not platform.is_installed():
        return False
    try:
        get_client(platform.name)
        return True
    except Exception as exc:
        _failed[platform.name] = exc
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
            name = platforms.get(forced).name
        else:
            name = next(p.name for p in platforms.by_priority() if _usable(p))
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
    return platforms.name_of_device(device)


def total_device_count():
    """Devices over every client made so far (not only the default backend's)."""
    return sum(len(c.devices()) for c in list(_clients.values()))


def client_of(device):
    return device.client
