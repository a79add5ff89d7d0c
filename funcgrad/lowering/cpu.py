"""The CPU platform: XLA:CPU's client, its compile options, jaxlib's LAPACK kernels, and the
lowering rules that differ on the CPU (``lowering/cpu_convolution.py``).

``FUNCGRAD_CPU_DEVICES=N`` or ``config.update("cpu_devices", N)`` before first use gives N host
devices, for testing multi-device code on one machine.

Example:
    >>> import funcgrad
    >>> funcgrad.devices("cpu")[0].platform
    'cpu'
"""
import threading

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.lax import linalg
from funcgrad.lowering import cpu_convolution  # noqa: F401  (registers the CPU conv lowering)
from funcgrad.lowering import cpu_dot  # noqa: F401  (registers the CPU int8 product lowering)
from funcgrad.lowering import platforms

# XLA:CPU compile options funcgrad sets unless XLA_FLAGS names them. YNNPACK runs matrix
# products and reductions; convolutions stay with XLA's own (Eigen) kernels, which measured
# 1.1-2.7x faster for LeNet and ResNet shapes, forward and backward (bench/conv_kernels.py).
CPU_COMPILE_OPTIONS = {
    "xla_cpu_experimental_ynn_fusion_type":
        "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT,LIBRARY_FUSION_TYPE_REDUCE",
}


class CpuPlatform(platforms.Platform):
    name = "cpu"
    aliases = ("host",)
    priority = 0
    compile_options = CPU_COMPILE_OPTIONS
    distributed = None   # a backend.DistributedRuntime once funcgrad.distributed.initialize ran

    def make_client(self, config):
        runtime = self.distributed
        if runtime is None:
            return xc.make_cpu_client(num_devices=int(config.cpu_devices))
        # one process of many: the client learns the other processes' devices through the
        # coordination service, and its collectives run over TCP with gloo
        minutes = max(1, -(-int(runtime.initialization_timeout) // 60))
        return xc.make_cpu_client(
            num_devices=int(config.cpu_devices), distributed_client=runtime.client,
            node_id=runtime.process_id, num_nodes=runtime.num_processes,
            collectives=_jax.make_gloo_tcp_collectives(distributed_client=runtime.client),
            get_local_topology_timeout_minutes=minutes,
            get_global_topology_timeout_minutes=minutes)

    def register_custom_call(self, target, handler, api_version=1):
        _jax.register_custom_call_target(target, handler, "cpu", api_version=api_version)


CPU = platforms.register(CpuPlatform())


# --- LAPACK: the kernels of lax.linalg on the CPU ---------------------------------------------
class LapackKernels:
    """jaxlib's LAPACK kernels ``lapack_<s|d|c|z><routine>_ffi``, registered with XLA at the
    first lowering that needs one (loading them costs ~0.15 s, which a program that never
    factorizes a matrix should not pay)."""

    family = linalg.LAPACK
    _PREFIX = {np.dtype(np.float32): "s", np.dtype(np.float64): "d",
               np.dtype(np.complex64): "c", np.dtype(np.complex128): "z"}

    def __init__(self):
        self._lock = threading.Lock()
        self._registered = False

    def _register(self):
        with self._lock:
            if self._registered:
                return
            from jaxlib.cpu import _lapack
            _lapack.initialize()
            for name, capsule in _lapack.registrations().items():
                if name.endswith("_ffi"):
                    CPU.register_custom_call(name, capsule, api_version=1)
            self._registered = True

    def target(self, fn_name, routine, dtype):
        if not self._registered:
            self._register()
        return f"lapack_{self._PREFIX[np.dtype(dtype)]}{routine}_ffi"

    def ensure_registered(self, target, fn_name, platform):
        """Register the kernels before compiling a module that calls ``target`` (one made
        elsewhere, such as an exported artifact): all of jaxlib's LAPACK kernels at once."""
        if not self._registered:
            self._register()


linalg.KERNELS["cpu"] = LapackKernels()
