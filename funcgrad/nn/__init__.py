"""funcgrad.nn: JAX's ``jax.nn`` functions and PyTorch-style modules that work under every
transformation.

* functions (``nn.relu``, ``nn.softmax``, ``nn.one_hot``, ...) as in ``jax.nn``;
* ``nn.functional`` (``F.conv2d``, ``F.cross_entropy``, ...) as ``torch.nn.functional``;
* modules (``nn.Linear``, ``nn.Conv2d``, ``nn.LSTM``, ...) with PyTorch's parameter names,
  shapes and ``state_dict`` format; modules are pytrees, so ``funcgrad.grad``, ``jit`` and
  ``vmap`` take them directly, and ``nn.functional_call`` swaps parameters functionally.

Example:
    >>> import funcgrad.nn as nn
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> x = jnp.ones((3, 4))
    >>> model(x).shape
    (3, 2)
    >>> grads = funcgrad.grad(lambda m: jnp.sum(m(x) ** 2))(model)
    >>> grads[0].weight.shape       # the gradient has the model's structure
    (8, 4)
"""
from funcgrad.nn import functional, init, initializers  # noqa: F401
from funcgrad.nn.jax_functions import (  # noqa: F401
    celu, elu, gelu, glu, hard_sigmoid, hard_silu, hard_swish, hard_tanh, leaky_relu,
    log_sigmoid, log_softmax, logmeanexp, logsumexp, mish, normalize, one_hot, relu, relu6,
    selu, sigmoid, silu, soft_sign, softmax, softplus, sparse_plus, squareplus, standardize,
    swish, tanh)
from funcgrad.nn.module import Module, Parameter, functional_call  # noqa: F401
from funcgrad.nn.activation import (  # noqa: F401
    ELU, GELU, SELU, Flatten, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
    LogSoftmax, Mish, PReLU, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softplus, Softsign, Tanh,
    Unflatten, Softmin, CosineSimilarity, PairwiseDistance, CELU, GLU, Hardshrink, Softmax2d,
    Softshrink, Tanhshrink, Threshold)
from funcgrad.nn.padding import *  # noqa: F401,F403  (ZeroPad2d, ReflectionPad1d, ...)
from funcgrad.nn.attention import (MultiheadAttention, Transformer,  # noqa: F401
                                   TransformerDecoder, TransformerDecoderLayer,
                                   TransformerEncoder, TransformerEncoderLayer)
from funcgrad.nn.containers import (ModuleDict, ModuleList, ParameterDict,  # noqa: F401
                                   ParameterList, Sequential)
from funcgrad.nn.conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d,  # noqa: F401
                              ConvTranspose2d)
from funcgrad.nn.dropout import (AlphaDropout, Dropout, Dropout1d, Dropout2d,  # noqa: F401
                                Dropout3d, FeatureAlphaDropout)
from funcgrad.nn.embedding import Embedding  # noqa: F401
from funcgrad.nn.fold import Fold, Unfold  # noqa: F401
from funcgrad.nn.linear import Bilinear, Identity, Linear  # noqa: F401
from funcgrad.nn.normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d,  # noqa: F401
                                       GroupNorm, InstanceNorm2d, LayerNorm,
                                       LocalResponseNorm, RMSNorm)
from funcgrad.nn.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d,  # noqa: F401
                                 AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d,
                                 MaxPool2d, MaxPool3d)
from funcgrad.nn.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: F401
from funcgrad.nn.resampling import (PixelShuffle, PixelUnshuffle, Upsample,  # noqa: F401
                                    UpsamplingBilinear2d, UpsamplingNearest2d)
from funcgrad.nn.losses import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss,  # noqa: F401
                                CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss,
                                HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
                                MultiLabelMarginLoss, MultiLabelSoftMarginLoss, NLLLoss,
                                PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss,
                                TripletMarginLoss)
from funcgrad.nn.init import manual_seed  # noqa: F401
from funcgrad.nn import utils  # noqa: F401,E402
# --- more of torch.nn (issue 21) ---
from funcgrad.nn.activation import RReLU  # noqa: F401,E402
from funcgrad.nn.adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401,E402
from funcgrad.nn.conv import ConvTranspose3d  # noqa: F401,E402
from funcgrad.nn.embedding import EmbeddingBag  # noqa: F401,E402
from funcgrad.nn.lazy import *  # noqa: F401,F403,E402  (LazyLinear, LazyConv2d, ...)
from funcgrad.nn.losses import (CTCLoss, LinearCrossEntropyLoss,  # noqa: F401,E402
                                MultiMarginLoss, NLLLoss2d, TripletMarginWithDistanceLoss)
from funcgrad.nn.normalization import (CrossMapLRN2d, InstanceNorm1d,  # noqa: F401,E402
                                       InstanceNorm3d)
from funcgrad.nn.pooling import (AdaptiveAvgPool3d, AdaptiveMaxPool1d,  # noqa: F401,E402
                                 AdaptiveMaxPool3d, FractionalMaxPool2d, FractionalMaxPool3d,
                                 LPPool1d, LPPool2d, LPPool3d, MaxUnpool1d, MaxUnpool2d,
                                 MaxUnpool3d)
from funcgrad.nn.recurrent import RNNBase, RNNCellBase  # noqa: F401,E402
from funcgrad.nn.containers import Container  # noqa: F401,E402
from funcgrad.nn.resampling import ChannelShuffle  # noqa: F401,E402
from funcgrad.nn.sync_batchnorm import SyncBatchNorm  # noqa: F401,E402
from funcgrad.nn import parallel  # noqa: F401,E402  (tensor / fully sharded parallelism)
