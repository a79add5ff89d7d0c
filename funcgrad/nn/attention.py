"""``MultiheadAttention``, the Transformer encoder and decoder layers and stacks, and
``Transformer``, with PyTorch's parameter names
(``in_proj_weight`` (3E, E) or ``q/k/v_proj_weight`` when kdim/vdim differ, ``in_proj_bias``,
``bias_k``/``bias_v``, ``out_proj.weight``/``out_proj.bias``)."""
import math

import numpy as np

import funcgrad.numpy as jnp
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.dropout import Dropout
from funcgrad.nn.linear import Linear
from funcgrad.nn.module import Module, Parameter, host_zeros
from funcgrad.nn.normalization import LayerNorm


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention (self- or cross-attention), as PyTorch's.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(output, weights or None)``.
    Inputs are (L, N, E) (``batch_first``: (N, L, E)) or unbatched (L, E); key and value have
    ``kdim``/``vdim`` features. Masks follow PyTorch: a boolean True means *not allowed*, a
    float mask is added to the scores. ``attn_mask`` is (L, S) or (N * num_heads, L, S)
    (unbatched: (num_heads, L, S)); ``key_padding_mask`` is (N, S) (unbatched: (S,)).
    ``is_causal=True`` with no ``attn_mask`` builds the causal mask (PyTorch requires the mask
    and treats ``is_causal`` as a hint). Weights are (N, L, S) averaged over heads, or
    (N, num_heads, L, S) with ``average_attn_weights=False``; S counts the extra ``bias_k`` and
    zero-attention columns.

    Parameters have PyTorch's names: ``in_proj_weight`` (3E, E) when kdim == vdim == E, else
    ``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim), ``v_proj_weight`` (E, vdim);
    ``in_proj_bias`` (3E,); ``bias_k``/``bias_v`` (1, 1, E) with ``add_bias_kv``;
    ``out_proj.weight``/``out_proj.bias``.

    Example:
        >>> mha = nn.MultiheadAttention(8, 2, kdim=4, vdim=6, batch_first=True)
        >>> out, w = mha(jnp.ones((2, 5, 8)), jnp.ones((2, 3, 4)), jnp.ones((2, 3, 6)))
        >>> out.shape, w.shape          # w: attention weights averaged over heads
        ((2, 5, 8), (2, 5, 3))
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be positive, "
                             f"got embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by "
                             f"num_heads {num_heads}")
        E = int(embed_dim)
        self.embed_dim, self.num_heads = E, int(num_heads)
        self.kdim = int(kdim) if kdim is not None else E
        self.vdim = int(vdim) if vdim is not None else E
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        self.head_dim = E // self.num_heads
        self.dropout, self.batch_first = float(dropout), batch_first
        self.add_zero_attn = bool(add_zero_attn)
        dt = dtype or "float32"
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(host_zeros((3 * E, E), dt))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(host_zeros((E, E), dt))
            self.k_proj_weight = Parameter(host_zeros((E, self.kdim), dt))
            self.v_proj_weight = Parameter(host_zeros((E, self.vdim), dt))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(host_zeros((3 * E,), dt))
        else:
            self.register_parameter("in_proj_bias", None)
        if add_bias_kv:
            self.bias_k = Parameter(host_zeros((1, 1, E), dt))
            self.bias_v = Parameter(host_zeros((1, 1, E), dt))
        else:
            self.bias_k = self.bias_v = None
        self.out_proj = Linear(E, E, bias=bias, dtype=dt)
        self._reset_parameters()
        if self.dropout > 0:
            self.attn_drop = Dropout(self.dropout)

    def _reset_parameters(self):
        for name in ("in_proj_weight", "q_proj_weight", "k_proj_weight", "v_proj_weight"):
            if self._parameters.get(name) is not None:
                init.xavier_uniform_(self.get_parameter(name))
        if self.in_proj_bias is not None:
            init.zeros_(self.get_parameter("in_proj_bias"))
            init.zeros_(self.out_proj.get_parameter("bias"))
        for name in ("bias_k", "bias_v"):
            if self._parameters.get(name) is not None:
                init.xavier_normal_(self.get_parameter(name))

    def _additive_mask(self, mask, dtype, what):
        m = jnp.asarray(mask)
        if m.dtype == jnp.bool_:
            return jnp.where(m, jnp.full((), -jnp.inf, dtype), jnp.zeros((), dtype))
        if not jnp.issubdtype(m.dtype, jnp.floating):
            raise TypeError(f"MultiheadAttention: {what} must be a bool or floating mask, got "
                            f"dtype {m.dtype}")
        return m.astype(dtype)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        q, k, v = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
        if q.ndim not in (2, 3) or k.ndim != q.ndim or v.ndim != q.ndim:
            raise ValueError(f"MultiheadAttention: query, key and value must all be 3-D "
                             f"(batched) or all 2-D (unbatched), got shapes {tuple(q.shape)}, "
                             f"{tuple(k.shape)}, {tuple(v.shape)}")
        unbatched = q.ndim == 2
        if unbatched:
            q, k, v = q[:, None], k[:, None], v[:, None]
        elif self.batch_first:
            q, k, v = (jnp.swapaxes(t, 0, 1) for t in (q, k, v))
        L, N, E = q.shape
        S = k.shape[0]
        H, D = self.num_heads, self.head_dim
        if E != self.embed_dim or k.shape[2] != self.kdim or v.shape[2] != self.vdim or \
                k.shape[:2] != v.shape[:2] or k.shape[1] != N:
            raise ValueError(
                f"MultiheadAttention(embed_dim={self.embed_dim}, kdim={self.kdim}, "
                f"vdim={self.vdim}): got query {tuple(jnp.shape(query))}, key "
                f"{tuple(jnp.shape(key))}, value {tuple(jnp.shape(value))} (batch_first="
                f"{self.batch_first}); key and value need the same batch and length")
        if self._qkv_same_embed_dim:
            w_q, w_k, w_v = jnp.split(self.in_proj_weight, 3, axis=0)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        b = self.in_proj_bias
        b_q, b_k, b_v = jnp.split(b, 3) if b is not None else (None, None, None)
        qp = F.linear(q, w_q, b_q)
        kp = F.linear(k, w_k, b_k)
        vp = F.linear(v, w_v, b_v)
        extra = 0                                  # key columns appended after the S keys
        if self.bias_k is not None:
            kp = jnp.concatenate([kp, jnp.broadcast_to(self.bias_k, (1, N, E))], axis=0)
            vp = jnp.concatenate([vp, jnp.broadcast_to(self.bias_v, (1, N, E))], axis=0)
            extra += 1

        def heads(t):       # (T, N, E) -> (N, H, T, D)
            return jnp.transpose(jnp.reshape(t, (t.shape[0], N, H, D)), (1, 2, 0, 3))
        qh, kh, vh = heads(qp), heads(kp), heads(vp)
        if self.add_zero_attn:
            zeros = jnp.zeros((N, H, 1, D), kh.dtype)
            kh = jnp.concatenate([kh, zeros], axis=2)
            vh = jnp.concatenate([vh, zeros], axis=2)
            extra += 1

        dt = qh.dtype
        mask = None                                # additive, broadcastable to (N, H, L, S')
        if is_causal and attn_mask is None:
            attn_mask = np.triu(np.ones((L, S), bool), 1)
        if attn_mask is not None:
            m = self._additive_mask(attn_mask, dt, "attn_mask")
            want3 = (H, L, S) if unbatched else (N * H, L, S)
            if m.ndim == 2 and m.shape == (L, S):
                m = m[None, None]
            elif m.ndim == 3 and tuple(m.shape) == want3:
                m = jnp.reshape(m, (N, H, L, S))
            else:
                raise ValueError(f"MultiheadAttention: attn_mask must be {(L, S)} or {want3} "
                                 f"for query length {L}, key length {S}, batch {N} and "
                                 f"{H} heads, got shape {tuple(m.shape)}")
            mask = m
        if key_padding_mask is not None:
            kpm = self._additive_mask(key_padding_mask, dt, "key_padding_mask")
            want = (S,) if unbatched else (N, S)
            if tuple(kpm.shape) != want:
                raise ValueError(f"MultiheadAttention: key_padding_mask must have shape "
                                 f"{want}, got {tuple(kpm.shape)}")
            kpm = jnp.reshape(kpm, (N, 1, 1, S))
            mask = kpm if mask is None else mask + kpm
        if mask is not None and extra:
            mask = jnp.pad(mask, [(0, 0)] * 3 + [(0, extra)])

        scores = jnp.matmul(qh * (1.0 / math.sqrt(D)), jnp.swapaxes(kh, -1, -2))
        if mask is not None:
            scores = scores + mask
        w = F.softmax(scores, dim=-1)                            # (N, H, L, S')
        if self.dropout > 0 and self.training:
            w = self.attn_drop(w)
        out = jnp.matmul(w, vh)                                  # (N, H, L, D)
        out = jnp.reshape(jnp.transpose(out, (2, 0, 1, 3)), (L, N, E))
        out = self.out_proj(out)
        if unbatched:
            out = out[:, 0]
        elif self.batch_first:
            out = jnp.swapaxes(out, 0, 1)
        if not need_weights:
            return out, None
        weights = jnp.mean(w, axis=1) if average_attn_weights else w
        if unbatched:
            weights = weights[0]
        return out, weights

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _activation(activation, owner):
    """The feed-forward activation of a transformer layer: "relu", "gelu" or a callable."""
    if isinstance(activation, str):
        if activation not in ("relu", "gelu"):
            raise ValueError(f"{owner}: activation must be 'relu', 'gelu' or a callable, got "
                             f"{activation!r}")
        return F.relu if activation == "relu" else F.gelu
    if not callable(activation):
        raise TypeError(f"{owner}: activation must be 'relu', 'gelu' or a callable, got "
                        f"{type(activation).__name__}")
    return activation


class _TransformerLayer(Module):
    """What encoder and decoder layers share: PyTorch's submodules (``self_attn``, optionally
    ``multihead_attn``, ``linear1``, ``dropout``, ``linear2``, ``norm1..n``,
    ``dropout1..n``, registered in PyTorch's order so state dicts list the same keys) and
    the residual blocks. Subclasses set ``_cross_attention``."""

    _cross_attention = False

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        cross_attention = self._cross_attention
        dt = dtype or "float32"
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dt)
        if cross_attention:
            self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                     batch_first=batch_first, dtype=dt)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dt)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dt)
        self.norm_first = norm_first
        blocks = 3 if cross_attention else 2
        for i in range(1, blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dt))
        for i in range(1, blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation, type(self).__name__)

    def _residual(self, x, norm, block):
        """x + block(norm(x)) (pre-norm, ``norm_first``) or norm(x + block(x)) (post-norm)."""
        if self.norm_first:
            return x + block(norm(x))
        return norm(x + block(x))

    @staticmethod
    def _attend(attn, drop, x, mem, mask, kpm, is_causal):
        out = attn(x, mem, mem, key_padding_mask=kpm, need_weights=False, attn_mask=mask,
                   is_causal=is_causal)[0]
        return drop(out)

    def _ff(self, x, drop):
        return drop(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_TransformerLayer):
    """Self-attention + feed-forward block with residuals and LayerNorms (post-norm by
    default, ``norm_first=True`` for pre-norm), as PyTorch.

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``; masks as in
    ``MultiheadAttention``.

    Example:
        >>> layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(jnp.ones((2, 5, 8))).shape
        (2, 5, 8)
    """

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = self._residual(src, self.norm1, lambda y: self._attend(
            self.self_attn, self.dropout1, y, y, src_mask, src_key_padding_mask, is_causal))
        return self._residual(x, self.norm2, lambda y: self._ff(y, self.dropout2))


class TransformerDecoderLayer(_TransformerLayer):
    """Self-attention over the target, cross-attention to ``memory`` (the encoder's output)
    and a feed-forward block, each with a residual and a LayerNorm (post-norm by default,
    ``norm_first=True`` for pre-norm), as PyTorch. Parameters and state-dict keys are
    PyTorch's: ``self_attn.*``, ``multihead_attn.*``, ``linear1``, ``linear2``,
    ``norm1``-``norm3``.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``; masks as in
    ``MultiheadAttention`` (boolean True = not allowed, or float added to the scores);
    ``tgt_is_causal=True`` without a ``tgt_mask`` builds the causal mask.

    Example:
        >>> layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, batch_first=True)
        >>> layer(jnp.ones((2, 5, 8)), jnp.ones((2, 5, 8))).shape     # (target, memory)
        (2, 5, 8)
    """

    _cross_attention = True

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = self._residual(tgt, self.norm1, lambda y: self._attend(
            self.self_attn, self.dropout1, y, y, tgt_mask, tgt_key_padding_mask,
            bool(tgt_is_causal)))
        x = self._residual(x, self.norm2, lambda y: self._attend(
            self.multihead_attn, self.dropout2, y, memory, memory_mask,
            memory_key_padding_mask, bool(memory_is_causal)))
        return self._residual(x, self.norm3, lambda y: self._ff(y, self.dropout3))


def _clones(layer, n):
    """``n`` independent copies of ``layer`` (deep copies, as PyTorch's)."""
    import copy
    from funcgrad.nn.containers import ModuleList
    return ModuleList([copy.deepcopy(layer) for _ in range(n)])


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of ``encoder_layer`` followed by the optional ``norm``.

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=False)``.

    Example:
        >>> layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        >>> enc = nn.TransformerEncoder(layer, num_layers=2)
        >>> len(enc.layers), enc(jnp.ones((2, 5, 8))).shape
        (2, (2, 5, 8))
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of ``decoder_layer`` followed by the optional ``norm``;
    every layer attends to the same ``memory``.

    ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
    memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)``.

    Example:
        >>> layer = nn.TransformerDecoderLayer(8, 2, 16, batch_first=True)
        >>> dec = nn.TransformerDecoder(layer, num_layers=2)
        >>> dec(jnp.ones((2, 5, 8)), jnp.ones((2, 5, 8))).shape
        (2, 5, 8)
    """

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need", as PyTorch's:
    ``encoder`` (``num_encoder_layers`` encoder layers and a final LayerNorm) and ``decoder``
    (``num_decoder_layers`` decoder layers and a final LayerNorm), or ``custom_encoder`` /
    ``custom_decoder``; matrices are initialized xavier-uniform. State-dict keys are
    PyTorch's (``encoder.layers.0.self_attn.in_proj_weight``, ..., ``decoder.norm.bias``).

    ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
    src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
    src_is_causal=False, tgt_is_causal=False, memory_is_causal=False)``.

    Example:
        >>> model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1,
        ...                        num_decoder_layers=1, dim_feedforward=16, batch_first=True)
        >>> mask = nn.Transformer.generate_square_subsequent_mask(5)
        >>> model(jnp.ones((2, 5, 8)), jnp.ones((2, 5, 8)), tgt_mask=mask).shape
        (2, 5, 8)
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                      batch_first, norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(
                TransformerEncoderLayer(*layer_args, dtype=dtype), num_encoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(
                TransformerDecoderLayer(*layer_args, dtype=dtype), num_decoder_layers,
                LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.data.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=False, tgt_is_causal=False,
                memory_is_causal=False):
        s, t = jnp.shape(src), jnp.shape(tgt)
        batch_axis = 0 if self.batch_first else 1
        if len(s) == 3 and (len(t) != 3 or s[batch_axis] != t[batch_axis]):
            raise RuntimeError(f"Transformer: the batch number of src and tgt must be equal, got "
                             f"src {tuple(s)} and tgt {tuple(t)} (batch_first="
                             f"{self.batch_first})")
        if s[-1] != self.d_model or t[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src and tgt must be equal to "
                             f"d_model={self.d_model}, got src {tuple(s)} and tgt {tuple(t)}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) float causal mask: -inf above the diagonal (future positions), 0 on
        and below it.

        Example:
            >>> nn.Transformer.generate_square_subsequent_mask(3)
            Array([[  0., -inf, -inf],
                   [  0.,   0., -inf],
                   [  0.,   0.,   0.]], dtype=float32)
        """
        dt = np.dtype(dtype or "float32")
        mask = np.where(np.triu(np.ones((sz, sz), bool), 1), -np.inf, 0.0).astype(dt)
        return jnp.asarray(mask)
