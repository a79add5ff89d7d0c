"""``Embedding`` (a lookup table of ``num_embeddings`` rows, initialized N(0, 1) as PyTorch) and
``EmbeddingBag`` (reductions over bags of rows)."""
import funcgrad.numpy as jnp
from funcgrad import debug
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.module import Module, Parameter, host_zeros


def _init_table(module, num_embeddings, embedding_dim, padding_idx, weight, dtype,
                requires_grad):
    """Sizes, ``padding_idx`` (checked, made non-negative) and the ``weight`` table of an
    embedding module: ``weight`` if given, else N(0, 1) with a zero padding row."""
    name = type(module).__name__
    module.num_embeddings, module.embedding_dim = int(num_embeddings), int(embedding_dim)
    if padding_idx is not None:
        if not -num_embeddings <= padding_idx < num_embeddings:
            raise ValueError(f"{name}: padding_idx {padding_idx} out of range for "
                             f"{num_embeddings} embeddings")
        padding_idx %= num_embeddings
    module.padding_idx = padding_idx
    if weight is not None:
        module.weight = Parameter(weight, requires_grad=requires_grad)
        return
    module.weight = Parameter(host_zeros((num_embeddings, embedding_dim), dtype or "float32"),
                              requires_grad=requires_grad)
    init.normal_(module.get_parameter("weight"))
    if padding_idx is not None:
        module.weight = module.weight.at[padding_idx].set(0.0)


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) at integer indices.

    Example:
        >>> nn.Embedding(10, 3)(jnp.array([[1, 2]])).shape
        (1, 2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        _init_table(self, num_embeddings, embedding_dim, padding_idx, _weight, dtype,
                    not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        """An Embedding holding ``embeddings`` (frozen by default)."""
        n, d = embeddings.shape
        return cls(n, d, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze)

    def forward(self, idx):
        idx = jnp.asarray(idx)
        F._check_ids_dtype(type(self).__name__, idx)
        debug.check_ids(idx, self.num_embeddings, f"{type(self).__name__}({self.extra_repr()})",
                        of=f"num_embeddings={self.num_embeddings}")
        return F.embedding_rows(idx, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s


class EmbeddingBag(Module):
    """Sums, means or maxima of embedding rows over bags of ids (``F.embedding_bag``), with a
    ``weight`` (num_embeddings, embedding_dim) initialized N(0, 1) as PyTorch.
    ``forward(input, offsets=None, per_sample_weights=None)``.

    Example:
        >>> bag = nn.EmbeddingBag(10, 3, mode="sum")
        >>> bag(jnp.array([1, 2, 4, 5, 4]), jnp.array([0, 2])).shape   # two bags
        (2, 3)
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        self.mode, self.include_last_offset = mode, include_last_offset
        _init_table(self, num_embeddings, embedding_dim, padding_idx, _weight, dtype, True)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, mode="mean", sparse=False,
                        include_last_offset=False, padding_idx=None):
        """An EmbeddingBag holding ``embeddings`` (frozen by default)."""
        n, d = embeddings.shape
        bag = cls(n, d, mode=mode, _weight=embeddings, include_last_offset=include_last_offset,
                  padding_idx=padding_idx)
        bag.get_parameter("weight").requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset,
                               padding_idx=self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
