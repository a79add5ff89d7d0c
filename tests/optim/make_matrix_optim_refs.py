"""Regenerate tests/optim/data/matrix_optim_ref.npz with PyTorch (CI does not need torch):

    /work/venv-ref/bin/python tests/optim/make_matrix_optim_refs.py
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import matrix_optim_cases as cases  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "data", "matrix_optim_ref.npz")


def compute():
    ref = {}
    for case, (name, keys, kw) in cases.STEP_CASES.items():
        ps = [torch.nn.Parameter(torch.tensor(cases.INIT[k])) for k in keys]
        opt = getattr(torch.optim, name)(ps, **kw)
        for step in range(3):
            for p, k in zip(ps, keys):
                p.grad = torch.tensor(cases.GRADS[k][step])
            opt.step()
            for p, k in zip(ps, keys):
                ref[f"{case}/{step}/{k}"] = p.detach().numpy().copy()
    for case, kw in cases.LBFGS_CASES.items():
        w = torch.nn.Parameter(torch.tensor(cases.W0))
        b = torch.nn.Parameter(torch.tensor(cases.B0))
        opt = torch.optim.LBFGS([w, b], **kw)

        def closure():
            opt.zero_grad()
            loss = cases.lbfgs_loss(torch, w, b)
            loss.backward()
            return loss
        for step in range(cases.LBFGS_STEPS):
            ref[f"{case}/{step}/loss"] = np.float32(opt.step(closure).item())
            ref[f"{case}/{step}/w"] = w.detach().numpy().copy()
            ref[f"{case}/{step}/b"] = b.detach().numpy().copy()
        ref[f"{case}/func_evals"] = np.int64(opt.state[w]["func_evals"])
        ref[f"{case}/n_iter"] = np.int64(opt.state[w]["n_iter"])
    return ref


if __name__ == "__main__":
    ref = compute()
    np.savez_compressed(OUT, **ref)
    print(f"wrote {len(ref)} arrays to {OUT}")
