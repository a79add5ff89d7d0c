"""Runs ``sharding_cases.py`` on 4 host CPU devices in a subprocess (the device count is fixed
when funcgrad makes its client), and the single-device checks here."""
import os

import numpy as np
import pytest

import funcgrad
from funcgrad.sharding import Mesh, NamedSharding, P, PartitionSpec, SingleDeviceSharding

HERE = os.path.dirname(os.path.abspath(__file__))


def test_sharding_cases_on_four_host_devices(run_on_four_devices):
    run_on_four_devices(os.path.join(HERE, "sharding_cases.py"))


def test_one_device_mesh_and_single_device_sharding():
    dev = funcgrad.local_devices()[0]
    mesh = Mesh(np.array([dev]), "d")
    a = funcgrad.device_put(np.arange(6.0).reshape(3, 2), NamedSharding(mesh, P("d")))
    assert a.sharding.is_fully_replicated() and a.addressable_shards[0].data.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(a + 1), np.arange(6.0).reshape(3, 2) + 1)
    b = funcgrad.device_put(np.ones(2), SingleDeviceSharding(dev))
    assert isinstance(b.sharding, SingleDeviceSharding) and b.device == dev
    assert repr(b.sharding) == f"SingleDeviceSharding(device={dev!r})"


def test_partition_spec():
    assert P is PartitionSpec and P("a", None, ("b", "c")) == ("a", None, ("b", "c"))
    assert repr(P()) == "PartitionSpec()" and P("a").axes_of(3) == ()
    assert P(["b", "c"]).axes_of(0) == ("b", "c")
    with pytest.raises(TypeError, match=r"PartitionSpec: each entry .* got 3"):
        P("a", 3)


def test_layout_signatures_name_the_aval_key_and_the_sharding_object(monkeypatch):
    # what the eager jit's fast table keys a sharded argument by: equal numbers for the same
    # aval key and the very same sharding object, new numbers otherwise, never reused (also
    # after the table is cleared), and kept on the array once asked for
    from funcgrad.core.avals import ShapedArray
    from funcgrad.lowering import sharding as lowering_sharding
    from funcgrad.lowering.sharding import layout_signature, signature_of
    mesh = funcgrad.make_mesh((1,), ("data",))
    s1, s2 = NamedSharding(mesh, P("data")), NamedSharding(mesh, P("data"))
    a, b = ShapedArray((4,), np.float32), ShapedArray((4,), np.float32)
    n = layout_signature(a, s1)
    assert layout_signature(b, s1) == n                      # equal keys
    assert layout_signature(a, s2) != n                      # an equal, distinct sharding
    assert layout_signature(ShapedArray((4,), np.int32), s1) != n
    monkeypatch.setattr(lowering_sharding, "_signatures", {})
    assert layout_signature(a, s1) > n                       # a fresh number, not a reused one
    x = funcgrad.device_put(np.arange(4.0, dtype=np.float32), s1)
    assert signature_of(x) == signature_of(x) == x._sig
    y = funcgrad.jit(lambda v: v * 2.0)(x)                   # an output knows its number
    assert type(y) is lowering_sharding.ShardedArray and hasattr(y, "_sig")
    assert y._sig == layout_signature(y.aval, y.sharding)
    np.testing.assert_array_equal(np.asarray(y), 2.0 * np.arange(4.0))
