"""From a traced program to something that runs: optimize, group, plan, generate, cache.

``optimize_program`` runs the IR passes (simplify, fold, CSE, DCE to a fixed point).
``compile_program`` turns the result into an ``Executable``:

1. fusion grouping (``ir.passes.fuse``) finds elementwise chains and reductions with their
   producers; with numba available, large arithmetic-only groups become numba kernels
   (``compiler/numba_codegen.py``), the others stay NumPy;
2. memory planning (``ir.passes.plan_memory``) gives every computed value a reusable
   buffer unless it leaves the program (a numba kernel is planned as one unit: the buffers
   it reads are not reused for its own results);
3. code generation writes one Python function: each operation is one NumPy call writing
   into its buffer (``np.tanh(b0, out=b0)``), constants are precomputed, ``dot_general``
   is BLAS ``matmul`` (or the backend kernel), and each value is computed once (the
   program is already CSE'd);
4. the source is compiled once per distinct text (an in-memory cache) and executed in a
   namespace holding the constants.

This module chooses: ``choose_target`` (which code generator, whether row blocks and a
background compile are allowed) and ``choose_kernels`` (which fused groups and loops become
numba kernels) return plans that ``compile_program`` carries out, with the row-block and
thread cost model below. Writing the code is ``emit.py``'s job, running it
``executable.py``'s.
"""


from __future__ import annotations

import math
import time
import warnings
from typing import NamedTuple

from ..backends import get_backend
from ..core.config import config
from ..ir import CONSTANT, IMPURE, evaluate
from ..ir.passes import fuse, plan_memory, run_pipeline
from ..ir.passes.blocking import batch_axes, block_sums_program
from ..ir.passes.fuse import REDUCTIONS, TRANSCENDENTAL, VIEWS
from ..ir.passes.loop_products import hoist_accumulated_products
from ..ir.passes.recompute import recompute_broadcasts
from ..ir.regions import optimize_regions, prune_results, simplify_loops
from . import cupy_codegen, numba_codegen, numba_loops
from . import numpy_codegen as npc
from .emit import _code_cache, generate  # noqa: F401 - (bench.control_flow empties the cache)
from .executable import BlockedExecutable, ByThreads, Executable, Pending
from .kernel_cache import KernelCacheError

__all__ = ["BACKENDS", "Executable", "KernelPlan", "Target", "choose_kernels", "choose_target",
           "compile_program", "optimize_program", "small_program_plan"]

BACKENDS = ("numpy", "numba", "interpret")


def optimize_program(fn, verify=False, assume_finite=False):
    """A copy of ``fn`` optimized by the default pass pipeline."""
    fn = run_pipeline(fn.copy(), verify=verify, assume_finite=assume_finite)
    # control flow: results nobody reads leave their regions, and each region (loop body,
    # branch) is optimized on its own copy
    optimize_regions(fn, lambda r: _prune_then_optimize(r, verify, assume_finite))
    if prune_results(fn):
        optimize_regions(fn, lambda r: _prune_then_optimize(r, verify, assume_finite))
    if hoist_accumulated_products(fn):  # regions are this program's own copies by now
        fn = run_pipeline(fn, verify=verify, assume_finite=assume_finite)
        optimize_regions(fn, lambda r: _prune_then_optimize(r, verify, assume_finite))
    for _ in range(3):  # constants and unchanged carries out of the loops
        if not simplify_loops(fn):
            break
        fn = run_pipeline(fn, verify=verify, assume_finite=assume_finite)
        prune_results(fn)  # (the saved values a simplified reverse scan no longer reads)
        optimize_regions(fn, lambda r: _prune_then_optimize(r, verify, assume_finite))
    return fn


def _prune_then_optimize(fn, verify, assume_finite):
    fn = run_pipeline(fn, verify=verify, assume_finite=assume_finite)
    if prune_results(fn):
        fn = run_pipeline(fn, verify=verify, assume_finite=assume_finite)
    return fn


class Target(NamedTuple):
    """Where a program's code goes (``choose_target``)."""

    tier: str  # "interpret", "numpy", "numba" or "auto" (numpy plus numba where it pays)
    emitter: object  # spells each operation: numpy_codegen, or the array-API emitter
    blocking: bool  # whether row blocks (and threads) may be used
    tiered: bool  # with "auto", compile the numba kernels in the background
    numpy_arrays: bool  # the arrays are NumPy's (else only the namespace's own calls)


def _choose_backend(backend):
    if backend is None:
        backend = config.jit_backend
    if backend not in BACKENDS + ("auto",):
        raise ValueError(f"unknown jit backend {backend!r}; choose one of {BACKENDS} or None")
    return backend


def choose_target(backend=None, blocking=None, tiered=None) -> Target:
    """The ``Target`` for the active backend: options that are None take ``pf.config``'s
    values; a backend without a code generator gets the interpreter, an array-API backend
    its namespace's emitter (numba only over NumPy arrays, whole arrays on a GPU).

    Example:
        >>> from primflow.compiler._pipeline import choose_target
        >>> choose_target("numpy", blocking=True, tiered=False).tier
        'numpy'
    """
    backend = _choose_backend(backend)
    blocking = config.jit_blocking if blocking is None else blocking
    tiered = config.jit_tiered if tiered is None else tiered
    active = get_backend()
    if active.codegen not in ("numpy", "array_api"):  # no generator for its arrays
        backend = "interpret"
    if backend == "interpret" or active.codegen == "numpy":
        return Target(backend, npc, blocking, tiered, True)
    from .array_api_codegen import emitter_for  # the generated source calls the namespace

    numpy_arrays = active.arrays_are_numpy  # numba kernels take NumPy arrays only
    return Target(backend if numpy_arrays else "numpy", emitter_for(active),
                  blocking and active.place == "cpu",  # a GPU: whole arrays (row blocks
                  tiered, numpy_arrays)                # are for caches)


class KernelPlan(NamedTuple):
    """The numba kernels a program gets (``choose_kernels``)."""

    fn: object  # the program the kernels are generated for (broadcast products recomputed)
    groups: list  # its fusion groups
    kernels: dict  # id(group) -> group, for the groups that become kernels
    loops: list  # the scan/while loops that run whole as one kernel
    small: bool = False  # kernels for a program of small arrays (small_program_plan)


def choose_kernels(fn, groups, backend):
    """The ``KernelPlan`` of ``fn`` (``groups``: its NumPy fusion groups) under ``backend``,
    or None when it gets no numba kernel (numba absent, or no group or loop qualifies).
    Raises ImportError for ``backend="numba"`` without numba."""
    if backend not in ("numba", "auto"):
        return None
    if not numba_codegen.available():
        if backend == "numba":
            raise ImportError("pf.jit(backend='numba') needs numba (pip install numba)")
        return None
    # the kernels' program: cheap broadcast products are recomputed inside the kernels that
    # read them, and transcendental functions stay NumPy ufuncs between the kernels
    min_size = 0 if backend == "numba" else numba_codegen.AUTO_MIN_ELEMENTS

    def in_kernel(op):  # copies go only to consumers large enough to become kernels
        return numba_codegen.computes(op) and max(
            math.prod(v.aval.shape) for v in list(op.inputs) + [op.out]) >= min_size

    kernel_fn = recompute_broadcasts(fn.copy(), fusible=in_kernel)
    kernel_groups = fuse(kernel_fn, min_size=1, exclude=_kernel_exclusions(kernel_fn))
    numba_groups = {id(g): g for g in kernel_groups if numba_codegen.supports(g, min_size)}
    loops = numba_loops.loop_specs(kernel_fn)  # scan/while loops run whole in numba
    if backend == "auto" and not numba_groups and not loops:
        small = small_program_plan(fn, groups)
        if small is not None:  # a program of small arrays: its per-call cost dominates
            return KernelPlan(*small, [], small=True)
    if not numba_groups and not loops:
        return None
    return KernelPlan(kernel_fn, kernel_groups, numba_groups, loops)


def _kernels_loaded(plan):
    """Whether every kernel of ``plan`` is compiled in this process or the disk cache."""
    return (all(numba_codegen.is_loaded(g) for g in plan.kernels.values())
            and all(numba_loops.is_loaded(spec) for spec in plan.loops))


def _write_kernel_sources(plan):
    """The kernels' sources go to the disk cache (numba compiles from files); whether
    that worked (else a warning says why, and the program stays NumPy code)."""
    try:
        for g in plan.kernels.values():
            numba_codegen.write_source(g)
        for spec in plan.loops:
            numba_loops.write_source(spec)
    except OSError as e:  # the kernel cache is unusable: stay with NumPy code
        why = (f"{e}" if isinstance(e, KernelCacheError) else
               f"cannot write numba kernels to {numba_codegen.cache_dir()} ({e}). Set "
               f"pf.config.cache_dir to a writable folder")
        warnings.warn(f"pf.jit: {why}; running generated NumPy code", RuntimeWarning, stacklevel=3)
        return False
    return True


def compile_program(fn, backend=None, blocking=None, threads=None, tiered=None) -> Executable:
    """An ``Executable`` for ``fn`` (which should be optimized already). Each option that is
    None takes its value from ``pf.config`` (``jit_backend``, ``jit_blocking``,
    ``jit_tiered``).

    Args:
        backend: "numpy", "numba" (numba kernels for arithmetic groups, compiled now;
            raises if numba is missing), "interpret" (the reference interpreter), or
            "auto" (numpy, plus numba for large arithmetic groups when numba is
            importable).
        blocking: run a program whose rows are independent (``ir.passes.blocking``) in
            blocks of rows when its largest value exceeds ``pf.config.jit_block_bytes``
            (default ``BLOCK_BYTES``), and on several threads (also a program that sums
            over its rows: a training step) when the cost model expects a gain.
        threads: the thread count to plan for; None: follow ``pf.get_num_threads()``
            (a program that can run in blocks is then planned again for each thread
            count it runs with).
        tiered: with "auto", kernels not yet in the disk cache compile in a background
            process while the NumPy version runs (``Executable.wait()`` waits for them);
            False compiles them in the first call instead.
    """
    backend = _choose_backend(backend)
    target = choose_target(backend, blocking, tiered)
    tier = target.tier
    if tier == "interpret":
        return Executable(fn, lambda args, keys: evaluate(fn, args, keys=keys or "traced"),
                          None, backend="interpret")
    if target.blocking:
        found = batch_axes(fn, reductions=True)
        if found is not None and threads is None and _may_use_threads(fn, found, tier):
            return ByThreads(fn, tier, target.tiered)
        if found is not None:
            blocked = _compile_blocked(fn, tier, found, 1 if threads is None else threads,
                                       target.tiered)
            if blocked is not None:
                return blocked
    if not target.numpy_arrays:
        return _generate_array_api(fn, target.emitter)
    groups = fuse(fn)
    plan = choose_kernels(fn, groups, tier)
    if plan is None:
        return generate(fn, groups, {}, tier, target.emitter)
    if tier == "auto" and not _kernels_loaded(plan):
        if not _write_kernel_sources(plan):
            return generate(fn, groups, {}, tier, target.emitter)
        if target.tiered:
            return _tiered(generate(fn, groups, {}, tier, target.emitter), plan, tier,
                           target.emitter)
    return generate(plan.fn, plan.groups, plan.kernels, tier, target.emitter,
                    whole_loops=bool(plan.loops))


# The small-program plan: on small arrays a program's time is its per-operation call cost
# (a NumPy ufunc call from the generated code: ~0.3-1 us), so fusing every elementwise chain,
# transcendental functions included, into numba kernels pays even though numba computes
# most of those with scalar libm (measured, 4,096 float64 elements, AVX-512: tanh 8.0
# ns/element in a kernel against NumPy's 0.84, exp 3.1 vs 0.57; sin and cos 7.5 vs 7.5:
# NumPy's float64 sin/cos loops call scalar libm too). The choice is per program, by
# the cost model's constants above plus these:
KERNEL_CALL_SECONDS = 2e-6  # a kernel launch from the generated code (launcher + dispatch)
KERNEL_TRANSCENDENTAL_SECONDS = 8e-9  # a transcendental function in a kernel, per element
# NumPy's own loops for these are scalar libm calls as well (NumPy 2.x, x86-64)
SCALAR_IN_NUMPY = frozenset({("sin", "float64"), ("cos", "float64")})
# Under tiered compilation a small program's kernels start compiling only after this many
# calls of its NumPy version (or at `wait()`): their compile (about a second of a core for
# a few microseconds saved per call) pays only for a program run many times, as a training
# step is; a function called a few times (most of a test suite's) never queues one, so the
# one background worker stays free for the kernels of programs that do run on.
SMALL_PROGRAM_DEFERRED_CALLS = 100
# after loading a compiled kernel, the background thread pauses this many times the load's
# own time: a program's call then shares the GIL with at most one load (W3, ten kernels: the
# call during the switch took 55 ms against 25-29 without pauses)
LOAD_PAUSE = 3


def small_program_plan(fn, groups):
    """``(kernel_fn, kernel_groups, numba_groups)`` fusing ``fn``'s elementwise chains,
    transcendental functions included, into numba kernels when the cost model expects that
    to be faster than the generated NumPy code (a program on small arrays, where each
    operation's call costs more than its arithmetic), else None.

    Example:
        >>> from primflow.ir import parse
        >>> from primflow.ir.passes import fuse
        >>> src = "def f(%0: float64[1]):\\n" + "".join(
        ...     f"    %{i + 1}: float64[1] = sin(%{i})\\n" for i in range(8)) + "    return %8\\n"
        >>> fn = parse(src)
        >>> plan = small_program_plan(fn, fuse(fn))  # None when numba is not installed
        >>> plan is None or len(plan[2]) == 1
        True
    """
    if not numba_codegen.available():
        return None
    kernel_fn = recompute_broadcasts(fn.copy(), fusible=lambda op: numba_codegen.computes(
        op, transcendental=True))
    exclude = frozenset(p for p in TRANSCENDENTAL if numba_codegen.numpy_ufunc(p) is None)
    kernel_groups = fuse(kernel_fn, min_size=1, exclude=exclude)
    numba_groups = {id(g): g for g in kernel_groups
                    if numba_codegen.supports(g, transcendental=True)
                    and _kernel_seconds(g) < _numpy_seconds(g.ops)}
    if not numba_groups:
        return None
    in_kernels = {id(op) for g in numba_groups.values() for op in g.ops}
    planned = (sum(_kernel_seconds(g) for g in numba_groups.values())
               + _numpy_seconds([op for op in kernel_fn.ops if id(op) not in in_kernels]))
    if planned >= _numpy_seconds(fn.ops):
        return None
    return kernel_fn, kernel_groups, numba_groups


def _numpy_seconds(ops):
    """The cost model's time for ``ops`` as generated NumPy code."""
    total = 0.0
    for op in ops:
        if op.prim in VIEWS or op.prim in (CONSTANT, "full", "iota"):
            continue
        total += OP_SECONDS + _op_seconds(op)
        if (op.prim, op.out.aval.dtype.name) in SCALAR_IN_NUMPY:
            total += math.prod(op.out.aval.shape) * (KERNEL_TRANSCENDENTAL_SECONDS
                                                     - TRANSCENDENTAL_SECONDS)
    return total


def _kernel_seconds(group):
    """The cost model's time for ``group`` as one numba kernel."""
    total = KERNEL_CALL_SECONDS
    for op in group.ops:
        if op.prim in TRANSCENDENTAL:
            total += group.size * KERNEL_TRANSCENDENTAL_SECONDS
        elif op.prim not in VIEWS:
            total += group.size * FUSED_SECONDS
    return total


def _kernel_exclusions(fn):
    """The primitives that stay NumPy calls between numba kernels: the transcendental ones,
    except erf when every erf of ``fn`` is float32 (kernels compute it as arithmetic, see
    ``numba_codegen._ERF32_NUMERATOR``; a float64 one in the group would send the whole
    group back to NumPy)."""
    erfs = [op for op in fn.ops if op.prim == "erf"]
    if erfs and all(numba_codegen.computes(op) for op in erfs):
        return frozenset(TRANSCENDENTAL) - {"erf"}
    return TRANSCENDENTAL


def _generate_array_api(fn, emitter):
    """The executable of an array-API backend whose arrays are not NumPy's: source over its
    namespace; over CuPy each fused elementwise group is one generated CUDA kernel
    (reductions stay CuPy calls: the groups are formed without them)."""
    if not cupy_codegen.uses_kernels(get_backend()):
        return generate(fn, fuse(fn), {}, "numpy", emitter)
    groups = fuse(fn, exclude=REDUCTIONS)
    gpu_groups = {id(g): g for g in groups if cupy_codegen.supports(g)}
    return generate(fn, groups, gpu_groups, "numpy", emitter, cupy_codegen)


# ---- row blocking and threads -------------------------------------------------------------

BLOCK_BYTES = 1 << 20  # the largest value of a blocked program: well inside L2
# all the planned buffers of one block (its intermediates): a program with many values
# (a Taylor-mode training step: 40 MB at 512 rows of W3) runs in blocks whose buffers stay
# in the last-level cache, also when two threads each run one (W3, one core: 512-row
# blocks 28.6 ms, 256 rows 26.7, 128 rows 23.7, 64 rows 25.6 CPU ms per step)
WORKSPACE_BYTES = 12 << 20
MAX_BLOCKS = 64  # more blocks cost more in per-call overhead than cache locality saves
# values this many times smaller per row than the largest are computed for all rows at once
# before the blocks (when they can be): one call instead of one per block
EARLY_FRACTION = 8
# The cost model that decides whether a program runs its blocks on several threads
# (one core, float64; fitted within ~2x to W1-W4's programs, measured CPU time):
OP_SECONDS = 1e-6  # the generated code's own (Python, GIL-holding) cost per operation
BLOCK_SECONDS = 30e-6  # handing a block to a thread, and the partial sums' additions
CALL_SECONDS = 100e-6  # waking the pool and waiting for it, once per call
ARITHMETIC_SECONDS = 5e-10  # an arithmetic NumPy operation, per element
FUSED_SECONDS = 2e-11  # the same inside a numba kernel (no memory traffic of its own)
TRANSCENDENTAL_SECONDS = 1.5e-9  # tanh, exp, ... per element (NumPy's SIMD loops)
REDUCTION_SECONDS = 5e-10  # a reduction, per element read
MULTIPLY_ADD_SECONDS = 4e-11  # a matrix product, per multiply-add (OpenBLAS, one core)
MIN_THREAD_GAIN = 1.3  # expected speedup below which a program stays on one thread


def _compile_blocked(fn, backend, found, threads, tiered):
    """A ``BlockedExecutable`` for ``fn`` (``found``: its ``batch_axes`` with reductions)
    when the memory rule (a program with independent rows whose largest value is larger
    than ``BLOCK_BYTES``) or the thread cost model asks for blocks, else None."""
    n, axis_of = found
    per_row = max((_nbytes(v) // n for v, a in axis_of.items() if a is not None), default=0)
    budget = config.jit_block_bytes or BLOCK_BYTES
    memory_blocks = 1 if per_row * n <= budget else -(-per_row * n // budget)
    max_rows = budget // max(per_row, 1)
    workspace = plan_memory(fn, can_write=npc.can_write).nbytes  # (NumPy code's buffers)
    # (only well past the cache: two blocks of a workspace just over it gain no locality
    # and cost a block's overhead, W1's 12.2 MB jet 10% slower; at most MAX_BLOCKS blocks;
    # not for elementwise programs that numba fuses: its kernels stream the rows and hold
    # no intermediates, W1's nested k = 8 grad ran 5-30% slower in four blocks)
    streams = _fuses(backend) and not any(op.prim == "dot_general" for op in fn.ops)
    if workspace > 2 * WORKSPACE_BYTES and not streams:
        memory_blocks = max(memory_blocks, min(MAX_BLOCKS, -(-workspace // WORKSPACE_BYTES)))
        max_rows = min(max_rows, max(n * WORKSPACE_BYTES // workspace, -(-n // MAX_BLOCKS)))
    blocks = _thread_blocks(fn, axis_of, n, threads, memory_blocks, _fuses(backend))
    if blocks is None:  # one thread: blocks only for the memory rule
        threads = 1
        if memory_blocks == 1:
            return None
        # equal blocks (one program, one set of kernels): the largest divisor of n that fits
        rows = next((d for d in range(max(1, max_rows), 0, -1) if n % d == 0), 1)
        if rows == n or n // rows > MAX_BLOCKS:
            return None
    else:
        rows = n // blocks
    n_random = sum(op.prim in IMPURE for op in fn.ops)
    # on several threads, what only the epilogue reads runs beside the blocks
    blocked = block_sums_program(fn, axis_of, n, rows, early_row_bytes=per_row // EARLY_FRACTION,
                                 side=threads > 1 and not n_random)
    prologue, body, epilogue = blocked.prologue, blocked.body, blocked.epilogue
    if n_random and (prologue is None or n_random != sum(op.prim in IMPURE for op in prologue.ops)):
        return None  # every draw must run once, in the prologue, in program order
    if prologue is not None:
        prologue = compile_program(prologue, "numpy", blocking=False)
    if epilogue is not None:
        epilogue = compile_program(epilogue, "numpy", blocking=False)
    side = None if blocked.side is None else compile_program(blocked.side, "numpy", blocking=False)
    inner = compile_program(body, backend, blocking=False, tiered=tiered)
    return BlockedExecutable(fn, prologue, inner, axis_of, n, rows, epilogue=epilogue,
                             row_outputs=blocked.row_outputs, threads=threads, side=side)


def _may_use_threads(fn, found, backend):
    """Whether the cost model would run ``fn`` on more than one thread for some thread
    count up to the cores available (else one executable serves every count)."""
    from ..backends.threads import available_cores

    n, axis_of = found
    fused = _fuses(backend)
    return any(_thread_blocks(fn, axis_of, n, t, 1, fused) is not None
               for t in sorted({2, max(2, available_cores())}))


def _fuses(backend):
    """Whether arithmetic chains will run as numba kernels."""
    if backend not in ("numba", "auto"):
        return False
    return numba_codegen.available()


def _thread_blocks(fn, axis_of, n, threads, memory_blocks, fused=False):
    """How many blocks to run ``fn`` in on ``threads`` threads, or None when the cost model
    expects one thread to be as fast: a multiple of ``threads`` (equal shares), at least
    ``memory_blocks``, dividing ``n``, at most ``MAX_BLOCKS``."""
    if threads <= 1:
        return None
    row_ops = [op for op in fn.ops if axis_of[op.out] is not None
               or any(axis_of[v] is not None for v in op.inputs)]
    work = sum(_op_seconds(op, fused) for op in row_ops)
    serial = work + len(fn.ops) * OP_SECONDS
    for blocks in range(threads * max(1, -(-memory_blocks // threads)), MAX_BLOCKS + 1, threads):
        if n % blocks == 0:
            break
    else:
        return None
    per_block = len(row_ops) * OP_SECONDS + BLOCK_SECONDS
    # the generated code's own cost holds the GIL: it does not run in parallel
    parallel = (max(work / threads + blocks / threads * per_block,
                    blocks * len(row_ops) * OP_SECONDS)
                + (len(fn.ops) - len(row_ops)) * OP_SECONDS + CALL_SECONDS)
    return blocks if serial >= MIN_THREAD_GAIN * parallel else None


def _op_seconds(op, fused=False):
    """A rough one-core time for ``op`` (see the cost model's constants)."""
    if op.prim == "dot_general":
        x_shape = op.inputs[0].aval.shape
        contracted = math.prod(x_shape[d] for d in op.params["contracting"][0])
        return math.prod(op.out.aval.shape) * contracted * MULTIPLY_ADD_SECONDS
    if op.prim in VIEWS or op.prim in (CONSTANT, "full", "iota"):
        return 0.0
    if op.prim in REDUCTIONS:
        return math.prod(op.inputs[0].aval.shape) * REDUCTION_SECONDS
    size = max(math.prod(v.aval.shape) for v in list(op.inputs) + [op.out])
    if op.prim in TRANSCENDENTAL:
        return size * TRANSCENDENTAL_SECONDS
    return size * (FUSED_SECONDS if fused else ARITHMETIC_SECONDS)


def _nbytes(v):
    return v.aval.dtype.itemsize * math.prod(v.aval.shape)


def _load_spaced(groups):
    """Loads the kernels of ``groups`` from the background thread with pauses between them:
    a load holds the GIL for a few milliseconds, so the program's call running meanwhile
    waits that long; paused, each call overlaps at most one load."""
    for g in groups:
        t0 = time.perf_counter()
        numba_codegen.compile_group(g)
        time.sleep(LOAD_PAUSE * (time.perf_counter() - t0))


def _tiered(exe, plan, backend, emitter=npc):
    """``exe`` (the NumPy version) now, and the numba version of ``plan.fn`` (the same
    program prepared for kernels) with its kernels compiled in a background process; the
    executable switches to them at the first call after they are ready.

    numba compiles a kernel in 0.25-0.5 s, so a program with twenty fusion groups would
    spend seconds in its first call; this way the first call costs what generating NumPy
    code costs, and the second core compiles. Kernels already in the disk cache (a second
    process) load at once, in the calling thread (5-8 ms a kernel): loaded by a background
    thread holding the GIL, they made the program's next calls up to twice as slow. The
    compiled ones are loaded by the background thread, after numba's once-per-process
    set-up was done in the calling thread (``numba_codegen.prepare_process``)."""
    owner = get_backend()

    def generate_kernels():
        return generate(plan.fn, plan.groups, plan.kernels, backend, emitter,
                        whole_loops=bool(plan.loops))

    def done(error, spaced=False):
        try:
            if error is None and spaced:
                _load_spaced(plan.kernels.values())
            if error is None and get_backend() is not owner:  # pf.set_backend meanwhile
                pending.generate = (owner, generate_kernels)
            elif error is None:
                pending.result = generate_kernels()
        except Exception as e:  # noqa: BLE001 - reported at the next call, as a warning
            error = f"loading the numba kernels failed: {e!r}"
        pending.error = error
        pending.ready.set()

    def start():
        numba_codegen.prepare_process()
        jobs = numba_codegen.uncompiled(list(plan.kernels.values()), plan.loops)
        if jobs:
            numba_codegen.compile_in_background(jobs, lambda e: done(e, spaced=True))
        else:
            done(None)

    if plan.small:  # worth its compile only for a program that runs many times
        pending = exe._pending = Pending(start, SMALL_PROGRAM_DEFERRED_CALLS)
    else:
        pending = exe._pending = Pending()
        start()
    return exe
