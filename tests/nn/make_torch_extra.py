"""Regenerate tests/nn/data/torch_extra_ref.npz with PyTorch (CI does not need torch):

    /work/venv-ref/bin/python tests/nn/make_torch_extra.py
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import torch_extra_harness as harness  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "data", "torch_extra_ref.npz")


def compute():
    lib = harness.TorchLib()
    lib.torch.manual_seed(0)
    ref = {}
    for name, inputs, fn, diff in harness.all_cases():
        ref.update(lib.run(name, inputs, fn, diff))
    return ref


if __name__ == "__main__":
    ref = compute()
    np.savez_compressed(OUT, **ref)
    print(f"wrote {len(ref)} arrays to {OUT}")
