"""Control flow: derivatives through cond, switch, while_loop, fori_loop and scan."""

from __future__ import annotations

import numpy as np

import primflow as pf

from .base import OpInfo, _s, fixed


def _rnn_scan(x, w, reverse=False):
    def step(c, xt):
        h = pf.tanh(c * w + xt)
        return h, h * xt
    return pf.scan(step, pf.zeros_like(w), x, reverse=reverse)


def _rnn_scan_ref(x, w, reverse=False):
    c, ys = np.zeros_like(w), [None] * len(x)
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        c = np.tanh(c * w + x[t])
        ys[t] = c * x[t]
    return c, np.stack(ys)


def _fori(x, w):
    return pf.fori_loop(0, 3, lambda i, c: pf.sin(c) * w + c * 0.5, x)


def _fori_ref(x, w):
    for _ in range(3):
        x = np.sin(x) * w + x * 0.5
    return x


def _cond_op(x):
    return pf.cond(x.sum() > 0, lambda v: v * pf.sin(v), lambda v: pf.exp(v) * 0.5, x)


def _cond_ref(x):
    return x * np.sin(x) if x.sum() > 0 else np.exp(x) * 0.5


_SWITCH_BRANCHES = (lambda v, w: v * w, lambda v, w: pf.sin(v) + w, lambda v, w: v * v * w)
_SWITCH_REFS = (lambda v, w: v * w, lambda v, w: np.sin(v) + w, lambda v, w: v * v * w)


def _bounded_while(x):
    def body(s):
        return s[0] + 1, s[1] * pf.cos(s[1]) + 0.5

    return pf.while_loop(lambda s: s[0] < 3, body, (pf.to_tensor(0), x), max_steps=5)[1]


def _bounded_while_ref(x):
    for _ in range(3):
        x = x * np.cos(x) + 0.5
    return x


ENTRIES = [
    OpInfo("scan", _rnn_scan, _rnn_scan_ref,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3, 2)), r.uniform(-1, 1, (2,))),
                    desc="rnn"),
                 _s(lambda i, r: (r.uniform(-1, 1, (2, 3)), r.uniform(-1, 1, (3,))),
                    {"reverse": True}, desc="rnn reversed")),
           order_samples=1, prims=("tanh", "mul", "add")),
    OpInfo("fori_loop", _fori, _fori_ref,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3,)), r.uniform(-1, 1, (3,))))),
           order_samples=1, prims=("sin",)),
    OpInfo("cond", _cond_op, _cond_ref,
           fixed(_s(lambda i, r: (r.uniform(0.2, 1, (3,)),), desc="true branch"),
                 _s(lambda i, r: (r.uniform(-1, -0.2, (3,)),), desc="false branch")),
           order_samples=2, prims=("sin", "exp")),
    OpInfo("switch", lambda k, x, w: pf.switch(k, _SWITCH_BRANCHES, x, w),
           lambda k, x, w: _SWITCH_REFS[int(k)](x, w),
           fixed(*[_s(lambda i, r, k=k: (np.array(k), r.uniform(-1, 1, (2,)),
                                         r.uniform(-1, 1, (2,))), desc=f"branch {k}")
                   for k in range(3)]),
           order_samples=3, prims=("sin", "mul")),
    OpInfo("while_loop", _bounded_while, _bounded_while_ref,
           fixed(_s(lambda i, r: (r.uniform(-1, 1, (3,)),))),
           order_samples=1, prims=("cos",),
           notes="bounded (max_steps): reverse-differentiable under pf.jit too"),
]
