"""Reliability of the transforms and autodiff under bad input and unusual use: no silent
wrong answer, a clear error naming the cause. Each test failed on the code before its fix.

Derivatives are checked against independent oracles: closed forms, float64 central
differences, or the same function run eagerly / one example at a time.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import primflow as pf
from primflow.transforms.graph_break import GraphBreakWarning

SCALE = 2.0  # a module global the converted functions read (compiled with wrong globals: NameError)


@pytest.fixture(autouse=True)
def _float64():
    before = pf.get_default_dtype()
    pf.set_default_dtype("float64")
    yield
    pf.set_default_dtype(before)


def _close(a, b, tol=1e-9):
    la, lb = pf.tree_flatten(a)[0], pf.tree_flatten(b)[0]
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        np.testing.assert_allclose(np.asarray(u.numpy() if isinstance(u, pf.Tensor) else u),
                                   np.asarray(v.numpy() if isinstance(v, pf.Tensor) else v),
                                   rtol=tol, atol=tol)


# ---- transform wrappers under pf.jit / pf.to_static with converted control flow ----------

def f_if(x):
    """Scalar, with a Python `if` on a tensor: grad is 2*SCALE*x or ones."""
    if x.sum() > 0:
        y = (x * x).sum() * SCALE
    else:
        y = x.sum()
    return y


def g_if(x):
    """Vector-valued, with a Python `if` on a tensor."""
    if x.sum() > 0:
        y = x * x * SCALE
    else:
        y = -x
    return y


def square_sum_if(x):
    if x.sum() > 0:
        y = (x * x).sum()
    else:
        y = x.sum()
    return y


def f_if_aux(x):
    return square_sum_if(x), x.sum()  # the `if` is in a helper: converted when called


def _custom_vjp_square_sum():
    sq = pf.custom_vjp(square_sum_if)

    def fwd(x):
        if x.sum() > 0:  # the rule's own control flow
            y = square_sum_if(x)
        else:
            y = x.sum()
        return y, x

    def bwd(x, g):
        return (g * 2.0 * x * SCALE,)  # deliberately not the true derivative: the rule counts

    sq.defvjp(fwd, bwd)
    return sq


def _custom_jvp_square_sum():
    sq = pf.custom_jvp(square_sum_if)

    @sq.defjvp
    def rule(primals, tangents):
        (x,), (t,) = primals, tangents
        if x.sum() > 0:
            out = square_sum_if(x)
        else:
            out = x.sum()
        return out, (3.0 * x * t).sum()  # the rule's own derivative: 3x

    return sq


def grad_of_helper(x):
    """The user calls pf.grad(helper) inside a jitted function: the helper is converted."""
    return pf.grad(f_if)(x)


def sum_of_grad(x):
    return pf.grad(f_if)(x).sum()


def grad_of_checkpoint(x):
    return pf.grad(lambda v: pf.checkpoint(g_if)(v).sum())(x)


def jvp_of_g(x):  # pf.jvp / pf.vjp / pf.jet given the user function inside jitted code
    return pf.jvp(g_if, (x,), (pf.ones_like(x),))[1]


def vjp_of_g(x):
    out, pullback = pf.vjp(g_if, x)
    return pullback(pf.ones_like(out))[0]


def jet_of_g(x):
    return pf.jet(g_if, (x,), ((pf.ones_like(x),),))[1][0]


def _expected_grad_f(x):  # closed form of grad(f_if)
    x = np.asarray(x)
    return 2 * SCALE * x if x.sum() > 0 else np.ones_like(x)


def _expected_jac_g(x):  # closed form of the Jacobian of g_if
    x = np.asarray(x)
    return np.diag(2 * SCALE * x) if x.sum() > 0 else -np.eye(len(x))


WRAPPERS = {
    # name: (function, closed-form result as a function of the NumPy input)
    "grad": (lambda: pf.grad(f_if), _expected_grad_f),
    "value_and_grad": (lambda: pf.value_and_grad(f_if),
                       lambda x: (SCALE * (x * x).sum() if x.sum() > 0 else x.sum(),
                                  _expected_grad_f(x))),
    "grad_has_aux": (lambda: pf.grad(f_if_aux, has_aux=True),
                     lambda x: (2 * x if x.sum() > 0 else np.ones_like(x), x.sum())),
    "jacrev": (lambda: pf.jacrev(g_if), _expected_jac_g),
    "jacfwd": (lambda: pf.jacfwd(g_if), _expected_jac_g),
    "hessian": (lambda: pf.hessian(f_if),
                lambda x: 2 * SCALE * np.eye(len(x)) if x.sum() > 0 else np.zeros((3, 3))),
    "grad_of_grad": (lambda: pf.grad(sum_of_grad),
                     lambda x: 2 * SCALE * np.ones_like(x) if x.sum() > 0 else 0 * x),
    "grad_of_lambda": (lambda: pf.grad(lambda v: pf.grad(f_if)(v).sum()),
                       None),  # a lambda cannot be converted: it must still be right (eager)
    "checkpoint": (lambda: pf.checkpoint(g_if),
                   lambda x: x * x * SCALE if x.sum() > 0 else -x),
    "grad_of_checkpoint": (lambda: grad_of_checkpoint, lambda x: np.diag(_expected_jac_g(x))),
    "grad_of_helper": (lambda: grad_of_helper, _expected_grad_f),
    "grad_of_jit": (lambda: pf.grad(pf.jit(f_if)), _expected_grad_f),
    "custom_vjp": (lambda: pf.grad(_custom_vjp_square_sum()), lambda x: 2 * SCALE * x),
    "custom_jvp": (lambda: pf.grad(_custom_jvp_square_sum()), lambda x: 3 * x),
    "jvp": (lambda: jvp_of_g, lambda x: np.diag(_expected_jac_g(x))),
    "vjp": (lambda: vjp_of_g, lambda x: np.diag(_expected_jac_g(x))),
    "jet": (lambda: jet_of_g, lambda x: np.diag(_expected_jac_g(x))),
    "vmap": (lambda: pf.vmap(g_if), None),
    "vmap_of_grad": (lambda: pf.vmap(pf.grad(f_if)), None),
}


def _inputs(name):
    if name.startswith("vmap"):  # lanes on both sides of the `if`
        return [pf.to_tensor([[1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]])]
    return [pf.to_tensor([1.0, 2.0, 3.0]), pf.to_tensor([-1.0, -2.0, 0.5])]


@pytest.mark.parametrize("compile_with", ["jit", "to_static"])
@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_transform_wrappers_compile_the_user_function_not_its_source(name, compile_with):
    """pf.jit(pf.grad(f)) converted f's source in place of grad's wrapper (inspect follows
    __wrapped__) and returned f(x); with a module global it raised NameError."""
    make, closed_form = WRAPPERS[name]
    compiled = getattr(pf, compile_with)(make())
    if name == "grad_of_lambda":  # a lambda cannot be converted: it runs eagerly, saying so
        with pytest.warns(GraphBreakWarning, match="runs eagerly"):
            compiled(_inputs(name)[0])
    for x in _inputs(name):
        if name.startswith("vmap"):  # eager vmap cannot branch per lane: one lane at a time
            inner = g_if if name == "vmap" else pf.grad(f_if)
            expected = np.stack([inner(pf.to_tensor(row)).numpy() for row in x.numpy()])
        elif closed_form is None:
            expected = make()(x)
        else:
            expected = closed_form(x.numpy())
        with warnings.catch_warnings():
            warnings.simplefilter("error", GraphBreakWarning)
            got = compiled(x)
            again = compiled(x)  # the cached program
        _close(got, expected)
        _close(again, expected)


# ---- vmap axes, escaped tracers ----------------------------------------------------------

@pytest.mark.parametrize("out_axes", [5, 2, -3, (5,)])
def test_vmap_out_axes_out_of_range_raises(out_axes):
    """out_axes=5 on a 2-d result was taken modulo the rank and returned shape [2, 3]."""
    f = pf.vmap(lambda x: x * 2.0, out_axes=out_axes if isinstance(out_axes, int) else
                out_axes[0])
    with pytest.raises(ValueError, match=r"out_axes .* out of range .*\[-2, 1\]"):
        f(pf.ones([2, 3]))


def test_vmap_out_axes_in_range_still_work():
    xs = pf.to_tensor(np.arange(6.0).reshape(2, 3))
    for axis in (0, 1, -1, -2):
        out = pf.vmap(lambda x: x * 2.0, out_axes=axis)(xs)
        np.testing.assert_array_equal(out.numpy(), np.moveaxis(xs.numpy() * 2.0, 0, axis))


def _leak(transform):
    kept = []

    def keep(x):
        kept.append(x)
        return x * 1.0

    if transform == "vmap":
        pf.vmap(keep)(pf.ones([2, 3]))
    else:
        pf.jvp(keep, (pf.ones([3]),), (pf.ones([3]),))
    return kept[0]


@pytest.mark.parametrize("transform", ["vmap", "jvp"])
@pytest.mark.parametrize("use", ["eager op", "numpy", "item", "new vmap", "new jvp",
                                 "returned by new vmap"])
def test_escaped_tracer_raises_clearly(transform, use):
    """A tracer kept from a finished vmap came back from a new vmap as a BatchTracer
    object, and eager use said "'BatchTracer' object has no attribute '_value'"."""
    leaked = _leak(transform)
    ones = pf.ones([2, 3])
    uses = {
        "eager op": lambda: leaked + 1.0,
        "numpy": lambda: leaked.numpy(),
        "item": lambda: float(leaked.sum()),
        "new vmap": lambda: pf.vmap(lambda y: y + leaked)(ones),
        "new jvp": lambda: pf.jvp(lambda y: y * leaked, (pf.ones([3]),), (pf.ones([3]),)),
        "returned by new vmap": lambda: pf.vmap(lambda y: leaked, out_axes=None)(ones),
    }
    with pytest.raises(pf.EscapedTracerError, match=rf"traced by pf\.{transform} .* used "
                                                     rf"after that transform ended"):
        uses[use]()


def test_python_control_flow_on_a_vmapped_value_names_the_fix():
    """`if` on a batched value raised AttributeError '_value'; under pf.jit it now
    converts (see the wrapper matrix above)."""
    def f(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(pf.TracerConversionError, match=r"traced by pf\.vmap .* one value per "
                                                        r"lane.*pf\.where.*pf\.jit"):
        pf.vmap(f)(pf.ones([2, 3]))


# ---- complex outputs: refused unless holomorphic=True ------------------------------------

Z = np.array([1.0 + 1.0j, 2.0 - 0.5j, -0.3 + 2.0j])


def _cubic_sum(z):
    return (z * z * z).sum()


def _cubic(z):
    return z * z * z


@pytest.mark.parametrize("transform, x", [
    (lambda: pf.grad(_cubic_sum), Z), (lambda: pf.value_and_grad(_cubic_sum), Z),
    (lambda: pf.grad(lambda x: (x.astype("complex128") * (1 + 2j)).sum()), Z.real),
    (lambda: pf.jacrev(lambda x: x.astype("complex128") * (1 + 2j)), Z.real)])
def test_complex_output_without_holomorphic_raises(transform, x):
    """pf.grad of a complex output silently returned conj(f'(z))."""
    with pytest.raises(TypeError, match=r"real-valued output.*complex128.*holomorphic=True"):
        transform()(pf.to_tensor(x))


@pytest.mark.parametrize("transform", [pf.jacrev, pf.jacfwd, pf.hessian])
def test_complex_input_to_jacobians_without_holomorphic_raises(transform):
    with pytest.raises(TypeError, match=r"real-valued inputs.*complex128.*holomorphic=True"):
        transform(lambda z: (z * z).real().sum() if transform is pf.hessian else z.real())(
            pf.to_tensor(Z))


def test_holomorphic_derivatives_match_the_closed_form():
    """f(z) = z^3: f' = 3 z^2, f'' = 6 z (complex derivatives, not their conjugates)."""
    z = pf.to_tensor(Z)
    np.testing.assert_allclose(pf.grad(_cubic_sum, holomorphic=True)(z).numpy(), 3 * Z ** 2)
    value, g = pf.value_and_grad(_cubic_sum, holomorphic=True)(z)
    np.testing.assert_allclose(value.numpy(), (Z ** 3).sum())
    np.testing.assert_allclose(g.numpy(), 3 * Z ** 2)
    for jac in (pf.jacrev, pf.jacfwd):
        np.testing.assert_allclose(jac(_cubic, holomorphic=True)(z).numpy(), np.diag(3 * Z ** 2))
    np.testing.assert_allclose(pf.hessian(_cubic_sum, holomorphic=True)(z).numpy(),
                               np.diag(6 * Z), atol=1e-12)
    # exp(sin z): f' = cos z exp(sin z), through transcendental primitives
    g = pf.grad(lambda v: pf.exp(pf.sin(v)).sum(), holomorphic=True)(z)
    np.testing.assert_allclose(g.numpy(), np.cos(Z) * np.exp(np.sin(Z)), rtol=1e-12)


def test_holomorphic_needs_complex_inputs_and_outputs():
    with pytest.raises(TypeError, match=r"holomorphic=True\) requires complex inputs.*float64"):
        pf.grad(lambda x: (x * x).sum(), holomorphic=True)(pf.ones([2]))
    with pytest.raises(TypeError, match=r"holomorphic=True\) requires a complex output"):
        pf.grad(lambda z: (z * z).real().sum(), holomorphic=True)(pf.to_tensor(Z))


def test_gradient_of_a_real_function_of_complex_inputs_is_pytorchs():
    """A real output of complex inputs stays allowed: the gradient is dL/dx + i dL/dy (the
    steepest-ascent direction, PyTorch's convention), checked by finite differences."""
    def loss(z):
        return (pf.abs(z * z + 1.0) ** 2).sum() + (z.real() * z.imag()).sum()

    def loss_np(v):
        return (np.abs(v * v + 1.0) ** 2).sum() + (v.real * v.imag).sum()

    g = pf.grad(loss)(pf.to_tensor(Z)).numpy()
    h = 1e-6
    for k in range(len(Z)):
        e = np.zeros(len(Z))
        e[k] = 1.0
        d_re = (loss_np(Z + h * e) - loss_np(Z - h * e)) / (2 * h)
        d_im = (loss_np(Z + 1j * h * e) - loss_np(Z - 1j * h * e)) / (2 * h)
        np.testing.assert_allclose(g[k], d_re + 1j * d_im, rtol=1e-6)


def test_tape_backward_of_a_complex_output_needs_an_explicit_seed():
    """PyTorch's rule: backward()/pf.grad(y, x) of a complex y cannot make ones up."""
    z = pf.to_tensor(Z, stop_gradient=False)
    y = (z * z).sum()
    with pytest.raises(RuntimeError, match=r"output 0 is complex.*implicitly only for real"):
        y.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match=r"output 0 is complex"):
        pf.grad(y, z, retain_graph=True)
    # an explicit cotangent is the vjp in PyTorch's convention: conj(f'(z)) * seed
    (g,) = pf.grad(y, z, grad_outputs=pf.to_tensor(1.0 + 0.0j, dtype="complex128"))
    np.testing.assert_allclose(g.numpy(), np.conj(2 * Z))


# ---- gradient accumulation from several threads ------------------------------------------

@pytest.fixture
def _frequent_thread_switches():
    import sys

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # interleave the threads as much as possible
    yield
    sys.setswitchinterval(before)


def test_backward_from_threads_accumulates_every_contribution(_frequent_thread_switches):
    """Four threads calling backward() on losses sharing a parameter lost about 6% of the
    contributions to its .grad (a read-add-write race)."""
    import threading

    w = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    b = pf.to_tensor(0.5, stop_gradient=False)
    n_iter, n_threads = 1000, 4
    errors = []

    def work(k):
        try:
            for _ in range(n_iter):
                y = w * float(k + 1)
                y.retain_grads()  # the retained gradient of a non-leaf, per thread
                (y.sum() + b).backward()
                assert np.array_equal(y.grad.numpy(), [1.0, 1.0])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    per_iteration = sum(k + 1 for k in range(n_threads))  # sum over threads of d/dw
    np.testing.assert_array_equal(w.grad.numpy(), [n_iter * per_iteration] * 2)
    assert float(b.grad) == n_iter * n_threads


# ---- switch with an out-of-range index: one rule eagerly, compiled and batched -----------

_BRANCHES = [lambda a: a, lambda a: a * 2.0, lambda a: a - 3.0]


def _switch(i, a):
    return pf.switch(i, _BRANCHES, a)


_SWITCH_MODES = {
    "eager": lambda i, a: _switch(i, a),
    "jit": lambda i, a: pf.jit(_switch)(i, a),
    "vmap": lambda i, a: pf.vmap(_switch)(i, a),
    "jit(vmap)": lambda i, a: pf.jit(pf.vmap(_switch))(i, a),
    "vmap(jit)": lambda i, a: pf.vmap(pf.jit(_switch))(i, a),
    "vmap(vmap)": lambda i, a: pf.vmap(pf.vmap(_switch))(i.reshape([-1, 1]),
                                                          a.reshape([-1, 1])).reshape([-1]),
    "jit(vmap(vmap))": lambda i, a: pf.jit(pf.vmap(pf.vmap(_switch)))(
        i.reshape([-1, 1]), a.reshape([-1, 1])).reshape([-1]),
}


@pytest.mark.parametrize("mode", sorted(_SWITCH_MODES))
@pytest.mark.parametrize("bad", [3, 7, -1])
def test_switch_out_of_range_index_raises_in_every_mode(mode, bad):
    """vmap of switch ran branch 0 for an out-of-range lane while eager/jit raised."""
    run = _SWITCH_MODES[mode]
    batched = mode not in ("eager", "jit")
    index = pf.to_tensor([0, 2, bad, 1] if batched else bad)
    a = pf.to_tensor([1.0, 2.0, 3.0, 4.0] if batched else 1.0)
    with pytest.raises(IndexError, match=rf"branch index is {bad}\b.*3 branches"):
        run(index, a)


@pytest.mark.parametrize("mode", sorted(_SWITCH_MODES))
def test_switch_in_range_indices_select_per_lane(mode):
    run = _SWITCH_MODES[mode]
    if mode in ("eager", "jit"):
        assert float(run(pf.to_tensor(2), pf.to_tensor(5.0))) == 2.0
        return
    got = run(pf.to_tensor([0, 2, 1, 1]), pf.to_tensor([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(got.numpy(), [1.0, -1.0, 6.0, 8.0])


def test_vmapped_switch_names_the_bad_lane():
    with pytest.raises(IndexError, match=r"index is 5 in vmap lane 2 but there are 3"):
        pf.vmap(_switch)(pf.to_tensor([0, 1, 5]), pf.ones([3]))


def test_gradient_through_a_jitted_vmapped_switch_is_unchanged_by_the_check():
    def loss(a):
        return pf.vmap(_switch)(pf.to_tensor([1, 0, 1]), a).sum()

    a = pf.to_tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(pf.jit(pf.grad(loss))(a).numpy(), [2.0, 1.0, 2.0])


# ---- tensors built from lists of tensors keep the graph; grad refuses non-scalars --------

@pytest.mark.parametrize("returned, what", [
    (lambda x: [(x * x).sum()], r"a list of 1 element \(Tensor float64\[\]\)"),
    (lambda x: ((x * x).sum(),), r"a tuple of 1 element"),
    (lambda x: None, r"returned None"),
    (lambda x: {"loss": (x * x).sum()}, r"a dict with keys \['loss'\]"),
])
def test_grad_of_a_function_not_returning_a_scalar_names_what_it_returned(returned, what):
    """pf.grad(lambda x: [(x*x).sum()]) gave [0, 0]; returning None said "cannot make a
    tensor from NoneType data"."""
    with pytest.raises(TypeError, match=rf"grad of <lambda>: .* scalar .* {what}"):
        pf.grad(returned)(pf.ones([2]))
    with pytest.raises(TypeError, match=what):
        pf.value_and_grad(returned)(pf.ones([2]))


def test_grad_has_aux_with_a_bare_scalar_says_a_pair_is_needed():
    """has_aux=True with f returning one scalar raised IndexError."""
    with pytest.raises(TypeError, match=r"has_aux=True\) of <lambda>: .* pair \(output, aux\)"
                                        r".* a Tensor float64\[\]"):
        pf.grad(lambda x: (x * x).sum(), has_aux=True)(pf.ones([2]))


def test_ops_on_a_list_of_tensors_keep_the_graph():
    """pf.norm(list of tensors) (the seed example's paddle.norm(grad2)) copied the values
    and cut the graph: the loss had no gradient."""
    x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    parts = [(x * x).sum(), x.sum()]  # 5 and 3
    (g,) = pf.grad(pf.norm(parts), x)
    expected = (2 * 5.0 * 2 * x.numpy() + 2 * 3.0) / (2 * np.sqrt(34.0))
    np.testing.assert_allclose(g.numpy(), expected, rtol=1e-12)
    # a nested list, Python numbers mixed in (weak: the tensors' dtype wins)
    y = pf.sum(pf.exp(pf.to_tensor([[x[0], 1.0], [x[1], 2.0]], stop_gradient=False)))
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-12)
    # under a functional transform, and under jit and vmap (tracers in the list)
    f = pf.grad(lambda v: pf.norm([v[0] * 3.0, v[1] * 4.0]))
    np.testing.assert_allclose(f(pf.to_tensor([1.0, 1.0])).numpy(), [9 / 5, 16 / 5])
    np.testing.assert_allclose(pf.jit(f)(pf.to_tensor([1.0, 1.0])).numpy(), [9 / 5, 16 / 5])
    stacked = pf.vmap(lambda v: pf.norm([v[0], v[1]]))(pf.to_tensor([[3.0, 4.0], [6.0, 8.0]]))
    np.testing.assert_allclose(stacked.numpy(), [5.0, 10.0])


def test_to_tensor_of_a_list_of_tensors_stacks_them():
    x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    constant = pf.to_tensor([x.sum(), x[0]])  # Paddle's default: a constant
    assert constant.stop_gradient and constant._node is None
    np.testing.assert_array_equal(constant.numpy(), [3.0, 1.0])
    linked = pf.to_tensor([x.sum(), x[0]], stop_gradient=False)
    (linked * pf.to_tensor([1.0, 10.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [11.0, 1.0])
    assert pf.to_tensor([pf.ones([2], dtype="int32"), [3, 4]]).dtype == pf.int64
    with pytest.raises(ValueError, match=r"different shapes: element 0 has shape \[2\], "
                                         r"element 1 has shape \[3\]"):
        pf.to_tensor([pf.ones([2]), pf.ones([3])])


# ---- tangent and cotangent dtypes are checked against their primals ----------------------

def _f32(values):
    return pf.to_tensor(values, dtype="float32")


def _custom_vjp_returning(dtype):
    @pf.custom_vjp
    def double(x):
        return x * 2.0

    double.defvjp(lambda x: (x * 2.0, None), lambda res, g: (g.astype(dtype) * 2.0,))
    return double


def _custom_jvp_returning(dtype):
    @pf.custom_jvp
    def double(x):
        return x * 2.0

    @double.defjvp
    def rule(primals, tangents):
        return primals[0] * 2.0, tangents[0].astype(dtype) * 2.0

    return double


class _PyLayerReturning64(pf.autograd.PyLayer):
    @staticmethod
    def forward(ctx, x):
        return x * 2.0

    @staticmethod
    def backward(ctx, g):
        return g.astype("float64") * 2.0


_WRONG_DTYPE_RULES = {
    "custom_vjp bwd": (lambda x: _custom_vjp_returning("float64")(x),
                       r"custom_vjp\(double\): bwd returned a cotangent of dtype float64 for "
                       r"input 0, which is float32\[2\]"),
    "custom_jvp rule (reverse)": (lambda x: _custom_jvp_returning("float64")(x),
                                  r"custom_jvp\(double\): the jvp rule returned a tangent of "
                                  r"dtype float64 for output 0, which is float32\[2\]"),
    "PyLayer backward": (lambda x: _PyLayerReturning64.apply(x),
                         r"PyLayer\(_PyLayerReturning64\): backward returned a gradient of "
                         r"dtype float64 for input 0, which is float32\[2\]"),
}


@pytest.mark.parametrize("how", ["tape", "grad", "jit(grad)", "vmap(grad)"])
@pytest.mark.parametrize("rule", sorted(_WRONG_DTYPE_RULES))
def test_custom_rule_returning_another_dtype_raises_naming_both(rule, how):
    """A float64 cotangent from a custom rule became the float32 input's gradient under
    jit (eagerly the leaf cast hid it)."""
    fn, message = _WRONG_DTYPE_RULES[rule]
    with pytest.raises(TypeError, match=message + r".*astype\('float32'\)"):
        if how == "tape":
            x = pf.to_tensor([1.0, 2.0], dtype="float32", stop_gradient=False)
            fn(x).sum().backward()
        elif how == "grad":
            pf.grad(lambda v: fn(v).sum())(_f32([1.0, 2.0]))
        elif how == "jit(grad)":
            pf.jit(pf.grad(lambda v: fn(v).sum()))(_f32([1.0, 2.0]))
        else:
            pf.vmap(pf.grad(lambda v: fn(v).sum()))(_f32([[1.0, 2.0], [3.0, 4.0]]))


def test_custom_jvp_rule_in_forward_mode_checks_the_tangent_dtype():
    with pytest.raises(TypeError, match=r"tangent of dtype float64 for output 0, which is "
                                        r"float32\[2\]"):
        pf.jvp(_custom_jvp_returning("float64"), (_f32([1.0, 2.0]),), (_f32([1.0, 1.0]),))


def test_custom_rules_in_the_right_dtype_still_work():
    x = _f32([1.0, 2.0])
    for make in (_custom_vjp_returning, _custom_jvp_returning):
        g = pf.jit(pf.grad(lambda v, make=make: make("float32")(v).sum()))(x)
        assert g.dtype == pf.float32
        np.testing.assert_array_equal(g.numpy(), [2.0, 2.0])


def test_jvp_tangent_of_another_dtype_raises():
    """A float64 tangent for a float32 primal was accepted (JAX raises)."""
    with pytest.raises(TypeError, match=r"tangent 0 has dtype float64 but primal 0 is "
                                        r"float32\[2\]"):
        pf.jvp(lambda v: v * 2.0, (_f32([1.0, 2.0]),), (pf.ones([2], dtype="float64"),))
    # Python numbers are weak: they take the primal's dtype
    out, t = pf.jvp(lambda v: v * 3.0, (_f32(2.0),), (1.0,))
    assert t.dtype == pf.float32 and float(t) == 3.0


def test_vjp_cotangent_of_another_dtype_raises():
    out, vjp_fn = pf.vjp(lambda v: v * 2.0, _f32([1.0, 2.0]))
    with pytest.raises(TypeError, match=r"cotangent 0 has dtype float64 but output 0 is "
                                        r"float32\[2\]"):
        vjp_fn(pf.ones([2], dtype="float64"))
    assert vjp_fn(_f32([1.0, 1.0]))[0].dtype == pf.float32
    out, vjp_fn = pf.vjp(lambda v: (v * 2.0).sum(), _f32([1.0, 2.0]))
    np.testing.assert_array_equal(vjp_fn(1.0)[0].numpy(), [2.0, 2.0])  # a weak number


@pytest.mark.parametrize("call", [
    lambda f, x: pf.jvp(f, x, x),
    lambda f, x: pf.jvp(f, 1.0, 1.0),
    lambda f, x: pf.jvp(f, (x,), x),
])
def test_jvp_without_tuples_says_they_are_needed(call):
    """pf.jvp(f, x, t) said "op() takes 1 positional argument but 3 were given"."""
    with pytest.raises(TypeError, match=r"primals and tangents must be tuples \(or lists\).*"
                                        r"pf\.jvp\(f, \(x,\), \(t,\)\)"):
        call(lambda v: v * 2.0, pf.ones([3]))


# ---- pf.jit reads what the function closes over as eager code would -----------------------

GLOBAL_SCALE = 2.0


def _times_global(x):
    return x * GLOBAL_SCALE


def test_jit_sees_in_place_updates_of_tensors_used_only_with_constants():
    """x + w.sum() was computed once while tracing and baked in: w.set_value(...) was
    ignored although the docs say closed-over tensors are read at every call."""
    w = pf.to_tensor([1.0, 2.0])
    f = pf.jit(lambda x: x + w.sum())
    g = pf.jit(lambda x: x * float(w[0]))  # a value read as a Python number
    x = pf.ones([2])
    np.testing.assert_array_equal(f(x).numpy(), [4.0, 4.0])
    np.testing.assert_array_equal(g(x).numpy(), [1.0, 1.0])
    w.set_value(pf.to_tensor([10.0, 20.0]))
    np.testing.assert_array_equal(f(x).numpy(), [31.0, 31.0])
    np.testing.assert_array_equal(g(x).numpy(), [10.0, 10.0])
    assert f.cache_info()["traces"] == 2
    np.testing.assert_array_equal(f(x).numpy(), [31.0, 31.0])  # unchanged: no new trace
    assert f.cache_info()["traces"] == 2


def test_jit_follows_rebound_closure_variables_and_globals():
    """A closed-over tensor rebound to a new one, or a Python number rebound, kept its
    traced value."""
    global GLOBAL_SCALE
    x = pf.ones([2])

    def make():
        w = pf.to_tensor([1.0, 1.0])
        scale = 2.0

        def body(v):
            return v * w * scale

        def rebind(new_w, new_scale):
            nonlocal w, scale
            w, scale = new_w, new_scale

        return pf.jit(body), rebind

    f, rebind = make()
    np.testing.assert_array_equal(f(x).numpy(), [2.0, 2.0])
    rebind(pf.to_tensor([5.0, 6.0]), 2.0)
    np.testing.assert_array_equal(f(x).numpy(), [10.0, 12.0])
    rebind(pf.to_tensor([5.0, 6.0]), 3.0)
    np.testing.assert_array_equal(f(x).numpy(), [15.0, 18.0])
    traces = f.cache_info()["traces"]
    f(x)
    assert f.cache_info()["traces"] == traces  # nothing changed: the cached program runs

    g = pf.jit(_times_global)
    np.testing.assert_array_equal(g(x).numpy(), [2.0, 2.0])
    try:
        GLOBAL_SCALE = 5.0
        np.testing.assert_array_equal(g(x).numpy(), [5.0, 5.0])
    finally:
        GLOBAL_SCALE = 2.0


def test_jit_of_a_transform_follows_the_inner_functions_closure():
    def make():
        scale = 2.0

        def loss(v):
            return (v * v).sum() * scale

        def rebind(new):
            nonlocal scale
            scale = new

        return pf.jit(pf.grad(loss)), rebind

    g, rebind = make()
    x = pf.to_tensor([1.0, 2.0])
    np.testing.assert_array_equal(g(x).numpy(), [4.0, 8.0])
    rebind(3.0)
    np.testing.assert_array_equal(g(x).numpy(), [6.0, 12.0])


def test_jit_converted_control_flow_follows_rebound_closures():
    """The converted function copied the closure's values: it must share the cells."""
    def make():
        limit = 0.0

        def f(v):
            if v.sum() > limit:
                y = v * 2.0
            else:
                y = -v
            return y

        def rebind(new):
            nonlocal limit
            limit = new

        return pf.jit(f), rebind

    f, rebind = make()
    x = pf.to_tensor([1.0, 2.0])
    np.testing.assert_array_equal(f(x).numpy(), [2.0, 4.0])
    rebind(10.0)
    np.testing.assert_array_equal(f(x).numpy(), [-1.0, -2.0])


def test_a_value_rebound_on_every_call_warns_about_retracing():
    from primflow.transforms.jit import RETRACE_WARNING_THRESHOLD, RetraceWarning

    def make():
        step = 0.0

        def f(v):
            return v + step

        def bump():
            nonlocal step
            step += 1.0

        return pf.jit(f), bump

    f, bump = make()
    with pytest.warns(RetraceWarning, match=r"variable 'step' that f closes over "
                                                        r"was rebound"):
        for _ in range(RETRACE_WARNING_THRESHOLD + 1):
            out = f(pf.zeros([1]))
            bump()
    assert float(out) == RETRACE_WARNING_THRESHOLD


# ---- bounded loops that run out of steps, loops with non-integer bounds -------------------

def _count_to_100(v):
    return pf.while_loop(lambda u: u < 100.0, lambda u: u + 1.0, v, max_steps=5)


def _doubling(v):
    return pf.while_loop(lambda u: u < 10.0, lambda u: u * 2.0, v, max_steps=3)


_SHORT_LOOPS = {
    "eager": lambda: _count_to_100(pf.to_tensor(0.0)),
    "jit": lambda: pf.jit(_count_to_100)(pf.to_tensor(0.0)),
    "vmap (one lane short)": lambda: pf.vmap(_count_to_100)(pf.to_tensor([99.0, 0.0])),
    "jit(vmap)": lambda: pf.jit(pf.vmap(_count_to_100))(pf.to_tensor([99.0, 0.0])),
    "grad": lambda: pf.grad(_doubling)(pf.to_tensor(1.0)),
    "jit(grad)": lambda: pf.jit(pf.grad(_doubling))(pf.to_tensor(1.0)),
    "jit(jvp)": lambda: pf.jit(lambda v: pf.jvp(_doubling, (v,), (v,)))(pf.to_tensor(1.0)),
    "jit(jet)": lambda: pf.jit(lambda v: pf.jet(_doubling, (v,), ([v],)))(pf.to_tensor(1.0)),
}


@pytest.mark.parametrize("mode", sorted(_SHORT_LOOPS))
def test_while_loop_that_needs_more_than_max_steps_raises(mode):
    """max_steps=5 for a loop needing 100 steps returned the 5-step value silently."""
    with pytest.raises(RuntimeError, match=r"still true after max_steps=(5|3) steps"):
        _SHORT_LOOPS[mode]()


def test_while_loop_within_max_steps_is_unchanged():
    np.testing.assert_array_equal(pf.jit(pf.vmap(_count_to_100))(
        pf.to_tensor([99.0, 96.0])).numpy(), [100.0, 100.0])
    # 1 -> 2 -> 4 -> 8 -> 16: d/dv (16 v) = 16 with room to spare
    assert float(pf.jit(pf.grad(lambda v: pf.while_loop(
        lambda u: u < 10.0, lambda u: u * 2.0, v, max_steps=8)))(pf.to_tensor(1.0))) == 16.0


@pytest.mark.parametrize("bad", [2.5, -1, 1.0])
def test_while_loop_max_steps_must_be_a_non_negative_int(bad):
    with pytest.raises(ValueError, match=r"max_steps must be an int >= 0"):
        pf.while_loop(lambda u: u < 1.0, lambda u: u + 1.0, pf.to_tensor(0.0), max_steps=bad)


@pytest.mark.parametrize("lower, upper", [(0, 2.5), (0.5, 3), (0, 3.0), (0, True),
                                          (0, "tensor 2.5")])
def test_fori_loop_with_non_integer_bounds_raises(lower, upper):
    """fori_loop(0, 2.5, ...) ran 2 steps."""
    if upper == "tensor 2.5":
        upper = pf.to_tensor(2.5)
    for run in (lambda: pf.fori_loop(lower, upper, lambda i, v: v + 1.0, pf.to_tensor(0.0)),
                lambda: pf.jit(lambda v: pf.fori_loop(lower, upper, lambda i, w: w + 1.0, v))(
                    pf.to_tensor(0.0))):
        with pytest.raises(TypeError, match=r"pf\.fori_loop: (lower|upper) must be an "
                                            r"integer"):
            run()


def test_python_for_over_a_float_tensor_bound_raises_under_jit():
    def f(n, v):
        for _ in range(n):
            v = v + 1.0
        return v

    with pytest.raises(TypeError, match=r"integer"):
        pf.jit(f)(pf.to_tensor(2.5), pf.to_tensor(0.0))


# ---- lower / explain trace without running, and stop on loops that never end --------------

_ENDLESS = '''
import primflow as pf

def traced_condition(x):  # a converted while: one pf.while_loop that never ends when run
    while x.sum() > 0:
        x = x + 1.0
    return x

def python_condition(x):  # n never grows: unrolled while tracing, without end
    n = 0
    while n < 10:
        x = x * 2.0
    return x

def converted_python_condition(x):  # the same inside converted code (after an `if`)
    if x.sum() > 0:
        x = x + 1.0
    n = 0
    while n < 10:
        x = x * 2.0
    return x

x = pf.ones([2])
print(pf.jit(traced_condition).explain(x))
print(pf.jit(traced_condition).lower(x).as_text().count("while"))
for f in (python_condition, converted_python_condition):
    with pf.config.override(jit_max_trace_ops=2000):
        try:
            pf.jit(f).lower(x)
        except pf.TraceTooLongError as e:
            print("stopped:", e)
'''


def test_lower_and_explain_never_run_and_stop_endless_unrolling(tmp_path):
    """f.lower(x)/f.explain(x) of a function whose `while` never ends hung: after the
    control-flow conversion lower ran the compiled program; a loop on a Python condition
    unrolled while tracing without end."""
    import subprocess
    import sys

    script = tmp_path / "endless.py"
    script.write_text(_ENDLESS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("1 graph, no graph break (Python control flow converted")
    assert int(lines[1]) >= 1
    stops = [line for line in lines if line.startswith("stopped:")]
    assert len(stops) == 2
    for stop, line in zip(stops, (12, 20)):
        assert f"more than 2,000 operations, at {script}:{line}" in stop
        assert "pf.config.jit_max_trace_ops" in stop


def test_jit_max_trace_ops_is_checked():
    with pytest.raises(ValueError, match=r"jit_max_trace_ops must be a positive int"):
        pf.config.jit_max_trace_ops = 0
    assert pf.config.jit_max_trace_ops == 100_000


# ---- an output that does not require grad: the message names the real cause ----------------

def test_grad_of_an_output_made_under_no_grad_names_no_grad_not_stop_gradient():
    """The message said "Set x.stop_gradient = False" although it already was False."""
    x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    with pf.no_grad():
        y = (x * x).sum()
    with pytest.raises(RuntimeError, match=r"inputs require grad \(stop_gradient=False\), so "
                                           r"it was computed without recording: under "
                                           r"pf\.no_grad\(\)") as info:
        pf.grad(y, x)
    assert "Set x.stop_gradient = False" not in str(info.value)
    with pf.no_grad(), pytest.raises(RuntimeError, match=r"recording is off here \(inside "
                                                         r"pf\.no_grad\(\)"):
        pf.grad((x * x).sum(), x)


def test_grad_through_an_integer_input_or_result_says_so():
    xi = pf.to_tensor([1, 2], stop_gradient=False)  # int64
    with pytest.raises(RuntimeError, match=r"output 0 \(int64\[\]\) .* it is int64, and "
                                           r"integer and bool results .* carry no gradient"):
        pf.grad((xi * xi).sum(), xi)
    y = (xi * xi).sum().astype("float64")
    with pytest.raises(RuntimeError, match=r"input 0 is int64, and operations on integer "
                                           r"tensors are never recorded"):
        pf.grad(y, xi)


def test_prod_of_an_empty_tensor_stays_connected():
    """prod of an empty tensor was a constant: grad said the output does not require grad;
    d prod(empty) / dx is an empty gradient (PyTorch gives the same)."""
    x = pf.zeros([0, 3])
    x.stop_gradient = False
    y = pf.prod(x)
    assert float(y) == 1.0 and not y.stop_gradient
    (g,) = pf.grad(y, x)
    assert g.shape == [0, 3]
    np.testing.assert_array_equal(pf.prod(x, axis=0).numpy(), [1.0, 1.0, 1.0])
    (g,) = pf.grad(pf.prod(x, axis=0).sum(), x)
    assert g.shape == [0, 3]


def test_backward_on_a_constant_warns_with_the_cause():
    x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    with pf.no_grad():
        y = (x * x).sum()
    with pytest.warns(UserWarning, match=r"backward\(\) has nothing to do: the tensor "
                                         r"\(float64\[\]\) does not require grad"):
        y.backward()
