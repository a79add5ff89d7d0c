"""One XLA program over several devices: compile a per-device Jaxpr for N replicas, run it.

``pmap`` stages its function for one device's slice of the data; that Jaxpr is lowered once
(collectives over the mapped axis name become ``all_reduce``/``all_gather``/... over every
replica, see ``axis_env``) and compiled with ``num_replicas=N``: XLA runs the same program on
each device of ``devices``, and one ``execute_sharded`` call takes one multi-device buffer per
argument and returns one per output (``lowering/sharding.py``'s ``ShardedArray``).

XLA:CPU runs each replica as a task of one thread pool; a replica that waits in a collective
holds its thread, so several multi-device launches in flight at once can leave no thread for
the replicas they wait for. The executable therefore waits for its previous launch before the
next one (``_last``): launches stay asynchronous with respect to Python, one deep.
"""
import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.core.avals import ShapedArray
from funcgrad.lowering import backend, mlir
from funcgrad.lowering.array import _BufferAval
from funcgrad.lowering.executable import _option_overrides
from funcgrad.lowering.jaxlib_compat import array_result_handler as _result_handler
from funcgrad.lowering.sharding import ShardedArray, mapped_sharding

_last = [None]     # the outputs of the latest multi-device launch (see the module docstring)


def wait_for_previous_launch():
    prev = _last[0]
    if prev is not None:
        _last[0] = None
        for buf in prev:
            buf.block_until_ready()


def global_aval(aval, axis, n):
    """The aval of the whole array whose per-device slice is ``aval`` (size 1 along ``axis``);
    ``axis`` None: replicated, the same aval."""
    if axis is None:
        return aval
    shape = list(aval.shape)
    shape[axis] = n
    return ShapedArray(tuple(shape), aval.dtype, aval.weak_type)


class ReplicatedExecutable:
    """``closed`` compiled to run once on each of ``devices``. ``in_axes``/``out_axes``: per
    flat input (its consts first, as leading arguments) and output, the axis along which it is split over the devices (size 1 in
    ``closed``'s avals) or None (replicated)."""

    __slots__ = ("loaded", "devices", "in_shardings", "out_avals", "_handlers", "text")

    def __init__(self, closed, devices, in_axes, out_axes, axis_env, name="pmap", donated=()):
        devices = tuple(devices)
        n = len(devices)
        callbacks = []
        module, ctx = mlir.lower_closed_jaxpr(
            closed, name=name, platform=backend.platform_of(devices[0]), donated=donated,
            axis_env=tuple(axis_env), host_callbacks=callbacks)
        options = xc.CompileOptions()
        options.num_replicas = n
        options.num_partitions = 1
        options.device_assignment = xc.DeviceAssignment.create(
            np.array([[d.id] for d in devices]))
        overrides = _option_overrides(devices[0])
        if overrides:
            options.env_option_overrides = overrides
        device_list = _jax.DeviceList(devices)
        with ctx:
            self.text = str(module)
            if callbacks:
                self.loaded = devices[0].client.compile_and_load(
                    module, device_list, compile_options=options, host_callbacks=callbacks)
            else:
                self.loaded = devices[0].client.compile_and_load(self.text, device_list, options)
        self.devices = devices
        in_avals = [v.aval for v in closed.jaxpr.constvars] + list(closed.in_avals)
        self.in_shardings = [mapped_sharding(devices, a.ndim, ax)
                             for a, ax in zip(in_avals, in_axes)]
        self.out_avals = [global_aval(a, ax, n) for a, ax in zip(closed.out_avals, out_axes)]
        self._handlers = [_result_handler(_BufferAval(a), mapped_sharding(devices, a.ndim, ax))
                          for a, ax in zip(self.out_avals, out_axes)]

    def __call__(self, bufs):
        """Run on multi-device buffers (one per input, laid out as ``in_shardings``); returns
        ShardedArrays."""
        wait_for_previous_launch()
        outs = self.loaded.execute_sharded(bufs).consume_with_handlers(self._handlers)
        _last[0] = outs
        return [ShardedArray(a, b) for a, b in zip(self.out_avals, outs)]

    def as_text(self):
        """The optimized HLO that XLA compiled."""
        return self.loaded.hlo_modules()[0].to_string()
