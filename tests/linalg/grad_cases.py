"""Linear-algebra calls whose derivatives (JVPs and VJPs) must match JAX's.

Each case is ``CASES[name] = Case(fn, inputs, tangents)``: ``fn(ns)`` returns the function to
differentiate, written against ``ns.numpy``, ``ns.lax`` and ``ns.scipy_linalg`` so that the
same table drives funcgrad (``test_grad_vs_jax.py``) and JAX (``make_jax_grad_refs.py``, which
writes the stored references). Every function returns a tuple of inexact arrays. Inputs and
tangents are float64 or complex128 (both libraries run with 64-bit types on); cotangents come
from :func:`cotangents`, so both sides use the same ones.

Where an output is fixed only up to a gauge (the sign or phase of an eigenvector or singular
vector), a case also returns gauge-invariant functions of it (``|v|**2``, ``u @ vh``), as
JAX's own tests compare; the raw vectors are compared too, since both libraries call the same
LAPACK kernels and so pick the same gauge.
"""
from typing import Callable, NamedTuple

import numpy as np


class Case(NamedTuple):
    fn: Callable        # ns -> (f(*inputs) -> tuple of arrays)
    inputs: tuple
    tangents: tuple


def _rng(name):
    return np.random.default_rng(abs(hash_name(name)) % 2**32)


def hash_name(name):
    """A hash of ``name`` that is the same in every process (``hash`` of a str is not)."""
    h = 0
    for ch in name.encode():
        h = (h * 131 + ch) % 2**61
    return h


def _rand(rng, shape, cplx):
    x = rng.standard_normal(shape)
    if cplx:
        x = x + 1j * rng.standard_normal(shape)
    return x


def _general(rng, shape, cplx):
    """A well-conditioned square (or rectangular) matrix."""
    x = _rand(rng, shape, cplx)
    m, n = shape[-2:]
    return x + 2.0 * np.eye(m, n)


def _spd(rng, n, cplx):
    g = _rand(rng, (n, n), cplx)
    return g @ g.conj().T + n * np.eye(n)


def _tri(rng, n, cplx, lower):
    t = _rand(rng, (n, n), cplx)
    t = np.tril(t) if lower else np.triu(t)
    return t + (3.0 + 0.5j if cplx else 3.0) * np.eye(n)


def cotangents(outputs, name):
    """Cotangents for ``outputs`` (shapes and dtypes), the same in every process."""
    rng = np.random.default_rng(hash_name(name + "/ct") % 2**32)
    return tuple(_rand(rng, np.shape(o), np.iscomplexobj(o)).astype(np.asarray(o).dtype)
                 for o in outputs)


def _gauge_free(v):
    """|v|**2 elementwise: the same for every sign or phase of v's columns."""
    return (v * v.conj()).real


CASES = {}


def _case(name, fn, make_inputs, kinds=("real", "complex")):
    """Register ``name/real`` and ``name/complex`` (those in ``kinds``): ``make_inputs(rng,
    cplx)`` gives the inputs; the tangents are random of the same shapes (not symmetric, not
    triangular: the derivative must use what the function reads of them)."""
    for kind in kinds:
        cplx = kind == "complex"
        key = f"{name}/{kind}"
        rng = _rng(key)
        inputs = tuple(np.asarray(x, np.complex128 if cplx else np.float64)
                       for x in make_inputs(rng, cplx))
        tangents = tuple(_rand(rng, x.shape, cplx).astype(x.dtype) for x in inputs)
        CASES[key] = Case(fn, inputs, tangents)


def _spd_in(n):
    return lambda rng, c: (_spd(rng, n, c),)


def _gen_in(*shapes):
    return lambda rng, c: tuple(_general(rng, s, c) if len(s) == 2 and s[0] == s[1]
                                else _rand(rng, s, c) for s in shapes)


# --- cholesky: JAX symmetrizes the input (its Hermitian part) before factoring ----------------
_case("numpy.cholesky", lambda ns: lambda x: (ns.numpy.linalg.cholesky(x),), _spd_in(4))
_case("numpy.cholesky_upper",
      lambda ns: lambda x: (ns.numpy.linalg.cholesky(x, upper=True),), _spd_in(3))
_case("lax.cholesky", lambda ns: lambda x: (ns.lax.linalg.cholesky(x),), _spd_in(3))
_case("lax.cholesky_nosym",
      lambda ns: lambda x: (ns.lax.linalg.cholesky(x, symmetrize_input=False),), _spd_in(3))
_case("scipy.cholesky", lambda ns: lambda x: (ns.scipy_linalg.cholesky(x),), _spd_in(3))
_case("scipy.cholesky_lower",
      lambda ns: lambda x: (ns.scipy_linalg.cholesky(x, lower=True),), _spd_in(3))
_case("scipy.cho_solve",
      lambda ns: lambda x, b: (ns.scipy_linalg.cho_solve(ns.scipy_linalg.cho_factor(x), b),),
      lambda rng, c: (_spd(rng, 3, c), _rand(rng, (3, 2), c)))

# --- qr ----------------------------------------------------------------------------------------
_case("numpy.qr_square", lambda ns: lambda x: tuple(ns.numpy.linalg.qr(x)), _gen_in((3, 3)))
_case("numpy.qr_tall", lambda ns: lambda x: tuple(ns.numpy.linalg.qr(x)), _gen_in((5, 3)))
_case("numpy.qr_complete_square",
      lambda ns: lambda x: tuple(ns.numpy.linalg.qr(x, mode="complete")), _gen_in((3, 3)))
_case("numpy.qr_r", lambda ns: lambda x: (ns.numpy.linalg.qr(x, mode="r"),), _gen_in((4, 3)))
_case("lax.qr_tall", lambda ns: lambda x: tuple(ns.lax.linalg.qr(x, full_matrices=False)),
      _gen_in((4, 2)))

# --- eigh ------------------------------------------------------------------------------------
def _eigh(ns):
    def f(x):
        w, v = ns.numpy.linalg.eigh(x)
        return w, v, _gauge_free(v)
    return f


_case("numpy.eigh", _eigh, _spd_in(4))
_case("numpy.eigvalsh", lambda ns: lambda x: (ns.numpy.linalg.eigvalsh(x),), _spd_in(3))
_case("lax.eigh_nosym",
      lambda ns: lambda x: tuple(ns.lax.linalg.eigh(x, symmetrize_input=False)), _spd_in(3))
_case("scipy.eigh_values",
      lambda ns: lambda x: (ns.scipy_linalg.eigh(x, eigvals_only=True),), _spd_in(3))

# --- eig: JAX differentiates eigenvalues only ---------------------------------------------------
_case("numpy.eigvals", lambda ns: lambda x: (ns.numpy.linalg.eigvals(x),), _gen_in((3, 3)))
_case("lax.eig_values",
      lambda ns: lambda x: (ns.lax.linalg.eig(x, compute_left_eigenvectors=False,
                                              compute_right_eigenvectors=False)[0],),
      _gen_in((4, 4)))


# --- svd -------------------------------------------------------------------------------------
def _svd(ns):
    def f(x):
        u, s, vh = ns.numpy.linalg.svd(x, full_matrices=False)
        return s, u, vh, _gauge_free(u), _gauge_free(vh), u @ vh
    return f


_case("numpy.svd_square", _svd, _gen_in((3, 3)))
_case("numpy.svd_tall", _svd, _gen_in((4, 3)))
_case("numpy.svd_wide", _svd, _gen_in((2, 4)))
_case("numpy.svdvals", lambda ns: lambda x: (ns.numpy.linalg.svd(x, compute_uv=False),),
      _gen_in((4, 3)))
_case("lax.svd_values", lambda ns: lambda x: (ns.lax.linalg.svd(x, compute_uv=False),),
      _gen_in((3, 4)))

# --- lu ----------------------------------------------------------------------------------------
_case("scipy.lu_square", lambda ns: lambda x: tuple(ns.scipy_linalg.lu(x)[1:]),
      _gen_in((3, 3)))
_case("scipy.lu_tall", lambda ns: lambda x: tuple(ns.scipy_linalg.lu(x)[1:]), _gen_in((4, 2)))
_case("scipy.lu_wide", lambda ns: lambda x: tuple(ns.scipy_linalg.lu(x)[1:]), _gen_in((2, 4)))
_case("lax.lu", lambda ns: lambda x: (ns.lax.linalg.lu(x)[0],), _gen_in((4, 4)))
_case("scipy.lu_factor", lambda ns: lambda x: (ns.scipy_linalg.lu_factor(x)[0],),
      _gen_in((3, 3)))
_case("scipy.lu_solve",
      lambda ns: lambda x, b: (ns.scipy_linalg.lu_solve(ns.scipy_linalg.lu_factor(x), b),),
      _gen_in((3, 3), (3, 2)))

# --- inverses, solves, determinants -------------------------------------------------------------
_case("numpy.inv", lambda ns: lambda x: (ns.numpy.linalg.inv(x),), _gen_in((3, 3)))
_case("numpy.solve_matrix", lambda ns: lambda a, b: (ns.numpy.linalg.solve(a, b),),
      _gen_in((3, 3), (3, 2)))
_case("numpy.solve_vector", lambda ns: lambda a, b: (ns.numpy.linalg.solve(a, b),),
      _gen_in((3, 3), (3,)))
_case("numpy.det", lambda ns: lambda x: (ns.numpy.linalg.det(x),), _gen_in((3, 3)))
_case("numpy.det_batch", lambda ns: lambda x: (ns.numpy.linalg.det(x),),
      lambda rng, c: (np.stack([_general(rng, (3, 3), c) for _ in range(2)]),))
_case("numpy.slogdet", lambda ns: lambda x: tuple(ns.numpy.linalg.slogdet(x)), _gen_in((3, 3)))
_case("numpy.pinv_square", lambda ns: lambda x: (ns.numpy.linalg.pinv(x),), _gen_in((3, 3)))
_case("numpy.pinv_tall", lambda ns: lambda x: (ns.numpy.linalg.pinv(x),), _gen_in((4, 2)))
_case("numpy.pinv_wide", lambda ns: lambda x: (ns.numpy.linalg.pinv(x),), _gen_in((2, 3)))
_case("numpy.lstsq", lambda ns: lambda a, b: (ns.numpy.linalg.lstsq(a, b)[0],),
      _gen_in((4, 2), (4,)))
_case("numpy.matrix_power_3", lambda ns: lambda x: (ns.numpy.linalg.matrix_power(x, 3),),
      _gen_in((3, 3)))
_case("numpy.matrix_power_neg", lambda ns: lambda x: (ns.numpy.linalg.matrix_power(x, -2),),
      _gen_in((3, 3)))
_case("numpy.norm_2", lambda ns: lambda x: (ns.numpy.linalg.norm(x, 2),), _gen_in((3, 4)))
_case("numpy.norm_nuc", lambda ns: lambda x: (ns.numpy.linalg.norm(x, "nuc"),),
      _gen_in((3, 3)))
_case("numpy.cond", lambda ns: lambda x: (ns.numpy.linalg.cond(x),), _gen_in((3, 3)))
_case("numpy.tensorinv", lambda ns: lambda x: (ns.numpy.linalg.tensorinv(x, ind=1),),
      lambda rng, c: (_general(rng, (4, 4), c).reshape(4, 2, 2),))
_case("scipy.solve", lambda ns: lambda a, b: (ns.scipy_linalg.solve(a, b),),
      _gen_in((3, 3), (3, 2)))
_case("scipy.solve_pos",
      lambda ns: lambda a, b: (ns.scipy_linalg.solve(a, b, assume_a="pos"),),
      lambda rng, c: (_spd(rng, 3, c), _rand(rng, (3, 2), c)))
_case("scipy.det", lambda ns: lambda x: (ns.scipy_linalg.det(x),), _gen_in((3, 3)))
_case("scipy.inv", lambda ns: lambda x: (ns.scipy_linalg.inv(x),), _gen_in((3, 3)))

# --- triangular solves -------------------------------------------------------------------------
for _lower in (True, False):
    for _left in (True, False):
        for _trans, _conj in ((False, False), (True, False), (True, True)):
            _name = (f"lax.triangular_solve_{'lower' if _lower else 'upper'}_"
                     f"{'left' if _left else 'right'}_{'CT'[_conj] if _trans else 'N'}")
            _case(_name,
                  lambda ns, lo=_lower, le=_left, tr=_trans, cj=_conj: lambda a, b: (
                      ns.lax.linalg.triangular_solve(a, b, left_side=le, lower=lo,
                                                     transpose_a=tr, conjugate_a=cj),),
                  lambda rng, c, lo=_lower, le=_left: (_tri(rng, 3, c, lo),
                                                       _rand(rng, (3, 2) if le else (2, 3), c)))
for _trans in (0, 1, 2):
    _case(f"scipy.solve_triangular_trans{_trans}",
          lambda ns, t=_trans: lambda a, b: (
              ns.scipy_linalg.solve_triangular(a, b, trans=t, lower=True),),
          lambda rng, c: (_tri(rng, 3, c, True), _rand(rng, (3, 2), c)))
_case("scipy.solve_triangular_unit",
      lambda ns: lambda a, b: (ns.scipy_linalg.solve_triangular(a, b, unit_diagonal=True),),
      lambda rng, c: (_tri(rng, 3, c, False), _rand(rng, (3,), c)))

# --- matrix functions --------------------------------------------------------------------------
_case("scipy.expm", lambda ns: lambda x: (ns.scipy_linalg.expm(x),),
      lambda rng, c: (0.5 * _rand(rng, (3, 3), c),))
_case("scipy.expm_large", lambda ns: lambda x: (ns.scipy_linalg.expm(x),),
      lambda rng, c: (3.0 * _rand(rng, (3, 3), c),))
_case("scipy.polar", lambda ns: lambda x: tuple(ns.scipy_linalg.polar(x, method="svd")),
      _gen_in((3, 3)))

# --- calls JAX does not differentiate: the references record JAX's error, and funcgrad must
# raise too (never give numbers JAX has no definition for) or be compared another way --------
_case("scipy.sqrtm", lambda ns: lambda x: (ns.scipy_linalg.sqrtm(x),), _spd_in(3))
_case("numpy.eig_vectors", lambda ns: lambda x: tuple(ns.numpy.linalg.eig(x)), _gen_in((3, 3)))
_case("numpy.qr_wide", lambda ns: lambda x: tuple(ns.numpy.linalg.qr(x)), _gen_in((2, 3)))
_case("numpy.qr_complete_tall",
      lambda ns: lambda x: tuple(ns.numpy.linalg.qr(x, mode="complete")), _gen_in((3, 2)))
_case("numpy.svd_full_tall",
      lambda ns: lambda x: tuple(ns.numpy.linalg.svd(x, full_matrices=True)), _gen_in((3, 2)))

# --- eigenvectors of non-symmetric matrices, behind JAX's opt-in --------------------------------
_case("lax.eig_right_vectors",
      lambda ns: lambda x: tuple(ns.lax.linalg.eig(x, compute_left_eigenvectors=False,
                                                   enable_eigvec_derivs=True)),
      _gen_in((3, 3)))
_case("lax.eig_both_vectors",
      lambda ns: lambda x: tuple(ns.lax.linalg.eig(x, enable_eigvec_derivs=True)),
      _gen_in((3, 3)))
