"""Loss modules (``nn.CrossEntropyLoss`` etc.) wrapping the ``nn.functional`` losses."""
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module


class _Loss(Module):
    def __init__(self, reduction="mean", size_average=None, reduce=None):
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction,
                                             type(self).__name__)


class CrossEntropyLoss(_Loss):
    """``F.cross_entropy`` as a module. Example: ``nn.CrossEntropyLoss(label_smoothing=0.1)(logits, y)``."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        if weight is not None:
            self.register_buffer("weight", weight)

    def forward(self, input, target):
        w = self._buffers.get("weight")
        return F.cross_entropy(input, target, w, self.ignore_index, self.reduction,
                               self.label_smoothing)


class NLLLoss(_Loss):
    """``F.nll_loss`` as a module. Example: ``nn.NLLLoss()(logp, y)``."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.ignore_index = ignore_index
        if weight is not None:
            self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.nll_loss(input, target, self._buffers.get("weight"), self.ignore_index,
                          self.reduction)


class MSELoss(_Loss):
    """Mean squared error module. Example: ``nn.MSELoss()(p, y)``."""

    def forward(self, input, target):
        return F.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """Mean absolute error module. Example: ``nn.L1Loss()(p, y)``."""

    def forward(self, input, target):
        return F.l1_loss(input, target, self.reduction)


class SmoothL1Loss(_Loss):
    """Smooth L1 module. Example: ``nn.SmoothL1Loss(beta=0.5)(p, y)``."""

    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class HuberLoss(_Loss):
    """Huber module. Example: ``nn.HuberLoss(delta=2.0)(p, y)``."""

    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, self.reduction, self.delta)


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities. Example: ``nn.BCELoss()(p, y)``."""

    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        if weight is not None:
            self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self._buffers.get("weight"),
                                      self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of logits. Example: ``nn.BCEWithLogitsLoss(pos_weight=w)(z, y)``."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        if weight is not None:
            self.register_buffer("weight", weight)
        if pos_weight is not None:
            self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self._buffers.get("weight"),
                                                  self.reduction,
                                                  self._buffers.get("pos_weight"))


class KLDivLoss(_Loss):
    """KL divergence module. Example: ``nn.KLDivLoss(reduction="batchmean")(logq, p)``."""

    def __init__(self, reduction="mean", log_target=False):
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, self.reduction, self.log_target)


class MarginRankingLoss(_Loss):
    """``F.margin_ranking_loss``: max(0, -y * (x1 - x2) + margin).

    Example:
        >>> x1, x2 = jnp.array([1.0, 2.0]), jnp.array([0.8, 3.0])
        >>> nn.MarginRankingLoss(margin=0.5)(x1, x2, jnp.array([1.0, -1.0]))   # y of 1 or -1
        Array(0.15, dtype=float32)
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction, size_average, reduce)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``F.hinge_embedding_loss``: x for y = 1, max(0, margin - x) for y = -1.

    Example:
        >>> distances, y = jnp.array([0.5, 1.5]), jnp.array([1.0, -1.0])
        >>> nn.HingeEmbeddingLoss(margin=2.0)(distances, y)
        Array(0.5, dtype=float32)
    """

    def __init__(self, margin=1.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction, size_average, reduce)
        self.margin = margin

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class SoftMarginLoss(_Loss):
    """``F.soft_margin_loss``: log(1 + exp(-y x)).

    Example:
        >>> nn.SoftMarginLoss()(jnp.array([2.0, -1.0]), jnp.array([1.0, 1.0]))   # y of 1 or -1
        Array(0.72009486, dtype=float32)
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction, size_average, reduce)

    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``F.triplet_margin_loss``: max(d(a, p) - d(a, n) + margin, 0) with the ``p``-norm
    pairwise distance.

    Example:
        >>> anchor, positive, negative = jnp.zeros((1, 2)), jnp.ones((1, 2)), jnp.full((1, 2), 1.5)
        >>> nn.TripletMarginLoss(margin=1.0, p=2)(anchor, positive, negative)
        Array(0.29289317, dtype=float32)
    """

    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None,
                 reduce=None, reduction="mean"):
        super().__init__(reduction, size_average, reduce)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p,
                                     self.eps, self.swap, reduction=self.reduction)


class CosineEmbeddingLoss(_Loss):
    """``F.cosine_embedding_loss``: 1 - cos(x1, x2) for y = 1, max(0, cos - margin) for y = -1.

    Example:
        >>> a, b = jnp.array([[1.0, 0.0], [1.0, 1.0]]), jnp.array([[1.0, 1.0], [1.0, 1.0]])
        >>> nn.CosineEmbeddingLoss(margin=0.1)(a, b, jnp.array([1.0, -1.0]))
        Array(0.59644663, dtype=float32)
    """

    def __init__(self, margin=0.0, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction, size_average, reduce)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    """``F.poisson_nll_loss`` as a module.

    Example:
        >>> log_rate, counts = jnp.array([0.0, 1.0]), jnp.array([1.0, 3.0])
        >>> nn.PoissonNLLLoss(log_input=True, full=True)(log_rate, counts)
        Array(1.2411816, dtype=float32)
    """

    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(reduction, size_average, reduce)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """``F.gaussian_nll_loss`` as a module: ``forward(input, target, var)``.

    Example:
        >>> mean, y, var = jnp.array([0.0, 1.0]), jnp.array([0.5, 1.0]), jnp.array([1.0, 2.0])
        >>> nn.GaussianNLLLoss(full=True)(mean, y, var)
        Array(1.1547253, dtype=float32)
    """

    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    """``F.multilabel_soft_margin_loss`` with an optional per-class ``weight`` buffer.

    Example:
        >>> logits, multi_hot = jnp.array([[2.0, -1.0, 0.0]]), jnp.array([[1.0, 0.0, 1.0]])
        >>> nn.MultiLabelSoftMarginLoss()(logits, multi_hot)
        Array(0.37777898, dtype=float32)
    """

    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction, size_average, reduce)
        if weight is not None:
            self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, self._buffers.get("weight"),
                                             reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """``F.multilabel_margin_loss``: hinge loss between each target class (indices ending at
    the first -1) and every non-target class.

    Example:
        >>> scores = jnp.array([[0.1, 0.2, 0.4, 0.8]])
        >>> nn.MultiLabelMarginLoss()(scores, jnp.array([[3, 0, -1, 1]]))
        Array(0.84999996, dtype=float32)
    """

    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction, size_average, reduce)

    def forward(self, input, target):
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated name for ``NLLLoss`` on (N, C, H, W) inputs; the same loss."""


class MultiMarginLoss(_Loss):
    """``F.multi_margin_loss``: multi-class hinge loss with ``p`` 1 or 2, ``margin`` and class
    ``weight``.

    Example:
        >>> nn.MultiMarginLoss()(jnp.array([[0.1, 0.2, 0.4, 0.8]]), jnp.array([3]))
        Array(0.325, dtype=float32)
    """

    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(reduction, size_average, reduce)
        if p not in (1, 2):
            raise ValueError(f"MultiMarginLoss: only p == 1 and p == 2 are supported, got {p}")
        self.p, self.margin = p, margin
        if weight is not None:
            self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, self.p, self.margin,
                                   self._buffers.get("weight"), reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """``F.triplet_margin_with_distance_loss`` with any ``distance_function``.

    Example:
        >>> loss = nn.TripletMarginWithDistanceLoss(
        ...     distance_function=lambda a, b: 1.0 - F.cosine_similarity(a, b))
        >>> loss(jnp.array([[1.0, 0.0]]), jnp.array([[1.0, 0.0]]), jnp.array([[0.0, 1.0]]))
        Array(0., dtype=float32)
    """

    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction)
        self.distance_function, self.margin, self.swap = distance_function, margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """``F.ctc_loss`` as a module: ``CTCLoss(blank=0, reduction="mean",
    zero_infinity=False)(log_probs, targets, input_lengths, target_lengths)``.

    Example:
        >>> logp = F.log_softmax(jnp.zeros((4, 1, 3)), 2)
        >>> nn.CTCLoss(reduction="sum")(logp, jnp.array([[1, 2]]), jnp.array([4]),
        ...                            jnp.array([2]))
        Array(1.686399, dtype=float32)
    """

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__(reduction)
        self.blank, self.zero_infinity = int(blank), bool(zero_infinity)

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                          self.reduction, self.zero_infinity)


class LinearCrossEntropyLoss(_Loss):
    """PyTorch 2.13's fused linear layer + cross-entropy: holds ``linear`` (``Linear(in_features,
    num_classes * prod(out_features), bias)``) and computes ``F.linear_cross_entropy`` of its
    logits reshaped to (N, num_classes, *out_features).

    Example:
        >>> loss = nn.LinearCrossEntropyLoss(4, 3)
        >>> loss(jnp.ones((2, 4)), jnp.array([0, 2])).shape
        ()
    """

    def __init__(self, in_features, num_classes, *, out_features=(), bias=False, device=None,
                 dtype=None, reduction="mean", weight=None, ignore_index=None,
                 label_smoothing=0.0, options=None):
        super().__init__(reduction)
        from funcgrad.nn.linear import Linear
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise ValueError(f"LinearCrossEntropyLoss: expected weight shape {(num_classes,)}, "
                             f"got {tuple(weight.shape)}")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"LinearCrossEntropyLoss: label_smoothing must be in [0, 1], got "
                             f"{label_smoothing}")
        self.num_classes, self.out_features = int(num_classes), tuple(out_features)
        self.ignore_index, self.label_smoothing, self.options = (ignore_index, label_smoothing,
                                                                 options)
        size = self.num_classes
        for d in self.out_features:
            size *= int(d)
        self.linear = Linear(in_features, size, bias=bias, dtype=dtype)
        if weight is not None:
            self.register_buffer("weight", weight)

    def forward(self, input, target):
        shape = (self.num_classes,) + self.out_features
        w = self.linear.weight.reshape(shape + (self.linear.in_features,))
        b = None if self.linear.bias is None else self.linear.bias.reshape(shape)
        return F.linear_cross_entropy(input, w, target, linear_bias=b,
                                      weight=self._buffers.get("weight"),
                                      reduction=self.reduction, ignore_index=self.ignore_index,
                                      label_smoothing=self.label_smoothing)
