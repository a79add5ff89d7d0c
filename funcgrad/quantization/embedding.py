"""Quantized embedding tables, as PyTorch's ``torch.ao.nn.quantized.Embedding`` and
``EmbeddingBag``: each row of the table stored as 8-bit (``quint8``) or 4-bit (``quint4x2``,
two values a byte) integers with its own float scale and float zero point
(``per_channel_affine_float_qparams``: ``scale = (max - min) / (2**bits - 1)``,
``zero_point = -min / scale``). Made by ``prepare``/``convert`` or ``quantize_dynamic`` with
``float_qparams_weight_only_qconfig`` (8-bit) or ``float_qparams_weight_only_qconfig_4bit``.
A lookup dequantizes only the rows it gathers; the 4-bit tables use scales and offsets rounded
to float16, as PyTorch's 4-bit kernels do, so the results agree with PyTorch's to float
rounding.

Example:
    >>> from funcgrad import quantization as tq
    >>> emb = nn.Embedding(100, 16)
    >>> q = tq.quantize_dynamic(nn.Sequential(emb),
    ...                         {nn.Embedding: tq.float_qparams_weight_only_qconfig})[0]
    >>> q
    QuantizedEmbedding(num_embeddings=100, embedding_dim=16, dtype=torch.quint8, qscheme=torch.per_channel_affine_float_qparams)
    >>> ids = jnp.array([3, 7])
    >>> bool(np.abs(np.asarray(q(ids) - emb(ids))).max() < 0.02)
    True
"""
import numpy as np

from funcgrad import debug
from funcgrad import numpy as jnp
from funcgrad.nn import functional as F
from funcgrad.nn.functional_extra import bag_reduce
from funcgrad.nn.module import Module
from funcgrad.quantization import observer as obs

_BITS = {"quint8": 8, "quint4x2": 4}


def quantize_rows(w, scale, zero_point, bits):
    """Integers of the table ``w`` with per-row float qparams, as PyTorch's
    ``quantize_per_channel`` computes them: ``rint(w * (1 / scale) + zero_point)`` in float32,
    clipped to ``[0, 2**bits - 1]``; 4-bit rows packed two values a byte (the even column in
    the low nibble).

    Example:
        >>> from funcgrad.quantization.embedding import quantize_rows
        >>> quantize_rows(np.array([[-1.0, 0.0, 0.5, 1.0]]), np.array([2 / 15]),
        ...               np.array([7.5]), 4)
        array([[128, 251]], dtype=uint8)
    """
    w = np.asarray(w, np.float32)
    inv = (np.float32(1.0) / np.asarray(scale, np.float32))[:, None]
    q = np.clip(np.rint(w * inv + np.asarray(zero_point, np.float32)[:, None]), 0,
                2 ** bits - 1).astype(np.uint8)
    if bits == 4:
        q = q[:, 0::2] | (q[:, 1::2] << 4)
    return q


class _QuantizedTable(Module):
    """The quantized table of an ``Embedding`` / ``EmbeddingBag``: ``weight`` (uint8 codes),
    ``weight_scale`` and ``weight_zero_point`` (float32, one per row)."""

    @classmethod
    def from_float(cls, mod, weight_observer=None):
        observer = (weight_observer or _default_observer)()
        dtype = obs._name(observer.dtype)
        if dtype not in _BITS or observer.qscheme != obs.per_channel_affine_float_qparams:
            raise ValueError(
                f"{type(mod).__name__} quantization is only supported with "
                f"float_qparams_weight_only_qconfig (or its _4bit variant): a per-row "
                f"per_channel_affine_float_qparams observer of quint8 or quint4x2; got "
                f"dtype={observer.dtype}, qscheme={observer.qscheme}")
        bits = _BITS[dtype]
        n, d = mod.weight.shape
        if bits == 4 and d % 2:
            raise ValueError(f"{type(mod).__name__}: 4-bit rows pack two values a byte, so "
                             f"embedding_dim must be even, got {d}")
        w = np.asarray(mod.weight, np.float32)
        observer.update(w)
        scale, zero_point = observer.calculate_qparams()
        m = cls.__new__(cls)
        Module.__init__(m)
        m.num_embeddings, m.embedding_dim, m.dtype = n, d, dtype
        m.padding_idx = getattr(mod, "padding_idx", None)
        m.register_buffer("weight", jnp.asarray(quantize_rows(w, scale, zero_point, bits)))
        m.register_buffer("weight_scale", jnp.asarray(scale))
        m.register_buffer("weight_zero_point", jnp.asarray(zero_point))
        return m

    def rows(self, ids):
        """Dequantized rows at ``ids`` (in range): ``q * scale + offset`` with
        ``offset = -zero_point * scale`` (float16-rounded scale and offset for 4-bit rows)."""
        q = jnp.take(self.weight, ids, axis=0)
        scale = jnp.take(self.weight_scale, ids, axis=0)
        offset = -jnp.take(self.weight_zero_point, ids, axis=0) * scale
        if self.dtype == "quint4x2":
            q = jnp.stack([q & 15, q >> 4], axis=-1).reshape(q.shape[:-1] + (-1,))
            scale = scale.astype(np.float16).astype(np.float32)
            offset = offset.astype(np.float16).astype(np.float32)
        return q.astype(np.float32) * scale[..., None] + offset[..., None]

    def dequantize(self):
        """The whole table as float32 values."""
        return self.rows(jnp.arange(self.num_embeddings))

    def _check(self, ids):
        ids = jnp.asarray(ids)
        F._check_ids_dtype(type(self).__name__, ids)
        debug.check_ids(ids, self.num_embeddings, f"{type(self).__name__}",
                        of=f"num_embeddings={self.num_embeddings}")
        return ids

    def extra_repr(self):
        return (f"num_embeddings={self.num_embeddings}, embedding_dim={self.embedding_dim}, "
                f"dtype=torch.{self.dtype}, qscheme=torch.per_channel_affine_float_qparams")


class QuantizedEmbedding(_QuantizedTable):
    """``torch.ao.nn.quantized.Embedding``: rows of a quantized table at integer ids.

    Example:
        >>> from funcgrad.quantization import QuantizedEmbedding, float_qparams_weight_only_qconfig
        >>> emb = nn.Embedding(4, 2, _weight=jnp.array([[0.0, 1.0], [2.0, 4.0], [1.0, 1.0],
        ...                                             [-1.0, 3.0]]))
        >>> q = QuantizedEmbedding.from_float(emb, float_qparams_weight_only_qconfig.weight)
        >>> q(jnp.array([1, 3]))
        Array([[ 2.,  4.],
               [-1.,  3.]], dtype=float32)
    """

    def forward(self, ids):
        ids = self._check(ids)
        flat = jnp.clip(ids.reshape(-1), 0, self.num_embeddings - 1)
        return self.rows(flat).reshape(tuple(ids.shape) + (self.embedding_dim,))


class QuantizedEmbeddingBag(_QuantizedTable):
    """``torch.ao.nn.quantized.EmbeddingBag``: sums, means or maxima of quantized rows over
    bags of ids (``F.embedding_bag``'s arguments), dequantizing only the gathered rows.

    Example:
        >>> from funcgrad.quantization import (QuantizedEmbeddingBag,
        ...                                    float_qparams_weight_only_qconfig)
        >>> bag = nn.EmbeddingBag(4, 2, mode="sum", _weight=jnp.array(
        ...     [[0.0, 1.0], [2.0, 4.0], [1.0, 1.0], [-1.0, 3.0]]))
        >>> q = QuantizedEmbeddingBag.from_float(bag, float_qparams_weight_only_qconfig.weight)
        >>> q(jnp.array([[0, 1], [2, 3]]))
        Array([[2., 5.],
               [0., 4.]], dtype=float32)
    """

    @classmethod
    def from_float(cls, mod, weight_observer=None):
        m = super().from_float(mod, weight_observer)
        m.mode, m.include_last_offset = mod.mode, mod.include_last_offset
        return m

    def forward(self, input, offsets=None, per_sample_weights=None,
                compressed_indices_mapping=None):
        if compressed_indices_mapping is not None:
            raise ValueError("QuantizedEmbeddingBag: compressed_indices_mapping (pruned "
                             "tables) is not supported")
        return bag_reduce(self._check(input), self.rows,
                          (self.num_embeddings, self.embedding_dim), np.float32, offsets,
                          self.mode, per_sample_weights, self.include_last_offset,
                          self.padding_idx, where=type(self).__name__)


def _default_observer():
    from funcgrad.quantization.qconfig import float_qparams_weight_only_qconfig
    return float_qparams_weight_only_qconfig.weight()
