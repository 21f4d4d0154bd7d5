"""Stand-ins for ``pf.nn`` / ``pf.optimizer`` / ``pf.save`` used by the science package
while those are not available in this primflow. They follow the same (Paddle) interface:
``parameters()``, ``state_dict()``, ``set_state_dict()``; ``Adam(learning_rate=...,
parameters=...)`` with ``step()``, ``clear_grad()``, ``set_lr()``, ``get_lr()``;
``LBFGS(...).step(closure)`` with a strong-Wolfe line search (after PyTorch's
``torch.optim.LBFGS``); ``save(obj, path)`` / ``load(path)`` as JSON (no code execution).
"""

from __future__ import annotations

import json
import math

import primflow as pf


# ---- layers ----------------------------------------------------------------------------

class Layer:
    def __init__(self):
        self._params = {}
        self._children = {}
        self.training = True

    def create_parameter(self, name, value):
        value.stop_gradient = False
        self._params[name] = value
        return value

    def add_sublayer(self, name, layer):
        self._children[name] = layer
        return layer

    def named_parameters(self, prefix=""):
        for k, p in self._params.items():
            yield prefix + k, p
        for name, child in self._children.items():
            yield from child.named_parameters(prefix + name + ".")

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def state_dict(self):
        return {k: p for k, p in self.named_parameters()}

    def set_state_dict(self, state):
        own = dict(self.named_parameters())
        missing = sorted(set(own) - set(state))
        if missing:
            raise KeyError(f"state dict lacks parameters {missing}")
        for k, p in own.items():
            p.set_value(pf.to_tensor(state[k], dtype=p.dtype))

    def __call__(self, *args):
        return self.forward(*args)


class Linear(Layer):
    def __init__(self, in_features, out_features, dtype="float64"):
        super().__init__()
        bound = math.sqrt(6.0 / (in_features + out_features))  # Xavier uniform
        w = pf.uniform([in_features, out_features], dtype=dtype, min=-bound, max=bound)
        self.weight = self.create_parameter("weight", w)
        self.bias = self.create_parameter("bias", pf.zeros([out_features], dtype=dtype))

    def forward(self, x):
        return pf.matmul(x, self.weight) + self.bias


class MLP(Layer):
    def __init__(self, sizes, activation=pf.tanh, dtype="float64"):
        super().__init__()
        self.layers = [self.add_sublayer(str(i), Linear(a, b, dtype))
                       for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]
        self.activation = activation

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.layers[-1](x)


# ---- optimizers ------------------------------------------------------------------------

class _Optimizer:
    def __init__(self, learning_rate, parameters):
        self._lr = float(learning_rate)
        self._params = list(parameters)

    def get_lr(self):
        return self._lr

    def set_lr(self, value):
        self._lr = float(value)

    def clear_grad(self, set_to_zero=False):
        for p in self._params:
            p.clear_grad()


class Adam(_Optimizer):
    def __init__(self, learning_rate=1e-3, parameters=None, beta1=0.9, beta2=0.999,
                 epsilon=1e-8):
        super().__init__(learning_rate, parameters)
        self.beta1, self.beta2, self.eps = beta1, beta2, epsilon
        self.t = 0
        self.m = [pf.zeros_like(p) for p in self._params]
        self.v = [pf.zeros_like(p) for p in self._params]

    def step(self):
        self.t += 1
        b1, b2 = self.beta1, self.beta2
        c1 = 1 - b1 ** self.t
        c2 = 1 - b2 ** self.t
        with pf.no_grad():
            for i, p in enumerate(self._params):
                g = p.grad
                if g is None:
                    continue
                self.m[i] = self.m[i] * b1 + g * (1 - b1)
                self.v[i] = self.v[i] * b2 + g * g * (1 - b2)
                upd = (self.m[i] / c1) / (pf.sqrt(self.v[i] / c2) + self.eps)
                p.set_value(p.detach() - upd * self._lr)

    def state_dict(self):
        out = {"t": self.t, "lr": self._lr}
        for i in range(len(self._params)):
            out[f"m{i}"] = self.m[i]
            out[f"v{i}"] = self.v[i]
        return out

    def set_state_dict(self, state):
        self.t = int(state["t"])
        self._lr = float(state["lr"])
        for i, p in enumerate(self._params):
            self.m[i] = pf.to_tensor(state[f"m{i}"], dtype=p.dtype)
            self.v[i] = pf.to_tensor(state[f"v{i}"], dtype=p.dtype)


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    xmin_bound, xmax_bound = bounds if bounds is not None else ((x1, x2) if x1 <= x2
                                                                else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _dot(a, b):
    return float((a * b).sum())


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    d_norm = float(pf.abs(d).max())
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket = [0.0, t]
        bracket_f = [f, f_new]
        bracket_g = [g, g_new]
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) \
                    else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = _dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos] = t
            bracket_f[high_pos] = f_new
            bracket_g[high_pos] = g_new
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos] = t
            bracket_f[low_pos] = f_new
            bracket_g[low_pos] = g_new
            bracket_gtd[low_pos] = gtd_new
    t = bracket[low_pos]
    return bracket_f[low_pos], bracket_g[low_pos], t, ls_func_evals


class LBFGS(_Optimizer):
    """L-BFGS with an optional strong-Wolfe line search; ``step(closure)`` where the closure
    clears the gradients, computes the loss, calls ``loss.backward()`` and returns it."""

    def __init__(self, learning_rate=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None,
                 parameters=None):
        super().__init__(learning_rate, parameters)
        self.max_iter = max_iter
        self.max_eval = max_eval if max_eval is not None else max_iter * 5 // 4
        self.tolerance_grad = tolerance_grad
        self.tolerance_change = tolerance_change
        self.history_size = history_size
        self.line_search_fn = line_search_fn
        self.state = {"func_evals": 0, "n_iter": 0}

    def _flat_grad(self):
        return pf.concat([pf.reshape(p.grad if p.grad is not None else pf.zeros_like(p), [-1])
                          for p in self._params])

    def _flat_params(self):
        return pf.concat([pf.reshape(p.detach(), [-1]) for p in self._params])

    def _set_flat(self, flat):
        offset = 0
        for p in self._params:
            n = p.size
            p.set_value(pf.reshape(flat[offset:offset + n], p.shape))
            offset += n

    def step(self, closure):
        lr = self._lr
        state = self.state
        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(pf.abs(flat_grad).max()) <= self.tolerance_grad:
            return orig_loss
        d = state.get("d")
        t = state.get("t")
        old_dirs = state.setdefault("old_dirs", [])
        old_stps = state.setdefault("old_stps", [])
        ro = state.setdefault("ro", [])
        H_diag = state.get("H_diag", 1.0)
        prev_flat_grad = state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n_iter = 0
        while n_iter < self.max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs.clear(), old_stps.clear(), ro.clear()
                H_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:
                    if len(old_dirs) == self.history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / _dot(y, y)
                num_old = len(old_dirs)
                al = [0.0] * num_old
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = _dot(old_stps[i], q) * ro[i]
                    q = q - old_dirs[i] * al[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = _dot(old_dirs[i], r) * ro[i]
                    r = r + old_stps[i] * (al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(pf.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -self.tolerance_change:
                break
            ls_func_evals = 0
            if self.line_search_fn == "strong_wolfe":
                x_init = self._flat_params()

                def obj_func(x, step, direction):
                    self._set_flat(x + direction * step)
                    value = float(closure())
                    return value, self._flat_grad()

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(obj_func, x_init, t, d, loss,
                                                                  flat_grad, gtd)
                self._set_flat(x_init + d * t)
            else:
                self._set_flat(self._flat_params() + d * t)
                if n_iter != self.max_iter:
                    loss = float(closure())
                    flat_grad = self._flat_grad()
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == self.max_iter or current_evals >= self.max_eval:
                break
            if float(pf.abs(flat_grad).max()) <= self.tolerance_grad:
                break
            if float(pf.abs(d * t).max()) <= self.tolerance_change:
                break
            if abs(loss - prev_loss) < self.tolerance_change:
                break
        state.update(d=d, t=t, H_diag=H_diag, prev_flat_grad=prev_flat_grad,
                     prev_loss=prev_loss)
        return orig_loss

    def state_dict(self):
        out = {"n_iter": self.state["n_iter"], "func_evals": self.state["func_evals"],
               "lr": self._lr}
        return out

    def set_state_dict(self, state):
        self.state = {"func_evals": int(state["func_evals"]), "n_iter": 0}
        self._lr = float(state["lr"])


# ---- save / load -----------------------------------------------------------------------

def _encode(obj):
    if isinstance(obj, pf.Tensor):
        return {"__tensor__": obj.tolist(), "dtype": obj.dtype.name, "shape": obj.shape}
    if isinstance(obj, dict):
        return {"__dict__": [[k, _encode(v)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"__list__": [_encode(v) for v in obj]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        if isinstance(obj, float) and not math.isfinite(obj):
            return {"__float__": repr(obj)}
        return obj
    raise TypeError(f"cannot save an object of type {type(obj).__name__}")


def _decode(obj):
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return pf.reshape(pf.to_tensor(obj["__tensor__"], dtype=obj["dtype"]), obj["shape"])
        if "__dict__" in obj:
            return {k: _decode(v) for k, v in obj["__dict__"]}
        if "__list__" in obj:
            return [_decode(v) for v in obj["__list__"]]
        if "__float__" in obj:
            return float(obj["__float__"])
    return obj


def save(obj, path):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"format": "primflow-science-json", "data": _encode(obj)}, fh)


def load(path):
    with open(path, encoding="utf-8") as fh:
        try:
            raw = json.load(fh)
        except ValueError as exc:
            raise ValueError(f"{path} is not a primflow checkpoint (corrupt JSON)") from exc
    if not isinstance(raw, dict) or raw.get("format") != "primflow-science-json":
        raise ValueError(f"{path} is not a primflow checkpoint")
    return _decode(raw["data"])
