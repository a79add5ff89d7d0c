"""More of ``torch.nn.functional``: ``conv_transpose3d``, ``conv_tbc``, ``embedding_bag``,
``gumbel_softmax``, ``pdist``, ``channel_shuffle``, ``rrelu``, ``upsample_nearest`` /
``upsample_bilinear`` and the in-place activation aliases. Re-exported by
``funcgrad.nn.functional``.

funcgrad arrays are immutable, so the in-place aliases (``F.relu_``, ``F.elu_``, ...) compute
the same value as their out-of-place forms and *return* it; the argument is unchanged. Write
``x = F.relu_(x)`` where PyTorch code writes ``F.relu_(x)``.

Example:
    >>> import funcgrad.nn.functional as F
    >>> x = jnp.array([-1.0, 2.0])
    >>> y = F.relu_(x)
    >>> y, x                       # the result is returned; x is unchanged
    (Array([0., 2.], dtype=float32), Array([-1.,  2.], dtype=float32))
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad import debug, lax
from funcgrad.nn import functional as _F

__all__ = [
    "conv_transpose3d", "conv_tbc", "embedding_bag", "gumbel_softmax", "pdist",
    "channel_shuffle", "native_channel_shuffle", "rrelu", "hardtanh", "rrelu_", "upsample_nearest",
    "upsample_bilinear", "relu_", "elu_", "celu_", "selu_", "leaky_relu_", "hardtanh_",
    "threshold_", "multi_head_attention_forward",
]


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """3-d transposed convolution of (N, C, D, H, W), weight (in, out/groups, kd, kh, kw).

    Example:
        >>> F.conv_transpose3d(jnp.ones((1, 4, 3, 3, 3)), jnp.ones((4, 2, 2, 2, 2)),
        ...                    stride=2).shape
        (1, 2, 6, 6, 6)
    """
    return _F._conv_transposend(3, "F.conv_transpose3d", input, weight, bias, stride, padding,
                                output_padding, groups, dilation)


def conv_tbc(input, weight, bias, pad=0):
    """1-d convolution in (time, batch, channel) layout: input (T, B, Cin), weight
    (K, Cin, Cout), bias (Cout,), ``pad`` zeros on both ends of time -> (T + 2 pad - K + 1, B,
    Cout).

    Example:
        >>> F.conv_tbc(jnp.ones((5, 2, 3)), jnp.ones((3, 3, 4)), jnp.zeros(4), pad=1).shape
        (5, 2, 4)
    """
    x, w = jnp.asarray(input), jnp.asarray(weight)
    if x.ndim != 3 or w.ndim != 3 or x.shape[2] != w.shape[1]:
        raise ValueError(f"F.conv_tbc: expected input (T, B, Cin) and weight (K, Cin, Cout) "
                         f"with matching Cin, got {tuple(x.shape)} and {tuple(w.shape)}")
    y = _F.conv1d(jnp.transpose(x, (1, 2, 0)), jnp.transpose(w, (2, 1, 0)), bias,
                  padding=int(pad))
    return jnp.transpose(y, (2, 0, 1))


# --- embedding bags ----------------------------------------------------------------------------
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Sums, means or maxima of ``weight`` rows over bags of ids, without materializing the
    per-id embeddings' layout: ``input`` (B, L) holds B bags of L ids; a 1-d ``input`` with
    ``offsets`` (B,) holds bag b at ``input[offsets[b]:offsets[b + 1]]`` (with
    ``include_last_offset`` the last offset ends the last bag). ``per_sample_weights`` scales
    each id's row (``mode="sum"`` only). Ids equal to ``padding_idx`` are left out (and not
    counted by the mean); empty bags give zeros.

    Example:
        >>> table = jnp.arange(8.0).reshape(4, 2)
        >>> F.embedding_bag(jnp.array([0, 1, 3, 2]), table, jnp.array([0, 3]), mode="sum")
        Array([[ 8., 11.],
               [ 4.,  5.]], dtype=float32)
    """
    if max_norm is not None:
        raise ValueError("F.embedding_bag: max_norm renormalizes the table in place, which "
                         "immutable arrays cannot do; renormalize the weight yourself")
    w = jnp.asarray(weight)
    if w.ndim != 2:
        raise ValueError(f"F.embedding_bag: weight must be 2-d, got shape {tuple(w.shape)}")
    return bag_reduce(input, lambda ids: jnp.take(w, ids, axis=0), w.shape, w.dtype, offsets,
                      mode, per_sample_weights, include_last_offset, padding_idx)


def bag_reduce(input, rows_of, table_shape, dtype, offsets=None, mode="mean",
               per_sample_weights=None, include_last_offset=False, padding_idx=None,
               where="F.embedding_bag"):
    """``F.embedding_bag`` over a table read through ``rows_of(ids)`` (the rows at in-range
    ``ids``, of ``dtype``): a quantized table dequantizes only the rows it gathers.

    Example:
        >>> from funcgrad.nn.functional_extra import bag_reduce
        >>> table = jnp.arange(8.0).reshape(4, 2)
        >>> bag_reduce(jnp.array([[0, 3]]), lambda ids: table[ids] * 10, (4, 2), "float32",
        ...            mode="max")
        Array([[60., 70.]], dtype=float32)
    """
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{where}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    idx = jnp.asarray(input)
    _F._check_ids_dtype(where, idx)
    psw = None if per_sample_weights is None else jnp.asarray(per_sample_weights)
    if psw is not None:
        if mode != "sum":
            raise ValueError(f"{where}: per_sample_weights is only supported for "
                             f"mode='sum', got mode={mode!r}")
        if psw.shape != idx.shape:
            raise ValueError(f"{where}: per_sample_weights {tuple(psw.shape)} must "
                             f"have the shape of input {tuple(idx.shape)}")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{where}: offsets must be None for a 2-d input (each row "
                             "is a bag)")
        nbags, length = idx.shape
        bag = jnp.repeat(jnp.arange(nbags, dtype="int32"), length)
        idx = jnp.reshape(idx, (-1,))
        psw = None if psw is None else jnp.reshape(psw, (-1,))
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{where}: a 1-d input needs offsets (the start of each "
                             "bag)")
        offsets = jnp.asarray(offsets).astype("int32")
        if offsets.ndim != 1:
            raise ValueError(f"{where}: offsets must be 1-d, got shape "
                             f"{tuple(offsets.shape)}")
        if include_last_offset:
            offsets = offsets[:-1]
        nbags = offsets.shape[0]
        pos = jnp.arange(idx.shape[0], dtype="int32")
        bag = jnp.searchsorted(offsets, pos, side="right").astype("int32") - 1
    else:
        raise ValueError(f"{where}: input must be 1-d or 2-d, got shape "
                         f"{tuple(idx.shape)}")
    n, d = table_shape
    debug.check_ids(idx, n, where, of=f"a table of {n} rows")
    keep = bag >= 0
    if padding_idx is not None:
        keep = keep & (idx != padding_idx % n)
    bag = jnp.where(keep, bag, nbags)          # dropped ids go to a spare bag
    rows = rows_of(jnp.clip(idx, 0, n - 1))
    if psw is not None:
        rows = rows * psw[:, None].astype(rows.dtype)
    if mode == "max":
        init = jnp.full((nbags + 1, d), -jnp.inf, dtype)
        out = init.at[bag].max(rows)[:nbags]
        return jnp.where(jnp.isneginf(out), jnp.zeros((), dtype), out)
    out = jnp.zeros((nbags + 1, d), dtype).at[bag].add(rows)[:nbags]
    if mode == "mean":
        count = jnp.zeros((nbags + 1,), dtype).at[bag].add(1.0)[:nbags]
        out = out / jnp.maximum(count, 1.0)[:, None]
    return out


# --- sampling and distances --------------------------------------------------------------------
def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1, key=None):
    """A sample from the Gumbel-softmax (concrete) distribution:
    ``softmax((logits + g) / tau)`` with Gumbel(0, 1) noise ``g``; ``hard=True`` returns the
    one-hot argmax in the forward pass and the soft sample's gradient (straight-through).
    ``key`` (a ``funcgrad.random`` key or an int) seeds the noise; without one it is drawn from
    the host generator (``funcgrad.manual_seed``), fixed at trace time under ``jit``.

    Example:
        >>> y = F.gumbel_softmax(jnp.array([[1.0, 2.0, 0.5]]), tau=0.5, hard=True, key=0)
        >>> float(y.sum()), sorted(set(np.asarray(y).ravel().tolist()))
        (1.0, [0.0, 1.0])
    """
    import funcgrad.random as fr
    logits = jnp.asarray(logits)
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        raise TypeError(f"F.gumbel_softmax: logits must be floating point, got {logits.dtype}")
    key = _F._draw_key(key)
    if not hasattr(key, "shape") or np.shape(key) == ():
        key = fr.PRNGKey(int(key))
    g = fr.gumbel(key, logits.shape, logits.dtype)
    y = _F.softmax((logits + g) / tau, dim=dim)
    if not hard:
        return y
    ax = dim % logits.ndim
    arg = jnp.argmax(y, axis=ax, keepdims=True)
    hot = (lax.broadcasted_iota("int32", y.shape, ax) == arg).astype(y.dtype)
    return hot - lax.stop_gradient(y) + y


def pdist(input, p=2.0):
    """Distances ``||x_i - x_j||_p`` between the rows of ``input`` (N, M) for i < j, in
    row-major order: N (N - 1) / 2 values, as ``scipy.spatial.distance.pdist``. The gradient at
    a zero distance is zero (as PyTorch's).

    Example:
        >>> F.pdist(jnp.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]]))
        Array([ 5., 10.,  5.], dtype=float32)
    """
    x = jnp.asarray(input)
    if x.ndim != 2:
        raise ValueError(f"F.pdist: expected a 2-d input (N, M), got shape {tuple(x.shape)}")
    p = float(p)
    if p < 0:
        raise ValueError(f"F.pdist: p must be non-negative, got {p}")
    i, j = np.triu_indices(x.shape[0], k=1)
    d = jnp.abs(x[jnp.asarray(i.astype(np.int32))] - x[jnp.asarray(j.astype(np.int32))])
    if p == 0:
        return jnp.sum((d != 0).astype(x.dtype), axis=-1)
    if p == np.inf:
        return jnp.max(d, axis=-1) if x.shape[1] else jnp.zeros(d.shape[:1], x.dtype)
    s = jnp.sum(d ** p if p != 1 else d, axis=-1)
    if p == 1:
        return s
    pos = s > 0
    safe = jnp.where(pos, s, jnp.ones((), s.dtype))
    return jnp.where(pos, safe ** (1.0 / p), jnp.zeros((), s.dtype))


def channel_shuffle(input, groups):
    """Interleave the channels of ``groups`` groups: (N, g * k, ...) viewed as (N, g, k, ...)
    and transposed to (N, k, g, ...) (ShuffleNet).

    Example:
        >>> F.channel_shuffle(jnp.arange(6.0).reshape(1, 6, 1), 2)[0, :, 0]
        Array([0., 3., 1., 4., 2., 5.], dtype=float32)
    """
    x = jnp.asarray(input)
    groups = int(groups)
    if x.ndim < 3:
        raise ValueError(f"F.channel_shuffle: expected an input of at least 3 dimensions "
                         f"(N, C, ...), got shape {tuple(x.shape)}")
    if groups <= 0 or x.shape[1] % groups:
        raise ValueError(f"F.channel_shuffle: the number of channels ({x.shape[1]}) must be "
                         f"divisible by groups ({groups})")
    n, c = x.shape[:2]
    rest = x.shape[2:]
    y = jnp.reshape(x, (n, groups, c // groups) + rest)
    return jnp.reshape(jnp.swapaxes(y, 1, 2), x.shape)


native_channel_shuffle = channel_shuffle


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False, key=None):
    """Randomized leaky ReLU: negative inputs are scaled by a slope drawn uniformly from
    [lower, upper] per element in training, by (lower + upper) / 2 otherwise. ``key`` seeds
    the slopes (see ``F.dropout``).

    Example:
        >>> F.rrelu(jnp.array([-3.0, 2.0]), 0.1, 0.3)          # eval: slope 0.2
        Array([-0.6,  2. ], dtype=float32)
    """
    x = jnp.asarray(input)
    if not 0 <= lower <= upper:
        raise ValueError(f"F.rrelu: need 0 <= lower <= upper, got lower={lower}, "
                         f"upper={upper}")
    if training:
        u = _F._hash_uniform(x.shape, _F._draw_key(key)).astype(x.dtype)
        slope = lower + (upper - lower) * u
    else:
        slope = jnp.asarray((lower + upper) / 2.0, x.dtype)
    return jnp.where(x >= 0, x, x * slope)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias of ``F.interpolate(mode="nearest")``.

    Example:
        >>> F.upsample_nearest(jnp.ones((1, 1, 2, 2)), scale_factor=2).shape
        (1, 1, 4, 4)
    """
    return _F.interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated PyTorch alias of ``F.interpolate(mode="bilinear", align_corners=True)``.

    Example:
        >>> F.upsample_bilinear(jnp.array([[[[0.0, 1.0]]]]), size=(1, 3))
        Array([[[[0. , 0.5, 1. ]]]], dtype=float32)
    """
    return _F.interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# --- in-place aliases: same value, returned ------------------------------------------------------
def _returning(fn, name):
    def alias(input, *args, **kwargs):
        return fn(input, *args, **kwargs)
    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = (f"PyTorch's in-place ``F.{name}``: funcgrad arrays are immutable, so this "
                     f"returns ``F.{name[:-1]}(input, ...)`` and leaves ``input`` unchanged "
                     f"(write ``x = F.{name}(x)``).\n\n"
                     f"    Example:\n"
                     f"        >>> x = jnp.array([-2.0, 0.5])\n"
                     f"        >>> bool(jnp.all(F.{name}(x) == F.{name[:-1]}(x)))\n"
                     f"        True\n")
    return alias


relu_ = _returning(_F.relu, "relu_")
elu_ = _returning(_F.elu, "elu_")
celu_ = _returning(_F.celu, "celu_")
selu_ = _returning(_F.selu, "selu_")
leaky_relu_ = _returning(_F.leaky_relu, "leaky_relu_")
rrelu_ = _returning(rrelu, "rrelu_")


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``clip(input, min_val, max_val)``, PyTorch's ``F.hardtanh`` (gradient 1 inside the
    interval, 0 outside).

    Example:
        >>> F.hardtanh(jnp.array([-2.0, 0.3, 2.0]), -0.5, 1.0)
        Array([-0.5,  0.3,  1. ], dtype=float32)
    """
    if min_val > max_val:
        raise ValueError(f"F.hardtanh: min_val ({min_val}) must not exceed max_val ({max_val})")
    x = jnp.asarray(input)
    return jnp.where(x < min_val, jnp.asarray(min_val, x.dtype),
                     jnp.where(x > max_val, jnp.asarray(max_val, x.dtype), x))


hardtanh_ = _returning(hardtanh, "hardtanh_")


def threshold_(input, threshold, value):
    """PyTorch's in-place ``F.threshold_``: returns ``F.threshold(input, threshold, value)``
    (funcgrad arrays are immutable; ``input`` is unchanged).

    Example:
        >>> F.threshold_(jnp.array([-2.0, 0.5]), 0.0, 1.0)
        Array([1. , 0.5], dtype=float32)
    """
    return _F.threshold(input, threshold, value)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False,
                                 dropout_key=None):
    """PyTorch's functional multi-head attention over (L, N, E) (or unbatched (L, E)) inputs
    with explicit weights: the computation of ``nn.MultiheadAttention.forward`` (packed
    ``in_proj_weight`` or separate ``q/k/v_proj_weight``, ``bias_k``/``bias_v``,
    ``add_zero_attn``, masks, ``dropout_p`` in training, seeded by ``dropout_key``). Returns
    ``(output, weights)`` (weights None unless ``need_weights``). Precomputed ``static_k`` /
    ``static_v`` are not taken: project the keys and values with the weights instead.

    Example:
        >>> E, H = 4, 2
        >>> x = jnp.ones((3, 1, E))
        >>> out, w = F.multi_head_attention_forward(
        ...     x, x, x, E, H, jnp.eye(3 * E, E), jnp.zeros(3 * E), None, None, False, 0.0,
        ...     jnp.eye(E), jnp.zeros(E))
        >>> out.shape, w.shape
        ((3, 1, 4), (1, 3, 3))
    """
    from funcgrad.nn.attention import MultiheadAttention
    from funcgrad.nn.dropout import Dropout
    from funcgrad.nn.linear import Linear
    from funcgrad.nn.module import Module, Parameter
    if static_k is not None or static_v is not None:
        raise ValueError("F.multi_head_attention_forward: static_k / static_v (precomputed "
                         "per-head keys and values) are not accepted; pass key and value with "
                         "their projection weights")
    q = jnp.asarray(query)
    e = int(embed_dim_to_check)
    if q.shape[-1] != e:
        raise ValueError(f"F.multi_head_attention_forward: query's embedding size "
                         f"{q.shape[-1]} (shape {tuple(q.shape)}) differs from "
                         f"embed_dim_to_check {e}")
    if e % num_heads:
        raise ValueError(f"F.multi_head_attention_forward: embed_dim {e} must be divisible by "
                         f"num_heads {num_heads}")
    # the module's forward, bound to the given weights (no parameters are initialized)
    attn = MultiheadAttention.__new__(MultiheadAttention)
    Module.__init__(attn)
    separate = bool(use_separate_proj_weight)
    attn.embed_dim, attn.num_heads, attn.head_dim = e, int(num_heads), e // int(num_heads)
    attn.kdim = int(jnp.shape(key)[-1])
    attn.vdim = int(jnp.shape(value)[-1])
    attn._qkv_same_embed_dim = not separate
    attn.batch_first, attn.add_zero_attn = False, bool(add_zero_attn)
    attn.dropout = float(dropout_p)
    weights = {"in_proj_weight": None if separate else in_proj_weight,
               "q_proj_weight": q_proj_weight if separate else None,
               "k_proj_weight": k_proj_weight if separate else None,
               "v_proj_weight": v_proj_weight if separate else None,
               "in_proj_bias": in_proj_bias, "bias_k": bias_k, "bias_v": bias_v}
    for name, w in weights.items():
        attn.register_parameter(name, None if w is None else Parameter(w))
    out_proj = Linear.__new__(Linear)
    Module.__init__(out_proj)
    out_proj.in_features = out_proj.out_features = e
    out_proj.register_parameter("weight", Parameter(out_proj_weight))
    out_proj.register_parameter("bias", None if out_proj_bias is None
                                else Parameter(out_proj_bias))
    attn.out_proj = out_proj
    if attn.dropout > 0:
        attn.attn_drop = Dropout(attn.dropout)
    attn.train(bool(training))
    if attn.dropout > 0 and training and dropout_key is not None:
        attn.attn_drop = _KeyedDropout(attn.dropout, dropout_key)
    return attn.forward(query, key, value, key_padding_mask=key_padding_mask,
                        need_weights=need_weights, attn_mask=attn_mask,
                        average_attn_weights=average_attn_weights, is_causal=is_causal)


def _KeyedDropout(p, key):
    from funcgrad.nn.module import Module

    class KeyedDropout(Module):
        def forward(self, t):
            return _F.dropout(t, p, True, key=key)
    return KeyedDropout()
