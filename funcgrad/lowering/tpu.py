"""The TPU platform: the libtpu PJRT plugin (``pip install 'funcgrad[tpu]'``), found and checked
by ``lowering/plugins.py``. TPUs have no platform-specific lowerings in funcgrad; linear algebra
there needs kernels funcgrad does not register yet, so ``lax.linalg`` raises a clear error.

Example:
    >>> from funcgrad.lowering import tpu
    >>> tpu.TPU.is_installed()         # False without libtpu
    False
"""
from jaxlib import xla_client as xc

from funcgrad.lowering import platforms, plugins


class TpuPlatform(platforms.Platform):
    name = "tpu"
    priority = 20          # the default backend on a TPU host

    def is_installed(self):
        return bool(plugins.installed("tpu"))

    def make_client(self, config):
        path = plugins.library_path("tpu")     # PluginError when missing
        try:
            if not xc.pjrt_plugin_loaded("tpu"):
                xc.load_pjrt_plugin_dynamically("tpu", path)
            if not xc.pjrt_plugin_initialized("tpu"):
                xc.initialize_pjrt_plugin("tpu")
        except Exception as exc:
            raise plugins.load_failure("tpu", exc) from exc
        return xc.make_c_api_client("tpu", None)


TPU = platforms.register(TpuPlatform())
