"""The torch.nn / torch.nn.functional names stored in tools/torch_coverage.py are PyTorch's
(checked when torch is importable), and the names issue 21 asked for exist in funcgrad."""
import inspect
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import torch_coverage  # noqa: E402

ISSUE_21 = """LazyLinear LazyConv1d LazyConv2d LazyConv3d InstanceNorm1d InstanceNorm3d EmbeddingBag
SyncBatchNorm AdaptiveMaxPool1d AdaptiveMaxPool3d ConvTranspose3d MaxUnpool1d MaxUnpool2d
MaxUnpool3d LPPool1d LPPool2d LPPool3d RReLU CTCLoss MultiMarginLoss ChannelShuffle""".split()
ISSUE_21_F = """ctc_loss grid_sample affine_grid gumbel_softmax embedding_bag pdist
max_pool1d_with_indices max_pool2d_with_indices max_pool3d_with_indices relu_ elu_""".split()


def test_issue_21_names_exist_and_counts():
    import funcgrad.nn as nn
    import funcgrad.nn.functional as F
    assert all(callable(getattr(nn, n, None)) for n in ISSUE_21)
    assert all(callable(getattr(F, n, None)) for n in ISSUE_21_F)
    rows = {r[0]: r for r in torch_coverage.collect_against_torch()}
    assert len(rows["nn (modules)"][2]) >= 162 and len(rows["nn.functional"][2]) >= 129
    assert set(rows["nn (modules)"][3]) <= {"DataParallel"}


def test_stored_names_are_pytorchs():
    torch = pytest.importorskip("torch")
    if torch.__version__.split("+")[0] != torch_coverage.TORCH_VERSION:
        pytest.skip(f"names stored for torch {torch_coverage.TORCH_VERSION}")
    tnn, tf = torch.nn, torch.nn.functional
    modules = sorted(n for n in dir(tnn) if not n.startswith("_")
                     and inspect.isclass(getattr(tnn, n)) and issubclass(getattr(tnn, n),
                                                                          tnn.Module))
    functions = sorted(n for n in dir(tf) if not n.startswith("_") and callable(getattr(tf, n)))
    assert modules == sorted(torch_coverage.TORCH_NN_MODULES)
    assert functions == sorted(torch_coverage.TORCH_NN_FUNCTIONAL
                               + torch_coverage.TORCH_NN_FUNCTIONAL_INTERNAL)
