"""Adamax, NAdam, RAdam, Adadelta, Rprop and ASGD with PyTorch's update formulas (the less
common members of ``torch.optim``; the common ones are in ``optimizers.py``). Scalars that
depend on the step count are computed from the float32 ``step`` state, so a jitted step is
traced once.
"""
import funcgrad.numpy as jnp
from funcgrad.optim.optimizer import Optimizer
from funcgrad.optim.optimizers import _bias_correction, _decayed, _f32


def _check(name, lr, eps, betas=None, **more):
    bad = lr < 0 or eps < 0 or (betas is not None and not (0 <= betas[0] < 1 and
                                                             0 <= betas[1] < 1))
    bad = bad or any(v < 0 for v in more.values())
    if bad:
        extra = "".join(f", {k}={v}" for k, v in more.items())
        raise ValueError(f"{name}: invalid lr={lr}, eps={eps}"
                         + (f", betas={betas}" if betas is not None else "") + extra)


class Adamax(Optimizer):
    """Adam with an infinity norm: u = max(b2 u, |g| + eps); p -= lr / (1 - b1^t) * m / u.

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.Adamax([w], lr=0.1)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.9, -1.9], dtype=float32)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 maximize=False):
        _check("Adamax", lr, eps, betas, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        return {"step": _f32(0.0), "exp_avg": jnp.zeros_like(p), "exp_inf": jnp.zeros_like(p)}

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=False)
        (b1, b2), step = h["betas"], st["step"] + 1.0
        m = st["exp_avg"] + (g - st["exp_avg"]) * (1 - b1)
        u = jnp.maximum(st["exp_inf"] * b2, jnp.abs(g) + h["eps"])
        new_p = p - (h["lr"] / _bias_correction(b1, step, p)) * (m / u)
        return new_p.astype(p.dtype), {"step": step, "exp_avg": m, "exp_inf": u}


class NAdam(Optimizer):
    """Adam with Nesterov momentum and PyTorch's momentum schedule
    mu_t = b1 (1 - 0.96 ** (t * momentum_decay) / 2).

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.NAdam([w], lr=0.1)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.8943548, -1.8943548], dtype=float32)
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, maximize=False):
        _check("NAdam", lr, eps, betas, weight_decay=weight_decay, momentum_decay=momentum_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        # the momentum schedule's running product in p's dtype (float64 for a float64 model)
        return {"step": _f32(0.0), "mu_product": jnp.ones((), jnp.result_type(p.dtype, "float32")),
                "exp_avg": jnp.zeros_like(p), "exp_avg_sq": jnp.zeros_like(p)}

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=f["decoupled_weight_decay"])
        (b1, b2), step, md = h["betas"], st["step"] + 1.0, h["momentum_decay"]
        t = step.astype(st["mu_product"].dtype)
        mu = b1 * (1 - 0.5 * jnp.power(0.96, t * md))
        mu_next = b1 * (1 - 0.5 * jnp.power(0.96, (t + 1) * md))
        mu_product = st["mu_product"] * mu
        m = st["exp_avg"] + (g - st["exp_avg"]) * (1 - b1)
        v = st["exp_avg_sq"] * b2 + (1 - b2) * g * g
        denom = jnp.sqrt(v / _bias_correction(b2, step, p)) + h["eps"]
        lr = h["lr"]
        new_p = p - lr * (1 - mu) / (1 - mu_product) * g / denom \
            - lr * mu_next / (1 - mu_product * mu_next) * m / denom
        return new_p.astype(p.dtype), {"step": step, "mu_product": mu_product, "exp_avg": m,
                                       "exp_avg_sq": v}


class RAdam(Optimizer):
    """Rectified Adam: plain momentum SGD while the variance estimate is unreliable
    (rho_t <= 5), then Adam scaled by the rectification term, as PyTorch.

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.RAdam([w], lr=0.1)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.95, -1.95], dtype=float32)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, maximize=False):
        _check("RAdam", lr, eps, betas, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        return {"step": _f32(0.0), "exp_avg": jnp.zeros_like(p), "exp_avg_sq": jnp.zeros_like(p)}

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=f["decoupled_weight_decay"])
        (b1, b2), step = h["betas"], st["step"] + 1.0
        m = st["exp_avg"] + (g - st["exp_avg"]) * (1 - b1)
        v = st["exp_avg_sq"] * b2 + (1 - b2) * g * g
        bc1, bc2 = _bias_correction(b1, step, p), _bias_correction(b2, step, p)
        t = step.astype(bc2.dtype)
        rho_inf = 2 / (1 - b2) - 1
        rho = rho_inf - 2 * t * jnp.power(b2, t) / bc2
        safe = jnp.maximum(rho, 5.0)                  # keeps the unused branch finite
        rect = jnp.sqrt((safe - 4) * (safe - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * safe))
        adaptive = jnp.sqrt(bc2) / (jnp.sqrt(v) + h["eps"])
        scale = jnp.where(rho > 5, rect * adaptive, jnp.ones_like(adaptive))
        new_p = p - h["lr"] * (m / bc1) * scale
        return new_p.astype(p.dtype), {"step": step, "exp_avg": m, "exp_avg_sq": v}


class Adadelta(Optimizer):
    """Adadelta: E[g^2] and E[dx^2] running averages with ``rho``;
    dx = sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g; p -= lr * dx.

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.Adadelta([w], lr=1.0)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.9968378, -1.9968377], dtype=float32)
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False):
        _check("Adadelta", lr, eps, weight_decay=weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Adadelta: rho must be in [0, 1], got {rho}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        return {"step": _f32(0.0), "square_avg": jnp.zeros_like(p),
                "acc_delta": jnp.zeros_like(p)}

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=False)
        rho, eps = h["rho"], h["eps"]
        sq = st["square_avg"] * rho + (1 - rho) * g * g
        delta = jnp.sqrt(st["acc_delta"] + eps) / jnp.sqrt(sq + eps) * g
        acc = st["acc_delta"] * rho + (1 - rho) * delta * delta
        return (p - h["lr"] * delta).astype(p.dtype), {"step": st["step"] + 1.0,
                                                      "square_avg": sq, "acc_delta": acc}


class Rprop(Optimizer):
    """Resilient backpropagation: each element keeps its own step size, multiplied by
    ``etas[1]`` while the gradient keeps its sign and by ``etas[0]`` when it flips (then
    that element skips the update and forgets its gradient), clamped to ``step_sizes``;
    p -= sign(g) * step_size. Step sizes start at the group's ``lr`` on the first step,
    as PyTorch's lazily created state.

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.Rprop([w], lr=0.1, etas=(0.5, 1.2))
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.9, -1.9], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False):
        if lr < 0 or not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Rprop: invalid lr={lr} or etas={tuple(etas)} (need lr >= 0 and "
                             f"0 < etas[0] < 1 < etas[1])")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        return {"step": _f32(0.0), "prev": jnp.zeros_like(p),
                "step_size": jnp.full(jnp.shape(p), hyper["lr"], p.dtype)}

    def _update(self, p, g, st, h, f):
        if h["maximize"]:
            g = -g
        (eta_minus, eta_plus), (lo, hi) = h["etas"], h["step_sizes"]
        size = jnp.where(st["step"] == 0, jnp.asarray(h["lr"], p.dtype), st["step_size"])
        agree = g * st["prev"]
        factor = jnp.where(agree > 0, jnp.asarray(eta_plus, p.dtype),
                           jnp.where(agree < 0, jnp.asarray(eta_minus, p.dtype),
                                     jnp.ones((), p.dtype)))
        size = jnp.clip(size * factor, lo, hi)
        g = jnp.where(factor == eta_minus, jnp.zeros((), g.dtype), g)
        new_p = p - jnp.sign(g) * size
        return new_p.astype(p.dtype), {"step": st["step"] + 1.0, "prev": g, "step_size": size}


class ASGD(Optimizer):
    """Averaged SGD: p = p * (1 - lambd * eta) - eta * g, with
    eta_t = lr / (1 + lambd * lr * t) ** alpha; ``ax`` holds the running average of the
    parameters, started after ``t0`` steps (mu_t = 1 / max(1, t - t0)), as PyTorch.

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.ASGD([w], lr=0.1, t0=0)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.94999, -1.94998], dtype=float32)
        >>> opt.state[w]["ax"]        # the running average of the parameters
        Array([ 0.94999, -1.94998], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0,
                 maximize=False):
        if lr < 0 or weight_decay < 0:
            raise ValueError(f"ASGD: invalid lr={lr} or weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        dt = jnp.result_type(p.dtype, "float32")      # float64 for a float64 model
        return {"step": _f32(0.0), "eta": jnp.asarray(hyper["lr"], dt),
                "mu": jnp.ones((), dt), "ax": jnp.zeros_like(p)}

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=False)
        lr, lambd = h["lr"], h["lambd"]
        eta = jnp.where(st["step"] == 0, jnp.asarray(lr, st["eta"].dtype), st["eta"])
        mu = st["mu"]
        new_p = (p * (1 - lambd * eta) - eta * g).astype(p.dtype)
        ax = jnp.where(mu == 1, new_p, st["ax"] + (new_p - st["ax"]) * mu).astype(p.dtype)
        step = st["step"] + 1.0
        t = step.astype(eta.dtype)
        new_eta = lr / (1 + lambd * lr * t) ** h["alpha"]
        new_mu = 1 / jnp.maximum(t - h["t0"], 1.0)
        return new_p, {"step": step, "eta": new_eta.astype(eta.dtype),
                       "mu": new_mu.astype(mu.dtype), "ax": ax}
