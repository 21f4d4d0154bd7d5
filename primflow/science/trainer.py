"""The PINN training loop: Adam, then L-BFGS, with validation, progress and checkpoints.

``Trainer(problem, settings).fit()`` trains an MLP for ``problem`` and returns a
:class:`TrainResult` with the final relative L2 error against the problem's reference,
the loss history and the timings.

* **Phases**: Adam with an exponentially decaying learning rate (``lr`` -> ``lr_final``),
  optionally resampling the collocation points, then L-BFGS (strong-Wolfe line search)
  on a fixed set, in chunks of ``lbfgs_chunk`` iterations.
* **Mixed precision** (``settings.amp``): the Adam phase under ``pf.amp.auto_cast``, with
  a ``pf.amp.GradScaler`` for float16 (a step whose gradients overflow is skipped); L-BFGS
  stays in the network's dtype (its line search compares losses more finely than 16-bit
  values resolve; PyTorch's GradScaler does not support closure optimizers either).
* **Loss**: the weighted sum of the problem's terms (``settings.weights``), plus a
  ``"data"`` term when the problem has ``measurements`` (see ``problems.Measurements``).
* **Inverse problems**: the problem's ``pde_parameters()`` (trainable PDE coefficients)
  are optimized with the network, checkpointed, recorded in ``history["parameters"]`` at
  every validation and returned in ``TrainResult.parameters``.
* **Refinement**: with ``rar_points`` and ``rar_rounds`` set, the L-BFGS phase runs in
  ``rar_rounds`` stages, each starting by adding the ``rar_points`` points of largest PDE
  residual among ``rar_candidates`` fresh samples (residual-based adaptive refinement).
* **Progress**: tqdm or rich when installed, else a one-line text bar with loss, validation
  error and ETA (``progress=False`` silences it).
* **Validation**: the relative L2 error on the problem's grid every ``validate_every`` Adam
  steps and after every L-BFGS chunk.
* **Checkpoints**: ``checkpoint=PATH`` saves the model and optimizer state with
  ``pf.save`` every ``checkpoint_every`` steps and at the end of each phase, atomically;
  ``resume=True`` continues from it (an Adam-phase checkpoint resumes bit for bit).
* **NaN**: a non-finite loss stops training with a clear message; the parameters go back to
  the last finite-loss state and the checkpoint on disk is never overwritten by a bad one.

Example:
    >>> import primflow as pf
    >>> from primflow.science import Trainer
    >>> from primflow.science.problems import Beam
    >>> p = Beam()
    >>> s = p.settings(quick=True).replace(adam_steps=20, lbfgs_steps=0)
    >>> result = Trainer(p, s, progress=False).fit()
    >>> result.status, len(result.history["loss"])
    ('ok', 20)
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import time

import primflow as pf
import primflow.distributed as dist

from . import networks
from .problems.base import Problem, Settings
from .threads import blas_threads

__all__ = ["Progress", "TrainResult", "Trainer", "TrainingError"]


class TrainingError(RuntimeError):
    """Training could not go on (a non-finite loss, an unusable checkpoint)."""


@dataclasses.dataclass
class TrainResult:
    """What :meth:`Trainer.fit` returns.

    Attributes:
        error: final relative L2 error on the validation grid.
        status: ``"ok"``, ``"nan"`` (stopped on a non-finite loss) or ``"stopped"`` (by
            the callback).
        message: a human-readable summary (the reason when ``status != "ok"``).
        history: ``loss`` ([step, value] pairs), ``terms`` (name -> values), ``val``
            ([step, relative L2] pairs), ``phase_start`` (phase -> first step).
        times: seconds per phase and in all.
        steps: Adam steps and L-BFGS iterations done.
        net: the trained network.
        checkpoint: the checkpoint path (None without checkpoints).
        parameters: the problem's trainable PDE coefficients at the end (name -> value in
            physical units; empty for a forward problem).
    """

    error: float
    status: str
    message: str
    history: dict
    times: dict
    steps: dict
    net: object = None
    checkpoint: str | None = None
    parameters: dict = dataclasses.field(default_factory=dict)


# ---- progress bars -------------------------------------------------------------------------

def _fmt_time(seconds):
    if seconds is None or not math.isfinite(seconds):
        return "?"
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


class Progress:
    """A progress bar with a text postfix and ETA: tqdm or rich when installed (``kind=
    "auto"``), else a plain one-line bar; ``kind=None`` prints nothing.

    Example:
        >>> import io
        >>> from primflow.science.trainer import Progress
        >>> bar = Progress(kind="text", stream=io.StringIO())
        >>> bar.start("adam", 10); bar.update(10, "loss 1e-3"); bar.close()
    """

    def __init__(self, kind="auto", stream=None):
        self.stream = stream if stream is not None else sys.stderr
        if kind == "auto":
            kind = "tqdm" if _importable("tqdm") else ("rich" if _importable("rich") else
                                                        "text")
        self.kind = kind
        self._bar = None

    def start(self, desc, total):
        self.desc, self.total, self.n = desc, max(int(total), 0), 0
        self.t0 = time.perf_counter()
        self._last_draw = 0.0
        self._last_pct = -1
        if self.kind == "tqdm":
            from tqdm import tqdm
            self._bar = tqdm(total=self.total, desc=desc, file=self.stream, dynamic_ncols=True,
                             leave=True)
        elif self.kind == "rich":
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
            from rich.progress import Progress as RichProgress
            self._bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                     TextColumn("{task.completed}/{task.total}"),
                                     TimeElapsedColumn(), TimeRemainingColumn(),
                                     TextColumn("{task.fields[post]}"),
                                     console=Console(file=self.stream))
            self._bar.start()
            self._task = self._bar.add_task(desc, total=self.total, post="")

    def update(self, n, postfix=""):
        """Sets the count to ``n`` (absolute) with a postfix text."""
        n = min(int(n), self.total) if self.total else int(n)
        if self.kind == "tqdm":
            self._bar.set_postfix_str(postfix, refresh=False)
            self._bar.update(n - self._bar.n)
        elif self.kind == "rich":
            self._bar.update(self._task, completed=n, post=postfix)
        elif self.kind == "text":
            self.n = n
            self._draw_text(postfix)
        self.n = n

    def _draw_text(self, postfix, final=False):
        now = time.perf_counter()
        elapsed = now - self.t0
        frac = self.n / self.total if self.total else 1.0
        eta = elapsed * (1 - frac) / frac if frac > 0 else None
        width = 20
        filled = int(width * frac)
        line = (f"{self.desc:>5} {self.n:>6}/{self.total:<6} [{'#' * filled}"
                f"{'.' * (width - filled)}] {postfix}  {_fmt_time(elapsed)}<{_fmt_time(eta)}")
        tty = getattr(self.stream, "isatty", lambda: False)()
        if tty:
            if final or now - self._last_draw > 0.2:
                self.stream.write("\r" + line[:160].ljust(100))
                self.stream.flush()
                self._last_draw = now
        else:  # logs: a line per 10 %
            pct = int(10 * frac)
            if final or pct > self._last_pct:
                self.stream.write(line + "\n")
                self.stream.flush()
                self._last_pct = pct

    def close(self, postfix=""):
        if self.kind == "tqdm" and self._bar is not None:
            if postfix:
                self._bar.set_postfix_str(postfix, refresh=False)
            self._bar.close()
        elif self.kind == "rich" and self._bar is not None:
            self._bar.stop()
        elif self.kind == "text":
            tty = getattr(self.stream, "isatty", lambda: False)()
            if tty:
                self._draw_text(postfix, final=True)
                self.stream.write("\n")
                self.stream.flush()
            elif self._last_pct < 10:
                self._draw_text(postfix, final=True)
        self._bar = None


def _importable(name):
    try:
        __import__(name)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not usable"
        return False


# ---- the trainer ---------------------------------------------------------------------------

def _is_finite(x):
    return isinstance(x, float) and math.isfinite(x)


class Trainer:
    """Trains a PINN for ``problem`` (see the module docstring).

    Args:
        problem: a :class:`~primflow.science.problems.Problem`.
        settings: :class:`~primflow.science.problems.Settings` (default:
            ``problem.settings(quick)``).
        quick: use the problem's quick settings when ``settings`` is None.
        seed: seeds the network's initialisation and the collocation points.
        checkpoint: path of the checkpoint file (None: no checkpoints).
        checkpoint_every: Adam steps between checkpoints (default: ``validate_every``).
        resume: continue from ``checkpoint`` when it exists.
        progress: ``"auto"`` (tqdm/rich/text), ``"text"``, ``True`` (= auto) or ``False``.
        log: function taking a line of text (default: print to stderr; ``None`` silences).
        stream: where progress bars go (default stderr).
        threads: BLAS threads while training (default 1: the small matrices of a PINN run
            fastest on one thread, see ``primflow.science.threads``); None leaves BLAS alone.
        callback: called after every Adam step and every L-BFGS chunk with a dict
            (``phase``, ``step``, ``loss``, ``val``: the latest validation error or None);
            returning True stops training (status ``"stopped"``), e.g. to train in pieces.
    """

    def __init__(self, problem: Problem, settings: Settings | None = None, *, quick=False,
                 seed=0, checkpoint=None, checkpoint_every=None, resume=False,
                 progress="auto", log="stderr", stream=None, callback=None, threads=1,
                 jit=True, distributed=False):
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be a primflow.science Problem, got "
                            f"{type(problem).__name__}")
        self.problem = problem
        self.settings = settings if settings is not None else problem.settings(quick)
        self.seed = int(seed)
        self.checkpoint = None if checkpoint is None else os.fspath(checkpoint)
        self.checkpoint_every = checkpoint_every or self.settings.validate_every
        self.resume = resume
        self.stream = stream if stream is not None else sys.stderr
        if progress is True:
            progress = "auto"
        self.progress_kind = progress if progress else None
        if log == "stderr":
            self.log = lambda line: print(line, file=self.stream, flush=True)
        else:
            self.log = log if log is not None else (lambda line: None)
        self.net = None
        self.callback = callback
        self.threads = threads
        self.jit = bool(jit)  # compile the loss-and-gradient step with pf.jit
        # data parallel over the processes of primflow launch: replicated parameters,
        # collocation points sharded (their Partial gradients are reduced by the tape).
        # pf.jit does not stage distributed tensors, so the step runs eagerly.
        self.distributed = bool(distributed)
        if self.distributed:
            self.jit = False
        self._mesh = None
        self._step_fn = None
        self._scaled_step_fn = None  # (float16 mixed precision: the loss times the scale)
        self._check_settings()

    def _check_settings(self):
        s = self.settings
        for name in ("hidden", "depth", "n_interior"):
            v = getattr(s, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"settings.{name} must be a positive int, got {v!r}")
        for name in ("adam_steps", "lbfgs_steps", "n_boundary", "resample_every",
                     "rar_points", "rar_rounds", "lbfgs_points"):
            v = getattr(s, name)
            if not isinstance(v, int) or v < 0:
                raise ValueError(f"settings.{name} must be a non-negative int, got {v!r}")
        if s.rar_points and s.rar_candidates < s.rar_points:
            raise ValueError(f"settings.rar_candidates ({s.rar_candidates}) must be at least "
                             f"rar_points ({s.rar_points})")
        for name in ("input_lr_scale", "output_lr_scale"):
            v = getattr(s, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"settings.{name} must be a positive number, got {v!r}")
        if not (s.lr > 0 and s.lr_final > 0):
            raise ValueError(f"learning rates must be positive, got lr={s.lr}, "
                             f"lr_final={s.lr_final}")
        if s.amp not in (None, "float16", "bfloat16"):
            raise ValueError(f"settings.amp must be None, 'float16' or 'bfloat16', got "
                             f"{s.amp!r}")

    # ---- pieces ----------------------------------------------------------------------------
    def build_net(self):
        pf.seed(self.seed)
        s = self.settings
        net = networks.make_mlp(self.problem.dim, 1, s.hidden, s.depth, s.activation,
                                self.problem.dtype)
        if self.distributed:
            dist.shard_layer(net, self._data_mesh())
        return net

    def _data_mesh(self):
        if self._mesh is None:
            self._mesh = dist.ProcessMesh(list(range(dist.get_world_size())), ["dp"])
        return self._mesh

    def batch(self, index):
        """The collocation points of resampling round ``index`` (deterministic)."""
        s = self.settings
        points = self.problem.sample(s.n_interior, s.n_boundary, s.sampling,
                                     seed=self.seed * 100003 + index)
        if self.distributed:  # every process drew the same points: each keeps its block
            points = {k: dist.shard_tensor(v, self._data_mesh(), [dist.Shard(0)])
                      for k, v in points.items()}
        return points

    def loss_terms(self, net, batch):
        problem = self.problem
        model = problem.model(net)
        terms = problem.losses(model, batch)
        if problem.measurements is not None:  # an inverse problem's data term
            terms = dict(terms, data=problem.measurements.loss(model))
        return terms

    def loss_and_grads(self, net, params, batch, amp=None, loss_scale=None):
        """``(loss, terms)`` at ``batch`` with the parameters' gradients stored in ``.grad``.

        With ``jit`` the whole step (the PDE operators' Taylor passes, the loss and its
        gradient) is traced once per batch shape and runs as one compiled program;
        otherwise it runs eagerly on the tape. ``amp``: compute under
        ``pf.amp.auto_cast(dtype=amp)``; ``loss_scale``: the gradients are those of
        ``loss * loss_scale`` (a ``GradScaler``'s scale; ``loss`` is returned unscaled).
        """
        mixed = pf.amp.auto_cast(dtype=amp) if amp else contextlib.nullcontext()
        if not self.jit:
            with mixed:
                terms = self.loss_terms(net, batch)
                loss = self.total_loss(terms)
            (loss if loss_scale is None else loss * loss_scale).backward()
            if self.distributed:
                dist.reduce_gradients(params)  # the gradients' sums over ranks, bucketed
            return loss, terms
        if loss_scale is not None:
            if self._scaled_step_fn is None:
                def scaled_objective(b, scale):
                    terms = self.loss_terms(net, b)
                    loss = self.total_loss(terms)
                    return loss * scale, (loss, terms)

                self._scaled_step_fn = pf.jit(pf.value_and_grad(
                    scaled_objective, None, params, has_aux=True))
            with mixed:  # (pf.jit keys its programs on the auto_cast state)
                (_, (loss, terms)), grads = self._scaled_step_fn(
                    batch, pf.to_tensor(loss_scale, dtype="float32"))
        else:
            if self._step_fn is None:
                def objective(b):
                    terms = self.loss_terms(net, b)
                    return self.total_loss(terms), terms

                self._step_fn = pf.jit(pf.value_and_grad(objective, None, params,
                                                         has_aux=True))
            with mixed:
                (loss, terms), grads = self._step_fn(batch)
        for p, g in zip(params, grads):
            p.grad = g if p.grad is None else p.grad + g
        return loss, terms

    def total_loss(self, terms):
        weights = self.settings.weights or {}
        unknown = set(weights) - set(terms)
        if unknown:
            raise ValueError(f"loss weights name unknown terms {sorted(unknown)}; the problem's "
                             f"terms are {sorted(terms)}")
        total = None
        for name, value in terms.items():
            w = float(weights.get(name, 1.0))
            term = value * w if w != 1.0 else value
            total = term if total is None else total + term
        return total

    def _adam_groups(self, net, params):
        """``params`` as Adam parameter groups: the first and last Linear layers with their
        learning-rate multipliers (``input_lr_scale``, ``output_lr_scale``), the rest at 1.
        The groups keep ``params``' order, so checkpoints index the same parameters."""
        s = self.settings
        if s.input_lr_scale == 1.0 and s.output_lr_scale == 1.0:
            return params
        linears = [m for m in net.sublayers() if isinstance(m, pf.nn.Linear)]
        if not linears:
            raise ValueError(f"settings.input_lr_scale / output_lr_scale scale the first and "
                             f"last pf.nn.Linear layers, but {type(net).__name__} has none; "
                             f"leave them at 1")
        scale = {}
        for layer, value in ((linears[0], s.input_lr_scale), (linears[-1], s.output_lr_scale)):
            for p in layer.parameters():
                scale[id(p)] = float(value) * scale.get(id(p), 1.0)
        groups = []
        for p in params:  # consecutive parameters with the same multiplier share a group
            value = scale.get(id(p), 1.0)
            if groups and groups[-1]["learning_rate"] == value:
                groups[-1]["params"].append(p)
            else:
                groups.append({"params": [p], "learning_rate": value})
        return groups

    def lr_at(self, step):
        s = self.settings
        if s.adam_steps <= 1:
            return s.lr
        return s.lr * (s.lr_final / s.lr) ** (step / (s.adam_steps - 1))

    # ---- checkpoints -----------------------------------------------------------------------
    def _save(self, net, opt, phase, step, history):
        if self.checkpoint is None:
            return
        state = {"format": "primflow.science.checkpoint/1", "problem": self.problem.name,
                 "phase": phase, "step": int(step), "seed": self.seed,
                 "model": net.state_dict(), "optimizer": opt.state_dict(),
                 "history": _plain_history(history), "extra_points": list(self._extra),
                 "pde_parameters": {k: v.detach() for k, v in
                                    self.problem.pde_parameters().items()}}
        if self.distributed:  # replicated parameters and states: each rank has the values
            state = _gathered(state)
        # pf.save is atomic, through a temporary file of its own per writer (a fixed
        # temporary name made two runs sharing a folder crash on each other's file)
        pf.save(state, self.checkpoint)
        self._saved_step = (phase, step)

    def _load(self):
        try:
            state = pf.load(self.checkpoint)
        except Exception as exc:
            raise TrainingError(f"cannot resume from {self.checkpoint}: {exc}") from exc
        if not isinstance(state, dict) or state.get("format") != \
                "primflow.science.checkpoint/1":
            raise TrainingError(f"{self.checkpoint} is not a primflow.science training "
                                f"checkpoint")
        if state.get("problem") != self.problem.name:
            raise TrainingError(f"{self.checkpoint} was written for problem "
                                f"{state.get('problem')!r}, not {self.problem.name!r}")
        return state

    # ---- the loop --------------------------------------------------------------------------
    def fit(self) -> TrainResult:
        """Trains and returns a :class:`TrainResult`."""
        with blas_threads(self.threads):
            return self._fit()

    def _fit(self):
        s = self.settings
        t_start = time.perf_counter()
        net = self.build_net()
        self.net = net
        self.problem.reset_parameters()
        pde_params = self.problem.pde_parameters()
        params = net.parameters() + list(pde_params.values())
        history = {"loss": [], "terms": {}, "val": [], "phase_start": {}, "parameters": {}}
        phase, start_step, state = "adam", 0, None
        self._saved_step = None
        self._extra = []  # collocation points added by residual-based refinement
        if self.resume and self.checkpoint and os.path.exists(self.checkpoint):
            state = self._load()
            try:
                net.set_state_dict(state["model"])
            except (ValueError, KeyError, TypeError) as exc:
                raise TrainingError(f"{self.checkpoint} does not fit this network ({exc}); "
                                    f"resume with the settings it was written with") from exc
            for name, value in state.get("pde_parameters", {}).items():
                if name not in pde_params:
                    raise TrainingError(f"{self.checkpoint} holds a PDE parameter {name!r} "
                                        f"this problem does not have")
                pde_params[name].set_value(value)
            phase, start_step = state["phase"], int(state["step"])
            history = _restore_history(state["history"])
            self._extra = [pf.to_tensor(x, dtype=self.problem.dtype)
                           for x in state.get("extra_points", [])]
            self._saved_step = (phase, start_step)
            self.log(f"resuming from {self.checkpoint}: {phase} step {start_step}")
        times = {"adam": 0.0, "lbfgs": 0.0}
        status, message = "ok", ""
        good = _snapshot(params)  # last parameters with a finite loss

        # -- Adam ---------------------------------------------------------------------------
        adam_done = start_step if phase == "adam" else s.adam_steps
        if phase == "adam" and s.adam_steps > 0:
            opt = networks.adam(self._adam_groups(net, params), s.lr)
            if state is not None and state["phase"] == "adam":
                opt.set_state_dict(state["optimizer"])
            scaler = pf.amp.GradScaler() if s.amp == "float16" else None
            skipped = 0  # steps the scaler skipped (their float16 gradients overflowed)
            history["phase_start"].setdefault("adam", 0)
            t0 = time.perf_counter()
            bar = self._bar("adam", s.adam_steps)
            round_index = None
            batch = None
            val_text = ""
            step = start_step
            for step in range(start_step, s.adam_steps):
                r = step // s.resample_every if s.resample_every else 0
                if r != round_index:
                    batch, round_index = self.batch(r), r
                opt.set_lr(self.lr_at(step))
                loss, terms = self.loss_and_grads(
                    net, params, batch, amp=s.amp,
                    loss_scale=None if scaler is None else scaler.get_loss_scaling())
                value = float(loss)
                if not _is_finite(value):
                    status, message = "nan", self._nan_message("adam", step, value)
                    _restore(params, good)
                    opt.clear_grad()
                    break
                good = _snapshot(params)
                if scaler is None:
                    opt.step()
                else:
                    scale = scaler.get_loss_scaling()
                    scaler.minimize(opt)
                    skipped += scaler.get_loss_scaling() < scale
                opt.clear_grad()
                self._record(history, step, value, terms)
                done = step + 1
                if done % s.validate_every == 0 or done == s.adam_steps:
                    err = self.problem.relative_l2(net)
                    history["val"].append([done, err])
                    val_text = f" val {err:.2e}" + self._record_parameters(history, done)
                if self.checkpoint and (done % self.checkpoint_every == 0
                                        or done == s.adam_steps):
                    self._save(net, opt, "adam", done, history)
                if bar:
                    bar.update(done, f"loss {value:.3e}{val_text} lr {self.lr_at(step):.1e}")
                if self._stop("adam", done, value, history):
                    status, message = "stopped", f"stopped by the callback at adam step {done}"
                    step = done
                    break
            else:
                step = s.adam_steps
            adam_done = step if status != "ok" else s.adam_steps
            if bar:
                bar.close()
            if skipped:
                self.log(f"mixed precision: {skipped} Adam steps skipped (float16 gradients "
                         f"overflowed); loss scale now {scaler.get_loss_scaling():g}")
            times["adam"] = time.perf_counter() - t0
        if status == "ok" and phase == "adam":
            phase, start_step, state = "lbfgs", 0, None

        # -- L-BFGS --------------------------------------------------------------------------
        lbfgs_done = start_step if phase == "lbfgs" else 0
        if status == "ok" and phase == "lbfgs" and s.lbfgs_steps > 0 and lbfgs_done < \
                s.lbfgs_steps:
            if s.lbfgs_points:
                base_batch = self.problem.sample(s.lbfgs_points, s.n_boundary, s.sampling,
                                                 seed=self.seed * 100003 + 99991)
            elif s.resample_every and s.adam_steps:
                base_batch = self.batch((s.adam_steps - 1) // s.resample_every)
            else:
                base_batch = self.batch(0)
            history["phase_start"].setdefault("lbfgs", len(history["loss"]))
            t0 = time.perf_counter()
            chunk = max(1, min(s.lbfgs_chunk, s.lbfgs_steps))
            rounds = s.rar_rounds if s.rar_points else 0
            stage = max(chunk, -(-s.lbfgs_steps // max(rounds, 1)) // chunk * chunk)
            batch = self._with_extra(base_batch)
            opt = networks.lbfgs(params, max_iter=chunk)
            if state is not None and state["phase"] == "lbfgs":
                try:
                    opt.set_state_dict(state["optimizer"])
                except (ValueError, KeyError, TypeError) as exc:
                    # the curvature history speeds L-BFGS up; without it, it starts afresh
                    self.log(f"L-BFGS state not restored ({exc}); continuing without it")
            evals = [0]

            def closure():
                opt.clear_grad()
                loss, _ = self.loss_and_grads(net, params, batch)
                evals[0] += 1
                return loss

            bar = self._bar("lbfgs", s.lbfgs_steps)
            base = s.adam_steps  # L-BFGS iterations continue the step count
            prev = None
            stalled = 0
            while lbfgs_done < s.lbfgs_steps:
                r = lbfgs_done // stage
                if r < rounds and len(self._extra) <= r and lbfgs_done % stage == 0:
                    self._extra.append(self._refine(net, r))
                    batch = self._with_extra(base_batch)
                    opt = networks.lbfgs(params, max_iter=chunk)  # a new objective
                opt.step(closure)
                with pf.no_grad():
                    terms = self.loss_terms(net, batch)
                value = float(self.total_loss(terms))
                lbfgs_done += chunk
                if not _is_finite(value):
                    status, message = "nan", self._nan_message("lbfgs", lbfgs_done, value)
                    _restore(params, good)
                    break
                good = _snapshot(params)
                self._record(history, base + lbfgs_done, value, terms)
                err = self.problem.relative_l2(net)
                history["val"].append([base + lbfgs_done, err])
                param_text = self._record_parameters(history, base + lbfgs_done)
                if self.checkpoint:
                    self._save(net, opt, "lbfgs", lbfgs_done, history)
                if bar:
                    bar.update(lbfgs_done, f"loss {value:.3e} val {err:.2e}{param_text} "
                                           f"evals {evals[0]}")
                if self._stop("lbfgs", lbfgs_done, value, history):
                    status = "stopped"
                    message = f"stopped by the callback at L-BFGS iteration {lbfgs_done}"
                    break
                # converged: the loss stopped moving over two chunks
                if prev is not None and abs(prev - value) <= 1e-12 * max(abs(prev), 1e-300):
                    stalled += 1
                    if stalled >= 2:
                        break
                else:
                    stalled = 0
                prev = value
            if bar:
                bar.close()
            times["lbfgs"] = time.perf_counter() - t0

        error = self.problem.relative_l2(net)
        times["total"] = time.perf_counter() - t_start
        if status == "ok":
            message = (f"relative L2 error {error:.3e} after {adam_done} Adam steps and "
                       f"{lbfgs_done} L-BFGS iterations in {times['total']:.1f} s")
        elif status == "nan":
            self.log(message)
        parameters = self.problem.parameter_values()
        if parameters and status == "ok":
            message += "; " + ", ".join(f"{k} = {v:.6g}" for k, v in parameters.items())
        return TrainResult(error=error, status=status, message=message, history=history,
                           times=times, steps={"adam": adam_done, "lbfgs": lbfgs_done},
                           net=net, checkpoint=self.checkpoint, parameters=parameters)

    # ---- helpers ---------------------------------------------------------------------------
    def _bar(self, desc, total):
        if not self.progress_kind or total <= 0:
            return None
        bar = Progress(self.progress_kind, self.stream)
        bar.start(desc, total)
        return bar

    def _with_extra(self, batch):
        if not self._extra:
            return batch
        out = dict(batch)
        out["interior"] = pf.concat([batch["interior"]] + self._extra, axis=0)
        return out

    def _refine(self, net, round_index):
        """Residual-based adaptive refinement (Lu et al., DeepXDE): the ``rar_points``
        points with the largest |PDE residual| among ``rar_candidates`` fresh samples."""
        s = self.settings
        problem = self.problem
        cand = problem.geometry.sample_interior(
            s.rar_candidates, "uniform", seed=self.seed * 7919 + 101 * (round_index + 1),
            dtype=problem.dtype)
        values = []
        for start in range(0, cand.shape[0], 2048):
            part = cand[start:start + 2048]
            res = problem.residual(lambda X: problem.u(net, X), part)
            values += pf.abs(pf.reshape(res, [-1])).detach().tolist()
        order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
        keep = pf.to_tensor(order[:s.rar_points], dtype="int64")
        return pf.index_select(cand, keep, axis=0).detach()

    def _stop(self, phase, step, value, history):
        if self.callback is None:
            return False
        val = history["val"][-1][1] if history["val"] else None
        return bool(self.callback({"phase": phase, "step": step, "loss": value, "val": val}))

    def _record_parameters(self, history, step):
        """Records the PDE parameters' values; returns them as progress-bar text."""
        values = self.problem.parameter_values()
        for name, v in values.items():
            history["parameters"].setdefault(name, []).append([int(step), float(v)])
        return "".join(f" {k} {v:.5g}" for k, v in values.items())

    def _record(self, history, step, value, terms):
        history["loss"].append([int(step), value])
        for name, t in terms.items():
            history["terms"].setdefault(name, []).append(float(t))

    def _nan_message(self, phase, step, value):
        where = (f"the checkpoint {self.checkpoint} keeps the last good state "
                 f"({self._saved_step[0]} step {self._saved_step[1]})"
                 if self.checkpoint and self._saved_step else
                 "no checkpoint was written" if self.checkpoint else
                 "pass a checkpoint path to keep the last good state on disk")
        return (f"training stopped: the loss became {value} at {phase} step {step}. The model "
                f"was reset to its last finite-loss parameters; {where}. Try a smaller "
                f"learning rate (--lr), fewer layers, or more collocation points")


def _gathered(tree):
    """``tree`` with its distributed tensors replaced by plain tensors of their values."""
    if isinstance(tree, dict):
        return {k: _gathered(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_gathered(v) for v in tree)
    if isinstance(tree, pf.Tensor) and tree.is_dist():
        return dist.unshard_dtensor(tree).detach()
    return tree


def _snapshot(params):
    return [p.detach().clone() for p in params]


def _restore(params, snapshot):
    for p, v in zip(params, snapshot):
        p.set_value(v)


def _plain_history(history):
    return {"loss": [[int(s), float(v)] for s, v in history["loss"]],
            "terms": {k: [float(x) for x in v] for k, v in history["terms"].items()},
            "val": [[int(s), float(v)] for s, v in history["val"]],
            "phase_start": {k: int(v) for k, v in history["phase_start"].items()},
            "parameters": {k: [[int(s), float(v)] for s, v in vals]
                           for k, vals in history.get("parameters", {}).items()}}


def _restore_history(h):
    def num(x):
        return float(x.item()) if isinstance(x, pf.Tensor) else float(x)
    return {"loss": [[int(num(s)), num(v)] for s, v in h.get("loss", [])],
            "terms": {k: [num(x) for x in v] for k, v in h.get("terms", {}).items()},
            "val": [[int(num(s)), num(v)] for s, v in h.get("val", [])],
            "phase_start": {k: int(num(v)) for k, v in h.get("phase_start", {}).items()},
            "parameters": {k: [[int(num(s)), num(v)] for s, v in vals]
                           for k, vals in h.get("parameters", {}).items()}}
