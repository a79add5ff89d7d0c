"""Several platforms in one artifact: lowering for CUDA needs no GPU, every platform's module
is stored, and a call runs the module of the platform it runs on."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import export


def _f(x, w):
    return jnp.tanh(x @ w).sum(axis=0)


X = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
W = np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)


def test_cpu_and_cuda_modules_in_one_artifact():
    started = set(funcgrad.lowering.backend.started_platforms())
    exp = export.export(_f, platforms=("cpu", "cuda"), vjp_order=1)(X, W)
    if "cuda" not in started:      # lowering for CUDA started no CUDA client
        assert "cuda" not in funcgrad.lowering.backend.started_platforms()
    assert exp.platforms == ("cpu", "cuda") and exp.vjp().platforms == ("cpu", "cuda")
    loaded = export.deserialize(exp.serialize())
    for p in ("cpu", "cuda", "gpu"):
        text = loaded.mlir_module(p)
        assert "stablehlo.dot_general" in text and "stablehlo.tanh" in text
    np.testing.assert_allclose(loaded.call(X, W), np.tanh(X @ W).sum(axis=0), rtol=1e-5)
    g = funcgrad.grad(lambda x: jnp.sum(loaded.call(x, W)))(X)
    np.testing.assert_allclose(g, (1 - np.tanh(X @ W) ** 2) @ W.T, rtol=1e-5, atol=1e-6)


def test_the_call_runs_the_module_of_the_arguments_platform():
    exp = export.deserialize(export.export(_f, platforms=("cpu", "cuda"))(X, W).serialize())
    cpu = funcgrad.devices("cpu")[0]
    x, w = funcgrad.device_put(X, cpu), funcgrad.device_put(W, cpu)
    out = exp.call(x, w)
    assert out.device == cpu
    np.testing.assert_allclose(out, np.tanh(X @ W).sum(axis=0), rtol=1e-5)


def test_a_platform_that_was_not_exported_is_named_in_the_error():
    other = "cpu" if funcgrad.default_backend() != "cpu" else "cuda"
    exp = export.export(_f, platforms=(other,))(X, W)
    assert exp.platforms == (other,)
    with pytest.raises(Exception, match=f"exported for platforms \\('{other}',\\), not for"):
        np.asarray(exp.call(X, W))
    with pytest.raises(ValueError, match="unknown platform 'tpu9'"):
        export.export(_f, platforms=("cpu", "tpu9"))
    with pytest.raises(ValueError, match="no module for platform 'tpu'"):
        exp.mlir_module("tpu")


def test_default_platform_is_the_default_backend():
    exp = export.export(_f)(X, W)
    assert exp.platforms == (funcgrad.default_backend(),)
