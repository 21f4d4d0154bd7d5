"""A primitive is one declaration (core/primitive.py): the coverage of every registered
primitive's rules (sharding included), what is derived from a declaration, the kernel
checks, and the target: a new primitive written as its declaration plus an OpInfo entry,
nothing else, works in eager mode, to second order in every AD mode, under vmap, jet and
jit, where the compiler fuses it with its neighbours; a new public elementwise op declared
that way is ``pf.<name>``, a Tensor method and a ``prims`` export, spelled in every
generated kernel and run natively by the array-API backend."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import textwrap
import warnings

import numpy as np
import pytest

import primflow as pf
from primflow import backends, prims
from primflow.backends import get_backend
from primflow.core import primitive as primitive_module
from primflow.core.primitive import Family, Primitive, get_primitive
from primflow.ir.passes.fuse import ELEMENTWISE, TRANSCENDENTAL, fuse
from primflow.testing import check_grads as cg
from primflow.testing.extras import import_extra

PRIMS_DIR = pathlib.Path(prims.__file__).parent


# ---- coverage: every registered primitive has every rule it needs ---------------------------

def _gaps(name):
    p = get_primitive(name)
    gaps = []
    if not callable(p.infer):
        gaps.append("infer")
    if not isinstance(p.family, Family):
        gaps.append("family")
    if p.batch is None and not p.family.nullary:
        gaps.append("batch")
    if p.differentiable and (p.jvp is None or p.vjp is None):
        gaps.append("jvp/vjp (or differentiable=False)")
    if not p.differentiable and not p.family.nullary and (p.jvp, p.vjp) != (None, None):
        gaps.append("rules on a non-differentiable primitive")
    if p.linear and p.transpose is None:
        gaps.append("transpose (linear)")
    if not callable(p.taylor):
        gaps.append("taylor")
    if p.shard is None:
        gaps.append("shard (prims/sharding.py)")
    if get_backend().kernels.get(name) is not p.impl:
        gaps.append("kernel")
    return gaps


@pytest.mark.parametrize("name", pf.primitives())
def test_every_primitive_has_every_rule(name):
    assert not _gaps(name), f"primitive {name!r} lacks: {_gaps(name)}"


def test_no_rule_is_attached_after_the_declaration():
    """Every rule is passed to ``Primitive(...)``; nothing in prims/ assigns one later."""
    attached = re.compile(r"^\s*[\w.]+\.(jvp|vjp|transpose|batch|taylor|linear|linear_in|"
                          r"saves_out|saves_inputs|shard|regions|impl|family)\s*=[^=]", re.M)
    bad = [f"{path.name}: {m.group(0).strip()}" for path in sorted(PRIMS_DIR.glob("*.py"))
           for m in attached.finditer(path.read_text(encoding="utf-8"))]
    assert not bad, bad


# ---- what a declaration derives -------------------------------------------------------------

def test_elementwise_vjp_is_the_jvp_and_linear_jvp_applies_the_primitive():
    tanh, add, reshape = get_primitive("tanh"), get_primitive("add"), get_primitive("reshape")
    # diagonal Jacobian: the vjp is the jvp rule (conjugated around it for complex values)
    (tanh_vjp,), (tanh_jvp,) = tanh.vjp, tanh.jvp
    assert tanh_vjp.__name__ == tanh_jvp.__name__
    xr = pf.to_tensor([0.3, -1.2], dtype="float64")
    gr = pf.to_tensor([2.0, 0.5], dtype="float64")
    np.testing.assert_array_equal(tanh_vjp(gr, pf.tanh(xr), xr).numpy(),
                                  tanh_jvp(gr, pf.tanh(xr), xr).numpy())
    assert add.vjp is add.transpose and add.jvp is add.transpose and add.linear
    assert reshape.vjp is reshape.transpose and reshape.saves_inputs == frozenset()
    x = pf.to_tensor([[1.0, 2.0, 3.0]], dtype="float64")
    t = pf.to_tensor([[4.0, 5.0, 6.0]], dtype="float64")
    (rule,) = reshape.jvp
    np.testing.assert_array_equal(rule(t, None, x, shape=(3,)).numpy(), [4.0, 5.0, 6.0])
    assert get_primitive("gather").saves_inputs == frozenset({1})  # the transpose reads idx


def test_declaration_errors_say_what_is_missing(monkeypatch):
    monkeypatch.setattr(primitive_module, "_registry", dict(primitive_module._registry))
    monkeypatch.setattr(get_backend(), "kernels", dict(get_backend().kernels))
    family = get_primitive("sin").family
    with pytest.raises(ValueError, match="no kernel for primitive 'nokernel'"):
        Primitive("nokernel", family=family, infer=lambda x: x, differentiable=False)
    get_backend().kernels["norules"] = np.sin
    with pytest.raises(ValueError, match="'norules' has no derivative rule"):
        Primitive("norules", family=family, infer=lambda x: x)
    with pytest.raises(ValueError, match="linear: give its transpose"):
        Primitive("norules", family=family, infer=lambda x: x, linear=True)
    with pytest.raises(ValueError, match="defined twice"):
        Primitive("sin", family=family, infer=lambda x: x, differentiable=False)


def test_installing_a_backend_without_a_kernel_names_the_primitive():
    class Partial(backends.NumpyBackend):
        name = "partial"
        kernels = {k: v for k, v in backends.NumpyBackend.kernels.items()
                   if k not in ("cumsum", "gather", "tanh")}

    active = get_backend()
    # tanh is derived (NumPy's ufunc of that name); cumsum and gather are not
    with pytest.raises(ValueError, match="no kernel for the primitive.s. 'cumsum', 'gather';"):
        backends.install(Partial())
    assert get_backend() is active and get_primitive("tanh").impl is active.kernels["tanh"]
    assert "tanh" not in Partial.kernels  # the class's table is never extended


def test_fusion_classes_are_derived_from_the_families():
    assert "tanh" in TRANSCENDENTAL and "tanh" in ELEMENTWISE and "mul" not in TRANSCENDENTAL
    assert "reduce_sum" not in ELEMENTWISE and "no_such_prim" not in ELEMENTWISE
    assert set(ELEMENTWISE) == {n for n in pf.primitives()
                                if get_primitive(n).family.elementwise}


# ---- the target: a new primitive is its declaration plus an OpInfo entry -------------------

# What a contributor writes: the declaration in a family file (its NumPy reference kernel
# included) and the OpInfo entry. Nothing else: no kernel tables, no name lists, no ops/
# wrapper, no regenerated page.
NEW_PRIMITIVE = '''
from scipy import special

from primflow.core.primitive import Primitive
from primflow.prims import sharding as sr, _taylor as tl, elementwise as ew
from primflow.prims._util import float_unary_infer, full_like
from primflow.prims.families import ELEMENTWISE_TRANSCENDENTAL
from primflow.testing.opinfo import OpInfo, unary


def _erfc_probe_jvp(g, out, x):  # d erfc = -2/sqrt(pi) exp(-x^2)
    return ew.mul(g, ew.mul(full_like(x, -tl.TWO_OVER_SQRT_PI), ew.exp(ew.neg(ew.mul(x, x)))))


def _erfc_probe_series(xs, z0, x0):  # z' = -c e x' with e = exp(-x^2) as a series
    q = [tl.scale(tl.square_coefficient(xs, m), -1.0) for m in range(len(xs))]
    e = tl.exp_series(q, ew.exp(q[0]))
    return [z0] + [tl.scale(tl.convolution(xs, e, k, weighted=True), -tl.TWO_OVER_SQRT_PI / k)
                   for k in range(1, len(xs))]


erfc_probe = Primitive("erfc_probe", family=ELEMENTWISE_TRANSCENDENTAL,
                       infer=float_unary_infer("erfc_probe"), jvp=(_erfc_probe_jvp,),
                       taylor=tl.unary_rule(_erfc_probe_series), shard=sr.NONLINEAR,
                       reference=special.erfc, doc="1 - erf(x)")

ENTRY = OpInfo("erfc_probe", erfc_probe, special.erfc, unary((2, 3), ()),
               prims=("erfc_probe",), covers=())
'''


@pytest.fixture
def new_primitive(tmp_path, monkeypatch):
    """Imports NEW_PRIMITIVE from a temporary module; the registry and the kernel table
    are restored afterwards."""
    import_extra("test", "scipy")  # (NEW_PRIMITIVE's reference is SciPy's erfc)
    monkeypatch.setattr(primitive_module, "_registry", dict(primitive_module._registry))
    monkeypatch.setattr(get_backend(), "kernels", dict(get_backend().kernels))
    path = tmp_path / "erfc_probe_family.py"
    path.write_text(textwrap.dedent(NEW_PRIMITIVE), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("erfc_probe_family", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BACKENDS = ["numpy", "array_api_strict"]


@pytest.fixture
def on_backend(request, new_primitive, monkeypatch):
    """Runs the test on the NumPy backend, or on the array-API backend over
    ``array_api_strict``, which has no kernel for the new primitive: it runs the reference on
    the host. Its kernel table is restored afterwards."""
    if request.param == "numpy":
        yield get_backend()
        return
    strict = import_extra("test", "array_api_strict")
    chosen = backends.make_backend("array_api", namespace=strict)
    monkeypatch.setattr(chosen, "kernels", dict(chosen.kernels))
    monkeypatch.setattr(chosen, "host_fallbacks", chosen.host_fallbacks)
    with pf.backend(chosen):
        yield chosen


@pytest.mark.parametrize("on_backend", BACKENDS, indirect=True)
@pytest.mark.filterwarnings("ignore:backend .* has no kernel for primitive:RuntimeWarning")
def test_a_new_primitive_needs_only_its_declaration_and_its_entry(new_primitive, on_backend):
    from scipy import special

    info, prim = new_primitive.ENTRY, new_primitive.erfc_probe
    assert not _gaps("erfc_probe")
    assert "erfc_probe" in ELEMENTWISE and "erfc_probe" in TRANSCENDENTAL
    rng = np.random.default_rng(13)
    for sample in info.samples():
        fn, primals = sample.bind(info.op)
        # eager
        np.testing.assert_allclose(fn(*cg.leaves(primals, False)).numpy(),
                                   special.erfc(primals[0]), rtol=1e-13)
        # first derivatives, and orders 1..2 in the four AD modes, against differences
        cg.check_jvp(fn, primals, rng)
        cg.check_vjp(fn, primals, rng)
        for order in (1, 2):
            cg.check_order(fn, primals, order, rng, modes=cg.ALL_MODES)
        # Taylor mode against nested jvp
        cg.check_jet(fn, primals, 4, rng)
    # vmap against a loop
    xs = np.linspace(-1.5, 1.5, 12).reshape(3, 4)
    batched = pf.vmap(prim)(pf.to_tensor(xs, dtype="float64")).numpy()
    loop = np.stack([prim(pf.to_tensor(x, dtype="float64")).numpy() for x in xs])
    np.testing.assert_allclose(batched, loop, rtol=1e-15)


@pytest.mark.parametrize("on_backend", BACKENDS, indirect=True)
@pytest.mark.filterwarnings("ignore:backend .* has no kernel for primitive:RuntimeWarning")
def test_jit_fuses_a_new_primitive_with_its_neighbours(new_primitive, on_backend):
    prim = new_primitive.erfc_probe

    def f(x, y):
        return prim(x * 2.0 + y) * y

    x = pf.to_tensor(np.linspace(-1, 1, 64).reshape(8, 8), dtype="float64")
    y = pf.to_tensor(np.linspace(0.5, 2, 64).reshape(8, 8), dtype="float64")
    jitted = pf.jit(f)
    np.testing.assert_allclose(jitted(x, y).numpy(), f(x, y).numpy(), rtol=1e-15)
    program = jitted.lower(x, y).program
    groups = fuse(program)
    assert any({"erfc_probe", "add", "mul"} <= {op.prim for op in g.ops} for g in groups), (
        program.as_text())
    # the generated code calls its kernel (on NumPy a ufunc written into a buffer)
    assert "K_erfc_probe(" in jitted.lower(x, y).as_text("compiled")


def test_a_backend_without_the_kernel_runs_the_reference_on_the_host(new_primitive):
    """The round trip is reported: a one-time warning and ``host_fallbacks``; the contract
    page needs no regeneration for a primitive declared with ``reference=``."""
    strict = import_extra("test", "array_api_strict")
    from scipy import special

    # NumPy runs the reference itself (behind the dtype-restoring wrapper every kernel shares)
    assert get_backend().kernels["erfc_probe"].__wrapped__ is special.erfc
    fresh = backends.make_backend("array_api", namespace=strict).__class__(strict)
    assert "erfc_probe" in fresh.host_fallbacks and get_backend().host_fallbacks == set()
    with pf.backend(fresh):
        x = pf.to_tensor([0.5, -1.0], dtype="float64")
        with pytest.warns(RuntimeWarning, match="no kernel for primitive 'erfc_probe'"):
            out = new_primitive.erfc_probe(x)
        assert isinstance(out._value, type(x._value))  # copied back to the backend's arrays
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once only
            new_primitive.erfc_probe(x)
    np.testing.assert_allclose(out.numpy(), special.erfc([0.5, -1.0]), rtol=1e-15)
    spec = importlib.util.spec_from_file_location(
        "gen_backend_contract", PRIMS_DIR.parent.parent / "tools" / "gen_backend_contract.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.kernel_kind("erfc_probe") == "reference"
    assert gen.main(["--check"]) == 0  # the page is current with the new primitive declared


# ---- the target for public ops: a declaration with Lowering and PublicOp, nothing else ------

# A complete public elementwise op as a contributor declares it: its spellings for every code
# generator and backend (the array-API kernel built from namespace functions), real-only and
# float32-computed, and its public op. Nothing else is written anywhere.
NEW_PUBLIC_OP = '''
from primflow.core.lowering import Lowering, PublicOp
from primflow.core.primitive import Primitive
from primflow.prims import _taylor as tl, elementwise as ew
from primflow.prims._util import float_unary_infer, full_like
from primflow.prims.families import ELEMENTWISE_UNARY
from primflow.testing.opinfo import OpInfo, unary


def _cube_jvp(g, out, x):  # d x^3 = 3 x^2
    return ew.mul(g, ew.mul(full_like(x, 3.0), ew.mul(x, x)))


def _cube_series(xs, z0, x0):  # x^3 as the Cauchy product of x and x^2
    return [z0] + tl.cauchy_series(xs, tl.cauchy_series(xs, xs))[1:]


def _array_api_cube(xp):
    return lambda x: xp.multiply(x, xp.multiply(x, x))


cube_probe = Primitive(
    "cube_probe", family=ELEMENTWISE_UNARY, infer=float_unary_infer("cube_probe"),
    jvp=(_cube_jvp,), taylor=tl.unary_rule(_cube_series), reference=lambda x: x * x * x,
    lowering=Lowering(c="{0} * {0} * {0}", numba="({0} * {0} * {0})", array_api=_array_api_cube,
                      real_only=True, float32_compute=True),
    doc="x ** 3",
    public=PublicOp("The cube x ** 3.", "pf.cube_probe(pf.to_tensor([2.0])).numpy()",
                    "array([8.], dtype=float32)"))

ENTRY = OpInfo("cube_probe", cube_probe, lambda x: x ** 3, unary((2, 3), ()),
               prims=("cube_probe",), covers=())
'''


COMPLEX_REFUSED = (TypeError, pf.PrimitiveError)  # (eager: the kernel's error, wrapped by bind)


@pytest.fixture
def new_public_op(tmp_path):
    """Imports NEW_PUBLIC_OP from a temporary module; afterwards every trace of it is removed
    (registry, kernels, the public op, the Tensor method) and the removal is checked."""
    from primflow.core import tensor as tensor_module
    from primflow.ops import math as ops_math

    registry, kernels = dict(primitive_module._registry), get_backend().kernels
    public_ops = dict(ops_math._PUBLIC_OPS)
    deferred = {k: list(v) for k, v in tensor_module.DEFERRED_METHODS.items()}
    get_backend().kernels = dict(kernels)
    path = tmp_path / "cube_probe_family.py"
    path.write_text(textwrap.dedent(NEW_PUBLIC_OP), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("cube_probe_family", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        primitive_module._registry.clear()
        primitive_module._registry.update(registry)
        get_backend().kernels = kernels
        ops_math._PUBLIC_OPS.clear()
        ops_math._PUBLIC_OPS.update(public_ops)
        tensor_module.DEFERRED_METHODS.clear()
        tensor_module.DEFERRED_METHODS.update(deferred)
        if "cube_probe" in vars(pf.Tensor):
            delattr(pf.Tensor, "cube_probe")
    assert "cube_probe" not in pf.primitives() and not hasattr(pf, "cube_probe")
    assert not hasattr(pf.Tensor, "cube_probe") and not hasattr(prims, "cube_probe")


def test_a_new_public_op_is_seen_by_users(new_public_op):
    x = pf.to_tensor([1.5, -2.0], dtype="float64")
    assert pf.cube_probe(x).numpy().tolist() == [3.375, -8.0]
    assert x.cube_probe().numpy().tolist() == [3.375, -8.0]
    assert pf.cube_probe([2.0]).dtype == pf.float32  # a list becomes a floating tensor
    assert prims.cube_probe is new_public_op.cube_probe
    assert "The cube x ** 3." in pf.cube_probe.__doc__
    assert not _gaps("cube_probe")
    # complex refused, as declared (real_only), eager and jitted alike
    z = pf.to_tensor([1 + 1j])
    for run in (pf.cube_probe, pf.jit(pf.cube_probe)):
        with pytest.raises(COMPLEX_REFUSED, match="cube_probe is not defined for complex"):
            run(z)
    # narrow floats keep their dtype (float32_compute: computed in float32, rounded once)
    assert pf.cube_probe(pf.to_tensor([1.5], "float32")).dtype == pf.float32
    import_extra("test", "ml_dtypes")
    half = pf.cube_probe(pf.to_tensor([1.5, 2.0], "bfloat16"))
    assert half.dtype == pf.bfloat16
    assert half.astype("float32").numpy().tolist() == [3.375, 8.0]
    # derivatives to second order and the Taylor rule, against finite differences
    rng = np.random.default_rng(3)
    fn, primals = new_public_op.ENTRY.samples()[0].bind(new_public_op.ENTRY.op)
    cg.check_order(fn, primals, 2, rng, modes=cg.ALL_MODES)
    cg.check_jet(fn, primals, 3, rng)


def test_a_new_public_op_is_in_every_generated_kernel(new_public_op):
    """Its fused numba and CuPy kernels (CuPy's as generated text: no GPU needed) and the
    numba kernel of a whole loop spell the op as declared."""
    from primflow.compiler import cupy_codegen, numba_codegen, numba_loops
    from primflow.ir import parse

    fn = parse("def f(%0: float64[8], %1: float64[8]):\n"
               "    %2: float64[8] = mul(%0, %1)\n    %3: float64[8] = cube_probe(%2)\n"
               "    %4: float64[8] = add(%3, %1)\n    return %4\n")
    (group,) = fuse(fn)
    assert [op.prim for op in group.ops] == ["mul", "cube_probe", "add"]
    assert cupy_codegen.supports(group)
    assert re.search(r"double t3 = t2 \* t2 \* t2;", cupy_codegen.kernel_source(group).operation)
    assert numba_codegen.supports(group)
    assert re.search(r"(\w+) \* \1 \* \1", numba_codegen.kernel_source(group))

    def loop(c0):
        return pf.scan(lambda c, _: (pf.cube_probe(c) * 0.5, c), c0, None, length=4)

    program = pf.jit(loop).lower(pf.to_tensor([0.5, 0.25], "float64")).program
    (scan,) = [op for op in program.ops if op.prim == "scan"]
    assert numba_loops.supports(scan)
    assert re.search(r"\((\w+(?:\[\w+\])?) \* \1 \* \1\)", numba_loops.loop_spec(scan).source)


def test_the_array_api_backend_runs_a_new_public_op_natively(new_public_op):
    strict = import_extra("test", "array_api_strict")
    fresh = backends.make_backend("array_api", namespace=strict)
    assert "cube_probe" not in fresh.host_fallbacks
    with pf.backend(fresh), warnings.catch_warnings():
        warnings.simplefilter("error")  # no host-fallback warning
        out = pf.cube_probe(pf.to_tensor([1.5, -2.0], "float32"))
        assert isinstance(out._value, type(strict.asarray(0.0)))
        assert out.dtype == pf.float32
        assert out.numpy().tolist() == [3.375, -8.0]
        with pytest.raises(COMPLEX_REFUSED, match="cube_probe is not defined for complex"):
            pf.cube_probe(pf.to_tensor([1 + 1j]))
