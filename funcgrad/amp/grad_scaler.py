"""``GradScaler``: dynamic loss scaling for float16 training (PyTorch's ``torch.amp.GradScaler``).

The scaler is state like an optimizer: a pytree (leaves: the scale and the growth tracker) that
can be an argument of a jitted training step, whose updates are written back when the call
returns. The decision to skip an update whose gradients overflowed is a select, not a Python
branch, whenever the gradients are traced, so the same compiled step serves every iteration.
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad import tree_util
from funcgrad.core import interpreters, mutable_state
from funcgrad.core.interpreters import Tracer


def _is_array(x):
    return hasattr(x, "dtype") and hasattr(x, "shape")


class GradScaler:
    """Scale the loss so float16 gradients do not underflow, unscale the gradients, skip steps
    whose gradients hold inf or NaN and adapt the scale (PyTorch's ``GradScaler``: the same
    arguments, methods, ``state_dict`` keys and scale sequence).

    ``scale(loss)`` multiplies by the scale; ``unscale(grads)`` returns the gradients divided by
    it and records whether any is inf/NaN; ``step(opt, grads)`` unscales (unless ``unscale``
    already did) and applies ``opt.step`` unless a gradient overflowed; ``update()`` multiplies
    the scale by ``backoff_factor`` after an overflow, and by ``growth_factor`` after
    ``growth_interval`` steps without one.

    Example:
        >>> scaler = funcgrad.amp.GradScaler("cuda")
        >>> @funcgrad.jit
        ... def train_step(model, opt, scaler, x, y):
        ...     def loss_fn(model):
        ...         with funcgrad.autocast("cuda"):
        ...             return scaler.scale(F.cross_entropy(model(x), y))
        ...     loss, grads = funcgrad.value_and_grad(loss_fn)(model)
        ...     scaler.step(opt, grads)
        ...     scaler.update()
        ...     return loss
    """

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0,
                 backoff_factor=0.5, growth_interval=2000, enabled=True):
        if not isinstance(device, str):
            raise TypeError(f"GradScaler: device must be a string such as 'cuda' or 'cpu', got "
                            f"{device!r}")
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1.0, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got "
                             f"{backoff_factor}")
        if not isinstance(growth_interval, (int, np.integer)) or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got "
                             f"{growth_interval!r}")
        if not init_scale > 0:
            raise ValueError(f"GradScaler: init_scale must be > 0, got {init_scale}")
        self._device = device
        self._enabled = bool(enabled)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._scale = jnp.asarray(init_scale, dtype=jnp.float32)
        self._growth_tracker = jnp.asarray(0, dtype=jnp.int32)
        self._found_inf = None      # set by unscale, read by step and update
        self._unscaled = False
        self._origin = None         # the scaler a traced copy (a jit argument) writes back to

    # --- state ---------------------------------------------------------------------------------
    def _set(self, name, value):
        if isinstance(value, Tracer):
            if self._origin is None:
                raise TypeError(
                    "GradScaler: updated with traced values on a scaler that is not an "
                    "argument of the transformation. Pass the scaler as an argument of the "
                    "jitted function, e.g. jit(lambda model, opt, scaler, x, y: ...)"
                    "(model, opt, scaler, x, y), so its state is written back")
            mutable_state.write(self._origin, name, value, _set_attr)
        setattr(self, name, value)

    def is_enabled(self):
        """Whether this scaler scales at all. Example: ``scaler.is_enabled()``."""
        return self._enabled

    def get_scale(self):
        """The current scale as a Python float (1.0 when disabled; an array while traced).

        Example:
            >>> funcgrad.amp.GradScaler("cpu", init_scale=8.0).get_scale()
            8.0
        """
        if not self._enabled:
            return 1.0
        if isinstance(self._scale, Tracer):
            return self._scale
        return float(self._scale)

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        """PyTorch's keys: ``scale``, ``growth_factor``, ``backoff_factor``, ``growth_interval``,
        ``_growth_tracker`` (empty when disabled).

        Example:
            >>> funcgrad.amp.GradScaler("cpu").state_dict()["scale"]
            65536.0
        """
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": int(self._growth_tracker)}

    def load_state_dict(self, state_dict):
        """Restore what ``state_dict()`` (this class's or PyTorch's) returned.

        Example:
            >>> scaler = funcgrad.amp.GradScaler("cpu")
            >>> scaler.load_state_dict({"scale": 1024.0, "growth_factor": 2.0,   # torch's keys
            ...     "backoff_factor": 0.5, "growth_interval": 2000, "_growth_tracker": 7})
            >>> scaler.get_scale()
            1024.0
        """
        if not self._enabled:
            raise RuntimeError("GradScaler.load_state_dict: this scaler is disabled")
        if not state_dict:
            raise RuntimeError("GradScaler.load_state_dict: the state dict is empty (saved "
                               "from a disabled scaler?)")
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval",
                   "_growth_tracker"} - set(state_dict)
        if missing:
            raise KeyError(f"GradScaler.load_state_dict: missing keys {sorted(missing)}")
        self._scale = jnp.asarray(float(state_dict["scale"]), dtype=jnp.float32)
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = jnp.asarray(int(state_dict["_growth_tracker"]), dtype=jnp.int32)

    # --- scaling -------------------------------------------------------------------------------
    def scale(self, outputs):
        """``outputs`` (an array or a pytree of them) times the scale, in their own dtype.

        Example:
            >>> scaler = funcgrad.amp.GradScaler("cpu", init_scale=4.0)
            >>> scaler.scale(jnp.float32(1.5))
            Array(6., dtype=float32)
        """
        if not self._enabled:
            return outputs

        def one(x):
            x = jnp.asarray(x)
            return x * self._scale.astype(x.dtype)
        return tree_util.tree_map(one, outputs)

    def unscale(self, grads):
        """``grads`` divided by the scale; records whether any is inf or NaN (for ``step``
        and ``update``). Call it before clipping gradients.

        Example:
            >>> scaler = funcgrad.amp.GradScaler("cpu", init_scale=4.0)
            >>> scaler.unscale([jnp.array([8.0, 2.0])])
            [Array([2. , 0.5], dtype=float32)]
        """
        if not self._enabled:
            return grads
        if self._unscaled:
            raise RuntimeError("GradScaler.unscale: already called since the last update()")
        inv = 1.0 / self._scale
        leaves, treedef = tree_util.tree_flatten(grads)
        found = jnp.asarray(False)
        out = []
        for g in leaves:
            if not _is_array(g) or not jnp.issubdtype(g.dtype, jnp.inexact):
                out.append(g)
                continue
            found = found | ~jnp.all(jnp.isfinite(g))
            out.append(g * inv.astype(g.dtype))
        self._found_inf = found
        self._unscaled = True
        return tree_util.tree_unflatten(treedef, out)

    def step(self, optimizer, grads=None):
        """Unscale ``grads`` (unless ``unscale`` already did) and apply ``optimizer.step`` to
        them, unless a gradient is inf or NaN. Eagerly the skip is a branch; under ``jit`` the
        update runs and a select keeps the old parameters and optimizer state.

        Example:
            >>> w = nn.Parameter(jnp.array([1.0, 2.0]))
            >>> opt = optim.SGD([w], lr=0.5)
            >>> scaler = funcgrad.amp.GradScaler("cpu", init_scale=2.0)
            >>> scaler.step(opt, [jnp.array([2.0, jnp.inf])])   # inf: the step is skipped
            >>> w.data
            Array([1., 2.], dtype=float32)
        """
        if not self._enabled:
            return optimizer.step(grads)
        if grads is None:
            raise TypeError("GradScaler.step: pass the gradients, step(optimizer, grads)")
        if not self._unscaled:
            grads = self.unscale(grads)
        found = self._found_inf
        if not isinstance(found, Tracer) and interpreters.is_eager():
            return None if bool(found) else optimizer.step(grads)
        return _step_with_select(optimizer, grads, found)

    def update(self, new_scale=None):
        """Set the scale for the next iteration: ``new_scale`` if given, otherwise backed off
        after an overflow and grown after ``growth_interval`` clean steps.

        Example:
            >>> scaler = funcgrad.amp.GradScaler("cpu", init_scale=8.0)
            >>> _ = scaler.unscale([jnp.array([jnp.nan])])      # an overflow: back off
            >>> scaler.update()
            >>> scaler.get_scale()
            4.0
        """
        if not self._enabled:
            return
        if new_scale is not None:
            self._set("_scale", jnp.asarray(new_scale, dtype=jnp.float32).reshape(()))
        else:
            if self._found_inf is None:
                raise RuntimeError("GradScaler.update: no inf checks were recorded; call "
                                   "unscale() or step() first")
            found = self._found_inf
            scale, tracker = self._scale, self._growth_tracker
            successful = tracker + 1
            grow = successful >= self._growth_interval
            grown = scale * jnp.float32(self._growth_factor)
            grown = jnp.where(jnp.isfinite(grown), grown, scale)
            new_scale = jnp.where(found, scale * jnp.float32(self._backoff_factor),
                                  jnp.where(grow, grown, scale))
            new_tracker = jnp.where(found | grow, jnp.int32(0), successful).astype(jnp.int32)
            self._set("_scale", new_scale.astype(jnp.float32))
            self._set("_growth_tracker", new_tracker)
        self._found_inf = None
        self._unscaled = False

    def __repr__(self):
        return (f"GradScaler({self._device!r}, scale={self._scale}, "
                f"growth_factor={self._growth_factor}, backoff_factor={self._backoff_factor}, "
                f"growth_interval={self._growth_interval}, enabled={self._enabled})")


def _set_attr(target, key, value):
    setattr(target, key, value)


def _step_with_select(opt, grads, found):
    """``opt.step(grads)``, then every parameter and state array chosen between old and new by
    ``found`` (a traced bool): one compiled step whether or not the gradients overflowed."""
    gs = opt._grads_for(grads)
    items = []
    i = 0
    for gi, group in enumerate(opt.param_groups):
        for p in group["params"]:
            items.append((gi, p, gs[i]))
            i += 1
    before = [(p.data, opt.state.get(p)) for _, p, _ in items]
    out = opt.step(grads)
    for (gi, p, g), (old_data, old_state) in zip(items, before):
        if g is None or not p.requires_grad:
            continue
        new_state = opt.state.get(p)
        if p.data is not old_data:
            opt._set_param(p, jnp.where(found, old_data, p.data))
        if new_state:
            if not old_state:    # a skipped first step leaves the state as it starts
                old_state = opt._init_state(old_data, g, opt.param_groups[gi],
                                            opt._flags_for(gi))
            opt._set_state(p, {k: jnp.where(found, old_state[k], v)
                               for k, v in new_state.items()})
    return out


def _flatten(s):
    aux = (s._origin or s, s._device, s._enabled, s._growth_factor, s._backoff_factor,
           s._growth_interval)
    return (s._scale, s._growth_tracker), aux


def _unflatten(aux, children):
    origin, device, enabled, gf, bf, gi = aux
    s = GradScaler.__new__(GradScaler)
    s.__dict__.update(origin.__dict__)
    s._device, s._enabled = device, enabled
    s._growth_factor, s._backoff_factor, s._growth_interval = gf, bf, gi
    s._scale, s._growth_tracker = children
    s._found_inf, s._unscaled = None, False
    s._origin = origin
    return s


tree_util.register_pytree_node(GradScaler, _flatten, _unflatten)
