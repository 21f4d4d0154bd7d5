"""The backend interface: the one place where array libraries are called for compute.

A backend supplies a kernel per primitive (keyed by the primitive's name), allocation and a
dtype map. Everything above ``backends/`` computes only by binding primitives, so a new
backend (GPU, another array library) implements this small class and nothing else.

Not every kernel has to be written by hand (``kernel_for``): a backend may derive one
(``derive_kernel``: an array-API namespace's function of the primitive's name for an
elementwise primitive, a NumPy ufunc of that name), and the kernels of ``defaults.py``
(``sub``, ``gt``, ``reduce_min``, ``iota``, ...) are composed from the others when missing.
A primitive declared with a NumPy ``reference=`` kernel needs none either: the NumPy backend
runs the reference itself, any other backend runs it on the host (``host_kernel``: inputs
copied to NumPy, the result copied back), warns once when it first does, and lists it in
``host_fallbacks``. ``docs/backend-contract.md`` lists the required ones.
"""

from __future__ import annotations

import abc
import warnings

from ..core.lowering import complex_refused


class Backend(abc.ABC):
    """Interface every backend implements.

    Attributes:
        name: short name, e.g. ``"numpy"``.
        kernels: dict from primitive name to a callable on native arrays.
        fast_paths: optional kernels for rules written in primitives, by kind then name
            (see ``fast_paths.py``): ``"composite"`` maps a composite's name
            (``"softmax"``, ...) to a ``(forward, backward)`` pair of fused kernels for
            eager first-order use (``numpy_fused.py``), ``"taylor"`` a unary primitive's
            name to a fused kernel for its Taylor rule (``numpy_taylor.py``), ``"jet"``
            ``"is_zero"`` (``is_zero(array) -> bool``: whether an array is identically
            zero, cheaply) and ``"rescale"`` (``rescale(values, factors, others) -> list``
            of ``factor * value``, in place for values only the Taylor kernels have seen).
            Empty by default: then every rule runs as written in primitives.
        codegen: the code generator ``pf.jit`` writes compiled programs with (``"numpy"``:
            ``compiler/numpy_codegen.py``), or None: compiled programs run the optimized
            IR through the interpreter on this backend's kernels.
    """

    name = "abstract"
    kernels: dict = {}
    fast_paths: dict = {}
    codegen = None
    place = "cpu"  # the device its arrays live on ("cpu", "gpu:0", ...)

    @abc.abstractmethod
    def asarray(self, data, dtype):
        """Native array from Python data / NumPy arrays, cast to primflow ``dtype`` if given."""

    @abc.abstractmethod
    def full(self, shape, value, dtype):
        """Native array of ``shape`` filled with ``value``."""

    @abc.abstractmethod
    def dtype_of(self, array):
        """The primflow DType of a native array."""

    @abc.abstractmethod
    def is_floating(self, array) -> bool:
        """Whether a native array holds floating-point values (the tape records only those)."""

    @abc.abstractmethod
    def native_dtype(self, dtype):
        """The native dtype for a primflow DType."""

    @abc.abstractmethod
    def to_numpy(self, array):
        """A NumPy array (a copy where the backend cannot share memory)."""

    @abc.abstractmethod
    def is_native(self, obj) -> bool:
        """Whether ``obj`` is this backend's array type."""

    # ---- kernels that are derived or composed ----------------------------------------------
    def derive_kernel(self, name, family, lowering=None):
        """A kernel for the primitive ``name`` (of ``family``, a ``Family``; ``lowering``, its
        declared spellings, ``core/lowering.py``) that this backend derives instead of listing
        it in ``kernels``, or None. Backends over a library of elementwise functions return
        the library's function of the declared name, so declaring an ordinary elementwise
        primitive needs no hand-written kernel."""
        return None

    def host_kernel(self, name, reference):
        """The kernel of primitive ``name`` from its NumPy ``reference`` kernel, for a
        backend with no native one: the inputs are copied to NumPy, the reference runs on
        the host and its result is copied back (correct everywhere, slow on a device). The
        first call warns once; ``host_fallbacks`` lists the primitives that run this way."""
        self.host_fallbacks = self.host_fallbacks | {name}
        warned = []

        def on_host(*arrays, **params):
            if not warned:
                warned.append(True)
                warnings.warn(f"backend {self.name!r} has no kernel for primitive {name!r}: "
                              f"running its NumPy reference kernel on the host (a copy to "
                              f"NumPy and back per call); add a kernel to the backend's "
                              f"table for speed", RuntimeWarning, stacklevel=2)
            return self.asarray(reference(*[self.to_numpy(a) for a in arrays], **params))

        on_host.reference = reference
        return on_host

    host_fallbacks = frozenset()  # primitives run through ``host_kernel`` (see above)

    def finish_kernel(self, name, kernel, family, lowering, from_reference):
        """``kernel`` as primitive ``name`` runs it: every kernel, native, derived, default or
        a declaration's reference, goes through here, so what the declaration says holds on
        every path. This one refuses complex inputs of a ``real_only`` primitive; the NumPy
        backend adds its float32 computing of bfloat16 and dtype restoring."""
        if lowering is None or not lowering.real_only:
            return kernel
        dtype_of = self.dtype_of

        def checked(*arrays, **params):
            dtype = dtype_of(arrays[0])  # the primitives' inputs share one dtype
            if dtype.is_complex:
                raise TypeError(complex_refused(name, dtype.name, arrays[0].shape))
            return kernel(*arrays, **params)

        checked.__wrapped__ = getattr(kernel, "__wrapped__", kernel)
        return checked

    def kernel_for(self, name, family=None, reference=None, lowering=None):
        """The kernel of primitive ``name``: this backend's own (``kernels``), else the one
        it derives (``derive_kernel``), else the default composed from its other kernels
        (``defaults.DEFAULTS``), else the primitive's NumPy ``reference`` kernel (a function
        or a ``"module:function"`` string, resolved here, ``references.py``) through
        ``host_kernel``; then ``finish_kernel``. The found kernel is kept in this
        instance's ``kernels``. Raises ``KeyError`` when there is none."""
        finished = vars(self).get("finished", ())
        if name in finished and name in self.kernels:
            return self.kernels[name]
        if family is None:
            from ..core.primitive import get_primitive  # noqa: PLC0415

            prim = get_primitive(name, None)
            if prim is not None:
                family, reference, lowering = prim.family, prim.reference, prim.lowering
        found, from_reference = self.kernels.get(name), False
        if found is None:
            found = self.derive_kernel(name, family, lowering)
        if found is None:
            from .defaults import DEFAULTS  # noqa: PLC0415 - defaults use this class

            default = DEFAULTS.get(name)
            if default is not None:
                found = default.build(self)
            elif reference is not None:
                from .references import resolve  # noqa: PLC0415

                found, from_reference = self.host_kernel(name, resolve(name, reference)), True
            else:
                raise KeyError(name)
        found = self.finish_kernel(name, found, family, lowering, from_reference)
        if "kernels" not in vars(self):  # never extend a class's (shared) table
            self.kernels = dict(self.kernels)
        self.kernels[name] = found
        self.finished = set(finished) | {name}
        return found

    # ---- checkpoint I/O (pf.save / pf.load): not abstract, so compute-only backends work --
    def save_arrays(self, file, arrays: dict, header: str) -> None:
        """Writes native ``arrays`` (name -> array) and a text ``header`` to the open binary
        ``file`` in a format that loads without executing code (never pickle)."""
        raise NotImplementedError(f"backend {self.name!r} cannot write checkpoints")

    def load_arrays(self, file):
        """Reads what ``save_arrays`` wrote from the open binary ``file``: returns
        ``(header or None, {name: native array})``. Raises on corrupt data."""
        raise NotImplementedError(f"backend {self.name!r} cannot read checkpoints")
