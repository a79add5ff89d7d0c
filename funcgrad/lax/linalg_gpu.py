"""The cuSOLVER kernels behind ``lax.linalg`` on CUDA: finding them and registering them.

The CUDA plugin wheel (``jax-cuda13-plugin`` or ``jax-cuda12-plugin``) ships an extension module
``_solver`` whose ``registrations()`` maps custom-call target names (``cusolver_getrf_ffi``,
``cusolver_syevd_ffi``...) to XLA FFI handlers: a PyCapsule, or a dict of execution stage ->
capsule. A handler has to be known to the CUDA PJRT plugin before an executable that calls it is
compiled; :func:`ensure_registered` does that the first time a lowering rule emits the target
(through ``funcgrad.lowering.backend.register_cuda_custom_call``, imported lazily: ``lax``
reaches into ``lowering`` here because only the PJRT client knows the plugin's C API).

Example:
    >>> from funcgrad.lax import linalg_gpu
    >>> linalg_gpu.solver_targets()          # [] without the CUDA plugin
    ['cusolver_geev_ffi', 'cusolver_geqrf_ffi', ...]
"""
import importlib
import threading

from funcgrad.core import errors

PLUGIN_PACKAGES = ("jax_cuda13_plugin", "jax_cuda12_plugin")

_lock = threading.Lock()
_handlers = None        # target name -> handler; {} when no plugin solver module imports
_origin = ""            # the module the handlers came from, or why none could be imported
_registered = set()


def _load():
    global _handlers, _origin
    if _handlers is not None:
        return _handlers
    reasons = []
    for package in PLUGIN_PACKAGES:
        try:
            module = importlib.import_module(package + "._solver")
        except ImportError as exc:
            reasons.append(f"{package}._solver: {exc}")
            continue
        _handlers = dict(module.registrations())
        _origin = module.__name__
        return _handlers
    _handlers = {}
    _origin = "; ".join(reasons)
    return _handlers


def solver_targets():
    """Sorted names of the cuSOLVER targets the installed CUDA plugin provides ([] if none).

    Example:
        >>> "cusolver_getrf_ffi" in linalg_gpu.solver_targets()
        True
    """
    return sorted(_load())


def registered_targets():
    """Sorted names of the targets registered with the CUDA PJRT plugin so far.

    Example:
        >>> linalg_gpu.registered_targets()
        ['cusolver_getrf_ffi']
    """
    return sorted(_registered)


def ensure_registered(target, fn_name, platform):
    """Register cuSOLVER handler ``target`` with the CUDA plugin once, or raise
    ``MissingRuleError`` naming ``lax.linalg.<fn_name>``, the platform and what is missing.

    Example:
        >>> linalg_gpu.ensure_registered("cusolver_getrf_ffi", "lu", "cuda")
    """
    if target in _registered:
        return
    with _lock:
        if target in _registered:
            return
        handlers = _load()
        if target not in handlers:
            if handlers:
                missing = (f"the installed {_origin} has no handler of that name (it has "
                           f"{', '.join(sorted(handlers))})")
            else:
                missing = ("no CUDA plugin solver module could be imported (install "
                           f"jax-cuda13-plugin; {_origin})")
            raise errors.MissingRuleError(
                f"lax.linalg.{fn_name}: platform {platform!r} needs the cuSOLVER kernel "
                f"{target!r}, but {missing}")
        from funcgrad.lowering import backend
        try:
            backend.register_cuda_custom_call(target, handlers[target], api_version=1)
        except Exception as exc:
            raise errors.MissingRuleError(
                f"lax.linalg.{fn_name}: registering the cuSOLVER kernel {target!r} from "
                f"{_origin} with the {platform!r} PJRT plugin failed: {exc}") from exc
        _registered.add(target)
