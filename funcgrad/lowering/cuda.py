"""The CUDA platform: the PJRT plugin of the ``jax-cuda13-plugin`` (or ``-cuda12-``) wheel, its
custom-call registration, the plugin's cuSOLVER kernels for ``lax.linalg``, and the lowering
rules that differ on NVIDIA GPUs.

The plugin wheel ships the PJRT plugin as a shared library (``xla_cuda_plugin*.so``, found
and checked against jaxlib by ``lowering/plugins.py``), an
extension module ``cuda_plugin_extension`` that registers FFI handlers with that plugin, and a
module ``_solver`` whose ``registrations()`` maps cuSOLVER custom-call target names
(``cusolver_getrf_ffi``, ``cusolver_syevd_ffi``...) to handlers. A handler must be known to the
plugin before an executable that calls it is compiled: ``CusolverKernels.target`` registers
each one the first time a lowering rule emits it.

Example:
    >>> from funcgrad.lowering import cuda
    >>> cuda.CUDA.is_installed()       # False without the plugin wheel
    False
"""
import importlib
import threading

import numpy as np
from jaxlib import xla_client as xc

from funcgrad.core import dtypes, errors
from funcgrad.lax import linalg
from funcgrad.lax.dot import _dot_general_lowering, dot_general_p
from funcgrad.lowering import platforms, plugins

PLUGIN_PACKAGES = ("jax_cuda13_plugin", "jax_cuda12_plugin")


def plugin_module(name):
    """(module, failures): submodule ``name`` of the first CUDA plugin package that has it, or
    (None, ["<package>.<name>: <why>", ...])."""
    failures = []
    for package in PLUGIN_PACKAGES:
        try:
            return importlib.import_module(f"{package}.{name}"), failures
        except ImportError as exc:
            failures.append(f"{package}.{name}: {exc}")
    return None, failures


class CudaPlatform(platforms.Platform):
    name = "cuda"
    aliases = ("gpu",)
    priority = 10          # the default backend when a GPU is usable

    def __init__(self):
        self.c_api = None   # the plugin's PJRT_Api capsule, kept for registering custom calls

    def is_installed(self):
        return bool(plugins.installed("cuda"))

    def make_client(self, config):
        path = plugins.library_path("cuda")    # PluginError when missing or mismatched
        try:
            if not xc.pjrt_plugin_loaded("cuda"):
                self.c_api = xc.load_pjrt_plugin_dynamically("cuda", path)
            if not xc.pjrt_plugin_initialized("cuda"):
                xc.initialize_pjrt_plugin("cuda")
        except Exception as exc:
            raise plugins.load_failure("cuda", exc) from exc
        return xc.make_c_api_client("cuda", xc.generate_pjrt_gpu_plugin_options())

    def register_custom_call(self, target, handler, api_version=1):
        """Register an XLA FFI handler with the CUDA PJRT plugin. Plugin platforms take their
        handlers through the plugin's own extension module, not through jaxlib.

        Example:
            >>> from funcgrad.lowering.cuda import CUDA
            >>> CUDA.name
            'cuda'
            >>> from jax_cuda13_plugin import _solver           # doctest: +SKIP
            >>> capsule = _solver.registrations()["cusolver_getrf_ffi"]   # doctest: +SKIP
            >>> CUDA.register_custom_call("cusolver_getrf_ffi", capsule)   # doctest: +SKIP
        """
        from funcgrad.lowering import backend
        backend.get_client("cuda")
        if self.c_api is None:
            raise RuntimeError(f"cannot register custom call {target!r}: the CUDA PJRT plugin "
                               "was loaded outside funcgrad, so its C API handle is unknown")
        ext, failures = plugin_module("cuda_plugin_extension")
        if ext is not None:
            ext.register_custom_call_target(self.c_api, target, handler, "CUDA", api_version)
            return
        raise RuntimeError(f"cannot register custom call {target!r}: no CUDA plugin extension "
                           f"module could be imported ({'; '.join(failures)})")


CUDA = platforms.register(CudaPlatform())


# --- cuSOLVER: the kernels of lax.linalg on CUDA ----------------------------------------------
class CusolverKernels:
    """The CUDA plugin's cuSOLVER kernels (one target per routine, for every dtype), each
    registered with the plugin at the first lowering that emits it."""

    family = linalg.CUSOLVER

    def __init__(self):
        self._lock = threading.Lock()
        self._handlers = None    # target -> handler; {} when no plugin solver module imports
        self._origin = ""        # the module they came from, or why none could be imported
        self._registered = set()

    def _load(self):
        if self._handlers is not None:
            return self._handlers
        module, reasons = plugin_module("_solver")
        if module is not None:
            self._handlers = dict(module.registrations())
            self._origin = module.__name__
            return self._handlers
        self._handlers = {}
        self._origin = "; ".join(reasons)
        return self._handlers

    def solver_targets(self):
        """Sorted names of the cuSOLVER targets the installed plugin provides ([] if none).

        Example:
            >>> from funcgrad.lowering import cuda
            >>> targets = cuda.CUSOLVER.solver_targets()     # [] without the CUDA plugin
            >>> targets == sorted(targets) and all(t.startswith("cusolver_") for t in targets)
            True
            >>> targets          # with jax-cuda13-plugin installed   # doctest: +SKIP
            ['cusolver_csrlsvqr_ffi', 'cusolver_geqrf_ffi', 'cusolver_gesvd_ffi', ...]
        """
        return sorted(self._load())

    def registered_targets(self):
        """Sorted names of the targets registered with the CUDA plugin so far."""
        return sorted(self._registered)

    def ensure_registered(self, target, fn_name, platform):
        """Register handler ``target`` with the CUDA plugin once, or raise
        ``MissingRuleError`` naming ``lax.linalg.<fn_name>``, the platform and what is
        missing."""
        if target in self._registered:
            return
        with self._lock:
            if target in self._registered:
                return
            handlers = self._load()
            if target not in handlers:
                if handlers:
                    missing = (f"the installed {self._origin} has no handler of that name (it "
                               f"has {', '.join(sorted(handlers))})")
                else:
                    missing = ("no CUDA plugin solver module could be imported (install "
                               f"jax-cuda13-plugin; {self._origin})")
                raise errors.MissingRuleError(
                    f"lax.linalg.{fn_name}: platform {platform!r} needs the cuSOLVER kernel "
                    f"{target!r}, but {missing}")
            try:
                CUDA.register_custom_call(target, handlers[target], api_version=1)
            except Exception as exc:
                raise errors.MissingRuleError(
                    f"lax.linalg.{fn_name}: registering the cuSOLVER kernel {target!r} from "
                    f"{self._origin} with the {platform!r} PJRT plugin failed: {exc}") from exc
            self._registered.add(target)

    def target(self, fn_name, routine, dtype):
        target = f"cusolver_{routine}_ffi"
        self.ensure_registered(target, fn_name, "cuda")
        return target


CUSOLVER = CusolverKernels()
linalg.KERNELS["cuda"] = CUSOLVER


# --- lowerings that differ on CUDA ------------------------------------------------------------
def _small_int_contraction(ctx, lhs_contracting, preferred_element_type):
    """Whether an integer product accumulating in a wider type must get widened operands: XLA's
    int8 x int8 -> int32 product of (2, 3) by (3, 2) came out doubled (H100, jaxlib 0.11.2),
    while contracting 4, 32 and 64 were exact; cuBLAS's int8 kernels want the contracted size a
    multiple of 4."""
    lhs_aval = ctx.avals_in[0]
    if preferred_element_type is None or not dtypes.is_integer(lhs_aval.dtype) \
            or np.dtype(preferred_element_type).itemsize <= lhs_aval.dtype.itemsize:
        return False
    k = int(np.prod([lhs_aval.shape[d] for d in lhs_contracting], dtype=np.int64))
    return k % 4 != 0


def _dot_general_lowering_cuda(ctx, lhs, rhs, **params):
    widen = _small_int_contraction(ctx, params["dimension_numbers"][0][0],
                                   params.get("preferred_element_type"))
    return _dot_general_lowering(ctx, lhs, rhs, widen_operands=widen, **params)


dot_general_p.def_lowering(_dot_general_lowering_cuda, platform="cuda")
