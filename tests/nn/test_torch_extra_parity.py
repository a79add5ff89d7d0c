"""Parity with PyTorch 2.13 of the torch.nn / torch.nn.functional names added for issue 21
(pooling with indices, adaptive/LP/fractional pooling, unpooling, grid_sample/affine_grid,
embedding_bag, CTC and margin losses, lazy modules, InstanceNorm1d/3d, SyncBatchNorm, ...):
outputs and gradients of each case in torch_extra_cases.py, eagerly and under jit, against
tests/nn/data/torch_extra_ref.npz (made by make_torch_extra.py with PyTorch) and, when PyTorch
is importable, against values computed live.

Tolerance: float32 on both sides; measured worst relative error (max |got - want| / max |want|
per array) 3e-7 on outputs and 1.2e-6 on gradients (grid_sample bicubic's grid gradient):
checked at 1e-5 of the array's scale.
"""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import torch_extra_harness as harness  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data", "torch_extra_ref.npz")
RTOL = 1e-5
NAMES = [c[0] for c in harness.all_cases()]
# grid_sample's border/reflection variants run in the slow set (the zeros variants of every
# mode, and all variants live and under jit, stay)
_SLOW_STORED = {n for n in NAMES if n.startswith("grid_sample") and "zeros" not in n}
STORED = [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_STORED else n for n in NAMES]


@pytest.fixture(scope="module")
def stored():
    with np.load(DATA) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope="module")
def live():
    pytest.importorskip("torch")
    return harness.TorchLib()


def _compare(got, want, name):
    keys = sorted(k for k in want if k.startswith(name + "/"))
    assert keys, f"no reference values for {name}"
    assert sorted(k for k in got) == keys, (sorted(got), keys)
    for k in keys:
        g, w = np.asarray(got[k]), np.asarray(want[k])
        assert g.shape == w.shape, (k, g.shape, w.shape)
        if np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=k)
            continue
        finite = np.isfinite(w)
        np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=k)
        np.testing.assert_array_equal(g[~finite], w[~finite], err_msg=k)
        scale = max(float(np.max(np.abs(w[finite]), initial=0.0)), 1e-6)
        err = float(np.max(np.abs(g[finite] - w[finite]), initial=0.0)) / scale
        assert err <= RTOL, f"{k}: relative error {err:.2e} (scale {scale:.3g})"


def _case(name):
    return next(c for c in harness.all_cases() if c[0] == name)


@pytest.mark.parametrize("name", STORED)
def test_against_stored_pytorch_values(name, stored):
    _, inputs, fn, diff = _case(name)
    _compare(harness.FuncgradLib().run(name, inputs, fn, diff), stored, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_under_jit_against_stored_pytorch_values(name, stored):
    _, inputs, fn, diff = _case(name)
    _compare(harness.FuncgradLib().run(name, inputs, fn, diff, jit=True), stored, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_against_live_pytorch(name, live):
    _, inputs, fn, diff = _case(name)
    try:
        want = live.run(name, inputs, fn, diff)
    except AttributeError as err:      # a name newer than the installed PyTorch (2.11 lacks
        pytest.skip(f"{name}: the installed PyTorch lacks it ({err})")   # linear_cross_entropy)
    _compare(harness.FuncgradLib().run(name, inputs, fn, diff), want, name)
