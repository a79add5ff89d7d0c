"""Platforms served by a PJRT plugin library (CUDA, ROCm, TPU, or any plugin found by name).

``PluginPlatform(name)`` loads the library that ``lowering/plugins.py`` finds for ``name`` at
the first use of the platform, initializes it and makes a client through PJRT's C API. The
CUDA, ROCm and TPU files subclass it; any other name (``FUNCGRAD_PLATFORM=my_npu`` with
``PJRT_NAMES_AND_LIBRARY_PATHS='my_npu:/path/pjrt.so'``, or a ``jax_plugins`` package) becomes
a ``PluginPlatform`` when first asked for. In a multi-process run
(``funcgrad.distributed.initialize``) the client is given the run's coordination-service
client and this process's place in the run, as JAX does, so that its device list is global.

Example:
    >>> from funcgrad.lowering import pjrt_plugin, platforms
    >>> platforms.get("tpu").is_installed()        # True on a TPU VM with libtpu
    False
"""
from jaxlib import xla_client as xc

from funcgrad.lowering import platforms, plugins


class PluginPlatform(platforms.Platform):
    """A platform whose PJRT client comes from a plugin library found by its name."""

    def __init__(self, name=None, priority=None):
        if name is not None:
            self.name = name
        if priority is not None:
            self.priority = priority
        self.c_api = None   # the plugin's PJRT_Api capsule, once loaded by funcgrad

    def is_installed(self):
        if plugins.installed(self.name):
            return True
        try:
            return self.name in plugins.discovered()
        except plugins.PluginError:     # a malformed variable: the first use reports it
            return True

    def client_options(self):
        """The options the client is made with (a ``.json`` configuration's by default)."""
        return plugins.create_options(self.name)

    def run_options(self, runtime):
        """Options telling the client where this process stands in a multi-process run (GPU
        plugins take them; libtpu learns it from the distributed client alone)."""
        return {"node_id": runtime.process_id, "num_nodes": runtime.num_processes}

    def make_client(self, config):
        from funcgrad.lowering import backend
        path = plugins.library_path(self.name)     # PluginError when missing or mismatched
        try:
            if not xc.pjrt_plugin_loaded(self.name):
                self.c_api = xc.load_pjrt_plugin_dynamically(self.name, path)
            if not xc.pjrt_plugin_initialized(self.name):
                xc.initialize_pjrt_plugin(self.name)
        except Exception as exc:
            raise plugins.load_failure(self.name, exc) from exc
        options = dict(self.client_options() or {})
        runtime = backend.distributed_runtime()
        if runtime is None:
            return xc.make_c_api_client(self.name, options)
        # one process of a multi-process run: the plugin learns every process's devices (and
        # sets up its cross-host collectives, NCCL on GPUs) through the coordination service
        options.update(self.run_options(runtime))
        return xc.make_c_api_client(self.name, options, runtime.client)


def _find(name):
    """A PluginPlatform for ``name`` when a plugin of that name is found, else None."""
    try:
        found = name in plugins.discovered()
    except plugins.PluginError:
        found = True        # a malformed variable entry: the first use reports it
    return PluginPlatform(name) if found else None


platforms.add_finder(_find)
