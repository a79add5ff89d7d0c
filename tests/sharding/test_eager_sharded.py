"""Runs ``eager_sharded_cases.py`` on 4 host CPU devices in a subprocess (eager operations on
mesh-placed arrays), and the one-device check here."""
import os

import numpy as np

import funcgrad
from funcgrad.sharding import Mesh, NamedSharding, P

HERE = os.path.dirname(os.path.abspath(__file__))


def test_eager_sharded_cases_on_four_host_devices(run_on_four_devices):
    run_on_four_devices(os.path.join(HERE, "eager_sharded_cases.py"))


def test_eager_operation_on_a_one_device_mesh_stays_on_the_mesh():
    mesh = Mesh(np.array(funcgrad.local_devices()[:1]), "d")
    s = NamedSharding(mesh, P("d"))
    x = funcgrad.device_put(np.arange(6.0, dtype=np.float32), s)
    y = (x * 3.0).sum()
    assert isinstance(y.sharding, NamedSharding) and y.sharding.mesh == mesh
    assert float(y) == 45.0
