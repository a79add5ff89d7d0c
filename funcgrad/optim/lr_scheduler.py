"""Learning-rate schedulers with PyTorch's names and formulas.

``scheduler.step()`` advances one epoch (or one batch for OneCycleLR and CyclicLR) and writes
the new ``lr`` into every param group. As in PyTorch, ``step()`` computes the chainable form
``get_lr()`` (StepLR, MultiStepLR, ExponentialLR, ConstantLR, LinearLR, PolynomialLR,
CosineAnnealingLR and MultiplicativeLR update each group's *current* lr, so several schedulers
on one optimizer compose, e.g. in ``ChainedScheduler``), while ``step(epoch)`` uses the closed
form ``lr_at(base_lr, epoch)``. Because ``lr`` is a numeric leaf of the optimizer pytree, a
jitted training step that takes the optimizer as an argument does not retrace when it changes.

Example:
    >>> w = nn.Parameter(jnp.zeros(1))
    >>> opt = optim.SGD([w], lr=1.0)
    >>> sched = optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    >>> for epoch in range(5):
    ...     opt.step([jnp.ones(1)])       # one epoch of training
    ...     sched.step()
    ...     print(epoch, round(sched.get_last_lr()[0], 4))
    0 1.0
    1 0.1
    2 0.1
    3 0.01
    4 0.01
"""
import bisect
import math


class LRScheduler:
    """Base class: subclasses define the closed form ``lr_at(base_lr, epoch)``, and/or
    ``get_lr()`` (PyTorch's name: the new lr of every group at ``self.last_epoch``, which may
    read the groups' current lr; it defaults to the closed form). ``self._is_initial`` is
    True during the step made by the constructor, as in PyTorch.

    Example:
        >>> from funcgrad.optim.lr_scheduler import LRScheduler
        >>> class Halving(LRScheduler):
        ...     def lr_at(self, base_lr, epoch):
        ...         return base_lr * 0.5 ** epoch
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = Halving(opt)
        >>> sched.step(); sched.step()
        >>> sched.get_last_lr()
        [0.25]
    """

    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._is_initial = True
        try:
            self.step()
        finally:
            del self._is_initial

    def lr_at(self, base_lr, epoch):
        raise TypeError(f"{type(self).__name__} must define lr_at or get_lr")

    def get_lr(self):
        """The lr of each param group at ``self.last_epoch`` (the closed form by default)."""
        return [self.lr_at(base, self.last_epoch) for base in self.base_lrs]

    def get_last_lr(self):
        """The lr of each param group after the last ``step``."""
        return list(self._last_lr)

    def _group_lrs(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    def step(self, epoch=None):
        """Advance one epoch (``get_lr``), or jump to ``epoch`` (the closed form ``lr_at``
        when the scheduler has one)."""
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = int(epoch)
            closed = type(self).lr_at is not LRScheduler.lr_at
            values = ([self.lr_at(base, self.last_epoch) for base in self.base_lrs] if closed
                      else self.get_lr())
        for g, lr in zip(self.optimizer.param_groups, values):
            g["lr"] = float(lr)
        self._last_lr = self._group_lrs()

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state):
        self.__dict__.update(state)


_LRScheduler = LRScheduler


class StepLR(LRScheduler):
    """lr = base * gamma ** (epoch // step_size). Example: ``StepLR(opt, 30, gamma=0.1)``."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** (epoch // self.step_size)

    def get_lr(self):
        e = self.last_epoch
        if e == 0 or e % self.step_size:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]


class MultiStepLR(LRScheduler):
    """lr = base * gamma ** (number of milestones passed). Example: ``MultiStepLR(opt, [30, 80])``."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** sum(1 for m in self.milestones if epoch >= m)

    def get_lr(self):
        hits = self.milestones.count(self.last_epoch)     # a repeated milestone decays twice
        return [lr * self.gamma ** hits for lr in self._group_lrs()]


class ExponentialLR(LRScheduler):
    """lr = base * gamma ** epoch. Example: ``ExponentialLR(opt, 0.95)``."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** epoch

    def get_lr(self):
        if self._is_initial:
            return self._group_lrs()
        return [lr * self.gamma for lr in self._group_lrs()]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2.

    Example:
        >>> from funcgrad.optim.lr_scheduler import CosineAnnealingLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = CosineAnnealingLR(opt, T_max=4)
        >>> lrs = []
        >>> for epoch in range(5):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [1.0, 0.8536, 0.5, 0.1464, 0.0]
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch /
                                                                    self.T_max)) / 2

    def get_lr(self):
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return self._group_lrs()
        if (e - 1 - T) % (2 * T) == 0:           # leaving the minimum: the ratio form is 0/0
            return [lr + (base - lo) * (1 - math.cos(math.pi / T)) / 2
                    for lr, base in zip(self._group_lrs(), self.base_lrs)]
        ratio = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T))
        return [ratio * (lr - lo) + lo for lr in self._group_lrs()]


class LambdaLR(LRScheduler):
    """lr = base * lr_lambda(epoch) (one lambda, or one per group). Example: ``LambdaLR(opt, lambda e: 0.9 ** e)``."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else \
            [lr_lambda] * n
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * fn(self.last_epoch) for base, fn in zip(self.base_lrs, self.lr_lambdas)]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (per batch): warm up from max_lr/div_factor to max_lr over
    ``pct_start`` of the steps, then anneal to max_lr/(div_factor*final_div_factor); momentum
    (or Adam's beta1) cycles inversely between ``max_momentum`` and ``base_momentum``.

    Example:
        >>> from funcgrad.optim.lr_scheduler import OneCycleLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = OneCycleLR(opt, max_lr=0.1, total_steps=6)
        >>> lrs = []
        >>> for epoch in range(6):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [0.004, 0.0994, 0.0812, 0.0463, 0.0133, 0.0]
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        self.total_steps = int(total_steps)
        n = len(optimizer.param_groups)
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * n
        self.anneal = self._cos if anneal_strategy == "cos" else self._linear
        self.cycle_momentum = cycle_momentum
        end1 = float(pct_start * self.total_steps) - 1
        if three_phase:
            end2 = float(2 * pct_start * self.total_steps) - 2
            self.phases = [(end1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                           (end2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                           (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                            "max_momentum")]
        else:
            self.phases = [(end1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                           (self.total_steps - 1, "max_lr", "min_lr", "base_momentum",
                            "max_momentum")]
        for g, m in zip(optimizer.param_groups, max_lrs):
            g["initial_lr"] = m / div_factor
            g["max_lr"] = m
            g["min_lr"] = g["initial_lr"] / final_div_factor
            if cycle_momentum:
                self._use_beta = "betas" in g
                g["max_momentum"], g["base_momentum"] = max_momentum, base_momentum
                if self._use_beta:
                    g["betas"] = (max_momentum, g["betas"][1])
                elif "momentum" in g:
                    g["momentum"] = max_momentum
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _cos(start, end, pct):
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _linear(start, end, pct):
        return (end - start) * pct + start

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        t = self.last_epoch
        if t > self.total_steps:
            raise ValueError(f"OneCycleLR: stepped {t} times for total_steps="
                             f"{self.total_steps}")
        self._last_lr = []
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self.phases):
                if t <= end or i == len(self.phases) - 1:
                    pct = (t - start) / (end - start) if end != start else 1.0
                    g["lr"] = float(self.anneal(g[lr0], g[lr1], pct))
                    if self.cycle_momentum:
                        m = float(self.anneal(g[m0], g[m1], pct))
                        if "betas" in g:
                            g["betas"] = (m, g["betas"][1])
                        elif "momentum" in g:
                            g["momentum"] = m
                    break
                start = end
            self._last_lr.append(g["lr"])


class ConstantLR(LRScheduler):
    """lr = base * factor for the first ``total_iters`` epochs, then base.

    Example:
        >>> from funcgrad.optim.lr_scheduler import ConstantLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = ConstantLR(opt, factor=0.5, total_iters=2)
        >>> lrs = []
        >>> for epoch in range(4):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [0.5, 0.5, 1.0, 1.0]
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0.0 <= factor <= 1.0:
            raise ValueError(f"ConstantLR: factor must be in [0, 1], got {factor}")
        self.factor, self.total_iters = float(factor), int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * (self.factor if epoch < self.total_iters else 1.0)

    def get_lr(self):
        e = self.last_epoch
        if e == 0:
            return [lr * self.factor for lr in self._group_lrs()]
        if e != self.total_iters:
            return self._group_lrs()
        return [lr * (1.0 / self.factor) for lr in self._group_lrs()]


class LinearLR(LRScheduler):
    """lr = base * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) /
    total_iters): a linear warm-up (or decay) over ``total_iters`` epochs.

    Example:
        >>> from funcgrad.optim.lr_scheduler import LinearLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = LinearLR(opt, start_factor=0.1, total_iters=3)
        >>> lrs = []
        >>> for epoch in range(5):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [0.1, 0.4, 0.7, 1.0, 1.0]
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not 0.0 < start_factor <= 1.0 or not 0.0 <= end_factor <= 1.0:
            raise ValueError(f"LinearLR: start_factor must be in (0, 1] and end_factor in "
                             f"[0, 1], got {start_factor} and {end_factor}")
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        frac = min(epoch, self.total_iters) / self.total_iters
        return base * (self.start_factor + (self.end_factor - self.start_factor) * frac)

    def get_lr(self):
        e, a, b, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [lr * a for lr in self._group_lrs()]
        if self._is_initial or e > n:
            return self._group_lrs()
        ratio = 1.0 + (b - a) / (n * a + (e - 1) * (b - a))
        return [lr * ratio for lr in self._group_lrs()]


class PolynomialLR(LRScheduler):
    """lr = base * (1 - min(epoch, total_iters) / total_iters) ** power.

    Example:
        >>> from funcgrad.optim.lr_scheduler import PolynomialLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = PolynomialLR(opt, total_iters=4, power=2.0)
        >>> lrs = []
        >>> for epoch in range(5):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [1.0, 0.5625, 0.25, 0.0625, 0.0]
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = int(total_iters), float(power)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * (1.0 - min(epoch, self.total_iters) / self.total_iters) ** self.power

    def get_lr(self):
        e, n = self.last_epoch, self.total_iters
        if self._is_initial or e > n:
            return self._group_lrs()
        ratio = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [lr * ratio for lr in self._group_lrs()]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing restarted every T_i epochs, T_i = T_0 * T_mult ** (restarts so far):
    lr = eta_min + (base - eta_min) (1 + cos(pi T_cur / T_i)) / 2.

    Example:
        >>> from funcgrad.optim.lr_scheduler import CosineAnnealingWarmRestarts
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2)
        >>> lrs = []
        >>> for epoch in range(7):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [1.0, 0.5, 1.0, 0.8536, 0.5, 0.1464, 1.0]
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if int(T_0) <= 0 or int(T_mult) < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive integer and "
                             f"T_mult an integer >= 1, got {T_0} and {T_mult}")
        self.T_0, self.T_mult, self.eta_min = int(T_0), int(T_mult), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def _position(self, epoch):
        """(T_cur, T_i) at ``epoch``."""
        if epoch < self.T_0:
            return epoch, self.T_0
        if self.T_mult == 1:
            return epoch % self.T_0, self.T_0
        n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
        start = self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1)
        if epoch < start:                   # floating-point log landed one cycle late
            n -= 1
            start = self.T_0 * (self.T_mult ** n - 1) // (self.T_mult - 1)
        return epoch - start, self.T_0 * self.T_mult ** n

    def lr_at(self, base, epoch):
        t_cur, t_i = self._position(epoch)
        return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * t_cur / t_i)) / 2


class _OfSchedulers(LRScheduler):
    """A scheduler that drives the schedulers held in its attribute named ``_held``; its
    state dict carries theirs."""

    _held = "schedulers"

    def state_dict(self):
        held = self._held
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", held)}
        out[held] = [s.state_dict() for s in getattr(self, held)]
        return out

    def load_state_dict(self, state):
        state = dict(state)
        for s, sd in zip(getattr(self, self._held), state.pop(self._held)):
            s.load_state_dict(sd)
        self.__dict__.update(state)


class SequentialLR(_OfSchedulers):
    """Run ``schedulers`` one after another, switching at each epoch in ``milestones``; each
    scheduler counts its epochs from its own start (warm-up then decay).

    Example:
        >>> from funcgrad.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> warm = LinearLR(opt, start_factor=0.1, total_iters=2)
        >>> decay = CosineAnnealingLR(opt, T_max=4)
        >>> sched = SequentialLR(opt, [warm, decay], milestones=[2])
        >>> lrs = []
        >>> for epoch in range(6):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [0.1, 0.55, 1.0, 0.8536, 0.5, 0.1464]
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        self.schedulers, self.milestones = list(schedulers), [int(m) for m in milestones]
        if len(self.milestones) != len(self.schedulers) - 1:
            raise ValueError(f"SequentialLR: expected {len(self.schedulers) - 1} milestones "
                             f"for {len(self.schedulers)} schedulers, got "
                             f"{len(self.milestones)}")
        for i, s in enumerate(self.schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: scheduler {i} drives another optimizer")
        super().__init__(optimizer, last_epoch)

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        k = bisect.bisect_right(self.milestones, self.last_epoch)
        start = self.milestones[k - 1] if k else 0
        self.schedulers[k].step(self.last_epoch - start)
        self._last_lr = self.schedulers[k].get_last_lr()


class ReduceLROnPlateau(LRScheduler):
    """Multiply each group's lr by ``factor`` once a monitored metric has not improved for
    more than ``patience`` epochs (then wait ``cooldown`` epochs); never below ``min_lr``.
    ``step(metric)`` takes the epoch's metric, as PyTorch's does (``get_last_lr`` and the
    state dict come from ``LRScheduler``; the closed-form ``lr_at`` does not apply).

    Example:
        >>> from funcgrad.optim.lr_scheduler import ReduceLROnPlateau
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1)
        >>> for validation_loss in [3.0, 2.0, 2.0, 2.0, 2.0, 2.0]:
        ...     sched.step(validation_loss)
        ...     print(sched.get_last_lr())
        [1.0]
        [1.0]
        [1.0]
        [0.5]
        [0.5]
        [0.25]
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0.0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor must be < 1, got {factor}")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max' and "
                             f"threshold_mode 'rel' or 'abs', got {mode!r} and "
                             f"{threshold_mode!r}")
        n = len(optimizer.param_groups)
        min_lrs = list(min_lr) if isinstance(min_lr, (list, tuple)) else [min_lr] * n
        if len(min_lrs) != n:
            raise ValueError(f"ReduceLROnPlateau: expected {n} min_lr values, got "
                             f"{len(min_lrs)}")
        self.optimizer = optimizer
        self.mode, self.factor, self.patience = mode, float(factor), int(patience)
        self.threshold, self.threshold_mode = float(threshold), threshold_mode
        self.cooldown, self.min_lrs, self.eps = int(cooldown), [float(m) for m in min_lrs], eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _is_better(self, value):
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return value < (self.best * (1 - self.threshold) if rel else self.best - self.threshold)
        return value > (self.best * (1 + self.threshold) if rel else self.best + self.threshold)

    def step(self, metrics):
        value = float(metrics)
        self.last_epoch += 1
        if self._is_better(value):
            self.best, self.num_bad_epochs = value, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, floor in zip(self.optimizer.param_groups, self.min_lrs):
                new = max(g["lr"] * self.factor, floor)
                if g["lr"] - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]


def _per_group(name, optimizer, value):
    """``value`` for every param group: a list/tuple with one entry per group, or a scalar."""
    n = len(optimizer.param_groups)
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"expected {n} values for {name} (one per param group), got "
                             f"{len(value)}")
        return list(value)
    return [value] * n


class MultiplicativeLR(LRScheduler):
    """Multiply each group's current lr by ``lr_lambda(epoch)`` at every step after the
    first (one function, or one per group).

    Example:
        >>> from funcgrad.optim.lr_scheduler import MultiplicativeLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = MultiplicativeLR(opt, lr_lambda=lambda epoch: 0.5)
        >>> lrs = []
        >>> for epoch in range(4):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [1.0, 0.5, 0.25, 0.125]
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _per_group("lr_lambda", optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._group_lrs()
        return [lr * fn(self.last_epoch) for lr, fn in zip(self._group_lrs(), self.lr_lambdas)]


class CyclicLR(LRScheduler):
    """Cyclical learning rate (per batch): lr rises linearly from ``base_lr`` to ``max_lr``
    over ``step_size_up`` steps and falls back over ``step_size_down`` (default: the same),
    the amplitude scaled by ``mode``: "triangular" (constant), "triangular2" (halved every
    cycle) or "exp_range" (``gamma ** step``), or by a custom ``scale_fn`` of the cycle
    number or the step (``scale_mode``). With ``cycle_momentum`` the momentum (or Adam's
    beta1) cycles inversely between ``max_momentum`` and ``base_momentum``.

    Example:
        >>> from funcgrad.optim.lr_scheduler import CyclicLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = CyclicLR(opt, base_lr=0.0, max_lr=1.0, step_size_up=2,
        ...                  mode="triangular2")
        >>> lrs = []
        >>> for epoch in range(9):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.5, 0.0, 0.25, 0.5, 0.25, 0.0]
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, g in zip(base_lrs, optimizer.param_groups):
                g["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode must be 'triangular', 'triangular2' or "
                             f"'exp_range' when no scale_fn is given, got {mode!r}")
        self.mode, self.gamma = mode, float(gamma)
        self.scale_fn = scale_fn
        self.scale_mode = scale_mode if scale_fn is not None else \
            ("iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(f"CyclicLR: cycle_momentum needs an optimizer with a momentum "
                                 f"or betas hyper-parameter; {type(optimizer).__name__} has "
                                 f"neither (pass cycle_momentum=False)")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for m_max, m_base, g in zip(self.max_momentums, self.base_momentums,
                                            optimizer.param_groups):
                    self._set_momentum(g, m_max)
                    g["max_momentum"], g["base_momentum"] = m_max, m_base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, m):
        if self.use_beta1:
            group["betas"] = (m,) + tuple(group["betas"][1:])
        else:
            group["momentum"] = m

    def _scale(self, x):
        if self.scale_fn is not None:
            return self.scale_fn(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        e = self.last_epoch
        cycle = math.floor(1 + e / self.total_size)
        x = 1.0 + e / self.total_size - cycle
        frac = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self._scale(cycle if self.scale_mode == "cycle" else e)
        lrs = [base + (top - base) * frac * scale for base, top in zip(self.base_lrs,
                                                                        self.max_lrs)]
        if self.cycle_momentum:
            for g, m_base, m_max in zip(self.optimizer.param_groups, self.base_momentums,
                                        self.max_momentums):
                self._set_momentum(g, m_max - (m_max - m_base) * frac * scale)
        return lrs

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "scale_fn")}


class ChainedScheduler(_OfSchedulers):
    """Step several schedulers of one optimizer together: each ``step()`` calls every
    scheduler's ``step()`` in order, so chainable schedulers compose (ExponentialLR after
    ConstantLR multiplies the reduced lr, and so on), as PyTorch's.

    Example:
        >>> from funcgrad.optim.lr_scheduler import ChainedScheduler, ConstantLR, ExponentialLR
        >>> opt = optim.SGD([nn.Parameter(jnp.zeros(1))], lr=1.0)
        >>> sched = ChainedScheduler([ConstantLR(opt, factor=0.1, total_iters=2),
        ...                           ExponentialLR(opt, gamma=0.9)])
        >>> lrs = []
        >>> for epoch in range(4):
        ...     lrs.append(round(sched.get_last_lr()[0], 4))
        ...     sched.step()
        >>> lrs
        [0.1, 0.09, 0.81, 0.729]
    """

    _held = "_schedulers"

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, "
                             "but got no scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"ChainedScheduler: the scheduler at index {i} "
                                f"({type(s).__name__}) has no optimizer attribute")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"ChainedScheduler does not support ReduceLROnPlateau (its "
                                 f"step needs a metric), got one at index {i}")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler expects all schedulers to belong to the "
                                 f"same optimizer, but the {type(s).__name__} at index {i} "
                                 f"drives another one")
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = self._group_lrs()

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = self._group_lrs()
