"""L-BFGS with PyTorch's semantics (``torch.optim.LBFGS``): ``step(closure)`` runs up to
``max_iter`` quasi-Newton iterations, re-evaluating the closure, with a fixed step ``lr`` or a
strong-Wolfe line search (``line_search_fn="strong_wolfe"``).

The closure computes the loss at the current parameters and its gradients. PyTorch's closure
calls ``loss.backward()``; here it returns them: either ``(loss, grads)`` with ``grads`` in any
form ``Optimizer.step`` takes (a gradient module from ``funcgrad.grad``, a dict by parameter
name, a list), or just ``loss`` after setting each parameter's ``.grad``. The two-loop recursion
and the line search run on the host on flat NumPy vectors in the parameters' dtype (PyTorch
also reads every decision back with ``.item()``); each closure call is one device computation
(jit it for speed).

Example:
    >>> import funcgrad.optim as optim
    >>> w = nn.Parameter(jnp.array([-1.5, 2.0]))
    >>> def rosenbrock(v):
    ...     return (1 - v[0]) ** 2 + 100 * (v[1] - v[0] ** 2) ** 2
    >>> opt = optim.LBFGS([w], line_search_fn="strong_wolfe", max_iter=100)
    >>> def closure():
    ...     loss, g = funcgrad.value_and_grad(rosenbrock)(w.data)
    ...     return loss, [g]
    >>> _ = opt.step(closure)
    >>> np.round(np.asarray(w.data), 4)
    array([1., 1.], dtype=float32)
"""
import numpy as np

import funcgrad.numpy as jnp
from funcgrad.nn.module import Parameter
from funcgrad.optim.optimizer import Optimizer

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimizer of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to ``bounds``
    (default: between the points); their midpoint when the cubic has no minimum."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if disc < 0:
        return (lo + hi) / 2.0
    d2 = np.sqrt(disc)
    if x1 <= x2:
        m = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        m = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(m, lo), hi)


class _Point:
    """A trial step ``t`` with its loss, flat gradient and directional derivative."""
    __slots__ = ("t", "f", "g", "gtd")

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """PyTorch's (and torch7's lswolfe) strong-Wolfe line search along ``d`` from step 0
    (loss ``f``, gradient ``g``, slope ``gtd``), first trying step ``t``. Returns (loss,
    gradient, step, evaluations)."""
    d_norm = float(np.max(np.abs(d)))
    origin = _Point(0.0, f, g, gtd)
    f_new, g_new = evaluate(t)
    evals, ls_iter = 1, 0
    new = _Point(t, f_new, g_new, float(g_new @ d))
    prev = origin
    bracket, done = None, False
    # bracketing phase: grow the step until the interval [prev, new] holds a Wolfe point
    while ls_iter < max_ls:
        if new.f > f + c1 * new.t * gtd or (ls_iter > 1 and new.f >= prev.f):
            bracket = [prev, new]
            break
        if abs(new.gtd) <= -c2 * gtd:
            bracket, done = [new], True
            break
        if new.gtd >= 0:
            bracket = [prev, new]
            break
        t_next = _cubic_min(prev.t, prev.f, prev.gtd, new.t, new.f, new.gtd,
                            bounds=(new.t + 0.01 * (new.t - prev.t), new.t * 10))
        prev = new
        f_new, g_new = evaluate(t_next)
        evals += 1
        ls_iter += 1
        new = _Point(t_next, f_new, g_new, float(g_new @ d))
    if ls_iter == max_ls:
        bracket = [origin, new]
    # zoom phase: shrink the bracket around a point satisfying both conditions
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stuck = False
    while not done and ls_iter < max_ls:
        a, b = bracket
        if abs(b.t - a.t) * d_norm < tolerance_change:
            break
        t = _cubic_min(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
        top, bottom = max(a.t, b.t), min(a.t, b.t)
        margin = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < margin:
            # too close to an end: after a second time (or at an end) step 10% inside
            if stuck or t >= top or t <= bottom:
                t = top - margin if abs(t - top) < abs(t - bottom) else bottom + margin
                stuck = False
            else:
                stuck = True
        else:
            stuck = False
        f_new, g_new = evaluate(t)
        evals += 1
        ls_iter += 1
        trial = _Point(t, f_new, g_new, float(g_new @ d))
        if trial.f > f + c1 * t * gtd or trial.f >= bracket[low].f:
            bracket[high] = trial
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(trial.gtd) <= -c2 * gtd:
                done = True
            elif trial.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = trial
    best = bracket[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """Limited-memory BFGS (see the module docstring for the closure). Arguments as PyTorch's:
    ``lr`` (the step, scaled on the first iteration by 1 / |g|_1), ``max_iter`` iterations per
    ``step``, ``max_eval`` closure calls per ``step`` (default max_iter * 1.25),
    ``tolerance_grad`` (stop when max |g| is below), ``tolerance_change`` (stop when the step
    or the loss changes by less), ``history_size`` curvature pairs, ``line_search_fn`` None or
    ``"strong_wolfe"``. One parameter group, as in PyTorch. ``step`` returns the closure's
    first loss.

    Example:
        >>> model = nn.Linear(2, 1)
        >>> x = jnp.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]); y = x @ jnp.array([[2.0], [-1.0]])
        >>> opt = optim.LBFGS(model.parameters(), lr=1, line_search_fn="strong_wolfe")
        >>> loss_fn = lambda m: F.mse_loss(m(x), y)
        >>> first = opt.step(lambda: funcgrad.value_and_grad(loss_fn)(model))
        >>> float(loss_fn(model)) < 1e-8 < float(first)
        True
    """

    def __init__(self, params, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if lr <= 0:
            raise ValueError(f"LBFGS: invalid learning rate {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._lbfgs = {"func_evals": 0, "n_iter": 0}

    def _init_state(self, p, g, hyper, f):
        return {}

    def _update(self, p, g, st, h, f):
        raise TypeError("LBFGS: use step(closure); it has no per-parameter update")

    # --- flat views of the parameters -----------------------------------------------------------
    def _params(self):
        return self.param_groups[0]["params"]

    def _flat_params(self):
        return np.concatenate([np.asarray(p.data).ravel() for p in self._params()])

    def _set_flat(self, flat):
        i = 0
        for p in self._params():
            n = int(np.prod(p.shape, dtype=np.int64))
            p.data = jnp.asarray(flat[i:i + n].reshape(p.shape).astype(np.dtype(p.dtype)))
            i += n

    def _evaluate(self, closure):
        out = closure()
        grads = None
        if isinstance(out, tuple) and len(out) == 2:
            out, grads = out
        gs = self._grads_for(grads)
        parts = []
        for p, g in zip(self._params(), gs):
            if g is None:
                parts.append(np.zeros(int(np.prod(p.shape, dtype=np.int64)), p.dtype))
            else:
                g = g.data if isinstance(g, Parameter) else g
                parts.append(np.asarray(g, dtype=np.dtype(p.dtype)).ravel())
        return out, float(np.asarray(out)), np.concatenate(parts)

    def step(self, closure=None):
        """Run up to ``max_iter`` iterations; returns the loss of the first closure call.

        Example:
            >>> w = nn.Parameter(jnp.array([3.0]))
            >>> opt = optim.LBFGS([w])
            >>> loss = opt.step(lambda: (jnp.sum((w.data - 1) ** 2), [2 * (w.data - 1)]))
            >>> float(loss), round(float(w.data[0]), 5)
            (4.0, 1.0)
        """
        if closure is None:
            raise TypeError("LBFGS.step needs a closure that returns the loss and its "
                            "gradients, e.g. lambda: funcgrad.value_and_grad(loss_fn)(model)")
        h = self.param_groups[0]
        lr, max_iter, max_eval = h["lr"], h["max_iter"], h["max_eval"]
        tol_grad, tol_change = h["tolerance_grad"], h["tolerance_change"]
        state = self._lbfgs
        orig_loss, loss, flat_grad = self._evaluate(closure)
        evals = 1
        state["func_evals"] += 1
        if np.max(np.abs(flat_grad)) <= tol_grad:
            return orig_loss
        d, t = state.get("d"), state.get("t")
        dirs, steps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        it = 0
        while it < max_iter:
            it += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, dirs, steps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                d, h_diag = self._direction(flat_grad, prev_grad, d, t, dirs, steps, ro,
                                            h_diag, h["history_size"])
            prev_grad, prev_loss = flat_grad.copy(), loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.sum(np.abs(flat_grad)))) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tol_change:
                break
            if h["line_search_fn"] == "strong_wolfe":
                x0 = self._flat_params()

                def evaluate(step_size, x0=x0, d=d):
                    self._set_flat(x0 + step_size * d)
                    _, f_val, g_val = self._evaluate(closure)
                    self._set_flat(x0)
                    return f_val, g_val
                loss, flat_grad, t, ls_evals = _strong_wolfe(evaluate, t, d, loss, flat_grad,
                                                             gtd)
                self._set_flat(x0 + t * d)
                converged = np.max(np.abs(flat_grad)) <= tol_grad
            else:
                self._set_flat(self._flat_params() + t * d)
                ls_evals = 0
                converged = False
                if it != max_iter:
                    _, loss, flat_grad = self._evaluate(closure)
                    converged = np.max(np.abs(flat_grad)) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if (it == max_iter or evals >= max_eval or converged
                    or np.max(np.abs(d * t)) <= tol_change
                    or abs(loss - prev_loss) < tol_change):
                break
        state.update(d=d, t=t, old_dirs=dirs, old_stps=steps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _direction(g, prev_g, d, t, dirs, steps, ro, h_diag, history_size):
        """Update the curvature history with the last step, then the two-loop recursion:
        -H g for the implicit inverse Hessian H."""
        y, s = g - prev_g, d * t
        ys = float(y @ s)
        if ys > 1e-10:
            if len(dirs) == history_size:
                dirs.pop(0), steps.pop(0), ro.pop(0)
            dirs.append(y), steps.append(s), ro.append(1.0 / ys)
            h_diag = ys / float(y @ y)
        q = -g
        alpha = [0.0] * len(dirs)
        for i in range(len(dirs) - 1, -1, -1):
            alpha[i] = float(steps[i] @ q) * ro[i]
            q = q - alpha[i] * dirs[i]
        r = q * h_diag
        for i in range(len(dirs)):
            beta = float(dirs[i] @ r) * ro[i]
            r = r + (alpha[i] - beta) * steps[i]
        return r.astype(g.dtype), h_diag

    def state_dict(self):
        """PyTorch's layout: the L-BFGS history under ``state[0]``."""
        out = super().state_dict()
        out["state"] = {0: dict(self._lbfgs)}
        return out

    def load_state_dict(self, state_dict):
        super().load_state_dict({"param_groups": state_dict["param_groups"], "state": {}})
        self._lbfgs = dict(state_dict["state"].get(0, {"func_evals": 0, "n_iter": 0}))
