"""int8 x int8 -> int32 products on the CPU lower as uint8 x int8 plus a correction
(``funcgrad/lowering/cpu_dot.py``): bit-identical to the integer product, for every layout
(those the rewrite does not take lower as before)."""
import string

import numpy as np
import pytest

import funcgrad
from funcgrad import lax

RNG = np.random.default_rng(7)


def int64_reference(a, b, dnums):
    (lc, rc), (lb, rb) = dnums
    letters = iter(string.ascii_lowercase)
    lhs = [next(letters) for _ in range(a.ndim)]
    rhs = [next(letters) for _ in range(b.ndim)]
    for l, r in list(zip(lc, rc)) + list(zip(lb, rb)):
        rhs[r] = lhs[l]
    out = [lhs[d] for d in lb] + [lhs[d] for d in range(a.ndim) if d not in lc + lb] + \
        [rhs[d] for d in range(b.ndim) if d not in rc + rb]
    return np.einsum(f"{''.join(lhs)},{''.join(rhs)}->{''.join(out)}", a.astype(np.int64),
                     b.astype(np.int64))


def int8(shape):
    x = RNG.integers(-128, 128, shape).astype(np.int8)
    x.flat[0], x.flat[-1] = -128, 127                 # the extremes of the range
    return x


CASES = [  # (lhs shape, rhs shape, dimension numbers, rewritten to uint8 x int8)
    ((16, 64), (64, 24), (((1,), (0,)), ((), ())), True),
    ((16, 64), (24, 64), (((1,), (1,)), ((), ())), True),
    ((3, 5, 32), (32, 8), (((2,), (0,)), ((), ())), True),
    ((1, 1), (1, 1), (((1,), (0,)), ((), ())), True),
    ((3, 4, 16), (3, 16, 5), (((2,), (1,)), ((0,), (0,))), False),
    ((16, 4), (5, 16, 3), (((0,), (1,)), ((), ())), False),
    ((2, 6, 3, 4), (4, 2, 7, 6), (((1, 3), (3, 0)), ((0,), (1,))), False),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dnums,rewritten", CASES)
def test_int8_products_are_exact(lhs_shape, rhs_shape, dnums, rewritten):
    a, b = int8(lhs_shape), int8(rhs_shape)
    f = funcgrad.jit(lambda x, y: lax.dot_general(x, y, dnums,
                                                  preferred_element_type=np.int32))
    got = np.asarray(f(a, b))
    np.testing.assert_array_equal(got, int64_reference(a, b, dnums))
    assert ("ui8" in f.lower(a, b).as_text()) is rewritten


def test_int32_wraparound_is_the_same():
    # a contraction long enough to overflow int32 wraps exactly as the int8 product would
    k = 140_000
    a = np.full((1, k), -128, np.int8)
    b = np.full((k, 1), -128, np.int8)
    f = funcgrad.jit(lambda x, y: lax.dot_general(x, y, (((1,), (0,)), ((), ())),
                                                  preferred_element_type=np.int32))
    want = np.array(k * 16384, np.int64).astype(np.int32)     # wraps modulo 2**32
    assert int(np.asarray(f(a, b))[0, 0]) == int(want)


def test_inside_scan_and_vmap():
    w = int8((16, 8))
    xs = int8((5, 4, 16))
    dn = (((1,), (0,)), ((), ()))
    prod = lambda x: lax.dot_general(x, w, dn, preferred_element_type=np.int32)
    total = funcgrad.jit(lambda xs: lax.scan(lambda c, x: (c + prod(x), None),
                                             np.zeros((4, 8), np.int32), xs)[0])
    np.testing.assert_array_equal(np.asarray(total(xs)),
                                  sum(x.astype(np.int64) @ w.astype(np.int64) for x in xs))
    batched = funcgrad.jit(funcgrad.vmap(prod))
    np.testing.assert_array_equal(np.asarray(batched(xs)),
                                  np.einsum("bik,kj->bij", xs.astype(np.int64),
                                            w.astype(np.int64)))


def test_other_dtypes_are_untouched():
    a = RNG.normal(size=(4, 8)).astype(np.float32)
    f = funcgrad.jit(lambda x: x @ x.T)
    assert "ui8" not in f.lower(a).as_text()
    ai = int8((4, 8))
    g = funcgrad.jit(lambda x: lax.dot_general(x, x.T, (((1,), (0,)), ((), ()))))   # int8 out
    assert "ui8" not in g.lower(ai).as_text()
    np.testing.assert_array_equal(np.asarray(g(ai)),
                                  (ai.astype(np.int64) @ ai.T.astype(np.int64)).astype(np.int8))
