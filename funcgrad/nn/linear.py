"""Linear layers: ``Linear``, ``Bilinear``, ``Identity`` (PyTorch's shapes and initialization)."""
import math

from funcgrad.nn import functional as F
from funcgrad.nn import init
from funcgrad.nn.module import Module, Parameter, host_zeros


class Identity(Module):
    """Returns its input. Example: ``nn.Identity()(x) is x``."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """y = x W^T + b with ``weight`` (out_features, in_features) and ``bias`` (out_features,).

    Initialized as PyTorch: U(-1/sqrt(in), 1/sqrt(in)) for both.

    Example:
        >>> nn.Linear(3, 4)(jnp.ones((2, 3))).shape
        (2, 4)
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        dt = dtype or "float32"
        self.weight = Parameter(host_zeros((self.out_features, self.in_features), dt))
        if bias:
            self.bias = Parameter(host_zeros((self.out_features,), dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.get_parameter("weight"), a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.get_parameter("bias"), -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """y_k = x1^T W_k x2 + b_k, ``weight`` (out, in1, in2). Example: ``nn.Bilinear(3, 4, 5)(a, b)``."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = int(in1_features), int(in2_features)
        self.out_features = int(out_features)
        dt = dtype or "float32"
        self.weight = Parameter(host_zeros((out_features, in1_features, in2_features), dt))
        if bias:
            self.bias = Parameter(host_zeros((out_features,), dt))
        else:
            self.register_parameter("bias", None)
        bound = 1 / math.sqrt(in1_features)
        init.uniform_(self.get_parameter("weight"), -bound, bound)
        if bias:
            init.uniform_(self.get_parameter("bias"), -bound, bound)

    def forward(self, x1, x2):
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
