"""Activation and normalization functions with JAX's ``jax.nn`` names and semantics
(exported as ``funcgrad.nn.relu``, ``funcgrad.nn.gelu``, ...). PyTorch's
``torch.nn.functional`` is ``funcgrad.nn.functional`` (``nn/functional.py``), a different module.

Every function is plain ``funcgrad.numpy``/``funcgrad.lax`` code, so it works eagerly and under
``jit``, ``grad`` and ``vmap``; ``relu`` and ``relu6`` also carry a ``custom_jvp`` whose
derivative reads their output (see ``_masked_by_output``).

Example:
    >>> import funcgrad.nn as nn
    >>> nn.relu(jnp.array([-1.0, 2.0]))
    Array([0., 2.], dtype=float32)
    >>> nn.softmax(jnp.array([0.0, jnp.log(3.0)]))
    Array([0.25..., 0.75...], dtype=float32)

The defaults follow JAX, which differs from PyTorch in one place: ``nn.gelu`` uses the tanh
approximation unless ``approximate=False``, while ``nn.functional.gelu`` and ``nn.GELU`` use the
exact erf form unless ``approximate="tanh"``:

    >>> x = jnp.array([-1.0, 0.5])
    >>> nn.gelu(x)                        # tanh form
    Array([-0.15880796,  0.345714  ], dtype=float32)
    >>> nn.functional.gelu(x)             # exact
    Array([-0.15865526,  0.34573123], dtype=float32)
"""
import functools
import math

import numpy as np

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core.axes import canonicalize_axes
from funcgrad.transforms.custom_derivatives import custom_jvp
from funcgrad.lowering.eager_jit import jit_when_eager_in


def _axis(axis, ndim, where="funcgrad.nn"):
    if axis is None:
        return tuple(range(ndim))
    if ndim == 0:
        return (axis,) if isinstance(axis, int) else tuple(axis)
    return canonicalize_axes(axis, ndim, where, allow_repeats=True)


def _masked_by_output(fun, keep):
    """``fun`` (elementwise, piecewise identity or constant) with the derivative
    ``where(keep(fun(x)), t, 0)``: the backward pass reads the activation's output, which the
    next layer keeps anyway, instead of its input. Under ``jit`` this spares XLA recomputing a
    fused producer (a convolution or a normalization) just to find where the input was
    positive. Integer inputs take the plain function."""
    custom = custom_jvp(fun)

    @custom.defjvp
    def _jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        y = custom(x)
        return y, jnp.where(keep(y), t, 0)

    @functools.wraps(fun)
    def apply(x):
        x = jnp.asarray(x)
        return custom(x) if jnp.issubdtype(x.dtype, jnp.inexact) else fun(x)
    return apply


def _relu(x):
    return jnp.where(x > 0, x, 0)          # a Python 0 is weakly typed: x's dtype


def _relu6(x):
    return jnp.clip(x, 0, 6)


_relu_masked = _masked_by_output(_relu, lambda y: y > 0)
_relu6_masked = _masked_by_output(_relu6, lambda y: (y > 0) & (y < 6))


def relu(x):
    """max(x, 0), with derivative 0 at 0 (as PyTorch and JAX).

    Example: ``nn.relu(jnp.array([-1., 1.]))``."""
    return _relu_masked(x)


def relu6(x):
    """min(max(x, 0), 6), with derivative 0 at 0 and at 6 (as PyTorch).

    Example: ``nn.relu6(x)``."""
    return _relu6_masked(x)


def leaky_relu(x, negative_slope=0.01):
    """x if x >= 0 else negative_slope * x. Example: ``nn.leaky_relu(x, 0.2)``."""
    x = jnp.asarray(x)
    return jnp.where(x >= 0, x, negative_slope * x)


def elu(x, alpha=1.0):
    """x if x > 0 else alpha * (exp(x) - 1). Example: ``nn.elu(x)``."""
    x = jnp.asarray(x)
    safe = jnp.where(x > 0, jnp.zeros((), x.dtype), x)
    return jnp.where(x > 0, x, alpha * jnp.expm1(safe))


def celu(x, alpha=1.0):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1)). Example: ``nn.celu(x)``."""
    x = jnp.asarray(x)
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


def selu(x):
    """Scaled ELU with the self-normalizing constants. Example: ``nn.selu(x)``."""
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def sigmoid(x):
    """1 / (1 + exp(-x)). Example: ``nn.sigmoid(0.0) == 0.5``."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype("float32")
    return lax.logistic(x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|. Example: ``nn.log_sigmoid(x)``."""
    return -softplus(-jnp.asarray(x))


def softplus(x):
    """log(1 + exp(x)), stable. Example: ``nn.softplus(x)``."""
    return jnp.logaddexp(jnp.asarray(x), 0.0)


def soft_sign(x):
    """x / (1 + |x|). Example: ``nn.soft_sign(x)``."""
    x = jnp.asarray(x)
    return x / (jnp.abs(x) + 1)


def silu(x):
    """x * sigmoid(x) (a.k.a. swish). Example: ``nn.silu(x)``."""
    x = jnp.asarray(x)
    return x * sigmoid(x)


swish = silu


def hard_sigmoid(x):
    """relu6(x + 3) / 6. Example: ``nn.hard_sigmoid(x)``."""
    return relu6(jnp.asarray(x) + 3.0) / 6.0


def hard_silu(x):
    """x * hard_sigmoid(x) (hard swish). Example: ``nn.hard_silu(x)``."""
    x = jnp.asarray(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def hard_tanh(x):
    """clip(x, -1, 1). Example: ``nn.hard_tanh(x)``."""
    return jnp.clip(jnp.asarray(x), -1.0, 1.0)


def tanh(x):
    """Hyperbolic tangent. Example: ``nn.tanh(x)``."""
    return jnp.tanh(x)


def gelu(x, approximate=True):
    """Gaussian error linear unit as ``jax.nn.gelu``: by default (``approximate=True``) the tanh
    form ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``; ``approximate=False`` gives the
    exact ``x * Phi(x)`` (through erf), which is PyTorch's default (``F.gelu``, ``nn.GELU``).

    Example:
        >>> x = jnp.array([-1.0, 0.5, 2.0])
        >>> nn.gelu(x)                          # tanh approximation
        Array([-0.15880796,  0.345714  ,  1.9545977 ], dtype=float32)
        >>> nn.gelu(x, approximate=False)      # x * Phi(x), as torch's default GELU
        Array([-0.15865526,  0.34573123,  1.9544997 ], dtype=float32)
    """
    x = jnp.asarray(x)
    if approximate:
        c = math.sqrt(2.0 / math.pi)
        return 0.5 * x * (1.0 + jnp.tanh(c * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + lax.erf(x * (1.0 / math.sqrt(2.0))))


def glu(x, axis=-1):
    """Gated linear unit: a * sigmoid(b) for the two halves of ``axis``. Example: ``nn.glu(x)``."""
    x = jnp.asarray(x)
    n = x.shape[axis]
    if n % 2:
        raise ValueError(f"nn.glu: axis {axis} of shape {x.shape} must have even size")
    a, b = jnp.split(x, 2, axis=axis)
    return a * sigmoid(b)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over ``axis``, computed stably (as ``jax.nn.logsumexp``).

    Example:
        >>> nn.logsumexp(jnp.array([0.0, 0.0]))      # log 2
        Array(0.6931472, dtype=float32)
        >>> nn.logsumexp(jnp.array([1000.0, 1000.0]))    # no overflow
        Array(1000.6932, dtype=float32)
    """
    a = jnp.asarray(a)
    axes = _axis(axis, a.ndim)
    if where is not None:
        a = jnp.where(where, a, -jnp.inf)
    amax = jnp.max(a, axis=axes, keepdims=True)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, jnp.zeros((), amax.dtype)))
    e = jnp.exp(a - amax)
    if b is not None:
        e = e * jnp.asarray(b)
    s = jnp.sum(e, axis=axes, keepdims=True)
    sign = jnp.sign(s)
    out = jnp.log(jnp.abs(s)) + amax
    if not keepdims:
        out = jnp.squeeze(out, axis=axes)
        sign = jnp.squeeze(sign, axis=axes)
    if return_sign:
        return out, sign
    if b is not None:
        out = jnp.where(sign < 0, jnp.nan, out)
    return out


def softmax(x, axis=-1, where=None, initial=None):
    """exp(x) / sum(exp(x)) along ``axis``, stable. Example: ``nn.softmax(logits, axis=-1)``."""
    x = jnp.asarray(x)
    axes = _axis(axis, x.ndim)
    if where is not None:
        x = jnp.where(where, x, -jnp.inf)
    m = lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True))
    m = jnp.where(jnp.isfinite(m), m, jnp.zeros((), m.dtype))
    e = jnp.exp(x - m)
    if where is not None:
        e = jnp.where(where, e, 0.0)
    return e / jnp.sum(e, axis=axes, keepdims=True)


def log_softmax(x, axis=-1, where=None, initial=None):
    """x - logsumexp(x) along ``axis``. Example: ``nn.log_softmax(logits)``."""
    x = jnp.asarray(x)
    axes = _axis(axis, x.ndim)
    if where is not None:
        x = jnp.where(where, x, -jnp.inf)
    m = lax.stop_gradient(jnp.max(x, axis=axes, keepdims=True))
    m = jnp.where(jnp.isfinite(m), m, jnp.zeros((), m.dtype))
    shifted = x - m
    e = jnp.exp(shifted)
    if where is not None:
        e = jnp.where(where, e, 0.0)
    return shifted - jnp.log(jnp.sum(e, axis=axes, keepdims=True))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """(x - mean) / sqrt(variance + epsilon) along ``axis``. Example: ``nn.standardize(x)``."""
    x = jnp.asarray(x)
    axes = _axis(axis, x.ndim)
    if mean is None:
        mean = jnp.mean(x, axis=axes, keepdims=True)
    if variance is None:
        variance = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    return (x - mean) * lax.rsqrt(variance + epsilon)


normalize = standardize


def one_hot(x, num_classes, dtype="float32", axis=-1):
    """One-hot encoding of integer ``x`` (out-of-range values give all zeros).

    Example:
        >>> nn.one_hot(jnp.array([0, 2]), 3)
        Array([[1., 0., 0.],
               [0., 0., 1.]], dtype=float32)
    """
    x = jnp.asarray(x)
    out_ndim = x.ndim + 1
    ax = axis % out_ndim
    shape = list(x.shape)
    shape.insert(ax, int(num_classes))
    classes = lax.broadcasted_iota(x.dtype if jnp.issubdtype(x.dtype, jnp.integer) else "int32",
                                   tuple(shape), ax)
    xe = jnp.expand_dims(x, ax)
    return (xe == classes).astype(dtype)


def logmeanexp(x, axis=None, keepdims=False):
    """log(mean(exp(x))). Example: ``nn.logmeanexp(x, axis=0)``."""
    x = jnp.asarray(x)
    axes = _axis(axis, x.ndim)
    n = int(np.prod([x.shape[a] for a in axes]))
    return logsumexp(x, axes, keepdims=keepdims) - math.log(n)


def mish(x):
    """x * tanh(softplus(x)). Example: ``nn.mish(x)``."""
    x = jnp.asarray(x)
    return x * jnp.tanh(softplus(x))


def squareplus(x, b=4.0):
    """(x + sqrt(x^2 + b)) / 2. Example: ``nn.squareplus(x)``."""
    x = jnp.asarray(x)
    return (x + jnp.sqrt(x * x + b)) / 2


def sparse_plus(x):
    """0 for x <= -1, (x+1)^2/4 for |x| < 1, x for x >= 1. Example: ``nn.sparse_plus(x)``."""
    x = jnp.asarray(x)
    return jnp.where(x <= -1, 0.0, jnp.where(x >= 1, x, (x + 1) ** 2 / 4))


# --- eager calls as one executable -------------------------------------------------------------
# As in nn.functional: eagerly, these compile once per (shapes, dtypes, options) and run as
# one executable instead of one dispatch per primitive. Every non-array option is static.
_EAGER_STATIC = {
    "softmax": ("axis", "initial"), "log_softmax": ("axis", "initial"),
    "logsumexp": ("axis", "keepdims", "return_sign"), "gelu": ("approximate",),
    "standardize": ("axis", "epsilon"),
    "relu": (), "relu6": (), "leaky_relu": ("negative_slope",), "elu": ("alpha",), "selu": (),
    "silu": (), "hard_tanh": (), "mish": (),
}

jit_when_eager_in(globals(), _EAGER_STATIC)
