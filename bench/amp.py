"""Mixed-precision training steps: float32, ``funcgrad.autocast`` (bfloat16) and a hand cast of
parameters and input to bfloat16 inside the step, side by side with PyTorch eager and
``torch.compile`` in float32 and with ``torch.autocast`` (each when installed).

Cases: LeNet (batch 64, 28x28, SGD momentum) on the CPU; with ``--gpu`` ResNet-18 (batch 64,
224x224, SGD momentum; ``--resnet-batch``/``--resnet-size`` to change) and LeNet on the GPU for
every framework (funcgrad through its CUDA plugin, PyTorch on ``cuda``).

Every variant runs in its own process, the processes alternate round by round, and each number
is the median over the rounds of a process's median step time (ms). ``--no-compile`` skips
``torch.compile`` (its CPU backend compiles C++ and takes minutes).

Run: python bench/amp.py [--rounds 3] [--steps 20] [--gpu] [--no-compile]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

if "--gpu" not in sys.argv:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("FUNCGRAD_PLATFORM", "cpu")
TORCH_DEVICE = "cuda" if "--gpu" in sys.argv else "cpu"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "examples"))

import numpy as np  # noqa: E402

from nn_train import lenet, median_step_ms  # noqa: E402

VARIANTS = {"funcgrad": ("float32", "autocast", "hand cast"),
            "torch": ("float32", "autocast"),
            "torch.compile": ("float32", "autocast")}


def data(case, batch, size):
    rng = np.random.default_rng(0)
    if case == "lenet":
        return (rng.standard_normal((64, 1, 28, 28)).astype(np.float32),
                rng.integers(0, 10, 64).astype(np.int32))
    return (rng.standard_normal((batch, 3, size, size)).astype(np.float32),
            rng.integers(0, 1000, batch).astype(np.int32))


def run_funcgrad(case, variant, steps, batch, size):
    import funcgrad
    import funcgrad.nn as nn
    import funcgrad.nn.functional as F
    import funcgrad.numpy as jnp
    import funcgrad.optim as optim
    funcgrad.manual_seed(0)
    if case == "lenet":
        model = lenet(nn)
    else:
        import vision_models
        model = vision_models.resnet18(num_classes=1000)
    opt = optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    device_type = "cpu" if TORCH_DEVICE == "cpu" else "cuda"
    low = jnp.bfloat16

    def loss_fn(m, x, y):
        if variant == "autocast":
            with funcgrad.autocast(device_type, dtype=low):
                return F.cross_entropy(m(x), y)
        if variant == "hand cast":
            params = {k: p.data.astype(low) for k, p in m.named_parameters()}
            out = nn.functional_call(m, params, (x.astype(low),))
            return F.cross_entropy(out.astype(jnp.float32), y)
        return F.cross_entropy(m(x), y)

    @funcgrad.jit
    def train_step(m, o, x, y):
        value, grads = funcgrad.value_and_grad(lambda mm: loss_fn(mm, x, y))(m)
        o.step(grads)
        return value
    x, y = (jnp.asarray(a) for a in data(case, batch, size))
    return median_step_ms(lambda: train_step(model, opt, x, y).block_until_ready(), steps)


def torch_resnet18(tnn):
    """torchvision's ResNet-18 layout, for when torchvision is not installed."""
    class Block(tnn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = tnn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = tnn.BatchNorm2d(cout)
            self.conv2 = tnn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = tnn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = tnn.Sequential(tnn.Conv2d(cin, cout, 1, stride, bias=False),
                                           tnn.BatchNorm2d(cout))

        def forward(self, x):
            h = tnn.functional.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            return tnn.functional.relu(h + (x if self.down is None else self.down(x)))

    layers = [tnn.Conv2d(3, 64, 7, 2, 3, bias=False), tnn.BatchNorm2d(64), tnn.ReLU(),
              tnn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    layers += [tnn.AdaptiveAvgPool2d(1), tnn.Flatten(), tnn.Linear(512, 1000)]
    return tnn.Sequential(*layers)


def run_torch(case, variant, steps, batch, size, compiled=False):
    import torch
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    model = (lenet(torch.nn) if case == "lenet" else torch_resnet18(torch.nn)).to(TORCH_DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = (torch.as_tensor(a.astype(np.int64) if a.dtype == np.int32 else a,
                            device=TORCH_DEVICE) for a in data(case, batch, size))

    def step_fn(x, y):
        with torch.autocast(TORCH_DEVICE, dtype=torch.bfloat16, enabled=variant == "autocast"):
            value = torch.nn.functional.cross_entropy(model(x), y)
        value.backward()
        return value

    fwd_bwd = torch.compile(step_fn) if compiled else step_fn

    def train_step():
        opt.zero_grad()
        value = fwd_bwd(x, y)
        opt.step()
        return value.item()
    return median_step_ms(train_step, steps)


def worker(framework, case, variant, steps, batch, size):
    if framework == "funcgrad":
        return run_funcgrad(case, variant, steps, batch, size)
    return run_torch(case, variant, steps, batch, size, compiled=framework == "torch.compile")


def in_subprocess(framework, case, variant, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework, case, variant,
           "--steps", str(args.steps), "--resnet-batch", str(args.resnet_batch),
           "--resnet-size", str(args.resnet_size)] + (["--gpu"] if args.gpu else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(f"{framework} {case} {variant} failed:\n{out.stderr[-2000:]}\n")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])["ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--resnet-batch", type=int, default=64)
    ap.add_argument("--resnet-size", type=int, default=224)
    ap.add_argument("--worker", nargs=3, metavar=("FRAMEWORK", "CASE", "VARIANT"))
    args = ap.parse_args()
    if args.worker:
        t0 = time.perf_counter()
        ms = worker(*args.worker, args.steps, args.resnet_batch, args.resnet_size)
        print(json.dumps({"ms": ms, "total_s": time.perf_counter() - t0}))
        return
    import importlib.util
    have_torch = importlib.util.find_spec("torch") is not None
    frameworks = ["funcgrad"] + (["torch"] if have_torch else []) + \
        (["torch.compile"] if have_torch and not args.no_compile else [])
    cases = {"lenet": "LeNet (batch 64)"}
    if args.gpu:
        cases = {"resnet18": f"ResNet-18 (batch {args.resnet_batch}, {args.resnet_size}x"
                             f"{args.resnet_size})", **cases}
    runs = [(c, f, v) for c in cases for f in frameworks for v in VARIANTS[f]]
    results = {r: [] for r in runs}
    for _ in range(args.rounds):
        for r in runs:
            ms = in_subprocess(r[1], r[0], r[2], args)
            if ms is not None:
                results[r].append(ms)
    print(f"{'GPU' if args.gpu else 'CPU'}: median of {args.rounds} processes, each the median "
          f"of 5 x {args.steps} steps (ms per step); bfloat16 low precision")
    print("| case | framework | variant | ms/step | vs funcgrad float32 |")
    print("| --- | --- | --- | --- | --- |")
    for case, title in cases.items():
        base = results[case, "funcgrad", "float32"]
        base = statistics.median(base) if base else None
        for c, f, v in runs:
            if c != case:
                continue
            vals = results[c, f, v]
            if not vals:
                print(f"| {title} | {f} | {v} | failed | |")
                continue
            ms = statistics.median(vals)
            ratio = f"{ms / base:.2f}x" if base else ""
            print(f"| {title} | {f} | {v} | {ms:.2f} | {ratio} |")
    if not have_torch:
        print("(PyTorch is not installed: its rows were not measured)")


if __name__ == "__main__":
    main()
