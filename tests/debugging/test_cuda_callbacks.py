"""Host callbacks on CUDA: the plugin extension's FFI handlers (``xla_ffi_python_gpu_callback``)
are registered with the plugin before a callback is compiled. No GPU here: a fake extension
module stands in for ``jax_cuda13_plugin.cuda_plugin_extension`` and records the calls; what
runs on a GPU (the plugin accepting the handler, the callback running) is not tested here."""
from types import SimpleNamespace

import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.core.errors import MissingRuleError
from funcgrad.lowering import cuda, mlir


def fake_extension(calls, handlers=None, types=None, legacy=False):
    table = handlers if handlers is not None else {
        "xla_ffi_python_gpu_callback": "cb-capsule",
        "xla_ffi_partitioned_python_gpu_callback": "pcb-capsule",
        "xla_buffer_python_gpu_callback": "buf-capsule"}
    ext = SimpleNamespace(
        __name__="fake_cuda_plugin.cuda_plugin_extension",
        register_custom_call_target=lambda *a: calls.append(("target",) + a),
        register_custom_type=lambda *a: calls.append(("type",) + a))
    if legacy:
        ext.registrations = lambda: table
    else:
        ext.ffi_handlers = lambda: table
        ext.ffi_types = lambda: dict(types or {"xla.gpu.ext.callback_state": "type-capsule"})
    return ext


def test_registers_types_then_every_handler_once():
    calls = []
    handlers = cuda.PluginFfiHandlers(load=lambda: (fake_extension(calls), []),
                                      api=lambda: "c-api")
    handlers.ensure(cuda.CALLBACK_TARGET, "debug.print")
    handlers.ensure(cuda.CALLBACK_TARGET, "debug.print")       # second time: nothing more
    assert calls == [
        ("type", "c-api", "xla.gpu.ext.callback_state", "type-capsule"),
        ("target", "c-api", "xla_ffi_python_gpu_callback", "cb-capsule", "CUDA", 1),
        ("target", "c-api", "xla_ffi_partitioned_python_gpu_callback", "pcb-capsule", "CUDA", 1),
        ("target", "c-api", "xla_buffer_python_gpu_callback", "buf-capsule", "CUDA", 1)]


def test_legacy_registrations_table():
    calls = []
    ext = fake_extension(calls, legacy=True, handlers={
        "xla_python_gpu_callback": "old", "xla_ffi_python_gpu_callback": "new",
        "__gpu$xla.gpu.ext.log": "log"})
    handlers = cuda.PluginFfiHandlers(load=lambda: (ext, []), api=lambda: "c-api")
    handlers.ensure(cuda.CALLBACK_TARGET, "pure_callback(sin)")
    assert sorted(c[2:] for c in calls) == [
        ("__gpu$xla.gpu.ext.log", "log", "CUDA", 1),
        ("xla_ffi_python_gpu_callback", "new", "CUDA", 1),
        ("xla_python_gpu_callback", "old", "CUDA", 0)]


def test_missing_handler_names_the_callback_and_what_exists():
    ext = fake_extension([], handlers={"xla_python_gpu_callback": "old"}, legacy=True)
    handlers = cuda.PluginFfiHandlers(load=lambda: (ext, []), api=lambda: "c-api")
    with pytest.raises(MissingRuleError, match=r"debug_callback\(print\): on platform 'cuda' "
                                               r"host callbacks need the FFI handler "
                                               r"'xla_ffi_python_gpu_callback'.*registered "
                                               r"xla_python_gpu_callback"):
        handlers.ensure(cuda.CALLBACK_TARGET, "debug_callback(print)")


def test_no_extension_module():
    handlers = cuda.PluginFfiHandlers(
        load=lambda: (None, ["jax_cuda13_plugin.cuda_plugin_extension: No module named x"]),
        api=lambda: "c-api")
    with pytest.raises(MissingRuleError, match="no CUDA plugin extension module could be "
                                               "imported.*No module named x"):
        handlers.ensure(cuda.CALLBACK_TARGET, "debug.print")


def test_plugin_refusing_one_handler_keeps_the_others():
    calls = []
    ext = fake_extension(calls)
    record = ext.register_custom_call_target

    def register(c_api, target, *rest):
        if target == "xla_buffer_python_gpu_callback":
            raise RuntimeError("handler already registered")
        record(c_api, target, *rest)
    ext.register_custom_call_target = register
    handlers = cuda.PluginFfiHandlers(load=lambda: (ext, []), api=lambda: "c-api")
    handlers.ensure(cuda.CALLBACK_TARGET, "debug.print")
    assert handlers.registered == {"xla_ffi_python_gpu_callback",
                                   "xla_ffi_partitioned_python_gpu_callback"}


def test_plugin_refusing_the_callback_handler():
    def refuse(*args):
        raise RuntimeError("The plugin does not have a custom call extension.")
    ext = fake_extension([])
    ext.register_custom_call_target = refuse
    handlers = cuda.PluginFfiHandlers(load=lambda: (ext, []), api=lambda: "c-api")
    with pytest.raises(MissingRuleError, match="registered no handlers; the CUDA PJRT plugin "
                                               "refused xla_ffi_python_gpu_callback: The "
                                               "plugin does not have a custom"):
        handlers.ensure(cuda.CALLBACK_TARGET, "debug.print")


def test_plugin_unreachable():
    def no_client():
        raise RuntimeError("no CUDA device")
    handlers = cuda.PluginFfiHandlers(load=lambda: (fake_extension([]), []), api=no_client)
    with pytest.raises(MissingRuleError, match="could not be reached: no CUDA device"):
        handlers.ensure(cuda.CALLBACK_TARGET, "debug.print")


def test_lowering_for_cuda_registers_before_emitting_the_gpu_target(monkeypatch):
    calls = []
    fake = cuda.PluginFfiHandlers(load=lambda: (fake_extension(calls), []),
                                  api=lambda: "c-api")
    monkeypatch.setattr(cuda, "HOST_CALLBACK_HANDLERS", fake)
    closed = funcgrad.make_jaxpr(
        lambda x: funcgrad.debug.callback(print, x) or x * 2.0)(jnp.ones(2))
    callbacks = []
    module, ctx = mlir.lower_closed_jaxpr(closed, platform="cuda", host_callbacks=callbacks)
    with ctx:
        text = str(module)
    assert "xla_ffi_python_gpu_callback" in text and "xla_ffi_python_cpu_callback" not in text
    assert len(callbacks) == 1
    assert ("target", "c-api", "xla_ffi_python_gpu_callback", "cb-capsule", "CUDA", 1) in calls
    # the CPU lowering is unchanged and registers nothing
    calls.clear()
    module, ctx = mlir.lower_closed_jaxpr(closed, platform="cpu", host_callbacks=[])
    with ctx:
        assert "xla_ffi_python_cpu_callback" in str(module)
    assert calls == []
