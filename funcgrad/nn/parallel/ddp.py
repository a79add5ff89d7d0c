"""``DistributedDataParallel``: PyTorch's data-parallel wrapper, as one program over every
process's devices.

At construction the wrapped module's parameters and buffers take process 0's values (one
broadcast per dtype). Calling the wrapper splits each array input along axis 0 over this
process's devices and runs the module's forward as a ``pmap`` over the devices of *all*
processes (``funcgrad.devices()``, each process feeding its own devices), so that under
``grad`` the parameters' cotangents are summed across every device by the pmap's transpose:
the all-reduce of PyTorch's DDP, inside the compiled step. The sum is scaled by one over the
number of processes, so each process's gradient is the mean over processes of the gradients of
their own losses, as PyTorch's. The usual funcgrad step works unchanged with the wrapper in
place of the model::

    ddp = DistributedDataParallel(model)
    opt = optim.SGD(ddp.parameters(), lr=0.1)

    @funcgrad.jit
    def train_step(model, opt, x, y):
        loss, grads = funcgrad.value_and_grad(lambda m: F.cross_entropy(m(x), y))(model)
        opt.step(grads)
        return loss                     # this process's loss, as in PyTorch

With ``broadcast_buffers`` (the default) every forward starts from process 0's buffers
(BatchNorm running statistics), taken inside the program. ``no_sync()`` runs the forward over
this process's devices only: its gradients are this process's own.
"""
import contextlib
import functools
import itertools

import numpy as np

from funcgrad import lax, tree_util
from funcgrad import numpy as jnp
from funcgrad.core import dtypes
from funcgrad.distributed import collectives
from funcgrad.lowering import backend
from funcgrad.lowering.pmap_primitive import resolve_devices
from funcgrad.nn import module as module_lib
from funcgrad.nn.module import Module
from funcgrad.transforms.custom_derivatives import custom_vjp
from funcgrad.transforms.pmap import pmap

AXIS = "ddp"      # the name of the device axis inside the wrapped forward
_no_sync_versions = itertools.count(-(1 << 20), -(1 << 20))   # see _set_sync


@functools.lru_cache(maxsize=None)
def _gradient_scale(scale):
    """An identity on a list of arrays whose cotangents are multiplied by ``scale``."""
    @custom_vjp
    def scaled(leaves):
        return leaves

    def bwd(_, cts):
        return ([None if c is None else c * np.asarray(scale, c.dtype) for c in cts],)

    scaled.defvjp(lambda leaves: (leaves, None), bwd)
    return scaled


def _from_first_device(x):
    """``x`` of the axis's first member, on every member (a broadcast inside the program)."""
    return lax.psum(jnp.where(lax.axis_index(AXIS) == 0, x, jnp.zeros_like(x)), AXIS)


class _Plan:
    """What a wrapper and the copies that transformations make of it share: the devices of
    the synchronized and unsynchronized forwards, the process count, the compiled pmaps."""

    def __init__(self, everyone, mine):
        self.devices = {True: tuple(everyone), False: tuple(mine)}
        self.processes = len({d.process_index for d in everyone})
        self.local_count = len(mine)
        self.programs = {}

    def __deepcopy__(self, memo):
        return self


def _local_device_list(device_ids, fn):
    local = backend.local_devices()
    if device_ids is None:
        return list(local)
    out = []
    for d in device_ids:
        if isinstance(d, (int, np.integer)):
            if not 0 <= d < len(local):
                raise ValueError(f"{fn}: device_ids entry {d} is not the index of one of this "
                                 f"process's {len(local)} devices")
            d = local[int(d)]
        elif d not in local:
            raise ValueError(f"{fn}: device_ids entry {d!r} is not a device of this process "
                             f"({local})")
        out.append(d)
    if not out or len(set(out)) != len(out):
        raise ValueError(f"{fn}: device_ids must name one or more distinct devices, got "
                         f"{device_ids!r}")
    return out


def _broadcast_state(module):
    """Give ``module``'s parameters and buffers process 0's values: one broadcast per dtype
    of the concatenated leaves."""
    named = list(module.named_parameters()) + list(module.named_buffers())
    groups = {}
    for name, value in named:
        groups.setdefault(np.dtype(value.dtype), []).append((name, value))
    for dtype, items in sorted(groups.items(), key=lambda kv: kv[0].str):
        flat = np.concatenate([np.asarray(v).reshape(-1) for _, v in items]) if items else None
        flat = np.asarray(collectives.broadcast_one_to_all(flat))
        at = 0
        for name, value in items:
            size = int(np.prod(value.shape))
            _assign(module, name, flat[at:at + size].reshape(value.shape).astype(dtype))
            at += size


def _assign(module, name, value):
    owner_name, _, leaf = name.rpartition(".")
    owner = module.get_submodule(owner_name) if owner_name else module
    if leaf in owner._parameters:
        owner._parameters[leaf].data = jnp.asarray(value)
    else:
        owner.update_buffer(leaf, jnp.asarray(value))


class DistributedDataParallel(Module):
    """Data parallelism over every device of every process of the run, as PyTorch's
    ``torch.nn.parallel.DistributedDataParallel``.

    ``module``: the model (its parameters and buffers take process 0's values now, unless
    ``init_sync=False``). ``device_ids``: this process's devices to use (indices into
    ``funcgrad.local_devices()`` or devices; default all of them; every process must use the
    same number). ``broadcast_buffers``: start each forward from process 0's buffers.
    ``dim``: the input axis that is split (0). ``find_unused_parameters``,
    ``gradient_as_bucket_view``, ``static_graph``, ``bucket_cap_mb`` and ``output_device`` are
    accepted for PyTorch code and change nothing: the gradient of an unused parameter is zero
    and the reduction is one program. The wrapped model is ``.module``; parameters and
    ``state_dict`` keys are prefixed ``module.`` as in PyTorch.

    Example:
        >>> from funcgrad.nn.parallel import DistributedDataParallel
        >>> _ = funcgrad.manual_seed(0)
        >>> model = nn.Linear(3, 1)
        >>> ddp = DistributedDataParallel(model)
        >>> x = jnp.ones((4 * funcgrad.local_device_count(), 3))
        >>> grads = funcgrad.grad(lambda m: m(x).mean())(ddp)
        >>> np.allclose(np.asarray(grads.module.weight), 1.0), ddp.module is model
        (True, True)
        >>> list(ddp.state_dict())
        ['module.weight', 'module.bias']
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, init_sync=True, process_group=None, bucket_cap_mb=None,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        fn = "DistributedDataParallel"
        if not isinstance(module, Module):
            raise TypeError(f"{fn}: expected a funcgrad.nn.Module, got {type(module).__name__}")
        if dim != 0:
            raise ValueError(f"{fn}: only dim=0 (the batch axis) is split, got dim={dim}")
        if process_group is not None:
            raise ValueError(f"{fn}: process groups are not supported; the run's processes "
                             f"form the one group (got process_group={process_group!r})")
        if not module.parameters():
            raise RuntimeError(f"{fn}: the module has no parameters to train")
        self.module = module
        self.device_ids = None if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.static_graph = bool(static_graph)
        mine = _local_device_list(device_ids, fn)
        ids = np.asarray(collectives.process_allgather(np.array([d.id for d in mine],
                                                                np.int32)))
        if ids.ndim != 2:
            raise ValueError(f"{fn}: every process must use the same number of devices "
                             f"(device_ids)")
        by_id = {d.id: d for d in backend.devices()}
        if device_ids is None:
            everyone = resolve_devices(None, len(mine), fn)
        else:
            everyone = tuple(by_id[int(i)] for i in ids.reshape(-1))
        self.__dict__["_ddp"] = _Plan(everyone, mine)
        self.__dict__["require_backward_grad_sync"] = True
        if init_sync:
            _broadcast_state(module)

    @property
    def devices(self):
        """The devices the forward runs on: every process's (this process's alone inside
        ``no_sync``)."""
        return self._ddp.devices[self.require_backward_grad_sync]

    @contextlib.contextmanager
    def no_sync(self):
        """Inside, the forward runs over this process's devices only, so gradients are not
        averaged across processes (accumulate them, then run a synchronized step).

        Example:
            >>> from funcgrad.nn.parallel import DistributedDataParallel
            >>> ddp = DistributedDataParallel(nn.Linear(2, 1))
            >>> with ddp.no_sync():
            ...     ddp.require_backward_grad_sync
            False
            >>> ddp.require_backward_grad_sync
            True
        """
        old = self.require_backward_grad_sync
        self._set_sync(False)
        try:
            yield
        finally:
            self._set_sync(old)

    def _set_sync(self, sync):
        # The flag changes the traced program, so it must change the module's pytree key; a
        # plain attribute write would give a new version on every switch (and a new trace of
        # every jitted step). The unsynchronized state takes a version of its own per version
        # of the synchronized state instead (negative, far from any other), so switching back
        # and forth reuses the two programs; a change made inside ``no_sync`` gives the
        # synchronized state a new version when it returns.
        d = self.__dict__
        if d["require_backward_grad_sync"] == sync:
            return
        d["require_backward_grad_sync"] = sync
        if not sync:
            twins = d.setdefault("_ddp_twins", {})
            version = d["_version"]
            if version not in twins:
                twins[version] = next(_no_sync_versions)
            d["_ddp_left"] = (version, twins[version])
            d["_version"] = twins[version]
        else:
            version, twin = d["_ddp_left"]
            changed = d["_version"] != twin
            d["_version"] = version
            if changed:
                self._changed()
        d["_aux"] = None
        module_lib._epoch[0] += 1

    def _forward_program(self, sync, n_args, layout):
        """The pmap of the module's forward for one leaf ``layout`` (see ``_pack``)."""
        plan = self._ddp
        key = (sync, n_args, layout)
        program = plan.programs.get(key)
        if program is None:
            broadcast = self.broadcast_buffers and sync

            def per_device(packed, others, *xs):
                module = _unpack(layout, packed, others)
                if broadcast:
                    for sub in module.modules():
                        bufs = sub.__dict__["_buffers"]
                        for name, b in bufs.items():
                            if b is not None and b.dtype != dtypes.bool_:
                                bufs[name] = _from_first_device(b)
                return module(*xs)

            program = plan.programs[key] = pmap(
                per_device, axis_name=AXIS, in_axes=(None, None) + (0,) * n_args,
                devices=plan.devices[sync])
        return program

    def forward(self, *inputs, **kwargs):
        fn = "DistributedDataParallel"
        if kwargs:
            raise TypeError(f"{fn}: pass the module's inputs by position (got keyword "
                            f"arguments {sorted(kwargs)})")
        sync = self.require_backward_grad_sync
        plan = self._ddp
        n = plan.local_count
        if len(plan.devices[sync]) == 1:
            return self.module(*inputs)
        split = []
        for i, x in enumerate(inputs):
            shape = getattr(x, "shape", None)
            if shape is None or len(shape) == 0 or shape[0] % n:
                raise ValueError(f"{fn}: input {i} of shape {shape} must be an array whose "
                                 f"axis 0 (this process's batch) splits evenly over its {n} "
                                 f"devices")
            split.append(x.reshape((n, shape[0] // n) + tuple(shape[1:])))
        layout, packed, others = _pack(self.module)
        if sync and plan.processes > 1:
            packed = _gradient_scale(1.0 / plan.processes)(packed)
        out = self._forward_program(sync, len(split), layout)(packed, others, *split)
        return tree_util.tree_map(
            lambda o: o.reshape((-1,) + tuple(o.shape[2:])) if o.ndim >= 2 else o, out)


def _pack(module):
    """``(layout, packed, others)``: the module's floating-point leaves concatenated into one
    flat vector per dtype (``packed``), its other leaves (``others``), and the hashable
    ``layout`` that ``_unpack`` rebuilds the module from. Under ``grad`` the pmap's transpose
    then sums one cotangent per dtype over the devices: one all-reduce of every gradient, as
    PyTorch's buckets, instead of one per parameter (each a round trip between processes)."""
    leaves, tree = tree_util.tree_flatten(module)
    kinds = sorted({np.dtype(v.dtype) for v in leaves if dtypes.is_inexact(v.dtype)},
                   key=lambda d: d.str)
    slots, others = [], []
    for v in leaves:
        dtype = np.dtype(v.dtype)
        if dtype in kinds:
            slots.append((kinds.index(dtype), tuple(v.shape)))
        else:
            slots.append((None, len(others)))
            others.append(v)
    packed = [jnp.concatenate([v.reshape(-1) for v in leaves
                               if np.dtype(v.dtype) == dtype]) for dtype in kinds]
    return (tree, tuple(slots)), packed, others


def _unpack(layout, packed, others):
    tree, slots = layout
    at = [0] * len(packed)
    leaves = []
    for group, where in slots:
        if group is None:
            leaves.append(others[where])
            continue
        size = int(np.prod(where))
        leaves.append(packed[group][at[group]:at[group] + size].reshape(where))
        at[group] += size
    return tree.unflatten(leaves)


__all__ = ["DistributedDataParallel"]
