"""The state the checkpoint tests save, as NumPy values and as funcgrad arrays laid out on a
(2, 2) mesh of whatever devices are given (one process's, or two processes' together)."""
import ml_dtypes
import numpy as np

import funcgrad
from funcgrad.core.avals import ShapedArray
from funcgrad.lowering import sharding as shardings
from funcgrad.sharding import Mesh, NamedSharding, P

W = np.arange(32, dtype=np.float32).reshape(4, 8) / 4
SPECS = {"w": P("data", "model"), "b": P("data"), "m": P(None, "model"), "r": P()}


def expected():
    """{dotted key: value} of every leaf of ``state``."""
    return {
        "params.w": W,
        "params.b": (W[:, :2] - 3).astype(ml_dtypes.bfloat16),
        "opt.0.m": (W * 7).astype(np.int32),
        "opt.0.r": W > 4,
        "opt.1": np.float32(0.125),               # 0-d, replicated
        "opt.2": np.arange(3, dtype=np.int32),    # a host value
        "opt.3": 11,                              # a number (the optimizer's step)
        "mapped": np.arange(8, dtype=np.float32).reshape(4, 2) * 10 + 1,
    }


def place(value, sharding):
    """``value`` laid out by ``sharding`` over devices of possibly several processes: each
    process puts the blocks of its own devices (no collective involved)."""
    me = funcgrad.process_index()
    index = sharding.devices_indices_map(value.shape)
    local = [d for d in sharding._device_assignment if d.process_index == me]
    pieces = [np.ascontiguousarray(value[index[d]]) for d in local]
    aval = ShapedArray(value.shape, value.dtype, False)
    return shardings.put_pieces(aval, sharding, pieces, local)


def state(devices):
    """The nested state on a (2, 2) mesh of ``devices`` (4 of them); 'mapped' is laid out as a
    ``pmap`` output over them (one process: it is one)."""
    mesh = Mesh(np.array(devices).reshape(2, 2), ("data", "model"))
    e = expected()
    named = {k: NamedSharding(mesh, s) for k, s in SPECS.items()}
    layout = shardings.mapped_sharding(tuple(devices), 2, 0)
    if funcgrad.process_count() == 1:
        rows = np.arange(8, dtype=np.float32).reshape(4, 2)
        mapped = funcgrad.pmap(lambda v: v * 10 + 1, devices=devices)(place(rows, layout))
    else:   # a pmap over several processes returns each process's part (as JAX's)
        mapped = place(e["mapped"], layout)
    return {
        "params": {"w": place(e["params.w"], named["w"]), "b": place(e["params.b"], named["b"])},
        "opt": [{"m": place(e["opt.0.m"], named["m"]), "r": place(e["opt.0.r"], named["r"])},
                place(np.asarray(e["opt.1"]), named["r"]), e["opt.2"], e["opt.3"]],
        "mapped": mapped,
    }


def flat(tree, path=""):
    """{dotted key: leaf} of a nested dict / list tree."""
    if isinstance(tree, dict):
        items = tree.items()
    elif isinstance(tree, (list, tuple)):
        items = enumerate(tree)
    else:
        return {path: tree}
    out = {}
    for k, v in items:
        out.update(flat(v, f"{path}.{k}" if path else str(k)))
    return out


def mismatches(tree):
    """Keys whose loaded value differs from ``expected()`` (value, dtype or shape)."""
    got, want = flat(tree), expected()
    bad = sorted(set(got) ^ set(want))
    for k in set(got) & set(want):
        g, w = got[k], want[k]
        if isinstance(w, int):
            ok = g == w and type(g) is int
        else:
            g = np.asarray(g)
            ok = g.dtype == np.asarray(w).dtype and g.shape == np.shape(w) and np.array_equal(
                g.astype(np.float64), np.asarray(w).astype(np.float64))
        if not ok:
            bad.append(k)
    return bad


def targets(devices):
    """A layout other than the saved one for every leaf, over a (4,) mesh of ``devices`` (or
    of one device, where every spec means 'all on it')."""
    from funcgrad.sharding import SingleDeviceSharding
    mesh = Mesh(np.array(devices), ("x",))
    return {
        "params": {"w": NamedSharding(mesh, P(None, "x")), "b": NamedSharding(mesh, P("x"))},
        "opt": [{"m": NamedSharding(mesh, P("x")), "r": NamedSharding(mesh, P())},
                SingleDeviceSharding(funcgrad.local_devices()[-1]), np.zeros(3, np.int32), 0],
        "mapped": NamedSharding(mesh, P("x", None)),
    }


def local_mismatches(tree):
    """Like ``mismatches``, for arrays that span several processes: each process checks the
    blocks of its own devices against ``expected()``."""
    from funcgrad.core.avals import ShapedArray as Aval
    from funcgrad.lowering.array import Array
    got, want = flat(tree), expected()
    bad = sorted(set(got) ^ set(want))
    for k in set(got) & set(want):
        g, w = got[k], want[k]
        if not isinstance(g, shardings.ShardedArray):
            if isinstance(w, int):
                ok = g == w
            else:
                ok = np.array_equal(np.asarray(g).astype(np.float64),
                                    np.asarray(w).astype(np.float64))
            bad += [] if ok else [k]
            continue
        index = g.sharding.devices_indices_map(g.shape)
        for buf in g._buf._arrays:
            block = np.asarray(w)[index[buf._sharding._device]]
            data = np.asarray(Array(Aval(block.shape, g.aval.dtype, False), buf))
            if data.dtype != block.dtype or not np.array_equal(data, block):
                bad.append(k)
    return sorted(set(bad))
