"""Runs the cases of torch_extra_cases.py with PyTorch or funcgrad: outputs and gradients as
NumPy arrays keyed "case/out/i" and "case/grad/j"."""
import numpy as np

import torch_extra_cases as cases

# Not jitted whole: a lazy module's first call must be eager; concatenated CTC targets need
# concrete lengths; modules made inside a trace do not see their own buffer updates there
# (they are carried out to the module, as update_buffer documents).
NO_JIT = {"lazy_modules", "ctc_loss_concatenated_blank", "instance_norm_1d_3d",
          "sync_batchnorm_one_process"}
NO_GRAD = {"lazy_modules", "embedding_bag_module", "conv_transpose3d_module",
           "sync_batchnorm_one_process"}


def _flat(out):
    if isinstance(out, (tuple, list)):          # named tuples of results too
        return [leaf for o in out for leaf in _flat(o)]
    return [out]


def _state_value(key, name, shape):
    rng = np.random.default_rng(sum(map(ord, f"{key}/{name}")))
    if name.endswith("num_batches_tracked"):
        return np.zeros(shape, np.int64)
    lo, hi = (0.5, 1.5) if "var" in name else (-0.5, 0.5)
    return rng.uniform(lo, hi, shape).astype(np.float32)


def _cotangents(name, outs):
    rng = np.random.default_rng(sum(map(ord, name + "/cot")))
    return [rng.uniform(-1, 1, np.shape(o)).astype(np.float32)
            if np.issubdtype(np.asarray(o).dtype, np.floating) else None for o in outs]


class TorchLib:
    def __init__(self):
        import torch
        import torch.nn.functional as F
        self.torch, self.F, self.nn = torch, F, torch.nn

    def load(self, module, key):
        sd = {k: self.torch.as_tensor(_state_value(key, k, tuple(v.shape)))
              for k, v in module.state_dict().items()}
        module.load_state_dict(sd)
        return module

    def run(self, name, inputs, fn, diff):
        torch = self.torch
        ts = []
        for i, a in enumerate(inputs):
            t = torch.as_tensor(a)
            if i in diff and name not in NO_GRAD:
                t.requires_grad_(True)
            ts.append(t)
        outs = _flat(fn(self, *ts))
        res = {f"{name}/out/{i}": o.detach().numpy().copy() for i, o in enumerate(outs)}
        if name in NO_GRAD or not diff:
            return res
        cots = _cotangents(name, [o.detach().numpy() for o in outs])
        total = sum((o * torch.as_tensor(c)).sum() for o, c in zip(outs, cots)
                    if c is not None and o.requires_grad)
        grads = torch.autograd.grad(total, [ts[i] for i in diff], allow_unused=True)
        for j, g in zip(diff, grads):
            res[f"{name}/grad/{j}"] = (np.zeros(inputs[j].shape, np.float32) if g is None
                                       else g.numpy().copy())
        return res


class FuncgradLib:
    def __init__(self):
        import funcgrad.nn as nn
        import funcgrad.nn.functional as F
        self.F, self.nn = F, nn

    def load(self, module, key):
        sd = {k: _state_value(key, k, tuple(np.shape(v))) for k, v in module.state_dict().items()}
        module.load_state_dict(sd)
        return module

    def run(self, name, inputs, fn, diff, jit=False):
        import funcgrad
        import funcgrad.numpy as jnp
        xs = [jnp.asarray(a if a.dtype != np.int64 else a.astype(np.int32)) for a in inputs]
        call = (lambda *a: fn(self, *a))
        if jit and name not in NO_JIT:
            call = funcgrad.jit(call)
        outs = _flat(call(*xs))
        res = {f"{name}/out/{i}": np.asarray(o) for i, o in enumerate(outs)}
        if name in NO_GRAD or not diff:
            return res
        cots = _cotangents(name, [np.asarray(o) for o in outs])

        def total(*d):
            full = list(xs)
            for j, v in zip(diff, d):
                full[j] = v
            o = _flat(fn(self, *full))
            return sum(jnp.sum(v * jnp.asarray(c)) for v, c in zip(o, cots) if c is not None)

        grad = funcgrad.grad(total, argnums=tuple(range(len(diff))))
        if jit and name not in NO_JIT:
            grad = funcgrad.jit(grad)
        grads = grad(*[xs[j] for j in diff])
        for j, g in zip(diff, grads):
            res[f"{name}/grad/{j}"] = np.asarray(g)
        return res


def all_cases():
    return cases.CASES
