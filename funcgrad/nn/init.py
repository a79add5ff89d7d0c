"""Parameter initialization (``torch.nn.init``) and the global seed for module construction.

Initial values are drawn on the host with NumPy's ``Generator`` (PCG64) seeded by
``funcgrad.manual_seed``, then placed on the device, so model construction is reproducible and
independent of ``funcgrad.random``. The numbers differ from PyTorch's (a different generator);
the distributions and PyTorch's default schemes are the same. Each function replaces the
Parameter's array (arrays are immutable) and returns the Parameter.

Example:
    >>> import math
    >>> layer = nn.Linear(4, 3)
    >>> p = nn.init.kaiming_uniform_(layer.get_parameter("weight"), a=math.sqrt(5))
    >>> layer.weight.shape, bool(jnp.all(jnp.abs(layer.weight) <= 0.5))
    ((3, 4), True)
"""
import math

import numpy as np

_rng = np.random.default_rng(0)


def manual_seed(seed):
    """Seed the generator used to initialize modules (and key-less ``F.dropout``).

    Example:
        >>> funcgrad.manual_seed(42)
        Generator(PCG64) at 0x...
        >>> a = nn.Linear(3, 3)
        >>> _ = funcgrad.manual_seed(42); b = nn.Linear(3, 3)
        >>> bool(jnp.all(a.weight == b.weight))
        True
    """
    global _rng
    _rng = np.random.default_rng(int(seed))
    return _rng


def generator():
    """The host generator behind module initialization."""
    return _rng


def _target(tensor):
    from funcgrad.nn.module import Parameter
    return tensor if isinstance(tensor, Parameter) else None


def _assign(tensor, values):
    import funcgrad.numpy as jnp
    from funcgrad.nn.module import Parameter
    dtype = np.dtype(tensor.dtype) if hasattr(tensor, "dtype") else np.float32
    arr = jnp.asarray(np.asarray(values, dtype=dtype))
    if isinstance(tensor, Parameter):
        tensor.data = arr
        return tensor
    return arr


def _shape(tensor):
    return tuple(tensor.shape)


def calculate_gain(nonlinearity, param=None):
    """PyTorch's recommended gain for a nonlinearity. Example: ``calculate_gain("relu") == sqrt(2)``."""
    linear = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid"]
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError(f"fan in and fan out need at least 2 dimensions, got shape {shape}")
    receptive = int(np.prod(shape[2:])) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _fan(tensor, mode):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with U(a, b). Example: ``nn.init.uniform_(p, -0.1, 0.1)``."""
    g = generator or _rng
    return _assign(tensor, g.uniform(a, b, _shape(tensor)))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with N(mean, std^2). Example: ``nn.init.normal_(p, std=0.02)``."""
    g = generator or _rng
    return _assign(tensor, g.normal(mean, std, _shape(tensor)))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal values redrawn until inside [a, b]. Example: ``nn.init.trunc_normal_(p, std=0.02)``."""
    g = generator or _rng
    shape = _shape(tensor)
    out = g.normal(mean, std, shape)
    bad = (out < a) | (out > b)
    while bad.any():
        out[bad] = g.normal(mean, std, int(bad.sum()))
        bad = (out < a) | (out > b)
    return _assign(tensor, out)


def constant_(tensor, val):
    """Fill with ``val``. Example: ``nn.init.constant_(p, 0.5)``."""
    return _assign(tensor, np.full(_shape(tensor), val))


def zeros_(tensor):
    """Fill with zeros. Example: ``nn.init.zeros_(layer.get_parameter("bias"))``."""
    return constant_(tensor, 0.0)


def ones_(tensor):
    """Fill with ones. Example: ``nn.init.ones_(p)``."""
    return constant_(tensor, 1.0)


def eye_(tensor):
    """Identity matrix (2-d). Example: ``nn.init.eye_(p)``."""
    shape = _shape(tensor)
    if len(shape) != 2:
        raise ValueError(f"eye_ needs a 2-d tensor, got shape {shape}")
    return _assign(tensor, np.eye(*shape))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)). Example: ``nn.init.xavier_uniform_(p)``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)). Example: ``nn.init.xavier_normal_(p)``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b), b = gain * sqrt(3 / fan). Example: ``nn.init.kaiming_uniform_(p, a=math.sqrt(5))``."""
    fan = _fan(tensor, mode)
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / fan) if fan else 0.0
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2), std = gain / sqrt(fan). Example: ``nn.init.kaiming_normal_(p, mode="fan_out")``."""
    fan = _fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR of a Gaussian one. Example: ``nn.init.orthogonal_(p)``."""
    g = generator or _rng
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError(f"orthogonal_ needs at least 2 dimensions, got shape {shape}")
    rows, cols = shape[0], int(np.prod(shape[1:]))
    flat = g.normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _assign(tensor, gain * q.reshape(shape))


# PyTorch's names without the trailing underscore (deprecated there, kept for ports).
uniform, normal, constant = uniform_, normal_, constant_
xavier_uniform, xavier_normal = xavier_uniform_, xavier_normal_
kaiming_uniform, kaiming_normal, orthogonal = kaiming_uniform_, kaiming_normal_, orthogonal_
