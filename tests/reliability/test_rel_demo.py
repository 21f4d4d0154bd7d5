"""`primflow demo` under user mistakes and faults: a previous run in --out is never lost,
one run at a time writes a folder, SIGINT leaves a resumable run, and every bad option value
is a one-line error with exit status 2 (no traceback)."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import primflow as pf
from primflow.cli import main

TINY = ["--quick", "--steps", "6", "--lbfgs-steps", "0", "--points", "32", "--no-progress",
        "--no-plots"]
LOCK = ".primflow-demo.lock"


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _demo_process(out, *extra):
    """A `primflow demo beam` run in its own process (stdout/stderr piped)."""
    return subprocess.Popen([sys.executable, "-m", "primflow", "demo", "beam", "--out", str(out),
                             "--quick", "--points", "32", "--lbfgs-steps", "0", "--no-progress",
                             "--no-plots", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(predicate, proc, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before {what}: {proc.communicate()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _stop(proc):
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


# ---- a previous run is never deleted ---------------------------------------------------------

def test_a_fresh_run_over_a_previous_one_is_refused_and_keeps_it(tmp_path, capsys):
    assert main(["demo", "beam", "--out", str(tmp_path)] + TINY) == 0
    checkpoint = tmp_path / "checkpoint.pdparams"
    before = _digest(checkpoint)
    capsys.readouterr()
    assert main(["demo", "beam", "--out", str(tmp_path)] + TINY) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("primflow: error:")
    assert str(tmp_path) in err and "--resume" in err and "--overwrite" in err
    assert _digest(checkpoint) == before


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning",
                            "ignore:overflow:RuntimeWarning")
def test_overwrite_keeps_the_old_checkpoint_until_the_new_run_saves(tmp_path, capsys):
    assert main(["demo", "beam", "--out", str(tmp_path)] + TINY) == 0
    checkpoint = tmp_path / "checkpoint.pdparams"
    before = _digest(checkpoint)
    # the new run diverges at its first step, before any save: the old run survives
    assert main(["demo", "beam", "--out", str(tmp_path), "--overwrite", "--lr", "1e300"]
                + TINY) == 1
    assert "loss became inf" in capsys.readouterr().err
    assert _digest(checkpoint) == before
    assert pf.load(checkpoint)["step"] == 6
    # a run that saves replaces it
    assert main(["demo", "beam", "--out", str(tmp_path), "--overwrite", "--seed", "3"]
                + TINY) == 0
    assert pf.load(checkpoint)["seed"] == 3


def test_resume_without_a_checkpoint_and_resume_with_overwrite_are_refused(tmp_path, capsys):
    assert main(["demo", "beam", "--out", str(tmp_path), "--resume"] + TINY) == 2
    assert "no checkpoint to continue" in capsys.readouterr().err
    assert main(["demo", "beam", "--out", str(tmp_path), "--resume", "--overwrite"] + TINY) == 2
    assert "exclude each other" in capsys.readouterr().err


# ---- one run at a time per folder -----------------------------------------------------------

def test_a_second_run_on_a_folder_in_use_names_the_process_holding_it(tmp_path):
    first = _demo_process(tmp_path, "--steps", "1000000")
    try:
        _wait_for(lambda: (tmp_path / LOCK).exists() and (tmp_path / LOCK).read_text().strip(),
                  first, "the first run locked its folder")
        second = _demo_process(tmp_path, "--steps", "6", "--overwrite")
        out, err = second.communicate(timeout=300)
        assert second.returncode == 2, (out, err)
        assert "Traceback" not in err
        assert f"in use by another primflow run (process {first.pid})" in err
        assert first.poll() is None  # the first run goes on undisturbed
    finally:
        _stop(first)


def test_a_lock_left_by_a_dead_run_is_taken_over(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK).write_text(f"{dead.pid}\n")
    assert main(["demo", "beam", "--out", str(tmp_path)] + TINY) == 0
    assert not (tmp_path / LOCK).exists()  # released at the end


# ---- SIGINT leaves a consistent, resumable run -------------------------------------------------

def test_sigint_during_a_run_leaves_a_checkpoint_that_resumes(tmp_path, capsys):
    proc = _demo_process(tmp_path, "--steps", "1000000")
    checkpoint = tmp_path / "checkpoint.pdparams"
    try:
        _wait_for(checkpoint.exists, proc, "the first checkpoint")
        time.sleep(0.3)  # into the following steps (and maybe the next save)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        _stop(proc)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    state = pf.load(checkpoint)  # whole, never a half-written file
    assert state["phase"] == "adam" and state["step"] >= 50
    assert not (tmp_path / LOCK).exists()
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []
    steps = str(state["step"] + 4)
    assert main(["demo", "beam", "--out", str(tmp_path), "--resume", "--quick", "--points", "32",
                 "--steps", steps, "--lbfgs-steps", "0", "--no-progress", "--no-plots"]) == 0
    assert f"resuming from {checkpoint}: adam step {state['step']}" in capsys.readouterr().err
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"]["adam"] == int(steps)


# ---- clear errors for bad option values --------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--seed", "-1"], "--seed must be a non-negative integer, got -1"),
    (["--steps", "-1"], "--steps must be non-negative"),
    (["--lbfgs-steps", "-2"], "--lbfgs-steps must be non-negative"),
    (["--points", "0"], "--points must be positive"),
    (["--points", "-5"], "--points must be positive"),
    (["--lr", "0"], "--lr must be positive and finite"),
    (["--lr", "-0.001"], "--lr must be positive and finite"),
    (["--lr", "inf"], "--lr must be positive and finite"),
    (["--lr", "nan"], "--lr must be positive and finite"),
    (["--threads", "0"], "--threads must be at least 1"),
    (["--steps", "ten"], "invalid int value: 'ten'"),
    (["--out", ""], "--out must name a folder"),
    (["--out", "   "], "--out must name a folder"),
    (["--points", "100000000000"], "out of memory"),
])
def test_bad_option_values_give_one_line_and_exit_status_2(argv, message, tmp_path, capsys):
    base = ["--quick", "--steps", "2", "--lbfgs-steps", "0", "--no-progress", "--no-plots"]
    if "--out" not in argv:
        argv = argv + ["--out", str(tmp_path / "out")]
    assert main(["demo", "beam"] + base + argv) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("primflow: error:") and message in last, err
    assert "Traceback" not in err


@pytest.mark.parametrize("name, argv, message", [
    ("plate-inverse", ["--noise", "inf"], "--noise must be non-negative and finite"),
    ("poisson-hd", ["--dim", "10000000", "--steps", "1"], "out of memory"),
    ("fno-burgers", ["--train", "0"], "--train must be positive"),
])
def test_bad_values_of_the_other_demos_options(name, argv, message, tmp_path, capsys):
    assert main(["demo", name, "--quick", "--no-progress", "--no-plots", "--out",
                 str(tmp_path)] + argv) == 2
    err = capsys.readouterr().err
    assert message in err.strip().splitlines()[-1] and "Traceback" not in err


def test_output_and_data_folders_that_are_files_are_refused(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["demo", "fno-burgers", "--quick", "--out", str(tmp_path / "o"),
                 "--data-dir", str(blocker)]) == 2
    assert "--data-dir folder" in capsys.readouterr().err
    assert main(["demo", "beam", "--out", str(blocker)] + TINY) == 2
    assert "not a folder" in capsys.readouterr().err


def test_sobol_without_scipy_is_a_clear_error(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "scipy" else real(name, *a))
    assert main(["demo", "beam", "--sampling", "sobol", "--out", str(tmp_path)] + TINY) == 2
    assert "--sampling sobol needs SciPy" in capsys.readouterr().err


def test_a_bad_seed_from_the_command_line_prints_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "primflow", "demo", "beam", "--seed", "-1",
                           "--out", str(tmp_path)] + TINY, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "primflow: error: --seed must be a non-negative integer, got -1"
