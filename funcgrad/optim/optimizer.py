"""The ``Optimizer`` base class: PyTorch's API over funcgrad's immutable arrays.

Parameters are ``nn.Parameter`` boxes; ``step(grads)`` replaces each box's array, so the model
sees the update (in place, as in PyTorch). ``grads`` may be a gradient module (what
``funcgrad.grad`` returns for a module), a dict keyed by parameter name (what it returns for
``dict(model.named_parameters())``), a list aligned with the parameters, or None to use each
``p.grad``.

An optimizer is a pytree (its leaves: parameter arrays, numeric hyper-parameters such as
``lr``, and state arrays), so it can be an argument of a jitted training step::

    @funcgrad.jit
    def train_step(model, opt, x, y):
        loss, grads = funcgrad.value_and_grad(loss_fn)(model, x, y)
        opt.step(grads)
        return loss

Inside the transformation ``step`` updates the traced copy, and the new parameters and state
are written back to the original optimizer, its parameters (hence the model) when the call
returns (``funcgrad.core.mutable_state``). Outside jit, ``step`` runs one fused compiled update.

The pure form, for fully functional code: ``state = opt.init(params)`` and
``params, state = opt.update(grads, state, params)`` over any pytrees of arrays.
"""
from operator import is_

import numpy as np

from funcgrad import tree_util
from funcgrad.core import interpreters, mutable_state
from funcgrad.core.interpreters import Tracer
from funcgrad.nn.module import Module, Parameter, _new_parameter


def _is_number(v):
    return isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool)


class Optimizer:
    """Base class; subclasses set ``_state_keys`` and implement ``_init_state`` and ``_update``.

    Example:
        >>> model = nn.Linear(2, 1)
        >>> opt = funcgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> x, y = jnp.ones((4, 2)), jnp.ones((4, 1))
        >>> loss_fn = lambda m: F.mse_loss(m(x), y)
        >>> before = float(loss_fn(model))
        >>> opt.step(funcgrad.grad(loss_fn)(model))     # a module of gradients
        >>> float(loss_fn(model)) < before
        True
    """

    _state_keys = ()

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.param_groups = []
        self.state = {}
        self._origin = None
        params = list(params)
        if not params:
            raise ValueError(f"{type(self).__name__}: got an empty parameter list")
        if isinstance(params[0], dict):
            for g in params:
                self.add_param_group(g)
        else:
            self.add_param_group({"params": params})

    def add_param_group(self, group):
        """Add a dict ``{"params": [...], **hyper-parameter overrides}``."""
        group = dict(group)
        ps = group["params"]
        if isinstance(ps, (Parameter, tuple)) and not isinstance(ps, list):
            ps = [ps]
        boxes = []
        for p in ps:
            if isinstance(p, tuple) and len(p) == 2:      # (name, Parameter) pairs
                name, p = p
                if isinstance(p, Parameter):
                    p._name = name
            if not isinstance(p, Parameter):
                raise TypeError(f"{type(self).__name__}: parameters must be nn.Parameter boxes "
                                f"(model.parameters()), got {type(p).__name__}")
            boxes.append(p)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in boxes):
            raise ValueError("some parameters appear in more than one parameter group")
        group["params"] = boxes
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        self.param_groups.append(group)
        for p in boxes:
            init = self._eager_state(p, group)
            if init is not None:
                self.state[p] = init

    def _eager_state(self, p, group):
        st = self._init_state(p.data, None, group, _flags(group))
        return _placed_like(st, p.data) if st else None

    # --- gradients -----------------------------------------------------------------------------
    def _all_params(self):
        return [p for g in self.param_groups for p in g["params"]]

    def _grads_for(self, grads):
        params = self._all_params()
        if grads is None:
            return [p.grad for p in params]
        if isinstance(grads, Module):
            named = {n: b.data for n, b in grads.named_parameters(remove_duplicate=False)}
            return [named.get(p._name) for p in params]
        if isinstance(grads, dict):
            out = []
            for p in params:
                g = grads.get(p._name)
                out.append(g.data if isinstance(g, Parameter) else g)
            if all(g is None for g in out) and grads:
                raise KeyError(f"{type(self).__name__}.step: none of the gradient keys "
                               f"{sorted(grads)[:5]}... names a parameter of this optimizer "
                               f"(parameter names: {[p._name for p in params][:5]}...)")
            return out
        if isinstance(grads, (list, tuple)):
            if len(grads) != len(params):
                raise ValueError(f"{type(self).__name__}.step: got {len(grads)} gradients for "
                                 f"{len(params)} parameters")
            return [g.data if isinstance(g, Parameter) else g for g in grads]
        raise TypeError(f"{type(self).__name__}.step: grads must be a gradient module, a "
                        f"name-keyed dict, a list or None, got {type(grads).__name__}")

    # --- the update ------------------------------------------------------------------------------
    def step(self, grads=None, closure=None):
        """Apply one update to every parameter that has a gradient and ``requires_grad``.

        Example:
            >>> w = nn.Parameter(jnp.array([1.0, 2.0]))
            >>> opt = optim.SGD([w], lr=0.5)
            >>> opt.step([jnp.array([1.0, 1.0])])    # or a gradient module, or a dict by name
            >>> w.data
            Array([0.5, 1.5], dtype=float32)
            >>> w.grad = jnp.array([1.0, 0.0])
            >>> opt.step()                            # no argument: each parameter's .grad
            >>> w.data
            Array([0. , 1.5], dtype=float32)
        """
        loss = closure() if closure is not None else None
        gs = self._grads_for(grads)
        params = self._all_params()
        traced = any(isinstance(g, Tracer) for g in gs if g is not None) or any(
            isinstance(p.data, Tracer) for p in params)
        items = []
        i = 0
        for gi, group in enumerate(self.param_groups):
            for p in group["params"]:
                g = gs[i]
                i += 1
                if g is None or not p.requires_grad:
                    continue
                items.append((gi, p, g))
        if not items:
            return loss
        if traced or not interpreters.is_eager():
            if self._origin is None:
                raise TypeError(
                    f"{type(self).__name__}.step: called with traced gradients on an optimizer "
                    f"that is not an argument of the transformation. Pass the optimizer (and "
                    f"the model) as arguments of the jitted function, e.g. "
                    f"jit(lambda model, opt, x, y: ...)(model, opt, x, y), so its parameters "
                    f"and state are inputs and the update is written back")
            self._apply(items)
        else:
            self._apply_compiled(items)
        return loss

    def _hyper(self, group):
        return {k: v for k, v in group.items() if k != "params"}

    def _flags_for(self, gi):
        fl = self.__dict__.get("_group_flags")
        return fl[gi] if fl is not None else _flags(self.param_groups[gi])

    def _apply(self, items):
        for gi, p, g in items:
            group = self.param_groups[gi]
            f = self._flags_for(gi)
            st = self.state.get(p)
            if not st:
                st = self._init_state(p.data, g, group, f)
            new_p, new_st = self._update(p.data, g, st, self._hyper(group), f)
            self._set_param(p, new_p)
            self._set_state(p, new_st)

    def _apply_compiled(self, items):
        """Eager step: one compiled program updates every parameter (PyTorch's multi-tensor
        "foreach" habit), instead of a few eager operations per parameter.

        The program is cached per static structure (which group each parameter belongs to,
        the groups' static flags) and, inside ``jit``, per parameter/state avals. Its inputs
        are one flat pytree of arrays and Python-number hyper-parameters, so a call is one
        flatten, one dict lookup and one execute (``JitFunction``'s pytree fast path); a
        changed learning rate is a new runtime value, not a new trace.
        """
        flags = tuple(tuple(sorted(_flags(g).items())) for g in self.param_groups)
        static = (tuple([gi for gi, _, _ in items]), flags)
        programs = self.__dict__.get("_compiled")
        if programs is None:
            programs = self.__dict__["_compiled"] = {}
        fn = programs.get(static)
        if fn is None:
            fn = programs[static] = self._update_program(static)
        hypers = [self._numeric_hyper(g) for g in self.param_groups]
        state = self.state
        ps, gs, sts = [], [], []
        for _, p, g in items:
            ps.append(p.data)
            gs.append(g)
            sts.append(state.get(p, {}))
        new_ps, new_sts = fn(hypers, ps, gs, sts)
        for (_, p, _), np_, ns in zip(items, new_ps, new_sts):
            p.data = np_
            state[p] = ns

    def _update_program(self, static):
        """The jitted update of all parameters for one static structure (see
        ``_apply_compiled``)."""
        from funcgrad.transforms.jit import jit
        groups_of, flags = static
        flags = [dict(f) for f in flags]

        def update_all(hypers, ps, gs, sts):
            merged = [self._merge(h, gi) for gi, h in enumerate(hypers)]
            outs_p, outs_s = [], []
            for gi, p, g, st in zip(groups_of, ps, gs, sts):
                if not st:
                    st = self._init_state(p, g, merged[gi], flags[gi])
                np_, ns = self._update(p, g, st, merged[gi], flags[gi])
                outs_p.append(np_)
                outs_s.append(ns)
            return outs_p, outs_s
        update_all.__name__ = f"{type(self).__name__}_step"
        return jit(update_all)

    def _numeric_hyper(self, group):
        return {k: v for k, v in group.items() if k != "params" and _is_numeric_tree(v)}

    def _merge(self, numeric, gi):
        h = self._hyper(self.param_groups[gi])
        h.update(numeric)
        return h

    def _set_param(self, p, value):
        if isinstance(value, Tracer):
            origin = self.__dict__.get("_box_origin", {}).get(id(p))
            p.data = value
            mutable_state.write(origin, "data", value, _set_box)
        else:
            p.data = value

    def _set_state(self, p, st):
        self.state[p] = st
        origin_opt = self._origin
        if origin_opt is not None:
            origin_p = self._box_origin.get(id(p))
            for k, v in st.items():
                if isinstance(v, Tracer):
                    mutable_state.write(origin_opt, (origin_p, k), v, _set_opt_state)

    def zero_grad(self, set_to_none=True):
        for p in self._all_params():
            p.grad = None

    # --- the pure (functional) form ------------------------------------------------------------
    def init(self, params):
        """Optimizer state for a pytree of arrays ``params`` (pure; usable inside jit).

        Example:
            >>> opt = optim.Adam([nn.Parameter(jnp.zeros(2))], lr=0.1)
            >>> state = opt.init({"w": jnp.zeros(2)})
            >>> sorted(state["w"])
            ['exp_avg', 'exp_avg_sq', 'step']
        """
        group = self.param_groups[0]
        f = _flags(group)
        return tree_util.tree_map(lambda p: self._init_state(p, p, group, f), params)

    def update(self, grads, state, params, group=0):
        """(new_params, new_state) for pytrees ``grads``/``params`` (pure; usable in jit),
        with the hyper-parameters of param group ``group``.

        Example:
            >>> opt = optim.SGD([nn.Parameter(jnp.zeros(2))], lr=0.1)
            >>> params = {"w": jnp.array([1.0, 2.0])}
            >>> state = opt.init(params)
            >>> params, state = opt.update({"w": jnp.array([1.0, -1.0])}, state, params)
            >>> params
            {'w': Array([0.9, 2.1], dtype=float32)}
        """
        hyper = self._hyper(self.param_groups[group])
        f = self._flags_for(group)
        p_leaves, treedef = tree_util.tree_flatten(params)
        g_leaves = treedef.flatten_up_to(grads)
        s_leaves = treedef.flatten_up_to(state)
        new_p, new_s = [], []
        for p, g, s in zip(p_leaves, g_leaves, s_leaves):
            if not s:
                s = self._init_state(p, g, hyper, f)
            a, b = self._update(p, g, s, hyper, f)
            new_p.append(a)
            new_s.append(b)
        return treedef.unflatten(new_p), treedef.unflatten(new_s)

    # --- state dicts -----------------------------------------------------------------------------
    def state_dict(self):
        """PyTorch's format: ``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}``."""
        index = {id(p): i for i, p in enumerate(self._all_params())}
        groups = []
        for g in self.param_groups:
            d = {k: v for k, v in g.items() if k != "params"}
            d["params"] = [index[id(p)] for p in g["params"]]
            groups.append(d)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Restore hyper-parameters and per-parameter state saved by ``state_dict``."""
        import funcgrad.numpy as jnp
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{type(self).__name__}.load_state_dict: {len(groups)} parameter "
                             f"groups in the state dict, {len(self.param_groups)} here")
        params = self._all_params()
        for saved, g in zip(groups, self.param_groups):
            if len(saved["params"]) != len(g["params"]):
                raise ValueError(f"{type(self).__name__}.load_state_dict: a parameter group "
                                 f"has {len(saved['params'])} parameters in the state dict and "
                                 f"{len(g['params'])} here")
            for k, v in saved.items():
                if k != "params":
                    g[k] = v
        self.state = {}
        for i, s in state_dict["state"].items():
            p = params[int(i)]
            # PyTorch writes None for state it has not made yet (SGD's momentum buffer
            # before the first step, or without momentum): nothing to restore
            st = {k: (v if _is_number(v) else jnp.asarray(np.asarray(v)))
                  for k, v in s.items() if v is not None}
            st = self._completed_state(st, p.data)
            if st:
                self.state[p] = _placed_like(st, p.data)

    def _completed_state(self, st, p):
        """Per-parameter state loaded from a state dict, with what this optimizer keeps
        beyond PyTorch's entries filled in (``SGD`` overrides it)."""
        return st

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(k for k in g if k != "params"):
                lines.append(f"    {k}: {g[k]}")
        return "\n".join(lines) + "\n)"


def _placed_like(state, param):
    """Optimizer state of a parameter laid out over a mesh goes on the mesh too: arrays of the
    parameter's shape with its sharding, the others (step counters) replicated."""
    sharding = getattr(param, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    if mesh is None:
        return state
    from funcgrad.lowering.array import device_put
    from funcgrad.sharding import NamedSharding, PartitionSpec
    replicated = NamedSharding(mesh, PartitionSpec())
    return {k: device_put(v, sharding if getattr(v, "shape", None) == param.shape
                          else replicated) if hasattr(v, "shape") else v
            for k, v in state.items()}


def _flags(group):
    """Static truthiness of scalar hyper-parameters (code paths may branch on them)."""
    out = {}
    for k, v in group.items():
        if k == "params":
            continue
        if isinstance(v, Tracer):
            continue
        if _is_number(v) or isinstance(v, bool):
            out[k] = bool(v)
        elif isinstance(v, (str, type(None))):
            out[k] = v
    return out


def _is_numeric_tree(v):
    t = type(v)
    if t is float or t is int:     # the common hyper-parameters, without a flatten
        return True
    if t is bool or t is str or v is None:
        return False
    leaves = tree_util.tree_leaves(v)
    return bool(leaves) and all(_is_number(x) or hasattr(x, "aval") for x in leaves)


def _set_box(box, key, value):
    box.data = value


def _set_opt_state(opt, key, value):
    p, k = key
    opt.state.setdefault(p, {})[k] = value


# --- optimizers are pytrees --------------------------------------------------------------------
def _flatten_opt(opt):
    """The optimizer's leaves as one flat list of children (per group: its parameters' data,
    its numeric hyper-parameters, its parameters' state values) and what rebuilds it: one
    list, no nested containers for the registry to walk (every eager call of a jitted training
    step flattens the optimizer)."""
    state = opt.state
    children = []
    layout = []
    for gi, g in enumerate(opt.param_groups):
        numeric, fixed, flags = _group_plan(opt, gi, g)
        ps = g["params"]
        children += [p.data for p in ps]
        children += [g[k] for k in numeric]
        keys = []
        for p in ps:
            st = state.get(p)
            if st:
                ks = tuple(st) if len(st) == 1 else tuple(sorted(st))
                children += [st[k] for k in ks]
                keys.append(ks)
            else:
                keys.append(())
        layout.append((numeric, fixed, flags, tuple(keys)))
    return children, (type(opt), opt._origin or opt, tuple(layout))


def _group_plan(opt, gi, group):
    """(names of the group's numeric (traced) hyper-parameters, the others as sorted (name,
    value) pairs, the sorted static flags) for a pytree flatten of ``opt`` (types count: True
    is static, 1 is traced). Every eager call of a jitted training step flattens the
    optimizer, so the plan is kept on it with the group's values: a group whose values are the
    very same objects as at its last flatten reuses it after one identity test per value."""
    d = opt.__dict__
    values = [*group.values()]
    recent = d.get("_recent_plans")
    hit = recent.get(gi) if recent is not None else None
    if hit is not None and len(hit[0]) == len(values) and all(map(is_, hit[0], values)) \
            and hit[1] == [*group]:
        return hit[2]
    numeric, fixed = [], []
    for k, v in group.items():
        if k != "params":
            if _is_numeric_tree(v):
                numeric.append(k)
            else:
                fixed.append((k, v))
    plan = (tuple(numeric), tuple(sorted(fixed)), tuple(sorted(opt._flags_for(gi).items())))
    # kept where every value is hashable (a list changed in place would not be seen), and not
    # on the copies made inside a trace (they carry "_group_flags")
    if "_group_flags" not in d:
        try:
            hash(tuple(v for k, v in group.items() if k != "params"))
        except TypeError:         # an unhashable hyper-parameter (an Array): classified anew
            return plan
        d.setdefault("_recent_plans", {})[gi] = (values, [*group], plan)
    return plan


def _unflatten_opt(aux, children):
    cls, origin, layout = aux
    opt = cls.__new__(cls)
    opt.__dict__.update({k: v for k, v in origin.__dict__.items()
                         if k not in ("_compiled", "_recent_plans")})
    opt._origin = origin
    opt.param_groups = []
    opt.state = {}
    opt._box_origin = {}
    opt._group_flags = [dict(flags) for _, _, flags, _ in layout]
    leaves = iter(children)
    for og, (numeric, _, _, keys) in zip(origin.param_groups, layout):
        g = dict(og)
        boxes = []
        for ob in og["params"]:
            b = _new_parameter(next(leaves), ob.requires_grad)
            b._name = ob._name
            opt._box_origin[id(b)] = ob
            boxes.append(b)
        for k in numeric:
            g[k] = next(leaves)
        for b, ks in zip(boxes, keys):
            if ks:
                opt.state[b] = {k: next(leaves) for k in ks}
        g["params"] = boxes
        opt.param_groups.append(g)
    return opt


class _OptMeta:
    pass


def register_optimizer_class(cls):
    tree_util.register_pytree_node(cls, _flatten_opt, _unflatten_opt)
    return cls


Optimizer.__init_subclass__ = classmethod(lambda cls, **kw: register_optimizer_class(cls))
register_optimizer_class(Optimizer)
