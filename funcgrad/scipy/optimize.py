"""funcgrad.scipy.optimize: ``minimize`` with BFGS (as ``jax.scipy.optimize``), one compiled
``while_loop`` that works under ``jit`` and ``vmap``.

Example:
    >>> from funcgrad.scipy.optimize import minimize
    >>> res = minimize(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros(2), method="BFGS")
    >>> res.x
    Array([3., 3.], dtype=float32)
"""
from typing import NamedTuple

import funcgrad.numpy as jnp
from funcgrad import lax
from funcgrad.core import dtypes
from funcgrad.transforms.ad import value_and_grad as _value_and_grad

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """The result of ``minimize``: the solution ``x``, whether it converged (``success``;
    ``status`` 0: converged, 1: ``maxiter`` reached, 3: the line search found no decrease),
    the objective ``fun``, its gradient ``jac`` and the BFGS inverse-Hessian estimate
    ``hess_inv`` at ``x``, and the counts of function and gradient evaluations and
    iterations."""
    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


_ARMIJO = 1e-4          # sufficient-decrease constant of the line search
_MAX_HALVINGS = 40


class _State(NamedTuple):
    k: object
    x: object
    f: object
    g: object
    h: object
    status: object
    nfev: object


def _bfgs(fun, x0, gtol, maxiter):
    value_and_grad = _value_and_grad(fun)
    n = x0.shape[0]
    dt = x0.dtype
    eye = jnp.eye(n, dtype=dt)
    f0, g0 = value_and_grad(x0)
    running = jnp.array(-1, jnp.int32)

    def norm_inf(g):
        return jnp.max(jnp.abs(g)) if n else jnp.zeros((), dt)

    def cond(s):
        return s.status < 0

    def body(s):
        p = -(s.h @ s.g)
        slope = jnp.dot(s.g, p)
        # a direction that does not descend (rounding in h): restart from steepest descent
        bad = ~(slope < 0)
        p = jnp.where(bad, -s.g, p)
        h = jnp.where(bad, eye, s.h)
        slope = jnp.dot(s.g, p)

        def ls_cond(c):
            i, alpha, f_new = c
            return (i < _MAX_HALVINGS) & ~(f_new <= s.f + _ARMIJO * alpha * slope)

        def ls_body(c):
            i, alpha, _ = c
            alpha = alpha * 0.5
            return i + 1, alpha, fun(s.x + alpha * p)

        i, alpha, f_new = lax.while_loop(ls_cond, ls_body,
                                         (jnp.array(0, jnp.int32), jnp.ones((), dt),
                                          fun(s.x + p)))
        found = f_new <= s.f + _ARMIJO * alpha * slope
        step = alpha * p
        x_new = s.x + step
        f_new, g_new = value_and_grad(x_new)
        y = g_new - s.g
        ys = jnp.dot(y, step)
        # skip the update when the curvature condition fails: h stays positive definite
        first = s.k == 0
        h0 = jnp.where(first & (ys > 0), ys / jnp.maximum(jnp.dot(y, y), 1e-300) * eye, h)
        rho = 1.0 / jnp.where(ys > 0, ys, 1.0)
        left = eye - rho * jnp.outer(step, y)
        h_upd = left @ h0 @ left.T + rho * jnp.outer(step, step)
        h_new = jnp.where(ys > 0, h_upd, h)
        k = s.k + 1
        status = jnp.where(~found, 3,
                           jnp.where(norm_inf(g_new) <= gtol, 0,
                                     jnp.where(k >= maxiter, 1, -1))).astype(jnp.int32)
        keep = found
        return _State(k, jnp.where(keep, x_new, s.x), jnp.where(keep, f_new, s.f),
                      jnp.where(keep, g_new, s.g), jnp.where(keep, h_new, s.h), status,
                      s.nfev + i + 2)

    status0 = jnp.where(norm_inf(g0) <= gtol, 0, running).astype(jnp.int32)
    if maxiter <= 0:
        status0 = jnp.where(status0 == 0, 0, 1).astype(jnp.int32)
    init = _State(jnp.array(0, jnp.int32), x0, f0, g0, eye, status0, jnp.array(1, jnp.int32))
    s = lax.while_loop(cond, body, init)
    return OptimizeResults(x=s.x, success=s.status == 0, status=s.status, fun=s.f, jac=s.g,
                           hess_inv=s.h, nfev=s.nfev, njev=s.k + 1, nit=s.k)


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimize ``fun(x, *args)`` over a 1-d ``x`` from ``x0``; ``method="BFGS"`` (quasi-Newton
    with a backtracking Armijo line search; the gradient comes from ``funcgrad.grad``).
    ``tol`` (or ``options["gtol"]``, default 1e-5) bounds the gradient's largest entry at
    convergence; ``options["maxiter"]`` defaults to ``200 * len(x0)``.

    Example:
        >>> rosen = lambda x: (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        >>> from funcgrad.scipy.optimize import minimize
        >>> minimize(rosen, jnp.zeros(2), method="BFGS").x          # about [1, 1]
        Array([1., 1.], dtype=float32)
    """
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise ValueError(f"scipy.optimize.minimize: method must be 'BFGS', got {method!r}")
    options = dict(options or {})
    unknown = set(options) - {"gtol", "maxiter", "norm"}
    if unknown:
        raise ValueError(f"scipy.optimize.minimize: unknown options {sorted(unknown)} (BFGS "
                         f"takes gtol, maxiter)")
    if options.get("norm", float("inf")) != float("inf"):
        raise ValueError("scipy.optimize.minimize: only norm=inf is supported for gtol")
    x0 = jnp.asarray(x0)
    if x0.ndim != 1:
        raise ValueError(f"scipy.optimize.minimize: x0 must be 1-d, got shape {x0.shape}")
    if not jnp.issubdtype(x0.dtype, jnp.floating):
        x0 = x0.astype(dtypes.default_float())
    gtol = options.get("gtol", 1e-5 if tol is None else tol)
    maxiter = int(options.get("maxiter", 200 * x0.shape[0]))

    def objective(x):
        out = fun(x, *args)
        out = jnp.asarray(out)
        if out.shape != ():
            raise ValueError(f"scipy.optimize.minimize: fun must return a scalar, got shape "
                             f"{out.shape}")
        return out.astype(x0.dtype)

    return _bfgs(objective, x0, gtol, maxiter)
