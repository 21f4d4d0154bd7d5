"""The OpInfo table on the array-API backend over ``array_api_strict`` (the strict
conformance target: any function outside the standard raises there, so passing proves
nothing leaks NumPy past the backend interface), and on PyTorch CPU when torch is installed.

Each check runs the same computation on the NumPy backend, itself checked against
references and finite differences by tests/test_opinfo.py, and on the array-API backend,
and compares: values, gradients of orders 1 and 2 (the tape, create_graph), vmap, and jit
(which runs code generated over the namespace there: ``compiler/array_api_codegen.py``). Entries whose ops cannot run on a standard namespace are listed in ``EXPECTED``
with the reason.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import primflow as pf
from primflow.testing import check_grads as cg
from primflow.testing.extras import import_extra
from primflow.testing.opinfo import OP_DB

array_api_strict = import_extra("test", "array_api_strict")
import_extra("array-api", "array_api_compat")

# entry name -> why it cannot run on a namespace that only has the standard's functions
EXPECTED = {}

RTOL, ATOL = 1e-9, 1e-11


def _namespaces():
    out = [pytest.param(array_api_strict, id="strict")]
    try:  # PyTorch CPU tensors through the same backend (never a CI dependency)
        import torch  # noqa: PLC0415
    except ImportError:
        pass
    else:
        out.append(pytest.param(torch, id="torch"))
    return out


def test_torch_through_the_array_api_backend():
    """A smoke test here; with torch installed the whole table above runs on it too."""
    torch = pytest.importorskip("torch")
    with pf.backend("array_api", namespace=torch):
        x = pf.to_tensor([0.5, 1.5], dtype="float64", stop_gradient=False)
        (pf.tanh(x) * x).sum().backward()
        assert isinstance(x._value, torch.Tensor)
    expected = np.tanh([0.5, 1.5]) + np.array([0.5, 1.5]) / np.cosh([0.5, 1.5]) ** 2
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def _entries(kinds):
    out = []
    for info in OP_DB:
        if info.kind not in kinds:
            continue
        marks = [pytest.mark.xfail(reason=EXPECTED[info.name], strict=True)] if (
            info.name in EXPECTED) else []
        out.append(pytest.param(info, id=info.name, marks=marks))
    return out


def _numpy_outputs(out):
    return [None if o is None else np.asarray(o.numpy()) for o in cg.as_list(out)]


def _on(namespace, compute):
    """``compute()`` (which makes its own tensors) on the NumPy backend and on the array-API
    backend over ``namespace``: both results as lists of NumPy arrays."""
    expected = compute()
    with pf.backend("array_api", namespace=namespace):
        got = compute()
    return got, expected


def _compare(got, expected, what):
    assert len(got) == len(expected), f"{what}: {len(got)} outputs vs {len(expected)}"
    for g, e in zip(got, expected):
        if e is None:
            assert g is None, what
            continue
        assert g.shape == e.shape and g.dtype == e.dtype, (
            f"{what}: {g.dtype}{g.shape}, NumPy backend {e.dtype}{e.shape}")
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True,
                                       err_msg=what)
        else:
            np.testing.assert_array_equal(g, e, err_msg=what)


def _forward(info, sample, transform=lambda f: f):
    if info.kind == "random":
        def compute():
            return _numpy_outputs(transform(lambda: info.op(7, **sample.kwargs))())
        return compute

    def compute():
        fn, primals = sample.bind(info.op)
        with pf.no_grad():
            return _numpy_outputs(transform(fn)(*cg.leaves(primals, False)))
    return compute


@pytest.mark.parametrize("namespace", _namespaces())
@pytest.mark.parametrize("info", _entries(("diff", "nondiff", "nograd", "random")))
def test_values(info, namespace):
    for sample in info.samples():
        got, expected = _on(namespace, _forward(info, sample))
        _compare(got, expected, f"{info.name} {sample!r}")


# jit also over NumPy through array-api-compat: its ufuncs write into planned buffers
@pytest.mark.parametrize("namespace", _namespaces() + [pytest.param(np, id="compat-numpy")])
@pytest.mark.parametrize("info", _entries(("diff", "nondiff", "nograd")))
def test_jit(info, namespace):
    sample = info.samples()[0]
    got, expected = _on(namespace, _forward(info, sample, _jit_generated))
    _compare(got, expected, f"jit {info.name} {sample!r}")


def _jit_generated(fn):
    """``pf.jit(fn)`` that also checks each call ran generated code, not the interpreter."""
    jitted = pf.jit(fn)

    def run(*args):
        out = jitted(*args)
        executable = jitted.lower(*args).compile()
        # generated over the namespace (with numba kernels where its arrays are NumPy's)
        assert executable.backend in (pf.get_backend().codegen, "numba"), executable.backend
        assert executable.source is not None
        return out
    return run


def test_jit_writes_source_over_the_namespace_and_matches_numpy():
    """A training-like program (matmul, tanh, reductions, its gradient) compiles to calls on
    ``xp`` over array-api-strict (no buffers: nothing there takes ``out=``) and over NumPy
    through array-api-compat (ufuncs write into planned buffers), with the NumPy backend's
    values."""
    rng = np.random.default_rng(3)
    x0, w0 = rng.standard_normal((16, 3)), rng.standard_normal((3, 8))

    def loss(x, w):
        h = pf.tanh(x @ w)
        return (h * h).sum() + pf.exp(-x).mean()

    def run():
        f = pf.jit(pf.value_and_grad(loss, (0, 1)))
        args = pf.to_tensor(x0), pf.to_tensor(w0)
        value, grads = f(*args)
        lowered = f.lower(*args)
        return [value.numpy()] + [g.numpy() for g in grads], lowered

    expected, lowered = run()
    for namespace in (array_api_strict, np):
        with pf.backend("array_api", namespace=namespace):
            got, lowered = run()
        _compare(got, expected, f"value_and_grad on {namespace.__name__}")
        exe = lowered.compile()
        assert exe.backend == "array_api"
        source = lowered.as_text("compiled")
        assert "xp.tanh(" in source and "matmul(" in source, source
        if namespace is np:
            assert "out=b" in source and exe.plan.buffers, source
        else:
            assert "out=" not in source and not exe.plan.buffers, source


def _grads(info, sample, order):
    rng = np.random.default_rng(zlib.crc32(f"{info.name}/array_api/{order}".encode()))
    fn, primals = sample.bind(info.op)
    with pf.no_grad():
        outs = cg.as_list(fn(*cg.leaves(primals, False)))
    weights = [rng.standard_normal(o.shape) if o.dtype.is_floating else None for o in outs]
    directions = [rng.standard_normal(np.shape(p)) for p in primals]

    def compute():
        f, prim = sample.bind(info.op)
        xs = cg.leaves(prim, True)
        loss = None
        for o, w in zip(cg.as_list(f(*xs)), weights):
            if w is not None:
                term = (o * pf.to_tensor(w)).sum()
                loss = term if loss is None else loss + term
        g = pf.grad(loss, xs, create_graph=order > 1, allow_unused=True)
        if order == 2:
            dot = None
            for gi, d in zip(g, directions):
                if gi is not None:
                    term = (gi * pf.to_tensor(d)).sum()
                    dot = term if dot is None else dot + term
            if dot is None or dot.stop_gradient:
                return [np.zeros(np.shape(p)) for p in prim]
            g = pf.grad(dot, xs, allow_unused=True)
        return _numpy_outputs(list(g))
    return compute


@pytest.mark.parametrize("namespace", _namespaces())
@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("info", _entries(("diff",)))
def test_gradients(info, order, namespace):
    for sample in info.samples()[:1 if order == 2 else 2]:
        got, expected = _on(namespace, _grads(info, sample, order))
        _compare(got, expected, f"{info.name} order {order} {sample!r}")


@pytest.mark.parametrize("namespace", _namespaces())
@pytest.mark.parametrize("info", _entries(("diff",)))
def test_vmap(info, namespace):
    sample = info.samples()[0]
    idx = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if not idx:
        pytest.skip("no floating input to map over")
    rng = np.random.default_rng(zlib.crc32(f"{info.name}/array_api/vmap".encode()))
    stacked = [np.stack([sample.args[i] + 1e-3 * k * rng.standard_normal(sample.args[i].shape)
                         for k in range(3)]) for i in idx]

    def compute():
        from primflow.testing.opinfo import SampleInput  # noqa: PLC0415

        fn, _ = SampleInput(sample.args, sample.kwargs, diff=tuple(idx)).bind(info.op)
        with pf.no_grad():
            return _numpy_outputs(pf.vmap(fn)(*cg.leaves(stacked, False)))

    got, expected = _on(namespace, compute)
    _compare(got, expected, f"vmap {info.name}")


# ---- a backend with only the required kernels (the contract's count is enough) -------------

def _required_only_backend():
    """The array-API backend over array-api-strict stripped to the contract's required
    kernels: every optional one is the default of ``backends/defaults.py``."""
    from primflow.backends.array_api import ArrayAPIBackend  # noqa: PLC0415
    from primflow.backends.defaults import DEFAULTS  # noqa: PLC0415

    class RequiredOnly(ArrayAPIBackend):
        def __init__(self):
            super().__init__(array_api_strict)
            self.name = "required-only:array_api_strict"
            self.kernels = {k: v for k, v in self.kernels.items() if k not in DEFAULTS}

        def derive_kernel(self, name, family, lowering=None):
            return None if name in DEFAULTS else super().derive_kernel(name, family, lowering)

    return RequiredOnly()


_REQUIRED_ONLY = []


def _on_required_only(compute):
    if not _REQUIRED_ONLY:
        _REQUIRED_ONLY.append(_required_only_backend())
    expected = compute()
    with pf.backend(_REQUIRED_ONLY[0]) as b:
        got = compute()
    from primflow.backends.defaults import DEFAULTS  # noqa: PLC0415

    assert all(b.kernels[k] is not getattr(array_api_strict, k, None) for k in DEFAULTS)
    return got, expected


@pytest.mark.parametrize("info", _entries(("diff", "nondiff", "nograd", "random")))
def test_required_kernels_suffice_values_and_jit(info):
    """The OpInfo table's values (eager and jitted) and first-order gradients on a backend
    that implements only the required kernels, against the NumPy backend."""
    sample = info.samples()[0]
    got, expected = _on_required_only(_forward(info, sample))
    _compare(got, expected, f"required-only {info.name} {sample!r}")
    if info.kind == "random":
        return
    got, expected = _on_required_only(_forward(info, sample, pf.jit))
    _compare(got, expected, f"required-only jit {info.name} {sample!r}")
    if info.kind == "diff":
        got, expected = _on_required_only(_grads(info, sample, 1))
        _compare(got, expected, f"required-only grad {info.name} {sample!r}")


def test_required_only_backend_uses_the_defaults():
    from primflow.backends.defaults import DEFAULTS  # noqa: PLC0415

    b = _required_only_backend()
    assert not set(DEFAULTS) & set(b.kernels)
    with pf.backend(b):
        x = pf.to_tensor([-1.5, 0.0, 2.0], dtype="float64")
        np.testing.assert_array_equal(pf.minimum(x, x * 0).numpy(), [-1.5, 0.0, 0.0])
        np.testing.assert_array_equal(pf.ceil(x).numpy(), [-1.0, 0.0, 2.0])
        assert set(DEFAULTS) <= set(b.kernels)  # built at install


def test_an_elementwise_primitive_named_like_a_namespace_function_needs_no_kernel():
    """Declaring a primitive ``sinh`` in a family file is enough: the NumPy backend derives
    ``np.sinh``, the array-API backend ``xp.sinh`` (no kernel tables are edited)."""
    from primflow.backends import get_backend  # noqa: PLC0415
    from primflow.backends.array_api import ArrayAPIBackend  # noqa: PLC0415
    from primflow.prims.families import ELEMENTWISE_TRANSCENDENTAL  # noqa: PLC0415

    assert get_backend().kernel_for("sinh", ELEMENTWISE_TRANSCENDENTAL) is np.sinh
    strict = ArrayAPIBackend(array_api_strict)
    assert strict.kernel_for("sinh", ELEMENTWISE_TRANSCENDENTAL) is array_api_strict.sinh
    assert strict.kernel_for("sub") is array_api_strict.subtract  # the standard's name
    with pytest.raises(KeyError):
        strict.kernel_for("no_such_function", ELEMENTWISE_TRANSCENDENTAL)


# ---- selection, errors, the rest of the framework -------------------------------------------

def test_selection_and_context_manager_restore_the_backend():
    assert pf.get_backend().name == "numpy"
    with pf.backend("array_api", namespace=array_api_strict) as b:
        assert pf.get_backend() is b and b.name == "array_api:array_api_strict"
        assert isinstance(pf.ones([2])._value, array_api_strict.asarray(0).__class__)
        # the same namespace gives the same backend (compiled programs are kept per backend)
        assert pf.set_backend("array_api", namespace=array_api_strict) is b
    assert pf.get_backend().name == "numpy"
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        pf.set_backend("tpu")
    with pytest.raises(ValueError, match="needs namespace="):
        pf.set_backend("array_api")
    with pytest.raises(TypeError, match="does not follow the Python array API"):
        pf.set_backend("array_api", namespace=zlib)
    assert pf.get_backend().name == "numpy"


def test_a_backend_lacking_a_kernel_fails_when_installed_naming_it():
    from primflow.backends.array_api import ArrayAPIBackend

    class NoGather(ArrayAPIBackend):
        def __init__(self, namespace):
            super().__init__(namespace)
            del self.kernels["gather"], self.kernels["cumsum"]

    with pytest.raises(ValueError, match="no kernel for the primitive.*'cumsum', 'gather'"):
        pf.set_backend(NoGather(array_api_strict))
    assert pf.get_backend().name == "numpy"


def test_mixing_tensors_of_two_backends_is_a_clear_error():
    on_numpy = pf.to_tensor([1.0, 2.0])
    with pf.backend("array_api", namespace=array_api_strict):
        on_strict = pf.to_tensor([1.0, 2.0])
        with pytest.raises(TypeError, match="cannot be mixed in one operation"):
            on_strict + on_numpy
    with pytest.raises(TypeError, match="cannot be mixed in one operation"):
        on_numpy * on_strict


def _train(x_host, steps=20):
    pf.seed(0)
    net = pf.nn.Sequential(pf.nn.Linear(2, 8), pf.nn.Tanh(), pf.nn.Linear(8, 1))
    opt = pf.optimizer.Adam(learning_rate=1e-2, parameters=net.parameters())
    x = pf.to_tensor(x_host)
    y = (x[:, :1] * x[:, 1:]).sin()
    losses = []
    for _ in range(steps):
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    return net, x, losses


def test_training_jit_and_checkpoints_across_backends(tmp_path):
    x_host = np.random.default_rng(0).standard_normal((32, 2)).astype(np.float32)
    _, _, on_numpy = _train(x_host)
    with pf.backend("array_api", namespace=array_api_strict):
        # the same initialisation (random draws are the same on every backend) and steps
        net, x, losses = _train(x_host)
        np.testing.assert_allclose(losses, on_numpy, rtol=1e-4)
        assert losses[-1] < losses[0]
        compiled = pf.jit(lambda a: net(a))(x).numpy()
        np.testing.assert_allclose(compiled, net(x).numpy(), rtol=1e-6, atol=1e-6)
        pf.save(net.state_dict(), str(tmp_path / "net.pdparams"))
        expected = net(x).numpy()
    # the checkpoint written on the strict namespace loads on the NumPy backend
    pf.seed(1)
    other = pf.nn.Sequential(pf.nn.Linear(2, 8), pf.nn.Tanh(), pf.nn.Linear(8, 1))
    other.set_state_dict(pf.load(str(tmp_path / "net.pdparams")))
    assert isinstance(other[0].weight._value, np.ndarray)
    np.testing.assert_allclose(other(pf.to_tensor(x_host)).numpy(), expected, rtol=1e-6)


# ---- devices (Paddle style) -------------------------------------------------------------------

def test_devices_cpu_and_clear_errors_without_a_gpu():
    x = pf.to_tensor([1.0, 2.0], place="cpu")
    assert x.place == "cpu" and repr(x.place) == "Place(cpu)" and x.place.is_cpu_place()
    assert x.cpu() is x and x.to("cpu") is x and pf.get_device() == "cpu"
    assert x.to("cpu", "float64").dtype == pf.float64
    assert pf.set_device("cpu:0") == "cpu"
    for bad in ("tpu", "gpu:x", "cuda:-1"):
        with pytest.raises(ValueError, match="unknown device"):
            pf.set_device(bad)
    if pf.device.is_compiled_with_cuda():
        pytest.skip("a GPU is present: the errors below do not apply")
    for ask in (lambda: pf.set_device("gpu"), lambda: x.cuda(), lambda: x.to("gpu:1"),
                lambda: pf.to_tensor([1.0], place="gpu"),
                lambda: pf.nn.Linear(2, 2).to("gpu")):
        with pytest.raises(RuntimeError, match=r"primflow\[gpu\]|does not exist"):
            ask()
    assert pf.get_device() == "cpu" and pf.get_backend().name == "numpy"


def test_moving_between_backends_with_to_and_layer_to():
    with pf.backend("array_api", namespace=array_api_strict):
        y = pf.to_tensor([1.0, 2.0], stop_gradient=False)
        net = pf.nn.Linear(2, 3)
    x = y.cpu()  # the CPU's default backend is NumPy: a copy with the same values
    assert isinstance(x._value, np.ndarray) and x.place == "cpu" and not x.stop_gradient
    np.testing.assert_array_equal(x.numpy(), [1.0, 2.0])
    net.to("cpu")
    assert isinstance(net.weight._value, np.ndarray)
    assert net(pf.ones([4, 2])).shape == [4, 3]


gpu = pytest.mark.skipif(not pf.device.is_compiled_with_cuda(), reason="needs CuPy and a GPU")


@gpu
def test_gpu_device_round_trip_and_mixing_error():  # pragma: no cover - no GPU in CI
    x = pf.to_tensor([1.0, 2.0], stop_gradient=False)
    g = x.cuda()
    assert g.place == "gpu:0" and g.cpu().place == "cpu"
    with pytest.raises(TypeError, match="cpu.*gpu:0|gpu:0.*cpu"):
        x + g
    pf.set_device("gpu")
    try:
        z = pf.to_tensor([0.5, 1.5], stop_gradient=False)
        loss = (pf.tanh(z) * z).sum()
        loss.backward()
        expected = np.tanh([0.5, 1.5]) + np.array([0.5, 1.5]) / np.cosh([0.5, 1.5]) ** 2
        np.testing.assert_allclose(z.grad.numpy(), expected, rtol=1e-6)
        assert z.place == "gpu:0" and pf.get_device() == "gpu:0"
    finally:
        pf.set_device("cpu")


@gpu
@pytest.mark.parametrize("info", _entries(("diff", "nondiff", "nograd")))
def test_values_on_gpu(info):  # pragma: no cover - no GPU in CI
    import cupy  # noqa: PLC0415

    sample = info.samples()[0]
    got, expected = _on(cupy, _forward(info, sample))
    _compare(got, expected, f"gpu {info.name}")


def test_numba_kernels_ready_while_another_backend_is_active(tmp_path):
    """A NumPy-backend program whose numba kernels finish compiling while the array-API
    backend is installed switches to them at its next call under NumPy (its generated code
    uses the NumPy backend's kernels), without a warning."""
    import_extra("jit", "numba")
    import warnings  # noqa: PLC0415

    with pf.config.override(cache_dir=str(tmp_path)), warnings.catch_warnings():
        warnings.simplefilter("error")
        x = pf.to_tensor(np.random.default_rng(0).standard_normal((300, 200)))
        f = pf.jit(lambda a: ((a * 2.0 + 1.0) * a - a * 3.0).sum())
        expected = float(f(x))
        exe = f.lower(x).compile()
        if exe._pending is None:
            pytest.skip("the kernel was compiled at once (not tiered)")
        with pf.backend("array_api", namespace=array_api_strict):
            assert exe._pending.ready.wait(120)
        got = float(f(x))
    assert exe.backend == "numba" and exe.kernels
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_jit_row_blocks_and_partial_sums_on_the_strict_namespace():
    """Programs whose rows are independent run in row blocks there too (slices, assembly
    into allocated outputs and partial sums added in block order, all standard)."""
    rng = np.random.default_rng(5)
    x0, w0 = rng.standard_normal((64, 8)), rng.standard_normal((8, 16))

    def f(x, w):
        h = pf.tanh(x @ w)
        return h.sum(axis=1), (h * h).sum()

    def run():
        jitted = pf.jit(f)
        args = pf.to_tensor(x0), pf.to_tensor(w0)
        out = jitted(*args)
        return [o.numpy() for o in out], repr(jitted.lower(*args).compile())

    with pf.config.override(jit_block_bytes=1024):
        expected, _ = run()
        with pf.backend("array_api", namespace=array_api_strict):
            got, kind = run()
    assert "blocks of" in kind and "array_api" in kind, kind
    _compare(got, expected, "blocked jit on array_api_strict")
