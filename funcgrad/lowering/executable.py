"""Compiled executables: compile a StableHLO module for one device and run it fast.

The per-call path is ``execute_sharded`` + ``consume_with_handlers`` with result handlers made
once per executable (see JAXLIB_NOTES.md): a few microseconds for a small function.
"""
import logging
import os
import time

import numpy as np
from jaxlib import _jax, _profiler
from jaxlib import xla_client as xc

from funcgrad.config import config
from funcgrad.lax.callbacks import reraise_host_error
from funcgrad.lowering import backend, compilation_cache, mlir, platforms
from funcgrad.lowering.array import Array, _BufferAval, put_numpy, sharding_for, transfer
from funcgrad.lowering.jaxlib_compat import array_result_handler


class Executable:
    """A loaded XLA executable for one device, with its output avals and result handlers."""

    __slots__ = ("loaded", "device", "in_avals", "out_avals", "_handlers", "text", "donated")

    def __init__(self, loaded, device, in_avals, out_avals, text, donated=()):
        self.loaded, self.device = loaded, device
        self.in_avals, self.out_avals = list(in_avals), list(out_avals)
        sharding = sharding_for(device)
        self._handlers = [array_result_handler(_BufferAval(a), sharding) for a in out_avals]
        self.text = text
        self.donated = tuple(donated)

    def execute_buffers(self, bufs):
        """Run on device buffers; returns the output buffers (asynchronously computed)."""
        try:
            return self.loaded.execute_sharded(bufs).consume_with_handlers(self._handlers)
        except Exception as exc:
            reraise_host_error(exc)
            raise

    def __call__(self, args):
        """Run on Arrays / NumPy values / scalars; returns a list of Arrays."""
        bufs = [to_buffer(a, self.device, aval) for a, aval in zip(args, self.in_avals)]
        outs = self.execute_buffers(bufs)
        return [Array(a, b) for a, b in zip(self.out_avals, outs)]

    def cost_analysis(self):
        """XLA's estimates for one run: a dict with ``flops``, ``transcendentals``,
        ``bytes accessed`` (and per-operand ``bytes accessed<i>{}``...).

        Example:
            >>> exe = funcgrad.jit(lambda a, b: a @ b).lower(jnp.ones((4, 8)),
            ...                                             jnp.ones((8, 2))).compile()
            >>> exe.cost_analysis()["flops"]      # 4 * 2 outputs, 8 multiply-adds each
            128.0
        """
        return dict(self.loaded.cost_analysis())

    def as_text(self):
        """The optimized HLO that XLA compiled.

        Example:
            >>> exe = funcgrad.jit(jnp.sin).lower(jnp.ones(3)).compile()
            >>> "sine" in exe.as_text()
            True
        """
        return self.loaded.hlo_modules()[0].to_string()

    def memory_analysis(self):
        """XLA's buffer sizes for one run (``argument_size_in_bytes``,
        ``output_size_in_bytes``, ``temp_size_in_bytes``, ``alias_size_in_bytes``,
        ``generated_code_size_in_bytes``...).

        Example:
            >>> exe = funcgrad.jit(lambda x: x * 2.0).lower(jnp.ones((4, 8))).compile()
            >>> m = exe.memory_analysis()
            >>> m.argument_size_in_bytes, m.output_size_in_bytes
            (128, 128)
        """
        return self.loaded.get_compiled_memory_stats()


def to_buffer(x, device, aval=None):
    """The device buffer for argument ``x`` on ``device`` (copying host values there)."""
    if type(x) is Array:
        buf = x._buf
        if buf._sharding._device is not device:
            if x.device != device:
                return transfer(x, device)._buf
        return buf
    return put_numpy(np.asarray(x, aval.dtype) if aval is not None else x, device, aval)._buf


_rejected_options = set()     # options this jaxlib does not know (then compiled without them)


def _option_overrides(device):
    """The compile options of ``device``'s platform (``lowering/cpu.py``...) that XLA_FLAGS
    does not name and this jaxlib has not rejected."""
    flags = os.environ.get("XLA_FLAGS", "")
    options = platforms.get(device.platform).compile_options
    return [(k, v) for k, v in options.items() if k not in flags and k not in _rejected_options]


def compile_options(device):
    """The ``CompileOptions`` for one-device programs on ``device``."""
    options = xc.CompileOptions()
    # Without an explicit assignment XLA runs replica 0 on the client's first device, whatever
    # device list the executable was loaded for.
    options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]]))
    overrides = _option_overrides(device)
    if overrides:
        options.env_option_overrides = overrides
    return options


def compile_module(module_text, device, module=None, host_callbacks=()):
    """Compile StableHLO text for ``device``. With ``host_callbacks`` (Python functions that the
    module's callback custom calls name by index), the ``module`` object itself is compiled,
    inside its MLIR context, since only that entry point takes callbacks."""
    return compile_module_cached(module_text, device, module, host_callbacks)[0]


def compile_module_cached(module_text, device, module=None, host_callbacks=()):
    """``compile_module``, returning (loaded executable, whether the persistent compilation
    cache supplied it)."""
    options = compile_options(device)
    devices = _jax.DeviceList((device,))

    def compile_now():
        if host_callbacks:
            return device.client.compile_and_load(module, devices, compile_options=options,
                                                  host_callbacks=list(host_callbacks))
        return device.client.compile_and_load(module_text, devices, options)
    try:
        if host_callbacks:       # refers to this process's Python objects: never cached
            return compile_now(), False
        return compilation_cache.load_or_compile(module_text, options, device, compile_now)
    except _jax.JaxRuntimeError as exc:
        unknown = [k for k, _ in options.env_option_overrides if k in str(exc)]
        if not unknown:
            raise
        _rejected_options.update(unknown)      # an older or newer jaxlib: compile without
        return compile_module_cached(module_text, device, module, host_callbacks)


logger = logging.getLogger("funcgrad")


def _log_compile(name, in_avals, device, seconds, cached):
    shapes = ", ".join(a.str_short() for a in in_avals)
    how = "loaded from the persistent compilation cache" if cached else "compiled"
    logger.warning("%s %s(%s) for %s in %.1f ms", how.capitalize(), name, shapes, device,
                   seconds * 1e3)


def compile_closed_jaxpr(closed, device, name="main", donated=()):
    """Lower and compile ``closed`` for ``device``; consts become leading arguments. With
    ``config.log_compiles`` on, logs the function name, argument shapes and time."""
    callbacks = []
    start = time.perf_counter()
    in_avals = [v.aval for v in closed.jaxpr.constvars] + closed.in_avals
    with _profiler.TraceMe(f"compile {name}"):
        module, ctx = mlir.lower_closed_jaxpr(closed, name=name,
                                              platform=backend.platform_of(device),
                                              donated=donated, host_callbacks=callbacks)
        with ctx:
            text = str(module)
            loaded, cached = compile_module_cached(text, device, module, callbacks)
    if config.log_compiles:
        _log_compile(name, in_avals, device, time.perf_counter() - start, cached)
    return Executable(loaded, device, in_avals, closed.out_avals, text, donated)
