"""The ROCm platform: AMD's PJRT plugin (``jax-rocm7-plugin`` with its ``jax-rocm7-pjrt``
library wheel, at jaxlib's version), found and checked by ``lowering/plugins.py``. funcgrad
registers no ROCm-specific lowerings or linear-algebra kernels: ``lax.linalg`` raises a clear
error there.

Example:
    >>> from funcgrad.lowering import rocm
    >>> rocm.ROCM.is_installed()        # False without the plugin wheel
    False
"""
from jaxlib import xla_client as xc

from funcgrad.lowering import platforms
from funcgrad.lowering.pjrt_plugin import PluginPlatform


class RocmPlatform(PluginPlatform):
    name = "rocm"
    priority = 10          # the default backend when an AMD GPU is usable

    def client_options(self):
        return xc.generate_pjrt_gpu_plugin_options()


ROCM = platforms.register(RocmPlatform())
