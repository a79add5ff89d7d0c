"""Testing helpers: ``check_grads`` compares derivatives with central finite differences.

Example:
    >>> from funcgrad.test_util import check_grads
    >>> check_grads(jnp.sin, (0.5,), order=2)  # raises AssertionError on a mismatch
    >>> check_grads(lambda x: jnp.where(x > 0, x, 2 * x), (0.5,), order=1)
"""
import numpy as np

from funcgrad import tree_util
from funcgrad.config import config
from funcgrad.core import dtypes


def _as_f64(x):
    a = np.asarray(x)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    if a.dtype.kind == "c":
        return a.astype(np.complex128)
    return a


def _inexact(x):
    return np.asarray(x).dtype.kind in "fc"


def _rand_like(rng, x):
    x = np.asarray(x)
    v = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        v = v + 1j * rng.standard_normal(x.shape)
    return v.astype(x.dtype)


def _inner(a, b):
    """Real inner product of two pytrees of arrays (real part for complex)."""
    la, lb = tree_util.tree_leaves(a), tree_util.tree_leaves(b)
    total = 0.0
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype == dtypes.float0 or y.dtype == dtypes.float0:
            continue
        total += float(np.real(np.sum(np.conj(x) * y)))
    return total


def _close(name, a, b, atol, rtol):
    la, lb = tree_util.tree_leaves(a), tree_util.tree_leaves(b)
    if len(la) != len(lb):
        raise AssertionError(f"check_grads ({name}): {len(la)} vs {len(lb)} leaves")
    for x, y in zip(la, lb):
        x = np.asarray(x, dtype=np.result_type(np.asarray(x).dtype, np.float64))
        y = np.asarray(y, dtype=np.result_type(np.asarray(y).dtype, np.float64))
        if x.shape != y.shape:
            raise AssertionError(f"check_grads ({name}): shapes {x.shape} and {y.shape} differ")
        if not np.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True):
            err = np.max(np.abs(x - y)) if x.size else 0.0
            raise AssertionError(f"check_grads ({name}): derivatives differ (max abs error "
                                 f"{err:.3g}, atol={atol}, rtol={rtol}):\n{x}\nvs finite "
                                 f"differences\n{y}")


def _scale(tree, s):
    return tree_util.tree_map(lambda x: np.asarray(x) * s, tree)


def _add(a, b):
    return tree_util.tree_map(lambda x, y: np.asarray(x) + np.asarray(y), a, b)


def _numerical_jvp(f, args, tangents, eps):
    plus = f(*[a + eps * t for a, t in zip(args, tangents)])
    minus = f(*[a - eps * t for a, t in zip(args, tangents)])
    return tree_util.tree_map(
        lambda p, m: (np.asarray(p, np.complex128 if np.iscomplexobj(p) else np.float64) -
                      np.asarray(m)) / (2 * eps), plus, minus)


def _check_order(f, args, order, modes, atol, rtol, eps, rng):
    from funcgrad.transforms.ad import jvp, vjp
    tangents = [_rand_like(rng, a) for a in args]
    if "fwd" in modes:
        _, t_out = jvp(f, tuple(args), tuple(tangents))
        num = _numerical_jvp(f, args, tangents, eps)
        _close(f"forward mode, order {order}", t_out, num, atol, rtol)
    if "rev" in modes:
        out, f_vjp = vjp(f, *args)
        ct = tree_util.tree_map(lambda o: _rand_like(rng, o), out)
        cts_in = f_vjp(ct)
        num = _numerical_jvp(f, args, tangents, eps)
        # reverse mode follows the transpose (not adjoint) convention: <u, J t> = <J^T u, t>
        lhs = sum(float(np.real(np.sum(np.asarray(c) * np.asarray(t))))
                  for c, t in zip(tree_util.tree_leaves(cts_in), tangents)
                  if np.asarray(c).dtype != dtypes.float0)
        rhs = sum(float(np.real(np.sum(np.asarray(c) * np.asarray(n))))
                  for c, n in zip(tree_util.tree_leaves(ct), tree_util.tree_leaves(num)))
        _close(f"reverse mode, order {order}", np.asarray(lhs), np.asarray(rhs), atol,
               rtol)
    if order > 1:
        if "fwd" in modes:
            t2 = [_rand_like(rng, a) for a in args]

            def f_jvp(*xs):
                return jvp(f, tuple(xs), tuple(t2))[1]
            _check_order(f_jvp, args, order - 1, modes, atol, rtol, eps, rng)
        if "rev" in modes:
            out = f(*args)
            ct2 = tree_util.tree_map(lambda o: _rand_like(rng, o), out)

            def f_vjp(*xs):
                return vjp(f, *xs)[1](ct2)
            _check_order(f_vjp, args, order - 1, modes, atol, rtol, eps, rng)


def _conj_tree(t):
    return tree_util.tree_map(lambda x: np.conj(np.asarray(x)), t)


def check_grads(f, args, order, modes=("fwd", "rev"), atol=None, rtol=None, eps=None):
    """Check derivatives of ``f`` at ``args`` up to ``order`` against central finite
    differences, in float64 (x64 is enabled for the check and restored afterwards).

    ``modes``: "fwd" checks ``jvp`` along random directions, "rev" checks ``vjp`` through
    ``<u, J t>``. Higher orders check the derivative functions themselves. Integer arguments are
    held fixed. Raises AssertionError with the mismatch.

    Example:
        >>> from funcgrad.test_util import check_grads
        >>> check_grads(lambda x, y: jnp.sin(x) * y, (0.3, 2.0), order=2)
    """
    if isinstance(modes, str):
        modes = (modes,)
    for m in modes:
        if m not in ("fwd", "rev"):
            raise ValueError(f"check_grads: unknown mode {m!r} (expected 'fwd' or 'rev')")
    old = config.enable_x64
    config.update("enable_x64", True)
    try:
        atol = 1e-5 if atol is None else atol
        rtol = 1e-5 if rtol is None else rtol
        eps = 1e-4 if eps is None else eps
        args = [_as_f64(a) for a in args]
        diff_pos = [i for i, a in enumerate(args) if _inexact(a)]
        if not diff_pos:
            raise TypeError("check_grads: no float or complex argument to differentiate")

        def f_diff(*xs):
            full = list(args)
            for i, x in zip(diff_pos, xs):
                full[i] = x
            return f(*full)

        rng = np.random.default_rng(0)
        _check_order(f_diff, [args[i] for i in diff_pos], order, tuple(modes), atol, rtol, eps,
                     rng)
    finally:
        config.update("enable_x64", old)


def count_equations(jaxpr, name):
    """How many equations of ``jaxpr`` (a Jaxpr or ClosedJaxpr) apply the primitive ``name``,
    counting those inside sub-jaxprs (jit, remat, control flow bodies).

    Example:
        >>> from funcgrad.test_util import count_equations
        >>> count_equations(funcgrad.make_jaxpr(funcgrad.grad(jnp.sin))(1.0), "cos")
        1
    """
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    n = 0
    for eqn in jaxpr.eqns:
        n += eqn.prim.name == name
        for value in eqn.params.values():
            for inner in (value if isinstance(value, (tuple, list)) else (value,)):
                if hasattr(inner, "eqns"):
                    n += count_equations(inner, name)
    return n


def registered_primitives():
    """{Primitive: where it is defined} for every primitive that transformations can meet
    (``core.primitive.all_primitives()`` once all of funcgrad is imported): what rule
    checklists iterate over.

    Example:
        >>> from funcgrad.test_util import registered_primitives
        >>> prims = registered_primitives()
        >>> [w for p, w in prims.items() if p.name == "exp"]
        ['funcgrad.lax.elementwise']
    """
    import funcgrad  # noqa: F401  (importing funcgrad defines every primitive)
    from funcgrad.core.primitive import all_primitives
    return {p: p.defined_in for p in all_primitives()}
