"""The ``primflow`` command.

Usage::

    primflow info
    primflow launch -n N [--] script.py [args]   (or -m module, or primflow ...)
    primflow demo {plate,beam,poisson,burgers,heat} [--quick] [--steps N] [--lbfgs-steps N]
                  [--points N] [--seed S] [--out DIR] [--config {unit,paddlescience}]
                  [--lr LR] [--sampling {uniform,lhs,sobol}] [--threads N] [--no-plots]
                  [--no-progress] [--resume]

``python -m primflow ...`` works the same way.

``demo`` trains a physics-informed network for one of the reference problems (Adam, then
L-BFGS), prints the relative L2 error against the exact or independently computed
reference, and writes into ``--out`` (default ``./primflow-demo-NAME``): ``summary.json``
(error, timings, settings), ``history.json``, a checkpoint (``checkpoint.pdparams``, used by
``--resume``) and, when matplotlib is installed, ``prediction.png``, ``reference.png``,
``error.png`` and ``loss.png``.

Example:
    >>> from primflow.cli import main
    >>> main(["info"])  # doctest: +ELLIPSIS
    primflow ...
    0
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import sys

EXTRAS = ("scipy", "matplotlib", "tqdm", "rich", "numba", "mpi4py")
DEMOS = ("plate", "beam", "poisson", "burgers", "heat")


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


def _check_out_dir(path):
    """Creates ``path`` if needed and checks that files can be written there."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"output folder {path} exists and is not a folder; pass another --out")
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, ".primflow-write-test")
        with open(probe, "w", encoding="utf-8") as fh:
            fh.write("ok")
        os.remove(probe)
    except OSError as exc:
        raise CLIError(f"cannot write to output folder {path}: {exc.strerror or exc}; pass a "
                       f"writable --out") from exc
    return path


def cmd_demo(args, out=None, err=None):
    import primflow as pf

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    if args.config is not None and args.name != "plate":
        raise CLIError(f"--config applies to the plate demo only (got it for {args.name!r})")
    for flag in ("steps", "lbfgs_steps", "points"):
        value = getattr(args, flag)
        if value is not None and value < (1 if flag == "points" else 0):
            raise CLIError(f"--{flag.replace('_', '-')} must be "
                           f"{'positive' if flag == 'points' else 'non-negative'}, got {value}")
    if args.threads < 1:
        raise CLIError(f"--threads must be at least 1, got {args.threads}")
    if args.lr is not None and not args.lr > 0:
        raise CLIError(f"--lr must be positive, got {args.lr}")
    out_dir = _check_out_dir(args.out or f"primflow-demo-{args.name}")

    previous = pf.get_default_dtype()
    pf.set_default_dtype("float64")
    try:
        return _run_demo(args, out_dir, out, err)
    finally:
        pf.set_default_dtype(previous)


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

    options = {"config": args.config} if args.config else {}
    problem = science.make_problem(args.name, **options)
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
    checkpoint = os.path.join(out_dir, "checkpoint.pdparams")
    if not args.resume and os.path.exists(checkpoint) and lead:
        os.remove(checkpoint)
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
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    demo.add_argument("--out", metavar="DIR", help="output folder (default "
                                                   "./primflow-demo-NAME)")
    demo.add_argument("--config", choices=("unit", "paddlescience"),
                      help="plate only: the unit square (default) or PaddleScience's "
                           "a=2, b=3 steel plate")
    demo.add_argument("--lr", type=float, help="initial Adam learning rate")
    demo.add_argument("--sampling", choices=("uniform", "lhs", "sobol"),
                      help="collocation sampling (sobol needs scipy)")
    demo.add_argument("--threads", type=int, default=1,
                      help="BLAS threads while training (default 1, the fastest for these "
                           "small networks)")
    demo.add_argument("--eager", action="store_true",
                      help="run the training step eagerly instead of compiling it with pf.jit "
                           "(to compare)")
    demo.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    demo.add_argument("--no-progress", action="store_true", help="no progress bar")
    demo.add_argument("--resume", action="store_true",
                      help="continue from the checkpoint in --out")
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

    program = list(args.program)
    if program and program[0] == "--":
        program = program[1:]
    try:
        return launch.run(args.nprocs, program)
    except launch.LaunchError as exc:
        raise CLIError(str(exc)) from exc


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
        print(f"primflow: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("primflow: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
