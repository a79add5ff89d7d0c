"""``MultiheadAttention`` and ``TransformerEncoderLayer`` with PyTorch's parameter names
(``in_proj_weight`` (3E, E), ``in_proj_bias``, ``out_proj.weight``/``out_proj.bias``)."""
import math

import funcgrad.numpy as jnp
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.dropout import Dropout
from funcgrad.nn.linear import Linear
from funcgrad.nn.module import Module, Parameter, host_ones, host_zeros
from funcgrad.nn.normalization import LayerNorm


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention (self- or cross-attention).

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(output, weights or None)``; masks
    follow PyTorch: boolean True means *not allowed*, float masks are added.

    Example:
        >>> mha = nn.MultiheadAttention(16, 4, batch_first=True)
        >>> out, w = mha(x, x, x)
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim {embed_dim} must be divisible by "
                             f"num_heads {num_heads}")
        if (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)) or add_bias_kv \
                or add_zero_attn:
            raise ValueError("MultiheadAttention: kdim/vdim different from embed_dim, "
                             "add_bias_kv and add_zero_attn are not supported")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout, self.batch_first = float(dropout), batch_first
        dt = dtype or "float32"
        self.in_proj_weight = Parameter(host_zeros((3 * embed_dim, embed_dim), dt))
        if bias:
            self.in_proj_bias = Parameter(host_zeros((3 * embed_dim,), dt))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        init.xavier_uniform_(self.get_parameter("in_proj_weight"))
        if bias:
            init.zeros_(self.out_proj.get_parameter("bias"))
        if self.dropout > 0:
            self.attn_drop = Dropout(self.dropout)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        q, k, v = jnp.asarray(query), jnp.asarray(key), jnp.asarray(value)
        unbatched = q.ndim == 2
        if unbatched:
            q, k, v = q[:, None], k[:, None], v[:, None]
        elif self.batch_first:
            q, k, v = (jnp.swapaxes(t, 0, 1) for t in (q, k, v))
        L, N, E = q.shape
        S = k.shape[0]
        H, D = self.num_heads, self.head_dim
        w_q, w_k, w_v = jnp.split(self.in_proj_weight, 3, axis=0)
        b = self.in_proj_bias
        b_q, b_k, b_v = jnp.split(b, 3) if b is not None else (None, None, None)
        qp = F.linear(q, w_q, b_q)
        kp = F.linear(k, w_k, b_k)
        vp = F.linear(v, w_v, b_v)

        def heads(t, n):       # (T, N, E) -> (N, H, T, D)
            return jnp.transpose(jnp.reshape(t, (n, N, H, D)), (1, 2, 0, 3))
        qh, kh, vh = heads(qp, L), heads(kp, S), heads(vp, S)
        scores = jnp.matmul(qh, jnp.swapaxes(kh, -1, -2)) / math.sqrt(D)
        if is_causal and attn_mask is None:
            attn_mask = ~jnp.asarray(jnp.tril(jnp.ones((L, S), bool)))
        if attn_mask is not None:
            m = jnp.asarray(attn_mask)
            if m.ndim == 3:
                m = jnp.reshape(m, (N, H, L, S))
            scores = jnp.where(m, -jnp.inf, scores) if m.dtype == jnp.bool_ else scores + m
        if key_padding_mask is not None:
            kpm = jnp.asarray(key_padding_mask)
            if unbatched:
                kpm = kpm[None]
            kpm = kpm[:, None, None, :]
            scores = jnp.where(kpm, -jnp.inf, scores) if kpm.dtype == jnp.bool_ else \
                scores + kpm
        w = F.softmax(scores, dim=-1)
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
