"""One process of the global-program tests (test_global_programs.py): joins a run when its
environment names one (2 processes x 2 host devices), else runs alone (1 process x 4 devices),
and prints what it computed as one JSON line.

Every process computes: the addressable shards of arrays made by
``make_array_from_process_local_data`` / ``make_array_from_single_device_arrays`` /
``make_array_from_callback`` over the global mesh; a sharded ``jit`` over that mesh; a
``pmap`` with a collective; and the per-step losses of LeNet trained data-parallel with
``pmap`` and with ``DistributedDataParallel`` on the same global batches, next to the 1-device
run on the full batches (computed here too, on this process's first device).
"""
import json
import os
import sys

import numpy as np

import funcgrad
import funcgrad.distributed as dist
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad import lax
from funcgrad.data import DataLoader, DistributedSampler
from funcgrad.data import TensorDataset
from funcgrad.nn.parallel import DistributedDataParallel
from funcgrad.sharding import NamedSharding, PartitionSpec as P

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
from ddp_lenet import LeNet  # noqa: E402  (the example's model, as users write it)

if "MASTER_ADDR" in os.environ:
    dist.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10)
ME, PROCESSES = funcgrad.process_index(), funcgrad.process_count()
GLOBAL_BATCH, STEPS, LR = 16, 3, 0.05
position = {d: i for i, d in enumerate(funcgrad.devices())}


def shards(x):
    return [[position[s.device], [[i.start, i.stop] for i in s.index], s.replica_id,
             np.asarray(s.data).tolist()] for s in x.addressable_shards]


def global_arrays():
    out = {}
    mesh = funcgrad.make_mesh((4,), ("d",))
    rows = NamedSharding(mesh, P("d"))
    mine = np.arange(4.0, dtype=np.float32).reshape(2, 2) + 4 * ME if PROCESSES > 1 else \
        np.arange(8.0, dtype=np.float32).reshape(4, 2)
    x = funcgrad.make_array_from_process_local_data(rows, mine)
    out["local_data"] = {"shape": list(x.shape), "shards": shards(x),
                         "fully_addressable": x.is_fully_addressable,
                         "indices_map": sorted(position[d] for d in
                                               rows.addressable_devices_indices_map((4, 2)))}
    # a 2 x 2 mesh: axis "p" across the processes, "q" within each one
    grid = funcgrad.make_mesh((2, 2), ("p", "q"))
    replicated_rows = NamedSharding(grid, P("q"))   # rows over "q", copies over "p"
    y = funcgrad.make_array_from_process_local_data(
        replicated_rows, np.array([[10.0], [20.0]], np.float32))
    out["replicated"] = {"shape": list(y.shape), "shards": shards(y)}
    parts = [funcgrad.device_put(np.full((1, 3), position[d], np.int32), d)
             for d in mesh.local_devices]
    z = funcgrad.make_array_from_single_device_arrays((4, 3), rows, parts)
    out["single_device_arrays"] = {"shape": list(z.shape), "shards": shards(z)}
    whole = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    c = funcgrad.make_array_from_callback((4, 4), NamedSharding(grid, P("p", "q")),
                                          lambda index: whole[index])
    out["callback"] = {"shape": list(c.shape), "shards": shards(c)}
    # sharded jit over the global mesh: a replicated result every process can read
    w = np.linspace(-1.0, 1.0, 8, dtype=np.float32).reshape(2, 4)
    matmul = funcgrad.jit(lambda a, b: jnp.tanh(a @ b).sum(0), in_shardings=(rows, None),
                          out_shardings=NamedSharding(mesh, P()))
    out["jit"] = np.asarray(matmul(x, w)).tolist()
    full = np.arange(8.0, dtype=np.float32).reshape(4, 2)
    out["jit_expected"] = np.asarray(
        funcgrad.jit(lambda a, b: jnp.tanh(a @ b).sum(0))(full, w)).tolist()
    scaled = funcgrad.jit(lambda a: a * 3, in_shardings=rows, out_shardings=rows)(x)
    out["jit_sharded_out"] = shards(scaled)
    everyone = dist.process_allgather(np.asarray(scaled.addressable_shards[0].data))
    out["jit_gathered"] = np.asarray(everyone).tolist()
    # shard_map over the global mesh: each device's block, a psum across the processes
    squares = funcgrad.shard_map(lambda b: lax.psum(jnp.sum(b * b, 0, keepdims=True), "d"),
                                 mesh=mesh, in_specs=P("d"), out_specs=P())(x)
    out["shard_map"] = np.asarray(squares).tolist()
    try:
        np.asarray(scaled)
        out["read_error"] = None
    except RuntimeError as error:
        out["read_error"] = str(error)
    return out


def pmap_collective():
    local = funcgrad.local_device_count()
    f = funcgrad.pmap(lambda v: v + lax.psum(v, "i"), axis_name="i")
    y = f(np.arange(local, dtype=np.float32) + local * ME)
    g = funcgrad.grad(lambda v: (f(v) ** 2).sum())(jnp.arange(local, dtype=jnp.float32)
                                                  + local * ME)
    return {"shape": list(y.shape), "values": np.asarray(y).tolist(),
            "grad": np.asarray(g).tolist()}


def dataset():
    rng = np.random.default_rng(0)
    images = rng.normal(size=(GLOBAL_BATCH * STEPS, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, GLOBAL_BATCH * STEPS).astype(np.int32)
    return TensorDataset(images, labels)


def loaders():
    """This process's loader (its share of every global batch) and the full-batch loader."""
    data = dataset()
    sampler = DistributedSampler(data, shuffle=False)     # process_index / process_count
    mine = DataLoader(data, batch_size=GLOBAL_BATCH // PROCESSES, sampler=sampler)
    return mine, DataLoader(data, batch_size=GLOBAL_BATCH)


def model(seed=0):
    funcgrad.manual_seed(seed)
    return LeNet()


def loss_fn(m, x, y):
    return F.cross_entropy(m(x), y)


@funcgrad.jit
def train_step(m, opt, x, y):
    loss, grads = funcgrad.value_and_grad(loss_fn)(m, x, y)
    opt.step(grads)
    return loss


def train_single():
    m = model()
    opt = optim.SGD(m.parameters(), lr=LR, momentum=0.9)
    _, full = loaders()
    return [float(train_step(m, opt, jnp.asarray(x), jnp.asarray(y))) for x, y in full]


def train_pmap():
    m = model()
    opt = optim.SGD(m.parameters(), lr=LR, momentum=0.9)
    local = funcgrad.local_device_count()
    step = funcgrad.pmap(
        lambda m, x, y: lax.pmean(funcgrad.value_and_grad(loss_fn)(m, x, y), "batch"),
        axis_name="batch", in_axes=(None, 0, 0), out_axes=None)
    mine, _ = loaders()
    losses = []
    for x, y in mine:
        x = np.asarray(x).reshape((local, -1) + x.shape[1:])
        y = np.asarray(y).reshape(local, -1)
        loss, grads = step(m, x, y)
        opt.step(grads)
        losses.append(float(loss))
    return losses


def train_ddp():
    # process 1 starts from other weights: DDP's construction gives it process 0's
    ddp = DistributedDataParallel(model(seed=ME))
    opt = optim.SGD(ddp.parameters(), lr=LR, momentum=0.9)
    mine, _ = loaders()
    losses = []
    for x, y in mine:
        loss = train_step(ddp, opt, jnp.asarray(x), jnp.asarray(y))   # this process's loss
        losses.append(float(dist.all_reduce(loss, "mean")))
    weights = np.asarray(ddp.module.fc3.weight)
    agree = np.asarray(dist.process_allgather(weights))
    return losses, float(np.abs(agree - agree[0]).max())


def ddp_buffers():
    """Eval-mode outputs of a DDP-wrapped BatchNorm whose running mean drifted on process 1
    after construction: each forward starts from process 0's buffers."""
    funcgrad.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    ddp = DistributedDataParallel(net)
    if ME == 1:
        net[1].running_mean = jnp.full(4, 5.0)
    ddp.eval()
    out = ddp(jnp.ones((2 * funcgrad.local_device_count(), 3)))
    return np.asarray(out)[0].tolist()


def ddp_no_sync():
    """The weight gradient of sum(w . x) with every row of x = process index + 1: averaged
    over the processes, then inside no_sync this process's own."""
    funcgrad.manual_seed(0)
    ddp = DistributedDataParallel(nn.Linear(3, 1))
    x = jnp.full((2 * funcgrad.local_device_count(), 3), ME + 1.0)

    def weight_grad():
        return np.asarray(funcgrad.grad(lambda m: m(x).sum())(ddp).module.weight).tolist()

    synced = weight_grad()
    with ddp.no_sync():
        own = weight_grad()
    return synced, own


result = {"process_index": ME, "process_count": PROCESSES,
          "device_count": funcgrad.device_count()}
result.update(global_arrays=global_arrays(), pmap=pmap_collective())
result["single"] = train_single()
result["pmap_losses"] = train_pmap()
result["ddp_losses"], result["ddp_weight_spread"] = train_ddp()
result["ddp_buffers"] = ddp_buffers()
result["ddp_synced"], result["ddp_own"] = ddp_no_sync()
print(json.dumps(result), flush=True)
if PROCESSES > 1:
    dist.shutdown()
sys.exit(0)
