"""``precision=`` on products and convolutions, and the ``default_matmul_precision`` switch.

CPUs compute every float32 product in full precision, so these tests check what reaches XLA
(the ``precision_config`` of each dot_general and convolution, forward and backward) and that
values are unchanged; the GPU effect (TensorFloat-32 vs full float32) is checked on a GPU."""
import re

import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as jnp
from funcgrad import lax


def _precisions(text):
    """The precision_config of every dot_general / convolution in StableHLO text."""
    return [re.search(r"precision(?:_config)? = \[(?:#stablehlo<precision )?(\w+)>?, "
                      r"(?:#stablehlo<precision )?(\w+)>?\]", ln).groups()
            if "precision" in ln else None
            for ln in text.splitlines()
            if "stablehlo.dot_general" in ln or "stablehlo.convolution" in ln]


@pytest.fixture(autouse=True)
def no_default_precision():
    """These tests start from the switch unset (the suite sets it to "highest" on a GPU)."""
    with funcgrad.config.override("default_matmul_precision", None):
        yield


@pytest.fixture
def ab(rng):
    return rng.standard_normal((3, 4)).astype(np.float32), \
        rng.standard_normal((4, 5)).astype(np.float32)


@pytest.mark.parametrize("precision, want", [
    (None, None), ("highest", ("HIGHEST", "HIGHEST")), ("float32", ("HIGHEST", "HIGHEST")),
    (lax.Precision.HIGH, ("HIGH", "HIGH")), ("tensorfloat32", ("HIGH", "HIGH")),
    ("bfloat16", ("DEFAULT", "DEFAULT")), (("highest", "default"), ("HIGHEST", "DEFAULT"))])
def test_products_carry_precision(ab, precision, want):
    a, b = ab
    for fn in (lambda x, y: jnp.dot(x, y, precision=precision),
               lambda x, y: jnp.matmul(x, y, precision=precision),
               lambda x, y: jnp.einsum("ij,jk->ik", x, y, precision=precision),
               lambda x, y: lax.dot(x, y, precision=precision)):
        f = funcgrad.jit(fn)
        assert _precisions(f.lower(a, b).as_text()) == [want]
        np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-5, atol=1e-6)


def test_gradients_keep_the_precision(ab):
    a, b = ab
    loss = lambda x, y: jnp.sum(jnp.tanh(jnp.matmul(x, y, precision="highest")))
    text = funcgrad.jit(funcgrad.grad(loss, argnums=(0, 1))).lower(a, b).as_text()
    assert _precisions(text) == [("HIGHEST", "HIGHEST")] * 3      # forward and both cotangents
    x = np.ones((2, 16, 8, 8), np.float32)      # enough terms for XLA's convolution on CPU
    w = np.ones((32, 16, 3, 3), np.float32)
    conv = lambda p, q: jnp.sum(lax.conv_general_dilated(p, q, (2, 2), "SAME",
                                                         precision="high") ** 2)
    text = funcgrad.jit(funcgrad.grad(conv, argnums=(0, 1))).lower(x, w).as_text()
    found = _precisions(text)
    assert found and all(p == ("HIGH", "HIGH") for p in found), found


def test_default_precision_switch_retraces(ab):
    a, b = ab
    f = funcgrad.jit(lambda x, y: x @ y)
    assert _precisions(f.lower(a, b).as_text()) == [None]
    with funcgrad.default_matmul_precision("highest"):
        assert funcgrad.config.default_matmul_precision == "highest"
        assert _precisions(f.lower(a, b).as_text()) == [("HIGHEST", "HIGHEST")]
        np.testing.assert_allclose(np.asarray(f(a, b)), a @ b, rtol=1e-5, atol=1e-6)
        # an explicit argument wins over the switch
        g = funcgrad.jit(lambda x, y: jnp.dot(x, y, precision="default"))
        assert _precisions(g.lower(a, b).as_text()) == [("DEFAULT", "DEFAULT")]
    assert funcgrad.config.default_matmul_precision is None
    assert _precisions(f.lower(a, b).as_text()) == [None]


def test_bad_precision_names_the_function_and_keeps_the_old_setting(ab):
    a, b = ab
    with pytest.raises(ValueError, match=r"lax.dot_general: unknown precision 'fast'"):
        jnp.dot(a, b, precision="fast")
    with pytest.raises(ValueError, match=r"lax.conv_general_dilated: precision must be one name "
                                         r"or a pair"):
        lax.conv_general_dilated(np.ones((1, 1, 3, 3), np.float32),
                                 np.ones((1, 1, 2, 2), np.float32), (1, 1), "VALID",
                                 precision=("high", "high", "high"))
    with pytest.raises(ValueError, match="default_matmul_precision.*unknown precision 'exact'"):
        funcgrad.config.update("default_matmul_precision", "exact")
    assert funcgrad.config.default_matmul_precision is None
