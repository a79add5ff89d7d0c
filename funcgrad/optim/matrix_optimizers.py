"""Optimizers that treat weights as matrices: ``Adafactor`` (factored second moments,
PyTorch's variant) and ``Muon`` (momentum orthogonalized by a Newton-Schulz iteration, as
``torch.optim.Muon`` of PyTorch 2.13). Pure per-parameter updates, like the others: eager
``step`` compiles one update, and both work inside a jitted training step.

Example:
    >>> w = nn.Parameter(jnp.ones((3, 2)))
    >>> opt = optim.Adafactor([w], lr=0.01)
    >>> opt.step([jnp.full((3, 2), 0.5)])
    >>> w.data.shape, bool(jnp.all(w.data < 1.0))
    ((3, 2), True)
"""
import math

import numpy as np

import funcgrad.numpy as jnp
from funcgrad.optim.optimizer import Optimizer
from funcgrad.optim.optimizers import _f32

__all__ = ["Adafactor", "Muon"]


class Adafactor(Optimizer):
    """Adafactor (Shazeer & Stern, 2018) as PyTorch implements it: for a parameter with two or
    more axes the second moment of the last two is kept as a row and a column mean; the
    relative step is ``min(lr, 1 / sqrt(step))`` times the parameter's RMS (at least
    ``eps[1]``); the update is clipped to RMS ``d``; ``beta2_decay`` sets the second-moment
    decay ``1 - step ** beta2_decay``; ``eps[0]`` (default: the dtype's machine epsilon) floors
    the second moment; weight decay is decoupled (``p *= 1 - lr * weight_decay``).

    Example:
        >>> w = nn.Parameter(jnp.array([1.0, -2.0]))
        >>> opt = optim.Adafactor([w], lr=0.1)
        >>> opt.step([jnp.array([0.5, -0.5])])
        >>> w.data
        Array([ 0.8418861, -1.8418862], dtype=float32)
    """

    def __init__(self, params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                 weight_decay=0.0, *, foreach=None, maximize=False):
        if not 0.0 <= lr:
            raise ValueError(f"Adafactor: learning rate should be >= 0, got {lr}")
        if not beta2_decay <= 0:
            raise ValueError(f"Adafactor: beta2_decay should be <= 0, got {beta2_decay}")
        if eps[0] is not None and eps[0] < 0 or eps[1] < 0:
            raise ValueError(f"Adafactor: epsilons should be >= 0, got {eps}")
        if not 1.0 <= d:
            raise ValueError(f"Adafactor: clipping threshold d should be >= 1, got {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Adafactor: weight_decay should be >= 0, got {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d,
                                      weight_decay=weight_decay, maximize=maximize))

    def _init_state(self, p, g, hyper, f):
        st = {"step": _f32(0.0)}
        shape = tuple(p.shape)
        if len(shape) > 1:
            st["row_var"] = jnp.zeros(shape[:-1] + (1,), p.dtype)
            st["col_var"] = jnp.zeros(shape[:-2] + (1, shape[-1]), p.dtype)
        else:
            st["variance"] = jnp.zeros(shape, p.dtype)
        return st

    def _update(self, p, g, st, h, f):
        if h["maximize"]:
            g = -g
        eps1, eps2 = h["eps"]
        if eps1 is None:
            eps1 = float(np.finfo(np.dtype(p.dtype)).eps)
        step = st["step"] + 1.0
        stepf = step.astype(p.dtype)
        decay = stepf ** h["beta2_decay"]                    # 1 - beta2_t
        rho = jnp.minimum(h["lr"], 1.0 / jnp.sqrt(stepf))
        n = max(int(np.prod(p.shape, dtype=np.int64)), 1)
        alpha = jnp.maximum(eps2, jnp.sqrt(jnp.sum(p * p)) / math.sqrt(n)) * rho
        if f["weight_decay"]:
            p = p * (1 - h["lr"] * h["weight_decay"])
        new = {"step": step}
        if p.ndim > 1:
            row = st["row_var"] + (jnp.mean(g * g, axis=-1, keepdims=True)
                                   - st["row_var"]) * decay
            col = st["col_var"] + (jnp.mean(g * g, axis=-2, keepdims=True)
                                   - st["col_var"]) * decay
            new["row_var"], new["col_var"] = row, col
            var = (row @ col) / jnp.maximum(jnp.mean(row, axis=-2, keepdims=True), eps1)
        else:
            var = st["variance"] + (g * g - st["variance"]) * decay
            new["variance"] = var
        update = g / jnp.sqrt(jnp.maximum(var, eps1 * eps1))
        denom = jnp.maximum(1.0, jnp.sqrt(jnp.sum(update * update)) / (math.sqrt(n) * h["d"]))
        return (p - update * (alpha / denom)).astype(p.dtype), new


def newton_schulz(g, coefficients=(3.4445, -4.775, 2.0315), steps=5, eps=1e-7,
                  dtype="bfloat16"):
    """Muon's approximate orthogonalization of a matrix: ``steps`` quintic Newton-Schulz
    iterations ``X <- a X + (b A + c A A) X`` with ``A = X X^T``, from ``X = G / |G|_F``
    (transposed so the Gram matrix is the smaller side), computed in ``dtype`` (PyTorch uses
    bfloat16) and returned in it.

    Example:
        >>> from funcgrad.optim.matrix_optimizers import newton_schulz
        >>> o = newton_schulz(jnp.array([[3.0, 0.0], [0.0, 0.5]]), dtype="float32")
        >>> np.round(np.asarray(o), 2)          # singular values pushed towards 1
        array([[0.71, 0.  ],
               [0.  , 1.04]], dtype=float32)
    """
    if g.ndim != 2:
        raise ValueError(f"Muon: the Newton-Schulz iteration needs a 2-d matrix, got shape "
                         f"{tuple(g.shape)}")
    a, b, c = coefficients

    def rounded(v):       # products accumulate in float32 and round once, as PyTorch's addmm
        return v.astype(dtype).astype("float32")
    x = rounded(g)
    tall = g.shape[0] > g.shape[1]
    if tall:
        x = x.T
    norm = rounded(jnp.sqrt(jnp.sum(x * x)))
    x = rounded(x / jnp.maximum(norm, eps))
    for _ in range(int(steps)):
        gram = rounded(x @ x.T)
        poly = rounded(b * gram + c * (gram @ gram))
        x = rounded(a * x + poly @ x)
    x = x.astype(dtype)
    return x.T if tall else x


class Muon(Optimizer):
    """Muon (Jordan et al., 2024) as ``torch.optim.Muon``: for 2-d parameters, the momentum
    ``B = momentum * B + (1 - momentum) * g`` (Nesterov: ``g + momentum * (B - g)``) is
    orthogonalized by ``ns_steps`` Newton-Schulz iterations with ``ns_coefficients``, then
    ``p *= 1 - lr * weight_decay`` and ``p -= lr' * O`` with ``lr' = lr * sqrt(max(1, A/B))``
    (``adjust_lr_fn=None``/"original") or ``0.2 * lr * sqrt(max(A, B))`` ("match_rms_adamw").
    ``ns_dtype`` is the iteration's dtype: bfloat16 as PyTorch (use "float32" for a more
    exact orthogonalization).

    Example:
        >>> w = nn.Parameter(jnp.eye(2))
        >>> opt = optim.Muon([w], lr=0.1, weight_decay=0.0, ns_dtype="float32")
        >>> opt.step([jnp.array([[1.0, 0.0], [0.0, 0.0]])])
        >>> np.round(np.asarray(w.data), 3)
        array([[0.93, 0.  ],
               [0.  , 1.  ]], dtype=float32)
    """

    def __init__(self, params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
                 ns_coefficients=(3.4445, -4.775, 2.0315), eps=1e-7, ns_steps=5,
                 adjust_lr_fn=None, ns_dtype="bfloat16"):
        if not 0.0 <= lr or not 0.0 <= momentum or not 0.0 <= weight_decay:
            raise ValueError(f"Muon: invalid lr={lr}, momentum={momentum} or "
                             f"weight_decay={weight_decay}")
        if adjust_lr_fn not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"Muon: adjust_lr_fn {adjust_lr_fn!r} is not supported (None, "
                             f"'original' or 'match_rms_adamw')")
        if ns_steps >= 100:
            raise ValueError(f"Muon: ns_steps must be less than 100, got {ns_steps}")
        if len(ns_coefficients) != 3:
            raise ValueError(f"Muon: ns_coefficients must be 3 numbers, got {ns_coefficients}")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum,
                                      nesterov=nesterov, ns_coefficients=tuple(ns_coefficients),
                                      eps=eps, ns_steps=int(ns_steps),
                                      adjust_lr_fn=adjust_lr_fn, ns_dtype=str(ns_dtype)))
        for group in self.param_groups:
            if group["ns_steps"] != ns_steps:
                raise ValueError("Muon: ns_steps (the unrolled iteration count) must be the "
                                 "same for every parameter group")
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2-d parameters, got one of shape "
                                     f"{p.shape}; optimize the others with AdamW")

    def _init_state(self, p, g, hyper, f):
        return {"momentum_buffer": jnp.zeros_like(p)}

    def _update(self, p, g, st, h, f):
        mu = h["momentum"]
        buf = st["momentum_buffer"] + (g - st["momentum_buffer"]) * (1 - mu)
        update = g + (buf - g) * mu if h["nesterov"] else buf
        # the iteration count is unrolled at trace time: read it from the (static) defaults
        ortho = newton_schulz(update, h["ns_coefficients"], self.defaults["ns_steps"],
                              h["eps"], h["ns_dtype"])
        rows, cols = p.shape
        if h["adjust_lr_fn"] in (None, "original"):
            ratio = math.sqrt(max(1.0, rows / cols))
        else:
            ratio = 0.2 * math.sqrt(max(rows, cols))
        p = p * (1 - h["lr"] * h["weight_decay"])
        p = p - (h["lr"] * ratio) * ortho.astype(p.dtype)
        return p.astype(st["momentum_buffer"].dtype), {"momentum_buffer": buf}
