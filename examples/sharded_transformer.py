"""A transformer language model trained on a 2x2 (data x model) mesh with PyTorch's habits:
``funcgrad.nn.parallel.parallelize_module`` splits the attention and MLP layers over the
``model`` axis (Megatron-style: query/key/value and the first MLP layer column-wise, the
output projections row-wise), each batch is split over the ``data`` axis, and the training
step is a plain ``@funcgrad.jit`` function of the model, the optimizer and the batch. XLA's
SPMD partitioner splits the step and inserts the collectives; the model code is the one a
single device runs.

The data is generated: each sequence counts up from a random start by a random stride
(modulo the vocabulary), so the next token follows from the previous two and the loss falls
quickly. On a machine without accelerators the script asks for 4 host CPU devices.

    python examples/sharded_transformer.py                  # 2x2 mesh
    python examples/sharded_transformer.py --single-device  # the same steps on one device

Both print one line per step, ``step <i> loss <value>``; the losses agree to about 1e-6
(tests/sharding/test_sharded_example.py checks 1e-5).
"""
import argparse
import math
import os
import time

os.environ.setdefault("FUNCGRAD_CPU_DEVICES", "4")

import numpy as np  # noqa: E402

import funcgrad  # noqa: E402
import funcgrad.nn as nn  # noqa: E402
import funcgrad.nn.functional as F  # noqa: E402
import funcgrad.numpy as jnp  # noqa: E402
import funcgrad.optim as optim  # noqa: E402
from funcgrad.nn.parallel import (ColwiseParallel, Replicate, RowwiseParallel,  # noqa: E402
                                  parallelize_module)
from funcgrad.sharding import NamedSharding, P  # noqa: E402


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        split = lambda y: y.reshape(b, t, self.heads, d // self.heads).transpose(0, 2, 1, 3)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(0, 2, 1, 3).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(F.gelu(self.fc1(self.norm2(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, heads, hidden, context):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(jnp.asarray(
            np.random.default_rng(0).standard_normal((context, dim)).astype(np.float32) * 0.02))
        self.block = Block(dim, heads, hidden)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.norm(self.block(x)))


# the tensor-parallel plan: attention and MLP split over the model axis, the output layer's
# vocabulary too (gathered for the loss)
PLAN = {
    "block.attn.q": ColwiseParallel(),
    "block.attn.k": ColwiseParallel(),
    "block.attn.v": ColwiseParallel(),
    "block.attn.out": RowwiseParallel(),
    "block.fc1": ColwiseParallel(),
    "block.fc2": RowwiseParallel(),
    "head": ColwiseParallel(output_layouts=Replicate()),
}


def batches(steps, batch, context, vocab, seed=0):
    """Counting sequences: start + stride * position (mod vocab); inputs and next tokens."""
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        start = rng.integers(0, vocab, (batch, 1))
        stride = rng.integers(1, 4, (batch, 1))
        seq = (start + stride * np.arange(context + 1)) % vocab
        yield seq[:, :-1].astype(np.int32), seq[:, 1:].astype(np.int32)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--single-device", action="store_true",
                    help="train on one device (the reference run)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--context", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=1e-2)
    args = ap.parse_args(argv)

    funcgrad.manual_seed(0)
    model = TinyLM(args.vocab, args.dim, args.heads, 4 * args.dim, args.context)
    if args.single_device:
        place = jnp.asarray
        print("one device")
    else:
        mesh = funcgrad.make_mesh((2, 2), ("data", "model"))
        parallelize_module(model, mesh, PLAN, axis="model")
        batch_sharding = NamedSharding(mesh, P("data"))
        place = lambda a: funcgrad.device_put(a, batch_sharding)
        print(f"{mesh}: attention and MLP split over 'model', the batch over 'data'")
        print("  block.fc1.weight", model.block.fc1.weight.sharding.spec,
              "per-device block", model.block.fc1.weight.sharding.shard_shape(
                  model.block.fc1.weight.shape))
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    @funcgrad.jit
    def train_step(model, opt, tokens, targets):
        def loss_fn(m):
            logits = m(tokens)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss, grads = funcgrad.value_and_grad(loss_fn)(model)
        opt.step(grads)
        return loss

    times = []
    for i, (x, y) in enumerate(batches(args.steps, args.batch, args.context, args.vocab)):
        start = time.perf_counter()
        loss = float(train_step(model, opt, place(x), place(y)))
        times.append(time.perf_counter() - start)
        print(f"step {i} loss {loss:.7f}")
    print(f"final loss {loss:.4f} (uniform guess: {math.log(args.vocab):.4f}); median step "
          f"after the first (which compiles): {np.median(times[1:]) * 1e3:.1f} ms"
          if len(times) > 1 else f"final loss {loss:.4f}")


if __name__ == "__main__":
    main()
