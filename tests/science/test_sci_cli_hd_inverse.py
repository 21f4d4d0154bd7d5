"""The high-dimensional and inverse demos on the command line: tiny runs and clear errors."""

import json

import pytest

from primflow.cli import main

TINY = ["--quick", "--steps", "4", "--lbfgs-steps", "0", "--points", "16", "--no-progress",
        "--no-plots"]


def test_poisson_hd_demo_runs(tmp_path, capsys):
    out = tmp_path / "hd"
    assert main(["demo", "poisson-hd", "--dim", "6", "--samples", "2", "--out", str(out)]
                + TINY) == 0
    text = capsys.readouterr().out
    assert "Poisson in 6 dimensions" in text and "relative L2 error" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problem"] == "poisson-hd" and summary["steps"]["adam"] == 4


def test_allen_cahn_hd_demo_runs_with_the_exact_laplacian(tmp_path, capsys):
    assert main(["demo", "allen-cahn-hd", "--dim", "3", "--exact", "--out", str(tmp_path)]
                + TINY) == 0
    assert "Δu + u - u³ = g in 3 dimensions" in capsys.readouterr().out


def test_plate_inverse_demo_reports_the_coefficient(tmp_path, capsys):
    assert main(["demo", "plate-inverse", "--noise", "0.02", "--measurements", "30", "--out",
                 str(tmp_path)] + TINY) == 0
    text = capsys.readouterr().out
    assert "identified D = " in text and "(true 1," in text
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["true_parameters"] == {"D": 1.0}
    assert set(summary["parameters"]) == {"D"} and "D" in summary["parameter_errors"]


def test_cost_vs_dimension(tmp_path, capsys):
    assert main(["demo", "poisson-hd", "--cost-dims", "2,3", "--samples", "2", "--points",
                 "4", "--out", str(tmp_path), "--no-plots"]) == 0
    rows = json.loads((tmp_path / "cost.json").read_text())["seconds_per_step"]
    assert [r["dim"] for r in rows] == [2, 3]
    assert all(r["stochastic"] > 0 and r["collapsed"] > 0 for r in rows)


@pytest.mark.parametrize("argv, message", [
    (["demo", "poisson-hd", "--dim", "0"], "--dim must be at least 2"),
    (["demo", "poisson-hd", "--dim", "1"], "--dim must be at least 2"),
    (["demo", "heat", "--dim", "5"], "--dim does not apply to the heat demo"),
    (["demo", "poisson-hd", "--samples", "0"], "--samples must be positive"),
    (["demo", "plate", "--noise", "0.1"], "--noise does not apply"),
    (["demo", "plate-inverse", "--noise", "-1"], "--noise must be non-negative"),
    (["demo", "poisson-hd", "--cost-dims", "3,x"], "comma-separated integers"),
    (["demo", "poisson-hd", "--cost-dims", "1,3"], "dimensions >= 2"),
])
def test_bad_options(argv, message, tmp_path, capsys):
    assert main(argv + ["--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err


def test_cost_skips_what_would_not_fit_in_memory(tmp_path, capsys, monkeypatch):
    import primflow.cli as cli
    monkeypatch.setattr(cli, "_COST_MEMORY_LIMIT", 8 * 4 * 2 * 3)  # stochastic only at d=3
    assert main(["demo", "poisson-hd", "--cost-dims", "3", "--samples", "2", "--points",
                 "4", "--out", str(tmp_path), "--no-plots"]) == 0
    row, = json.loads((tmp_path / "cost.json").read_text())["seconds_per_step"]
    assert row["stochastic"] > 0 and row["collapsed"] is None
    assert "skipped" in capsys.readouterr().out
