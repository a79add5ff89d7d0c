"""funcgrad.nn.initializers: JAX's (key, shape, dtype) initializers. Sample statistics against
the variance each definition promises (NumPy), and against jax.nn.initializers run in a
subprocess when jax is installed (funcgrad's PRNG bits differ from JAX's, so values are
compared where an initializer is deterministic and statistics otherwise)."""
import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.nn import initializers as I

KEY = funcgrad.random.PRNGKey(0)

# (name, factory kwargs, shape): the variance each should have and the jax comparison share it.
CASES = [
    ("glorot_uniform", {}, (400, 300)),
    ("glorot_normal", {}, (400, 300)),
    ("lecun_uniform", {}, (400, 300)),
    ("lecun_normal", {}, (400, 300)),
    ("he_uniform", {}, (400, 300)),
    ("he_normal", {}, (400, 300)),
    ("xavier_uniform", {}, (5, 5, 32, 64)),
    ("kaiming_normal", {}, (5, 5, 32, 64)),
    ("he_normal", {"in_axis": 0, "out_axis": 1}, (64, 32, 5, 5)),
    ("glorot_uniform", {"batch_axis": 0}, (8, 200, 100)),
]
SCALE_MODE_DIST = {
    "glorot_uniform": (1.0, "fan_avg", "uniform"), "xavier_uniform": (1.0, "fan_avg", "uniform"),
    "glorot_normal": (1.0, "fan_avg", "truncated_normal"),
    "lecun_uniform": (1.0, "fan_in", "uniform"), "lecun_normal": (1.0, "fan_in", "truncated_normal"),
    "he_uniform": (2.0, "fan_in", "uniform"), "he_normal": (2.0, "fan_in", "truncated_normal"),
    "kaiming_normal": (2.0, "fan_in", "truncated_normal"),
}


def _expected_std(name, kw, shape):
    scale, mode, _ = SCALE_MODE_DIST[name]
    fan_in, fan_out = I.compute_fans(shape, kw.get("in_axis", -2), kw.get("out_axis", -1),
                                     kw.get("batch_axis", ()))
    n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}[mode]
    return math.sqrt(scale / n)


@pytest.mark.parametrize("name,kw,shape", CASES)
def test_variance_scaling_family_statistics(name, kw, shape):
    w = np.asarray(getattr(I, name)(**kw)(KEY, shape), np.float64)
    assert w.shape == shape and w.dtype == np.float64
    std = _expected_std(name, kw, shape)
    np.testing.assert_allclose(w.std(), std, rtol=0.03)
    assert abs(w.mean()) < 0.03 * std
    if SCALE_MODE_DIST[name][2] == "uniform":
        bound = math.sqrt(3) * std
        assert w.max() < bound and w.min() >= -bound and w.max() > 0.99 * bound
    else:   # truncated at two (pre-rescaling) standard deviations
        bound = 2 * std / 0.87962566103423978
        assert np.abs(w).max() <= bound * (1 + 1e-6) and np.abs(w).max() > 0.95 * bound


def test_compute_fans_and_modes():
    assert I.compute_fans((3, 3, 16, 32)) == (144, 288)
    assert I.compute_fans((10, 20)) == (10, 20)
    assert I.compute_fans((4, 10, 20), batch_axis=0) == (10, 20)
    for mode, n in [("fan_in", 100), ("fan_out", 400), ("fan_avg", 250), ("fan_geo_avg", 200)]:
        w = np.asarray(I.variance_scaling(1.0, mode, "normal")(KEY, (100, 400)))
        np.testing.assert_allclose(w.std(), 1 / math.sqrt(n), rtol=0.03)


def test_simple_initializers():
    np.testing.assert_array_equal(np.asarray(I.zeros(KEY, (2, 3))), np.zeros((2, 3)))
    assert I.zeros(KEY, (2,), jnp.int32).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(I.ones(KEY, (4,))), np.ones(4))
    np.testing.assert_allclose(np.asarray(I.constant(0.25)(KEY, (3, 2))), np.full((3, 2), 0.25))
    u = np.asarray(I.uniform(0.5)(KEY, (200, 200)))
    assert u.min() >= 0 and u.max() < 0.5 and abs(u.mean() - 0.25) < 0.01
    n = np.asarray(I.normal(0.02)(KEY, (300, 300)))
    np.testing.assert_allclose(n.std(), 0.02, rtol=0.03)
    t = np.asarray(I.truncated_normal(1.0)(KEY, (300, 300)))
    assert np.abs(t).max() < 2.0
    np.testing.assert_allclose(t.std(), 0.87962566, rtol=0.03)
    t = np.asarray(I.truncated_normal(1.0, lower=0.0, upper=1.0)(KEY, (1000,)))
    assert t.min() > 0 and t.max() < 1.0
    assert I.normal(dtype=jnp.bfloat16)(KEY, (3,)).dtype == jnp.bfloat16


@pytest.mark.parametrize("shape,col", [((6, 6), -1), ((3, 7), -1), ((7, 3), -1),
                                       ((4, 2, 5), -1), ((4, 2, 3), 0)])
def test_orthogonal(shape, col):
    w = np.asarray(I.orthogonal(scale=2.0, column_axis=col)(KEY, shape), np.float64)
    assert w.shape == shape
    m = np.moveaxis(w, col, -1).reshape(-1, shape[col]) / 2.0
    gram = m.T @ m if m.shape[0] >= m.shape[1] else m @ m.T
    np.testing.assert_allclose(gram, np.eye(gram.shape[0]), atol=1e-5)


@pytest.mark.parametrize("shape", [(3, 4, 6), (3, 3, 4, 4), (3, 5, 3, 2, 2)])
def test_delta_orthogonal(shape):
    w = np.asarray(I.delta_orthogonal()(KEY, shape), np.float64)
    centre = tuple(s // 2 for s in shape[:-2])
    c = w[centre]
    np.testing.assert_allclose(c @ c.T, np.eye(shape[-2]), atol=1e-5)
    assert np.abs(w).sum() == pytest.approx(np.abs(c).sum())


def test_transforms_and_errors():
    w = funcgrad.jit(lambda k: I.he_uniform()(k, (8, 4)))(KEY)
    np.testing.assert_allclose(np.asarray(w), np.asarray(I.he_uniform()(KEY, (8, 4))),
                               rtol=1e-6)
    ws = funcgrad.vmap(lambda k: I.lecun_normal()(k, (5, 5)))(funcgrad.random.split(KEY, 3))
    assert ws.shape == (3, 5, 5)
    assert not np.allclose(np.asarray(ws[0]), np.asarray(ws[1]))
    with pytest.raises(ValueError, match="variance_scaling.*at least 2 dimensions"):
        I.glorot_uniform()(KEY, (5,))
    with pytest.raises(ValueError, match="mode must be one of"):
        I.variance_scaling(1.0, "fan_middle", "normal")
    with pytest.raises(ValueError, match="in <= out"):
        I.delta_orthogonal()(KEY, (3, 3, 8, 4))
    with pytest.raises(TypeError, match="initializers.normal: dtype must be a floating"):
        I.normal()(KEY, (2,), jnp.int32)


_JAX_SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    from jax.nn import initializers as I
    cases = json.loads(sys.argv[1])
    key = jax.random.PRNGKey(0)
    out = {"stats": [], "det": {}}
    for name, kw, shape in cases:
        w = np.asarray(getattr(I, name)(**kw)(key, tuple(shape), np.float64))
        out["stats"].append([float(w.std()), float(np.abs(w).max())])
    out["det"]["zeros"] = np.asarray(I.zeros(key, (2, 3))).tolist()
    out["det"]["ones"] = np.asarray(I.ones(key, (3,), np.int32)).tolist()
    out["det"]["constant"] = np.asarray(I.constant(-0.5)(key, (2, 2))).tolist()
    d = np.asarray(I.delta_orthogonal()(key, (3, 3, 2, 4)))
    out["det"]["delta_nonzero"] = (np.abs(d) > 0).any(axis=(-2, -1)).tolist()
    out["names"] = sorted(n for n in dir(I) if not n.startswith("_"))
    print(json.dumps(out))
""")


def test_against_jax_initializers(x64):
    pytest.importorskip("jax")
    # jax and funcgrad both drive jaxlib's process-wide state, so jax runs in its own process
    res = subprocess.run([sys.executable, "-c", _JAX_SCRIPT, json.dumps(CASES)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    ref = json.loads(res.stdout.strip().splitlines()[-1])
    for (name, kw, shape), (jstd, jmax) in zip(CASES, ref["stats"]):
        w = np.asarray(getattr(I, name)(**kw)(KEY, shape, jnp.float64))
        np.testing.assert_allclose(w.std(), jstd, rtol=0.04, err_msg=name)
        np.testing.assert_allclose(np.abs(w).max(), jmax, rtol=0.06, err_msg=name)
    np.testing.assert_array_equal(np.asarray(I.zeros(KEY, (2, 3))), ref["det"]["zeros"])
    np.testing.assert_array_equal(np.asarray(I.ones(KEY, (3,), jnp.int32)), ref["det"]["ones"])
    np.testing.assert_array_equal(np.asarray(I.constant(-0.5)(KEY, (2, 2))),
                                  ref["det"]["constant"])
    d = np.asarray(I.delta_orthogonal()(KEY, (3, 3, 2, 4)))
    np.testing.assert_array_equal((np.abs(d) > 0).any(axis=(-2, -1)), ref["det"]["delta_nonzero"])
    missing = [n for n in ref["names"] if not hasattr(I, n)]
    assert missing == []
