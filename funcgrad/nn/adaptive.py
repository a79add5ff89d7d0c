"""``AdaptiveLogSoftmaxWithLoss`` (Grave et al., 2017, "Efficient softmax approximation for
GPUs") with PyTorch's parameters (``head``, ``tail[i]`` = two bias-free Linears) and results.

PyTorch routes each row only through the tail cluster of its target (boolean indexing, a
data-dependent shape). Here every row goes through every cluster and the target's entry is
selected, so the module has static shapes and works under ``jit``/``grad``/``vmap``; the
values are PyTorch's.

Example:
    >>> import funcgrad.nn as nn
    >>> asm = nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[4, 7])
    >>> out = asm(jnp.ones((3, 8)), jnp.array([0, 5, 9]))
    >>> out.output.shape, out.loss.shape
    ((3,), ())
    >>> bool(jnp.allclose(jnp.exp(asm.log_prob(jnp.ones((1, 8)))).sum(), 1.0))
    True
"""
import collections

import funcgrad.numpy as jnp
from funcgrad import debug
from funcgrad.nn import functional as F
from funcgrad.nn.containers import ModuleList, Sequential
from funcgrad.nn.linear import Linear
from funcgrad.nn.module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = collections.namedtuple("_ASMoutput", ["output", "loss"])


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: the ``cutoffs[0]`` most frequent classes and one entry per tail cluster
    in the head; the classes of cluster i behind a projection to ``in_features //
    div_value ** (i + 1)`` features. ``forward(input, target)`` returns ``(output, loss)``:
    the log-probability of each target and the mean negative log-likelihood; ``log_prob``
    gives the full (N, n_classes) log-distribution and ``predict`` its argmax.

    Example:
        >>> asm = nn.AdaptiveLogSoftmaxWithLoss(4, 6, cutoffs=[2], div_value=2.0)
        >>> [tuple(p.shape) for p in asm.parameters()]
        [(3, 4), (2, 4), (4, 2)]
        >>> asm.predict(jnp.ones((2, 4))).shape
        (2,)
    """

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if (not cutoffs or cutoffs != sorted(cutoffs) or min(cutoffs) <= 0
                or max(cutoffs) > n_classes - 1 or len(set(cutoffs)) != len(cutoffs)
                or any(int(c) != c for c in cutoffs)):
            raise ValueError(f"AdaptiveLogSoftmaxWithLoss: cutoffs should be a sequence of "
                             f"unique, positive integers sorted in an increasing order, where "
                             f"each value is between 1 and n_classes-1 ({n_classes - 1}); got "
                             f"{cutoffs}")
        self.in_features, self.n_classes = int(in_features), int(n_classes)
        self.cutoffs = [int(c) for c in cutoffs] + [self.n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(self.in_features, self.head_size, bias=head_bias, dtype=dtype)
        tail = []
        for i in range(self.n_clusters):
            hidden = int(self.in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            tail.append(Sequential(Linear(self.in_features, hidden, bias=False, dtype=dtype),
                                   Linear(hidden, size, bias=False, dtype=dtype)))
        self.tail = ModuleList(tail)

    def _batched(self, input, target=None):
        x = jnp.asarray(input)
        if target is None:
            if x.ndim not in (1, 2):
                raise ValueError(f"AdaptiveLogSoftmaxWithLoss: expected a 1-d or 2-d input, "
                                 f"got shape {tuple(x.shape)}")
            return (x[None], False) if x.ndim == 1 else (x, True)
        t = jnp.asarray(target)
        if t.ndim == 1:
            if x.ndim != 2 or x.shape[0] != t.shape[0]:
                raise ValueError(f"AdaptiveLogSoftmaxWithLoss: a 1-d target of {t.shape[0]} "
                                 f"needs a 2-d input with as many rows, got {tuple(x.shape)}")
            return x, t, True
        if t.ndim == 0:
            if x.ndim != 1:
                raise ValueError(f"AdaptiveLogSoftmaxWithLoss: a 0-d target needs a 1-d "
                                 f"input, got {tuple(x.shape)}")
            return x[None], t[None], False
        raise ValueError(f"AdaptiveLogSoftmaxWithLoss: 0-d or 1-d target expected, got shape "
                         f"{tuple(t.shape)}")

    def _full_log_prob(self, x):
        head = F.log_softmax(self.head(x), dim=1)
        parts = [head[:, :self.shortlist_size]]
        for i, cluster in enumerate(self.tail):
            parts.append(F.log_softmax(cluster(x), dim=1)
                         + head[:, self.shortlist_size + i][:, None])
        return jnp.concatenate(parts, axis=1)

    def forward(self, input, target):
        x, t, batched = self._batched(input, target)
        debug.check_ids(t, self.n_classes, "AdaptiveLogSoftmaxWithLoss", what="target",
                        of=f"{self.n_classes} classes")
        t = t.astype("int32")
        picked = jnp.take_along_axis(self._full_log_prob(x), t[:, None], axis=1)[:, 0]
        loss = jnp.mean(-picked)
        return _ASMoutput(picked if batched else picked[0], loss)

    def log_prob(self, input):
        """Log-probabilities of all ``n_classes`` classes, (N, n_classes) (or (n_classes,))."""
        x, batched = self._batched(input)
        out = self._full_log_prob(x)
        return out if batched else out[0]

    def predict(self, input):
        """The most likely class of each row (``argmax`` of ``log_prob``)."""
        return jnp.argmax(self.log_prob(input), axis=-1)

    def extra_repr(self):
        return (f"in_features={self.in_features}, n_classes={self.n_classes}, "
                f"cutoffs={self.cutoffs[:-1]}, div_value={self.div_value}")
