"""The torch part of tools/api_coverage.py: funcgrad.nn's module classes and
funcgrad.nn.functional's functions against the names of PyTorch 2.13's ``torch.nn`` (its
``nn.Module`` subclasses) and ``torch.nn.functional`` (its public callables), stored here so
that the tool runs without torch; tests/nn/test_torch_coverage.py checks them against an
installed torch.

    python tools/torch_coverage.py        # print the table
"""
import importlib
import sys

from coverage_table import render_coverage  # tools/ is on sys.path when this runs

TORCH_VERSION = "2.13.0"
TORCH_NN_MODULES = """
AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveLogSoftmaxWithLoss
AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d AlphaDropout AvgPool1d AvgPool2d
AvgPool3d BCELoss BCEWithLogitsLoss BatchNorm1d BatchNorm2d BatchNorm3d Bilinear CELU
CTCLoss ChannelShuffle CircularPad1d CircularPad2d CircularPad3d ConstantPad1d ConstantPad2d
ConstantPad3d Container Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
CosineEmbeddingLoss CosineSimilarity CrossEntropyLoss CrossMapLRN2d DataParallel Dropout
Dropout1d Dropout2d Dropout3d ELU Embedding EmbeddingBag FeatureAlphaDropout Flatten Fold
FractionalMaxPool2d FractionalMaxPool3d GELU GLU GRU GRUCell GaussianNLLLoss GroupNorm
Hardshrink Hardsigmoid Hardswish Hardtanh HingeEmbeddingLoss HuberLoss Identity
InstanceNorm1d InstanceNorm2d InstanceNorm3d KLDivLoss L1Loss LPPool1d LPPool2d LPPool3d
LSTM LSTMCell LayerNorm LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d LazyConv1d
LazyConv2d LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d
LazyInstanceNorm1d LazyInstanceNorm2d LazyInstanceNorm3d LazyLinear LeakyReLU Linear
LinearCrossEntropyLoss LocalResponseNorm LogSigmoid LogSoftmax MSELoss MarginRankingLoss
MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d Mish Module ModuleDict
ModuleList MultiLabelMarginLoss MultiLabelSoftMarginLoss MultiMarginLoss MultiheadAttention
NLLLoss NLLLoss2d PReLU PairwiseDistance ParameterDict ParameterList PixelShuffle
PixelUnshuffle PoissonNLLLoss RMSNorm RNN RNNBase RNNCell RNNCellBase RReLU ReLU ReLU6
ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d
ReplicationPad3d SELU Sequential SiLU Sigmoid SmoothL1Loss SoftMarginLoss Softmax Softmax2d
Softmin Softplus Softshrink Softsign SyncBatchNorm Tanh Tanhshrink Threshold Transformer
TransformerDecoder TransformerDecoderLayer TransformerEncoder TransformerEncoderLayer
TripletMarginLoss TripletMarginWithDistanceLoss Unflatten Unfold Upsample
UpsamplingBilinear2d UpsamplingNearest2d ZeroPad1d ZeroPad2d ZeroPad3d
""".split()
TORCH_NN_FUNCTIONAL = """
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
adaptive_max_pool1d_with_indices adaptive_max_pool2d adaptive_max_pool2d_with_indices
adaptive_max_pool3d adaptive_max_pool3d_with_indices affine_grid alpha_dropout avg_pool1d
avg_pool2d avg_pool3d batch_norm bilinear binary_cross_entropy
binary_cross_entropy_with_logits celu celu_ channel_shuffle conv1d conv2d conv3d conv_tbc
conv_transpose1d conv_transpose2d conv_transpose3d cosine_embedding_loss cosine_similarity
cross_entropy ctc_loss dropout dropout1d dropout2d dropout3d elu elu_ embedding embedding_bag
feature_alpha_dropout fold fractional_max_pool2d fractional_max_pool2d_with_indices
fractional_max_pool3d fractional_max_pool3d_with_indices gaussian_nll_loss gelu glu
grid_sample group_norm grouped_mm gumbel_softmax hardshrink hardsigmoid hardswish hardtanh
hardtanh_ hinge_embedding_loss huber_loss instance_norm interpolate kl_div l1_loss
layer_norm leaky_relu leaky_relu_ linear linear_cross_entropy local_response_norm
log_softmax logsigmoid lp_pool1d lp_pool2d lp_pool3d margin_ranking_loss max_pool1d
max_pool1d_with_indices max_pool2d max_pool2d_with_indices max_pool3d
max_pool3d_with_indices max_unpool1d max_unpool2d max_unpool3d mish mse_loss
multi_head_attention_forward multi_margin_loss multilabel_margin_loss
multilabel_soft_margin_loss native_channel_shuffle nll_loss normalize one_hot pad
pairwise_distance pdist pixel_shuffle pixel_unshuffle poisson_nll_loss prelu relu relu6
relu_ rms_norm rrelu rrelu_ scaled_dot_product_attention scaled_grouped_mm scaled_mm selu
selu_ sigmoid silu smooth_l1_loss soft_margin_loss softmax softmin softplus softshrink
softsign tanh tanhshrink threshold threshold_ triplet_margin_loss
triplet_margin_with_distance_loss unfold upsample upsample_bilinear upsample_nearest
""".split()
# Public callables of torch.nn.functional that are typing names or PyTorch's dispatch
# machinery, not functions a model calls: not counted.
TORCH_NN_FUNCTIONAL_INTERNAL = """
Callable DType Optional ScalingType SwizzleType Tensor assert_int_or_pair boolean_dispatch
handle_torch_function has_torch_function has_torch_function_unary has_torch_function_variadic
""".split()


def collect_against_torch():
    """[(namespace, torch names, present, missing)] for funcgrad.nn and funcgrad.nn.functional."""
    rows = []
    for title, module_name, names in (("nn (modules)", "funcgrad.nn", TORCH_NN_MODULES),
                                      ("nn.functional", "funcgrad.nn.functional",
                                       TORCH_NN_FUNCTIONAL)):
        mod = importlib.import_module(module_name)
        present = [n for n in names if callable(getattr(mod, n, None))]
        rows.append((title, sorted(names), present, [n for n in sorted(names)
                                                     if n not in present]))
    return rows


def render_against_torch(rows):
    return render_coverage(
        f"# funcgrad.nn against PyTorch {TORCH_VERSION}",
        f"`torch.nn`'s `Module` subclasses and `torch.nn.functional`'s public functions (without "
        f"its {len(TORCH_NN_FUNCTIONAL_INTERNAL)} typing and dispatch names): **{{have}} of "
        f"{{total}}** present.", "PyTorch", rows)


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    print(render_against_torch(collect_against_torch()))
