"""Make tests/amp/data/torch_amp_ref.npz with PyTorch (run once; the tests compare with it when
PyTorch is not installed): python -m tests.amp.make_references"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

from tests.amp import amp_cases as C

OUT = os.path.join(os.path.dirname(__file__), "data")


def _t(a):
    return {k: torch.tensor(v) for k, v in a.items()}


def main():
    ref = {}
    a = _t(C.op_inputs())
    dtypes = {}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        for name, fn in C.ops(F, torch, a).items():
            out = fn()
            dtypes[name] = str(out.dtype).replace("torch.", "")
            ref["op/" + name] = out.float().detach().numpy()
    # gradients of the classifier's loss under autocast
    x, y = C.train_data()
    x, y = torch.tensor(x), torch.tensor(y)
    p = {k: torch.tensor(v, requires_grad=True) for k, v in C.net_init().items()}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = C.net_forward(F, torch, p, x)
        loss = F.cross_entropy(logits, y)
    loss.backward()
    ref["grad/loss"] = np.float32(loss.item())
    for k, v in p.items():
        ref["grad/" + k] = v.grad.numpy()
    p = {k: torch.tensor(v, requires_grad=True) for k, v in C.net_init().items()}
    F.cross_entropy(C.net_forward(F, torch, p, x), y).backward()
    for k, v in p.items():
        ref["grad32/" + k] = v.grad.numpy()
    # 60-step bfloat16 training curve, SGD with momentum
    p = {k: torch.tensor(v, requires_grad=True) for k, v in C.net_init().items()}
    opt = torch.optim.SGD(p.values(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(C.STEPS):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(C.net_forward(F, torch, p, x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ref["train/losses"] = np.asarray(losses, np.float32)
    for k, v in p.items():
        ref["train/" + k] = v.detach().numpy()
    # GradScaler: scale sequence, skipped steps and final weights
    p = {k: torch.tensor(v, requires_grad=True) for k, v in C.net_init().items()}
    opt = torch.optim.SGD(p.values(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", **C.SCALER_KW)
    scales, skipped = [], []
    for step in range(C.SCALER_STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(C.net_forward(F, torch, p, x), y)
        scaler.scale(loss).backward()
        if step in C.SCALER_BAD_STEPS:
            p["fc1.weight"].grad[0, 0] = float("inf")
        before = p["fc2.bias"].detach().clone()
        scaler.step(opt)
        scaler.update()
        skipped.append(bool(torch.equal(before, p["fc2.bias"].detach())))
        scales.append(scaler.get_scale())
    ref["scaler/scales"] = np.asarray(scales, np.float32)
    ref["scaler/skipped"] = np.asarray(skipped)
    for k, v in p.items():
        ref["scaler/" + k] = v.detach().numpy()
    np.savez_compressed(os.path.join(OUT, "torch_amp_ref.npz"), **ref)
    with open(os.path.join(OUT, "torch_amp_ref.json"), "w") as f:
        json.dump({"torch": torch.__version__, "dtypes": dtypes,
                   "scaler_state_dict": {k: (float(v) if isinstance(v, float) else v)
                                         for k, v in scaler.state_dict().items()}}, f,
                  indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
