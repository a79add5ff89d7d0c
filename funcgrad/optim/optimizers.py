"""SGD, Adam, AdamW, RMSprop and Adagrad with PyTorch's update formulas.

Each ``_update(p, g, state, hyper) -> (new_p, new_state)`` is pure array code, used by the
stateful ``step`` (eagerly compiled, or traced inside a jitted training step) and by the
functional ``init``/``update`` form.
"""
import funcgrad.numpy as jnp
from funcgrad.optim.optimizer import Optimizer


def _f32(v):
    return jnp.asarray(v, "float32")


def _bias_correction(beta, step, p):
    """1 - beta ** step, accurate to a few ulps of ``p``'s precision.

    The float32 ``step`` counter is first cast to ``p``'s (wider) dtype, so a float64 model gets
    a float64 correction; and the value is -expm1(step * log(beta)), not 1 - beta ** step, which
    for beta = 0.999 loses 3 digits to cancellation (pow's rounding error ~6e-8 against
    1 - 0.999**2 ~ 2e-3: a 3e-5 relative error in float32, 1e-5 after the square root).
    """
    step = jnp.asarray(step)
    step = step.astype(jnp.result_type(p.dtype, step.dtype))
    return -jnp.expm1(step * jnp.log(beta))


def _decayed(p, g, h, f, decoupled):
    """(p, g) after ``maximize`` and weight decay: L2 (added to the gradient) or decoupled
    (p *= 1 - lr * weight_decay), as PyTorch applies them before an update."""
    if h["maximize"]:
        g = -g
    if f["weight_decay"]:
        if decoupled:
            p = p * (1 - h["lr"] * h["weight_decay"])
        else:
            g = g + h["weight_decay"] * p
    return p, g


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.

    buf = momentum * buf + (1 - dampening) * g (buf = g on the first step);
    p -= lr * (g + momentum * buf if nesterov else buf).

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.SGD([w], lr=0.1, momentum=0.9)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.95, -1.95], dtype=float32)
        >>> opt.step([jnp.array([0.5, -0.5])])   # the second step adds momentum
        >>> w.data
        Array([ 0.85499996, -1.855     ], dtype=float32)
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, maximize=False):
        if lr < 0 or momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGD: invalid lr={lr}, momentum={momentum} or "
                             f"weight_decay={weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        if not f["momentum"]:
            return {}
        # "step" lets the first update take buf = g (PyTorch) with a fixed state structure,
        # so a jitted training step is traced once.
        return {"momentum_buffer": jnp.zeros_like(p), "step": _f32(0.0)}

    def _completed_state(self, st, p):
        # PyTorch's SGD state holds the momentum buffer alone: a loaded buffer has seen a
        # step (the next update decays it), and one that was never made starts anew
        if "momentum_buffer" in st and "step" not in st:
            st = dict(st, step=_f32(1.0))
        return st

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=False)
        st = dict(st)
        if f["momentum"]:
            buf = st["momentum_buffer"]
            later = h["momentum"] * buf + (1 - h["dampening"]) * g
            buf = jnp.where(st["step"] == 0, g, later)
            st["momentum_buffer"] = buf
            st["step"] = st["step"] + 1.0
            g = g + h["momentum"] * buf if h["nesterov"] else buf
        return (p - h["lr"] * g).astype(p.dtype), st


class Adam(Optimizer):
    """Adam (and AMSGrad) with PyTorch's bias correction:
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.Adam([w], lr=0.1)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.9, -1.9], dtype=float32)
    """

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, maximize=False):
        if lr < 0 or eps < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"{type(self).__name__}: invalid lr={lr}, betas={betas} or "
                             f"eps={eps}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        st = {"step": _f32(0.0), "exp_avg": jnp.zeros_like(p), "exp_avg_sq": jnp.zeros_like(p)}
        if hyper["amsgrad"]:
            st["max_exp_avg_sq"] = jnp.zeros_like(p)
        return st

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=self._decoupled)
        lr, (b1, b2), eps = h["lr"], h["betas"], h["eps"]
        step = st["step"] + 1.0
        m = st["exp_avg"] + (g - st["exp_avg"]) * (1 - b1)
        v = st["exp_avg_sq"] * b2 + (1 - b2) * g * g
        bc1, bc2 = _bias_correction(b1, step, p), _bias_correction(b2, step, p)
        new = {"step": step, "exp_avg": m, "exp_avg_sq": v}
        if h["amsgrad"]:
            vmax = jnp.maximum(st["max_exp_avg_sq"], v)
            new["max_exp_avg_sq"] = vmax
            v = vmax
        denom = jnp.sqrt(v) / jnp.sqrt(bc2) + eps
        return (p - (lr / bc1) * (m / denom)).astype(p.dtype), new


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the Adam step).

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.AdamW([w], lr=0.1, weight_decay=0.5)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data.round(4)
        Array([ 0.85, -1.8 ], dtype=float32)
    """

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)


class RMSprop(Optimizer):
    """RMSprop as PyTorch: eps is added OUTSIDE the square root; optional momentum and
    centering.

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.RMSprop([w], lr=0.01, alpha=0.99)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.9, -1.9], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, maximize=False):
        if lr < 0 or eps < 0 or momentum < 0 or alpha < 0:
            raise ValueError(f"RMSprop: invalid lr={lr}, alpha={alpha}, eps={eps} or "
                             f"momentum={momentum}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        st = {"step": _f32(0.0), "square_avg": jnp.zeros_like(p)}
        if f["momentum"]:
            st["momentum_buffer"] = jnp.zeros_like(p)
        if hyper["centered"]:
            st["grad_avg"] = jnp.zeros_like(p)
        return st

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=False)
        a = h["alpha"]
        sq = st["square_avg"] * a + (1 - a) * g * g
        new = {"step": st["step"] + 1.0, "square_avg": sq}
        if h["centered"]:
            ga = st["grad_avg"] + (g - st["grad_avg"]) * (1 - a)
            new["grad_avg"] = ga
            avg = jnp.sqrt(sq - ga * ga) + h["eps"]
        else:
            avg = jnp.sqrt(sq) + h["eps"]
        if f["momentum"]:
            buf = st["momentum_buffer"] * h["momentum"] + g / avg
            new["momentum_buffer"] = buf
            return (p - h["lr"] * buf).astype(p.dtype), new
        return (p - h["lr"] * g / avg).astype(p.dtype), new


class Adagrad(Optimizer):
    """Adagrad: sum += g^2; p -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(sum) + eps).

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.Adagrad([w], lr=0.1)
        >>> opt.step([jnp.array([0.5, -0.5])])       # the gradients of the parameters, in order
        >>> w.data
        Array([ 0.9, -1.9], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, maximize=False):
        if lr < 0 or lr_decay < 0 or eps < 0:
            raise ValueError(f"Adagrad: invalid lr={lr}, lr_decay={lr_decay} or eps={eps}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        return {"step": _f32(0.0),
                "sum": jnp.full_like(p, hyper["initial_accumulator_value"])}

    def _update(self, p, g, st, h, f):
        p, g = _decayed(p, g, h, f, decoupled=False)
        step = st["step"] + 1.0
        # the float32 step counter in p's dtype: a float64 model gets a float64 learning rate
        t = jnp.asarray(step)
        t = t.astype(jnp.result_type(p.dtype, t.dtype))
        clr = h["lr"] / (1 + (t - 1) * h["lr_decay"])
        s = st["sum"] + g * g
        return (p - clr * g / (jnp.sqrt(s) + h["eps"])).astype(p.dtype), {"step": step, "sum": s}
