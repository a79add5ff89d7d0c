"""One-process checks of the global-array constructors and DistributedDataParallel: values,
errors, and ``no_sync`` switching without new traces (the multi-process values are checked by
test_global_programs.py)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp
import funcgrad.optim as optim
from funcgrad.nn.parallel import DistributedDataParallel
from funcgrad.sharding import NamedSharding, PartitionSpec as P


@pytest.fixture
def rows():
    return NamedSharding(funcgrad.make_mesh((funcgrad.device_count(),), ("d",)), P("d"))


def test_process_local_data_of_one_process_is_the_whole_array(rows):
    data = np.arange(12.0, dtype=np.float32).reshape(4, 3)
    x = funcgrad.make_array_from_process_local_data(rows, data)
    assert x.shape == (4, 3) and x.is_fully_addressable
    np.testing.assert_array_equal(np.asarray(x), data)
    [shard] = x.addressable_shards if funcgrad.device_count() == 1 else x.addressable_shards[:1]
    assert shard.replica_id == 0 and shard.index[1] == slice(None)
    with pytest.raises(ValueError, match=r"global_shape \(8, 3\) must be its shape \(4, 3\)"):
        funcgrad.make_array_from_process_local_data(rows, data, global_shape=(8, 3))
    with pytest.raises(ValueError, match=r"global_shape \(4,\) has 1 dimensions"):
        funcgrad.make_array_from_process_local_data(rows, data, global_shape=(4,))


def test_single_device_arrays_checks_devices_shapes_and_dtypes(rows):
    dev = funcgrad.local_devices()[0]
    n = funcgrad.device_count()
    parts = [funcgrad.device_put(np.full((2, 3), i, np.float32), d)
             for i, d in enumerate(funcgrad.local_devices())]
    x = funcgrad.make_array_from_single_device_arrays((2 * n, 3), rows, parts)
    np.testing.assert_array_equal(np.asarray(x)[:2], np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"an array of shape \(2, 3\) .* has shape \(1, 3\)"):
        funcgrad.make_array_from_single_device_arrays((n, 3), rows, parts)
    with pytest.raises(ValueError, match="give one array on each"):
        funcgrad.make_array_from_single_device_arrays((2 * n, 3), rows, parts[:0])
    with pytest.raises(TypeError, match="expected single-device funcgrad Arrays"):
        funcgrad.make_array_from_single_device_arrays((2 * n, 3), rows, [np.ones((2, 3))])
    with pytest.raises(ValueError, match=r"dtype=int32 but the arrays have dtypes \['float32'\]"):
        funcgrad.make_array_from_single_device_arrays((2 * n, 3), rows, parts, dtype=np.int32)
    with pytest.raises(TypeError, match="expected a NamedSharding"):
        funcgrad.make_array_from_single_device_arrays((2, 3), "d", [parts[0]])
    single = funcgrad.make_array_from_single_device_arrays(
        (2, 3), funcgrad.sharding.SingleDeviceSharding(dev), [parts[0]])
    assert single.device == dev and single.is_fully_addressable


def test_callback_sees_each_block_index(rows):
    seen = []
    whole = np.arange(8.0).reshape(4, 2)

    def block(index):
        seen.append(index)
        return whole[index]

    x = funcgrad.make_array_from_callback((4, 2), rows, block)
    np.testing.assert_array_equal(np.asarray(x), whole.astype(np.float32))
    assert len(seen) == funcgrad.device_count()
    assert all(isinstance(i, tuple) and len(i) == 2 for i in seen)


def test_single_device_array_shards():
    x = jnp.ones((2, 2))
    [shard] = x.addressable_shards
    assert shard.replica_id == 0 and x.is_fully_addressable and "replica_id=0" in repr(shard)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc(x)


def test_ddp_trains_as_the_module_and_no_sync_reuses_its_traces():
    funcgrad.manual_seed(0)
    plain = Tiny()
    funcgrad.manual_seed(0)
    ddp = DistributedDataParallel(Tiny())
    traces = []

    @funcgrad.jit
    def step(m, opt, x, y):
        traces.append(1)
        loss, grads = funcgrad.value_and_grad(lambda m: F.mse_loss(m(x), y))(m)
        opt.step(grads)
        return loss

    rng = np.random.default_rng(1)
    xs = rng.normal(size=(4, 8, 3)).astype(np.float32)
    ys = rng.normal(size=(4, 8, 2)).astype(np.float32)
    opts = [optim.SGD(m.parameters(), lr=0.1) for m in (plain, ddp)]
    for t in range(4):
        expected = float(step(plain, opts[0], xs[t], ys[t]))
        if t % 2:
            with ddp.no_sync():
                got = float(step(ddp, opts[1], xs[t], ys[t]))
        else:
            got = float(step(ddp, opts[1], xs[t], ys[t]))
        assert got == pytest.approx(expected, abs=1e-6)
    np.testing.assert_allclose(np.asarray(ddp.module.fc.weight), np.asarray(plain.fc.weight),
                               atol=1e-6)
    assert len(traces) == 3         # the plain model, the synchronized and the no_sync step
    with ddp.no_sync():             # an attribute set inside: new versions, new traces
        ddp.note = "changed"
        step(ddp, opts[1], xs[0], ys[0])
    step(ddp, opts[1], xs[0], ys[0])
    assert len(traces) == 5
    step(ddp, opts[1], xs[0], ys[0])
    assert len(traces) == 5
    assert list(ddp.state_dict()) == ["module.fc.weight", "module.fc.bias"]
    assert ddp.devices == tuple(funcgrad.local_devices())


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(dim=1), ValueError, "only dim=0"),
    (dict(process_group=object()), ValueError, "process groups are not supported"),
    (dict(device_ids=[99]), ValueError, "device_ids entry 99 is not the index"),
    (dict(device_ids=[]), ValueError, "one or more distinct devices"),
])
def test_ddp_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=message):
        DistributedDataParallel(Tiny(), **kwargs)
    with pytest.raises(TypeError, match="expected a funcgrad.nn.Module, got function"):
        DistributedDataParallel(lambda x: x)


def test_ddp_accepts_pytorch_arguments():
    ddp = DistributedDataParallel(Tiny(), device_ids=[0], find_unused_parameters=True,
                                  broadcast_buffers=False, gradient_as_bucket_view=True,
                                  static_graph=True, bucket_cap_mb=25)
    assert ddp.find_unused_parameters and not ddp.broadcast_buffers
    assert ddp(jnp.ones((2, 3))).shape == (2, 2)
