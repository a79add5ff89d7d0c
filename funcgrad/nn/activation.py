"""Activation modules and shape helpers: ReLU, GELU, SiLU, Tanh, Sigmoid, Softmax, LogSoftmax,
CELU, GLU, Threshold, the shrink functions, Softmax2d, Flatten, Unflatten and friends (each
calls its ``nn.functional`` counterpart)."""
import funcgrad.numpy as jnp
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module, Parameter


def _simple(name, fn, doc):
    def forward(self, x):
        return fn(x)
    cls = type(name, (Module,), {"forward": forward, "__doc__": doc,
                                  "__init__": lambda self, inplace=False: Module.__init__(self)})
    cls.__module__ = __name__
    return cls


ReLU = _simple("ReLU", F.relu, "max(x, 0). Example: ``nn.ReLU()(x)``.")
ReLU6 = _simple("ReLU6", F.relu6, "min(max(x, 0), 6). Example: ``nn.ReLU6()(x)``.")
SiLU = _simple("SiLU", F.silu, "x * sigmoid(x). Example: ``nn.SiLU()(x)``.")
Tanh = _simple("Tanh", F.tanh, "tanh(x). Example: ``nn.Tanh()(x)``.")
Sigmoid = _simple("Sigmoid", F.sigmoid, "1 / (1 + exp(-x)). Example: ``nn.Sigmoid()(x)``.")
Hardswish = _simple("Hardswish", F.hardswish, "x * relu6(x + 3) / 6. Example: ``nn.Hardswish()(x)``.")
Hardsigmoid = _simple("Hardsigmoid", F.hardsigmoid, "relu6(x + 3) / 6. Example: ``nn.Hardsigmoid()(x)``.")
Mish = _simple("Mish", F.mish, "x * tanh(softplus(x)). Example: ``nn.Mish()(x)``.")
SELU = _simple("SELU", F.selu, "Scaled ELU. Example: ``nn.SELU()(x)``.")
Softsign = _simple("Softsign", F.softsign, "x / (1 + |x|). Example: ``nn.Softsign()(x)``.")
LogSigmoid = _simple("LogSigmoid", F.logsigmoid, "log(sigmoid(x)). Example: ``nn.LogSigmoid()(x)``.")
Tanhshrink = _simple("Tanhshrink", F.tanhshrink, "x - tanh(x). Example: ``nn.Tanhshrink()(x)``.")


class GELU(Module):
    """GELU as PyTorch: exact ``x * Phi(x)`` by default (``approximate="none"``), the tanh form
    with ``approximate="tanh"``. (``funcgrad.nn.gelu``, JAX's function, defaults to the tanh form.)

    Example:
        >>> nn.GELU()(jnp.array([-1.0, 0.5]))
        Array([-0.15865526,  0.34573123], dtype=float32)
        >>> nn.GELU(approximate="tanh")(jnp.array([-1.0, 0.5]))
        Array([-0.15880796,  0.345714  ], dtype=float32)
    """

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """Leaky ReLU. Example: ``nn.LeakyReLU(0.2)(x)``."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class PReLU(Module):
    """max(0, x) + a * min(0, x) with a learned ``a`` (one, or one per channel), initialised
    to ``init``; the parameter is ``weight`` as in PyTorch.

    Example:
        >>> act = nn.PReLU()
        >>> act(jnp.array([-2.0, 3.0]))
        Array([-0.5,  3. ], dtype=float32)
        >>> act.weight
        Array([0.25], dtype=float32)
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = int(num_parameters)
        self.weight = Parameter(jnp.full((self.num_parameters,), init,
                                         dtype if dtype is not None else jnp.float32))

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class ELU(Module):
    """ELU. Example: ``nn.ELU()(x)``."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class Softplus(Module):
    """Softplus with ``beta`` and ``threshold``. Example: ``nn.Softplus()(x)``."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class _AlongDim(Module):
    """A normalizing activation applied along ``dim`` (the last axis when None)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return type(self).fn(x, -1 if self.dim is None else self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


def _along_dim(name, fn, doc):
    cls = type(name, (_AlongDim,), {"fn": staticmethod(fn), "__doc__": doc})
    cls.__module__ = __name__
    return cls


Softmax = _along_dim("Softmax", F.softmax,
                     "Softmax along ``dim``. Example: ``nn.Softmax(dim=-1)(x)``.")
LogSoftmax = _along_dim("LogSoftmax", F.log_softmax,
                        "Log-softmax along ``dim``. Example: ``nn.LogSoftmax(dim=1)(x)``.")
Softmin = _along_dim("Softmin", F.softmin,
                     "softmax(-x) along ``dim``. Example: ``nn.Softmin(dim=1)(x)``.")


class CosineSimilarity(Module):
    """``F.cosine_similarity`` along ``dim``. Example: ``nn.CosineSimilarity(dim=1)(a, b)``."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``F.pairwise_distance``. Example: ``nn.PairwiseDistance(p=2.0)(a, b)``."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class Flatten(Module):
    """Flatten axes ``start_dim``..``end_dim``. Example: ``nn.Flatten()(jnp.ones((2, 3, 4))).shape == (2, 12)``."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        nd = x.ndim
        s, e = self.start_dim % nd, self.end_dim % nd
        shape = tuple(x.shape[:s]) + (-1,) + tuple(x.shape[e + 1:])
        return jnp.reshape(x, shape)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split axis ``dim`` into ``unflattened_size``. Example: ``nn.Unflatten(1, (3, 4))``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        d = self.dim % x.ndim
        return jnp.reshape(x, tuple(x.shape[:d]) + self.unflattened_size +
                           tuple(x.shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"



class _WithArgs(Module):
    """An activation whose hyper-parameters (attribute names in ``_args``) follow the input in
    the call of its ``nn.functional`` counterpart ``_fn``."""

    _args = ()

    def forward(self, x):
        return type(self)._fn(x, *(getattr(self, a) for a in self._args))

    def extra_repr(self):
        return ", ".join(f"{a}={getattr(self, a)}" for a in self._args)


class CELU(_WithArgs):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) (``F.celu``).

    Example:
        >>> nn.CELU(alpha=0.5)(jnp.array([-1.0, 1.0]))
        Array([-0.43233237,  1.        ], dtype=float32)
    """

    _fn, _args = staticmethod(F.celu), ("alpha",)

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha


class GLU(_WithArgs):
    """Gated linear unit a * sigmoid(b) over the halves of axis ``dim`` (``F.glu``).

    Example:
        >>> nn.GLU(dim=1)(jnp.ones((2, 8))).shape
        (2, 4)
    """

    _fn, _args = staticmethod(F.glu), ("dim",)

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim


class Threshold(_WithArgs):
    """x where x > ``threshold``, else ``value`` (``F.threshold``).

    Example:
        >>> nn.Threshold(0.1, 20.0)(jnp.array([0.0, 1.0]))
        Array([20.,  1.], dtype=float32)
    """

    _fn, _args = staticmethod(F.threshold), ("threshold", "value")

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value = threshold, value


class Softshrink(_WithArgs):
    """x -/+ lambd outside [-lambd, lambd], 0 inside (``F.softshrink``).

    Example:
        >>> nn.Softshrink(0.5)(jnp.array([-1.0, 0.2, 1.0]))
        Array([-0.5,  0. ,  0.5], dtype=float32)
    """

    _fn, _args = staticmethod(F.softshrink), ("lambd",)

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd


class Hardshrink(_WithArgs):
    """x outside [-lambd, lambd], 0 inside (``F.hardshrink``).

    Example:
        >>> nn.Hardshrink(0.5)(jnp.array([-1.0, 0.2, 1.0]))
        Array([-1.,  0.,  1.], dtype=float32)
    """

    _fn, _args = staticmethod(F.hardshrink), ("lambd",)

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd


class Softmax2d(Module):
    """Softmax over the channels of each spatial position: axis -3 of a (N, C, H, W) or
    (C, H, W) input.

    Example:
        >>> nn.Softmax2d()(jnp.ones((2, 3, 4, 4))).shape
        (2, 3, 4, 4)
    """

    def forward(self, x):
        if jnp.ndim(x) not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, "
                             f"got shape {tuple(jnp.shape(x))}")
        return F.softmax(x, -3)


class RReLU(Module):
    """Randomized leaky ReLU (``F.rrelu``): in training, negative inputs are scaled by slopes
    drawn uniformly from [lower, upper]; in eval mode by (lower + upper) / 2. ``forward(x,
    key=None)``: ``key`` seeds the slopes (else the host generator, fixed at trace time).

    Example:
        >>> m = nn.RReLU(0.1, 0.3).eval()
        >>> m(jnp.array([-3.0, 2.0]))
        Array([-0.6,  2. ], dtype=float32)
    """

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper = lower, upper

    def forward(self, x, key=None):
        return F.rrelu(x, self.lower, self.upper, self.training, key=key)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}"


class Hardtanh(_WithArgs):
    """clip(x, min_val, max_val) (``F.hardtanh``).

    Example:
        >>> nn.Hardtanh(-0.5, 0.5)(jnp.array([-1.0, 0.2, 1.0]))
        Array([-0.5,  0.2,  0.5], dtype=float32)
    """

    _fn, _args = staticmethod(F.hardtanh), ("min_val", "max_val")

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) must not exceed max_val "
                             f"({max_val})")
        self.min_val, self.max_val = min_val, max_val
