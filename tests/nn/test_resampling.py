"""F.interpolate / nn.Upsample, pixel (un)shuffle and PReLU: hand-computed values, a linear
ramp (which linear interpolation must reproduce), gradients against finite differences, and
PyTorch when it is installed."""
import numpy as np
import pytest

import funcgrad
import funcgrad.nn as nn
import funcgrad.nn.functional as F
import funcgrad.numpy as jnp


def test_nearest_and_linear_hand_values():
    x = jnp.asarray(np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3))
    up = np.asarray(F.interpolate(x, scale_factor=2))
    np.testing.assert_array_equal(up[0, 0], np.repeat(np.repeat(np.asarray(x)[0, 0], 2, 0), 2, 1))
    line = jnp.asarray(np.array([[[0.0, 1.0]]], np.float32))
    np.testing.assert_allclose(np.asarray(F.interpolate(line, scale_factor=2, mode="linear"))[0, 0],
                               [0.0, 0.25, 0.75, 1.0])
    np.testing.assert_allclose(
        np.asarray(F.interpolate(line, size=5, mode="linear", align_corners=True))[0, 0],
        [0.0, 0.25, 0.5, 0.75, 1.0])
    # nearest keeps integer dtypes; the linear modes refuse them
    ints = F.interpolate(jnp.arange(4).reshape(1, 1, 4), size=2)
    assert ints.dtype == jnp.int32 and np.asarray(ints).tolist() == [[[0, 2]]]
    with pytest.raises(TypeError, match="floating-point"):
        F.interpolate(jnp.arange(4).reshape(1, 1, 4), size=2, mode="linear")


def test_bilinear_align_corners_reproduces_a_ramp():
    h, w = np.meshgrid(np.arange(4.0), np.arange(5.0), indexing="ij")
    x = jnp.asarray((2 * h - 3 * w)[None, None].astype(np.float32))
    out = np.asarray(F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True))[0, 0]
    hh, ww = np.meshgrid(np.linspace(0, 3, 7), np.linspace(0, 4, 9), indexing="ij")
    np.testing.assert_allclose(out, 2 * hh - 3 * ww, atol=1e-5)


def test_interpolate_errors():
    x = jnp.ones((1, 2, 4, 4))
    with pytest.raises(ValueError, match="exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(ValueError, match="mode 'linear' needs a 3-d input"):
        F.interpolate(x, size=3, mode="linear")
    with pytest.raises(ValueError, match="align_corners only applies"):
        F.interpolate(x, size=3, align_corners=True)
    with pytest.raises(ValueError, match="not divisible"):
        F.pixel_shuffle(jnp.ones((1, 3, 2, 2)), 2)


def test_interpolate_and_prelu_gradients_match_finite_differences(x64, rng):
    x = rng.standard_normal((1, 2, 3, 4))
    w = rng.standard_normal(2)

    def f(a, b):
        up = F.interpolate(a, scale_factor=(1.5, 2.0), mode="bilinear", align_corners=False)
        return jnp.sum(jnp.sin(F.prelu(up, b)))
    gx, gw = funcgrad.grad(f, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    eps = 1e-6
    for arr, g, i in ((x, gx, 0), (w, gw, 1)):
        for idx in list(np.ndindex(arr.shape))[::5]:
            d = np.zeros_like(arr)
            d[idx] = eps
            args_p, args_m = [x, w], [x, w]
            args_p[i], args_m[i] = arr + d, arr - d
            fd = (float(f(*map(jnp.asarray, args_p))) - float(f(*map(jnp.asarray, args_m)))) / 2e-6
            np.testing.assert_allclose(np.asarray(g)[idx], fd, rtol=1e-6, atol=1e-8)


def test_modules_and_pixel_shuffle_round_trip(rng):
    y = jnp.asarray(rng.standard_normal((2, 8, 3, 3)).astype(np.float32))
    s = nn.PixelShuffle(2)(y)
    assert s.shape == (2, 2, 6, 6)
    # output channel c at (2h + i, 2w + j) comes from input channel 4c + 2i + j
    np.testing.assert_array_equal(np.asarray(s)[:, 1, 2 * 1 + 1, 2 * 2 + 0],
                                  np.asarray(y)[:, 4 * 1 + 2 * 1 + 0, 1, 2])
    np.testing.assert_array_equal(np.asarray(nn.PixelUnshuffle(2)(s)), np.asarray(y))
    act = nn.PReLU(8)
    assert list(act.state_dict()) == ["weight"] and act.weight.shape == (8,)
    np.testing.assert_allclose(np.asarray(act(y)), np.where(np.asarray(y) >= 0, np.asarray(y),
                                                            0.25 * np.asarray(y)))
    assert nn.UpsamplingBilinear2d(scale_factor=2)(y).shape == (2, 8, 6, 6)
    assert "scale_factor=2, mode='nearest'" in repr(nn.Upsample(scale_factor=2))


def test_match_torch(rng):
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((2, 3, 5, 7)).astype(np.float32)
    cases = [dict(size=(9, 4)), dict(scale_factor=1.7), dict(size=(9, 13), mode="nearest-exact"),
             dict(scale_factor=(2.5, 0.6), mode="bilinear", align_corners=False),
             dict(size=(9, 4), mode="bilinear", align_corners=True),
             dict(scale_factor=3, mode="bilinear", recompute_scale_factor=True)]
    for kw in cases:
        want = torch.nn.functional.interpolate(torch.tensor(x), **kw).numpy()
        np.testing.assert_allclose(np.asarray(F.interpolate(jnp.asarray(x), **kw)), want,
                                   rtol=1e-5, atol=2e-6)
    x3 = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(F.interpolate(jnp.asarray(x3), scale_factor=2, mode="trilinear")),
        torch.nn.functional.interpolate(torch.tensor(x3), scale_factor=2,
                                        mode="trilinear").numpy(), rtol=1e-5, atol=2e-6)
    y = rng.standard_normal((2, 8, 3, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(F.pixel_shuffle(jnp.asarray(y), 2)),
                                  torch.nn.functional.pixel_shuffle(torch.tensor(y), 2).numpy())
    w = rng.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(np.asarray(F.prelu(jnp.asarray(x), jnp.asarray(w))),
                               torch.nn.functional.prelu(torch.tensor(x), torch.tensor(w)).numpy())
