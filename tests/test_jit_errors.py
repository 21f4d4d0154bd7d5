"""pf.jit / pf.to_static on bad input: unhashable static arguments, retrace storms,
non-tensor outputs, in-place updates of arguments and closed-over tensors (and of tensors
outside pf.vmap / pf.jvp), Python control flow on traced values. Each error names what is wrong and how to fix it; the valid
neighbours of each case keep working."""

from __future__ import annotations

import dataclasses
import importlib
import warnings

import numpy as np
import pytest

import primflow as pf
from primflow.ops import indexing
from primflow.transforms.jit import RetraceWarning, TracerConversionError

jit_module = importlib.import_module("primflow.transforms.jit")  # pf.transforms.jit is jit()


def _close(a, b, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a.numpy() if hasattr(a, "numpy") else a),
                               np.asarray(b.numpy() if hasattr(b, "numpy") else b),
                               rtol=rtol, atol=atol)


def _retrace_warnings(record):
    return [w for w in record if issubclass(w.category, RetraceWarning)]


# ---- unhashable arguments --------------------------------------------------------------------

def test_unhashable_static_positional_argument_is_named_with_the_fix():
    def f(x, opts):
        return x * len(opts)

    with pytest.raises(TypeError, match=r"static argument 1 \('opts'\) \(marked by "
                                        r"static_argnums\) is a list.*pass a tuple"):
        pf.jit(f, static_argnums=1)(pf.ones([2]), [1, 2])
    # the fix works
    _close(pf.jit(f, static_argnums=1)(pf.ones([2]), (1, 2)), [2.0, 2.0])


def test_unhashable_static_keyword_argument_is_named_with_the_fix():
    def f(x, cfg=None):
        return x * cfg["scale"]

    jf = pf.jit(f, static_argnames="cfg")
    with pytest.raises(TypeError, match=r"static keyword argument 'cfg' \(marked by "
                                        r"static_argnames\) is a dict.*tuple of its items"):
        jf(pf.ones([2]), cfg={"scale": 2.0})
    # not static, a dict is a pytree (its Python float is a static leaf): fine
    _close(pf.jit(f)(pf.ones([2]), cfg={"scale": 2.0}), [2.0, 2.0])


def test_static_array_argument_says_to_pass_a_tensor():
    with pytest.raises(TypeError, match=r"static argument 0 \('table'\).*numpy\.ndarray.*"
                                        r"pass it as a tensor argument"):
        pf.jit(lambda table, x: x, static_argnums=0)(np.arange(3.0), pf.ones([1]))


def test_unhashable_non_static_argument_is_named_with_its_path():
    def f(x, d):
        return x

    with pytest.raises(TypeError, match=r"argument 1 \('d'\)\['tags'\] is a set, which is "
                                        r"neither a tensor.*frozenset.*static_argnums"):
        pf.jit(f)(pf.ones([1]), {"tags": {1, 2}, "w": pf.ones([1])})

    class Config:  # __eq__ without __hash__: unhashable
        def __eq__(self, other):
            return isinstance(other, Config)

    with pytest.raises(TypeError, match=r"argument 1 \('d'\) is a .*Config.*make Config "
                                        r"hashable.*frozen dataclass"):
        pf.jit(f)(pf.ones([1]), Config())


def test_hashable_non_tensor_arguments_are_static_and_work():
    @dataclasses.dataclass(frozen=True)
    class Config:
        scale: float

    f = pf.jit(lambda x, cfg, names: x * cfg.scale * len(names))
    _close(f(pf.ones([2]), Config(2.0), frozenset({"a", "b"})), [4.0, 4.0])
    _close(f(pf.ones([2]), Config(2.0), frozenset({"a", "b"})), [4.0, 4.0])
    assert f.cache_info()["traces"] == 1
    _close(f(pf.ones([2]), Config(3.0), frozenset({"a", "b"})), [6.0, 6.0])
    assert f.cache_info()["traces"] == 2


# ---- retrace storms --------------------------------------------------------------------------

def test_python_scalar_changing_every_call_warns_once_naming_it():
    f = pf.jit(lambda x, s: x * s)
    x = pf.ones([2])
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for i in range(20):
            f(x, i / 4)
    found = _retrace_warnings(record)
    assert len(found) == 1  # once per function, not once per call
    message = str(found[0].message)
    assert "traced 8 times" in message
    assert "argument 1 ('s'): Python float 1.5 -> 1.75" in message
    assert "pf.to_tensor(value)" in message
    assert found[0].filename == __file__  # points at the call site
    assert f.cache_info()["traces"] == 20


def test_the_fix_for_a_scalar_storm_traces_once():
    f = pf.jit(lambda x, s: x * s)
    x = pf.ones([2])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)
        for i in range(20):
            _close(f(x, pf.to_tensor(i / 4)), [i / 4] * 2)
    assert f.cache_info()["traces"] == 1


def _seven_traces(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)  # not yet
        for n in range(1, 8):
            call(n)


def test_growing_shape_warns_naming_the_shape_change():
    f = pf.jit(lambda x: x * 2.0)
    _seven_traces(lambda n: f(pf.ones([n])))
    with pytest.warns(RetraceWarning, match=r"argument 0 \('x'\) shape \[7\] -> \[8\].*"
                                            r"pad or bucket"):
        f(pf.ones([8]))


def test_changing_static_argument_warns_naming_it():
    f = pf.jit(lambda x, n: x * n, static_argnums=1)
    _seven_traces(lambda n: f(pf.ones([2]), n))
    with pytest.warns(RetraceWarning, match=r"static argument 1 \('n'\): 7 -> 8"):
        f(pf.ones([2]), 8)


def test_changing_structure_or_argument_kind_warns():
    f = pf.jit(lambda xs: sum(xs))
    _seven_traces(lambda n: f([pf.ones([2])] * n))
    with pytest.warns(RetraceWarning, match=r"pytree structure of the arguments changed"):
        f([pf.ones([2])] * 8)
    g = pf.jit(lambda x, s: x * s)
    _seven_traces(lambda n: g(pf.ones([1]), n))
    with pytest.warns(RetraceWarning, match=r"argument 1 \('s'\): Python int 7 -> tensor "
                                            r"float32\[1\]"):
        g(pf.ones([1]), pf.ones([1]))


def test_few_signatures_or_cached_ones_do_not_warn():
    f = pf.jit(lambda x: x + 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RetraceWarning)
        for _ in range(30):  # two shapes, alternating: both cached
            f(pf.ones([2]))
            f(pf.ones([3]))
        for n in range(4, 9):  # 7 traces in all: under the threshold
            f(pf.ones([n]))
    assert f.cache_info()["traces"] == 7


def test_threshold_is_a_module_constant(monkeypatch):
    assert "RetraceWarning" in jit_module.__all__
    assert jit_module.RETRACE_WARNING_THRESHOLD == 8
    monkeypatch.setattr(jit_module, "RETRACE_WARNING_THRESHOLD", 3)
    f = pf.jit(lambda x, s: x * s)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        f(pf.ones([1]), 1.0)
        f(pf.ones([1]), 2.0)
        assert not _retrace_warnings(record)
        f(pf.ones([1]), 3.0)
    assert "traced 3 times" in str(_retrace_warnings(record)[0].message)


# ---- non-tensor outputs ----------------------------------------------------------------------

def test_python_constants_are_returned_as_traced():
    @pf.jit
    def f(x, n):
        return x * 2.0, n + 1, 0.5, "tag", True, None, x.dtype

    for _ in range(2):  # traced call and cached call
        y, n, half, tag, flag, none, dtype = f(pf.ones([2]), 3)
        _close(y, [2.0, 2.0])
        assert (n, half, tag, flag, none, dtype) == (4, 0.5, "tag", True, None, pf.float32)
    assert f.cache_info() == {"traces": 1, "hits": 1, "entries": 1}


def test_numpy_arrays_returned_become_constant_tensors():
    f = pf.jit(lambda x: {"y": x + 1.0, "table": np.arange(3.0), "i": np.int32(7)})
    for _ in range(2):
        out = f(pf.ones([2]))
        assert isinstance(out["table"], pf.Tensor) and isinstance(out["i"], pf.Tensor)
        _close(out["table"], [0.0, 1.0, 2.0])
        assert out["table"].dtype == pf.float64 and out["i"].item() == 7
        _close(out["y"], [2.0, 2.0])


def test_pytrees_and_layers_are_valid_outputs():
    f = pf.jit(lambda x: (x, [x * 2.0, {"z": x * 3.0}]))
    a, (b, d) = f(pf.ones([2]))
    _close(a, [1.0, 1.0])
    _close(b, [2.0, 2.0])
    _close(d["z"], [3.0, 3.0])
    net = pf.nn.Linear(2, 3)
    out = pf.jit(lambda m: m)(net)  # a Layer is a pytree of its parameters
    assert isinstance(out, pf.nn.Linear) and out is not net
    _close(out.weight, net.weight)


class _Box:
    def __init__(self, value):
        self.value = value


@pytest.mark.parametrize("body, where, kind", [
    (lambda x: (x, (i for i in range(2))), r"output\[1\]", "generator"),
    (lambda x: {"objs": [_Box(x)]}, r"output\['objs'\]\[0\]", r"test_jit_errors\._Box"),
    (lambda x: _Box(1), r"output", r"test_jit_errors\._Box"),
    (lambda x: (x, {1, 2}), r"output\[1\]", "set"),
    (lambda x: (x, lambda: x), r"output\[1\]", "function"),
])
def test_other_outputs_raise_naming_their_position(body, where, kind):
    with pytest.raises(TypeError, match=where + r" is a " + kind + r" .*cannot return.*"
                                         r"Return tensors"):
        pf.jit(body)(pf.ones([2]))


# ---- in-place updates ------------------------------------------------------------------------

@pytest.mark.parametrize("update, what", [
    (lambda x: x.add_(1.0), r"add_\(\)"),
    (lambda x: x.subtract_(1.0), r"subtract_\(\)"),
    (lambda x: x.multiply_(2.0), r"multiply_\(\)"),
    (lambda x: x.clip_(0.0, 0.5), r"clip_\(\)"),
    (lambda x: x.zero_(), r"zero_\(\)"),
    (lambda x: x.fill_(3.0), r"fill_\(\)"),
    (lambda x: x.__setitem__(0, 5.0), r"x\[\.\.\.\] = value"),
    (lambda x: x.set_value(np.zeros(3, np.float32)), r"set_value\(\)"),
])
def test_in_place_update_of_an_argument_is_refused(update, what):
    def f(x):
        update(x)
        return x * 1.0

    x = pf.to_tensor([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"pf\.jit\(.*f\): the function modifies its input "
                                        r"argument 0 \('x'\) in place \(" + what + r"\).*"
                                        r"Return the new value"):
        pf.jit(f)(x)
    _close(x, [1.0, 2.0, 3.0])  # the caller's tensor is untouched


def test_in_place_update_of_a_nested_argument_or_layer_parameter_names_it():
    def f(d):
        d["w"][0] = 0.0
        return d["w"]

    with pytest.raises(TypeError, match=r"input argument 0 \('d'\)\['w'\] in place"):
        pf.jit(f)({"w": pf.ones([2])})

    class Net(pf.nn.Layer):
        def __init__(self):
            super().__init__()
            self.w = self.create_parameter([3], "float32")

        def forward(self, x):
            with pf.no_grad():
                self.w.add_(1.0)  # a parameter update inside forward
            return x * self.w

    net = pf.to_static(Net())
    before = net.w.numpy()
    with pytest.raises(TypeError, match=r"pf\.jit\(Net\.forward\).*input argument 0 "
                                        r"\('self'\)\.w in place \(add_\(\)\)"):
        net(pf.ones([3]))
    _close(net.w, before)


def test_any_other_in_place_path_on_an_argument_is_caught_after_tracing():
    def through_ops(x):
        indexing.setitem(x, 0, 5.0)  # ops' setitem, not the method: refused as it happens
        return x

    def skipping_the_hook(x):
        x._version += 1  # code that updates a tensor without asking _check_inplace
        return x

    for f in (through_ops, skipping_the_hook):
        with pytest.raises(TypeError, match=r"modifies its input argument 0 \('x'\) in "
                                            r"place"):
            pf.jit(f)(pf.ones([2]))


def _temporaries(x):
    y = x * 2.0
    y.add_(1.0)
    y[0] = 7.0
    y.multiply_(x)
    y.clip_(-5.0, 6.0)
    z = pf.zeros([3])
    z.fill_(0.5)
    z[1:] = y[:2]
    w = pf.ones([3])
    w.set_value(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    w.subtract_(z)
    v = y.detach()  # a new tensor: updating it does not change the argument
    v.zero_()
    return y, z, w, v


def test_in_place_updates_of_temporaries_match_eager():
    x = pf.to_tensor([1.0, -2.0, 3.0])
    jitted = pf.jit(_temporaries)
    for _ in range(2):
        for got, want in zip(jitted(x), _temporaries(x)):
            _close(got, want)
    _close(x, [1.0, -2.0, 3.0])


def test_in_place_updates_of_temporaries_are_differentiated_like_eager():
    def f(x):
        y = x * x
        y.add_(x)
        y[1] = x[0] * 3.0
        return y.sum()

    x = pf.to_tensor([0.5, -1.5, 2.0], dtype="float64", stop_gradient=False)
    pf.jit(f)(x).backward()
    jit_grad = x.grad.numpy()
    x.clear_grad()
    f(x).backward()
    _close(jit_grad, x.grad)
    _close(pf.jit(pf.grad(f))(x), pf.grad(f)(x))  # pf.grad inside jit


def test_in_place_update_of_a_closed_over_tensor_is_refused_naming_it():
    c = pf.to_tensor([1.0, 1.0])
    c.name = "counter"

    def with_traced_value(x):
        c.add_(x)
        return x

    def setitem_traced(x):
        c[0] = x.sum()
        return x

    def set_value_traced(x):
        c.set_value(x * 2.0)
        return x

    def after_reading(x):
        y = x * c
        c.set_value(np.zeros(2, np.float32))  # no traced value: would run once, in tracing
        return y

    for fn, what in [(with_traced_value, r"add_\(\)"), (setitem_traced, r"x\[\.\.\.\] = value"),
                     (set_value_traced, r"set_value\(\)"),
                     (after_reading, "an in-place update while tracing")]:
        with pytest.raises(TypeError, match=r"modifies a tensor 'counter' \(float32\[2\]\) "
                                            r"that it closes over.*in place \(" + what
                                            + r"\).*Pass the tensor as an argument"):
            pf.jit(fn)(pf.ones([2]))
        _close(c, [1.0, 1.0])  # not changed, not even by the aborted trace


# ---- in-place updates under the other transforms ---------------------------------------------

def _updates_of_temporaries(x):
    """Every in-place path on tensors computed from ``x``, so traced by every transform
    (``pf.zeros`` would be traced by jit only)."""
    y = x * 2.0
    y.add_(1.0)
    y[0] = 7.0
    y.multiply_(x)
    y.clip_(-5.0, 6.0)
    y.scale_(0.5)
    z = x * 0.0
    z.fill_(0.5)  # a constant: not traced by vmap or jvp, rebound into the tracer
    z[1:] = y[:2]
    w = x.clone()
    w.set_value(np.array([1.0, 2.0, 3.0]))  # a constant too
    w.subtract_(z)
    v = y * 1.0
    v.zero_()
    return y, z, w, v


def test_in_place_updates_of_temporaries_work_under_vmap():
    xs = pf.to_tensor(np.array([[1.0, -2.0, 3.0], [0.3, 0.2, -0.7]]))
    batched = pf.vmap(_updates_of_temporaries)(xs)
    for i in range(2):
        for got, want in zip(batched, _updates_of_temporaries(xs[i])):
            _close(got[i], want)
    jitted = pf.jit(pf.vmap(_updates_of_temporaries))(xs)  # vmap staged by jit
    for got, want in zip(jitted, batched):
        _close(got, want)


def test_in_place_updates_of_temporaries_work_under_jvp_and_jet():
    x = np.array([0.3, -1.2, 2.5])
    t = np.array([1.0, 0.5, -2.0])
    primals, tangents = pf.jvp(_updates_of_temporaries, (pf.to_tensor(x),),
                               (pf.to_tensor(t),))
    eps = 1e-6
    plus = _updates_of_temporaries(pf.to_tensor(x + eps * t))
    minus = _updates_of_temporaries(pf.to_tensor(x - eps * t))
    for p, tangent, want, hi, lo in zip(primals, tangents, _updates_of_temporaries(
            pf.to_tensor(x)), plus, minus):
        _close(p, want)
        _close(tangent, (hi.numpy() - lo.numpy()) / (2 * eps), rtol=1e-6, atol=1e-6)
    # Taylor mode too: the first coefficient is the tangent
    jet_primals, jet_series = pf.jet(_updates_of_temporaries, (pf.to_tensor(x),),
                                     ([pf.to_tensor(t)],))
    for p, (first,), want_p, want_t in zip(jet_primals, jet_series, primals, tangents):
        _close(p, want_p)
        _close(first, want_t)


@pytest.mark.parametrize("update, what", [
    (lambda w, x: w.add_(x), r"add_\(\)"),
    (lambda w, x: w.__setitem__(0, x[1]), r"x\[\.\.\.\] = value"),
    (lambda w, x: w.set_value(x * 2.0), r"set_value\(\)"),
])
def test_in_place_update_of_an_outside_tensor_under_vmap_or_jvp_names_it(update, what):
    w = pf.to_tensor([1.0, 2.0, 3.0])
    w.name = "w"

    def f(x):
        update(w, x)
        return x

    pattern = (r"the function modifies a tensor 'w' \(float32\[3\]\) that the transform does "
               r"not trace \(defined outside the function.*in place \(" + what
               + r"\).*Pass the tensor as an argument and return its new value.*pf\.where")
    with pytest.raises(TypeError, match=r"pf\.vmap: " + pattern):
        pf.vmap(f)(pf.ones([4, 3]))
    with pytest.raises(TypeError, match=r"pf\.jvp: " + pattern):
        pf.jvp(f, (pf.ones([3]),), (pf.ones([3]),))
    _close(w, [1.0, 2.0, 3.0])  # untouched


def test_tensor_made_from_constants_under_vmap_cannot_hold_a_traced_value():
    def f(x):
        z = pf.zeros([3])  # not traced by vmap: made from constants only
        z[1:] = x[:2]
        return z

    with pytest.raises(TypeError, match=r"pf\.vmap: .*tensor \(float32\[3\]\) that the "
                                        r"transform does not trace.*made inside it from "
                                        r"constants only"):
        pf.vmap(f)(pf.ones([4, 3]))
    _close(pf.jit(f)(pf.ones([3])), [0.0, 1.0, 1.0])  # jit traces creation: fine there


def test_optimizer_step_inside_jit_names_the_parameter():
    w = pf.to_tensor([1.0], stop_gradient=False)
    opt = pf.optimizer.SGD(0.1, parameters=[w])

    def step(x):
        (g,) = pf.grad((x * w).sum(), w)
        w.grad = g
        opt.step()
        return x

    with pytest.raises(Exception, match="functionally"):
        pf.jit(step)(pf.ones([1]))
    _close(w, [1.0])


# ---- Python control flow on traced values ----------------------------------------------------

def _while_loop(x):
    while x.sum() > 0:
        x = x - 1.0
    return x


def _assert(x):
    assert (x > 0).all()
    return x


@pytest.mark.parametrize("body, what", [
    (_assert, r"bool\(\) .*`assert` on a tensor\)"),
    (lambda x: x * int(x.sum()), r"int\(\)"),
    (lambda x: x * len(x.tolist()), r"\.tolist\(\)"),
    (lambda x: x * np.asarray(x).sum(), "conversion to a NumPy array"),
    (lambda x: (x.sum() > 0) and x, r"bool\(\) .*`and`/`or`.*\)"),
])
def test_more_python_control_flow_on_traced_values(body, what):
    with pytest.raises(TracerConversionError, match=what + r".*needs the concrete value.*"
                                                    r"pf\.where.*static_argnums"):
        pf.jit(body, full_graph=True)(pf.ones([3]))


def test_a_while_loop_on_a_traced_value_is_converted():
    # a `while` on a tensor becomes a pf.while_loop (transforms/ast_convert.py)
    jitted = pf.jit(_while_loop, full_graph=True)
    np.testing.assert_allclose(jitted(pf.ones([3]) * 2.5).numpy(), [-0.5, -0.5, -0.5])
    assert " = while(" in jitted.lower(pf.ones([3])).as_text()


def test_control_flow_on_static_values_is_fine():
    def f(x, n):
        for _ in range(n):
            x = x * 2.0
        return x if n > 1 else -x

    jf = pf.jit(f, static_argnums=1)
    _close(jf(pf.ones([2]), 3), [8.0, 8.0])
    _close(jf(pf.ones([2]), 1), [-2.0, -2.0])
