"""L-BFGS (torch's ``torch.optim.LBFGS``): limited-memory BFGS over the flattened parameters of
one group, with an optional strong-Wolfe line search (cubic interpolation and zoom).

``step(closure)`` re-evaluates the loss through ``closure`` (which must zero the gradients,
compute the loss, call ``backward`` and return the loss) up to ``max_eval`` times. The state
(``d``, ``t``, ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``, ``prev_flat_grad``,
``prev_loss``, ``n_iter``, ``func_evals``, ``al``) lives under the first parameter, as torch
keeps it.
"""
import numpy as np

from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor
from ember.errors import EmberRuntimeError, EmberValueError


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), clipped to
    ``bounds`` (default the interval between x1 and x2); the midpoint when there is none."""
    if bounds is not None:
        lo, hi = bounds
    else:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square ** 0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, lo), hi)
    return (lo + hi) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """Step length ``t`` along ``d`` satisfying the strong Wolfe conditions (bracketing then
    zoom). Returns ``(loss, flat_grad, t, evaluations)``."""
    d_norm = float(np.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]
        bracket_gtd = [gtd, gtd_new]

    insuf_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        b_hi, b_lo = max(bracket), min(bracket)
        eps = 0.1 * (b_hi - b_lo)
        if min(b_hi - t, t - b_lo) < eps:
            if insuf_progress or t >= b_hi or t <= b_lo:
                t = b_hi - eps if abs(t - b_hi) < abs(t - b_lo) else b_lo + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = float(g_new.dot(d))
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high] = t, f_new
            bracket_g[high], bracket_gtd[high] = g_new.copy(), gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low] = t, f_new
            bracket_g[low], bracket_gtd[low] = g_new.copy(), gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


def _arr(v):
    """NumPy view of a state vector: an ember Tensor, an array, or a loaded torch tensor."""
    if isinstance(v, Tensor):
        return v._data
    if hasattr(v, "detach") and hasattr(v, "numpy"):
        return v.detach().cpu().numpy()
    return np.asarray(v)


def _num(v):
    return None if v is None else float(_arr(v)) if not isinstance(v, (int, float)) else v


class LBFGS(Optimizer):
    """L-BFGS on a single parameter group; ``line_search_fn`` is None (fixed step ``lr``) or
    ``"strong_wolfe"``."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        if not 0.0 <= lr:
            raise EmberValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise EmberValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', "
                                  f"got {line_search_fn!r}")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise EmberValueError("LBFGS doesn't support per-parameter options "
                                  "(parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        parts = [np.zeros(p._data.size, p._data.dtype) if p.grad is None
                 else p.grad._data.reshape(-1) for p in self._params]
        return np.concatenate(parts)

    def _add_grad(self, step_size, update):
        offset = 0
        for p in self._params:
            n = p._data.size
            x = p._data
            x += (step_size * update[offset:offset + n].reshape(x.shape)).astype(x.dtype,
                                                                              copy=False)
            p._bump()
            offset += n

    def _set_params(self, values):
        for p, v in zip(self._params, values):
            p._data[...] = v
            p._bump()

    def _evaluate(self, closure):
        loss = self._closure(closure)
        if loss is None:
            raise EmberRuntimeError("LBFGS.step: the closure must return the loss")
        return float(loss.detach()) if hasattr(loss, "detach") else float(loss)

    def step(self, closure):
        """Up to ``max_iter`` L-BFGS iterations; returns the closure's first loss."""
        if closure is None:
            raise EmberRuntimeError("LBFGS.step requires a closure that re-evaluates the model "
                                    "and returns the loss")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = self._closure(closure)
        if orig_loss is None:
            raise EmberRuntimeError("LBFGS.step: the closure must return the loss")
        loss = float(orig_loss.detach()) if hasattr(orig_loss, "detach") else float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if np.abs(flat_grad).max() <= tol_grad:
            return orig_loss

        d = state.get("d")
        d = None if d is None else _arr(d).copy()
        t = _num(state.get("t"))
        old_dirs = [_arr(v).copy() for v in state.get("old_dirs") or []]
        old_stps = [_arr(v).copy() for v in state.get("old_stps") or []]
        ro = [_num(v) for v in state.get("ro") or []]
        h_diag = _num(state.get("H_diag"))
        prev_flat_grad = state.get("prev_flat_grad")
        prev_flat_grad = None if prev_flat_grad is None else _arr(prev_flat_grad).copy()
        prev_loss = _num(state.get("prev_loss"))

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(y.dot(s))
                if ys > 1e-10:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y.dot(y))
                num_old = len(old_dirs)
                al = [0.0] * num_old
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = float(old_stps[i].dot(q)) * ro[i]
                    q = q - al[i] * old_dirs[i]
                r = q * h_diag
                for i in range(num_old):
                    be_i = float(old_dirs[i].dot(r)) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r
                state["al"] = [Tensor._make(np.array(a)) for a in al] + \
                    [None] * (history_size - num_old)
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tol_change:
                break

            ls_evals = 0
            if group["line_search_fn"] is not None:
                x_init = [p._data.copy() for p in self._params]

                def obj_func(x, step, direction):
                    self._add_grad(step, direction)
                    value = self._evaluate(closure)
                    fg = self._flat_grad().copy()
                    self._set_params(x)
                    return value, fg

                loss, flat_grad, t, ls_evals = _strong_wolfe(obj_func, x_init, t, d, loss,
                                                             flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tol_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    loss = self._evaluate(closure)
                    flat_grad = self._flat_grad().copy()
                    opt_cond = np.abs(flat_grad).max() <= tol_grad
                    ls_evals = 1
            current_evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break

        mk = Tensor._make
        state["d"] = mk(d)
        state["t"] = t
        state["old_dirs"] = [mk(v) for v in old_dirs]
        state["old_stps"] = [mk(v) for v in old_stps]
        state["ro"] = ro
        state["H_diag"] = h_diag
        state["prev_flat_grad"] = mk(prev_flat_grad)
        state["prev_loss"] = prev_loss
        return orig_loss
