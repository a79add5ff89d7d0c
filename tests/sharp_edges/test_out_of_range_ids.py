"""Out-of-range token and class ids: IndexError eagerly (as PyTorch), NaN under jit, and a
run-time IndexError under jit with config debug_checks (issue 23)."""
import numpy as np
import pytest

import funcgrad
import funcgrad.numpy as fnp
from funcgrad import nn
from funcgrad.nn import functional as F


@pytest.fixture
def checks_on():
    with funcgrad.config.override("debug_checks", True):
        yield


@pytest.mark.parametrize("ids, bad", [([1, 9], 9), ([[0, 5]], 5), ([-1, 2], -1)])
def test_embedding_raises_for_out_of_range_ids(ids, bad):
    emb = nn.Embedding(5, 3)
    with pytest.raises(IndexError, match=rf"Embedding\(5, 3\): index {bad} is out of range "
                                         r"for num_embeddings=5 \(valid: 0..4\)"):
        emb(fnp.asarray(ids))
    with pytest.raises(IndexError, match=rf"F.embedding: index {bad} is out of range"):
        F.embedding(np.asarray(ids), emb.weight)


def test_embedding_in_range_ids_are_unchanged():
    emb = nn.Embedding(5, 3, padding_idx=4)
    ids = np.array([[0, 4], [3, 1]])
    np.testing.assert_array_equal(np.asarray(emb(fnp.asarray(ids))),
                                  np.asarray(emb.weight)[ids])
    g = funcgrad.grad(lambda w: fnp.sum(F.embedding(ids, w, padding_idx=4)))(emb.weight)
    np.testing.assert_array_equal(np.asarray(g)[:, 0], [1, 1, 0, 1, 0])


def test_embedding_under_jit_gives_nan_rows_not_other_rows():
    emb = nn.Embedding(5, 3)
    out = np.asarray(funcgrad.jit(lambda i: emb(i))(fnp.asarray([1, 9, -1])))
    np.testing.assert_array_equal(out[0], np.asarray(emb.weight)[1])
    assert np.isnan(out[1:]).all()


def test_embedding_debug_checks_raise_under_jit(checks_on):
    emb = nn.Embedding(5, 3)
    f = funcgrad.jit(lambda i: emb(i))
    np.testing.assert_array_equal(np.asarray(f(fnp.asarray([1, 4]))),
                                  np.asarray(emb.weight)[[1, 4]])
    with pytest.raises(IndexError, match=r"Embedding\(5, 3\): index 9 is out of range"):
        f(fnp.asarray([1, 9]))
    with pytest.raises(IndexError, match="index 7 is out of range"):
        funcgrad.vmap(lambda i: emb(i))(fnp.asarray([[1], [7]]))


@pytest.mark.parametrize("loss", [F.cross_entropy, F.nll_loss])
def test_class_targets_out_of_range_raise(loss):
    logits = fnp.asarray(np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32))
    name = loss.__name__
    for target, bad in (([0, 7], 7), ([3, 0], 3), ([-2, 1], -2)):
        with pytest.raises(IndexError, match=rf"F.{name}: target {bad} is out of range for 3 "
                                             r"classes \(valid: 0..2, or -100 to ignore\)"):
            loss(logits, fnp.asarray(target))
    # ignore_index passes; in-range targets match the NumPy formula
    logp = np.asarray(F.log_softmax(logits, dim=1)) if name == "cross_entropy" else \
        np.asarray(logits)
    got = float(loss(logits, fnp.asarray([2, -100])))
    np.testing.assert_allclose(got, -logp[0, 2], rtol=1e-6)


def test_loss_modules_and_spatial_targets_raise():
    with pytest.raises(IndexError, match="target 3 is out of range for 3 classes"):
        nn.CrossEntropyLoss()(fnp.ones((2, 3)), np.array([0, 3]))
    with pytest.raises(IndexError, match="target 5 is out of range for 4 classes"):
        nn.NLLLoss()(fnp.ones((1, 4, 2, 2)), np.array([[[0, 1], [5, 2]]]))
    with pytest.raises(IndexError, match="target 9 is out of range"):
        nn.CrossEntropyLoss(ignore_index=1)(fnp.ones((2, 3)), np.array([1, 9]))


def test_class_targets_under_jit_give_nan_and_debug_checks_raise():
    logits = fnp.ones((2, 3))
    assert np.isnan(float(funcgrad.jit(F.cross_entropy)(logits, fnp.asarray([0, 7]))))
    assert np.isnan(float(funcgrad.jit(F.nll_loss)(logits, fnp.asarray([-5, 1]))))
    np.testing.assert_allclose(float(funcgrad.jit(F.cross_entropy)(logits, fnp.asarray([0, 2]))),
                               np.log(3.0), rtol=1e-6)
    with funcgrad.config.override("debug_checks", True):
        with pytest.raises(IndexError, match="F.cross_entropy: target 7 is out of range for 3 "
                                             "classes"):
            funcgrad.jit(F.cross_entropy)(logits, fnp.asarray([0, 7]))
        g = funcgrad.jit(funcgrad.grad(lambda x, t: F.cross_entropy(x, t)))
        with pytest.raises(IndexError, match="target 4 is out of range"):
            g(logits, fnp.asarray([4, 0]))
        assert np.isfinite(np.asarray(g(logits, fnp.asarray([1, 0])))).all()


def test_matches_torch():
    torch = pytest.importorskip("torch")
    emb = torch.nn.Embedding(5, 3)
    with pytest.raises(IndexError):
        emb(torch.tensor([1, 9]))
    with pytest.raises(IndexError):
        torch.nn.functional.cross_entropy(torch.ones(2, 3), torch.tensor([0, 7]))
    with pytest.raises(IndexError):
        nn.Embedding(5, 3)(fnp.asarray([1, 9]))
    with pytest.raises(IndexError):
        F.cross_entropy(fnp.ones((2, 3)), fnp.asarray([0, 7]))


def test_turning_checks_on_retraces_jitted_functions():
    emb = nn.Embedding(4, 2)
    f = funcgrad.jit(lambda i: emb(i))
    assert np.isnan(np.asarray(f(fnp.asarray([5])))).all()
    with funcgrad.config.override("debug_checks", True):
        with pytest.raises(IndexError, match="index 5 is out of range"):
            f(fnp.asarray([5]))
    assert np.isnan(np.asarray(f(fnp.asarray([5])))).all()


def test_check_ids_in_user_code():
    with pytest.raises(IndexError, match=r"lookup: index 3 is out of range for size 3"):
        funcgrad.debug.check_ids(np.array([0, 3]), 3, "lookup")
    funcgrad.debug.check_ids(np.array([0, 2, -1]), 3, "lookup", ignore=-1)
    g = funcgrad.jit(lambda i: (funcgrad.debug.check_ids(i, 3, "lookup"), i + 1)[1])
    np.testing.assert_array_equal(np.asarray(g(fnp.asarray([7]))), [8])     # checks off
    with funcgrad.config.override("debug_checks", True):
        with pytest.raises(IndexError, match="lookup: index 7"):
            g(fnp.asarray([7]))
