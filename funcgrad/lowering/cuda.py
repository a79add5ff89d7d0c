"""The CUDA platform: the PJRT plugin of the ``jax-cuda13-plugin`` (or ``-cuda12-``) wheel, its
custom-call registration, the plugin's cuSOLVER kernels for ``lax.linalg``, and the lowering
rules that differ on NVIDIA GPUs.

The plugin wheel ships the PJRT plugin as a shared library (``xla_cuda_plugin*.so``, found
and checked against jaxlib by ``lowering/plugins.py``), an
extension module ``cuda_plugin_extension`` that registers FFI handlers with that plugin (and
offers jaxlib's own GPU handlers, among them ``xla_ffi_python_gpu_callback``, which runs the
Python host callbacks of ``debug.print``, ``debug.callback`` and ``pure_callback``), and a
module ``_solver`` whose ``registrations()`` maps cuSOLVER custom-call target names
(``cusolver_getrf_ffi``, ``cusolver_syevd_ffi``...) to handlers. A handler must be known to the
plugin before an executable that calls it is compiled: ``CusolverKernels.target`` registers
each one the first time a lowering rule emits it, and ``PluginFfiHandlers.ensure`` registers
the extension's handlers (and FFI types) the first time a host callback is lowered for CUDA.

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
from funcgrad.lax import _hlo, callbacks, linalg
from funcgrad.lax.convolution import _conv_lowering, conv_general_dilated_p
from funcgrad.lax.dot import _dot_general_lowering, dot_general_p
from funcgrad.lowering.mlir import LoweringRuleContext
from funcgrad.lowering import platforms
from funcgrad.lowering.pjrt_plugin import PluginPlatform

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


class CudaPlatform(PluginPlatform):
    name = "cuda"
    aliases = ("gpu",)
    priority = 10          # the default backend when a GPU is usable

    def client_options(self):
        return xc.generate_pjrt_gpu_plugin_options()

    def plugin_api(self):
        """The loaded plugin's PJRT_Api capsule (starting the CUDA client if needed)."""
        from funcgrad.lowering import backend
        backend.get_client("cuda")
        if self.c_api is None:
            raise RuntimeError("the CUDA PJRT plugin was loaded outside funcgrad, so its C API "
                               "handle is unknown")
        return self.c_api

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
        try:
            c_api = self.plugin_api()
        except RuntimeError as exc:
            raise RuntimeError(f"cannot register custom call {target!r}: {exc}") from exc
        ext, failures = plugin_module("cuda_plugin_extension")
        if ext is not None:
            ext.register_custom_call_target(c_api, target, handler, "CUDA", api_version)
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


def _float_type_holding(int_dtype):
    """The float type whose products of two ``int_dtype`` values are exact: float32 for 8-bit
    integers (a product below 2**15, a sum exact while below 2**24), float64 otherwise."""
    return np.dtype(np.float32) if np.dtype(int_dtype).itemsize == 1 else np.dtype(np.float64)


def _conv_lowering_cuda(ctx, lhs, rhs, **params):
    """XLA:GPU hands convolutions to cuDNN, which multiplies integers only as int8 in
    channels-last layouts with channel counts a multiple of 4; XLA rejects every other integer
    convolution ("Unsupported convs"). Integer convolutions (``quantize``'s int8 ones, say) run
    as convolutions of the same integers in float32 at full precision (float64 for wider
    integers), converted back: exact while every partial sum of an int8 x int8 product stays
    below 2**24 (fewer than 1024 terms of full-scale values; beyond that rounded as float32
    sums are), and for wider integers while below 2**53."""
    (lhs_aval, rhs_aval), out_aval = ctx.avals_in, ctx.avals_out[0]
    if not dtypes.is_integer(lhs_aval.dtype):
        return _conv_lowering(ctx, lhs, rhs, **params)
    ftype = _float_type_holding(lhs_aval.dtype)
    float_ctx = LoweringRuleContext(ctx.module, [lhs_aval.update(dtype=ftype),
                                                 rhs_aval.update(dtype=ftype)],
                                    [out_aval.update(dtype=ftype)], ctx.platform, ctx.axis_env,
                                    ctx.host_callbacks)
    out = _conv_lowering(float_ctx, _hlo.convert(lhs, lhs_aval, ftype),
                         _hlo.convert(rhs, rhs_aval, ftype),
                         **dict(params, precision=("HIGHEST", "HIGHEST"),
                                preferred_element_type=None))
    return _hlo.convert(out, float_ctx.avals_out[0], out_aval.dtype)


conv_general_dilated_p.def_lowering(_conv_lowering_cuda, platform="cuda")


# --- host callbacks: the handlers of the plugin's extension module ----------------------------
CALLBACK_TARGET = "xla_ffi_python_gpu_callback"


def extension_handlers(ext):
    """{target name: (handler, FFI api version)} that a CUDA plugin extension module offers:
    ``ffi_handlers()`` (newer plugins) or ``ffi_registrations()``, typed FFI handlers; or the
    older ``registrations()``, where only ``xla_ffi_*`` and ``__gpu$*`` names are typed FFI.

    Example:
        >>> from types import SimpleNamespace
        >>> from funcgrad.lowering.cuda import extension_handlers
        >>> old = SimpleNamespace(registrations=lambda: {"xla_python_gpu_callback": "h0",
        ...                                              "xla_ffi_python_gpu_callback": "h1"})
        >>> sorted(extension_handlers(old).items())
        [('xla_ffi_python_gpu_callback', ('h1', 1)), ('xla_python_gpu_callback', ('h0', 0))]
    """
    for name in ("ffi_handlers", "ffi_registrations"):
        table = getattr(ext, name, None)
        if table is not None:
            return {target: (handler, 1) for target, handler in table().items()}
    table = getattr(ext, "registrations", None)
    if table is None:
        return {}
    return {target: (handler, 1 if target.startswith(("xla_ffi_", "__gpu$")) else 0)
            for target, handler in table().items()}


class PluginFfiHandlers:
    """Registers the CUDA plugin extension's FFI types and handlers with the plugin once, as
    JAX's CUDA plugin does at start-up; ``ensure(target)`` then checks that ``target`` was
    among them. ``load`` returns (extension module or None, why not) and ``api`` the plugin's
    PJRT_Api capsule: both are replaceable, so the registration is testable without a GPU.

    Example:
        >>> from types import SimpleNamespace
        >>> from funcgrad.lowering.cuda import PluginFfiHandlers
        >>> calls = []
        >>> ext = SimpleNamespace(
        ...     ffi_handlers=lambda: {"xla_ffi_python_gpu_callback": "capsule"},
        ...     register_custom_call_target=lambda *a: calls.append(a))
        >>> handlers = PluginFfiHandlers(load=lambda: (ext, []), api=lambda: "c_api")
        >>> handlers.ensure("xla_ffi_python_gpu_callback", "debug.print")
        >>> calls
        [('c_api', 'xla_ffi_python_gpu_callback', 'capsule', 'CUDA', 1)]
    """

    def __init__(self, load=None, api=None):
        self._load = load or (lambda: plugin_module("cuda_plugin_extension"))
        self._api = api or CUDA.plugin_api
        self._lock = threading.Lock()
        self.registered = None      # target names registered; None until the first ensure
        self._why = ""

    def _register_all(self):
        """Register every type and handler of the extension, each on its own (one the plugin
        refuses does not keep the others out); returns the names of the handlers registered."""
        ext, failures = self._load()
        if ext is None:
            self._why = ("no CUDA plugin extension module could be imported ("
                         f"{'; '.join(failures)})")
            return set()
        c_api = self._api()
        refused = []
        types = getattr(ext, "ffi_types", None)
        register_type = getattr(ext, "register_custom_type", None) or \
            getattr(ext, "register_custom_type_id", None)
        if types is not None and register_type is not None:
            for name, type_id in types().items():
                try:
                    register_type(c_api, name, type_id)
                except Exception as exc:
                    refused.append(f"type {name}: {exc}")
        done = set()
        for target, (handler, version) in extension_handlers(ext).items():
            try:
                ext.register_custom_call_target(c_api, target, handler, "CUDA", version)
            except Exception as exc:
                refused.append(f"{target}: {exc}")
                continue
            done.add(target)
        name = getattr(ext, "__name__", repr(ext))
        self._why = f"{name} registered {', '.join(sorted(done)) or 'no handlers'}"
        if refused:
            self._why += f"; the CUDA PJRT plugin refused {'; '.join(refused)}"
        return done

    def ensure(self, target, what):
        """Register the extension's handlers (first call only); raise ``MissingRuleError``
        naming ``what`` when ``target`` is not among them."""
        if self.registered is None:
            with self._lock:
                if self.registered is None:
                    try:
                        self.registered = self._register_all()
                    except Exception as exc:       # no plugin API (client start failed)
                        self.registered = set()
                        self._why = f"the CUDA PJRT plugin could not be reached: {exc}"
        if target not in self.registered:
            raise errors.MissingRuleError(
                f"{what}: on platform 'cuda' host callbacks need the FFI handler {target!r} "
                f"of the CUDA plugin's extension module, but {self._why}")


HOST_CALLBACK_HANDLERS = PluginFfiHandlers()


def _callback_lowering_cuda(ctx, *operands, host_fn, vmap_method):
    HOST_CALLBACK_HANDLERS.ensure(CALLBACK_TARGET, host_fn.name)
    return callbacks._lowering(ctx, *operands, host_fn=host_fn, vmap_method=vmap_method)


callbacks.python_callback_p.def_lowering(_callback_lowering_cuda, platform="cuda")
