"""Loss modules (``nn.CrossEntropyLoss`` etc.) wrapping the ``nn.functional`` losses."""
from funcgrad.nn import functional as F
from funcgrad.nn.module import Module


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction


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
