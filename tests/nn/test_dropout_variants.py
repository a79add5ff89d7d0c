"""Channel-wise dropout (``Dropout1d/2d/3d``, ``F.dropout1d/2d/3d``) and SELU dropout
(``AlphaDropout``, ``FeatureAlphaDropout``, ``F.alpha_dropout``, ``F.feature_alpha_dropout``).

PyTorch draws different random numbers, so the checks are statistical (fraction of dropped
channels within ~5 binomial standard deviations) and structural (whole channels dropped, the
exact kept/dropped values from the closed form); with PyTorch installed, its outputs are
checked to take exactly the same two kinds of values as ours (same scale, same SELU
constants).
"""
import math
import warnings

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
import funcgrad.nn as nn
import funcgrad.nn.functional as F

P = 0.3
SELU_NEG = 1.0507009873554805 * 1.6732632423543772      # scale * alpha of SELU


def _alpha_consts(p):
    a = 1.0 / math.sqrt((SELU_NEG ** 2 * p + 1.0) * (1.0 - p))
    return a, a * SELU_NEG * p, a * SELU_NEG * (p - 1.0)      # scale, kept shift, dropped value


def _check_channels(y, x, p, channel_axes):
    """Every channel (index over the first ``channel_axes`` axes) is all zero or all
    x / (1 - p); returns the fraction of dropped channels."""
    y, x = np.asarray(y), np.asarray(x)
    lead = y.shape[:channel_axes]
    yc = y.reshape(lead + (-1,))
    xc = x.reshape(lead + (-1,))
    dropped = np.all(yc == 0, axis=-1)
    kept = np.all(np.isclose(yc, xc / (1 - p), rtol=1e-6), axis=-1)
    assert np.all(dropped | kept), "a channel is neither wholly dropped nor wholly kept"
    return dropped.mean()


def _frac_ok(frac, p, n):
    return abs(frac - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-9


# --- functional ------------------------------------------------------------------------------
@pytest.mark.parametrize("fn,shape,channel_axes", [
    (F.dropout1d, (8, 64, 5), 2),
    (F.dropout1d, (256, 5), 1),                 # unbatched (C, L)
    (F.dropout2d, (8, 64, 3, 2), 2),
    (F.dropout3d, (4, 64, 2, 2, 2), 2),
    (F.dropout3d, (256, 2, 2, 2), 1),           # unbatched (C, D, H, W)
])
def test_channel_dropout_drops_whole_channels(fn, shape, channel_axes):
    x = jnp.asarray(np.random.default_rng(0).uniform(0.5, 1.5, shape).astype("float32"))
    y = fn(x, P, True, key=7)
    assert y.shape == x.shape and y.dtype == x.dtype
    frac = _check_channels(y, x, P, channel_axes)
    assert _frac_ok(frac, P, int(np.prod(shape[:channel_axes])))
    # the same key gives the same mask, another key another mask
    np.testing.assert_array_equal(np.asarray(fn(x, P, True, key=7)), np.asarray(y))
    assert (np.asarray(fn(x, P, True, key=8)) != np.asarray(y)).any()
    # training=False and p=0 are the identity, p=1 zeroes everything
    np.testing.assert_array_equal(np.asarray(fn(x, P, False)), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(fn(x, 0.0, True)), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(fn(x, 1.0, True)), np.zeros(shape))


def test_channel_dropout_rank_rules():
    with pytest.raises(ValueError, match=r"dropout1d.*\(2, 3, 4, 5\)"):
        F.dropout1d(jnp.ones((2, 3, 4, 5)), 0.5)
    with pytest.raises(ValueError, match="p must be in"):
        F.dropout2d(jnp.ones((2, 3, 4, 5)), 1.5)
    x = jnp.ones((4, 64, 6))
    with pytest.warns(UserWarning, match=r"\(N, C, L\)"):        # PyTorch 2.x reading
        y = F.dropout2d(x, P, key=1)
    assert _frac_ok(_check_channels(y, x, P, 2), P, 256)
    with pytest.warns(UserWarning, match="dropout3d"):
        y = F.dropout3d(jnp.ones((300, 4)), P, key=2)              # unbatched (C, L)
    assert _frac_ok(_check_channels(y, jnp.ones((300, 4)), P, 1), P, 300)


def test_f_dropout_without_key_draws_from_manual_seed():
    x = jnp.ones((16, 32, 4))
    funcgrad.manual_seed(5)
    a = np.asarray(F.dropout1d(x, 0.5))
    funcgrad.manual_seed(5)
    b = np.asarray(F.dropout1d(x, 0.5))
    np.testing.assert_array_equal(a, b)
    assert (np.asarray(F.dropout1d(x, 0.5)) != a).any()


@pytest.mark.parametrize("channelwise", [False, True])
def test_alpha_dropout_closed_form_and_statistics(channelwise):
    p = 0.2
    rng = np.random.default_rng(1)
    shape = (64, 512, 4) if channelwise else (131072,)
    xn = rng.standard_normal(shape).astype("float32")
    fn = F.feature_alpha_dropout if channelwise else F.alpha_dropout
    y = np.asarray(fn(jnp.asarray(xn), p, True, key=3), np.float64)
    a, shift, drop = _alpha_consts(p)
    dropped = np.isclose(y, drop, rtol=1e-6, atol=1e-6)
    kept = np.isclose(y, a * xn + shift, rtol=1e-5, atol=1e-5)
    assert np.all(dropped | kept)
    if channelwise:                       # whole channels dropped together
        d = dropped.reshape(64, 512, 4)
        assert np.all(d.all(-1) | ~d.any(-1))
        assert _frac_ok(d[..., 0].mean(), p, 64 * 512)
    else:
        assert _frac_ok(dropped.mean(), p, y.size)
    # zero mean and unit variance are preserved for standard normal inputs
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1.0) < 0.02
    # PyTorch's defaults: training=False is the identity; p=1 gives zeros
    np.testing.assert_array_equal(np.asarray(fn(jnp.asarray(xn), p)), xn)
    assert not np.asarray(fn(jnp.asarray(xn), 1.0, True)).any()


def test_alpha_dropout_values_match_torch():
    torch = pytest.importorskip("torch")
    p = 0.35
    a, shift, drop = _alpha_consts(p)
    x = np.random.default_rng(2).standard_normal((8, 16, 3))
    t = torch.tensor(x)
    for tfn, channel in ((torch.nn.functional.alpha_dropout, False),
                         (torch.nn.functional.feature_alpha_dropout, True)):
        y = tfn(t, p, True).numpy()
        dropped = np.isclose(y, drop, rtol=1e-12, atol=1e-12)
        kept = np.isclose(y, a * x + shift, rtol=1e-12, atol=1e-12)
        assert np.all(dropped | kept) and dropped.any() and kept.any()
        if channel:
            assert np.all(dropped.all(-1) | ~dropped.any(-1))
    y = torch.nn.functional.dropout2d(torch.ones(4, 32, 3, 3), P, True).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / (1 - P))}


# --- modules -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,shape,channel_axes", [
    (nn.Dropout1d, (8, 48, 5), 2),
    (nn.Dropout2d, (8, 48, 2, 3), 2),
    (nn.Dropout3d, (4, 48, 2, 1, 3), 2),
])
def test_channel_dropout_modules(cls, shape, channel_axes):
    funcgrad.manual_seed(11)
    d = cls(P)
    assert repr(d) == f"{cls.__name__}(p={P}, inplace=False)"
    x = jnp.ones(shape)
    c0 = float(d.rng_counter)
    y1, y2 = np.asarray(d(x)), np.asarray(d(x))
    assert float(d.rng_counter) == c0 + 2 and (y1 != y2).any()       # fresh mask per call
    n = int(np.prod(shape[:channel_axes]))
    assert _frac_ok(_check_channels(y1, x, P, channel_axes), P, n)
    # the module's mask is F's mask keyed by its counter
    np.testing.assert_array_equal(
        y1, np.asarray(getattr(F, cls.__name__.lower())(x, P, True, key=jnp.asarray(c0))))

    # under jit: one trace, the counter advances through the compiled step exactly as eagerly
    f = funcgrad.jit(lambda m, x: m(x))
    c1 = float(d.rng_counter)
    j1, j2 = np.asarray(f(d, x)), np.asarray(f(d, x))
    assert f.trace_count == 1 and float(d.rng_counter) == c1 + 2 and (j1 != j2).any()
    np.testing.assert_array_equal(
        j1, np.asarray(getattr(F, cls.__name__.lower())(x, P, True, key=jnp.asarray(c1))))
    _check_channels(j2, x, P, channel_axes)

    # under grad: d/dx sum(w * drop(x)) = w * mask / (1 - p), the mask of that same call
    w = jnp.asarray(np.random.default_rng(0).standard_normal(shape).astype("float32"))
    (_, y), g = _grad_with_output(d, x, w)
    np.testing.assert_allclose(np.asarray(g), np.asarray(w) * np.asarray(y), rtol=1e-6)

    # eval mode is the identity
    d.eval()
    np.testing.assert_array_equal(np.asarray(d(x)), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(f(d, x)), np.asarray(x))
    assert "rng_counter" not in d.state_dict()


def _grad_with_output(d, x, w):
    """(loss, dropout output of the same call), d loss / dx for loss = sum(w * d(x)) with x of
    ones (so the output is the scaled mask)."""
    def loss(x):
        y = d(x)
        return jnp.sum(w * y), y
    (val, y), g = funcgrad.value_and_grad(loss, has_aux=True)(x)
    return (val, y), g


@pytest.mark.parametrize("cls", [nn.AlphaDropout, nn.FeatureAlphaDropout])
def test_alpha_dropout_modules(cls):
    p = 0.25
    d = cls(p)
    assert repr(d) == f"{cls.__name__}(p={p}, inplace=False)"
    x = jnp.asarray(np.random.default_rng(4).standard_normal((16, 64, 8)).astype("float32"))
    a, shift, drop = _alpha_consts(p)
    f = funcgrad.jit(lambda m, x: m(x))
    y1, y2 = np.asarray(f(d, x)), np.asarray(f(d, x))
    assert (y1 != y2).any()
    for y in (y1, y2, np.asarray(d(x))):
        dropped = np.isclose(y, drop, rtol=1e-6, atol=1e-6)
        assert np.all(dropped | np.isclose(y, a * np.asarray(x) + shift, rtol=1e-5, atol=1e-5))
        assert _frac_ok(dropped.mean(), p, y.size if cls is nn.AlphaDropout else 16 * 64)
        if cls is nn.FeatureAlphaDropout:
            assert np.all(dropped.all(-1) | ~dropped.any(-1))
    # gradient is a on kept elements, 0 on dropped ones (from the same call's mask)
    (_, y), g = _grad_with_output(d, x, jnp.ones(x.shape))
    kept = ~np.isclose(np.asarray(y), drop, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g), np.where(kept, a, 0.0), rtol=1e-6)
    d.eval()
    np.testing.assert_array_equal(np.asarray(d(x)), np.asarray(x))


def test_dropout_variants_in_a_jitted_training_step():
    funcgrad.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.Dropout2d(0.5), nn.SELU(),
                          nn.Flatten(), nn.AlphaDropout(0.1), nn.Linear(8 * 16, 3))
    x = jnp.ones((4, 2, 4, 4))

    @funcgrad.jit
    def step(m, x):
        return funcgrad.value_and_grad(lambda m: jnp.sum(m(x) ** 2))(m)

    counters = [float(model[1].rng_counter), float(model[4].rng_counter)]
    l1, g1 = step(model, x)
    l2, g2 = step(model, x)
    assert step.trace_count == 1 and float(l1) != float(l2)
    assert [float(model[1].rng_counter), float(model[4].rng_counter)] == \
        [counters[0] + 2, counters[1] + 2]
    assert np.isfinite(np.asarray(g1[0].weight)).all()
    assert not np.allclose(np.asarray(g1[5].weight), np.asarray(g2[5].weight))
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        l3, _ = step(model, x)
        l4, _ = step(model, x)
    # eval mode: the dropout layers are the identity, so the loss is the plain network's
    plain = nn.Sequential(model[0], model[2], model[3], model[5])
    assert float(l3) == float(l4)
    np.testing.assert_allclose(float(l3), float(jnp.sum(plain(x) ** 2)), rtol=1e-5)
