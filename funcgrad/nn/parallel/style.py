"""Tensor-parallel styles, as ``torch.distributed.tensor.parallel``'s: each places a
module's parameters over one mesh axis (``device_put`` with a ``NamedSharding``) and, through
forward hooks, constrains its input and output layouts; XLA's SPMD partitioner then splits
the jitted computation and inserts the collectives (docs/parallel.md, "Tensor and fully
sharded parallelism").

Example:
    >>> from funcgrad.nn.parallel import ColwiseParallel, Shard
    >>> ColwiseParallel(output_layouts=Shard(-1))
    ColwiseParallel(input_layouts=Replicate(), output_layouts=Shard(dim=-1), use_local_output=True)
"""
from funcgrad.nn.embedding import Embedding
from funcgrad.nn.linear import Linear
from funcgrad.nn.parallel.placement import Placement, Replicate, Shard, constrain
from funcgrad.sharding import NamedSharding, PartitionSpec


class ParallelStyle:
    """Base class: ``_apply(module, mesh, axis, where)`` places ``module``'s parameters over
    mesh axis ``axis`` and installs its layout hooks."""

    def _apply(self, module, mesh, axis, where):
        raise TypeError(f"{where}: {type(self).__name__} is an abstract ParallelStyle; use "
                        f"ColwiseParallel, RowwiseParallel, SequenceParallel or "
                        f"PrepareModuleInput/PrepareModuleOutput")

    _field_names = ()

    def __repr__(self):
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._field_names)
        return f"{type(self).__name__}({fields})"


def place_parameter(module, name, mesh, spec, where):
    """Put ``module``'s parameter ``name`` (if it has one) on ``mesh`` as ``spec`` says."""
    from funcgrad.lowering.array import device_put
    box = module._parameters.get(name)
    if box is None:
        return
    try:
        box.data = device_put(box.data, NamedSharding(mesh, spec))
    except ValueError as e:
        raise ValueError(f"{where}: cannot place parameter {name!r} of {type(module).__name__} "
                         f"(shape {tuple(box.data.shape)}) on {mesh!r} as {spec}: {e}") from None


def _one(layouts, default):
    if layouts is None:
        return default
    if isinstance(layouts, (tuple, list)):
        if len(layouts) != 1:
            raise ValueError(f"expected one layout, got {layouts!r}")
        layouts = layouts[0]
    return layouts


def _lay_out(x, layouts, mesh, axis, where):
    """``x`` constrained to each of ``layouts`` in turn (Nones skipped): how it arrives, then
    how it is wanted."""
    for p in layouts:
        if p is not None:
            x = constrain(x, mesh, axis, p, where)
    return x


def _constrain_first_input(module, mesh, axis, layouts, where):
    """A pre-hook laying ``args[0]`` out as each of ``layouts`` in turn."""
    def hook(mod, args):
        if not args:
            raise TypeError(f"{where}: {type(mod).__name__} was called without a positional "
                            f"input; the parallel style lays out its first argument")
        return (_lay_out(args[0], layouts, mesh, axis, where),) + tuple(args[1:])
    module.register_forward_pre_hook(hook)


def _constrain_output(module, mesh, axis, layout, where):
    def hook(mod, args, out):
        return constrain(out, mesh, axis, layout, where)
    module.register_forward_hook(hook)


class _LinearStyle(ParallelStyle):
    """Colwise and rowwise: a parameter layout per supported module type, default layouts."""

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = _one(input_layouts, self._default_input)
        self.output_layouts = _one(output_layouts, self._default_output)
        for p in (self.input_layouts, self.output_layouts):
            if not isinstance(p, Placement):
                raise TypeError(f"{type(self).__name__}: layouts must be Shard(dim) or "
                                f"Replicate(), got {p!r}")
        self.use_local_output = bool(use_local_output)

    _field_names = ("input_layouts", "output_layouts", "use_local_output")

    def _apply(self, module, mesh, axis, where):
        kind = Linear if isinstance(module, Linear) else Embedding if isinstance(
            module, Embedding) else None
        if kind is None:
            raise TypeError(f"{where}: {type(self).__name__} applies to nn.Linear and "
                            f"nn.Embedding, got {type(module).__name__}")
        for name, spec in self._parameter_specs(kind, axis).items():
            place_parameter(module, name, mesh, spec, where)
        desired = self._desired_input(kind)
        _constrain_first_input(module, mesh, axis, [self.input_layouts, desired], where)
        _constrain_output(module, mesh, axis, self.output_layouts, where)
        return module


class ColwiseParallel(_LinearStyle):
    """Split a ``Linear``'s output features (weight rows and bias) or an ``Embedding``'s
    embedding dimension over the mesh axis: the input is replicated along it and the output
    comes out split on its last dimension (``output_layouts``, default ``Shard(-1)``).
    Paired with a following ``RowwiseParallel`` layer this is Megatron's MLP split.
    ``use_local_output`` is accepted for PyTorch's signature: funcgrad's arrays are global.

    Example:
        >>> from funcgrad.sharding import Mesh
        >>> from funcgrad.nn.parallel import parallelize_module, ColwiseParallel
        >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]), ("model",))
        >>> layer = parallelize_module(nn.Linear(4, 6), mesh, ColwiseParallel())
        >>> layer.weight.sharding.spec, layer.bias.sharding.spec
        (PartitionSpec('model', None), PartitionSpec('model'))
    """

    _default_input = Replicate()
    _default_output = Shard(-1)

    @staticmethod
    def _parameter_specs(kind, axis):
        if kind is Linear:
            return {"weight": PartitionSpec(axis, None), "bias": PartitionSpec(axis)}
        return {"weight": PartitionSpec(None, axis)}

    @staticmethod
    def _desired_input(kind):
        return Replicate()


class RowwiseParallel(_LinearStyle):
    """Split a ``Linear``'s input features (weight columns; the bias stays replicated) or an
    ``Embedding``'s rows over the mesh axis: the input is expected split on its last
    dimension (``input_layouts``, default ``Shard(-1)``), each device computes a partial
    product and XLA sums them; the output is replicated along the axis (``output_layouts``,
    default ``Replicate()``).

    Example:
        >>> from funcgrad.sharding import Mesh
        >>> from funcgrad.nn.parallel import parallelize_module, RowwiseParallel
        >>> mesh = Mesh(np.array(funcgrad.local_devices()[:1]), ("model",))
        >>> layer = parallelize_module(nn.Linear(6, 4), mesh, RowwiseParallel())
        >>> layer.weight.sharding.spec, layer.bias.sharding.spec
        (PartitionSpec(None, 'model'), PartitionSpec())
    """

    _default_input = Shard(-1)
    _default_output = Replicate()

    @staticmethod
    def _parameter_specs(kind, axis):
        if kind is Linear:
            return {"weight": PartitionSpec(None, axis), "bias": PartitionSpec()}
        return {"weight": PartitionSpec(axis, None)}

    @staticmethod
    def _desired_input(kind):
        return Shard(-1) if kind is Linear else Replicate()


class SequenceParallel(ParallelStyle):
    """For layers that act on each position alone (``LayerNorm``, ``RMSNorm``, dropout):
    parameters replicated, input and output split along ``sequence_dim`` over the mesh axis,
    so the activations between tensor-parallel blocks are not held whole on every device.

    Example:
        >>> from funcgrad.nn.parallel import SequenceParallel
        >>> SequenceParallel(sequence_dim=1)
        SequenceParallel(sequence_dim=1, use_local_output=False)
    """

    def __init__(self, *, sequence_dim=1, use_local_output=False):
        self.sequence_dim = int(sequence_dim)
        self.use_local_output = bool(use_local_output)

    _field_names = ("sequence_dim", "use_local_output")

    def _apply(self, module, mesh, axis, where):
        for name, box in module._parameters.items():
            if box is not None:
                place_parameter(module, name, mesh, PartitionSpec(), where)
        layout = Shard(self.sequence_dim)
        _constrain_first_input(module, mesh, axis, [layout], where)
        _constrain_output(module, mesh, axis, layout, where)
        return module


class PrepareModuleInput(ParallelStyle):
    """Lay out a module's positional inputs (``desired_input_layouts``, one entry per
    argument, None to leave one alone; ``input_layouts`` says how they arrive) and keyword
    inputs (``desired_input_kwarg_layouts``) without touching its parameters.

    Example:
        >>> from funcgrad.nn.parallel import PrepareModuleInput, Shard, Replicate
        >>> PrepareModuleInput(input_layouts=(Shard(1), None),
        ...                    desired_input_layouts=(Replicate(), None)).desired_input_layouts
        (Replicate(), None)
    """

    def __init__(self, *, input_layouts=None, desired_input_layouts=None,
                 input_kwarg_layouts=None, desired_input_kwarg_layouts=None,
                 use_local_output=False):
        as_tuple = lambda v: None if v is None else tuple(v) if isinstance(v, (tuple, list)) \
            else (v,)
        self.input_layouts = as_tuple(input_layouts)
        self.desired_input_layouts = as_tuple(desired_input_layouts)
        if (self.input_layouts is not None and self.desired_input_layouts is not None
                and len(self.input_layouts) != len(self.desired_input_layouts)):
            raise ValueError(f"PrepareModuleInput: input_layouts ({len(self.input_layouts)}) "
                             f"and desired_input_layouts "
                             f"({len(self.desired_input_layouts)}) must have one entry per "
                             f"input each")
        self.input_kwarg_layouts = dict(input_kwarg_layouts or {})
        self.desired_input_kwarg_layouts = dict(desired_input_kwarg_layouts or {})
        self.use_local_output = bool(use_local_output)

    _field_names = ("input_layouts", "desired_input_layouts", "use_local_output")

    def _apply(self, module, mesh, axis, where):
        have = self.input_layouts or ()
        want = self.desired_input_layouts or ()
        at = lambda seq, i: seq[i] if i < len(seq) else None
        pairs = [(at(have, i), at(want, i)) for i in range(max(len(have), len(want)))]
        kw = {k: (self.input_kwarg_layouts.get(k), self.desired_input_kwarg_layouts.get(k))
              for k in set(self.input_kwarg_layouts) | set(self.desired_input_kwarg_layouts)}

        def hook(mod, args, kwargs):
            args = [_lay_out(a, pairs[i], mesh, axis, where) if i < len(pairs) else a
                    for i, a in enumerate(args)]
            kwargs = {k: _lay_out(v, kw[k], mesh, axis, where) if k in kw else v
                      for k, v in kwargs.items()}
            return tuple(args), kwargs
        module.register_forward_pre_hook(hook, with_kwargs=True)
        return module


class PrepareModuleOutput(ParallelStyle):
    """Lay out a module's output as ``desired_output_layouts`` (``output_layouts`` says how
    it is produced); for a module returning a tuple, one entry per element (None: leave it).

    Example:
        >>> from funcgrad.nn.parallel import PrepareModuleOutput, Replicate, Shard
        >>> PrepareModuleOutput(output_layouts=Shard(0),
        ...                     desired_output_layouts=Replicate()).desired_output_layouts
        (Replicate(),)
    """

    def __init__(self, *, output_layouts, desired_output_layouts, use_local_output=True):
        as_tuple = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,)
        self.output_layouts = as_tuple(output_layouts)
        self.desired_output_layouts = as_tuple(desired_output_layouts)
        if len(self.output_layouts) != len(self.desired_output_layouts):
            raise ValueError("PrepareModuleOutput: output_layouts and desired_output_layouts "
                             "must have one entry per output each")
        self.use_local_output = bool(use_local_output)

    _field_names = ("output_layouts", "desired_output_layouts", "use_local_output")

    def _apply(self, module, mesh, axis, where):
        pairs = list(zip(self.output_layouts, self.desired_output_layouts))

        def hook(mod, args, out):
            if isinstance(out, tuple):
                return tuple(_lay_out(o, pairs[i], mesh, axis, where) if i < len(pairs) else o
                             for i, o in enumerate(out))
            return _lay_out(out, pairs[0], mesh, axis, where)
        module.register_forward_hook(hook)
        return module


__all__ = ["ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel",
           "PrepareModuleInput", "PrepareModuleOutput", "place_parameter"]
