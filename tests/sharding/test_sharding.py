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
