"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList`` and
``ParameterDict`` (children and parameters named as in PyTorch)."""
import collections

from funcgrad.nn.module import Module, Parameter


class Sequential(Module):
    """Apply modules in order; children are named "0", "1", ... (or by an OrderedDict).

    Example:
        >>> net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> list(net.state_dict())
        ['0.weight', '0.bias', '2.weight', '2.bias']
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(collections.OrderedDict(list(self._modules.items())[idx]))
        mods = list(self._modules.values())
        return mods[idx]

    def __setitem__(self, idx, module):
        key = list(self._modules)[idx]
        self.add_module(key, module)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self


class ModuleList(Module):
    """A list of modules registered as children "0", "1", ...

    Example:
        >>> layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
    """

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(mods):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[idx]

    def __setitem__(self, idx, module):
        key = list(self._modules)[idx]
        self.add_module(key, module)

    def forward(self, *args, **kwargs):
        raise TypeError("ModuleList is a container, not a callable layer; iterate over it")


class _NamedEntries:
    """The dict protocol shared by ``ModuleDict`` and ``ParameterDict`` over their registry
    (``_modules`` or ``_parameters``, named by ``_registry``)."""

    _registry = "_modules"

    def _entries(self):
        return self.__dict__[self._registry]

    def __delitem__(self, key):
        del self._entries()[key]
        self._changed()

    def __len__(self):
        return len(self._entries())

    def __iter__(self):
        return iter(self._entries())

    def __contains__(self, key):
        return key in self._entries()

    def keys(self):
        return self._entries().keys()

    def forward(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} is a container, not a callable layer; index it "
                        f"by name")


class ModuleDict(_NamedEntries, Module):
    """A dict of named child modules. Example: ``nn.ModuleDict({"enc": enc, "dec": dec})``."""

    def __init__(self, modules=None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules):
        for k, m in dict(modules).items():
            self.add_module(k, m)


def _as_parameter(value):
    return value if isinstance(value, Parameter) else Parameter(value)


def _parameter_lines(params):
    """PyTorch's repr lines for a parameter container."""
    return "\n".join(
        f"({k}): Parameter containing: [{box.dtype} of size {'x'.join(map(str, box.shape))}]"
        + ("" if box.requires_grad else " (frozen)") for k, box in params.items())


class ParameterList(Module):
    """A list of parameters registered as "0", "1", ... (PyTorch's state_dict keys).

    As with a Parameter attribute, reading an item gives its array and assigning an array to
    an item replaces the value in the same Parameter box (what optimizers update).

    Example:
        >>> scales = nn.ParameterList([jnp.ones(4) for _ in range(3)])
        >>> list(scales.state_dict())
        ['0', '1', '2']
    """

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value):
        self.register_parameter(str(len(self._parameters)), _as_parameter(value))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return (box.data for box in self._parameters.values())

    def __getitem__(self, idx):
        boxes = list(self._parameters.values())
        if isinstance(idx, slice):
            return ParameterList(boxes[idx])
        return boxes[idx].data

    def __setitem__(self, idx, value):
        name = list(self._parameters)[idx]
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        else:
            setattr(self, name, value)

    def extra_repr(self):
        return _parameter_lines(self._parameters)

    def forward(self, *args, **kwargs):
        raise TypeError("ParameterList is a container, not a callable layer; iterate over it")


class ParameterDict(_NamedEntries, Module):
    """A dict of named parameters; reading gives arrays, assigning an array updates the
    Parameter in place, assigning a Parameter registers it.

    Example:
        >>> p = nn.ParameterDict({"scale": jnp.ones(4), "shift": jnp.zeros(4)})
        >>> p["scale"].shape
        (4,)
    """

    _registry = "_parameters"

    def __init__(self, values=None):
        super().__init__()
        self.update(values or {})

    def __setitem__(self, key, value):
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError(f"ParameterDict: parameter names must be non-empty strings without "
                           f"'.', got {key!r}")
        if key in self._parameters and not isinstance(value, Parameter):
            setattr(self, key, value)
        else:
            self.register_parameter(key, _as_parameter(value))

    def __getitem__(self, key):
        return self._parameters[key].data

    def values(self):
        return [box.data for box in self._parameters.values()]

    def items(self):
        return [(k, box.data) for k, box in self._parameters.items()]

    def update(self, values):
        items = values.items() if hasattr(values, "items") else values
        for k, v in items:
            self[k] = v

    def extra_repr(self):
        return _parameter_lines(self._parameters)


class Container(Module):
    """PyTorch's deprecated ``nn.Container(**modules)``: a Module holding the keyword modules
    as children (subclass ``Module`` in new code).

    Example:
        >>> c = nn.Container(fc=nn.Linear(2, 3), act=nn.ReLU())
        >>> [name for name, _ in c.named_children()]
        ['fc', 'act']
    """

    def __init__(self, **kwargs):
        super().__init__()
        for name, module in kwargs.items():
            self.add_module(name, module)
