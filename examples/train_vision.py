"""Train the torchvision-compatible ResNet-18 or MobileNetV3-Small (examples/vision_models.py)
on CIFAR-10 when its files are under --data-dir, else on synthetic 32x32 images; jitted step,
progress bar, checkpoint/resume. Load torchvision weights first with --weights FILE
(a safetensors export of a torchvision state dict; the classifier is replaced when
--num-classes differs).

    python examples/train_vision.py --model resnet18 --steps 20
    python examples/train_vision.py --model mobilenet_v3_small --steps 40 --resume
    python examples/train_vision.py --amp bf16      # mixed precision (docs/amp.md)
    python examples/train_vision.py --amp fp16      # float16 with loss scaling
"""
import argparse
import os

import numpy as np

import funcgrad
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad.data import DataLoader, datasets, progress

import checkpointing
import vision_models


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", choices=["resnet18", "mobilenet_v3_small"], default="resnet18")
    ap.add_argument("--data-dir", default=os.path.expanduser("~/data"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--weights", default=None)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--amp", choices=["bf16", "fp16"], default=None,
                    help="mixed precision: products in bfloat16/float16 under funcgrad.autocast "
                         "(float32 weights); fp16 also scales the loss (GradScaler)")
    args = ap.parse_args(argv)
    ckpt = args.checkpoint or f"{args.model}_checkpoint"

    try:
        train = datasets.CIFAR10(args.data_dir, train=True)
        train.transform = lambda x: (np.asarray(x, np.float32) / 255.0).transpose(2, 0, 1)
        what = "CIFAR-10"
    except (FileNotFoundError, OSError, RuntimeError):
        train = datasets.Synthetic(n=args.batch_size * max(args.steps, 1), shape=(3, 32, 32),
                                   num_classes=args.num_classes, seed=0, noise=2.0)
        what = "synthetic 32x32 images"
    funcgrad.manual_seed(0)
    model = getattr(vision_models, args.model)(num_classes=args.num_classes)
    if args.weights:
        sd = funcgrad.load(args.weights)
        own = model.state_dict()
        keep = {k: v for k, v in sd.items() if k in own and tuple(v.shape) == tuple(own[k].shape)}
        res = model.load_state_dict(keep, strict=False)
        print(f"loaded {len(keep)} tensors from {args.weights}; kept initial values for "
              f"{res.missing_keys}")
    opt = optim.SGD(model.parameters(), lr=0.02, momentum=0.9, weight_decay=5e-4)
    step0 = checkpointing.resume(model, opt, ckpt) if args.resume else 0
    print(f"training {args.model} ({model.num_parameters():,} parameters) on {what}")

    device_type = "cpu" if funcgrad.default_backend() == "cpu" else "cuda"
    autocast = funcgrad.autocast(device_type, enabled=args.amp is not None,
                                 dtype=jnp.float16 if args.amp == "fp16" else jnp.bfloat16)
    scaler = funcgrad.amp.GradScaler(device_type, enabled=args.amp == "fp16")
    if args.amp:
        print(f"mixed precision: {autocast}, loss scaling {'on' if scaler.is_enabled() else 'off'}")

    @funcgrad.jit
    def train_step(model, opt, scaler, x, y):
        def loss_fn(m):
            with autocast:
                loss = F.cross_entropy(m(x), y)     # float32 under autocast
            return scaler.scale(loss), loss
        (_, loss), grads = funcgrad.value_and_grad(loss_fn, has_aux=True)(model)
        scaler.step(opt, grads)                     # skips the update on inf/NaN gradients
        scaler.update()
        return loss

    loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, drop_last=True)
    it = iter(loader)
    for step in progress(range(step0, args.steps), desc=args.model):
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(loader)
            x, y = next(it)
        loss = train_step(model, opt, scaler, jnp.asarray(np.asarray(x, np.float32)),
                          jnp.asarray(np.asarray(y, np.int32)))
        if (step + 1) % 10 == 0 or step + 1 == args.steps:
            print(f"step {step + 1}: loss {float(loss):.3f}")
    checkpointing.save(model, opt, ckpt, progress=args.steps)
    return model


if __name__ == "__main__":
    main()
