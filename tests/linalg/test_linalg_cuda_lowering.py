"""The CUDA lowerings of funcgrad.lax.linalg, checked without a GPU.

* Lowered for platform 'cuda', each decomposition calls the cuSOLVER target with the attribute
  schema of jaxlib's handlers (registration is replaced by a recorder here).
* Cholesky and triangular solve lower to native StableHLO ops on CUDA; XLA:CPU runs those ops
  too, so the CUDA-lowered module is compiled for the CPU and checked against NumPy.
* The unpacking of real geev eigenvectors and the registration errors run on the CPU as well.
"""
import numpy as np
import pytest

import funcgrad
from funcgrad.core import errors
from funcgrad.lax import linalg as L
from funcgrad.lowering import cuda, executable, mlir
from funcgrad.lowering.cuda import CUSOLVER as linalg_gpu


@pytest.fixture
def fake_cusolver(monkeypatch):
    """Record the cuSOLVER targets that lowerings ask for instead of registering them."""
    seen = []
    monkeypatch.setattr(linalg_gpu, "ensure_registered",
                        lambda target, fn_name, platform: seen.append((target, fn_name)))
    return seen


def _lower(fn, *args, platform="cuda"):
    closed = funcgrad.make_jaxpr(fn)(*args)
    module, ctx = mlir.lower_closed_jaxpr(closed, platform=platform)
    with ctx:
        return closed, str(module)


def _custom_calls(text):
    """(target, backend_config) of every custom call in a module's text."""
    calls = []
    for line in text.splitlines():
        if "stablehlo.custom_call @" in line:
            target = line.split("stablehlo.custom_call @")[1].split("(")[0]
            config = line.split("backend_config = {")[1].split("}")[0]
            calls.append((target, config))
    return calls


F32 = np.float32
C64 = np.complex64

CASES = [
    # (name, function, operand shape, dtype, expected [(target, backend_config)])
    ("lu", L.lu, (2, 4, 3), F32, [("cusolver_getrf_ffi", "")]),
    ("qr_full", lambda x: L.qr(x, full_matrices=True), (5, 3), F32,
     [("cusolver_geqrf_ffi", ""), ("cusolver_orgqr_ffi", "")]),
    ("qr_complex", lambda x: L.qr(x, full_matrices=False), (3, 3), C64,
     [("cusolver_geqrf_ffi", ""), ("cusolver_orgqr_ffi", "")]),
    ("eigh_lower", lambda x: L.eigh(x, lower=True), (2, 3, 3), F32,
     [("cusolver_syevd_ffi", "algorithm = 0 : ui8, lower = true")]),
    ("eigh_upper", lambda x: L.eigh(x, lower=False), (3, 3), C64,
     [("cusolver_syevd_ffi", "algorithm = 0 : ui8, lower = false")]),
    ("svd_tall", lambda x: L.svd(x, full_matrices=False), (5, 3), F32,
     [("cusolver_gesvd_ffi", "compute_uv = true, full_matrices = false, transposed = false")]),
    ("svd_wide_full", lambda x: L.svd(x, full_matrices=True), (2, 3, 5), F32,
     [("cusolver_gesvd_ffi", "compute_uv = true, full_matrices = true, transposed = true")]),
    ("svd_values", lambda x: L.svd(x, compute_uv=False), (4, 4), F32,
     [("cusolver_gesvd_ffi", "compute_uv = false, full_matrices = true, transposed = false")]),
    ("eig_right", lambda x: L.eig(x, compute_left_eigenvectors=False), (3, 3), F32,
     [("cusolver_geev_ffi", "left = false, right = true")]),
    ("eig_values", lambda x: L.eig(x, compute_left_eigenvectors=False,
                                   compute_right_eigenvectors=False), (3, 3), C64,
     [("cusolver_geev_ffi", "left = false, right = false")]),
]


@pytest.mark.parametrize("name,fn,shape,dtype,expected", CASES, ids=[c[0] for c in CASES])
def test_cuda_lowering_calls_cusolver(fake_cusolver, name, fn, shape, dtype, expected):
    x = np.ones(shape, dtype)
    _, text = _lower(fn, x)
    assert _custom_calls(text) == expected
    assert [t for t, _ in fake_cusolver] == [t for t, _ in expected]
    _, cpu_text = _lower(fn, x, platform="cpu")
    assert all(t.startswith("lapack_") for t, _ in _custom_calls(cpu_text))
    assert "cusolver" not in cpu_text


def test_cuda_svd_wide_swaps_u_and_vt(fake_cusolver):
    # A wide matrix goes in row-major and the kernel's u/vt results (vt, u) come back row-major.
    _, text = _lower(lambda x: L.svd(x, full_matrices=False), np.ones((3, 5), F32))
    line = next(ln for ln in text.splitlines() if "cusolver_gesvd_ffi" in ln)
    assert "operand_layouts = [dense<[1, 0]>" in line
    assert line.rstrip().endswith("(tensor<3x5xf32>, tensor<3xf32>, tensor<3x5xf32>, "
                                  "tensor<3x3xf32>, tensor<i32>)")
    assert "-> (tensor<3xf32>, tensor<3x3xf32>, tensor<3x5xf32>)" in text   # (s, u, vt)
    lines = text.splitlines()

    def masked(result):       # the select giving NaN-on-failure for custom-call result #result
        return next(ln.split(" = ")[0].strip() for ln in lines
                    if "stablehlo.select" in ln and f"%0#{result}," in ln)

    ret = next(ln for ln in lines if "return" in ln)
    returned = [r.strip() for r in ret.split("return ")[1].split(":")[0].split(",")]
    assert returned[1:] == [masked(3), masked(2)]     # u <- kernel's "vt" slot, vt <- its "u"


def test_cuda_eig_left_eigenvectors_come_from_the_right_ones(fake_cusolver):
    # cuSOLVER's geev has no left eigenvectors: it is asked for the right ones, which are then
    # inverted (an LU factorization, cuSOLVER's getrf)
    _, text = _lower(lambda x: L.eig(x), np.ones((3, 3), F32))
    calls = _custom_calls(text)
    assert ("cusolver_geev_ffi", "left = false, right = true") in calls, calls
    assert any(t == "cusolver_getrf_ffi" for t, _ in calls), calls
    assert "lapack_" not in text


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_left_eigenvectors_from_the_right_ones_match_lapack(rng, dtype, x64):
    a = rng.standard_normal((2, 5, 5)).astype(dtype)
    if dtype == np.complex128:
        a = a + 1j * rng.standard_normal((2, 5, 5))
    w, vl_lapack, vr = (np.asarray(t) for t in L.eig(a))
    vl = np.asarray(L._left_from_right(vr))
    vlh = np.conj(np.swapaxes(vl, -1, -2))
    np.testing.assert_allclose(vlh @ a, w[..., :, None] * vlh, atol=1e-10)
    np.testing.assert_allclose(np.linalg.norm(vl, axis=-2), 1.0, rtol=1e-12)
    big = np.take_along_axis(vl, np.abs(vl).argmax(-2)[..., None, :], -2)
    np.testing.assert_allclose(big.imag, 0.0, atol=1e-12)
    assert (big.real > 0).all()
    # the same vectors as LAPACK's up to a unit factor each
    overlap = np.abs(np.einsum("bij,bij->bj", np.conj(vl), vl_lapack))
    np.testing.assert_allclose(overlap, 1.0, rtol=1e-9)


def test_unknown_platform_is_a_missing_rule():
    with pytest.raises(mlir.LoweringError) as info:
        _lower(L.lu, np.ones((3, 3), F32), platform="tpu")
    assert isinstance(info.value.__cause__, errors.MissingRuleError)
    assert "lax.linalg.lu" in str(info.value) and "'tpu'" in str(info.value)


def test_missing_plugin_is_a_missing_rule(monkeypatch):
    monkeypatch.setattr(linalg_gpu, "_registered", set())    # on a GPU, earlier tests register
    monkeypatch.setattr(linalg_gpu, "_handlers", {})
    monkeypatch.setattr(linalg_gpu, "_origin", "jax_cuda13_plugin._solver: No module")
    with pytest.raises(mlir.LoweringError) as info:
        _lower(L.lu, np.ones((3, 3), F32))
    cause = info.value.__cause__
    assert isinstance(cause, errors.MissingRuleError)
    assert "lax.linalg.lu" in str(cause) and "cusolver_getrf_ffi" in str(cause)
    assert "jax-cuda13-plugin" in str(cause)


def test_missing_handler_is_a_missing_rule(monkeypatch):
    monkeypatch.setattr(linalg_gpu, "_registered", set())
    monkeypatch.setattr(linalg_gpu, "_handlers", {"cusolver_getrf_ffi": object()})
    monkeypatch.setattr(linalg_gpu, "_origin", "jax_cuda13_plugin._solver")
    with pytest.raises(errors.MissingRuleError, match="cusolver_geev_ffi.*has no handler"):
        linalg_gpu.ensure_registered("cusolver_geev_ffi", "eig", "cuda")


def test_registration_happens_once(monkeypatch):
    handler = object()
    calls = []
    monkeypatch.setattr(linalg_gpu, "_handlers", {"cusolver_getrf_ffi": handler})
    monkeypatch.setattr(linalg_gpu, "_registered", set())
    monkeypatch.setattr(cuda.CUDA, "register_custom_call",
                        lambda name, h, api_version: calls.append((name, h, api_version)))
    for _ in range(2):
        linalg_gpu.ensure_registered("cusolver_getrf_ffi", "lu", "cuda")
    assert calls == [("cusolver_getrf_ffi", handler, 1)]
    assert linalg_gpu.registered_targets() == ["cusolver_getrf_ffi"]


def test_failed_registration_is_a_missing_rule(monkeypatch):
    monkeypatch.setattr(linalg_gpu, "_handlers", {"cusolver_getrf_ffi": object()})
    monkeypatch.setattr(linalg_gpu, "_registered", set())

    def refuse(name, h, api_version):
        raise RuntimeError("no custom call extension")
    monkeypatch.setattr(cuda.CUDA, "register_custom_call", refuse)
    with pytest.raises(errors.MissingRuleError, match="lax.linalg.lu.*no custom call extension"):
        linalg_gpu.ensure_registered("cusolver_getrf_ffi", "lu", "cuda")
    assert linalg_gpu.registered_targets() == []


def test_ffi_attribute_encoding():
    with mlir.new_context():
        assert str(L._ffi_attr("L")) == "76 : ui8"
        assert str(L._ffi_attr(True)) == "true"
        assert str(L._ffi_attr(np.uint8(2))) == "2 : ui8"
        assert str(L._ffi_attr(np.int32(-3))) == "-3 : i32"
        with pytest.raises(TypeError, match="FFI attribute"):
            L._ffi_attr(3)


# --- the native-op CUDA paths, compiled for the CPU -------------------------------------------
def _run_cuda_lowering_on_cpu(fn, *args):
    closed, text = _lower(fn, *args)
    assert "custom_call" not in text
    device = funcgrad.devices("cpu")[0]
    exe = executable.Executable(executable.compile_module(text, device), device,
                                [v.aval for v in closed.jaxpr.constvars] + closed.in_avals,
                                closed.out_avals, text)
    return [np.asarray(o) for o in exe(list(closed.consts) + list(args))]


def _rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [F32, C64])
def test_cuda_cholesky_semantics(rng, dtype):
    a = _rand(rng, (3, 4, 4), dtype)
    spd = a @ np.conj(np.swapaxes(a, -1, -2)) + 4 * np.eye(4, dtype=dtype)
    spd[1] = -spd[1]                                      # not positive definite
    _, text = _lower(L.cholesky, spd)
    assert "stablehlo.cholesky" in text
    (out,) = _run_cuda_lowering_on_cpu(L.cholesky, spd)
    ok = [0, 2]
    np.testing.assert_allclose(out[ok], np.linalg.cholesky(spd[ok]), rtol=1e-4, atol=1e-4)
    assert (np.triu(out[ok], 1) == 0).all()
    assert np.isnan(out[1]).all()


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, False),
                                                     (True, True), (False, True)])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_cuda_triangular_solve_semantics(rng, left_side, lower, transpose_a, conjugate_a,
                                         unit_diagonal):
    a = _rand(rng, (2, 3, 3), C64) + 3 * np.eye(3, dtype=C64)
    b = _rand(rng, (2, 3, 4) if left_side else (2, 4, 3), C64)
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    (x,) = _run_cuda_lowering_on_cpu(lambda p, q: L.triangular_solve(p, q, **params), a, b)
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t[..., np.arange(3), np.arange(3)] = 1
    if conjugate_a:
        t = np.conj(t)
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    np.testing.assert_allclose(t @ x if left_side else x @ t, b, rtol=1e-4, atol=1e-4)
    expected = L.triangular_solve(a, b, **params)          # the LAPACK path, on the CPU
    np.testing.assert_allclose(x, expected, rtol=1e-4, atol=1e-4)


def test_unpack_conjugate_pairs(rng):
    a = rng.standard_normal((3, 6, 6))
    w, v = np.linalg.eig(a)
    assert (w.imag != 0).any()
    packed = np.empty_like(a)                 # LAPACK's real storage of complex eigenvectors
    for b in range(a.shape[0]):
        j = 0
        while j < 6:
            packed[b, :, j] = v[b, :, j].real
            if w[b, j].imag != 0:
                packed[b, :, j + 1] = v[b, :, j].imag
                j += 1
            j += 1
    out = np.asarray(L._unpack_conjugate_pairs(w.astype(C64), packed.astype(F32)))
    np.testing.assert_allclose(out, v, atol=1e-5)
