"""A DistributedDataParallel LeNet-5 training step on 2 processes: funcgrad vs PyTorch (gloo).

Each library runs as 2 processes on 127.0.0.1, one CPU device each (funcgrad:
``FUNCGRAD_CPU_DEVICES=1`` per process and its coordination service + gloo; PyTorch:
``torch.distributed`` with the gloo backend), training LeNet-5 (28x28 inputs, SGD with
momentum) on 64 samples per process per step. funcgrad's step is the usual jitted step with
``nn.parallel.DistributedDataParallel(model)`` in place of the model; PyTorch's is
``zero_grad(); loss.backward(); step()`` on its DDP. Rank 0 times rounds of steps, each ended
by reading the loss; a run's number is the median round's time per step, and the table gives
the median over runs, which alternate between the libraries. Every process gets
``OMP_NUM_THREADS=1``, as torchrun sets for several processes per node (PyTorch with 2 threads
per process on 2 shared cores was 20x slower here, spinning). On 2 shared cores only the
ratio means anything.

Run: ``python bench/distributed_ddp.py`` (from an environment with torch; ``--quick`` for
fewer rounds). ``--worker`` is the per-process entry the script starts itself.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nn_train import lenet  # noqa: E402  (LeNet-5 written once for both libraries)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH, LR = 64, 0.05


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def batches(rank, count):
    import numpy as np
    rng = np.random.default_rng(rank)
    return [(rng.normal(size=(BATCH, 1, 28, 28)).astype(np.float32),
             rng.integers(0, 10, BATCH).astype(np.int64)) for _ in range(count)]


def funcgrad_worker(rank, rounds, steps):
    import numpy as np

    import funcgrad
    import funcgrad.nn as nn
    import funcgrad.nn.functional as F
    import funcgrad.optim as optim
    from funcgrad.nn.parallel import DistributedDataParallel

    funcgrad.distributed.initialize(initialization_timeout=60, heartbeat_timeout=30)

    funcgrad.manual_seed(0)
    model = DistributedDataParallel(lenet(nn))
    opt = optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    @funcgrad.jit
    def train_step(m, opt, x, y):
        loss, grads = funcgrad.value_and_grad(lambda m: F.cross_entropy(m(x), y))(m)
        opt.step(grads)
        return loss

    data = [(funcgrad.device_put(x), funcgrad.device_put(y.astype(np.int32)))
            for x, y in batches(rank, steps)]
    return _time(lambda x, y: train_step(model, opt, x, y), lambda loss: float(loss), data,
                 rounds)


def torch_worker(rank, rounds, steps):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F

    dist.init_process_group("gloo", rank=rank, world_size=2)

    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(lenet(nn))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    data = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches(rank, steps)]
    try:
        return _time(step, lambda loss: loss.item(), data, rounds)
    finally:
        dist.destroy_process_group()


def _time(step, read, data, rounds):
    for x, y in data[:3]:          # compile / warm up
        read(step(x, y))
    per_step = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        loss = None
        for x, y in data:
            loss = step(x, y)
        read(loss)
        per_step.append((time.perf_counter() - t0) / len(data) * 1e3)
    return statistics.median(per_step)


def launch(library, rounds, steps, timeout):
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2",
                   RANK=str(rank), LOCAL_RANK=str(rank), FUNCGRAD_CPU_DEVICES="1",
                   OMP_NUM_THREADS="1",
                   TF_CPP_MIN_LOG_LEVEL="2",
                   PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", library, "--rank", str(rank), "--rounds",
             str(rounds), "--steps", str(steps)], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True))
    try:
        outs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"{library} worker failed:\n{err.decode()[-3000:]}")
    return json.loads(outs[0][0].decode().strip().splitlines()[-1])["ms_per_step"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--worker", choices=["funcgrad", "torch"])
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    if args.worker:
        work = funcgrad_worker if args.worker == "funcgrad" else torch_worker
        print(json.dumps({"ms_per_step": work(args.rank, args.rounds, args.steps)}),
              flush=True)
        return
    runs = args.runs or (2 if args.quick else 3)
    rounds = 3 if args.quick else 5
    try:
        import torch  # noqa: F401
        libraries = ["funcgrad", "torch"]
    except ImportError:
        libraries = ["funcgrad"]
        print("(torch is not installed here: funcgrad's row only)")
    times = {lib: [] for lib in libraries}
    for _ in range(runs):
        for lib in libraries:
            times[lib].append(launch(lib, rounds, args.steps, timeout=300))
    best = min(statistics.median(t) for t in times.values())
    print(f"DDP LeNet-5 training step, 2 processes x 1 CPU device, {BATCH} samples per "
          f"process (median of {runs} runs)")
    print("| library | ms / step | runs (ms) | vs fastest |")
    print("| --- | --- | --- | --- |")
    names = {"funcgrad": "funcgrad DistributedDataParallel",
             "torch": "PyTorch DistributedDataParallel (gloo)"}
    for lib, t in times.items():
        m = statistics.median(t)
        print(f"| {names[lib]} | {m:.2f} | {', '.join(f'{v:.2f}' for v in t)} | "
              f"{m / best:.2f}x |")


if __name__ == "__main__":
    main()
