"""``MultiheadAttention`` and ``TransformerEncoderLayer`` with PyTorch's parameter names
(``in_proj_weight`` (3E, E) or ``q/k/v_proj_weight`` when kdim/vdim differ, ``in_proj_bias``,
``bias_k``/``bias_v``, ``out_proj.weight``/``out_proj.bias``)."""
import math

import numpy as np

import funcgrad.numpy as jnp
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.dropout import Dropout
from funcgrad.nn.linear import Linear
from funcgrad.nn.module import Module, Parameter, host_ones, host_zeros
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
        >>> mha = nn.MultiheadAttention(16, 4, kdim=8, vdim=12, batch_first=True)
        >>> out, w = mha(jnp.ones((2, 5, 16)), jnp.ones((2, 7, 8)), jnp.ones((2, 7, 12)))
        >>> out.shape, w.shape
        ((2, 5, 16), (2, 5, 7))
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


class TransformerEncoderLayer(Module):
    """Self-attention + feed-forward block with residuals and LayerNorms (post-norm by
    default, ``norm_first=True`` for pre-norm), as PyTorch.

    Example:
        >>> layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True)
        >>> layer(jnp.ones((2, 10, 32))).shape
        (2, 10, 32)
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in ("relu", "gelu"):
                raise ValueError(f"TransformerEncoderLayer: activation must be 'relu' or "
                                 f"'gelu', got {activation!r}")
            self.activation = F.relu if activation == "relu" else F.gelu
        else:
            self.activation = activation

    def _sa(self, x, mask, kpm, is_causal):
        out = self.self_attn(x, x, x, key_padding_mask=kpm, need_weights=False,
                             attn_mask=mask, is_causal=is_causal)[0]
        return self.dropout1(out)

    def _ff(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff(self.norm2(x))
        else:
            x = self.norm1(x + self._sa(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff(x))
        return x


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of ``encoder_layer``. Example: ``nn.TransformerEncoder(layer, 2)``."""

    def __init__(self, encoder_layer, num_layers, norm=None):
        super().__init__()
        import copy
        from funcgrad.nn.containers import ModuleList
        from funcgrad import tree_util
        layers = []
        for _ in range(num_layers):
            leaves, td = tree_util.tree_flatten(encoder_layer)
            clone = td.unflatten(leaves)
            clone.__dict__["_origin"] = None
            for m in clone.modules():
                m.__dict__["_origin"] = None
                m.__dict__["_aux"] = None
            layers.append(clone)
        del copy
        self.layers = ModuleList(layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=is_causal)
        return self.norm(x) if self.norm is not None else x
