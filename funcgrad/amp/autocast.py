"""``autocast``: mixed precision as a rule kind of the primitives.

While an ``autocast`` region is open, every primitive application that the program makes goes
through the ``"autocast"`` rule of its primitive, if it has one, before any interpreter sees it
(``core.primitive.policy_scope``). Two rules exist:

* low precision (matrix products and convolutions): floating operands of float32, float16 or
  bfloat16 are cast to the region's dtype; the product accumulates in float32
  (``preferred_element_type``) and is returned in the low dtype, as PyTorch returns it;
* float32 (losses' building blocks and numerically sensitive operations): float16/bfloat16
  operands are cast to float32, and the result stays float32.

Everything else runs in the dtype of its operands. Since the rewrite happens at ``bind``, plain
``funcgrad.numpy`` code is covered like ``nn`` modules, in eager code and while ``jit``,
``grad``, ``vmap``, ``checkpoint`` or ``scan`` trace; the machinery of those transformations
(jvp rules, the backward pass, batching rules, lowering) runs with the region closed, so
derivatives follow the dtypes of the forward program. ``docs/amp.md`` has the lists.
"""
import functools

import numpy as np

from funcgrad.core import dtypes
from funcgrad.core.primitive import all_primitives, current_policy, policy_scope, rule_table
from funcgrad.core.values import aval_of
from funcgrad.lax.elementwise import convert_element_type

_F32 = np.dtype(np.float32)
_LOW_DTYPES = {np.dtype(dtypes.bfloat16): "bfloat16", np.dtype(np.float16): "float16"}
_CASTABLE = (np.dtype(np.float32),) + tuple(_LOW_DTYPES)

#: Matrix-product-class primitives: run on operands cast to the low dtype.
LOW_PRECISION_OPS = ("dot_general", "conv_general_dilated")

#: Those that ask for a float32 result (``preferred_element_type``) before the cast back: a
#: low-precision product with a float32 result is native to cuBLAS and XLA:CPU. Convolutions
#: stay low-precision end to end: cuDNN has no bfloat16-in, float32-out convolution (XLA
#: would run it in float32), and it and XLA:CPU accumulate low-precision convolutions in
#: float32 anyway.
_ACCUMULATE_F32 = ("dot_general",)

#: Primitives that run in float32 under autocast (PyTorch's float32 list, at primitive level:
#: softmax, log_softmax, the losses, norms and normalization statistics are built from these).
FLOAT32_OPS = ("exp", "expm1", "log", "log1p", "pow", "integer_pow", "rsqrt", "tan", "sinh",
               "cosh", "asin", "acos", "erf_inv", "reduce_sum", "reduce_prod", "cumsum",
               "cumprod", "cumlogsumexp")

#: Primitives whose floating operands must share a dtype: when the casts above make them
#: differ (a float32 sum added to a bfloat16 maximum inside ``logaddexp``), they run in the
#: widest one, as PyTorch promotes (library code written for one dtype keeps working).
PROMOTE_OPS = ("add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter",
               "select_n", "clamp", "concatenate", "eq", "ne", "lt", "gt", "le", "ge",
               "complex", "igamma", "igammac", "polygamma", "zeta", "scatter", "scatter_add",
               "scatter_mul", "scatter_min", "scatter_max", "dynamic_update_slice", "pad")

#: Default low dtype per device type (PyTorch's defaults).
DEFAULT_DTYPES = {"cpu": "bfloat16", "cuda": "float16", "gpu": "float16", "tpu": "bfloat16",
                  "xla": "bfloat16"}


class AutocastPolicy:
    """The state of an open autocast region: its device type and low dtype (hashable, so a
    ``jit`` cache can key on it)."""

    __slots__ = ("device_type", "dtype", "rules")

    def __init__(self, device_type, dtype):
        self.device_type = device_type
        self.dtype = dtype
        self.rules = rule_table("autocast")

    def _key(self):
        return (self.device_type, self.dtype.name)

    def __eq__(self, other):
        return type(other) is AutocastPolicy and other._key() == self._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"AutocastPolicy({self.device_type!r}, {self.dtype.name})"


def _cast(x, dtype):
    if aval_of(x).dtype == dtype:
        return x
    return convert_element_type(x, dtype)


def _low_precision_rule(policy, prim, args, params):
    low = policy.dtype
    in_dtypes = [aval_of(a).dtype for a in args]
    if not all(d in _CASTABLE for d in in_dtypes):   # integer, float64 or complex products
        return prim.bind(*args, **params)
    args = [_cast(a, low) for a in args]
    if params.get("preferred_element_type") is not None or prim.name not in _ACCUMULATE_F32:
        return prim.bind(*args, **params)
    out = prim.bind(*args, **dict(params, preferred_element_type=_F32))
    return _cast(out, low)


def _float32_rule(policy, prim, args, params):
    args = [_cast(a, _F32) if aval_of(a).dtype in _LOW_DTYPES else a for a in args]
    return prim.bind(*args, **params)


def _promote_rule(policy, prim, args, params):
    widest = None
    for a in args:
        d = aval_of(a).dtype
        if d in _CASTABLE:
            if widest is None:
                widest = d
            elif d != widest:
                widest = _F32       # a low dtype meets float32, or float16 meets bfloat16
    if widest is not None:
        args = [_cast(a, widest) if aval_of(a).dtype in _CASTABLE else a for a in args]
    return prim.bind(*args, **params)


def _register_rules():
    by_name = {p.name: p for p in all_primitives()}
    for names, rule in ((LOW_PRECISION_OPS, _low_precision_rule),
                        (FLOAT32_OPS, _float32_rule), (PROMOTE_OPS, _promote_rule)):
        for name in names:
            if name not in by_name:
                raise RuntimeError(f"funcgrad.amp: no primitive named {name!r} for its "
                                   f"autocast list")
            by_name[name].def_rule("autocast", rule)


_register_rules()


def _resolve_dtype(device_type, dtype):
    if not isinstance(device_type, str) or device_type.lower() not in DEFAULT_DTYPES:
        raise ValueError(f"funcgrad.autocast: device_type must be one of "
                         f"{sorted(DEFAULT_DTYPES)}, got {device_type!r}")
    if dtype is None:
        dtype = DEFAULT_DTYPES[device_type.lower()]
    try:
        d = np.dtype(getattr(dtype, "dtype", dtype))
    except TypeError:
        d = None
    if d not in _LOW_DTYPES:
        raise ValueError(f"funcgrad.autocast: dtype must be bfloat16 or float16, got {dtype!r}")
    return d


class autocast:
    """Run matrix products and convolutions in a low-precision dtype, and losses, softmaxes,
    reductions and other sensitive operations in float32, inside a ``with`` block or a
    decorated function (PyTorch's ``torch.autocast``; ``docs/amp.md`` has the lists).

    ``dtype`` defaults to bfloat16 for ``"cpu"``/``"tpu"`` and float16 for ``"cuda"``;
    ``enabled=False`` opens a region without autocasting (nested inside another, it is
    float32). Works in eager code and under ``jit``, ``grad``, ``vmap``, ``checkpoint`` and
    ``scan``; gradients with respect to float32 parameters are float32.

    Example:
        >>> x, w = jnp.ones((2, 3)), jnp.ones((3, 4))
        >>> with funcgrad.autocast("cpu"):
        ...     y = x @ w                      # bfloat16
        ...     loss = jnp.sum(y)              # float32
        >>> y.dtype, loss.dtype
        (dtype(bfloat16), dtype('float32'))
        >>> @funcgrad.autocast("cpu", dtype=jnp.float16)
        ... def forward(w, x):
        ...     return x @ w
        >>> forward(w, x).dtype
        dtype('float16')
    """

    def __init__(self, device_type, dtype=None, enabled=True):
        self.device_type = device_type.lower() if isinstance(device_type, str) else device_type
        self.fast_dtype = _resolve_dtype(device_type, dtype)
        if not isinstance(enabled, bool):
            raise TypeError(f"funcgrad.autocast: enabled must be a bool, got {enabled!r}")
        self.enabled = enabled
        self._scopes = []

    def _policy(self):
        return AutocastPolicy(self.device_type, self.fast_dtype) if self.enabled else None

    def __enter__(self):
        scope = policy_scope(self._policy())
        scope.__enter__()
        self._scopes.append(scope)
        return self

    def __exit__(self, *exc):
        return self._scopes.pop().__exit__(*exc)

    def __call__(self, fun):
        policy = self._policy()

        @functools.wraps(fun)
        def wrapper(*args, **kwargs):
            with policy_scope(policy):
                return fun(*args, **kwargs)
        return wrapper

    def __repr__(self):
        return (f"autocast({self.device_type!r}, dtype={self.fast_dtype.name}, "
                f"enabled={self.enabled})")


def is_autocast_enabled():
    """Whether an autocast region is open here.

    Example:
        >>> with funcgrad.autocast("cpu"):
        ...     funcgrad.amp.is_autocast_enabled()
        True
    """
    return isinstance(current_policy(), AutocastPolicy)


def get_autocast_dtype():
    """The low dtype of the open autocast region, or None outside one.

    Example:
        >>> with funcgrad.autocast("cpu"):
        ...     funcgrad.amp.get_autocast_dtype()
        dtype(bfloat16)
    """
    p = current_policy()
    return p.dtype if isinstance(p, AutocastPolicy) else None
