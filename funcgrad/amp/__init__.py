"""Mixed precision: ``autocast`` (low-precision matrix products, float32 losses and reductions)
and ``GradScaler`` (loss scaling for float16), after PyTorch's ``torch.amp``.

Example:
    >>> model = nn.Linear(4, 3)
    >>> x, y = jnp.ones((2, 4)), jnp.array([0, 2])
    >>> with funcgrad.amp.autocast("cpu"):
    ...     logits = model(x)                    # matrix products in bfloat16
    ...     loss = F.cross_entropy(logits, y)    # float32
    >>> logits.dtype, loss.dtype
    (dtype(bfloat16), dtype('float32'))
"""
from funcgrad.amp.autocast import (FLOAT32_OPS, LOW_PRECISION_OPS, PROMOTE_OPS,  # noqa: F401
                                   autocast,
                                   get_autocast_dtype, is_autocast_enabled)
from funcgrad.amp.grad_scaler import GradScaler  # noqa: F401
