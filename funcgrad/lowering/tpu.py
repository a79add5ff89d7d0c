"""The TPU platform: the libtpu PJRT plugin (``pip install libtpu``, or ``'funcgrad[tpu]'`` for
the release JAX pairs with this jaxlib; ``TPU_LIBRARY_PATH`` may name the library), found and
checked by ``lowering/plugins.py``. TPUs have no platform-specific lowerings in funcgrad; linear
algebra there needs kernels funcgrad does not register yet, so ``lax.linalg`` raises a clear
error.

Example:
    >>> from funcgrad.lowering import tpu
    >>> tpu.TPU.is_installed()         # False without libtpu
    False
"""
from funcgrad.lowering import platforms
from funcgrad.lowering.pjrt_plugin import PluginPlatform


class TpuPlatform(PluginPlatform):
    name = "tpu"
    priority = 20          # the default backend on a TPU host

    def run_options(self, runtime):
        return {}          # libtpu reads the run from the distributed client itself


TPU = platforms.register(TpuPlatform())
