"""Reference values of the ``jax.lax`` names funcgrad adds (shape arithmetic, decomposed
primitives, implicit solvers, patches, ragged products, XLA's bit generator...).

``cases(fw)`` computes every case with ``fw`` = the ``jax`` or the ``funcgrad`` module (the
same code runs on both), so ``tests/lax/test_jax_names.py`` compares funcgrad with the values
stored from JAX, and with JAX itself when it is installed.

Usage (with jax installed):
    python tools/lax_reference.py      # rewrite tests/lax/data/jax_lax_reference.json
"""
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "lax" / "data" / "jax_lax_reference.json"


def _np(x):
    return np.asarray(x).tolist()


def cases(fw, images=True):
    """{case name: nested lists} computed with the library ``fw`` (jax or funcgrad); the
    ``image_*`` cases of ``image_cases`` too unless ``images=False``."""
    lax, jnp = fw.lax, fw.numpy
    rng = np.random.default_rng(0)
    out = {}

    # shape arithmetic
    conv_cases = [((1, 28, 28, 3), (5, 5, 3, 8), (2, 2), "SAME", ("NHWC", "HWIO", "NHWC")),
                  ((1, 3, 9, 9), (4, 3, 3, 3), (2, 2), "VALID", ("NCHW", "OIHW", "NCHW")),
                  ((2, 3, 10, 11), (4, 3, 3, 2), (3, 1), [(1, 2), (0, 1)],
                   ("NCHW", "OIHW", "NCHW")),
                  ((2, 7, 3), (5, 3, 4), (2,), "SAME", ("NWC", "WIO", "NWC")),
                  ((2, 7, 3, 6), (5, 2, 3, 4), (2, 3), "VALID", ("NHWC", "HWIO", "NCHW"))]
    for i, (lhs, rhs, st, pad, dn) in enumerate(conv_cases):
        out[f"conv_general_shape_tuple_{i}"] = list(map(int, lax.conv_general_shape_tuple(
            lhs, rhs, st, pad, dn)))
        out[f"conv_transpose_shape_tuple_{i}"] = list(map(int, lax.conv_transpose_shape_tuple(
            lhs, rhs, st, pad, dn)))
    for i, dn in enumerate([("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"),
                            ("NWHC", "WHOI", "CHWN")]):
        out[f"conv_general_permutations_{i}"] = [list(map(int, p)) for p in
                                                 lax.conv_general_permutations(dn)]
    out["conv_shape_tuple"] = list(map(int, lax.conv_shape_tuple(
        (4, 3, 10, 10), (8, 3, 3, 3), (1, 2), [(1, 1), (0, 0)], 2)))
    for i, args in enumerate([((10, 7), (3, 2), (2, 1), [(1, 1), (0, 0)]),
                              ((10, 7), (3, 2), (2, 3), [(0, 2), (1, 0)], (2, 1), (1, 3)),
                              ((4,), (5,), (1,), [(0, 0)])]):
        out[f"reduce_window_shape_tuple_{i}"] = list(map(int,
                                                         lax.reduce_window_shape_tuple(*args)))
    for i, shapes in enumerate([((3, 1), (4,), (1, 1, 1)), ((), (2, 3)), ((0, 1), (1, 5))]):
        out[f"broadcast_shapes_{i}"] = list(map(int, lax.broadcast_shapes(*shapes)))
    for mode in ("SAME", "SAME_LOWER", "VALID"):
        out[f"padtype_to_pads_{mode}"] = [list(map(int, p)) for p in lax.padtype_to_pads(
            (10, 11), (3, 4), (2, 3), mode)]

    # elementwise
    x = rng.uniform(-3, 3, 11).astype(np.float32)
    pos = rng.uniform(0.3, 4, 11).astype(np.float32)
    out["exp2"] = _np(lax.exp2(x))
    out["square"] = _np(lax.square(x))
    out["bessel_i0e"] = _np(lax.bessel_i0e(x))
    out["reduce_precision_bf16"] = _np(lax.reduce_precision(x * 1000.0, 8, 7))
    out["reduce_precision_f16"] = _np(lax.reduce_precision(x * 1e5, 5, 10))
    out["igamma_grad_a"] = _np(lax.igamma_grad_a(pos, pos[::-1].copy()))
    out["random_gamma_grad"] = _np(lax.random_gamma_grad(pos, pos[::-1].copy()))
    out["betainc"] = _np(lax.betainc(pos, pos[::-1].copy(),
                                     rng.uniform(0, 1, 11).astype(np.float32)))
    for dt in ("int8", "uint8", "int16", "int32", "uint32"):
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, 9, dtype=dt, endpoint=True)
        b = rng.integers(info.min, info.max, 9, dtype=dt, endpoint=True)
        out[f"mulhi_{dt}"] = _np(lax.mulhi(a, b))

    # structural
    m = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    out["tile"] = _np(lax.tile(m[0], (2, 3)))
    out["stack"] = _np(lax.stack([m[0], m[1]], axis=1))
    out["unstack"] = [_np(v) for v in lax.unstack(m, axis=2)]
    out["collapse"] = _np(lax.collapse(m, 1))
    out["index_take"] = _np(lax.index_take(m, (np.array([0, 1, -1]), np.array([2, 0, 5])),
                                           (0, 2)))
    out["dynamic_slice_in_dim"] = _np(lax.dynamic_slice_in_dim(m, -2, 2, axis=2))
    out["dynamic_update_slice_in_dim"] = _np(lax.dynamic_update_slice_in_dim(
        m, np.ones((2, 1, 4), np.float32), -1, 1))
    out["dynamic_update_index_in_dim"] = _np(lax.dynamic_update_index_in_dim(
        m, np.ones((2, 3), np.float32), 3, 2))
    out["broadcast_like"] = _np(lax.broadcast_like(np.arange(4.0, dtype=np.float32), m))
    out["full_like"] = _np(lax.full_like(m, 2.5))
    out["batch_matmul"] = _np(lax.batch_matmul(m, np.transpose(m, (0, 2, 1))))
    vals, idx = lax.approx_max_k(x.reshape(1, 11), 3)
    out["approx_max_k"] = [_np(vals), _np(idx)]
    vals, idx = lax.approx_min_k(x.reshape(11, 1), 2, reduction_dimension=0)
    out["approx_min_k"] = [_np(vals), _np(idx)]
    out["reduce_prod"] = _np(lax.reduce(m / 10.0, np.float32(1.0), lax.mul, (0, 2)))

    def keep_larger(a, b):
        take = a[0] >= b[0]
        return lax.select(take, a[0], b[0]), lax.select(take, a[1], b[1])
    v, i = lax.reduce((x.reshape(1, 11), np.arange(11, dtype=np.int32).reshape(1, 11)),
                      (np.float32(-np.inf), np.int32(0)), keep_larger, (1,))
    out["reduce_argmax"] = [_np(v), _np(i)]
    xw = rng.normal(size=(5, 6)).astype(np.float32)
    out["reduce_window_prod"] = _np(lax.reduce_window(xw, np.float32(1.0), lax.mul, (2, 3),
                                                      (1, 2), "SAME"))
    out["reduce_window_add_init"] = _np(lax.reduce_window(xw, np.float32(1.5), lax.add, (2, 2),
                                                          (2, 2), "VALID"))
    v, i = lax.reduce_window((xw, np.tile(np.arange(6, dtype=np.int32), (5, 1))),
                             (np.float32(-np.inf), np.int32(0)), keep_larger, (1, 3), (1, 3),
                             "VALID")
    out["reduce_window_argmax"] = [_np(v), _np(i)]

    # implicit solvers
    A = np.array([[4.0, 1.0, 0.5], [2.0, 3.0, 0.0], [0.0, 1.0, 5.0]], np.float32)
    bvec = np.array([1.0, 2.0, 3.0], np.float32)

    def ls(A, b):
        return lax.custom_linear_solve(
            lambda v: A @ v, b, lambda mv, r: jnp.linalg.solve(A, r),
            transpose_solve=lambda vm, r: jnp.linalg.solve(A.T, r))
    out["custom_linear_solve"] = _np(ls(A, bvec))
    out["custom_linear_solve_grad_A"] = _np(fw.grad(lambda A: (ls(A, bvec) ** 2).sum())(A))
    out["custom_linear_solve_grad_b"] = _np(fw.grad(lambda b: (ls(A, b) ** 2).sum())(bvec))
    out["custom_linear_solve_jacfwd"] = _np(fw.jacfwd(lambda A: ls(A, bvec))(A))

    def newton(f, x0):
        xv = x0
        for _ in range(30):
            xv = xv - f(xv) / fw.grad(f)(xv)
        return xv

    def cube_root(a):
        return lax.custom_root(lambda y: y ** 3 - a, 1.0, newton, lambda g, y: y / g(1.0))
    out["custom_root"] = float(cube_root(5.0))
    out["custom_root_grad"] = float(fw.grad(cube_root)(5.0))
    out["custom_root_vmap_grad"] = _np(fw.vmap(fw.grad(cube_root))(np.array([2.0, 8.0],
                                                                             np.float32)))

    # convolutions built on conv_general_dilated
    xc = rng.normal(size=(2, 3, 7, 6)).astype(np.float32)
    out["conv_general_dilated_patches"] = _np(lax.conv_general_dilated_patches(
        xc, (3, 2), (2, 1), "SAME"))
    xh = np.transpose(xc, (0, 2, 3, 1))
    out["conv_general_dilated_patches_nhwc"] = _np(lax.conv_general_dilated_patches(
        xh, (2, 3), (1, 2), [(1, 0), (0, 2)], rhs_dilation=(2, 1),
        dimension_numbers=("NHWC", "HWIO", "NHWC")))
    w = rng.normal(size=(4, 18, 3, 5)).astype(np.float32)
    out["conv_general_dilated_local"] = _np(lax.conv_general_dilated_local(
        xc, w, (2, 1), "VALID", (3, 2)))

    # ragged products
    lhs = rng.normal(size=(7, 3)).astype(np.float32)
    rhs = rng.normal(size=(3, 3, 4)).astype(np.float32)
    gs = np.array([2, 0, 4], np.int32)
    out["ragged_dot"] = _np(lax.ragged_dot(lhs, rhs, gs))
    out["ragged_dot_grad"] = _np(fw.grad(lambda r: (lax.ragged_dot(lhs, r, gs) ** 2).sum())(rhs))
    l2 = rng.normal(size=(2, 5, 6)).astype(np.float32)
    r2 = rng.normal(size=(2, 6, 3)).astype(np.float32)
    dn2 = lax.RaggedDotDimensionNumbers((((2,), (1,)), ((0,), (0,))), (2,), ())
    out["ragged_dot_general_contracting"] = _np(lax.ragged_dot_general(
        l2, r2, np.array([1, 3, 2], np.int32), dn2))
    r1 = rng.normal(size=(3, 2, 6, 4)).astype(np.float32)
    dn1 = lax.RaggedDotDimensionNumbers((((2,), (2,)), ((0,), (1,))), (1,), (0,))
    out["ragged_dot_general_batched"] = _np(lax.ragged_dot_general(
        l2, r1, np.array([1, 3, 1], np.int32), dn1))

    # XLA's bit generator
    key = np.array([1, 2, 3, 4], np.uint32)
    for alg in (0, 1, 2):
        for dt in ("uint8", "uint16", "uint32"):
            k, bits = lax.rng_bit_generator(key, (2, 3), np.dtype(dt),
                                            lax.RandomAlgorithm(alg))
            out[f"rng_bit_generator_{alg}_{dt}"] = [_np(k), _np(bits)]
    k, bits = fw.jit(lambda k: lax.rng_bit_generator(k, (5,)))(key)
    out["rng_bit_generator_jit"] = [_np(k), _np(bits)]
    if images:
        out.update(image_cases(fw))
    return out


def image_cases(fw):
    """``resize`` and ``scale_and_translate`` of ``fw.image`` for every method."""
    import importlib
    image = importlib.import_module(fw.__name__ + ".image")
    rng = np.random.default_rng(1)
    img = rng.uniform(0, 1, (2, 9, 7, 3)).astype(np.float32)
    out = {}
    for method in ("nearest", "linear", "lanczos3", "lanczos5", "cubic", "cubic-pytorch",
                   "area"):
        for shape in ((2, 4, 12, 3), (2, 17, 5, 3)):
            for antialias in (True, False):
                key = f"image_resize_{method}_{shape[1]}x{shape[2]}_{antialias}"
                out[key] = _np(image.resize(img, shape, method, antialias=antialias))
    out["image_resize_int_nearest"] = _np(image.resize(np.arange(6, dtype=np.int32).reshape(2, 3),
                                                       (4, 5), "nearest"))
    scale, trans = np.array([1.7, 0.6], np.float32), np.array([-2.0, 1.5], np.float32)
    for method in ("linear", "cubic", "lanczos3", "area"):
        out[f"image_scale_and_translate_{method}"] = _np(image.scale_and_translate(
            img, (2, 11, 6, 3), (1, 2), scale, trans, method))
    out["image_scale_and_translate_grad"] = _np(fw.grad(
        lambda s: (image.scale_and_translate(img, (2, 11, 6, 3), (1, 2), s, trans, "linear")
                   ** 2).sum())(scale))
    return out


def main():
    import jax
    jax.config.update("jax_platforms", "cpu")
    data = {"jax_version": jax.__version__, "cases": cases(jax)}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(data['cases'])} cases, jax {jax.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
