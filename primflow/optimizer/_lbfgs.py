"""L-BFGS with an optional strong-Wolfe line search (Nocedal & Wright, Numerical
Optimization, 2nd ed.: Algorithm 7.4 for the two-loop recursion, Algorithms 3.5/3.6 for
the line search, eq. 3.59 for the cubic interpolation).

The optimizer works on the parameters joined into one flat vector. Vectors are primflow
tensors (so the arithmetic goes through the backend); scalars (losses, step lengths,
directional derivatives) are Python floats.
"""

from __future__ import annotations

import math

from ..core.state import enable_grad, no_grad
from ..core.tensor import Tensor
from ..ops import math as _math
from ..ops import reduction as _red
from ..ops.helpers import cast
from ..ops.creation import zeros_like
from ..ops.manipulation import concat, reshape
from ._optimizer import Optimizer

__all__ = ["LBFGS", "strong_wolfe"]


def _dot(a, b):
    return float(_red.sum(_math.multiply(a, b)))


def _max_abs(a):
    return float(_red.max(_math.abs(a))) if a.size else 0.0


def _cubic_minimizer(t1, f1, g1, t2, f2, g2, lo, hi):
    """Minimiser of the cubic that matches values ``f`` and slopes ``g`` at ``t1`` and
    ``t2``, clamped to ``[lo, hi]``; the interval's midpoint when the cubic has none.

    With ``d1 = g1 + g2 - 3 (f1 - f2) / (t1 - t2)`` and
    ``d2 = sign(t2 - t1) sqrt(d1^2 - g1 g2)``, the minimiser is
    ``t2 - (t2 - t1) (g2 + d2 - d1) / (g2 - g1 + 2 d2)`` (N&W eq. 3.59).
    """
    if lo > hi:
        lo, hi = hi, lo
    if t1 == t2:
        return (lo + hi) / 2.0
    d1 = g1 + g2 - 3.0 * (f1 - f2) / (t1 - t2)
    disc = d1 * d1 - g1 * g2
    if not disc >= 0.0:  # also catches nan
        return (lo + hi) / 2.0
    d2 = math.copysign(math.sqrt(disc), t2 - t1)
    denom = g2 - g1 + 2.0 * d2
    if denom == 0.0 or not math.isfinite(denom):
        return (lo + hi) / 2.0
    t = t2 - (t2 - t1) * (g2 + d2 - d1) / denom
    if not math.isfinite(t):
        return (lo + hi) / 2.0
    return min(max(t, lo), hi)


def strong_wolfe(obj, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Line search along ``d`` for a step ``t`` satisfying the strong Wolfe conditions

        f(x + t d) <= f(x) + c1 t g.d          (sufficient decrease)
        |g(x + t d).d| <= c2 |g.d|             (curvature)

    Args:
        obj: ``obj(x, t, d) -> (f, g)``, the loss (float) and gradient (tensor) at x + t d.
        x, d: the start point and a descent direction (1-d tensors).
        t: the first trial step.
        f, g, gtd: loss, gradient and directional derivative ``g.d`` (< 0) at ``x``.
        c1, c2: the Wolfe constants, ``0 < c1 < c2 < 1``.
        tolerance_change: stop when the bracket is shorter than this (in x-units).
        max_ls: the most evaluations of ``obj``.

    Returns:
        ``(f_new, g_new, t, n_evals)``. When the evaluation budget runs out first, the best
        point found that decreases ``f`` sufficiently (or ``t = 0``) is returned.

    Example:
        >>> import primflow as pf
        >>> from primflow.optimizer import strong_wolfe
        >>> def obj(x, t, d):  # f(y) = |y|^2 / 2 at y = x + t d
        ...     y = x + t * d
        ...     return float((y * y).sum()) / 2, y
        >>> x = pf.to_tensor([2.0]); g = x; d = -g
        >>> t = strong_wolfe(obj, x, 1.0, d, 2.0, g, float((g * d).sum()))[2]
        >>> t  # the exact minimiser along d
        1.0
    """
    if not gtd < 0:
        raise ValueError(f"strong_wolfe: d must be a descent direction (g.d < 0), got g.d = "
                         f"{gtd}")
    d_norm = _max_abs(d)
    f0, gtd0 = f, gtd
    # Near a minimum the loss changes by less than its rounding error (a change of g^2 when
    # the gradient is g), so the Armijo test on f alone is noise. Like Hager & Zhang's
    # approximate Wolfe conditions (CG_DESCENT, 2005), a step whose loss is within
    # f_noise of f0 also counts as sufficiently decreasing when the slope shows it:
    # g(t).d <= (2 c1 - 1) g.d is the Armijo condition of the quadratic model through
    # the two slopes, exact on quadratics and computed from gradients only.
    f_noise = 1e-6 * abs(f0) + 1e-300

    def decreases(t_, f_, gtd_):
        if f_ <= f0 + c1 * t_ * gtd0:
            return True
        return abs(f_ - f0) <= f_noise and gtd_ <= (2.0 * c1 - 1.0) * gtd0

    prev = (0.0, f, g, gtd)
    f_new, g_new = obj(x, t, d)
    n_evals = 1
    gtd_new = _dot(g_new, d)
    bracket = None
    while True:
        cur = (t, f_new, g_new, gtd_new)
        if not decreases(t, f_new, gtd_new) or (n_evals > 1 and f_new >= prev[1]):
            bracket = (prev, cur)  # lo = prev (lower f), hi = cur
            break
        if abs(gtd_new) <= -c2 * gtd0:
            return f_new, g_new, t, n_evals
        if gtd_new >= 0:
            bracket = (cur, prev)  # slope turned positive: the minimum lies behind t
            break
        if n_evals >= max_ls:
            return f_new, g_new, t, n_evals  # sufficient decrease holds; curvature not yet
        # expand: interpolate beyond t, at least a bit further and at most 10x
        t_next = _cubic_minimizer(prev[0], prev[1], prev[3], t, f_new, gtd_new,
                                  t + 0.01 * (t - prev[0]), t * 10.0)
        prev = cur
        t = t_next
        f_new, g_new = obj(x, t, d)
        n_evals += 1
        gtd_new = _dot(g_new, d)

    lo, hi = bracket
    while n_evals < max_ls:
        if abs(hi[0] - lo[0]) * d_norm < tolerance_change:
            break
        a, b = sorted((lo[0], hi[0]))
        t = _cubic_minimizer(lo[0], lo[1], lo[3], hi[0], hi[1], hi[3], a, b)
        # safeguard: stay at least 10% of the bracket away from its ends, so it shrinks
        margin = 0.1 * (b - a)
        t = min(max(t, a + margin), b - margin)
        f_new, g_new = obj(x, t, d)
        n_evals += 1
        gtd_new = _dot(g_new, d)
        cur = (t, f_new, g_new, gtd_new)
        if not decreases(t, f_new, gtd_new) or (f_new >= lo[1] and lo[0] != 0.0):
            hi = cur
        else:
            if abs(gtd_new) <= -c2 * gtd0:
                return f_new, g_new, t, n_evals
            if gtd_new * (hi[0] - lo[0]) >= 0:
                hi = lo
            lo = cur
    t, f_lo, g_lo, _ = lo
    return f_lo, g_lo, t, n_evals


class LBFGS(Optimizer):
    """Limited-memory BFGS (Paddle's ``paddle.optimizer.LBFGS`` arguments).

    ``step(closure)`` runs up to ``max_iter`` iterations; ``closure`` must clear the
    gradients, compute the loss, call ``loss.backward()`` and return the loss. It returns
    the loss of the first evaluation. The curvature history persists across ``step`` calls.

    Args:
        learning_rate: the step length (scales the first trial step of the line search).
        max_iter: iterations per ``step`` call.
        max_eval: function evaluations per ``step`` (default ``max_iter * 5 // 4``).
        tolerance_grad: stop when ``max |grad|`` falls below it.
        tolerance_change: stop when the loss or the step changes less than this.
        history_size: number of curvature pairs kept.
        line_search_fn: None (fixed steps of ``learning_rate``) or ``"strong_wolfe"``.
        weight_decay: L2Decay/L1Decay/float, added consistently to loss and gradient.

    Example:
        >>> import primflow as pf
        >>> x = pf.to_tensor([-1.5, 2.0], dtype="float64", stop_gradient=False)
        >>> opt = pf.optimizer.LBFGS(learning_rate=1.0, max_iter=200, parameters=[x],
        ...                          line_search_fn="strong_wolfe")
        >>> def closure():
        ...     opt.clear_grad()
        ...     loss = (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2
        ...     loss.backward()
        ...     return loss
        >>> _ = opt.step(closure)
        >>> [round(v, 4) for v in x.numpy().tolist()]
        [1.0, 1.0]
    """

    def __init__(self, learning_rate=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-07,
                 tolerance_change=1e-09, history_size=100, line_search_fn=None,
                 parameters=None, weight_decay=None, grad_clip=None, name=None):
        if grad_clip is not None:
            raise ValueError("LBFGS does not support grad_clip: a clipped gradient no longer "
                             "matches the loss, which breaks the line search and the "
                             "curvature pairs")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        if not isinstance(max_iter, int) or max_iter <= 0:
            raise ValueError(f"LBFGS: max_iter must be a positive int, got {max_iter!r}")
        if not isinstance(history_size, int) or history_size <= 0:
            raise ValueError(f"LBFGS: history_size must be a positive int, got "
                             f"{history_size!r}")
        super().__init__(learning_rate, parameters, weight_decay, None, name)
        self.max_iter = max_iter
        self.max_eval = max_eval if max_eval is not None else max_iter * 5 // 4
        self.tolerance_grad = float(tolerance_grad)
        self.tolerance_change = float(tolerance_change)
        self.history_size = history_size
        self.line_search_fn = line_search_fn
        self._lbfgs = {"func_evals": 0, "n_iter": 0}

    # ---- flat views of the parameters ---------------------------------------------------
    def _params(self):
        return [p for p in self._parameter_list if not p.stop_gradient]

    def _flat_params(self):
        return concat([reshape(p.detach(), [-1]) for p in self._params()])

    def _flat_grad(self):
        flat = [reshape(zeros_like(p) if p.grad is None else p.grad.detach(), [-1])
                for p in self._params()]
        return concat(flat)

    def _set_flat(self, x):
        offset = 0
        for p in self._params():
            n = p.size
            self._assign(p, reshape(x[offset:offset + n], p.shape))
            offset += n

    def _evaluate(self, closure):
        """Runs the closure; returns (loss as float, flat gradient) with weight decay."""
        with enable_grad():
            loss = closure()
        if not isinstance(loss, (Tensor, int, float)):
            raise TypeError(f"LBFGS: the closure must return the loss, got "
                            f"{type(loss).__name__}")
        value = float(loss)
        with no_grad():
            g = self._flat_grad()
            if self.regularization is not None and self.regularization.coeff:
                x = self._flat_params()
                value += self.regularization.penalty(x)
                g = self.regularization(x, g)
        return loss, value, g

    def step(self, closure=None):
        """Runs up to ``max_iter`` L-BFGS iterations; returns the first loss."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step needs a closure: a function that clears the gradients, "
                            "computes the loss, calls loss.backward() and returns the loss")
        st = self._lbfgs
        lr = self.get_lr()
        orig_loss, loss, g = self._evaluate(closure)
        evals = 1
        st["func_evals"] += 1
        if _max_abs(g) <= self.tolerance_grad:
            return orig_loss

        d, t = st.get("d"), st.get("t")
        dirs, steps, rhos = st.get("old_dirs", []), st.get("old_stps", []), st.get("ro", [])
        h_diag = st.get("H_diag", 1.0)
        prev_g, prev_loss = st.get("prev_flat_grad"), st.get("prev_loss")
        n_iter = 0
        with no_grad():
            while n_iter < self.max_iter:
                n_iter += 1
                st["n_iter"] += 1
                if st["n_iter"] == 1 or d is None:
                    d = _math.neg(g)
                    dirs, steps, rhos, h_diag = [], [], [], 1.0
                else:
                    y = _math.subtract(g, prev_g)
                    s = _math.multiply(d, t)
                    ys = _dot(y, s)
                    # keep only pairs with positive curvature. The test is relative (the
                    # cosine of s and y): an absolute threshold (PyTorch's ys > 1e-10)
                    # drops every pair once steps are small, and convergence near the
                    # minimum falls back to a linear rate
                    if ys > 1e-10 * math.sqrt(_dot(s, s) * _dot(y, y)):
                        if len(dirs) == self.history_size:
                            dirs.pop(0), steps.pop(0), rhos.pop(0)
                        dirs.append(y)
                        steps.append(s)
                        rhos.append(1.0 / ys)
                        h_diag = ys / _dot(y, y)
                    d = self._two_loop(g, dirs, steps, rhos, h_diag)
                prev_g, prev_loss = g, loss

                t = (min(1.0, 1.0 / float(_red.sum(_math.abs(g)))) * lr
                     if st["n_iter"] == 1 else lr)
                gtd = _dot(g, d)
                if not gtd < 0.0:
                    # The curvature pairs no longer give a descent direction: restart
                    # from steepest descent. (Comparing g.d with tolerance_change instead,
                    # as PyTorch does, stops every later step() short of the minimum:
                    # g.d is ~|g|^2, which falls below any fixed tolerance long before
                    # the gradient does.)
                    d = _math.neg(g)
                    dirs, steps, rhos, h_diag = [], [], [], 1.0
                    gtd = _dot(g, d)
                    if not gtd < 0.0:
                        break  # the gradient is zero

                if self.line_search_fn == "strong_wolfe":
                    x0 = self._flat_params()

                    def obj(x, step, direction):
                        self._set_flat(_math.add(x, _math.multiply(direction, step)))
                        return self._evaluate(closure)[1:]

                    loss, g, t, ls_evals = strong_wolfe(
                        obj, x0, t, d, loss, g, gtd, tolerance_change=self.tolerance_change)
                    self._set_flat(_math.add(x0, _math.multiply(d, t)))
                else:
                    self._set_flat(_math.add(self._flat_params(), _math.multiply(d, t)))
                    ls_evals = 0
                    if n_iter != self.max_iter:
                        _, loss, g = self._evaluate(closure)
                        ls_evals = 1
                evals += ls_evals
                st["func_evals"] += ls_evals

                if n_iter == self.max_iter or evals >= self.max_eval:
                    break
                if _max_abs(g) <= self.tolerance_grad:
                    break
                if _max_abs(d) * abs(t) <= self.tolerance_change:
                    break
                if abs(loss - prev_loss) < self.tolerance_change:
                    break

        st.update(d=d, t=t, old_dirs=dirs, old_stps=steps, ro=rhos, H_diag=h_diag,
                  prev_flat_grad=prev_g, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _two_loop(g, dirs, steps, rhos, h_diag):
        """``-H g`` for the L-BFGS inverse-Hessian approximation H (N&W Algorithm 7.4)."""
        q = _math.neg(g)
        alphas = [0.0] * len(dirs)
        for i in range(len(dirs) - 1, -1, -1):
            alphas[i] = _dot(steps[i], q) * rhos[i]
            q = _math.subtract(q, _math.multiply(dirs[i], alphas[i]))
        r = _math.multiply(q, h_diag)
        for i in range(len(dirs)):
            beta = _dot(dirs[i], r) * rhos[i]
            r = _math.add(r, _math.multiply(steps[i], alphas[i] - beta))
        return r

    def _update(self, p, g, lr, group, state):  # pragma: no cover - step() is overridden
        raise NotImplementedError

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        raise NotImplementedError("LBFGS re-evaluates the loss many times per step: use "
                                  "opt.step(closure) instead of minimize(loss)")

    # ---- state ----------------------------------------------------------------------------
    def state_dict(self):
        """The curvature history and counters (tensors are flat vectors)."""
        st = self._lbfgs
        state = {"func_evals": st["func_evals"], "n_iter": st["n_iter"]}
        for key in ("d", "t", "H_diag", "prev_flat_grad", "prev_loss"):
            if st.get(key) is not None:
                state[key] = st[key]
        for key in ("old_dirs", "old_stps", "ro"):
            state[key] = list(st.get(key, []))
        out = {"state": state, "optimizer": "LBFGS",
               "param_shapes": [p.shape for p in self._parameter_list]}
        if isinstance(self._learning_rate, float):
            out["learning_rate"] = self._learning_rate
        else:
            out["LR_Scheduler"] = self._learning_rate.state_dict()
        return out

    def set_state_dict(self, state_dict):
        if not isinstance(state_dict, dict) or state_dict.get("optimizer") != "LBFGS":
            raise ValueError("LBFGS.set_state_dict expects a dict from LBFGS.state_dict()")
        shapes = [list(s) for s in state_dict.get("param_shapes", [])]
        mine = [p.shape for p in self._parameter_list]
        if shapes != mine:
            raise ValueError(f"LBFGS.set_state_dict: the saved state is for parameters of "
                             f"shapes {shapes}, but this optimizer has {mine}")
        dtype = self._parameter_list[0].dtype
        n = sum(p.size for p in self._params())

        def vec(v):
            v = v if isinstance(v, Tensor) else Tensor(v)
            if v.shape != [n]:
                raise ValueError(f"LBFGS.set_state_dict: a history vector has shape {v.shape}, "
                                 f"expected [{n}]")
            return cast(v, dtype).detach()

        saved = state_dict["state"]
        st = {"func_evals": int(saved.get("func_evals", 0)), "n_iter": int(saved.get("n_iter", 0))}
        for key in ("d", "prev_flat_grad"):
            if key in saved:
                st[key] = vec(saved[key])
        for key in ("t", "H_diag", "prev_loss"):
            if key in saved:
                st[key] = float(saved[key])
        st["old_dirs"] = [vec(v) for v in saved.get("old_dirs", [])]
        st["old_stps"] = [vec(v) for v in saved.get("old_stps", [])]
        st["ro"] = [float(v) for v in saved.get("ro", [])]
        self._lbfgs = st
        self._restore_lr(state_dict)
