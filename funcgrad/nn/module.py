"""``Module`` and ``Parameter``: PyTorch-style stateful models that are also pytrees.

A ``Module`` keeps its parameters (``Parameter`` boxes), buffers and submodules in three
ordered dicts, registered when assigned as attributes, exactly as in PyTorch. Reading
``module.weight`` gives the array itself, so ``forward`` code is plain array code that works
eagerly and under every transformation.

Modules are pytrees: the leaves are the parameter arrays and buffers (in ``state_dict`` order),
the static part is the module's identity and hyper-parameters. Unflattening makes a *copy*
that remembers its *origin*; inside a transformation the copy stands in for the original and
buffer updates made on it (BatchNorm running statistics) are carried back to the original (see
``funcgrad.core.mutable_state`` and ``docs/nn.md``).

Example:
    >>> class MLP(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)
    ...     def forward(self, x):
    ...         return self.fc2(nn.functional.relu(self.fc1(x)))
    >>> model = MLP()
    >>> x = jnp.ones((5, 4))
    >>> model(x).shape
    (5, 2)
    >>> grads = funcgrad.grad(lambda m: jnp.sum(m(x) ** 2))(model)   # an MLP of gradients
    >>> type(grads).__name__, grads.fc1.weight.shape
    ('MLP', (8, 4))
"""
import collections
import itertools

import numpy as np

from funcgrad import tree_util
from funcgrad.core import interpreters, mutable_state
from funcgrad.core.interpreters import Tracer, Value


def _as_array(value):
    """A funcgrad array (or tracer) for a NumPy array, scalar, torch tensor or array."""
    if isinstance(value, Value):
        return value
    if isinstance(value, Parameter):
        return value.data
    import funcgrad.numpy as jnp
    if hasattr(value, "detach") and hasattr(value, "cpu"):     # a torch tensor
        value = value.detach().cpu().numpy()
    return jnp.asarray(np.asarray(value))


def host_zeros(shape, dtype="float32"):
    """Zeros made on the host and transferred (no XLA compilation, unlike an eager op): used
    for initial parameters and buffers so model construction is fast."""
    import funcgrad.numpy as jnp
    return jnp.asarray(np.zeros(shape, dtype))


def host_ones(shape, dtype="float32"):
    """Ones made on the host and transferred (see ``host_zeros``)."""
    import funcgrad.numpy as jnp
    return jnp.asarray(np.ones(shape, dtype))


class Parameter:
    """A trainable array held in a mutable box, so optimizers can update it in place.

    ``p.data`` is the array; ``p.requires_grad`` marks it trainable (frozen parameters are
    skipped by optimizers). Inside ``forward`` a module attribute gives the array, not the box.

    Example:
        >>> p = nn.Parameter(jnp.zeros(3))
        >>> p.shape, p.requires_grad
        ((3,), True)
    """

    __slots__ = ("data", "requires_grad", "grad", "_name")

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            import funcgrad.numpy as jnp
            data = jnp.zeros((0,), "float32")
        self.data = _as_array(data)
        self.requires_grad = bool(requires_grad)
        self.grad = None
        self._name = None

    shape = property(lambda self: tuple(self.data.shape))
    dtype = property(lambda self: self.data.dtype)
    ndim = property(lambda self: len(self.data.shape))
    size = property(lambda self: int(np.prod(self.data.shape, dtype=np.int64)))
    sharding = property(lambda self: self.data.sharding)    # its layout (nn.parallel)

    def numel(self):
        return self.size

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.data, dtype=dtype)

    def __repr__(self):
        return f"Parameter containing:\n{self.data!r}" + (
            "" if self.requires_grad else " (frozen)")

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = bool(requires_grad)
        return self


tree_util.register_pytree_node(
    Parameter, lambda p: ((p.data,), p.requires_grad),
    lambda rg, children: _new_parameter(children[0], rg))


def _new_parameter(data, requires_grad):
    p = Parameter.__new__(Parameter)
    p.data, p.requires_grad, p.grad, p._name = data, requires_grad, None, None
    return p


_PRIVATE = frozenset(["_parameters", "_buffers", "_modules", "_non_persistent", "_origin",
                      "_version", "_aux", "training", "_forward_pre_hooks", "_forward_hooks"])


def _buffer_setter(module, name, value):
    old = module._buffers.get(name)
    if old is not None and hasattr(old, "dtype") and value.dtype != old.dtype:
        value = value.astype(old.dtype)
    module._buffers[name] = value


_hook_ids = itertools.count()


class RemovableHandle:
    """Returned by ``register_forward_hook`` and friends: ``remove()`` unregisters the hook
    (also on leaving a ``with`` block).

    Example:
        >>> model = nn.Linear(2, 3)
        >>> def print_shape(module, args, out):
        ...     print(type(module).__name__, out.shape)
        >>> with model.register_forward_hook(print_shape):
        ...     y = model(jnp.ones((4, 2)))
        Linear (4, 3)
        >>> y = model(jnp.ones((4, 2)))        # removed on leaving the block: prints nothing
    """

    def __init__(self, module, table, key):
        self._module, self._table, self.id = module, table, key

    def remove(self):
        d = self._module.__dict__
        if self.id in d.get(self._table, {}):
            hooks = dict(d[self._table])
            del hooks[self.id]
            d[self._table] = hooks
            self._module._changed()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class Module:
    """Base class of layers and models (as ``torch.nn.Module``).

    Subclasses call ``super().__init__()`` first, assign ``Parameter``s, submodules and buffers
    (``register_buffer``) as attributes, and define ``forward``.

    Example:
        >>> class Scale(nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.s = nn.Parameter(jnp.ones(()))
        ...     def forward(self, x):
        ...         return x * self.s
        >>> Scale()(jnp.array([1.0, 2.0]))
        Array([1., 2.], dtype=float32)
    """

    def __init__(self, *args, **kwargs):
        d = self.__dict__
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent"] = set()
        d["_modules"] = {}
        d["training"] = True
        d["_origin"] = None
        d["_version"] = 0
        d["_aux"] = None
        d["_forward_pre_hooks"] = {}
        d["_forward_hooks"] = {}

    # --- attribute registration ---------------------------------------------------------------
    def _check_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call: call "
                                 f"super().__init__() first in {type(self).__name__}.__init__")

    def _changed(self):
        d = self.__dict__
        d["_version"] = d["_version"] + 1
        d["_aux"] = None
        _epoch[0] += 1

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            self._check_init("parameters")
            self._remove_from(name, "_parameters")
            d["_parameters"][name] = value
            self._changed()
        elif isinstance(value, Module):
            self._check_init("submodules")
            self._remove_from(name, "_modules")
            d["_modules"][name] = value
            self._changed()
        elif "_parameters" in d and name in d["_parameters"]:
            if value is None:
                if d["_parameters"][name] is not None:
                    d["_parameters"][name] = None
                    self._changed()
            else:
                box = d["_parameters"][name]
                if box is None:
                    d["_parameters"][name] = Parameter(value)
                    self._changed()
                else:
                    box.data = _as_array(value)
        elif "_buffers" in d and name in d["_buffers"]:
            was_none = d["_buffers"][name] is None
            d["_buffers"][name] = None if value is None else _as_array(value)
            if was_none != (value is None):
                self._changed()
        elif "_modules" in d and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module "
                                f"{name!r} (a Module or None is required)")
            d["_modules"][name] = None
            self._changed()
        else:
            old = d.get(name, _MISSING)
            object.__setattr__(self, name, value)
            if name not in _PRIVATE and "_version" in d and not _same(old, value):
                self._changed()
            elif name == "training" and old is not value:
                self._changed()

    def _remove_from(self, name, keep):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key != keep and name in d[key]:
                del d[key][name]
        d.pop(name, None)

    def __getattr__(self, name):
        d = self.__dict__
        params = d.get("_parameters")
        if params is not None:
            if name in params:
                box = params[name]
                return None if box is None else box.data
            if name in d["_buffers"]:
                return d["_buffers"][name]
            if name in d["_modules"]:
                return d["_modules"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if name in d.get(key, ()):
                del d[key][name]
                self._changed()
                return
        object.__delattr__(self, name)

    def register_buffer(self, name, tensor, persistent=True):
        """Register state that is not trained (e.g. running statistics); ``persistent=False``
        keeps it out of ``state_dict``.

        Example:
            >>> class Counter(nn.Module):
            ...     def __init__(self):
            ...         super().__init__()
            ...         self.register_buffer("count", jnp.zeros(()))
            >>> dict(Counter().state_dict())
            {'count': Array(0., dtype=float32)}
        """
        self._check_init("buffers")
        if "." in name or not name:
            raise KeyError(f"register_buffer: invalid buffer name {name!r}")
        if name in self.__dict__ or name in self._parameters or name in self._modules:
            raise KeyError(f"register_buffer: attribute {name!r} already exists")
        self._buffers[name] = None if tensor is None else _as_array(tensor)
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)
        self._changed()

    def register_parameter(self, name, param):
        """Register ``param`` (a Parameter or None) as ``name``. Example: ``m.register_parameter("bias", None)``."""
        self._check_init("parameters")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got "
                            f"{type(param).__name__}")
        self._remove_from(name, "_parameters")
        self._parameters[name] = param
        self._changed()

    def add_module(self, name, module):
        """Register ``module`` as a child called ``name``."""
        self._check_init("submodules")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module or None, got "
                            f"{type(module).__name__}")
        self._remove_from(name, "_modules")
        self._modules[name] = module
        self._changed()

    register_module = add_module

    def get_parameter(self, target):
        """The ``Parameter`` box at dotted path ``target``. Example: ``m.get_parameter("fc.weight")``."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter {name!r}")
        return mod._parameters[name]

    def get_submodule(self, target):
        """The submodule at dotted path ``target`` ("" is this module)."""
        mod = self
        if not target:
            return mod
        for part in target.split("."):
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r} (looking "
                                     f"up {target!r})")
            mod = mod._modules[part]
        return mod

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer {name!r}")
        return mod._buffers[name]

    # --- state updated by forward ---------------------------------------------------------------
    def update_buffer(self, name, value):
        """Replace buffer ``name`` with ``value`` from a forward pass (PyTorch's in-place update).

        Eagerly the module is updated now. Inside ``jit``/``grad`` the module at hand is a
        traced copy: it sees the new value, and the value is carried back to the original
        module when the transformation finishes (see ``docs/nn.md``).
        """
        d = self.__dict__
        if isinstance(value, Tracer):
            origin = d["_origin"]
            if origin is None or origin is self:
                # The original module used inside a trace (closed over): never store a tracer.
                mutable_state.write(self, name, value, _buffer_setter)
                return
            d["_buffers"][name] = value
            mutable_state.write(origin, name, value, _buffer_setter)
        else:
            _buffer_setter(self, name, _as_array(value))
            origin = d["_origin"]
            if d.get("_write_through") and origin is not None and origin is not self:
                _buffer_setter(origin, name, _as_array(value))

    # --- forward -----------------------------------------------------------------------------
    def forward(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} does not define forward(); subclasses of "
                        f"nn.Module must implement it")

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        compiled = d.get("_compiled_call")
        if compiled is not None and interpreters.is_eager():
            return compiled(self, *args, **kwargs)
        if d.get("_forward_pre_hooks") or d.get("_forward_hooks"):
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def _call_with_hooks(self, args, kwargs):
        d = self.__dict__
        for hook, with_kwargs in list(d["_forward_pre_hooks"].values()):
            if with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        out = self.forward(*args, **kwargs)
        for hook, with_kwargs in list(d["_forward_hooks"].values()):
            res = hook(self, args, kwargs, out) if with_kwargs else hook(self, args, out)
            if res is not None:
                out = res
        return out

    def _add_hook(self, table, hook, prepend, with_kwargs):
        if not callable(hook):
            raise TypeError(f"{type(self).__name__}: a hook must be callable, got "
                            f"{type(hook).__name__}")
        d = self.__dict__
        hooks = dict(d.setdefault(table, {}))
        key = next(_hook_ids)
        hooks[key] = (hook, bool(with_kwargs))
        if prepend:
            hooks = {key: hooks.pop(key), **hooks}
        d[table] = hooks
        self._changed()
        return RemovableHandle(self, table, key)

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before ``forward`` (``hook(module, args, kwargs)`` with
        ``with_kwargs=True``); a non-None result replaces the arguments. Hooks run eagerly and
        while a transformation traces the module. Returns a handle with ``remove()``.

        Example:
            >>> model = nn.Linear(1, 1, bias=False)
            >>> handle = model.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
            >>> model(jnp.ones((1, 1))) == 2 * model.weight      # the input was doubled
            Array([[ True]], dtype=bool)
            >>> handle.remove()
        """
        return self._add_hook("_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args, output)`` after ``forward`` (``hook(module, args, kwargs,
        output)`` with ``with_kwargs=True``); a non-None result replaces the output. Under
        ``jit`` the hook runs while tracing and sees tracers: to collect activations, return
        them from the jitted function instead of storing them. Returns a handle with
        ``remove()``.

        Example:
            >>> model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
            >>> feats = {}
            >>> h = model[0].register_forward_hook(lambda m, a, out: feats.update(l1=out))
            >>> y = model(jnp.ones((1, 2)))
            >>> feats["l1"].shape
            (1, 3)
        """
        return self._add_hook("_forward_hooks", hook, prepend, with_kwargs)

    # --- traversal ---------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(name, module) for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, mod in self._modules.items():
            if mod is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from mod.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, mod in self._modules.items():
            if mod is not None and id(mod) not in seen:
                seen.add(id(mod))
                yield name, mod

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Parameter) pairs in PyTorch's order.

        Example:
            >>> [n for n, _ in nn.Linear(2, 3).named_parameters()]
            ['weight', 'bias']
        """
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, mod in mods:
            for name, p in mod._parameters.items():
                if p is None or (remove_duplicate and id(p) in seen):
                    continue
                seen.add(id(p))
                full = mprefix + ("." if mprefix else "") + name
                p._name = full    # lets optimizers match name-keyed gradients
                yield full, p

    def parameters(self, recurse=True):
        """The ``Parameter`` boxes (give them to an optimizer)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, mod in mods:
            for name, b in mod._buffers.items():
                if b is not None:
                    yield mprefix + ("." if mprefix else "") + name, b

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self, trainable_only=False):
        """Total number of parameter elements (only trainable ones if asked).

        Example:
            >>> nn.Linear(3, 4).num_parameters()
            16
        """
        return sum(p.size for p in self.parameters() if p.requires_grad or not trainable_only)

    # --- modes and bulk operations --------------------------------------------------------------
    def train(self, mode=True):
        """Set training mode on this module and every descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("train(mode): mode must be a bool")
        for m in self.modules():
            if m.__dict__.get("training") is not mode:
                m.__dict__["training"] = mode
                m._changed()
        return self

    def eval(self):
        """Evaluation mode (``train(False)``): BatchNorm uses running stats, Dropout is off."""
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        """Mark every parameter trainable or frozen; returns self."""
        for p in self.parameters():
            p.requires_grad = bool(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first) and on self; returns self.

        Example:
            >>> model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1))
            >>> model = model.apply(lambda m: nn.init.zeros_(m.get_parameter("bias"))
            ...                     if isinstance(m, nn.Linear) else None)
            >>> model[2].bias
            Array([0.], dtype=float32)
        """
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, device=None, dtype=None):
        """Move (or cast) every parameter and buffer; returns self.

        ``device`` is a funcgrad device or a string such as "cpu"; floating arrays are cast to
        ``dtype`` when given.
        """
        from funcgrad.lowering.array import device_put
        dev = _device_named(device, type(self).__name__) if isinstance(device, str) else device

        def move(x):
            if x is None:
                return None
            if dtype is not None and np.issubdtype(np.dtype(x.dtype), np.floating):
                x = x.astype(dtype)
            return device_put(x, dev) if dev is not None else x
        for m in self.modules():
            for p in m._parameters.values():
                if p is not None:
                    p.data = move(p.data)
            for k, b in list(m._buffers.items()):
                m._buffers[k] = move(b)
        return self

    def cpu(self):
        return self.to("cpu")

    def float(self):
        return self.to(dtype="float32")

    def double(self):
        return self.to(dtype="float64")

    def half(self):
        return self.to(dtype="float16")

    def bfloat16(self):
        return self.to(dtype="bfloat16")

    def cuda(self, device=None):
        """Move every parameter and buffer to CUDA device ``device`` (an index, default 0);
        raises when no CUDA device is usable."""
        return self.to(f"cuda:{0 if device is None else int(device)}")

    def compile(self, *, mode=None, fullgraph=False, dynamic=None, backend=None, options=None):
        """Compile the module's calls with XLA from now on, as ``torch.nn.Module.compile``: a
        call made outside any transformation runs ``funcgrad.jit`` over the module (traced
        once per input signature and train/eval mode; the current parameters and buffers are
        read at every call and written state is written back). Calls under ``grad``, ``vmap``
        or an enclosing ``jit`` trace as before. Forward hooks run while tracing only.
        PyTorch's options are accepted for compatibility and change nothing: XLA compiles the
        whole forward, with no graph breaks.

        Example:
            >>> model = nn.Linear(3, 1)
            >>> model.compile()
            >>> model(jnp.ones((2, 3))).shape    # compiled on the first call, then cached
            (2, 1)
        """
        from funcgrad.transforms.jit import jit
        self.__dict__["_compiled_call"] = jit(_call_module)

    def type(self, dtype):
        return self.to(dtype=dtype)

    # --- state dicts -----------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """An ordered dict of parameter and persistent buffer arrays with PyTorch's names.

        Example:
            >>> list(nn.BatchNorm1d(3).state_dict())
            ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
        """
        out = collections.OrderedDict() if destination is None else destination
        for mprefix, mod in self.named_modules(prefix=prefix.rstrip(".")):
            pre = mprefix + ("." if mprefix else "")
            for name, p in mod._parameters.items():
                if p is not None:
                    out[pre + name] = p if keep_vars else p.data
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent:
                    out[pre + name] = mod._export_buffer(name, b)
            mod._extra_state_to(out, pre)
        return out

    def _export_buffer(self, name, value):
        return value

    def _import_buffer(self, name, value, current):
        return value

    def _extra_state_to(self, out, prefix):
        pass

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy arrays from ``state_dict`` (NumPy, funcgrad or torch arrays) into this module.

        Shapes must match; with ``strict`` the key sets must match exactly. Returns
        ``(missing_keys, unexpected_keys)``. Raises ``RuntimeError`` listing every problem.

        Example:
            >>> model = nn.Linear(2, 1)
            >>> model.load_state_dict({"weight": jnp.ones((1, 2)), "bias": jnp.zeros(1)})
            <All keys matched successfully>
            >>> model.weight
            Array([[1., 1.]], dtype=float32)
        """
        expected = {}
        for mprefix, mod in self.named_modules():
            pre = mprefix + ("." if mprefix else "")
            for name, p in mod._parameters.items():
                if p is not None:
                    expected[pre + name] = (mod, name, "param")
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent:
                    expected[pre + name] = (mod, name, "buffer")
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in expected]
        errors = []
        updates = []
        for key, (mod, name, kind) in expected.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if isinstance(value, Parameter):
                value = value.data
            if hasattr(value, "detach") and hasattr(value, "cpu"):
                value = value.detach().cpu().numpy()
            current = mod._parameters[name].data if kind == "param" else mod._buffers[name]
            shape = tuple(np.shape(value))
            cur_shape = tuple(current.shape)
            if kind == "buffer":
                value = mod._import_buffer(name, value, current)
                shape = tuple(np.shape(value))
            if shape != cur_shape:
                errors.append(f"size mismatch for {key}: copying a param with shape {shape} from "
                              f"checkpoint, the shape in current model is {cur_shape}.")
                continue
            updates.append((mod, name, kind, value, current))
        if strict and (missing or unexpected):
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        import funcgrad.numpy as jnp
        for mod, name, kind, value, current in updates:
            arr = value if isinstance(value, Value) else jnp.asarray(np.asarray(value))
            if not assign and arr.dtype != current.dtype:
                arr = arr.astype(current.dtype)
            if not assign and hasattr(getattr(current, "sharding", None), "mesh"):
                # a model placed over a mesh (nn.parallel) keeps its layout, as a DTensor does
                from funcgrad.lowering.array import device_put
                arr = device_put(arr, current.sharding)
            if kind == "param":
                mod._parameters[name].data = arr
            else:
                mod._buffers[name] = arr
        return _IncompatibleKeys(missing, unexpected)

    # --- representation -------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        lines = []
        extra = self.extra_repr()
        if extra:
            lines = extra.split("\n")
        for name, mod in self._modules.items():
            mod_str = repr(mod).replace("\n", "\n  ")
            lines.append(f"({name}): {mod_str}")
        main = self._get_name() + "("
        if lines:
            if len(lines) == 1 and not self._modules:
                main += lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) |
                      set(self._modules))

    # --- pytree support ---------------------------------------------------------------------------
    def __getstate__(self):
        raise TypeError("funcgrad modules are not pickled; save model.state_dict() with "
                        "funcgrad.save instead")

    def __deepcopy__(self, memo):
        """``copy.deepcopy(model)``: an independent model, as PyTorch's. It has new Parameter
        boxes and buffers (holding the same immutable arrays, so no data is copied), its own
        submodules, copies of its other attributes, and the same hooks."""
        import copy
        leaves, treedef = tree_util.tree_flatten(self)
        clone = treedef.unflatten(leaves)
        memo[id(self)] = clone
        for m in clone.modules():
            d = m.__dict__
            d["_origin"] = d["_aux"] = None
            for k, v in list(d.items()):
                if k in _PRIVATE:
                    if isinstance(v, dict) and k.endswith("hooks"):
                        d[k] = dict(v)
                elif k != "_compiled_call":       # a compiled call takes the model as argument
                    d[k] = copy.deepcopy(v, memo)
        return clone


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys",
                                               ["missing_keys", "unexpected_keys"])):
    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()


_MISSING = object()


def _device_named(name, owner):
    """The device a string such as "cpu", "cuda" or "cuda:1" names; raises when there is none."""
    from funcgrad.lowering import backend
    platform, _, index = name.partition(":")
    platform = {"gpu": "cuda"}.get(platform, platform)
    try:
        devices = backend.devices(platform)
    except Exception as exc:
        raise RuntimeError(f"{owner}.to({name!r}): no {platform} device is usable ({exc})") \
            from exc
    i = int(index) if index else 0
    if not 0 <= i < len(devices):
        raise ValueError(f"{owner}.to({name!r}): device {i} out of range ({len(devices)} "
                         f"{platform} devices)")
    return devices[i]


def _call_module(module, *args, **kwargs):
    """What ``Module.compile`` jits: the module is the first (pytree) argument."""
    return module(*args, **kwargs)


def _same(a, b):
    if a is b:
        return True
    if a is _MISSING or isinstance(a, (Value, np.ndarray)) or isinstance(b, (Value, np.ndarray)):
        return False
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:
        return False


# A module flattens its whole subtree in ONE call (children are the arrays of every
# descendant, not the submodules): dispatching a jitted call that takes a model then costs one
# Python callback and one list comprehension, whatever the depth. The per-root plan (where each
# leaf lives, and the aux data describing the subtree) is cached until any module's structure
# changes anywhere (a global epoch bumped by ``Module._changed``).
_epoch = [0]


def _plan(m):
    """(aux, param entries, buffer entries, key names) for the subtree rooted at ``m``."""
    index = {}
    order = []

    def visit(mod):
        if id(mod) in index:
            return index[id(mod)]
        i = index[id(mod)] = len(order)
        order.append(mod)
        for child in mod.__dict__["_modules"].values():
            if child is not None:
                visit(child)
        return i
    visit(m)
    records, pents, bents, pkeys, bkeys = [], [], [], [], []
    paths = {id(m): ""}
    for mod in order:
        pre = paths[id(mod)]
        for name, child in mod.__dict__["_modules"].items():
            if child is not None and id(child) not in paths:
                paths[id(child)] = pre + ("." if pre else "") + name
    for mod in order:
        d = mod.__dict__
        pre = paths[id(mod)] + ("." if paths[id(mod)] else "")
        pnames = tuple((n, p is not None) for n, p in d["_parameters"].items())
        bnames = tuple((n, b is not None) for n, b in d["_buffers"].items())
        for n, present in pnames:
            if present:
                pents.append((d["_parameters"], n))
                pkeys.append(pre + n)
        for n, present in bnames:
            if present:
                bents.append((d["_buffers"], n))
                bkeys.append(pre + n)
        mnames = tuple((n, None if c is None else index[id(c)])
                       for n, c in d["_modules"].items())
        records.append((type(mod), d["_origin"] or mod, d["_version"], d["training"], pnames,
                        bnames, mnames))
    aux = _ModuleAux(type(m), tuple(records))
    return aux, pents, bents, pkeys + bkeys


class _ModuleAux:
    """The static part of a module subtree; equal when structure, origins and modes are."""

    __slots__ = ("cls", "records", "_hash")

    def __init__(self, cls, records):
        self.cls, self.records = cls, records
        self._hash = hash((cls, records))

    def __eq__(self, other):
        if self is other:
            return True
        return type(other) is _ModuleAux and self._hash == other._hash and \
            self.cls is other.cls and self.records == other.records

    def __hash__(self):
        return self._hash

    def __iter__(self):
        return iter((self.cls, self.records))

    def __repr__(self):
        return f"{self.cls.__name__}<{len(self.records)} modules>"


def _cached_plan(m):
    d = m.__dict__
    cache = d.get("_aux")
    if cache is None or cache[0] != _epoch[0]:
        cache = d["_aux"] = (_epoch[0],) + _plan(m)
    return cache


def _flatten_module(m):
    _, aux, pents, bents, _ = _cached_plan(m)
    children = [c[k].data for c, k in pents]
    children += [c[k] for c, k in bents]
    return children, aux


def _unflatten_module(aux, children):
    _, records = aux
    mods = []
    leaves = iter(children)
    for cls, origin, version, training, pnames, bnames, mnames in records:
        m = cls.__new__(cls)
        d = m.__dict__
        od = origin.__dict__
        d.update(od)
        oparams = od["_parameters"]
        params = {}
        for name, present in pnames:
            if present:
                box = oparams.get(name)
                params[name] = _new_parameter(next(leaves), box.requires_grad
                                              if box is not None else True)
            else:
                params[name] = None
        d["_parameters"] = params
        d["_non_persistent"] = set(od["_non_persistent"])
        d["training"] = training
        d["_origin"] = origin
        d["_version"] = version
        d["_aux"] = None
        mods.append((m, bnames, mnames))
    for m, bnames, _ in mods:
        m.__dict__["_buffers"] = {name: (next(leaves) if present else None)
                                  for name, present in bnames}
    for m, _, mnames in mods:
        m.__dict__["_modules"] = {name: (None if i is None else mods[i][0])
                                  for name, i in mnames}
    return mods[0][0]


def _flatten_module_with_keys(m):
    _, aux, pents, bents, keys = _cached_plan(m)
    children = [c[k].data for c, k in pents] + [c[k] for c, k in bents]
    return [(tree_util.GetAttrKey(k), c) for k, c in zip(keys, children)], aux


def register_module_class(cls):
    """Make ``cls`` (a Module subclass) a pytree node; done automatically for subclasses."""
    tree_util.register_pytree_node(cls, _flatten_module, _unflatten_module,
                                   _flatten_module_with_keys)
    return cls


def _init_subclass(cls, **kwargs):
    register_module_class(cls)


Module.__init_subclass__ = classmethod(_init_subclass)
register_module_class(Module)


def functional_call(module, parameters_and_buffers, args=(), kwargs=None, *, tie_weights=True,
                    strict=False):
    """Call ``module`` with some parameters/buffers replaced (``torch.func.functional_call``).

    ``parameters_and_buffers`` maps dotted names to arrays (or Parameters), or is a tuple of
    such dicts. The module itself is not modified, except that buffer updates made by the
    forward pass (BatchNorm statistics) reach it as they would eagerly.

    Example:
        >>> model = nn.Linear(2, 1)
        >>> x, y = jnp.ones((4, 2)), jnp.zeros((4, 1))
        >>> params = {k: p.data for k, p in model.named_parameters()}
        >>> loss = lambda p: F.mse_loss(nn.functional_call(model, p, (x,)), y)
        >>> grads = funcgrad.grad(loss)(params)
        >>> {k: g.shape for k, g in grads.items()}
        {'bias': (1,), 'weight': (1, 2)}
    """
    if isinstance(parameters_and_buffers, (tuple, list)):
        merged = {}
        for d in parameters_and_buffers:
            for k, v in d.items():
                if k in merged:
                    raise ValueError(f"functional_call: {k!r} appears in more than one of the "
                                     f"given dicts")
                merged[k] = v
        parameters_and_buffers = merged
    if not isinstance(args, tuple):
        args = (args,)
    kwargs = kwargs or {}
    leaves, treedef = tree_util.tree_flatten(module)
    copy = treedef.unflatten(leaves)
    known = set()
    for mprefix, mod in copy.named_modules():
        pre = mprefix + ("." if mprefix else "")
        for name in mod._parameters:
            key = pre + name
            known.add(key)
            if key in parameters_and_buffers:
                mod._parameters[name] = _new_parameter(
                    _as_array(parameters_and_buffers[key]),
                    mod._parameters[name].requires_grad if mod._parameters[name] else True)
        for name in mod._buffers:
            key = pre + name
            known.add(key)
            if key in parameters_and_buffers:
                mod._buffers[name] = _as_array(parameters_and_buffers[key])
    if strict:
        missing = known - set(parameters_and_buffers)
        unexpected = set(parameters_and_buffers) - known
        if missing or unexpected:
            raise RuntimeError(f"functional_call(strict=True): missing keys {sorted(missing)}, "
                               f"unexpected keys {sorted(unexpected)}")
    else:
        unexpected = set(parameters_and_buffers) - known
        if unexpected:
            raise RuntimeError(f"functional_call: unexpected keys {sorted(unexpected)} (the "
                               f"module has no such parameters or buffers)")
    for mod in copy.modules():
        mod.__dict__["_write_through"] = True
    return copy(*args, **kwargs)
