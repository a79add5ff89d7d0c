"""PJRT clients and devices: one client per platform, created on first use.

The platforms themselves (how to make a client, compile options, kernels) are one file each,
``lowering/cpu.py``, ``lowering/cuda.py``, ``lowering/rocm.py`` and ``lowering/tpu.py``,
registered in ``lowering/platforms.py``; the plugin wheels (``funcgrad[cuda13]``, ``[cuda12]``,
``[tpu]``, AMD's ROCm wheels) and any other PJRT plugin found by name are located and checked
against jaxlib by ``lowering/plugins.py``. The default backend is the installed platform of
highest priority whose client starts (TPU, then CUDA or ROCm, then the CPU; an installed but
mismatched plugin warns and is skipped); ``FUNCGRAD_PLATFORM=cpu`` or
``config.update("platform", "cpu")`` forces one.

Example:
    >>> from funcgrad.lowering import backend
    >>> backend.default_backend()
    'cpu'
"""
import contextlib
import dataclasses
import gc
import sys
import threading
import warnings

from jaxlib import _jax

from funcgrad.config import config
# each platform file registers its platform on import
from funcgrad.lowering import cpu, cuda, platforms, plugins, rocm, tpu  # noqa: F401

_lock = threading.Lock()
_clients = {}
client_listeners = []   # called after each new client (funcgrad.lowering.array uses it)
_failed = {}
_x64_transfer_state = None


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


def _collect_runtime_garbage(phase, info):
    # The runtime frees some Python objects it touched without the GIL (one small block per
    # execute, block_until_ready or is_ready call) only when asked to; unasked, a process grows
    # by about 120 bytes per jitted call. Asking at the end of each Python garbage collection
    # bounds that queue by the collector's own rhythm (JAX registers the same hook; running it
    # twice when both are loaded empties an already empty queue).
    if phase == "stop":
        _jax.collect_garbage()


def _install_runtime_gc_hook():
    if _collect_runtime_garbage not in gc.callbacks:
        gc.callbacks.append(_collect_runtime_garbage)


def get_client(platform=None):
    """The PJRT client for ``platform`` ('cpu', 'cuda', 'tpu'); the default platform when None."""
    platform = platforms.get(platform).name if platform else default_backend()
    client = _clients.get(platform)
    if client is not None:
        return client
    with _lock:
        if platform not in _clients:
            _set_x64_state_once()
            _install_runtime_gc_hook()
            _clients[platform] = platforms.get(platform).make_client(config)
            for listener in list(client_listeners):
                listener()
        return _clients[platform]


@dataclasses.dataclass(frozen=True)
class DistributedRuntime:
    """This process's connection to the coordination service of a multi-process run
    (``funcgrad.distributed.initialize`` makes it)."""
    client: object             # jaxlib's DistributedRuntimeClient, connected
    process_id: int
    num_processes: int
    initialization_timeout: float
    # check_program(name, module_text, global argument avals, devices): called once for each
    # program compiled over several processes' devices; raises when the processes disagree
    check_program: object = None


def attach_distributed(runtime):
    """Make the clients of this process part of the multi-process run ``runtime`` (None: detach).

    Only before the first client is made: a client's device set is fixed when it starts.
    """
    with _lock:
        if _clients and runtime is not None:
            raise RuntimeError(
                "funcgrad.distributed.initialize must be called before funcgrad makes its first "
                f"device client (already started: {sorted(_clients)}); call it at the top of the "
                "program, before any array is created or any function is compiled")
        cpu.CPU.distributed = runtime
        _default.clear()


def distributed_runtime():
    """The DistributedRuntime attached to this process, or None in a single-process run."""
    return cpu.CPU.distributed


def check_program(name, module_text, avals, devices):
    """In a multi-process run, make sure every process whose devices ``devices`` include
    compiled the same program here (``DistributedRuntime.check_program``); a no-op for a
    program on one process's devices. Called once per compiled program, not per launch."""
    runtime = cpu.CPU.distributed
    if runtime is None or runtime.check_program is None:
        return
    if len({d.process_index for d in devices}) > 1:
        runtime.check_program(name, module_text, avals, devices)


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
    if name in ("platform", "cpu_devices", "default_device"):
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
    """The devices of ``backend`` that this process drives (all of them in a one-process run).

    Example:
        >>> funcgrad.local_devices()
        [CpuDevice(id=0)]
    """
    return list(get_client(backend).local_devices())


def process_index(backend=None):
    """This process's index among the processes of the run (0 in a one-process run)."""
    return get_client(backend).process_index()


def process_count(backend=None):
    """The number of processes whose devices form the run's global device set."""
    return len({d.process_index for d in get_client(backend).devices()})


def device_count(backend=None):
    return len(devices(backend))


def default_device():
    """The device that new arrays and uncommitted computations go to."""
    device = _default.get("device")
    if device is None:
        chosen = config.default_device     # funcgrad.default_device(...): a Device or a name
        if chosen is None:
            device = local_devices()[0]
        elif isinstance(chosen, str):
            device = local_devices(chosen)[0]
        else:
            device = chosen
        _default["device"] = device
    return device


def platform_of(device):
    """The lowering platform of ``device``: 'cpu' or 'cuda' (PJRT calls CUDA devices 'gpu')."""
    return platforms.name_of_device(device)


def total_device_count():
    """Devices over every client made so far (not only the default backend's)."""
    return sum(len(c.devices()) for c in list(_clients.values()))


def client_of(device):
    return device.client
