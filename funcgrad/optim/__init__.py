"""funcgrad.optim: PyTorch's optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam,
RAdam, Adadelta, Rprop, ASGD), LR schedulers and gradient clipping, updating
``nn.Parameter``s in place or as pure functions inside jit.

Example:
    >>> opt = funcgrad.optim.Adam(model.parameters(), lr=1e-3)
    >>> opt.step(funcgrad.grad(loss_fn)(model, x, y))
"""
from funcgrad.optim import lr_scheduler  # noqa: F401
from funcgrad.optim.clip import clip_grad_norm, clip_grad_norm_, clip_grad_value_  # noqa: F401
from funcgrad.optim.optimizer import Optimizer  # noqa: F401
from funcgrad.optim.optimizers import SGD, Adagrad, Adam, AdamW, RMSprop  # noqa: F401
from funcgrad.optim.extra_optimizers import (ASGD, Adadelta, Adamax, NAdam, RAdam,  # noqa: F401
                                             Rprop)
