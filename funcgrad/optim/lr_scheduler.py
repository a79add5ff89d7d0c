"""Learning-rate schedulers with PyTorch's names and formulas (closed forms).

``scheduler.step()`` advances one epoch (or one batch for OneCycleLR) and writes the new
``lr`` into every param group. Because ``lr`` is a numeric leaf of the optimizer pytree, a
jitted training step that takes the optimizer as an argument does not retrace when it changes.

Example:
    >>> sched = funcgrad.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.1)
    >>> for epoch in range(30): train(...); sched.step()
"""
import math


class LRScheduler:
    """Base class: subclasses define ``lr_at(base_lr, epoch)``."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", g["lr"])
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, base_lr, epoch):
        raise TypeError(f"{type(self).__name__} must define lr_at")

    def get_last_lr(self):
        """The lr of each param group after the last ``step``."""
        return list(self._last_lr)

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        self._last_lr = []
        for g, base in zip(self.optimizer.param_groups, self.base_lrs):
            g["lr"] = float(self.lr_at(base, self.last_epoch))
            self._last_lr.append(g["lr"])

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


class MultiStepLR(LRScheduler):
    """lr = base * gamma ** (number of milestones passed). Example: ``MultiStepLR(opt, [30, 80])``."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** sum(1 for m in self.milestones if epoch >= m)


class ExponentialLR(LRScheduler):
    """lr = base * gamma ** epoch. Example: ``ExponentialLR(opt, 0.95)``."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = float(gamma)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return base * self.gamma ** epoch


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2.

    Example:
        >>> CosineAnnealingLR(opt, T_max=100)
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, base, epoch):
        return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * epoch /
                                                                    self.T_max)) / 2


class LambdaLR(LRScheduler):
    """lr = base * lr_lambda(epoch) (one lambda, or one per group). Example: ``LambdaLR(opt, lambda e: 0.9 ** e)``."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else \
            [lr_lambda] * n
        self._group = 0
        super().__init__(optimizer, last_epoch)

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else int(epoch)
        self._last_lr = []
        for g, base, fn in zip(self.optimizer.param_groups, self.base_lrs, self.lr_lambdas):
            g["lr"] = float(base * fn(self.last_epoch))
            self._last_lr.append(g["lr"])


class OneCycleLR(LRScheduler):
    """The 1cycle policy (per batch): warm up from max_lr/div_factor to max_lr over
    ``pct_start`` of the steps, then anneal to max_lr/(div_factor*final_div_factor); momentum
    (or Adam's beta1) cycles inversely between ``max_momentum`` and ``base_momentum``.

    Example:
        >>> sched = OneCycleLR(opt, max_lr=0.1, total_steps=1000)
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
            self.phases = [(end1, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                           (2 * end1 + 1 - 1 + 0.0 if False else float(2 * pct_start *
                                                                      self.total_steps) - 2,
                            "max_lr", "initial_lr", "base_momentum", "max_momentum"),
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
