"""jit against eager on the whole OpInfo table (float64): values, first and second
derivatives computed inside the jitted function (pf.grad with create_graph), and
derivatives taken through a jitted function from outside (its tape node)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import primflow as pf
from primflow.testing.extras import requires_extra
from primflow.testing import check_grads as cg
from primflow.testing.opinfo import OP_DB

RTOL, ATOL = 1e-10, 1e-12


def _entries(kinds):
    return [pytest.param(info, id=info.name) for info in OP_DB if info.kind in kinds]


def _rng(info, what):
    return np.random.default_rng(zlib.crc32(f"{info.name}/jit/{what}".encode()))


def _assert_same(got, expected, what):
    got, expected = cg.as_list(got), cg.as_list(expected)
    assert len(got) == len(expected), f"{what}: {len(got)} outputs vs {len(expected)}"
    for g, e in zip(got, expected):
        if e is None:
            assert g is None, what
            continue
        g, e = g.numpy(), e.numpy()
        assert g.shape == e.shape and g.dtype == e.dtype, (
            f"{what}: {g.dtype}{g.shape} vs eager {e.dtype}{e.shape}")
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True,
                                       err_msg=what)
        else:
            np.testing.assert_array_equal(g, e, err_msg=what)


@pytest.mark.parametrize("info", _entries(("diff", "nondiff", "nograd", "random")))
def test_jit_forward_matches_eager(info):
    for sample in info.samples():
        if info.kind == "random":  # op(key, **kwargs): the key is a static argument
            fn, xs = (lambda key, kw=sample.kwargs: info.op(key, **kw)), [11]
            jitted = pf.jit(fn, static_argnums=0)
        else:
            fn, primals = sample.bind(info.op)
            xs = cg.leaves(primals, False)
            jitted = pf.jit(fn)
        for _ in range(2):  # the second call runs the cached program
            _assert_same(jitted(*xs), fn(*xs), f"{info.name} {sample!r}")
        assert jitted.cache_info()["traces"] == 1


def _scalarize(out, weights):
    total = None
    for o, w in zip(cg.as_list(out), weights):
        if w is None:
            continue
        term = (o * pf.to_tensor(w)).sum()
        total = term if total is None else total + term
    return total


def _weights(info, fn, xs, what):
    rng = _rng(info, what)
    with pf.no_grad():
        outs = cg.as_list(fn(*xs))
    return [rng.standard_normal(o.shape) if o.dtype.is_floating else None for o in outs]


def _grads(fn, weights, order, directions):
    """The order-1 gradient, or the order-2 Hessian-vector products, by the tape."""

    def run(*xs):
        loss = _scalarize(fn(*xs), weights)
        g = pf.grad(loss, list(xs), create_graph=order > 1, allow_unused=True)
        if order == 1:
            return [gi for gi in g]
        dot = None
        for gi, d in zip(g, directions):
            if gi is None:
                continue
            term = (gi * d).sum()
            dot = term if dot is None else dot + term
        if dot is None or dot.stop_gradient:  # the gradient is constant: no 2nd derivative
            return [pf.zeros_like(x) for x in xs]
        return list(pf.grad(dot, list(xs), allow_unused=True))

    return run


@pytest.mark.parametrize("info", _entries(("diff",)))
@pytest.mark.parametrize("order", [1, 2])
def test_jit_of_grad_matches_eager(info, order):
    samples = info.samples()[:2 if order == 1 else 1]
    for sample in samples:
        fn, primals = sample.bind(info.op)
        xs = cg.leaves(primals, True)
        weights = _weights(info, fn, xs, "w")
        rng = _rng(info, f"dir{order}")
        directions = [pf.to_tensor(rng.standard_normal(x.shape)) for x in xs]
        run = _grads(fn, weights, order, directions)
        expected = run(*xs)
        got = pf.jit(run)(*cg.leaves(primals, True))
        _assert_same([g if g is not None else None for g in got], expected,
                     f"{info.name} order {order} {sample!r}")


@pytest.mark.parametrize("info", _entries(("diff",)))
def test_grad_through_jit_matches_eager(info):
    sample = info.samples()[0]
    fn, primals = sample.bind(info.op)
    xs = cg.leaves(primals, True)
    weights = _weights(info, fn, xs, "w")
    rng = _rng(info, "dir")
    directions = [pf.to_tensor(rng.standard_normal(x.shape)) for x in xs]
    expected = _grads(fn, weights, 2, directions)(*xs)
    got = _grads(pf.jit(fn), weights, 2, directions)(*cg.leaves(primals, True))
    _assert_same(got, expected, f"{info.name} through jit {sample!r}")


def _one_row_per_block(monkeypatch):
    from primflow.compiler import _pipeline

    monkeypatch.setattr(_pipeline, "BLOCK_BYTES", 1)
    monkeypatch.setattr(_pipeline, "MAX_BLOCKS", 1 << 20)


def _blocked(jitted):
    return any(type(getattr(e.executable, "current", e.executable)).__name__ == "BlockedExecutable"
               for e in jitted._cache.values())


@pytest.mark.parametrize("info", _entries(("diff", "nondiff", "nograd")))
def test_jit_in_row_blocks_matches_eager(info, monkeypatch):
    """Every program the row-blocking analysis accepts, run one row per block."""
    _one_row_per_block(monkeypatch)
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        xs = cg.leaves(primals, False)
        _assert_same(pf.jit(fn)(*xs), fn(*xs), f"{info.name} {sample!r} (row blocks)")


def test_row_blocking_covers_most_of_the_opinfo_table(monkeypatch):
    # the test above only means something for entries whose programs are blocked
    _one_row_per_block(monkeypatch)
    blocked = set()
    for info in OP_DB:
        if info.kind not in ("diff", "nondiff", "nograd") or not info.runs_here():
            continue
        for sample in info.samples():
            fn, primals = sample.bind(info.op)
            jitted = pf.jit(fn)
            jitted(*cg.leaves(primals, False))
            if _blocked(jitted):
                blocked.add(info.name)
    assert len(blocked) >= 30, sorted(blocked)


@requires_extra("jit")
@pytest.mark.parametrize("info", _entries(("diff", "nondiff", "nograd")))
def test_jit_numba_kernels_match_eager(info, monkeypatch, tmp_path):
    """backend="numba" makes every supported fusion group a kernel, however small: the
    kernel code (unit reshapes, merged groups, recomputed broadcasts, reductions) on every
    op, forward and first derivatives."""
    monkeypatch.setattr(pf.config, "cache_dir", str(tmp_path))
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        xs = cg.leaves(primals, False)
        jitted = pf.jit(fn, backend="numba")
        _assert_same(jitted(*xs), fn(*xs), f"{info.name} {sample!r} (numba)")
    if info.kind == "diff":  # the gradient program: products, broadcasts, reductions
        sample = info.samples()[0]
        fn, primals = sample.bind(info.op)
        xs = cg.leaves(primals, True)
        run = _grads(fn, _weights(info, fn, xs, "w"), 1, None)
        got = pf.jit(run, backend="numba")(*cg.leaves(primals, True))
        _assert_same(got, run(*xs), f"{info.name} gradient {sample!r} (numba)")
