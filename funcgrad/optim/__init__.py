"""funcgrad.optim: PyTorch's optimizers (SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, NAdam,
RAdam, Adadelta, Rprop, ASGD, Adafactor, Muon, LBFGS), LR schedulers and gradient clipping, updating
``nn.Parameter``s in place or as pure functions inside jit.

Example:
    >>> model = nn.Linear(3, 1)
    >>> x, y = jnp.ones((8, 3)), jnp.zeros((8, 1))
    >>> loss_fn = lambda m, x, y: F.mse_loss(m(x), y)
    >>> opt = funcgrad.optim.Adam(model.parameters(), lr=1e-2)
    >>> losses = []
    >>> for step in range(20):
    ...     losses.append(float(loss_fn(model, x, y)))
    ...     opt.step(funcgrad.grad(loss_fn)(model, x, y))
    >>> losses[-1] < losses[0]
    True
"""
from funcgrad.optim import lr_scheduler  # noqa: F401
from funcgrad.optim.clip import clip_grad_norm, clip_grad_norm_, clip_grad_value_  # noqa: F401
from funcgrad.optim.optimizer import Optimizer  # noqa: F401
from funcgrad.optim.optimizers import SGD, Adagrad, Adam, AdamW, RMSprop  # noqa: F401
from funcgrad.optim.extra_optimizers import (ASGD, Adadelta, Adamax, NAdam, RAdam,  # noqa: F401
                                             Rprop)
from funcgrad.optim.lbfgs import LBFGS  # noqa: F401
from funcgrad.optim.matrix_optimizers import Adafactor, Muon  # noqa: F401
