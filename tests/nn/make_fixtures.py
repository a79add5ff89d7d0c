"""Regenerate tests/nn/data/torch_ref.npz with PyTorch (run once; CI does not need torch).

    PYTHONPATH=/path/to/torch python tests/nn/make_fixtures.py
"""
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import shared_models  # noqa: E402



def compute():
    """Every reference value, computed with PyTorch (a dict of NumPy arrays)."""
    torch.manual_seed(0)
    out = {}
    rng = np.random.default_rng(0)


    def put(prefix, sd):
        for k, v in sd.items():
            out[f"{prefix}/{k}"] = v.detach().numpy().copy()


    def run_model(name, model, x, target, loss_fn, dtype=torch.float32):
        """Outputs, loss, gradients, BatchNorm statistics and three SGD-momentum and Adam steps
        of ``model`` in ``dtype``. float32 keys are "{name}/...", float64 keys "f64/{name}/..."
        (the float64 model starts from the float32 initial weights, cast exactly)."""
        pre = name if dtype == torch.float32 else f"f64/{name}"
        if dtype == torch.float32:
            put(f"{name}/init", model.state_dict())
        init = {k: torch.as_tensor(out[f"{name}/init/{k}"]) for k in model.state_dict()}
        model.to(dtype)
        model.load_state_dict(init)
        xt = torch.as_tensor(x)
        xt = xt.to(dtype) if xt.is_floating_point() else xt
        tt = torch.as_tensor(target)
        tt = tt.to(dtype) if tt.is_floating_point() else tt
        model.train()
        model.zero_grad()
        y = model(xt)
        loss = loss_fn(y, tt)
        loss.backward()
        out[f"{pre}/out"] = y.detach().numpy()
        out[f"{pre}/loss"] = np.asarray(loss.item(), y.detach().numpy().dtype)
        for k, p in model.named_parameters():
            out[f"{pre}/grad/{k}"] = p.grad.detach().numpy().copy()
        if dtype == torch.float32:
            put(f"{pre}/after_forward", model.state_dict())
        else:   # float64: only what the forward changed (BatchNorm buffers); the rest is init
            put(f"{pre}/after_forward", {k: v for k, v in model.state_dict().items()
                                         if not torch.equal(v, init[k].to(v.dtype))})
        model.eval()
        out[f"{pre}/eval_out"] = model(xt).detach().numpy()
        for oname, make in (("sgd", lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9,
                                                                 dampening=0.1, weight_decay=1e-3)),
                            ("adam", lambda ps: torch.optim.Adam(ps, lr=1e-3, weight_decay=1e-3))):
            model.load_state_dict(init)
            model.train()
            opt = make(model.parameters())
            losses = []
            for _ in range(3):
                opt.zero_grad()
                loss = loss_fn(model(xt), tt)
                loss.backward()
                opt.step()
                losses.append(loss.item())
            out[f"{pre}/{oname}/losses"] = np.asarray(losses, y.detach().numpy().dtype)
            put(f"{pre}/{oname}/final", model.state_dict())

    def run_both(name, model, x, target, loss_fn):
        run_model(name, model, x, target, loss_fn, torch.float32)
        run_model(name, model, x, target, loss_fn, torch.float64)


    x = rng.standard_normal((4, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 4)
    out["lenet/x"], out["lenet/y"] = x, y
    run_both("lenet", shared_models.lenet(torch.nn), x, y,
              lambda o, t: torch.nn.functional.cross_entropy(o, t, label_smoothing=0.1))

    idx = rng.integers(0, 20, (3, 7))
    idx[0, :2] = 0
    tgt = rng.integers(0, 20, (3, 7))
    out["lm/x"], out["lm/y"] = idx, tgt
    run_both("lm", shared_models.lstm_lm(torch.nn), idx, tgt,
              lambda o, t: torch.nn.functional.nll_loss(o.reshape(-1, 20), t.reshape(-1)))

    xa = rng.standard_normal((2, 5, 16)).astype(np.float32)
    ya = rng.standard_normal((2, 5, 16)).astype(np.float32)
    out["attn/x"], out["attn/y"] = xa, ya
    run_both("attn", shared_models.attention_block(torch.nn), xa, ya,
              lambda o, t: torch.nn.functional.smooth_l1_loss(o, t, beta=0.5))

    # losses
    F = torch.nn.functional
    logits = rng.standard_normal((6, 5)).astype(np.float32)
    labels = np.array([0, 4, 2, -100, 1, 3])
    w = rng.uniform(0.5, 2.0, 5).astype(np.float32)
    probs = rng.dirichlet(np.ones(5), 6).astype(np.float32)
    out["loss/logits"], out["loss/labels"], out["loss/w"], out["loss/probs"] = logits, labels, w, probs
    L, T, W, P = map(torch.as_tensor, (logits, labels, w, probs))
    for red in ("mean", "sum", "none"):
        out[f"loss/ce_{red}"] = F.cross_entropy(L, T, weight=W, reduction=red,
                                                label_smoothing=0.2).numpy()
        out[f"loss/ce_plain_{red}"] = F.cross_entropy(L, T, reduction=red).numpy()
        out[f"loss/ce_prob_{red}"] = F.cross_entropy(L, P, weight=W, reduction=red,
                                                     label_smoothing=0.1).numpy()
        out[f"loss/nll_{red}"] = F.nll_loss(F.log_softmax(L, 1), T, weight=W, reduction=red).numpy()
        out[f"loss/bce_{red}"] = F.binary_cross_entropy(torch.sigmoid(L), P, reduction=red).numpy()
        out[f"loss/bcel_{red}"] = F.binary_cross_entropy_with_logits(
            L, P, pos_weight=W, reduction=red).numpy()
        with warnings.catch_warnings():     # torch warns that "mean" is not "batchmean"
            warnings.simplefilter("ignore")
            out[f"loss/kl_{red}"] = F.kl_div(F.log_softmax(L, 1), P, reduction=red).numpy()
        out[f"loss/sl1_{red}"] = F.smooth_l1_loss(L, P, reduction=red, beta=0.3).numpy()
    out["loss/kl_batchmean"] = F.kl_div(F.log_softmax(L, 1), P, reduction="batchmean").numpy()

    # pooling/conv corner cases
    xp = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    out["pool/x"] = xp
    X = torch.as_tensor(xp)
    out["pool/max_ceil"] = F.max_pool2d(X, 3, 2, 1, ceil_mode=True).numpy()
    out["pool/max_dil"] = F.max_pool2d(X, 2, 1, 0, dilation=2).numpy()
    out["pool/avg_pad"] = F.avg_pool2d(X, 3, 2, 1, ceil_mode=True).numpy()
    out["pool/avg_nopad"] = F.avg_pool2d(X, 3, 2, 1, ceil_mode=True, count_include_pad=False).numpy()
    out["pool/adaptive"] = F.adaptive_avg_pool2d(X, (4, 3)).numpy()
    wt = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    out["conv/wt"] = wt
    out["conv/tr"] = F.conv_transpose2d(X, torch.as_tensor(wt), stride=2, padding=1,
                                        output_padding=1).numpy()
    wg = rng.standard_normal((6, 1, 3, 2)).astype(np.float32)
    out["conv/wg"] = wg
    out["conv/grouped"] = F.conv2d(X, torch.as_tensor(wg), stride=(1, 2), padding="valid",
                                   groups=3, dilation=(2, 1)).numpy()

    return out


if __name__ == "__main__":
    out = compute()
    path = os.path.join(os.path.dirname(__file__), "data", "torch_ref.npz")
    np.savez_compressed(path, **out)
    print("wrote", path, len(out), "arrays", os.path.getsize(path), "bytes")
