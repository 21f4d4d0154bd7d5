"""Generic tests driven by the OpInfo table (primflow/testing/opinfo/), all in float64.

For every differentiable entry: forward vs NumPy/SciPy, jvp vs central differences, the
dot-product test (vjp vs jvp), derivatives of orders 1..max_order in four modes (reverse
over reverse, forward over reverse, forward over forward, reverse over forward), each
against one central difference of the AD function one order below, and vmap against a
Python loop; Taylor mode (pf.jet to order 6 against nested pf.jvp, collapsed Taylor mode
against summed jets). Non-differentiable, integer/bool, creation and random entries get the
checks of what they claim instead. Coverage tests make sure every primitive and every public op
has an entry, and that an entry really binds the primitives it claims.
"""

from __future__ import annotations

import contextlib
import dataclasses
import zlib

import numpy as np
import pytest

import primflow as pf
from primflow.core.primitive import Primitive, get_primitive
from primflow.transforms import second_order
from primflow.testing import check_grads as cg
from primflow.testing.opinfo import OP_DB, OPS_BY_NAME, SampleInput, public_ops

KINDS = ("diff", "nondiff", "nograd", "creation", "random")


def _rng(info, test, order=None):
    return np.random.default_rng(zlib.crc32(f"{info.name}/{test}/{order}".encode()))


def _params(kinds, test, orders=None):
    out = []
    for info in OP_DB:
        if info.kind not in kinds:
            continue
        for order in (orders(info) if orders else [None]):
            xf = info.xfail(test, order)
            marks = [pytest.mark.xfail(reason=xf.reason, strict=True)] if xf else []
            name = info.name if order is None else f"{info.name}-order{order}"
            out.append(pytest.param(info, order, marks=marks, id=name))
    return out


@contextlib.contextmanager
def _about(info, sample):
    """Names the entry and sample in any failure."""
    try:
        yield
    except (AssertionError, cg.GradCheckError) as e:
        raise AssertionError(f"{info.name} on {sample!r}:\n{e}") from e


def _to_numpy_list(out):
    return [np.asarray(o.numpy()) for o in cg.as_list(out)]


def _call(info, sample, requires_grad=False):
    fn, primals = sample.bind(info.op)
    xs = cg.leaves(primals, requires_grad)
    return fn(*xs), xs


# ---- 1. forward against the reference ------------------------------------------------------

@pytest.mark.parametrize("info,order", _params(("diff", "nondiff", "nograd"), "forward"))
def test_forward(info, order):
    atol, rtol = info.tolerance("forward")
    checked = 0
    for sample in info.samples():
        # overflow or invalid values inside an op mean an unstable formula: fail on them
        with _about(info, sample), pf.no_grad(), np.errstate(over="raise", invalid="raise",
                                                             divide="raise"):
            out, _ = _call(info, sample)
        with _about(info, sample), np.errstate(all="ignore"):
            expected = info.ref(*sample.args, **sample.kwargs)
            if expected is None:  # the reference does not apply to this sample
                continue
            outs, refs = _to_numpy_list(out), cg.as_list(expected)
            assert len(outs) == len(refs), f"{len(outs)} outputs, reference has {len(refs)}"
            for o, r in zip(outs, refs):
                r = np.asarray(r)
                assert o.shape == r.shape, f"shape {o.shape}, reference {r.shape}"
                if r.dtype.kind == "f":
                    assert o.dtype == np.float64, f"dtype {o.dtype} for float64 inputs"
                    np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)
                else:
                    assert o.dtype.kind == r.dtype.kind, f"dtype {o.dtype}, reference {r.dtype}"
                    np.testing.assert_array_equal(o, r)
            checked += 1
    assert checked, "no sample was compared with the reference"


# ---- 2. jvp against central differences ----------------------------------------------------

@pytest.mark.parametrize("info,order", _params(("diff",), "jvp"))
def test_jvp(info, order):
    atol, rtol = info.tolerance("jvp")
    rng = _rng(info, "jvp")
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        with _about(info, sample):
            cg.check_jvp(fn, primals, rng, eps=1e-6, atol=atol, rtol=rtol)


# ---- 3. vjp against jvp: the dot-product test ----------------------------------------------

@pytest.mark.parametrize("info,order", _params(("diff",), "vjp"))
def test_vjp_dot_product(info, order):
    atol, rtol = info.tolerance("vjp")
    rng = _rng(info, "vjp")
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        with _about(info, sample):
            cg.check_vjp(fn, primals, rng, atol=atol, rtol=rtol)


# ---- 4./5. orders 1..4 in four modes -------------------------------------------------------

def _orders(first):
    return lambda info: list(range(first, info.max_order + 1))


def _order_check(info, order, mode):
    key = f"order{min(order, 4)}"
    atol, rtol = info.tolerance(key)
    rng = _rng(info, mode, order)
    samples = info.samples()
    if order > 1 or mode != "rev":
        samples = samples[:info.order_samples or None]
    for sample in samples:
        fn, primals = sample.bind(info.op)
        with _about(info, sample):
            cg.check_order(fn, primals, order, rng, modes=(mode,), eps=info.fd_eps,
                           atol=atol, rtol=rtol)


@pytest.mark.parametrize("info,order", _params(("diff",), "rev", _orders(1)))
def test_reverse_over_reverse(info, order):
    """Order-k derivative by k tape passes (create_graph=True) vs one central difference."""
    _order_check(info, order, "rev")


@pytest.mark.parametrize("info,order", _params(("diff",), "fwd_over_rev", _orders(2)))
def test_forward_over_reverse(info, order):
    """pf.jvp of a function that calls pf.grad(create_graph=True), vs rev-rev and FD."""
    _order_check(info, order, "fwd_over_rev")


@pytest.mark.parametrize("info,order", _params(("diff",), "fwd", _orders(2)))
def test_forward_over_forward(info, order):
    """Nested pf.jvp, vs rev-rev and FD."""
    _order_check(info, order, "fwd")


@pytest.mark.parametrize("info,order", _params(("diff",), "rev_over_fwd", _orders(2)))
def test_reverse_over_forward(info, order):
    """pf.grad of a nested pf.jvp result (the primal level is on the tape), vs rev-rev and FD."""
    _order_check(info, order, "rev_over_fwd")


# entries whose forward-over-reverse Hessian cannot be taken (the check against it is left
# out; finite differences still check them): setitem writes the value into a copy of x,
# which pf.jvp refuses when only the value is traced (jacfwd pushes one input at a time)
_NO_FORWARD_OVER_REVERSE = {"setitem"}


def _second_order(info):
    return [2] if info.max_order >= 2 else []


@pytest.mark.parametrize("info,order", _params(("diff",), "hessian", _second_order))
def test_hessian_by_adjoints(info, order):
    """The Hessian by second-order adjoints (transforms/second_order.py, what pf.hessian
    runs unless it estimates forward over reverse cheaper) of <w, op(x)> against central
    differences of its gradient (pf.grad, checked above), and against forward over reverse
    (jacfwd(jacrev)), for all differentiated inputs at once."""
    atol, rtol = info.tolerance("order2")
    rng = _rng(info, "hessian")
    checked = 0
    for sample in info.samples()[:info.order_samples or None]:
        fn, primals = sample.bind(info.op)
        with pf.no_grad():
            outs = [o.numpy() for o in cg.as_list(fn(*cg.leaves(primals, False)))]
        weights = [pf.to_tensor(rng.standard_normal(o.shape)) for o in outs
                   if o.dtype.kind == "f"]
        if not weights:
            continue

        def g(*xs):
            total = None
            for w, o in zip(weights, [o for o in cg.as_list(fn(*xs)) if o.dtype.is_floating]):
                part = (w * o).sum()
                total = part if total is None else total + part
            return total

        nums = tuple(range(len(primals)))
        sizes = [p.size for p in primals]
        xs = cg.leaves(primals, False)
        with _about(info, sample):
            blocks = second_order.hessian_by_adjoints(g, xs, nums, always=True)
            assert blocks is not None, "the adjoint method refused this entry"
            h = np.block([[np.asarray(blocks[i][j].numpy()).reshape(sizes[i], sizes[j])
                           for j in nums] for i in nums])
            if info.name not in _NO_FORWARD_OVER_REVERSE:
                reference = pf.jacfwd(pf.jacrev(g, argnums=nums), argnums=nums)(*xs)
                h_ref = np.block([[np.asarray(reference[i][j].numpy()).reshape(
                    sizes[i], sizes[j]) for j in nums] for i in nums])
                np.testing.assert_allclose(h, h_ref, rtol=1e-9, atol=1e-12)
            flat = np.concatenate([p.ravel() for p in primals])
            offsets = np.cumsum([0] + sizes)

            def gradient(v):
                parts = [v[offsets[i]:offsets[i + 1]].reshape(p.shape)
                         for i, p in enumerate(primals)]
                grads = pf.grad(g, argnums=nums)(*cg.leaves(parts, False))
                return np.concatenate([np.asarray(gr.numpy()).ravel() for gr in grads])

            if flat.size == 0:  # an empty input: an empty Hessian
                assert h.size == 0
                continue
            eps = info.fd_eps
            fd = np.stack([(gradient(flat + eps * e) - gradient(flat - eps * e)) / (2 * eps)
                           for e in np.eye(flat.size)], axis=1)
            scale = max(1.0, np.abs(fd).max())  # differencing error is relative to it
            np.testing.assert_allclose(h, fd, rtol=rtol, atol=max(atol, rtol * scale))
        checked += 1
    assert checked, "no sample had a floating output"


# ---- vmap against a Python loop ------------------------------------------------------------

@pytest.mark.parametrize("info,order", _params(("diff", "nondiff", "nograd"), "vmap"))
def test_vmap_matches_a_loop(info, order):
    """pf.vmap over a batch of 3 (the float inputs mapped, the others constant) equals calling
    the op once per example and stacking."""
    rng = _rng(info, "vmap")
    for sample in info.samples():
        idx = [i for i, a in enumerate(sample.args)
               if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        if not idx:
            continue
        noise = 1e-3 * info.margin
        batch = [[sample.args[i] + (k > 0) * noise * rng.standard_normal(sample.args[i].shape)
                  for i in idx] for k in range(3)]
        mapped = SampleInput(sample.args, sample.kwargs, diff=tuple(idx), desc=sample.desc)
        fn, _ = mapped.bind(info.op)
        with _about(info, sample), pf.no_grad():
            stacked = cg.leaves([np.stack([b[j] for b in batch]) for j in range(len(idx))],
                                False)
            outs = cg.as_list(pf.vmap(fn)(*stacked))
            loop = [_to_numpy_list(fn(*cg.leaves(b, False))) for b in batch]
            assert len(outs) == len(loop[0])
            for j, o in enumerate(outs):
                expected = np.stack([one[j] for one in loop])
                got = o.numpy()
                assert got.shape == expected.shape and got.dtype == expected.dtype
                if got.dtype.kind == "f":
                    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
                else:
                    np.testing.assert_array_equal(got, expected)


# ---- functional transforms against the tape ------------------------------------------------

@pytest.mark.parametrize("info,order", _params(("diff",), "transforms"))
def test_functional_transforms_match_the_tape(info, order):
    """pf.grad / pf.vjp (functional) equal the tape's pf.grad, and jacrev equals jacfwd, on
    a random weighting of the op's outputs."""
    rng = _rng(info, "transforms")
    for sample in info.samples()[:2]:
        fn, primals = sample.bind(info.op)
        with pf.no_grad():
            outs = cg.as_list(fn(*cg.leaves(primals, False)))
        weights = [pf.to_tensor(rng.standard_normal(o.shape), dtype="float64") for o in outs
                   if o.dtype.is_floating]
        if not weights or not primals:
            continue

        def scalar(*xs):
            floats = [o for o in cg.as_list(fn(*xs)) if o.dtype.is_floating]
            return sum(((o * w).sum() for o, w in zip(floats, weights)), pf.zeros([], "float64"))

        xs = cg.leaves(primals, True)
        tape = pf.grad(scalar(*xs), xs, allow_unused=True)
        functional = pf.grad(scalar, argnums=tuple(range(len(primals))))(
            *cg.leaves(primals, False))
        with _about(info, sample):
            for t, g in zip(tape, functional):
                expected = np.zeros_like(g.numpy()) if t is None else t.numpy()
                np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12, atol=1e-12)
            first = cg.leaves(primals, False)

            def of_first(x0):
                return scalar(x0, *first[1:])

            rev = pf.jacrev(of_first)(first[0]).numpy()
            fwd = pf.jacfwd(of_first)(first[0]).numpy()
            np.testing.assert_allclose(rev, fwd, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(rev, functional[0].numpy(), rtol=1e-12, atol=1e-12)


# ---- Taylor mode (pf.jet) against nested forward mode --------------------------------------

JET_ORDER = 6  # on the first sample; the others go to JET_ORDER_REST
JET_ORDER_REST = 4


@pytest.mark.parametrize("info,order", _params(("diff",), "jet"))
def test_jet_matches_nested_jvp(info, order):
    """pf.jet's derivative-form coefficients y_1..y_6 of a random weighting of the outputs,
    along a random polynomial path of every input, equal the derivatives of t -> f(x(t))
    by pf.jvp nested k times (first sample; order 3 on the others). The first sample also
    goes along a straight line with exact-zero higher coefficients (``None``, skipped by the
    rules) and, for several inputs, with only the first input moving (the others constant
    in the rules)."""
    atol, rtol = info.tolerance("jet")
    rng = _rng(info, "jet")
    for n, sample in enumerate(info.samples()):
        fn, primals = sample.bind(info.op)
        if not primals:
            continue
        with _about(info, sample):
            cap = info.jet_order or JET_ORDER
            k = min(cap, JET_ORDER if n == 0 else JET_ORDER_REST)
            cg.check_jet(fn, primals, k, rng, atol=atol, rtol=rtol)
            if n == 0:
                cg.check_jet(fn, primals, k, rng, path="line", atol=atol, rtol=rtol)
                if len(primals) > 1:
                    cg.check_jet(fn, primals, min(cap, JET_ORDER_REST), rng, vary=(0,),
                                 atol=atol, rtol=rtol)


@pytest.mark.parametrize("info,order", _params(("diff",), "collapsed"))
def test_collapsed_taylor_matches_summed_jets(info, order):
    """Collapsed Taylor mode (the default engine of pf.autograd.laplacian / biharmonic /
    linear_operator) at orders 1..4 on two samples: each output's collapsed top coefficient
    equals the weighted sum over 3 directions of pf.jet's K-th coefficient. This checks that
    every rule is linear in its top input coefficient, runs under vmap, and accepts the
    precomputed primal ``out``."""
    atol, rtol = info.tolerance("jet")
    rng = _rng(info, "collapsed")
    for sample in info.samples()[:2]:
        fn, primals = sample.bind(info.op)
        if not primals:
            continue
        with _about(info, sample):
            for k in range(1, min(4, info.jet_order or 4) + 1):
                cg.check_collapsed(fn, primals, k, rng, atol=atol,
                                   rtol=rtol * cg.JET_GROWTH ** (k - 1))


@pytest.mark.parametrize("info,order", _params(("nondiff",), "jet"))
def test_jet_nondifferentiable_raises(info, order):
    """Step functions have no Taylor series: pf.jet raises NonDifferentiableError when their
    input varies; detached inputs (a constant meant) give zero coefficients, no error."""
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        x0 = tuple(cg.leaves(primals, False))
        series = tuple([pf.ones_like(x), pf.ones_like(x)] for x in x0)
        with _about(info, sample):
            with pytest.raises(pf.NonDifferentiableError, match="not differentiable"):
                pf.jet(fn, x0, series)
            out, ys = pf.jet(lambda *xs: fn(*[x.detach() for x in xs]), x0, series)
            np.testing.assert_array_equal(out.numpy(), fn(*x0).numpy())
            assert len(ys) == 2 and not any(np.any(y.numpy()) for y in ys)


@pytest.mark.parametrize("info,order", _params(("nograd",), "jet"))
def test_jet_integer_results_have_no_series(info, order):
    """Bool/int results carry no Taylor series: every coefficient is an exact zero (None in
    taylor_series; zeros of the result's dtype from pf.jet)."""
    from primflow.autodiff.taylor import taylor_series

    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        if not primals:
            continue
        x0 = tuple(cg.leaves(primals, False))
        with _about(info, sample):
            raw = taylor_series(fn, x0, tuple([pf.ones_like(x), None, pf.ones_like(x)]
                                              for x in x0), 3)
            for s in (raw if isinstance(raw, (list, tuple)) and isinstance(raw[0], list)
                      else [raw]):
                assert len(s) == 4 and all(c is None for c in s[1:]), s
            out, ys = pf.jet(fn, x0, tuple([pf.ones_like(x)] * 3 for x in x0))
            for o, y in zip(cg.as_list(out), [ys] if not isinstance(out, (list, tuple))
                            else ys):
                assert not o.dtype.is_floating
                assert len(y) == 3 and all(c.dtype == o.dtype and c.shape == o.shape
                                           and not np.any(c.numpy()) for c in y)


def test_every_primitive_has_a_taylor_rule():
    missing = sorted(name for name in pf.primitives()
                     if not callable(get_primitive(name).taylor))
    assert not missing, f"primitives without a Taylor rule: {missing}"


# rules never needed along a path: constant outputs (no tensor inputs), and the logical
# primitives, whose inputs are bool (the public ops cast first), which carries no series
_CONSTANT_PRIMS = {"full", "iota", "random_uniform", "random_normal", "logical_and",
                   "logical_or", "logical_not",
                   "lu_pivots", "lu_permutation"}  # integer inputs (LU pivots): no series


def test_jet_exercises_every_taylor_rule(monkeypatch):
    """The jet tests above reach the Taylor rule of every primitive that can lie on a path
    (a spy on each rule while pf.jet runs the first sample of every entry)."""
    called = set()

    def spy(name, rule):
        def wrapped(*args, **kwargs):
            called.add(name)
            return rule(*args, **kwargs)

        return wrapped

    for name in pf.primitives():
        prim = get_primitive(name)
        monkeypatch.setattr(prim, "taylor", spy(name, prim.taylor))
    for info in OP_DB:
        if info.kind not in ("diff", "nondiff", "nograd") or not info.runs_here():
            continue
        for sample in info.samples()[:2]:
            fn, primals = sample.bind(info.op)
            if not primals:
                continue
            x0 = tuple(cg.leaves(primals, False))
            with contextlib.suppress(pf.NonDifferentiableError):
                pf.jet(fn, x0, tuple([pf.ones_like(x)] * 2 for x in x0))
    # primitives only ops that need an absent extra use (LU without SciPy) cannot be reached
    absent = ({p for info in OP_DB if not info.runs_here() for p in info.prims}
              - {p for info in OP_DB if info.runs_here() for p in info.prims})
    missing = sorted(set(pf.primitives()) - _CONSTANT_PRIMS - _REGION_PRIMS - absent - called)
    assert not missing, f"Taylor rules no OpInfo entry reaches under pf.jet: {missing}"


# ---- negative claims -----------------------------------------------------------------------

@pytest.mark.parametrize("info,order", _params(("nondiff",), "claims"))
def test_nondifferentiable_raises(info, order):
    """Step functions: a derivative through them raises, in reverse and in forward mode."""
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        with _about(info, sample):
            xs = cg.leaves(primals)
            out = fn(*xs)
            assert not out.stop_gradient, "the output should be recorded (float result)"
            with pytest.raises(pf.NonDifferentiableError, match="not differentiable"):
                pf.grad(pf.sum(out), xs)
            with pytest.raises(pf.NonDifferentiableError, match="not differentiable"):
                pf.jvp(fn, tuple(cg.leaves(primals, False)),
                       tuple(cg.leaves([np.ones_like(p) for p in primals], False)))
            # detached inputs state that a zero derivative is meant: no error, no graph,
            # and in forward mode (where x is a tracer) a zero tangent
            assert fn(*[x.detach() for x in xs]).stop_gradient
            out, tangent = pf.jvp(lambda *ys, fn=fn: fn(*[y.detach() for y in ys]),
                                  tuple(cg.leaves(primals, False)),
                                  tuple(cg.leaves([np.ones_like(p) for p in primals], False)))
            np.testing.assert_array_equal(out.numpy(), fn(*cg.leaves(primals, False)).numpy())
            assert not np.any(tangent.numpy())


@pytest.mark.parametrize("info,order", _params(("nograd",), "claims"))
def test_integer_results_carry_no_gradient(info, order):
    """Bool/int results never require grad, even from inputs that do; pf.grad refuses them
    and forward mode gives a zero tangent."""
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        with _about(info, sample):
            xs = cg.leaves(primals)
            out = fn(*xs)
            for o in cg.as_list(out):
                assert not o.dtype.is_floating, f"{o.dtype} result"
                assert o.stop_gradient and o._node is None, "an integer result was recorded"
                if xs:
                    with pytest.raises(RuntimeError, match="does not require grad"):
                        pf.grad(o, xs, grad_outputs=pf.ones_like(o))
            if primals:
                _, tangent = pf.jvp(fn, tuple(cg.leaves(primals, False)),
                                    tuple(cg.leaves([np.ones_like(p) for p in primals],
                                                    False)))
                for t in cg.as_list(tangent):
                    assert not np.any(t.numpy()), "nonzero tangent of an integer result"


@pytest.mark.parametrize("info,order", _params(("creation",), "forward"))
def test_creation(info, order):
    """Forward vs NumPy; the result is a constant (no graph) even from grad-requiring input."""
    for sample in info.samples():
        with _about(info, sample):
            out, xs = _call(info, sample, requires_grad=True)
            r = np.asarray(info.ref(*sample.args, **sample.kwargs))
            o = out.numpy()
            assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, o.dtype, r.shape,
                                                                r.dtype)
            np.testing.assert_allclose(o, r, rtol=1e-15, atol=1e-15)
            assert out.stop_gradient and out._node is None
            if xs:
                assert not xs[0].stop_gradient


@pytest.mark.parametrize("info,order", _params(("random",), "random"))
def test_random(info, order):
    """Same key/seed -> same draws; another key -> other draws; moments and support."""
    for sample in info.samples():
        with _about(info, sample):
            a = info.op(11, **sample.kwargs).numpy()
            b = info.op(11, **sample.kwargs).numpy()
            c = info.op(12, **sample.kwargs).numpy()
            np.testing.assert_array_equal(a, b)
            assert a.shape == c.shape and not np.array_equal(a, c), "key ignored"
            info.stats(a, **sample.kwargs)


# ---- the table itself ----------------------------------------------------------------------

def _bound_prims(info, monkeypatch):
    """Names of the primitives an entry's op binds on its samples (a spy on bind). The
    claims are about the decomposition, so composites with fused eager kernels (softmax,
    layer_norm, ...) run decomposed here (pf.decompose)."""
    names = set()
    original = Primitive.bind

    def spy(self, *args, **params):
        names.add(self.name)
        return original(self, *args, **params)

    with monkeypatch.context() as m, pf.decompose():
        m.setattr(Primitive, "bind", spy)
        m.setattr(Primitive, "__call__", spy)
        for sample in info.samples():
            if info.kind == "random":
                info.op(3, **sample.kwargs)
            else:
                _call(info, sample, requires_grad=info.kind == "diff")
    return names


# control-flow primitives (cond, while, scan) bind only when staged (eagerly their regions'
# primitives run); the OpInfo entries of pf.cond/pf.scan/... test them under pf.jit, and
# tests/test_control_flow_primitives.py reaches each of their rules
_REGION_PRIMS = {name for name in pf.primitives() if get_primitive(name).multiple_results}


def test_every_primitive_has_an_entry(monkeypatch):
    claimed = {p for info in OP_DB for p in info.prims}
    missing = sorted(set(pf.primitives()) - claimed - _REGION_PRIMS)
    assert not missing, f"primitives without an OpInfo entry: {missing}"
    unknown = sorted(claimed - set(pf.primitives()))
    assert not unknown, f"entries claim unregistered primitives: {unknown}"


@pytest.mark.parametrize("info", [i for i in OP_DB if i.prims], ids=lambda i: i.name)
def test_entry_binds_the_primitives_it_claims(info, monkeypatch):
    bound = _bound_prims(info, monkeypatch)
    assert set(info.prims) <= bound, f"claims {sorted(set(info.prims) - bound)}, binds {bound}"


def test_every_public_op_has_an_entry():
    ops = public_ops()
    covered = {name for info in OP_DB for name in info.covers}
    unknown = sorted(covered - set(ops))
    assert not unknown, f"entries cover names that are not public ops: {unknown}"
    covered_fns = {id(ops[n]) for n in covered}
    missing = sorted(n for n, fn in ops.items() if n not in covered and id(fn) not in covered_fns)
    assert not missing, f"public ops without an OpInfo entry: {missing}"


def test_table_is_well_formed():
    required = {"softmax", "log_softmax", "logsumexp", "logistic", "softplus", "relu", "gelu",
                "silu", "tan", "sinh", "cosh", "square", "mean", "var", "std", "norm", "clip",
                "stack", "concatenate", "layer_norm", "rms_norm", "mse_loss", "cross_entropy",
                "matmul", "linear", "getitem"}
    assert required <= set(OPS_BY_NAME)
    has_scalar = has_broadcast = has_multi_axis = False
    for info in OP_DB:
        assert info.kind in KINDS, info.name
        assert 1 <= info.max_order <= 4
        if info.kind in ("diff", "nondiff", "nograd", "creation"):
            assert info.ref is not None, f"{info.name} has no reference"
        if info.kind == "random":
            assert info.stats is not None, f"{info.name} has no statistics check"
        for sample in info.samples():
            assert isinstance(sample, SampleInput)
            arrays = [a for a in sample.args if isinstance(a, np.ndarray)]
            for i in sample.diff_indices() if info.kind == "diff" else ():
                assert sample.args[i].dtype == np.float64, f"{info.name}: non-float64 input"
            has_scalar |= any(a.ndim == 0 for a in arrays)
            shapes = [a.shape for a in arrays if a.dtype.kind == "f"]
            has_broadcast |= (3, 1) in shapes and (4,) in shapes
            axis = sample.kwargs.get("axis")
            has_multi_axis |= isinstance(axis, (tuple, list)) and len(axis) > 1
    assert has_scalar and has_broadcast and has_multi_axis


def test_xfails_become_strict_xfail_marks():
    """Expected failures live in the entry and reach the generic test as strict xfails."""
    from primflow.testing.opinfo import XFail

    info = dataclasses.replace(OPS_BY_NAME["sin"], name="sin_xfail", xfails=(
        XFail("rev", "demo", orders=(3,)), XFail("vjp", "demo")))
    assert info.xfail("rev", 3).reason == "demo" and info.xfail("rev", 2) is None
    assert info.xfail("vjp") is not None and info.xfail("jvp") is None
    OP_DB.append(info)
    try:
        params = {p.id: p for p in _params(("diff",), "rev", _orders(1))}
    finally:
        OP_DB.remove(info)
    marks = params["sin_xfail-order3"].marks
    assert marks and marks[0].name == "xfail" and marks[0].kwargs["strict"]
    assert not params["sin_xfail-order2"].marks


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_piecewise_binary_samples_have_no_ties(name):
    """maximum/minimum samples: every broadcast pair of values differs by far more than the
    finite-difference step."""
    info = OPS_BY_NAME[name]
    for sample in info.samples():
        x, y = np.broadcast_arrays(*sample.args)
        assert np.min(np.abs(x - y), initial=np.inf) > 1000 * info.fd_eps, sample


@pytest.mark.parametrize("info", [i for i in OP_DB if i.kind == "diff" and i.singularities],
                         ids=lambda i: i.name)
def test_samples_stay_away_from_singularities(info):
    """The main input of a piecewise op keeps its distance from the kinks, jumps and poles,
    so finite-difference steps never cross one."""
    for sample in info.samples():
        a = sample.args[sample.diff_indices()[0]]
        for p in info.singularities:
            gap = float(np.min(np.abs(a - p), initial=np.inf))
            assert gap >= 0.99 * info.margin, f"{sample!r} is {gap} from the singularity {p}"
