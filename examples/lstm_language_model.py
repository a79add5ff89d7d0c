"""A character-level LSTM language model on a small bundled text (examples/data/tiny_text.txt).

Trains with a jitted step (Adam, gradient clipping), shows a progress bar, checkpoints to
safetensors and resumes, then samples a few characters:

    python examples/lstm_language_model.py --steps 300
    python examples/lstm_language_model.py --steps 600 --resume
"""
import argparse
import os

import numpy as np

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad.data import progress

import checkpointing

HERE = os.path.dirname(os.path.abspath(__file__))


class CharLM(nn.Module):
    def __init__(self, vocab, emb=48, hidden=128, layers=1):
        super().__init__()
        self.embed = nn.Embedding(vocab, emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx, state=None):
        h, state = self.lstm(self.embed(idx), state)
        return self.head(h), state


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--text", default=os.path.join(HERE, "data", "tiny_text.txt"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--checkpoint", default="charlm_checkpoint")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--sample", type=int, default=200)
    args = ap.parse_args(argv)

    text = open(args.text, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], np.int32)
    print(f"{len(text)} characters, vocabulary {len(chars)}")

    funcgrad.manual_seed(0)
    model = CharLM(len(chars))
    opt = optim.Adam(model.parameters(), lr=args.lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps, eta_min=args.lr / 10)
    step0 = checkpointing.resume(model, opt, args.checkpoint, sched) if args.resume else 0

    @funcgrad.jit
    def train_step(model, opt, x, y):
        def loss_fn(m):
            logits, _ = m(x)
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss, grads = funcgrad.value_and_grad(loss_fn)(model)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.step(grads)
        return loss

    rng = np.random.default_rng(step0)
    bar = progress(range(step0, args.steps), desc="train")
    loss_avg = None
    for step in bar:
        starts = rng.integers(0, len(data) - args.seq_len - 1, args.batch_size)
        x = np.stack([data[s:s + args.seq_len] for s in starts])
        y = np.stack([data[s + 1:s + args.seq_len + 1] for s in starts])
        loss = float(train_step(model, opt, jnp.asarray(x), jnp.asarray(y)))
        sched.step()
        loss_avg = loss if loss_avg is None else 0.95 * loss_avg + 0.05 * loss
        if (step + 1) % 100 == 0 or step + 1 == args.steps:
            print(f"step {step + 1}: loss {loss_avg:.3f}")
            checkpointing.save(model, opt, args.checkpoint, progress=step + 1)

    # sampling: feed one character at a time, carrying the LSTM state
    model.eval()
    step_fn = funcgrad.jit(lambda m, idx, state: m(idx, state))
    idx = jnp.asarray([[stoi["T"]]], "int32")
    state = (jnp.zeros((1, 1, 128)), jnp.zeros((1, 1, 128)))
    out = ["T"]
    srng = np.random.default_rng(0)
    for _ in range(args.sample):
        logits, state = step_fn(model, idx, state)
        p = np.asarray(F.softmax(logits[0, -1] / 0.8, dim=-1), np.float64)
        c = int(srng.choice(len(chars), p=p / p.sum()))
        out.append(chars[c])
        idx = jnp.asarray([[c]], "int32")
    print("sample:", "".join(out))
    return model


if __name__ == "__main__":
    main()
