"""``Embedding``: a lookup table of ``num_embeddings`` rows, initialized N(0, 1) as PyTorch."""
import funcgrad.numpy as jnp
from funcgrad import debug
from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.module import Module, Parameter, host_zeros


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
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} out of range for "
                                 f"{num_embeddings} embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(host_zeros((num_embeddings, embedding_dim),
                                              dtype or "float32"), requires_grad=not _freeze)
            init.normal_(self.get_parameter("weight"))
            if padding_idx is not None:
                self.weight = self.weight.at[padding_idx].set(0.0)
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

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
