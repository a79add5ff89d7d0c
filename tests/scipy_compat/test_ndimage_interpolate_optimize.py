"""funcgrad.scipy.ndimage.map_coordinates, interpolate.RegularGridInterpolator and
optimize.minimize(method="BFGS") against SciPy (float64), with jit, vmap and grad."""
import numpy as np
import pytest
import scipy.interpolate as si
import scipy.ndimage as snd
import scipy.optimize as so

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.scipy import ndimage, optimize
from funcgrad.scipy.interpolate import RegularGridInterpolator

RNG = np.random.default_rng(0)
IMG = RNG.normal(size=(5, 6))
COORDS = [RNG.uniform(-3, 8, size=60), RNG.uniform(-3, 9, size=60)]


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("mode", ["constant", "nearest", "mirror", "reflect", "grid-wrap",
                                  "grid-constant", "grid-mirror"])
def test_map_coordinates_matches_scipy(x64, order, mode):
    got = ndimage.map_coordinates(IMG, COORDS, order, mode=mode, cval=1.5)
    want = snd.map_coordinates(IMG, COORDS, order=order, mode=mode, cval=1.5)
    np.testing.assert_allclose(np.asarray(got), want, atol=1e-12)


def test_map_coordinates_wrap_is_jax_periodic(x64):
    # JAX's 'wrap' has period n, which is SciPy's 'grid-wrap'
    np.testing.assert_allclose(np.asarray(ndimage.map_coordinates(IMG, COORDS, 1, mode="wrap")),
                               snd.map_coordinates(IMG, COORDS, order=1, mode="grid-wrap"),
                               atol=1e-12)


def test_map_coordinates_3d_transforms_and_errors(x64):
    vol = RNG.normal(size=(4, 3, 5))
    c = [RNG.uniform(0, 3, (2, 7)), RNG.uniform(0, 2, (2, 7)), RNG.uniform(0, 4, (2, 7))]
    np.testing.assert_allclose(np.asarray(ndimage.map_coordinates(vol, c, 1)),
                               snd.map_coordinates(vol, c, order=1), atol=1e-12)
    f = funcgrad.jit(funcgrad.vmap(lambda r, cc: ndimage.map_coordinates(
        IMG, [r, cc], 1, mode="nearest")))
    rows = RNG.uniform(0, 4, (3, 5))
    cols = RNG.uniform(0, 5, (3, 5))
    np.testing.assert_allclose(np.asarray(f(rows, cols)),
                               snd.map_coordinates(IMG, [rows, cols], order=1, mode="nearest"),
                               atol=1e-12)
    # linear interpolation along one axis: d/dc = the difference of neighbouring samples
    g = funcgrad.grad(lambda r: ndimage.map_coordinates(IMG, [r, jnp.array(2.0)], 1))(1.3)
    np.testing.assert_allclose(float(g), IMG[2, 2] - IMG[1, 2], rtol=1e-12)
    ints = np.arange(12).reshape(3, 4)
    got = ndimage.map_coordinates(ints, [np.array([0.5, 1.0]), np.array([1.0, 2.5])], 1)
    np.testing.assert_array_equal(np.asarray(got), snd.map_coordinates(
        ints, [np.array([0.5, 1.0]), np.array([1.0, 2.5])], order=1))
    with pytest.raises(ValueError, match="map_coordinates: order must be 0 or 1"):
        ndimage.map_coordinates(IMG, COORDS, 3)
    with pytest.raises(ValueError, match="one coordinate array per dimension"):
        ndimage.map_coordinates(IMG, COORDS[:1], 1)


XS, YS = np.sort(RNG.uniform(0, 5, 6)), np.sort(RNG.uniform(-1, 1, 4))
VALS = RNG.normal(size=(6, 4))
QUERIES = np.c_[RNG.uniform(-0.5, 5.5, 40), RNG.uniform(-1.2, 1.2, 40)]


@pytest.mark.parametrize("method", ["linear", "nearest"])
@pytest.mark.parametrize("fill_value", [np.nan, None, 0.5])
def test_regular_grid_interpolator_matches_scipy(x64, method, fill_value):
    ours = RegularGridInterpolator((XS, YS), VALS, method, fill_value=fill_value)
    ref = si.RegularGridInterpolator((XS, YS), VALS, method, bounds_error=False,
                                     fill_value=fill_value)
    np.testing.assert_allclose(np.asarray(ours(QUERIES)), ref(QUERIES), atol=1e-12)


def test_regular_grid_interpolator_more(x64):
    vals = RNG.normal(size=(6, 4, 2))             # trailing value axis
    ours = RegularGridInterpolator((XS, YS), vals)
    ref = si.RegularGridInterpolator((XS, YS), vals)
    inside = np.c_[RNG.uniform(XS[0], XS[-1], 9), RNG.uniform(YS[0], YS[-1], 9)].reshape(3, 3, 2)
    np.testing.assert_allclose(np.asarray(ours(inside)), ref(inside), atol=1e-12)
    interp = RegularGridInterpolator((XS, YS), VALS)
    # a pytree: jit takes the interpolator, grad differentiates through its values
    got = funcgrad.jit(lambda f, q: f(q))(interp, inside)
    np.testing.assert_allclose(np.asarray(got), si.RegularGridInterpolator((XS, YS), VALS)(
        inside), atol=1e-12)
    g = funcgrad.grad(lambda v: jnp.sum(RegularGridInterpolator((XS, YS), v)(inside)))(VALS)
    eps = 1e-6
    bump = np.zeros_like(VALS)
    bump[2, 1] = eps
    fd = (si.RegularGridInterpolator((XS, YS), VALS + bump)(inside).sum()
          - si.RegularGridInterpolator((XS, YS), VALS - bump)(inside).sum()) / (2 * eps)
    np.testing.assert_allclose(float(np.asarray(g)[2, 1]), fd, atol=1e-8)
    with pytest.raises(ValueError, match="queries must have shape"):
        interp(np.ones((3, 3)))
    with pytest.raises(ValueError, match="bounds_error=True is not supported"):
        RegularGridInterpolator((XS, YS), VALS, bounds_error=True)


def _rosen(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


@pytest.mark.parametrize("x0", [np.zeros(2), np.array([-1.2, 1.0]), np.full(4, 0.5)])
def test_minimize_bfgs_rosenbrock(x64, x0):
    res = optimize.minimize(_rosen, x0, method="BFGS")
    ref = so.minimize(so.rosen, x0, method="BFGS")
    assert bool(res.success) and int(res.status) == 0
    np.testing.assert_allclose(np.asarray(res.x), ref.x, atol=2e-5)
    np.testing.assert_allclose(np.asarray(res.x), np.ones_like(x0), atol=1e-5)
    assert float(res.fun) < 1e-10 and np.abs(np.asarray(res.jac)).max() <= 1e-5
    assert 0 < int(res.nit) < 200 and int(res.nfev) >= int(res.nit)


def test_minimize_quadratic_args_jit_vmap(x64):
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, -1.0])
    res = optimize.minimize(lambda x, a, b: 0.5 * x @ a @ x - b @ x, np.zeros(2),
                            (jnp.asarray(a), jnp.asarray(b)), method="BFGS")
    np.testing.assert_allclose(np.asarray(res.x), np.linalg.solve(a, b), atol=1e-7)
    np.testing.assert_allclose(np.asarray(res.hess_inv), np.linalg.inv(a), atol=0.02)
    starts = np.array([[0.0, 0.0], [-1.2, 1.0], [2.0, 2.0]])
    xs = funcgrad.jit(funcgrad.vmap(lambda x0: optimize.minimize(_rosen, x0,
                                                                 method="BFGS").x))(starts)
    np.testing.assert_allclose(np.asarray(xs), np.ones((3, 2)), atol=1e-5)
    capped = optimize.minimize(_rosen, np.array([-1.2, 1.0]), method="BFGS",
                               options={"maxiter": 3})
    assert int(capped.status) == 1 and not bool(capped.success) and int(capped.nit) == 3
    with pytest.raises(ValueError, match="minimize: method must be 'BFGS'"):
        optimize.minimize(_rosen, np.zeros(2), method="Nelder-Mead")
    with pytest.raises(ValueError, match="x0 must be 1-d"):
        optimize.minimize(_rosen, np.zeros((2, 2)), method="BFGS")


def test_minimize_float32():
    res = optimize.minimize(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros(3), method="bfgs")
    assert res.x.dtype == np.float32
    np.testing.assert_allclose(np.asarray(res.x), 3.0, atol=1e-5)
