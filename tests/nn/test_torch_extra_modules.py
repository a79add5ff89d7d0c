"""Behaviour of the issue-21 additions that a stored PyTorch value cannot show: random
functions (gumbel_softmax, rrelu, fractional pooling) by their distributions, lazy modules
under transformations, SyncBatchNorm over a mapped axis, in-place aliases, and errors."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp


def test_gumbel_softmax_samples_the_softmax_and_hard_is_straight_through():
    logits = jnp.log(jnp.array([0.1, 0.2, 0.7]))
    draws = jnp.stack([F.gumbel_softmax(logits, tau=0.5, hard=True, key=k) for k in range(400)])
    assert set(np.unique(np.asarray(draws)).tolist()) == {0.0, 1.0}
    np.testing.assert_array_equal(np.asarray(draws.sum(-1)), 1.0)
    freq = np.asarray(draws.mean(0))
    # 400 draws: the standard error of each frequency is at most 0.025
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.075)
    soft = lambda z: jnp.sum(F.gumbel_softmax(z, tau=0.7, key=3) * jnp.arange(3.0))  # noqa
    hard = lambda z: jnp.sum(F.gumbel_softmax(z, tau=0.7, hard=True, key=3)  # noqa: E731
                             * jnp.arange(3.0))
    np.testing.assert_allclose(np.asarray(funcgrad.grad(hard)(logits)),
                               np.asarray(funcgrad.grad(soft)(logits)), rtol=1e-6)
    a = F.gumbel_softmax(jnp.zeros((2, 5)), key=funcgrad.random.PRNGKey(0), dim=0)
    np.testing.assert_allclose(np.asarray(a.sum(0)), 1.0, rtol=1e-6)


def test_rrelu_training_slopes_lie_in_range_and_follow_the_key():
    x = -jnp.ones(2000)
    y = np.asarray(F.rrelu(x, 0.1, 0.3, training=True, key=7))
    assert (-0.3 <= y).all() and (y <= -0.1).all()
    assert abs(y.mean() + 0.2) < 0.01 and y.std() > 0.05
    np.testing.assert_array_equal(y, np.asarray(nn.RReLU(0.1, 0.3)(x, key=7)))
    assert not np.array_equal(y, np.asarray(F.rrelu(x, 0.1, 0.3, training=True, key=8)))


def test_fractional_max_pool_with_a_key_is_a_max_over_valid_windows():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((2, 3, 10, 9)).astype("float32"))
    y, idx = F.fractional_max_pool2d(x, 3, output_size=(4, 5), return_indices=True, key=5)
    flat = np.asarray(x).reshape(2, 3, -1)
    np.testing.assert_array_equal(np.take_along_axis(flat, np.asarray(idx).reshape(2, 3, -1),
                                                     -1).reshape(y.shape), np.asarray(y))
    y2 = F.fractional_max_pool2d(x, 3, output_size=(4, 5), key=5)
    np.testing.assert_array_equal(np.asarray(y2), np.asarray(y))


def test_inplace_aliases_return_the_value_and_leave_the_input():
    x = jnp.array([-1.0, 0.5, 2.0])
    for alias, plain in ((F.relu_, F.relu), (F.elu_, F.elu), (F.selu_, F.selu),
                         (F.leaky_relu_, F.leaky_relu), (F.hardtanh_, F.hardtanh)):
        np.testing.assert_array_equal(np.asarray(alias(x)), np.asarray(plain(x)))
    np.testing.assert_array_equal(np.asarray(x), [-1.0, 0.5, 2.0])


def test_lazy_modules_initialize_eagerly_then_transform():
    lazy = nn.LazyLinear(2)
    funcgrad.manual_seed(3)
    eager = nn.Linear(4, 2)
    x = jnp.ones((3, 4))
    with pytest.raises(TypeError, match="first call of a lazy module .* must run eagerly"):
        funcgrad.jit(lambda v: lazy(v))(x)
    funcgrad.manual_seed(3)
    y = lazy(x)                        # the dry run draws what the eager constructor drew
    assert type(lazy) is nn.Linear and lazy.in_features == 4
    np.testing.assert_array_equal(np.asarray(lazy.weight), np.asarray(eager.weight))
    g = funcgrad.grad(lambda m: jnp.sum(m(x)))(lazy)
    np.testing.assert_allclose(np.asarray(g.weight), 3.0)
    np.testing.assert_array_equal(np.asarray(funcgrad.jit(lambda m, v: m(v))(lazy, x)),
                                  np.asarray(y))
    assert list(lazy.state_dict()) == ["weight", "bias"]
    conv = nn.LazyConv1d(5, 3)
    assert conv(jnp.ones((4, 7))).shape == (5, 5) and conv.in_channels == 4   # unbatched
    with pytest.raises(ValueError, match="expected a 2-d or 3-d input"):
        nn.LazyConv1d(5, 3)(jnp.ones(4))


def test_sync_batchnorm_over_a_vmapped_axis_is_batchnorm_of_the_whole_batch():
    rng = np.random.default_rng(1)
    shards = jnp.asarray(rng.standard_normal((4, 3, 2, 5)).astype("float32"))  # 4 replicas
    sync = nn.SyncBatchNorm(2, axis_name="r", momentum=0.3)
    ref = nn.BatchNorm1d(2, momentum=0.3)
    for m in (sync, ref):
        m.load_state_dict({"weight": np.array([1.5, 0.5], np.float32),
                           "bias": np.array([0.1, -0.2], np.float32),
                           "running_mean": np.zeros(2, np.float32),
                           "running_var": np.ones(2, np.float32),
                           "num_batches_tracked": np.array(0)})
    whole = shards.reshape(12, 2, 5)
    y = funcgrad.vmap(sync, axis_name="r")(shards)
    np.testing.assert_allclose(np.asarray(y.reshape(12, 2, 5)), np.asarray(ref(whole)),
                               atol=2e-6)
    np.testing.assert_allclose(np.asarray(sync.running_mean), np.asarray(ref.running_mean),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(sync.running_var), np.asarray(ref.running_var),
                               rtol=1e-5)
    # gradients flow across replicas as through one BatchNorm over the whole batch
    ct = jnp.asarray(rng.standard_normal((12, 2, 5)).astype("float32"))
    gs = funcgrad.grad(lambda s: jnp.sum(funcgrad.vmap(
        nn.SyncBatchNorm(2, axis_name="r", track_running_stats=False), axis_name="r")(s)
        .reshape(12, 2, 5) * ct))(shards)
    gw = funcgrad.grad(lambda w: jnp.sum(
        nn.BatchNorm1d(2, track_running_stats=False)(w) * ct))(whole)
    np.testing.assert_allclose(np.asarray(gs.reshape(12, 2, 5)), np.asarray(gw), atol=2e-5)
    net = nn.SyncBatchNorm.convert_sync_batchnorm(
        nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)), axis_name="r")
    assert type(net[1]) is nn.SyncBatchNorm and net[1].axis_name == "r"
    with pytest.raises(ValueError, match="pass axis_name="):
        nn.SyncBatchNorm(2, process_group=object())


def test_errors_name_the_function_and_shapes():
    with pytest.raises(ValueError, match=r"F.grid_sample: for input \(1, 1, 4, 4\) the grid"):
        F.grid_sample(jnp.ones((1, 1, 4, 4)), jnp.ones((1, 3, 3, 3)))
    with pytest.raises(IndexError, match="F.max_unpool2d: index 16 is out of range"):
        F.max_unpool2d(jnp.ones((1, 1, 1, 1)), jnp.array([[[[16]]]]), 2)
    with pytest.raises(IndexError, match="F.embedding_bag: index 10 is out of range"):
        F.embedding_bag(jnp.array([[10]]), jnp.ones((10, 2)))
    with pytest.raises(ValueError, match="F.channel_shuffle: the number of channels"):
        F.channel_shuffle(jnp.ones((1, 5, 2)), 2)
    with pytest.raises(ValueError, match="F.ctc_loss: input_lengths"):
        F.ctc_loss(jnp.zeros((3, 1, 4)), jnp.array([[1]]), [5], [1])
    with pytest.raises(IndexError, match="F.multi_margin_loss: target 7 is out of range"):
        F.multi_margin_loss(jnp.ones((1, 3)), jnp.array([7]))


_PMAP_SYNC_BN = """
import numpy as np
import funcgrad, funcgrad.numpy as jnp, funcgrad.nn as nn
assert funcgrad.device_count() == 4
x = np.random.default_rng(2).standard_normal((4, 6, 3)).astype("float32")   # 4 devices
sync = nn.SyncBatchNorm(3, axis_name="d", momentum=0.5)
step = funcgrad.pmap(lambda m, v: (m(v), m.running_mean, m.running_var), axis_name="d",
                     in_axes=(None, 0))
y, rm, rv = step(sync, x)
ref = nn.BatchNorm1d(3, momentum=0.5)
want = ref(jnp.asarray(x.reshape(24, 3)))
np.testing.assert_allclose(np.asarray(y).reshape(24, 3), np.asarray(want), atol=2e-6)
# every replica computed the global running statistics (pmap returns them; docs/nn.md)
for got, exp in ((rm, ref.running_mean), (rv, ref.running_var)):
    np.testing.assert_allclose(np.asarray(got), np.tile(np.asarray(exp), (4, 1)), rtol=1e-5)
print("OK")
"""


def test_sync_batchnorm_under_pmap_on_four_devices():
    import os
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, FUNCGRAD_CPU_DEVICES="4", FUNCGRAD_PLATFORM="cpu", PYTHONPATH=repo)
    proc = subprocess.run([sys.executable, "-c", _PMAP_SYNC_BN], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-3000:]
