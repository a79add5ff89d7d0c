"""``pmap``: map a function over an axis with one slice per device, as one XLA program.

``pmap(f)(x)`` stages ``f`` once for one device's slice (the mapped axis removed), lowers it
with the axis name bound to the devices (collectives become StableHLO collectives) and compiles
it for ``num_replicas = len(devices)`` (``funcgrad.lowering.spmd``); each call then splits the
arguments over the devices (an Array already split that way is used in place) and runs the
program once on all of them. Outputs are sharded ``funcgrad.Array``s.

In a multi-process run (``funcgrad.distributed.initialize``) the program spans the devices of
every process: each process passes its own entries (one per device of its own along the
mapped axis) and gets back its own part of the outputs, as JAX's ``pmap`` on a pod.

Called under another transformation (``grad``, ``jvp``, ``vmap``, ``jit``) ``pmap`` binds the
``pmap`` primitive (``funcgrad.lowering.pmap_primitive``), whose rules keep the transformed
computation a program over the same devices (see docs/parallel.md).

Example:
    >>> import funcgrad, funcgrad.numpy as jnp
    >>> n = funcgrad.local_device_count()     # 4 with FUNCGRAD_CPU_DEVICES=4
    >>> f = funcgrad.pmap(lambda x: x / funcgrad.lax.psum(x, "i"), axis_name="i")
    >>> y = f(jnp.arange(1.0, n + 1))           # one entry per device
    >>> float(y.sum()), y.shape == (n,), len(y.addressable_shards) == n
    (1.0, True, True)
"""
import functools

from funcgrad import tree_util
from funcgrad.core import interpreters, mutable_state
from funcgrad.core.avals import ShapedArray
from funcgrad.core.interpreters import Tracer
from funcgrad.core.staging import trace_to_jaxpr
from funcgrad.core.values import aval_of, is_arraylike
from funcgrad.lowering import backend
from funcgrad.lowering.pmap_primitive import (as_operands, bound_axis, executable_for, pmap_p,
                                              resolve_devices)
from funcgrad.lowering.sharding import ShardedArray, shard_value
from funcgrad.transforms.batching import _arg_names, _check_axes_spec, _leaf_axes, _leaf_labels


class _AnonymousAxis:
    def __repr__(self):
        return "<pmap axis>"


class PmapFunction:
    """What ``pmap`` returns: call it like the function; compiled programs are cached per
    (argument structure, shapes and dtypes, static arguments, devices)."""

    def __init__(self, fun, axis_name, in_axes, out_axes, static_argnums, devices, backend_name,
                 axis_size, donate_argnums):
        self.fun = fun
        self.axis_name = axis_name if axis_name is not None else _AnonymousAxis()
        self.in_axes, self.out_axes = in_axes, out_axes
        self.static_argnums = tuple(static_argnums)
        self.devices = tuple(devices) if devices is not None else None
        self.backend = backend_name
        self.axis_size = axis_size
        self.donate_argnums = tuple(donate_argnums)
        self.name = getattr(fun, "__name__", type(fun).__name__)
        self._traces = {}   # (treedef, avals, in_axes, static args, size) -> staged body
        # (that key, devices) -> (executable, out tree, const buffers, state writeback)
        self._cache = {}
        # (treedef, (aval key, sharding) per leaf) -> the same entry, for eager calls whose
        # arguments are all ShardedArrays already laid out as the program takes them
        self._fast = {}
        functools.update_wrapper(self, fun)

    # --- argument handling ----------------------------------------------------------------
    def _split_static(self, args):
        n = len(args)
        static = sorted({i % n for i in self.static_argnums if -n <= i < n})
        dyn = [a for i, a in enumerate(args) if i not in static]
        return static, tuple(args[i] for i in static), dyn

    def _leaf_in_axes(self, dyn_args, static_idx, kwargs):
        # in_axes may name every positional argument (static ones included) or only the others
        in_axes = self.in_axes
        if isinstance(in_axes, list):
            in_axes = tuple(in_axes)
        if isinstance(in_axes, tuple):
            if static_idx and len(in_axes) == len(dyn_args) + len(static_idx):
                in_axes = tuple(ax for i, ax in enumerate(in_axes) if i not in static_idx)
            if len(in_axes) != len(dyn_args):
                raise ValueError(f"pmap({self.name}): in_axes has {len(in_axes)} entries but "
                                 f"the function was called with {len(dyn_args)} mapped "
                                 f"positional arguments")
            per_arg = in_axes
        else:
            per_arg = (in_axes,) * len(dyn_args)
        axes = []
        for i, (arg, spec) in enumerate(zip(dyn_args, per_arg)):
            axes.extend(_leaf_axes(spec, arg, f"in_axes[{i}]"))
        axes.extend([0] * len(tree_util.tree_leaves(kwargs)))
        return axes

    # --- call -------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if not kwargs and not self.static_argnums and interpreters.is_eager():
            leaves, treedef = tree_util.tree_flatten(args)
            fast_key = _fast_key(treedef, leaves)
            if fast_key is not None:
                entry = self._fast.get(fast_key)
                if entry is not None:
                    exe, out_tree, const_bufs, writeback = entry
                    return _finish(exe(const_bufs + [x._buf for x in leaves]), out_tree,
                                   writeback)
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        static_idx, static_vals, dyn = self._split_static(args)
        leaves, treedef = tree_util.tree_flatten((tuple(dyn), kwargs))
        axes = self._leaf_in_axes(dyn, static_idx, kwargs)
        def labels():   # argument names with pytree paths, for error messages only
            names = _arg_names(self.fun, len(args))
            out = []
            for k, arg in zip([i for i in range(len(args)) if i not in static_idx], dyn):
                out.extend(_leaf_labels(names[k], arg))
            return out + _leaf_labels("kwargs", kwargs)

        sizes, canon = [], []
        for k, (leaf, d) in enumerate(zip(leaves, axes)):
            if not is_arraylike(leaf):
                raise TypeError(f"pmap({self.name}): argument {labels()[k]} of type "
                                f"{type(leaf).__name__} is not an array; pass non-array "
                                f"arguments through static_broadcasted_argnums")
            if d is None:
                canon.append(None)
                continue
            aval = aval_of(leaf)
            if not -aval.ndim <= d < aval.ndim:
                raise ValueError(f"pmap({self.name}): in_axes {d} is out of range for argument "
                                 f"{labels()[k]} of shape {aval.shape}")
            canon.append(d % aval.ndim)
            sizes.append((k, d % aval.ndim, aval.shape[d]))
        if self.axis_size is not None:
            size = self.axis_size
        elif sizes:
            size = sizes[0][2]
        else:
            raise ValueError(f"pmap({self.name}): no argument is mapped (all in_axes are None) "
                             f"and no axis_size was given")
        bad = [(k, d, s) for k, d, s in sizes if s != size]
        if bad:
            labs = labels()
            detail = ", ".join(f"{labs[k]} has shape {aval_of(leaves[k]).shape} (size {s} along "
                               f"axis {d})" for k, d, s in sizes)
            raise ValueError(f"pmap({self.name}): every mapped axis must have the same size, one "
                             f"entry per device: {detail}")
        devices = self.devices
        if devices is None and (self.backend is not None or backend.distributed_runtime()):
            # in a multi-process run the devices (every process's) are known before tracing:
            # collectives in the body span all of them
            devices = resolve_devices(None, size, self.name, self.backend)
        tkey = (treedef, tuple(aval_of(leaf) for leaf in leaves), tuple(canon),
                _hashable(static_vals), size)
        traced = self._traces.get(tkey)
        if traced is None:
            extent = len(devices) if devices is not None else size
            traced = self._trace(treedef, tkey[1], canon, static_idx, static_vals, extent)
            if not any(isinstance(c, Tracer) for c in traced[1]):
                self._traces[tkey] = traced      # not cached: it closed over another's tracers
        body, consts, out_tree, out_axes, writeback = traced
        in_axes = (None,) * len(consts) + tuple(canon)
        if not interpreters.is_eager() or any(isinstance(x, Tracer) for x in leaves):
            # under another transformation: one pmap equation it transforms
            outs = pmap_p.bind(*consts, *leaves, jaxpr=body, axis_name=self.axis_name,
                               axis_size=size, devices=devices, in_axes=in_axes,
                               out_axes=out_axes, name=self.name,
                               donated=(False,) * len(in_axes))
            return _finish(outs, out_tree, writeback)
        devices = resolve_devices(devices, size, self.name)
        key = (tkey, devices)
        entry = self._cache.get(key)
        if entry is None:
            donated = (False,) * len(consts) + tuple(self._donated(static_idx, treedef, leaves))
            exe, const_arrays = executable_for(body, devices, in_axes, out_axes,
                                               self.axis_name, self.name, donated)
            const_bufs = [c._buf for c in const_arrays] + [
                shard_value(c, devices, None, f"pmap({self.name})")._buf for c in consts]
            entry = self._cache[key] = (exe, out_tree, const_bufs, writeback)
        exe, out_tree, const_bufs, writeback = entry
        bufs = list(const_bufs)
        for leaf, d in zip(leaves, canon):
            bufs.append(shard_value(leaf, devices, d, f"pmap({self.name})")._buf)
        if not kwargs and not static_idx:
            flat, tree = tree_util.tree_flatten(args)
            fast_key = _fast_key(tree, flat)
            n_lead = len(bufs) - len(leaves)
            if fast_key is not None and all(
                    x._buf._sharding is s for x, s in zip(flat, exe.in_shardings[n_lead:])):
                self._fast[fast_key] = entry
        return _finish(exe(bufs), out_tree, writeback)

    def _donated(self, static_idx, treedef, leaves):
        if not self.donate_argnums:
            return [False] * len(leaves)
        return _donated_leaves(self.donate_argnums, static_idx, treedef, len(leaves))

    def _trace(self, treedef, avals, canon, static_idx, static_vals, n):
        """Stage ``fun`` for one device's slice: (body without consts, consts, output tree,
        out_axes per output leaf, writeback). Object state that ``fun`` writes (BatchNorm
        statistics of a module argument) leaves as extra, replicated outputs: device 0's value
        is written back (the same on every device when computed with collectives)."""
        in_avals = [a if d is None else ShapedArray(a.shape[:d] + a.shape[d + 1:], a.dtype,
                                                    a.weak_type)
                    for a, d in zip(avals, canon)]
        found = {}
        fun, out_axes_spec = self.fun, self.out_axes

        def per_device(*vals):
            dyn, kwargs = treedef.unflatten(vals)
            it = iter(dyn)
            full = [static_vals[static_idx.index(i)] if i in static_idx else next(it)
                    for i in range(len(dyn) + len(static_idx))]
            log = mutable_state.StateLog()
            with mutable_state.collecting(log):
                out = fun(*full, **kwargs)
            out_leaves, out_tree = tree_util.tree_flatten(out)
            out_axes = _leaf_axes(out_axes_spec, out, "out_axes")
            for i, (o, ax) in enumerate(zip(out_leaves, out_axes)):
                if not is_arraylike(o):
                    raise TypeError(f"pmap({self.name}): output {i} of type "
                                    f"{type(o).__name__} is not an array")
                if ax is not None:
                    rank = aval_of(o).ndim + 1
                    if not -rank <= ax < rank:
                        raise ValueError(f"pmap({self.name}): out_axes {ax} is out of range "
                                         f"for output {i} of rank {rank}")
                    out_axes[i] = ax % rank
            writes = log.entries()
            found["tree"], found["axes"] = out_tree, tuple(out_axes) + (None,) * len(writes)
            found["writeback"] = tuple((target, key, setter) for target, key, _, setter in writes)
            return out_leaves + [value for _, _, value, _ in writes]

        with bound_axis(self.axis_name, n):
            closed, _ = trace_to_jaxpr(per_device, in_avals, debug_name=self.name)
        body, consts = as_operands(closed)
        return body, consts, found["tree"], found["axes"], found["writeback"]


def _finish(outs, out_tree, writeback):
    """The function's outputs; the trailing state outputs go to their objects."""
    if writeback:
        n = len(outs) - len(writeback)
        for (target, key, setter), value in zip(writeback, outs[n:]):
            mutable_state.write(target, key, value, setter)
        outs = outs[:n]
    return out_tree.unflatten(outs)


def _fast_key(treedef, leaves):
    key = [treedef]
    for x in leaves:
        if type(x) is not ShardedArray:
            return None
        key.append(x.aval.key)
        key.append(x._buf._sharding)
    return tuple(key)


def _donated_leaves(donate_argnums, static_idx, treedef, n_leaves):
    # one flag per flat leaf of the dynamic positional arguments (keywords are never donated)
    dyn_args, kwargs = treedef.unflatten([False] * n_leaves)
    flags = []
    positions = [i for i in range(len(dyn_args) + len(static_idx)) if i not in static_idx]
    for pos, arg in zip(positions, dyn_args):
        flags.extend([pos in donate_argnums] * len(tree_util.tree_leaves(arg)))
    flags.extend([False] * len(tree_util.tree_leaves(kwargs)))
    return flags


def _hashable(values):
    try:
        hash(values)
        return values
    except TypeError:
        return tuple(id(v) for v in values)


def pmap(fun=None, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=()):
    """Map ``fun`` over an axis of its arguments with one slice per device, compiled once to a
    single XLA program over the devices. ``in_axes``/``out_axes`` as in ``vmap`` (None:
    broadcast an argument / return a replicated output); collectives (``lax.psum(x,
    axis_name)``...) inside ``fun`` communicate across the devices.

    Example:
        >>> n = funcgrad.local_device_count()
        >>> step = funcgrad.pmap(lambda x: x - lax.pmean(x, "d"), axis_name="d")
        >>> float(step(np.arange(float(n))).sum())      # the mean over the devices is removed
        0.0
        >>> grads = funcgrad.grad(lambda x: step(x * x).sum())(jnp.ones(n))   # a pmap too
        >>> float(grads.sum())
        0.0
    """
    if fun is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes, out_axes=out_axes,
                                 static_broadcasted_argnums=static_broadcasted_argnums,
                                 devices=devices, backend=backend, axis_size=axis_size,
                                 donate_argnums=donate_argnums)
    if not callable(fun):
        raise TypeError(f"pmap: expected a callable, got {fun!r}")
    if isinstance(static_broadcasted_argnums, int):
        static_broadcasted_argnums = (static_broadcasted_argnums,)
    if isinstance(donate_argnums, int):
        donate_argnums = (donate_argnums,)
    _check_axes_spec(in_axes if not isinstance(in_axes, list) else tuple(in_axes), "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    return PmapFunction(fun, axis_name, in_axes, out_axes, static_broadcasted_argnums, devices,
                        backend, axis_size, donate_argnums)


def local_device_count(backend_name=None):
    """The number of devices this process drives (``FUNCGRAD_CPU_DEVICES`` host devices on the
    CPU).

    Example:
        >>> funcgrad.local_device_count() == len(funcgrad.local_devices())
        True
    """
    return len(backend.local_devices(backend_name))


def process_index(backend_name=None):
    """This process's index among the processes of a multi-process run (0: one process; see
    ``funcgrad.distributed.initialize``).

    Example:
        >>> funcgrad.process_index()
        0
    """
    return backend.process_index(backend_name)


def process_count(backend_name=None):
    """The number of processes in the run (1 unless ``funcgrad.distributed.initialize`` joined
    this process to others).

    Example:
        >>> funcgrad.process_count()
        1
    """
    return backend.process_count(backend_name)


__all__ = ["pmap", "PmapFunction", "local_device_count", "process_index", "process_count",
           "ShardedArray"]
