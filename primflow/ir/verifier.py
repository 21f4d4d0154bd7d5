"""The verifier: checks that a program is well formed SSA and well typed.

* every value is defined once (as an input or by one operation) before any use;
* every operation names a registered primitive (or ``constant`` with a pool entry);
* every operation's type equals ``Primitive.abstract_eval`` of its operands' types;
* outputs are defined values.

Passes run it after every rewrite in the tests (and with ``verify=True``).
"""

from __future__ import annotations

from ..backends import get_backend
from ..core.primitive import get_primitive
from ._program import CONSTANT
from .printer import format_type, names_of
from .regions import CONTROL, GET, check_regions, regions_of

_backend = get_backend()


class VerificationError(ValueError):
    """The program breaks an SSA or typing invariant; the message names the operation."""


def verify(fn) -> None:
    """Raises ``VerificationError`` if ``fn`` is not a valid program.

    Example:
        >>> from primflow.ir import parse, verify
        >>> verify(parse("def f(%0: float32[2]):\\n    %1: float32[2] = exp(%0)\\n"
        ...              "    return %1\\n"))
    """
    names = names_of(fn)
    defined = set()
    for v in fn.inputs:
        if v in defined:
            raise VerificationError(f"input {names[v]} appears twice in the inputs")
        defined.add(v)
    for i, op in enumerate(fn.ops):
        where = f"operation {i} ({names.get(op.out, '?')} = {op.prim})"
        for k, v in enumerate(op.inputs):
            if v not in defined:
                raise VerificationError(f"{where}: operand {k} is used before it is defined "
                                        f"(or is defined in another program)")
        if op.out in defined:
            raise VerificationError(f"{where}: its result is defined twice")
        if op.out.op is not op:
            raise VerificationError(f"{where}: its result does not point back to it")
        _check_type(fn, op, where)
        defined.add(op.out)
    for k, v in enumerate(fn.outputs):
        if v not in defined:
            raise VerificationError(f"output {k} is not defined in the program")


def _check_type(fn, op, where):
    if op.prim in CONTROL:  # regions: each a valid program whose signature fits
        for name, region in regions_of(op):
            try:
                verify(region)
            except VerificationError as e:
                raise VerificationError(f"{where}: region {name}: {e}") from None
        try:
            check_regions(op)
        except ValueError as e:
            raise VerificationError(f"{where}: {e}") from None
        return
    if op.prim == GET:
        tup = op.inputs[0].aval
        index = op.params.get("index")
        avals = getattr(tup, "avals", None)
        if avals is None or not isinstance(index, int) or not 0 <= index < len(avals):
            raise VerificationError(f"{where}: get(index={index}) of a value typed "
                                    f"{format_type(tup)}")
        if avals[index] != op.out.aval:
            raise VerificationError(f"{where}: typed {format_type(op.out.aval)} but element "
                                    f"{index} is {format_type(avals[index])}")
        return
    if op.prim == CONSTANT:
        index = op.params.get("index")
        if index not in fn.consts:
            raise VerificationError(f"{where}: constant #{index} is not in the pool")
        array = fn.consts[index]
        shape = tuple(array.shape)
        if shape != op.out.aval.shape or _backend.dtype_of(array) is not op.out.aval.dtype:
            have = f"{_backend.dtype_of(array).name}{list(shape)}"
            raise VerificationError(f"{where}: constant #{index} has type {have} but the "
                                    f"value is typed {format_type(op.out.aval)}")
        return
    try:
        prim = get_primitive(op.prim)
    except KeyError:
        raise VerificationError(f"{where}: no primitive named {op.prim!r}") from None
    try:
        aval = prim.abstract_eval(*[v.aval for v in op.inputs], **op.params)
    except Exception as e:
        raise VerificationError(f"{where}: its operands and params are rejected by the "
                                f"primitive's shape rule: {type(e).__name__}: {e}") from e
    if aval != op.out.aval:
        raise VerificationError(f"{where}: typed {format_type(op.out.aval)} but "
                                f"{op.prim} of its operands gives {format_type(aval)}")
