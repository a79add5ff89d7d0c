"""Check funcgrad.lax.linalg / funcgrad.numpy.linalg on the default device against NumPy.

Run:  PYTHONPATH=/path/to/repo python3 tools/gpu_linalg_check.py [NAME_FILTER ...]
      (FUNCGRAD_PLATFORM=cpu to check the script itself on the CPU; with filters, only checks
      whose name contains one of them run, e.g. ``svd eig``; VERBOSE=1 prints tracebacks)

Every check runs in its own try/except and prints one line: OK or FAIL, its name, the largest
relative error it measured (reconstruction, orthogonality or difference from NumPy) and, on
failure, the error. Reconstructions are computed in NumPy float64 from the returned factors, so
the GPU's matmul precision does not enter them (and float32 products inside funcgrad run at
"highest" precision, as in the test suite, not TF32). Each check's name is printed before it
runs, so a crash inside a kernel shows which check it was. The first lines list the cuSOLVER
targets the plugin offers, the last ones those that were registered, and count the failures.
"""
import os
import sys
import time
import traceback

import numpy as np

import funcgrad
import funcgrad.numpy as jnp
from funcgrad.lax import linalg as L
from funcgrad.lax import linalg_gpu

RESULTS = []
ONLY = sys.argv[1:]


def tol(dtype):
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-9


def rel(x, ref):
    x = np.asarray(x, np.complex128)
    ref = np.asarray(ref, np.complex128)
    scale = max(np.abs(ref).max(initial=0.0), 1e-30)
    return float(np.abs(x - ref).max(initial=0.0) / scale)


def check(name, fn, limit):
    """Run ``fn`` (returns the max relative error, or a list of them); record OK/FAIL."""
    if ONLY and not any(word in name for word in ONLY):
        return
    print(f"{name:<60} ", end="", flush=True)
    t0 = time.perf_counter()
    try:
        err = fn()
        err = max(err) if isinstance(err, (list, tuple)) else err
        ok = bool(np.isfinite(err) and err <= limit)
        msg = f"err={err:.2e} (limit {limit:.0e})"
    except Exception as exc:   # keep going: one failure must not hide the others
        ok, msg = False, f"{type(exc).__name__}: {exc}"
        if os.environ.get("VERBOSE"):
            traceback.print_exc()
    dt = time.perf_counter() - t0
    RESULTS.append((ok, name))
    print(f"{'OK  ' if ok else 'FAIL'} {msg[:600]}  [{dt:.2f}s]", flush=True)


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def eye_err(q):
    """Orthogonality of the columns of ``q``: max |q^H q - I|."""
    q = np.asarray(q, np.complex128)
    return float(np.abs(H(q) @ q - np.eye(q.shape[-1])).max(initial=0.0))


def eigvals_err(w, w_ref):
    """Relative distance between two sets of eigenvalues (per matrix, greedy matching)."""
    w = np.asarray(w, np.complex128).reshape(-1, np.shape(w)[-1])
    w_ref = np.asarray(w_ref, np.complex128).reshape(w.shape)
    worst = 0.0
    for got, want in zip(w, w_ref):
        left = list(got)
        for x in want:
            i = int(np.argmin([abs(y - x) for y in left]))
            worst = max(worst, abs(left.pop(i) - x) / max(np.abs(want).max(), 1e-30))
    return worst


def f64(x):
    return np.asarray(x).astype(np.complex128)


# --- decompositions ----------------------------------------------------------------------------
def run_decompositions(dtype, batch, rng):
    tag = f"{np.dtype(dtype).name}{list(batch) if batch else ''}"
    lim = tol(dtype)

    def cholesky():
        a = rand(rng, batch + (5, 5), dtype)
        spd = a @ H(a) + 5 * np.eye(5, dtype=dtype)
        out = np.asarray(L.cholesky(spd))
        errs = [rel(out, np.linalg.cholesky(f64(spd))),
                float(np.abs(np.triu(out, 1)).max())]
        bad = np.asarray(L.cholesky(-spd))          # not positive definite: all NaN
        if not np.isnan(bad).all():
            raise AssertionError("cholesky of a negative definite matrix is not all NaN")
        return errs
    check(f"cholesky {tag}", cholesky, lim)

    def triangular(left_side, lower, transpose_a, conjugate_a, unit_diagonal):
        def run():
            a = rand(rng, batch + (4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
            b = rand(rng, batch + ((4, 3) if left_side else (3, 4)), dtype)
            x = np.asarray(L.triangular_solve(a, b, left_side=left_side, lower=lower,
                                              transpose_a=transpose_a,
                                              conjugate_a=conjugate_a,
                                              unit_diagonal=unit_diagonal), np.complex128)
            t = f64(np.tril(a) if lower else np.triu(a))
            if unit_diagonal:
                t[..., np.arange(4), np.arange(4)] = 1
            if conjugate_a:
                t = np.conj(t)
            if transpose_a:
                t = np.swapaxes(t, -1, -2)
            return rel(t @ x if left_side else x @ t, b)
        return run
    for left_side in (True, False):
        for lower in (True, False):
            for transpose_a in (False, True):
                for conjugate_a in (False, True):
                    for unit in (False, True):
                        check(f"triangular_solve {tag} left={int(left_side)} lower={int(lower)} "
                              f"T={int(transpose_a)} C={int(conjugate_a)} unit={int(unit)}",
                              triangular(left_side, lower, transpose_a, conjugate_a, unit), lim)

    def lu(m, n):
        def run():
            a = rand(rng, batch + (m, n), dtype)
            lu_, piv, perm = (np.asarray(o) for o in L.lu(a))
            k = min(m, n)
            lower = np.tril(lu_[..., :, :k], -1) + np.eye(m, k)
            upper = np.triu(lu_[..., :k, :])
            rec = f64(lower) @ f64(upper)
            pa = np.take_along_axis(f64(a), perm[..., :, None].astype(np.int64), axis=-2)
            perm2 = np.asarray(L.lu_pivots_to_permutation(piv, m))
            if not (perm2 == perm).all():
                raise AssertionError("permutation != lu_pivots_to_permutation(pivots)")
            if not (np.sort(perm, axis=-1) == np.arange(m)).all():
                raise AssertionError(f"not a permutation: {perm}")
            return rel(rec, pa)
        return run
    for m, n in ((4, 4), (6, 3), (3, 6)):
        check(f"lu {tag} {m}x{n} (P@L@U)", lu(m, n), lim)

    def qr(m, n, full):
        def run():
            a = rand(rng, batch + (m, n), dtype)
            q, r = (np.asarray(o) for o in L.qr(a, full_matrices=full))
            k = min(m, n)
            want_q = (m, m) if full else (m, k)
            if q.shape[-2:] != want_q:
                raise AssertionError(f"q shape {q.shape}, expected {want_q}")
            return [rel(f64(q) @ f64(r), a), eye_err(q), float(np.abs(np.tril(r, -1)).max())]
        return run
    for m, n in ((5, 3), (3, 5), (4, 4)):
        for full in (True, False):
            check(f"qr {tag} {m}x{n} full={int(full)} (QR=A, Q^H Q=I)", qr(m, n, full), lim)

    def eigh(n, lower):
        def run():
            a = rand(rng, batch + (n, n), dtype)
            a = a + H(a)
            v, w = (np.asarray(o) for o in L.eigh(a, lower=lower))
            rec = f64(v) @ (w[..., :, None] * H(f64(v)))
            w_ref = np.linalg.eigvalsh(f64(a))
            return [rel(rec, a), eye_err(v), rel(w, w_ref)]
        return run
    for n in (5, 40):              # cuSOLVER: Jacobi (syevj) for n <= 32, syevd above
        for lower in (True, False):
            check(f"eigh {tag} n={n} lower={int(lower)}", eigh(n, lower), lim * (10 if n > 32
                                                                               else 1))

    def svd(m, n, full, uv):
        def run():
            a = rand(rng, batch + (m, n), dtype)
            s_ref = np.linalg.svd(f64(a), compute_uv=False)
            if not uv:
                s = np.asarray(L.svd(a, full_matrices=full, compute_uv=False))
                return rel(s, s_ref)
            s, u, vt = (np.asarray(o) for o in L.svd(a, full_matrices=full, compute_uv=True))
            k = min(m, n)
            want = ((m, m), (n, n)) if full else ((m, k), (k, n))
            if (u.shape[-2:], vt.shape[-2:]) != want:
                raise AssertionError(f"u {u.shape}, vt {vt.shape}, expected {want}")
            rec = (f64(u)[..., :, :k] * s[..., None, :]) @ f64(vt)[..., :k, :]
            return [rel(rec, a), rel(s, s_ref), eye_err(u), eye_err(H(vt))]
        return run
    for m, n in ((6, 4), (4, 6), (5, 5)):
        for full in (True, False):
            check(f"svd {tag} {m}x{n} full={int(full)}", svd(m, n, full, True), lim)
        check(f"svd {tag} {m}x{n} compute_uv=False", svd(m, n, True, False), lim)

    def eig(right):
        def run():
            a = rand(rng, batch + (5, 5), dtype)
            outs = L.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=right)
            w = np.asarray(outs[0])
            exact = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
            errs = [eigvals_err(w, np.linalg.eigvals(exact))]
            if right:
                v = f64(outs[1])
                errs.append(rel(f64(a) @ v, v * w[..., None, :]))
                errs.append(float(np.abs(np.linalg.norm(v, axis=-2) - 1).max()))
            return errs
        return run
    def eig_left():
        a = rand(rng, batch + (5, 5), dtype)
        w, vl, vr = (np.asarray(t) for t in L.eig(a))
        vlh = np.conj(np.swapaxes(f64(vl), -1, -2))
        return [rel(vlh @ f64(a), w[..., :, None] * vlh),
                rel(f64(a) @ f64(vr), f64(vr) * w[..., None, :]),
                float(np.abs(np.linalg.norm(f64(vl), axis=-2) - 1).max())]
    check(f"eig {tag} values", eig(False), lim * 10)
    check(f"eig {tag} right vectors", eig(True), lim * 10)
    check(f"eig {tag} left and right vectors", eig_left, lim * 10)


# --- funcgrad.numpy.linalg ----------------------------------------------------------------------
def run_numpy_linalg(dtype, rng):
    tag = np.dtype(dtype).name
    lim = tol(dtype)
    a = rand(rng, (2, 4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
    b = rand(rng, (2, 4, 3), dtype)
    r = rand(rng, (6, 4), dtype)
    y = rand(rng, (6, 2), dtype)
    check(f"jnp.linalg.solve {tag}",
          lambda: rel(jnp.linalg.solve(a, b), np.linalg.solve(f64(a), f64(b))), lim)
    check(f"jnp.linalg.inv {tag}", lambda: rel(jnp.linalg.inv(a), np.linalg.inv(f64(a))), lim)
    check(f"jnp.linalg.det {tag}", lambda: rel(jnp.linalg.det(a), np.linalg.det(f64(a))), lim)

    def slogdet():
        sign, logdet = jnp.linalg.slogdet(a)
        sign_ref, logdet_ref = np.linalg.slogdet(f64(a))
        return [rel(sign, sign_ref), rel(logdet, logdet_ref)]
    check(f"jnp.linalg.slogdet {tag}", slogdet, lim)
    check(f"jnp.linalg.pinv {tag}", lambda: rel(jnp.linalg.pinv(r), np.linalg.pinv(f64(r))),
          lim * 10)

    def lstsq():
        x = jnp.linalg.lstsq(r, y)[0]
        return rel(x, np.linalg.lstsq(f64(r), f64(y), rcond=None)[0])
    check(f"jnp.linalg.lstsq {tag}", lstsq, lim * 10)

    def jitted_solve():
        f = funcgrad.jit(lambda p, q: jnp.linalg.solve(p, q))
        return rel(f(a, b), np.linalg.solve(f64(a), f64(b)))
    check(f"jit(jnp.linalg.solve) {tag}", jitted_solve, lim)

    def vmapped_eigh():
        s = a + H(a)
        w = funcgrad.vmap(jnp.linalg.eigvalsh)(s)
        return rel(w, np.linalg.eigvalsh(f64(s)))
    check(f"vmap(jnp.linalg.eigvalsh) {tag}", vmapped_eigh, lim)


def run_gradients(dtype, rng):
    """Gradients of real-valued functions of real matrices, against closed forms."""
    tag = np.dtype(dtype).name
    lim = tol(dtype) * 10
    a = rand(rng, (4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
    b = rand(rng, (4, 2), dtype)

    def grad_solve():
        # f(A, b) = sum(solve(A, b)^2): dF/db = A^-T 2x, dF/dA = -A^-T 2x x^T
        ga, gb = funcgrad.grad(lambda p, q: jnp.sum(jnp.linalg.solve(p, q) ** 2),
                               argnums=(0, 1))(a, b)
        x = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
        gb_ref = np.linalg.solve(a.astype(np.float64).T, 2 * x)
        return [rel(gb, gb_ref), rel(ga, -gb_ref @ x.T)]
    check(f"grad(sum(solve(A, b)^2)) {tag}", grad_solve, lim)

    def grad_eigh():
        # f(A) = sum(c * eigvalsh(A)): dF/dA = V diag(c) V^T (A symmetric, distinct eigenvalues)
        s = a + a.T
        c = np.arange(1, 5, dtype=dtype)
        g = funcgrad.grad(lambda p: jnp.sum(jnp.linalg.eigh(p)[0] * c))(s)
        w, v = np.linalg.eigh(s.astype(np.float64))
        return rel(g, (v * c) @ v.T)
    check(f"grad(sum(c * eigh(A)[0])) {tag}", grad_eigh, lim)


def main():
    print(f"funcgrad backend: {funcgrad.default_backend()}  devices: {funcgrad.devices()}")
    try:
        import jaxlib
        print(f"jaxlib {jaxlib.__version__}", end="")
        for pkg in linalg_gpu.PLUGIN_PACKAGES:
            try:
                mod = __import__(pkg + ".version", fromlist=["x"])
                print(f", {pkg} {getattr(mod, '__version__', getattr(mod, '_version', '?'))}",
                      end="")
            except ImportError:
                pass
        print()
    except Exception as exc:
        print(f"(versions unavailable: {exc})")
    print(f"cuSOLVER targets offered by the plugin: {linalg_gpu.solver_targets()}", flush=True)
    funcgrad.config.update("default_matmul_precision", "highest")
    rng = np.random.default_rng(0)

    for x64 in (False, True):
        funcgrad.config.update("enable_x64", x64)
        dtypes = (np.float64, np.complex128) if x64 else (np.float32, np.complex64)
        for dtype in dtypes:
            for batch in ((), (3,)):
                run_decompositions(dtype, batch, rng)
            run_numpy_linalg(dtype, rng)
        run_gradients(dtypes[0], rng)
    funcgrad.config.update("enable_x64", False)

    print(f"cuSOLVER targets registered: {linalg_gpu.registered_targets()}")
    failed = [name for ok, name in RESULTS if not ok]
    print(f"{len(RESULTS) - len(failed)} OK, {len(failed)} FAIL of {len(RESULTS)} checks")
    for name in failed:
        print(f"  FAILED: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
