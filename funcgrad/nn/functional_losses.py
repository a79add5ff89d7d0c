"""More losses of ``torch.nn.functional``: ``ctc_loss``, ``multi_margin_loss``,
``triplet_margin_with_distance_loss`` and ``linear_cross_entropy``, with PyTorch's
reductions. Re-exported by ``funcgrad.nn.functional``.

Example:
    >>> import funcgrad.nn.functional as F
    >>> F.multi_margin_loss(jnp.array([[0.1, 0.2, 0.4, 0.8]]), jnp.array([3]))
    Array(0.325, dtype=float32)
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad import debug, lax
from funcgrad.core.interpreters import Tracer
from funcgrad.nn import functional as _F

__all__ = ["ctc_loss", "multi_margin_loss", "triplet_margin_with_distance_loss",
           "linear_cross_entropy"]


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """Multi-class hinge loss: for each sample, the mean over classes i != y of
    ``max(0, margin - x[y] + x[i]) ** p`` (times ``weight[y]``), for ``input`` (N, C) or (C,).

    Example:
        >>> F.multi_margin_loss(jnp.array([[0.1, 0.2, 0.4, 0.8]]), jnp.array([3]), p=2)
        Array(0.1525, dtype=float32)
    """
    reduction = _F._legacy_reduction(size_average, reduce, reduction, "F.multi_margin_loss")
    if p not in (1, 2):
        raise ValueError(f"F.multi_margin_loss: only p == 1 and p == 2 are supported, got {p}")
    x, t = jnp.asarray(input), jnp.asarray(target)
    if x.ndim not in (1, 2):
        raise ValueError(f"F.multi_margin_loss: expected a 1-d or 2-d input, got shape "
                         f"{tuple(x.shape)}")
    unbatched = x.ndim == 1
    if unbatched:
        x, t = x[None], jnp.reshape(t, (1,))
    if t.shape != x.shape[:1]:
        raise ValueError(f"F.multi_margin_loss: target {tuple(jnp.shape(target))} must have "
                         f"shape {tuple(x.shape[:1])} for input {tuple(jnp.shape(input))}")
    c = x.shape[1]
    debug.check_ids(t, c, "F.multi_margin_loss", what="target", of=f"{c} classes")
    t = t.astype("int32")
    xy = jnp.take_along_axis(x, t[:, None], axis=1)
    z = jnp.maximum(margin - xy + x, 0)
    if p == 2:
        z = z * z
    if weight is not None:
        z = z * jnp.take(jnp.asarray(weight, x.dtype), t)[:, None]
    z = jnp.where(jnp.arange(c)[None, :] == t[:, None], jnp.zeros((), x.dtype), z)
    loss = jnp.sum(z, axis=1) / c
    if unbatched:
        loss = loss[0]
    return _F._reduce(loss, reduction, "F.multi_margin_loss")


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with any distance ``d`` (default
    ``F.pairwise_distance``); ``swap`` uses ``min(d(a, n), d(p, n))`` as the negative distance.

    Example:
        >>> a, p, n = jnp.zeros((1, 2)), jnp.array([[3.0, 4.0]]), jnp.array([[1.0, 0.0]])
        >>> F.triplet_margin_with_distance_loss(a, p, n, margin=1.0)
        Array(4.9999995, dtype=float32)
    """
    if margin <= 0:
        raise ValueError(f"F.triplet_margin_with_distance_loss: margin must be positive, got "
                         f"{margin}")
    d = distance_function if distance_function is not None else _F.pairwise_distance
    a, p, n = jnp.asarray(anchor), jnp.asarray(positive), jnp.asarray(negative)
    if not a.ndim == p.ndim == n.ndim:
        raise ValueError(f"F.triplet_margin_with_distance_loss: anchor {tuple(a.shape)}, "
                         f"positive {tuple(p.shape)} and negative {tuple(n.shape)} must have "
                         f"the same number of dimensions")
    dp, dn = d(a, p), d(a, n)
    if swap:
        dn = jnp.minimum(dn, d(p, n))
    loss = jnp.maximum(dp - dn + margin, 0)
    return _F._reduce(loss, reduction, "F.triplet_margin_with_distance_loss")


def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None,
                         reduction="mean", ignore_index=None, label_smoothing=0.0,
                         options=None):
    """``F.cross_entropy(F.linear(input, linear_weight, linear_bias), target, ...)`` (PyTorch
    2.13's fused form; ``input`` (N, D), ``linear_weight`` (C, D)). XLA fuses the product into
    the loss; ``options`` (PyTorch's chunking hints) is accepted and ignored.

    Example:
        >>> x, w = jnp.array([[1.0, 0.0]]), jnp.array([[2.0, 0.0], [0.0, 0.0]])
        >>> F.linear_cross_entropy(x, w, jnp.array([0]))
        Array(0.12692805, dtype=float32)
    """
    x, w = jnp.asarray(input), jnp.asarray(linear_weight)
    if w.ndim < 2 or w.shape[-1] != x.shape[-1]:
        raise ValueError(f"F.linear_cross_entropy: linear_weight must be (C, ..., D) with D = "
                         f"input's last axis, got input {tuple(x.shape)} and linear_weight "
                         f"{tuple(w.shape)}")
    classes = tuple(w.shape[:-1])            # (C, *out_features): logits (N, C, *out_features)
    logits = _F.linear(x, jnp.reshape(w, (-1, w.shape[-1])))
    logits = jnp.reshape(logits, tuple(x.shape[:-1]) + classes)
    if linear_bias is not None:
        logits = logits + jnp.reshape(jnp.asarray(linear_bias), classes)
    return _F.cross_entropy(logits, target, weight=weight,
                            ignore_index=-100 if ignore_index is None else ignore_index,
                            reduction=reduction, label_smoothing=label_smoothing)


# --- connectionist temporal classification -------------------------------------------------------
def _lengths(name, v, n):
    arr = np.asarray(v) if not isinstance(v, Tracer) else None
    if arr is not None:
        arr = arr.reshape(-1) if arr.ndim else np.full((n,), int(arr))
        if arr.shape != (n,):
            raise ValueError(f"F.ctc_loss: {name} must have one entry per batch element ({n}), "
                             f"got shape {arr.shape}")
        return jnp.asarray(arr.astype(np.int32)), arr
    return jnp.reshape(jnp.asarray(v), (n,)).astype("int32"), None


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Connectionist temporal classification loss (Graves et al., 2006), as PyTorch:
    ``log_probs`` (T, N, C) or (T, C) log-softmax outputs, ``targets`` (N, S) padded or 1-d
    concatenated (then ``target_lengths`` must be concrete), ``input_lengths`` and
    ``target_lengths`` (N,). ``reduction="mean"`` divides each loss by its target length, then
    averages; an impossible alignment gives ``inf`` (0 and a zero gradient with
    ``zero_infinity=True``). The forward recursion runs as one ``lax.scan`` over time, so it
    compiles once and differentiates with ``funcgrad.grad``.

    Example:
        >>> logp = F.log_softmax(jnp.zeros((4, 1, 3)), 2)        # uniform over 3 symbols
        >>> F.ctc_loss(logp, jnp.array([[1, 2]]), jnp.array([4]), jnp.array([2]),
        ...            reduction="sum")
        Array(1.686399, dtype=float32)
    """
    lp = jnp.asarray(log_probs)
    if lp.ndim == 2:
        lp = lp[:, None]
        unbatched = True
    elif lp.ndim == 3:
        unbatched = False
    else:
        raise ValueError(f"F.ctc_loss: log_probs must be (T, N, C) or (T, C), got shape "
                         f"{tuple(lp.shape)}")
    if not jnp.issubdtype(lp.dtype, jnp.floating):
        raise TypeError(f"F.ctc_loss: log_probs must be floating point, got {lp.dtype}")
    t_max, nb, c = lp.shape
    if not 0 <= blank < c:
        raise ValueError(f"F.ctc_loss: blank {blank} must be a class index in [0, {c})")
    in_len, in_len_np = _lengths("input_lengths", input_lengths, nb)
    tg_len, tg_len_np = _lengths("target_lengths", target_lengths, nb)
    tg = jnp.asarray(targets)
    if unbatched and tg.ndim == 1 and tg_len_np is not None and tg.shape[0] == tg_len_np[0]:
        tg = tg[None]
    if tg.ndim == 1:                   # concatenated targets: cut into padded rows
        if tg_len_np is None:
            raise ValueError("F.ctc_loss: concatenated (1-d) targets need concrete "
                             "target_lengths")
        if int(tg_len_np.sum()) != tg.shape[0]:
            raise ValueError(f"F.ctc_loss: target_lengths sum to {int(tg_len_np.sum())} but "
                             f"the concatenated targets have {tg.shape[0]} entries")
        s_max = max(int(tg_len_np.max()), 1) if nb else 1
        starts = np.concatenate([[0], np.cumsum(tg_len_np)[:-1]])
        pos = np.minimum(starts[:, None] + np.arange(s_max)[None, :],
                         max(tg.shape[0] - 1, 0))
        tg = jnp.take(tg, jnp.asarray(pos.astype(np.int32)), axis=0) if tg.shape[0] else \
            jnp.zeros((nb, s_max), "int32")
    elif tg.ndim != 2 or tg.shape[0] != nb:
        raise ValueError(f"F.ctc_loss: targets must be (N, S) or 1-d, got shape "
                         f"{tuple(tg.shape)} for a batch of {nb}")
    if in_len_np is not None and (in_len_np > t_max).any():
        raise ValueError(f"F.ctc_loss: input_lengths {in_len_np.tolist()} exceed the "
                         f"{t_max} time steps of log_probs")
    if tg_len_np is not None and (tg_len_np > tg.shape[1]).any():
        raise ValueError(f"F.ctc_loss: target_lengths {tg_len_np.tolist()} exceed the "
                         f"{tg.shape[1]} columns of targets")
    tg = tg.astype("int32")
    s_max = tg.shape[1]
    ext = 2 * s_max + 1
    # extended labels: blank, l1, blank, l2, ..., blank
    lab = jnp.full((nb, ext), blank, "int32")
    lab = lab.at[:, 1::2].set(tg) if s_max else lab
    neg = jnp.asarray(-1e30 if lp.dtype != np.float16 else -6e4, lp.dtype)
    s_idx = jnp.arange(ext, dtype="int32")
    # a skip from s - 2 is allowed onto a label that differs from the label two back
    prev2 = jnp.concatenate([jnp.full((nb, 2), -1, "int32"), lab[:, :-2]], axis=1)
    can_skip = (s_idx[None, :] % 2 == 1) & (lab != prev2)
    limit = 2 * tg_len + 1                                       # valid extended positions

    def emit(t):
        return jnp.take_along_axis(lp[t], lab, axis=1)          # (N, ext)

    alpha0 = jnp.where(s_idx[None, :] < jnp.minimum(2, limit)[:, None], emit(0), neg)

    def lse(*xs):
        m = xs[0]
        for x in xs[1:]:
            m = jnp.maximum(m, x)
        return m + jnp.log(sum(jnp.exp(x - m) for x in xs))

    def step(alpha, t):
        a1 = jnp.concatenate([jnp.full((nb, 1), neg, lp.dtype), alpha[:, :-1]], axis=1)
        a2 = jnp.concatenate([jnp.full((nb, 2), neg, lp.dtype), alpha[:, :-2]], axis=1)
        a2 = jnp.where(can_skip, a2, neg)
        new = lse(alpha, a1, a2) + jnp.take_along_axis(lp[t], lab, axis=1)
        new = jnp.where(s_idx[None, :] < limit[:, None], new, neg)
        new = jnp.maximum(new, neg)
        return jnp.where((t < in_len)[:, None], new, alpha), None

    if t_max > 1:
        alpha, _ = lax.scan(step, alpha0, jnp.arange(1, t_max, dtype="int32"))
    else:
        alpha = alpha0
    last = jnp.take_along_axis(alpha, (limit - 1)[:, None], axis=1)[:, 0]
    before = jnp.take_along_axis(alpha, jnp.maximum(limit - 2, 0)[:, None], axis=1)[:, 0]
    before = jnp.where(tg_len > 0, before, neg)
    nll = -lse(last, before)
    impossible = (nll > -neg / 2) | (in_len == 0)
    inf = jnp.asarray(np.inf, lp.dtype)
    if zero_infinity:
        nll = jnp.where(impossible, jnp.zeros((), lp.dtype), nll)
    else:
        nll = jnp.where(impossible, inf, nll)
    if unbatched:
        nll = nll[0]
    if reduction == "mean":
        return jnp.mean(nll / jnp.maximum(tg_len, 1).astype(lp.dtype).reshape(nll.shape))
    return _F._reduce(nll, reduction, "F.ctc_loss")
