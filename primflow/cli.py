"""The ``primflow`` command.

Usage::

    primflow info
    primflow launch -n N [--] script.py [args]   (or -m module, or primflow ...)
    primflow demo {plate,beam,poisson,burgers,heat} [--quick] [--steps N] [--lbfgs-steps N]
                  [--points N] [--seed S] [--out DIR] [--config {unit,paddlescience}]
                  [--lr LR] [--sampling {uniform,lhs,sobol}] [--device DEVICE] [--threads N]
                  [--no-plots] [--no-progress] [--resume | --overwrite]

    primflow demo {poisson-hd,allen-cahn-hd} [--dim D] [--samples K] [--exact]
                  [--cost-dims D1,D2,...] [common options]
    primflow demo plate-inverse [--noise LEVEL] [--measurements N] [common options]
    primflow demo {fno-burgers,fno-darcy} [--quick | --full] [--epochs N] [--train N]
                  [--test N] [--resolution S] [--width W] [--modes M] [--data-dir DIR]

``python -m primflow ...`` works the same way.

The high-dimensional demos train with the stochastic Taylor Laplacian in the unit d-ball
(``--cost-dims`` times a training step against the exact Laplacian instead);
``plate-inverse`` identifies the plate's rigidity from noisy deflections and prints it;
the ``fno-*`` demos generate (and cache) the FNO paper's data, train a Fourier neural
operator and print the test relative L2 error.

``demo`` trains a physics-informed network for one of the reference problems (Adam, then
L-BFGS), prints the relative L2 error against the exact or independently computed
reference, and writes into ``--out`` (default ``./primflow-demo-NAME``): ``summary.json``
(error, timings, settings), ``history.json``, a checkpoint (``checkpoint.pdparams``, used by
``--resume``) and, when matplotlib is installed, ``prediction.png``, ``reference.png``,
``error.png`` and ``loss.png``. A folder that holds a previous run is never overwritten
silently: ``--resume`` continues that run, ``--overwrite`` replaces it (its checkpoint stays
until the new run writes its first one). One run at a time writes a folder: a second run
given the same ``--out`` stops, naming the process that holds it.

Example:
    >>> from primflow.cli import main
    >>> main(["info"])  # doctest: +ELLIPSIS
    primflow ...
    0
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import math
import os
import sys

EXTRAS = ("scipy", "matplotlib", "tqdm", "rich", "numba", "mpi4py")
DEMOS = ("plate", "beam", "poisson", "burgers", "heat")
# high-dimensional PDEs and inverse problems
HIGH_DIM_DEMOS = ("poisson-hd", "allen-cahn-hd")
DEMOS += HIGH_DIM_DEMOS + ("plate-inverse",)
OPERATOR_DEMOS = ("fno-burgers", "fno-darcy")
DEMOS += OPERATOR_DEMOS


class CLIError(Exception):
    """A user error: printed as ``primflow: error: ...`` with exit status 2."""


def _package_version(name):
    if importlib.util.find_spec(name) is None:
        return None
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "installed"


def cmd_info(args, out=None):
    import primflow as pf
    from primflow.backends import blas, threads
    from primflow.core.dtypes import ALL_DTYPES

    out = out if out is not None else sys.stdout
    backend = pf.backends.get_backend()
    lines = [
        f"primflow {pf.__version__}",
        f"python {sys.version.split()[0]}",
        f"backend: {type(backend).__name__}"
        + (f" (numpy {_package_version('numpy')})" if _package_version("numpy") else ""),
        f"matrix products: {blas.describe()}",
        f"threads: {threads.describe()}",
        f"default dtype: {pf.get_default_dtype()}",
        f"dtypes: {', '.join(d.name for d in ALL_DTYPES)}",
        f"primitives: {len(pf.primitives())}",
        "optional extras:",
    ]
    for name in EXTRAS:
        version = _package_version(name)
        lines.append(f"  {name:<11}{version if version else 'not installed'}")
    print("\n".join(lines), file=out)
    return 0


def _check_out_dir(path, flag="--out"):
    """Creates ``path`` if needed and checks that files can be written there."""
    path = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"{'output' if flag == '--out' else flag} folder {path} exists and is "
                       f"not a folder; pass another {flag}")
    try:
        os.makedirs(path, exist_ok=True)
        # (one name per process: the ranks of a distributed run probe the same folder)
        probe = os.path.join(path, f".primflow-write-test-{os.getpid()}")
        with open(probe, "w", encoding="utf-8") as fh:
            fh.write("ok")
        os.remove(probe)
    except OSError as exc:
        raise CLIError(f"cannot write to {'output' if flag == '--out' else flag} folder "
                       f"{path}: {exc.strerror or exc}; pass a writable {flag}") from exc
    return path


def cmd_demo(args, out=None, err=None):
    import primflow as pf

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    lead = True
    if args.distributed:  # joined first: an error on one rank below then ends every rank
        import primflow.distributed as dist

        dist.init_parallel_env()
        lead = dist.get_rank() == 0
    _check_demo_options(args)
    _check_problem_specific_options(args)
    with _on_device(args.device):  # a device that is not there: refused before the folder
        out_dir = _check_out_dir(f"primflow-demo-{args.name}" if args.out is None
                                 else args.out)
        if args.data_dir is not None:
            _check_out_dir(args.data_dir, "--data-dir")
        lock = _FolderLock(out_dir) if lead else None  # only rank 0 writes the folder
        if lock is not None:
            lock.acquire()
        previous = pf.get_default_dtype()
        pf.set_default_dtype("float64")
        try:
            if lead:
                _check_previous_run(args, out_dir)
            return _run_demo(args, out_dir, out, err)
        except Exception as exc:
            memory = _memory_error(exc)
            if memory is None:
                raise
            sizes = " ".join(f"--{flag.replace('_', '-')} {getattr(args, flag)}" for flag in
                             _SIZE_FLAGS if getattr(args, flag, None) is not None)
            raise CLIError(f"out of memory: this run needs more memory than the machine has "
                           f"({sizes or 'the default sizes'}); pass smaller sizes"
                           + (f" ({memory})" if str(memory) else "")) from None
        finally:
            pf.set_default_dtype(previous)
            if lock is not None:
                lock.release()


@contextlib.contextmanager
def _on_device(device):
    """Runs the block on ``device`` (``--device``; None: where primflow runs now), then
    restores the backend that was in use."""
    import primflow as pf

    backend = pf.get_backend()
    if device is not None:
        try:
            pf.set_device(device)
        except (ValueError, RuntimeError) as exc:  # unknown, no CuPy, no such GPU
            raise CLIError(f"--device {device}: {exc}") from None
    try:
        yield
    finally:
        pf.set_backend(backend)


def _memory_error(exc):
    """The MemoryError that caused ``exc`` (itself, or one it was raised from), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, MemoryError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


# the options that size a run's arrays (named when it runs out of memory)
_SIZE_FLAGS = ("points", "dim", "samples", "measurements", "train", "test", "resolution",
               "width", "modes")


def _check_demo_options(args):
    """Clear errors for the values of the common demo options that cannot work."""
    if args.config is not None and args.name not in ("plate", "plate-inverse"):
        raise CLIError(f"--config applies to the plate demo only (got it for {args.name!r})")
    for flag in ("steps", "lbfgs_steps", "points"):
        value = getattr(args, flag)
        if value is not None and value < (1 if flag == "points" else 0):
            raise CLIError(f"--{flag.replace('_', '-')} must be "
                           f"{'positive' if flag == 'points' else 'non-negative'}, got {value}")
    if args.seed < 0:
        raise CLIError(f"--seed must be a non-negative integer, got {args.seed}")
    if args.threads < 1:
        raise CLIError(f"--threads must be at least 1, got {args.threads}")
    if args.lr is not None and not (args.lr > 0 and math.isfinite(args.lr)):
        raise CLIError(f"--lr must be positive and finite, got {args.lr}")
    if args.out is not None and not args.out.strip():
        raise CLIError("--out must name a folder, got an empty string")
    if args.resume and args.overwrite:
        raise CLIError("--resume and --overwrite exclude each other: --resume continues the "
                       "run in --out, --overwrite replaces it")
    if args.sampling == "sobol" and importlib.util.find_spec("scipy") is None:
        raise CLIError("--sampling sobol needs SciPy (pip install scipy); or use --sampling "
                       "lhs or uniform")


# the files of a finished or interrupted run that a new run would replace
_RUN_FILES = ("checkpoint.pdparams", "summary.json")


def _check_previous_run(args, out_dir):
    """Refuses to start a fresh run over a previous one unless told (``--overwrite``), and
    ``--resume`` without a checkpoint to resume from."""
    checkpoint = os.path.join(out_dir, "checkpoint.pdparams")
    if args.resume:
        if not os.path.exists(checkpoint):
            raise CLIError(f"--resume: there is no checkpoint to continue in {out_dir} "
                           f"(checkpoint.pdparams); run without --resume to start a new run")
        return
    if args.overwrite or (args.name in HIGH_DIM_DEMOS and args.cost_dims):
        return  # (timing a step writes cost.json only)
    found = [name for name in _RUN_FILES if os.path.exists(os.path.join(out_dir, name))]
    if found:
        how = ("pass --overwrite to replace it or another --out" if args.name in OPERATOR_DEMOS
               else "pass --resume to continue it, --overwrite to replace it, or another --out")
        raise CLIError(f"{out_dir} holds a previous run ({', '.join(found)}); {how}")


class _FolderLock:
    """One run at a time per output folder: an exclusive lock on ``.primflow-demo.lock`` in
    it, which names the holder's process id. The operating system releases the lock when
    its process ends however it ends, so the file a killed run leaves behind is simply
    locked again by the next run (a dead holder is never waited for)."""

    NAME = ".primflow-demo.lock"

    def __init__(self, folder):
        self.path = os.path.join(folder, self.NAME)
        self.fd = None

    def acquire(self):
        from primflow.compiler.kernel_cache import try_lock_file

        for _ in range(10):  # (again if the holder deleted the file as we opened it)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not try_lock_file(fd):
                try:
                    holder = os.read(fd, 64).decode("ascii", "replace").strip() or "unknown"
                finally:
                    os.close(fd)
                raise CLIError(f"output folder {os.path.dirname(self.path)} is in use by "
                               f"another primflow run (process {holder}); wait for it to end "
                               f"or pass another --out")
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except OSError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode("ascii"))
                self.fd = fd
                return
            os.close(fd)
        raise CLIError(f"cannot lock the output folder {os.path.dirname(self.path)}")

    def release(self):
        if self.fd is None:
            return
        try:
            os.unlink(self.path)  # while still holding it: the next run creates a new one
        except OSError:
            pass
        os.close(self.fd)  # releases the lock
        self.fd = None


def _run_demo(args, out_dir, out, err):
    from primflow import science

    lead = True
    if args.distributed:  # only rank 0 reports and writes files
        import primflow.distributed as dist

        lead = dist.get_rank() == 0
        if not lead:
            out = err = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the run
            args.no_plots = True
        print(f"data parallel on {dist.get_world_size()} process(es)", file=out)

    if args.name in OPERATOR_DEMOS:
        return _run_operator_demo(args, out_dir, out, err)

    options = {"config": args.config} if args.config else {}
    options.update(_problem_specific_options(args))
    if args.name in HIGH_DIM_DEMOS and args.cost_dims:
        return _cost_vs_dim(args, out_dir, out)
    try:
        problem = science.make_problem(args.name, **options)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    settings = problem.settings(quick=args.quick)
    changes = {"adam_steps": args.steps, "lbfgs_steps": args.lbfgs_steps, "lr": args.lr,
               "sampling": args.sampling}
    if args.points is not None:
        ratio = settings.n_boundary / settings.n_interior
        changes["n_interior"] = args.points
        changes["n_boundary"] = max(1, round(args.points * ratio))
    if args.lr is not None:
        changes["lr_final"] = min(settings.lr_final, args.lr)
    settings = settings.replace(**changes)
    print(problem.describe(), file=out)
    print(f"{'quick' if args.quick else 'full'} run: MLP {problem.dim}-"
          f"{'-'.join([str(settings.hidden)] * settings.depth)}-1 ({settings.activation}), "
          f"{settings.n_interior} collocation points ({settings.sampling}), "
          f"{settings.adam_steps} Adam steps, {settings.lbfgs_steps} L-BFGS iterations, "
          f"seed {args.seed}, float64; output in {out_dir}", file=out, flush=True)
    # a fresh run over a previous one (--overwrite) keeps its checkpoint until the first
    # save replaces it: diverging or interrupted early loses nothing
    checkpoint = os.path.join(out_dir, "checkpoint.pdparams")
    if not lead:
        checkpoint = None
    trainer = science.Trainer(problem, settings, seed=args.seed, checkpoint=checkpoint,
                              resume=args.resume, threads=args.threads, jit=not args.eager,
                              progress=False if args.no_progress else "auto", stream=err,
                              distributed=args.distributed)
    problem.validation_set()  # the reference, computed before the clock matters
    try:
        result = trainer.fit()
    except science.TrainingError as exc:
        raise CLIError(str(exc)) from exc

    target = settings.target
    reached = target is not None and result.error <= target
    summary = {
        "problem": problem.name, "description": problem.describe(), "quick": args.quick,
        "config": getattr(problem, "config", None), "seed": args.seed,
        "status": result.status, "relative_l2": result.error, "target": target,
        "target_reached": reached, "times_s": result.times, "steps": result.steps,
        "settings": {k: v for k, v in vars(settings).items()},
    }
    if lead:
        with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2)
        with open(os.path.join(out_dir, "history.json"), "w", encoding="utf-8") as fh:
            json.dump(result.history, fh)

    if result.status != "ok":
        print(f"primflow: {result.message}", file=err)
    print(f"relative L2 error vs reference: {result.error:.3e}"
          + (f" (target {target:.0e}: {'reached' if reached else 'NOT reached'})"
             if target is not None else ""), file=out)
    print(f"wall time: {result.times['total']:.1f} s (Adam {result.times['adam']:.1f} s, "
          f"L-BFGS {result.times['lbfgs']:.1f} s)", file=out)
    _report_parameters(problem, result, summary, out_dir, out)
    if args.no_plots:
        pass
    elif science.plotting.have_matplotlib():
        paths = science.plotting.save_plots(problem, result.net, result.history, out_dir)
        print("plots: " + ", ".join(os.path.basename(p) for p in paths.values())
              + f" in {out_dir}", file=out)
    else:
        print("plots skipped: matplotlib is not installed (pip install matplotlib, or "
              "primflow[plot])", file=out)
    return 0 if result.status == "ok" else 1


# ---- high-dimensional PDEs and inverse problems ---------------------------------

def _check_problem_specific_options(args):
    high_dim = args.name in HIGH_DIM_DEMOS
    for flag, value, ok in (("--dim", args.dim, high_dim),
                            ("--samples", args.samples, high_dim),
                            ("--exact", args.exact or None, high_dim),
                            ("--cost-dims", args.cost_dims, args.name == "poisson-hd"),
                            ("--noise", args.noise, args.name == "plate-inverse"),
                            ("--measurements", args.measurements, args.name == "plate-inverse"),
                            ("--full", args.full or None, args.name in OPERATOR_DEMOS),
                            ("--epochs", args.epochs, args.name in OPERATOR_DEMOS),
                            ("--train", args.train, args.name in OPERATOR_DEMOS),
                            ("--test", args.test, args.name in OPERATOR_DEMOS),
                            ("--resolution", args.resolution, args.name in OPERATOR_DEMOS),
                            ("--width", args.width, args.name in OPERATOR_DEMOS),
                            ("--modes", args.modes, args.name in OPERATOR_DEMOS),
                            ("--data-dir", args.data_dir, args.name in OPERATOR_DEMOS)):
        if value is not None and not ok:
            raise CLIError(f"{flag} does not apply to the {args.name} demo")
    if getattr(args, "distributed", False) and args.name in (
            HIGH_DIM_DEMOS + OPERATOR_DEMOS + ("plate-inverse",)):
        # their batches carry per-point estimator directions or whole functions, and the
        # data term is not sharded: data parallelism is wired for the forward 2-D PINNs
        raise CLIError(f"--distributed does not apply to the {args.name} demo")
    if args.dim is not None and args.dim < 2:
        raise CLIError(f"--dim must be at least 2 (the exact solution couples neighbouring "
                       f"coordinates), got {args.dim}")
    if args.samples is not None and args.samples < 1:
        raise CLIError(f"--samples must be positive, got {args.samples}")
    if args.noise is not None and not (args.noise >= 0 and math.isfinite(args.noise)):
        raise CLIError(f"--noise must be non-negative and finite, got {args.noise}")
    if args.measurements is not None and args.measurements < 1:
        raise CLIError(f"--measurements must be positive, got {args.measurements}")
    if args.cost_dims is not None:
        args.cost_dims = _parse_dims(args.cost_dims)
    for flag in ("epochs", "train", "test", "resolution", "width", "modes"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            raise CLIError(f"--{flag} must be positive, got {value}")
    if args.name in OPERATOR_DEMOS:
        for flag in ("steps", "lbfgs_steps", "points", "sampling", "resume"):
            if getattr(args, flag):
                raise CLIError(f"--{flag.replace('_', '-')} does not apply to the {args.name} "
                               f"demo (it trains an operator: see --epochs, --train)")


# the operator-learning demos' sizes: (quick, default, --full = the paper's). Measured on
# the 2-core machine at load 5-7: fno-burgers default 4.3e-3 (data 21 s, training 51 s),
# fno-darcy default 2.9e-2 (data 17 s, training 365 s)
# fno-darcy after the FNO2D speed-ups (float32 erf in kernels, 1.75x a step), load 2-4:
# default 2.86e-2 (training 72 s); --full --epochs 160: 1.18e-2 (data 105 s, training
# 3,320 s, 20.8 s an epoch, so about 2.9 h for the paper's 500 epochs; the paper: 1.08e-2)
_OPERATOR_SIZES = {
    "fno-burgers": {
        "quick": dict(train=40, test=10, resolution=64, width=16, modes=8, epochs=5),
        "default": dict(train=500, test=100, resolution=128, width=32, modes=16, epochs=60),
        "full": dict(train=1000, test=100, resolution=1024, width=64, modes=16, epochs=500),
    },
    "fno-darcy": {
        "quick": dict(train=20, test=5, resolution=15, width=8, modes=4, epochs=3),
        "default": dict(train=500, test=100, resolution=29, width=32, modes=8, epochs=40),
        "full": dict(train=1000, test=100, resolution=85, width=32, modes=12, epochs=500),
    },
}


def _run_operator_demo(args, out_dir, out, err):
    """Trains a Fourier neural operator on generated data and reports the test error."""
    import time

    from primflow.science import neural_operators as no
    from primflow.science import plotting

    if args.quick and args.full:
        raise CLIError("--quick and --full exclude each other")
    size = dict(_OPERATOR_SIZES[args.name]["quick" if args.quick else
                                           "full" if args.full else "default"])
    for key in size:
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    epochs = size["epochs"]
    settings = no.OperatorSettings(epochs=epochs, step_epochs=max(1, epochs // 5),
                                   lr=args.lr or 1e-3, normalize=args.name == "fno-darcy",
                                   seed=args.seed)
    cache = args.data_dir
    log = (lambda line: print(line, file=err, flush=True))
    t0 = time.perf_counter()
    try:
        if args.name == "fno-burgers":
            data = no.burgers_dataset(size["train"], size["test"], s=size["resolution"],
                                      seed=args.seed, cache_dir=cache, log=log)
            model = no.FNO1D(modes=size["modes"], width=size["width"])
            what = (f"1-D Burgers (nu = 0.1): u(., 0) -> u(., 1) on {size['resolution']} points")
        else:
            data = no.darcy_dataset(size["train"], size["test"], s=size["resolution"],
                                    seed=args.seed, cache_dir=cache, log=log)
            model = no.FNO2D(modes1=size["modes"], modes2=size["modes"], width=size["width"])
            what = (f"2-D Darcy flow: a -> u on a {size['resolution']} x {size['resolution']} "
                    f"grid")
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    data_time = time.perf_counter() - t0
    print(f"Fourier neural operator, {what}", file=out)
    print(f"{'quick' if args.quick else 'full (paper)' if args.full else 'default'} run: "
          f"{size['train']} training / {size['test']} test samples, 4 Fourier layers, width "
          f"{size['width']}, {size['modes']} modes, {epochs} epochs (Adam, lr "
          f"{settings.lr:g} halved every {settings.step_epochs}, batch 20), float32; data "
          f"ready in {data_time:.1f} s; output in {out_dir}", file=out, flush=True)
    try:
        result = no.train_operator(model, data, settings.replace(
            batch_size=min(settings.batch_size, size["train"])),
            progress=not args.no_progress, log=log, threads=args.threads,
            evaluate_every=max(1, epochs // 10))
    except FloatingPointError as exc:
        raise CLIError(str(exc)) from exc
    summary = {"problem": args.name, "sizes": size, "seed": args.seed,
               "test_relative_l2": result.test_error, "times_s": dict(result.times,
                                                                       data=data_time),
               "history": result.history}
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2)
    print(f"test relative L2 error: {result.test_error:.3e}", file=out)
    print(f"training time: {result.times['train']:.1f} s", file=out)
    if not args.no_plots and plotting.have_matplotlib():
        path = plotting.plot_operator_samples(os.path.join(out_dir, "prediction.png"),
                                              data[2], data[3], result.predictions, args.name)
        print(f"plot: {path}", file=out)
    return 0


def _parse_dims(text):
    try:
        dims = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CLIError(f"--cost-dims takes comma-separated integers, got {text!r}") from None
    if not dims or min(dims) < 2:
        raise CLIError(f"--cost-dims needs dimensions >= 2, got {text!r}")
    return dims


def _problem_specific_options(args):
    options = {}
    if args.name in HIGH_DIM_DEMOS:
        if args.dim is not None:
            options["dim"] = args.dim
        if args.samples is not None:
            options["samples"] = args.samples
        if args.exact:
            options["method"] = "collapsed"
    if args.name == "plate-inverse":
        if args.noise is not None:
            options["noise"] = args.noise
        if args.measurements is not None:
            options["n_measurements"] = args.measurements
    return options


def _report_parameters(problem, result, summary, out_dir, out):
    """Prints and records an inverse problem's identified PDE coefficients."""
    if not result.parameters:
        return
    truth = getattr(problem, "true_parameters", lambda: {})()
    summary["parameters"] = result.parameters
    summary["true_parameters"] = truth
    for name, value in result.parameters.items():
        line = f"identified {name} = {value:.6g}"
        if name in truth:
            rel = abs(value - truth[name]) / abs(truth[name])
            summary.setdefault("parameter_errors", {})[name] = rel
            line += f" (true {truth[name]:.6g}, relative error {rel:.2e})"
        print(line, file=out)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=2)


_COST_MEMORY_LIMIT = 2 ** 30  # bytes of the directions tensor a timed step may allocate


def _cost_vs_dim(args, out_dir, out):
    """Times a training step against the dimension for the stochastic and the exact
    Laplacian; writes cost.json and (with matplotlib) cost.png."""
    from primflow.science import plotting
    from primflow.science.problems.highdim import step_cost
    from primflow.science.threads import blas_threads

    samples = args.samples or 16
    points = args.points or 100
    rows = []
    print(f"time per training step (compiled, {points} points, 128x3 tanh MLP, float64, "
          f"{args.threads} BLAS thread(s)):", file=out)
    print(f"{'d':>6} {'stochastic (' + str(samples) + ')':>18} {'exact (collapsed)':>18}",
          file=out)
    with blas_threads(args.threads):
        for d in args.cost_dims:
            row = {"dim": d}
            for method in ("stochastic", "collapsed"):
                directions = samples if method == "stochastic" else d
                # the first Taylor coefficient alone holds points x directions x d values
                if points * directions * d * 8 > _COST_MEMORY_LIMIT:
                    row[method] = None
                else:
                    row[method] = step_cost(d, method, samples=samples, points=points)
            rows.append(row)
            cells = [f"{1e3 * row[m]:>15.1f} ms" if row[m] is not None else
                     f"{'(> 1 GB, skipped)':>18}" for m in ("stochastic", "collapsed")]
            print(f"{d:>6} {cells[0]} {cells[1]}", file=out, flush=True)
    with open(os.path.join(out_dir, "cost.json"), "w", encoding="utf-8") as fh:
        json.dump({"samples": samples, "points": points, "seconds_per_step": rows}, fh,
                  indent=2)
    if not args.no_plots and plotting.have_matplotlib():
        path = plotting.plot_cost(os.path.join(out_dir, "cost.png"), rows, samples)
        print(f"plot: {path}", file=out)
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        raise CLIError(message)


def build_parser():
    parser = _Parser(prog="primflow",
                     description="primflow: differentiable programming for scientific "
                                 "computing")
    sub = parser.add_subparsers(dest="command", metavar="{info,demo,launch}", parser_class=_Parser)
    sub.add_parser("info", help="version, backend, dtypes, primitives and optional extras")
    demo = sub.add_parser(
        "demo", help="train a PINN on a reference problem and compare with its solution",
        description="Train a physics-informed network on a reference problem (Adam, then "
                    "L-BFGS) and report the relative L2 error against the reference.")
    demo.add_argument("name", metavar="NAME",
                      help=f"the problem: one of {', '.join(DEMOS)}")
    demo.add_argument("--quick", action="store_true",
                      help="a small configuration that finishes in well under a minute")
    demo.add_argument("--steps", type=int, help="Adam steps (default: the problem's)")
    demo.add_argument("--lbfgs-steps", type=int, help="L-BFGS iterations")
    demo.add_argument("--points", type=int, help="interior collocation points")
    demo.add_argument("--seed", type=int, default=0,
                      help="random seed, a non-negative integer (default 0)")
    demo.add_argument("--out", metavar="DIR",
                      help="output folder (default ./primflow-demo-NAME); one that holds a "
                           "previous run needs --resume or --overwrite")
    demo.add_argument("--config", choices=("unit", "paddlescience"),
                      help="plate only: the unit square (default) or PaddleScience's "
                           "a=2, b=3 steel plate")
    demo.add_argument("--lr", type=float, help="initial Adam learning rate")
    demo.add_argument("--sampling", choices=("uniform", "lhs", "sobol"),
                      help="collocation sampling (sobol needs scipy)")
    demo.add_argument("--device", metavar="DEVICE",
                      help="where to train: cpu (default), gpu or gpu:N (needs CuPy and an "
                           "NVIDIA GPU: pip install 'primflow[gpu]')")
    demo.add_argument("--threads", type=int, default=1,
                      help="BLAS threads while training (default 1, the fastest for these "
                           "small networks)")
    demo.add_argument("--eager", action="store_true",
                      help="run the training step eagerly instead of compiling it with pf.jit "
                           "(to compare)")
    demo.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    demo.add_argument("--resume", action="store_true",
                      help="continue the run whose checkpoint is in --out")
    demo.add_argument("--overwrite", action="store_true",
                      help="start a new run in an --out that holds a previous one (without "
                           "--resume or --overwrite such a folder is refused); the old "
                           "checkpoint stays until the new run writes its first one")
    # high-dimensional PDEs and inverse problems
    demo.add_argument("--dim", type=int,
                      help="poisson-hd / allen-cahn-hd: the dimension (default 100)")
    demo.add_argument("--samples", type=int,
                      help="poisson-hd / allen-cahn-hd: random directions per point of the "
                           "stochastic Laplacian (default 16)")
    demo.add_argument("--exact", action="store_true",
                      help="poisson-hd / allen-cahn-hd: the exact (collapsed Taylor) Laplacian "
                           "instead of the stochastic estimate, to compare")
    demo.add_argument("--cost-dims", metavar="D1,D2,...",
                      help="poisson-hd: instead of training, time a training step at these "
                           "dimensions with the stochastic and the exact Laplacian "
                           "(cost.json, cost.png)")
    demo.add_argument("--noise", type=float,
                      help="plate-inverse: measurement noise relative to the RMS deflection "
                           "(default 0.01)")
    demo.add_argument("--measurements", type=int,
                      help="plate-inverse: measured points (default 200)")
    demo.add_argument("--full", action="store_true",
                      help="fno-burgers / fno-darcy: the paper's sizes (1000 training samples, "
                           "s = 1024 / 85, 500 epochs; hours on 2 cores)")
    demo.add_argument("--epochs", type=int, help="fno-*: training epochs")
    demo.add_argument("--train", type=int, help="fno-*: training samples")
    demo.add_argument("--test", type=int, help="fno-*: test samples")
    demo.add_argument("--resolution", type=int, help="fno-*: grid points (per side in 2-D)")
    demo.add_argument("--width", type=int, help="fno-*: channels of the Fourier layers")
    demo.add_argument("--modes", type=int, help="fno-*: Fourier modes kept per axis")
    demo.add_argument("--data-dir", metavar="DIR",
                      help="fno-*: where generated data sets are cached (default "
                           "~/.cache/primflow/datasets)")
    demo.add_argument("--distributed", action="store_true",
                      help="data parallel over the processes of `primflow launch -n N "
                           "primflow demo ...`: collocation points sharded, gradients "
                           "reduced; rank 0 reports and writes the output")
    # primflow.distributed: start N processes of a script under MPI
    launch = sub.add_parser(
        "launch", help="run a script on N processes under MPI (mpiexec)",
        description="Run `script.py args` (or `-m module args`, or `primflow ...`) on N "
                    "processes under MPI: mpiexec -n N python -m mpi4py script.py args.")
    from primflow.distributed.launch import add_arguments

    add_arguments(launch)
    return parser


def cmd_launch(args):
    from primflow.distributed import launch

    try:
        return launch.run(launch.process_count(args.nprocs, args.devices),
                          launch.program_of(args))
    except launch.LaunchError as exc:
        raise CLIError(str(exc)) from exc


def _in_parallel_world():
    if "primflow.distributed" not in sys.modules:
        return False
    import primflow.distributed as dist

    return dist.is_initialized() and dist.get_world_size() > 1


def main(argv=None):
    """Runs the command line; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        if args.command == "info":
            return cmd_info(args)
        if args.command == "launch":
            return cmd_launch(args)
        if args.name not in DEMOS:
            raise CLIError(f"unknown demo {args.name!r}; valid demos: {', '.join(DEMOS)}")
        return cmd_demo(args)
    except CLIError as exc:
        if _in_parallel_world():
            raise  # the abort hook prints it and ends every rank (they would wait forever)
        print(f"primflow: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("primflow: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
