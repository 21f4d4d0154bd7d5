"""GPU kernels for fused elementwise groups on the CuPy backend.

On the array-API backend over CuPy, ``pf.jit`` writes its program as calls on ``xp`` like on
any namespace (``array_api_codegen.py``), except that each fusion group of elementwise
operations (``ir.passes.fuse``: the groups the CPU code generators fuse) becomes one CUDA
kernel: a ``cupy.ElementwiseKernel`` whose body is generated here, one C statement per
operation, so the chain runs in registers and only the values the rest of the program
reads are stored. CuPy compiles a kernel with NVRTC at its first call and caches it on disk.

``kernel_source(group)`` is the generated kernel (parameters and body) as text: it needs
neither CuPy nor a GPU, so it is tested everywhere; ``compile_group`` needs both.

Semantics follow NumPy's where C's differ (the declarations' ``c=`` forms): ``maximum``/
``minimum`` propagate NaN (C's ``fmax`` ignores it), ``round`` is half-to-even (``rint``).
Reductions stay CuPy calls (``xp.sum``), and groups with views (unit reshapes) or integer
arithmetic are left to them as well.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

from .spellings import BY_CODE, c_form

LABEL = "cupy"  # Executable.backend of programs with these kernels

_C_TYPES = {"float32": "float", "float64": "double", "bool": "bool", "int32": "int",
            "int64": "long long"}
# the CUDA C form of each elementwise primitive is its declaration's (Lowering.c, read
# through spellings.py); select, integer_pow and casts are written here


class KernelSource(NamedTuple):
    """A ``cupy.ElementwiseKernel``'s arguments: ``in_params``, ``out_params``,
    ``operation`` (the body: one C statement per operation) and ``name``."""

    in_params: str
    out_params: str
    operation: str
    name: str


def computes(op) -> bool:
    """Whether a CUDA kernel computes ``op``: a supported elementwise primitive on
    floating values (bool results and selects included).

    Example:
        >>> from primflow.ir import parse
        >>> fn = parse("def f(%0: float64[4]):\\n    %1: float64[4] = tanh(%0)\\n"
        ...            "    %2: float64[4] = reduce_sum(%1, axes=(0,))\\n    return %2\\n")
        >>> [computes(op) for op in fn.ops]
        [True, False]
    """
    if op.prim not in BY_CODE and c_form(op.prim) is None:
        return False
    names = [v.aval.dtype.name for v in (*op.inputs, op.out)]
    if not all(n in ("float32", "float64", "bool") for n in names):
        return op.prim == "convert_element_type" and all(n in _C_TYPES for n in names)
    return True


def supports(group) -> bool:
    """Whether ``group`` becomes one kernel: at least two operations, all computed by
    ``computes``, and every output of the group's full shape (inputs broadcast to it)."""
    if len(group.ops) < 2 or not all(computes(op) for op in group.ops):
        return False
    shape = tuple(group.outputs[0].aval.shape) if group.outputs else None
    if any(tuple(v.aval.shape) != shape for v in group.outputs):
        return False
    return all(len(v.aval.shape) <= len(shape) and all(
        a in (1, b) for a, b in zip(reversed(v.aval.shape), reversed(shape)))
        for v in group.inputs)


def kernel_source(group) -> KernelSource:
    """The generated kernel of ``group`` (see ``supports``).

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import fuse
        >>> fn = parse("def f(%0: float32[8], %1: float32[8]):\\n"
        ...            "    %2: float32[8] = mul(%0, %1)\\n"
        ...            "    %3: float32[8] = tanh(%2)\\n    return %3\\n")
        >>> src = kernel_source(fuse(fn)[0])
        >>> src.in_params, src.out_params
        ('float32 i0, float32 i1', 'float32 o0')
        >>> print(src.operation)
        float t2 = i0 * i1;
        float t3 = tanh(t2);
        o0 = t3;
    """
    names = {v: f"i{k}" for k, v in enumerate(group.inputs)}
    params_in = [f"{v.aval.dtype.name} i{k}" for k, v in enumerate(group.inputs)]
    lines = []
    for op in group.ops:
        ctype = _C_TYPES[op.out.aval.dtype.name]
        args = [names[v] for v in op.inputs]
        one = "1.0f" if ctype == "float" else "1.0"
        form = c_form(op.prim)
        if form is not None:
            expr = form.format(*args, one=one)
        elif op.prim == "select":
            expr = f"{args[0]} ? {args[1]} : {args[2]}"
        elif op.prim == "integer_pow":
            expr = _integer_pow(args[0], op.params["y"], one)
        else:  # convert_element_type
            expr = f"({ctype})({args[0]})"
        name = f"t{len(names)}"
        names[op.out] = name
        lines.append(f"{ctype} {name} = {expr};")
    params_out = [f"{v.aval.dtype.name} o{k}" for k, v in enumerate(group.outputs)]
    lines += [f"o{k} = {names[v]};" for k, v in enumerate(group.outputs)]
    operation = "\n".join(lines)
    digest = hashlib.sha1(("|".join(params_in + params_out) + operation).encode())
    return KernelSource(", ".join(params_in), ", ".join(params_out), operation,
                        f"primflow_fused_{digest.hexdigest()[:12]}")


def _integer_pow(x, y, one):
    if y == 0:
        return one
    if abs(y) <= 4:
        product = " * ".join([x] * abs(y))
        return f"{one} / ({product})" if y < 0 else f"({product})"
    return f"pow({x}, {float(y)!r})"


def kernel_operand(v):
    """The value a kernel reads for its input ``v``: ``v`` itself (CuPy's elementwise
    kernels broadcast and read strided views)."""
    return v


_compiled = {}


def compile_group(group):
    """A callable ``kernel(*inputs, *outputs) -> tuple of outputs`` running ``group`` on
    the GPU (CuPy builds it with NVRTC at the first call). Needs CuPy."""
    import cupy  # noqa: PLC0415 - optional dependency (the gpu extra)

    src = kernel_source(group)
    kernel = _compiled.get(src)
    if kernel is None:
        kernel = _compiled[src] = cupy.ElementwiseKernel(src.in_params, src.out_params,
                                                         src.operation, src.name)
    n_out = len(group.outputs)

    def run(*arrays):
        out = kernel(*arrays)
        return (out,) if n_out == 1 else tuple(out)

    run.source = src
    return run


def uses_kernels(backend) -> bool:
    """Whether compiled programs on ``backend`` get CUDA kernels for their fused groups
    (the array-API backend over CuPy).

    Example:
        >>> from primflow.backends import get_backend
        >>> uses_kernels(get_backend())
        False
    """
    namespace = getattr(backend, "namespace", None)
    return getattr(namespace, "__name__", "").startswith("cupy")
