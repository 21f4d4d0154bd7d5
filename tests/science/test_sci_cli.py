"""The primflow command: info, demo runs, plots, and clear errors for bad input."""

import json
import os
import subprocess
import sys

import pytest

import primflow as pf
from primflow.testing.extras import import_extra
from primflow.cli import main
from primflow.science import plotting

TINY = ["--quick", "--steps", "6", "--lbfgs-steps", "0", "--points", "32", "--no-progress"]


def test_info(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"primflow {pf.__version__}" in out
    assert f"primitives: {len(pf.primitives())}" in out
    assert "NumpyBackend" in out and "float64" in out
    for extra in ("scipy", "matplotlib", "tqdm", "numba", "mpi4py"):
        assert extra in out


def test_python_dash_m_entry_point():
    proc = subprocess.run([sys.executable, "-m", "primflow", "info"], capture_output=True, check=False,
                          text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.returncode == 0, proc.stderr
    assert "primitives:" in proc.stdout


def test_unknown_demo_lists_the_valid_ones(capsys):
    assert main(["demo", "cylinder"]) == 2
    err = capsys.readouterr().err
    assert "unknown demo 'cylinder'" in err
    for name in ("plate", "beam", "poisson", "burgers", "heat"):
        assert name in err


def test_unwritable_output_folder_fails_before_training(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["demo", "beam", "--out", str(blocker / "sub")] + TINY) == 2
    err = capsys.readouterr().err
    assert "cannot write to output folder" in err and "--out" in err
    assert main(["demo", "beam", "--out", str(blocker)] + TINY) == 2
    assert "not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["demo", "heat", "--config", "paddlescience"], "plate demo only"),
    (["demo", "beam", "--steps", "-3"], "--steps must be non-negative"),
    (["demo", "beam", "--points", "0"], "--points must be positive"),
    (["demo", "plate", "--config", "steel"], "invalid choice"),
    (["demo", "beam", "--sampling", "grid"], "invalid choice"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path)] if argv[0] == "demo" else argv) == 2
    assert message in capsys.readouterr().err


def test_demo_runs_and_writes_its_outputs(tmp_path, capsys):
    out = tmp_path / "beam"
    assert main(["demo", "beam", "--out", str(out), "--no-plots"] + TINY) == 0
    text = capsys.readouterr().out
    assert "relative L2 error vs reference:" in text and "wall time" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problem"] == "beam" and summary["steps"]["adam"] == 6
    assert summary["settings"]["n_interior"] == 32
    assert (out / "checkpoint.pdparams").exists()
    assert pf.get_default_dtype() == "float32" or pf.get_default_dtype() == "float64"


def test_device_option_trains_on_the_named_device_and_restores_the_backend(tmp_path, capsys):
    before = pf.get_backend()
    assert main(["demo", "beam", "--device", "cpu", "--out", str(tmp_path / "cpu"),
                 "--no-plots"] + TINY) == 0
    assert "relative L2 error vs reference:" in capsys.readouterr().out
    assert pf.get_backend() is before


@pytest.mark.parametrize("device, message", [
    ("tpu", "--device tpu: unknown device 'tpu'; use 'cpu', 'gpu' or 'gpu:N'"),
    ("gpu:99", "--device gpu:99: device 'gpu:99'"),
])
def test_device_option_refuses_a_device_that_is_not_there(device, message, tmp_path, capsys):
    before = pf.get_backend()
    out = tmp_path / "run"
    assert main(["demo", "beam", "--device", device, "--out", str(out)] + TINY) == 2
    assert message in capsys.readouterr().err
    assert pf.get_backend() is before and not out.exists()  # refused before anything ran


def test_demo_restores_the_default_dtype(tmp_path):
    before = pf.get_default_dtype()
    main(["demo", "poisson", "--out", str(tmp_path), "--no-plots"] + TINY)
    assert pf.get_default_dtype() == before


def test_plate_paddlescience_config(tmp_path, capsys):
    assert main(["demo", "plate", "--config", "paddlescience", "--out", str(tmp_path),
                 "--no-plots", "--quick", "--steps", "2", "--lbfgs-steps", "0", "--points",
                 "16", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "paddlescience" in out and "D = 17944.9" in out


def test_plots_are_written(tmp_path, capsys):
    import_extra("plot", "matplotlib")
    assert main(["demo", "heat", "--out", str(tmp_path)] + TINY) == 0
    for name in ("prediction", "reference", "error", "loss"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    assert "plots:" in capsys.readouterr().out


def test_plots_without_matplotlib_say_so(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plotting, "have_matplotlib", lambda: False)
    assert main(["demo", "beam", "--out", str(tmp_path)] + TINY) == 0
    assert "matplotlib is not installed" in capsys.readouterr().out
    assert not (tmp_path / "loss.png").exists()


def test_resume(tmp_path, capsys):
    out = str(tmp_path)
    assert main(["demo", "beam", "--out", out, "--no-plots"] + TINY) == 0
    # continuing with more steps picks up the checkpoint
    args = ["demo", "beam", "--out", out, "--no-plots", "--resume", "--quick", "--steps",
            "6", "--lbfgs-steps", "10", "--points", "32", "--no-progress"]
    assert main(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == {"adam": 6, "lbfgs": 10}
    assert "resuming from" in capsys.readouterr().err
    # a checkpoint of another network size is refused clearly
    args = ["demo", "beam", "--out", out, "--no-plots", "--resume", "--points", "32",
            "--steps", "6", "--no-progress"]  # full settings: a wider network
    assert main(args) == 2
    assert "does not fit this network" in capsys.readouterr().err
