"""Compiled executables: compile a StableHLO module for one device and run it fast.

The per-call path is ``execute_sharded`` + ``consume_with_handlers`` with result handlers made
once per executable (see JAXLIB_NOTES.md): a few microseconds for a small function.
"""
import os

import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.lax.callbacks import reraise_host_error
from funcgrad.lowering import backend, mlir, platforms
from funcgrad.lowering.array import Array, _BufferAval, put_numpy, sharding_for
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
        return self.loaded.cost_analysis()

    def as_text(self):
        """The optimized HLO that XLA compiled."""
        return self.loaded.hlo_modules()[0].to_string()

    def memory_analysis(self):
        return self.loaded.get_compiled_memory_stats()


def to_buffer(x, device, aval=None):
    """The device buffer for argument ``x`` on ``device`` (copying host values there)."""
    if type(x) is Array:
        buf = x._buf
        if buf._sharding._device is not device:
            if x.device != device:
                return put_numpy(x._value(), device, x.aval)._buf
        return buf
    return put_numpy(np.asarray(x, aval.dtype) if aval is not None else x, device, aval)._buf


_rejected_options = set()     # options this jaxlib does not know (then compiled without them)


def _option_overrides(device):
    """The compile options of ``device``'s platform (``lowering/cpu.py``...) that XLA_FLAGS
    does not name and this jaxlib has not rejected."""
    flags = os.environ.get("XLA_FLAGS", "")
    options = platforms.get(device.platform).compile_options
    return [(k, v) for k, v in options.items() if k not in flags and k not in _rejected_options]


def compile_module(module_text, device, module=None, host_callbacks=()):
    """Compile StableHLO text for ``device``. With ``host_callbacks`` (Python functions that the
    module's callback custom calls name by index), the ``module`` object itself is compiled,
    inside its MLIR context, since only that entry point takes callbacks."""
    options = xc.CompileOptions()
    # Without an explicit assignment XLA runs replica 0 on the client's first device, whatever
    # device list the executable was loaded for.
    options.device_assignment = xc.DeviceAssignment.create(np.array([[device.id]]))
    overrides = _option_overrides(device)
    if overrides:
        options.env_option_overrides = overrides
    devices = _jax.DeviceList((device,))
    try:
        if host_callbacks:
            return device.client.compile_and_load(module, devices, compile_options=options,
                                                  host_callbacks=list(host_callbacks))
        return device.client.compile_and_load(module_text, devices, options)
    except _jax.JaxRuntimeError as exc:
        unknown = [k for k, _ in overrides if k in str(exc)]
        if not unknown:
            raise
        _rejected_options.update(unknown)      # an older or newer jaxlib: compile without
        return compile_module(module_text, device, module, host_callbacks)


def compile_closed_jaxpr(closed, device, name="main", donated=()):
    """Lower and compile ``closed`` for ``device``; consts become leading arguments."""
    callbacks = []
    module, ctx = mlir.lower_closed_jaxpr(closed, name=name, platform=backend.platform_of(device),
                                          donated=donated, host_callbacks=callbacks)
    with ctx:
        text = str(module)
        loaded = compile_module(text, device, module, callbacks)
    in_avals = [v.aval for v in closed.jaxpr.constvars] + closed.in_avals
    return Executable(loaded, device, in_avals, closed.out_avals, text, donated)
