"""Short PINN training runs: every problem's loss decreases, beam and Poisson reach a
stated error, checkpoint/resume reproduces, a NaN loss stops cleanly, the progress bar."""

import io
import math
import os

import pytest

import primflow as pf
from primflow.science import Progress, Trainer
from primflow.science.problems import PROBLEMS, Beam, Poisson2D, make_problem

TINY = {"hidden": 8, "depth": 2, "n_interior": 48, "n_boundary": 16, "adam_steps": 25,
        "lr": 1e-2, "lr_final": 5e-3, "lbfgs_steps": 0, "validate_every": 25}


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_short_run_decreases_the_loss(name):
    p = make_problem(name)
    s = p.settings(quick=True).replace(**TINY)
    r = Trainer(p, s, seed=1, progress=False).fit()
    losses = [v for _, v in r.history["loss"]]
    assert r.status == "ok" and len(losses) == 25
    assert all(math.isfinite(v) for v in losses)
    assert min(losses[-5:]) < 0.7 * losses[0], losses
    assert math.isfinite(r.error)


def test_beam_short_run_reaches_stated_error():
    # stated: relative L2 <= 1e-2 after 150 Adam steps and 50 L-BFGS iterations
    p = Beam()
    s = p.settings(quick=True).replace(n_interior=48, adam_steps=150, lbfgs_steps=50)
    r = Trainer(p, s, seed=0, progress=False).fit()
    assert r.status == "ok"
    assert r.error <= 1e-2, r.error


def test_poisson_short_run_reaches_stated_error():
    # stated: relative L2 <= 2e-2 after 100 Adam steps and 50 L-BFGS iterations
    p = Poisson2D()
    s = p.settings(quick=True).replace(hidden=12, n_interior=128, adam_steps=100,
                                       lbfgs_steps=50)
    r = Trainer(p, s, seed=0, progress=False).fit()
    assert r.status == "ok"
    assert r.error <= 2e-2, r.error


def _params(net):
    return [p.numpy().copy() for p in net.parameters()]


def test_checkpoint_resume_reproduces(tmp_path):
    p = Poisson2D()
    s = p.settings(quick=True).replace(**dict(TINY, adam_steps=12, lbfgs_steps=0))
    straight = Trainer(p, s, seed=2, progress=False).fit()

    ckpt = tmp_path / "run.pdparams"
    first = Trainer(p, s, seed=2, progress=False, checkpoint=ckpt, checkpoint_every=6,
                    callback=lambda info: info["step"] == 6).fit()
    assert first.status == "stopped" and first.steps["adam"] == 6
    assert os.path.exists(ckpt)
    resumed = Trainer(p, s, seed=2, progress=False, checkpoint=ckpt, resume=True,
                      log=None).fit()
    assert resumed.status == "ok" and resumed.steps["adam"] == 12
    for a, b in zip(_params(straight.net), _params(resumed.net)):
        assert (a == b).all()
    assert [v for _, v in resumed.history["loss"]] == [v for _, v in straight.history["loss"]]


def test_resume_into_lbfgs_phase(tmp_path):
    p = Beam()
    s = p.settings(quick=True).replace(**dict(TINY, adam_steps=10, lbfgs_steps=20,
                                              lbfgs_chunk=10))
    ckpt = tmp_path / "beam.pdparams"
    first = Trainer(p, s, progress=False, checkpoint=ckpt,
                    callback=lambda info: info["phase"] == "lbfgs").fit()
    assert first.status == "stopped" and first.steps == {"adam": 10, "lbfgs": 10}
    second = Trainer(p, s, progress=False, checkpoint=ckpt, resume=True, log=None).fit()
    assert second.status == "ok" and second.steps == {"adam": 10, "lbfgs": 20}
    assert second.error <= first.error * 1.5


class _Exploding(Poisson2D):
    """Poisson whose loss turns NaN from the 6th evaluation on."""

    calls = 0

    def losses(self, u, batch):
        out = super().losses(u, batch)
        type(self).calls += 1
        if type(self).calls > 5:
            out["pde"] = out["pde"] * float("nan")
        return out


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    p = _Exploding()
    s = p.settings(quick=True).replace(**dict(TINY, adam_steps=20))
    ckpt = tmp_path / "nan.pdparams"
    lines = []
    # eager: the NaN comes from a Python-side counter, which a compiled step runs only once
    r = Trainer(p, s, progress=False, checkpoint=ckpt, checkpoint_every=2,
                log=lines.append, jit=False).fit()
    assert r.status == "nan"
    assert "loss became nan at adam step 5" in r.message
    assert str(ckpt) in r.message and "adam step 4" in r.message
    assert lines and lines[0] == r.message
    assert all(math.isfinite(float(pf.abs(q).max())) for q in r.net.parameters())
    assert math.isfinite(r.error)
    state = pf.load(str(ckpt))
    assert state["phase"] == "adam" and int(state["step"]) == 4


def test_corrupt_checkpoint_gives_a_clear_error(tmp_path):
    bad = tmp_path / "bad.pdparams"
    bad.write_bytes(b"not a checkpoint")
    p = Beam()
    s = p.settings(quick=True).replace(**TINY)
    from primflow.science import TrainingError
    with pytest.raises(TrainingError, match="cannot resume"):
        Trainer(p, s, progress=False, checkpoint=bad, resume=True).fit()


def test_unknown_loss_weight_is_an_error():
    p = Beam()
    s = p.settings(quick=True).replace(**dict(TINY, weights={"bc": 2.0}))
    with pytest.raises(ValueError, match="unknown terms"):
        Trainer(p, s, progress=False).fit()


def test_text_progress_bar():
    stream = io.StringIO()
    bar = Progress(kind="text", stream=stream)
    bar.start("adam", 50)
    for i in range(1, 51):
        bar.update(i, f"loss {1.0 / i:.2e}")
    bar.close()
    text = stream.getvalue()
    assert "50/50" in text and "loss 2.00e-02" in text and "<" in text
    assert len(text.splitlines()) <= 12  # one line per 10 % when not a terminal


def test_trainer_progress_goes_to_the_stream():
    stream = io.StringIO()
    p = Beam()
    s = p.settings(quick=True).replace(**dict(TINY, adam_steps=5))
    Trainer(p, s, progress="text", stream=stream).fit()
    assert "adam" in stream.getvalue() and "5/5" in stream.getvalue()


def test_blas_threads_context_restores_the_pool():
    from primflow.backends.blas import openblas_libraries
    from primflow.science.threads import blas_threads
    pairs = openblas_libraries()
    before = [get() for get, _ in pairs]
    with blas_threads(1):
        assert all(get() == 1 for get, _ in pairs)
    assert [get() for get, _ in pairs] == before
    with pytest.raises(ValueError, match=">= 1"), blas_threads(0):
        pass


def test_residual_based_refinement_adds_points_and_checkpoints_them(tmp_path):
    p = make_problem("burgers")
    s = p.settings(quick=True).replace(**dict(TINY, adam_steps=4, lbfgs_steps=20,
                                              lbfgs_chunk=5, rar_points=7, rar_rounds=2,
                                              rar_candidates=200))
    ckpt = tmp_path / "rar.pdparams"
    trainer = Trainer(p, s, progress=False, checkpoint=ckpt)
    r = trainer.fit()
    assert r.status == "ok" and r.steps["lbfgs"] == 20
    assert [x.shape for x in trainer._extra] == [[7, 2], [7, 2]]
    assert bool(p.geometry.inside(trainer._extra[0]).all())
    assert len(pf.load(str(ckpt))["extra_points"]) == 2
    # the chosen points have the largest residuals among the candidates
    chosen = trainer._refine(r.net, 5)
    cand = p.geometry.sample_interior(200, "uniform", seed=trainer.seed * 7919 + 101 * 6,
                                      dtype=p.dtype)
    u = lambda X: p.u(r.net, X)
    res_all = sorted(pf.abs(p.residual(u, cand)).numpy().ravel().tolist())
    res_chosen = pf.abs(p.residual(u, chosen)).numpy().ravel().tolist()
    assert min(res_chosen) >= res_all[-7] * (1 - 1e-12)


def test_compiled_and_eager_training_agree():
    """The default compiled step (pf.jit) trains exactly like the eager tape."""
    p = Poisson2D()
    s = p.settings(quick=True).replace(**dict(TINY, adam_steps=6, lbfgs_steps=4))
    runs = [Trainer(p, s, progress=False, log=None, jit=flag).fit() for flag in (True, False)]
    compiled, eager = ([v for _, v in r.history["loss"]] for r in runs)
    assert len(compiled) == len(eager) > 0
    for a, b in zip(compiled, eager):
        assert abs(a - b) <= 1e-9 * max(1.0, abs(b))
    assert abs(runs[0].error - runs[1].error) <= 1e-9 * max(1.0, runs[1].error)


def test_layer_learning_rate_scales():
    """Adam's first step moves every weight by the learning rate (m / sqrt(v) = sign(g)),
    so with ``input_lr_scale`` / ``output_lr_scale`` the first and last layers move by
    those multiples of it and the middle layer by the rate itself."""
    p = Poisson2D()
    s = p.settings(quick=True).replace(**dict(TINY, depth=2, adam_steps=1, lr=1e-3,
                                              lr_final=1e-3, input_lr_scale=3.0,
                                              output_lr_scale=0.1))
    before = _params(Trainer(p, s.replace(adam_steps=0), seed=3, progress=False).fit().net)
    after = _params(Trainer(p, s, seed=3, progress=False).fit().net)
    moved = [abs(b - a).max() for a, b in zip(before, after)]
    # weights and biases of Linear 1, 2, 3 (Adam's epsilon shortens a step by < 1e-4)
    assert moved[0] == pytest.approx(3e-3, rel=1e-4) and moved[1] == pytest.approx(3e-3, rel=1e-4)
    assert moved[2] == pytest.approx(1e-3, rel=1e-4) and moved[3] == pytest.approx(1e-3, rel=1e-4)
    assert moved[4] == pytest.approx(1e-4, rel=1e-3) and moved[5] == pytest.approx(1e-4, rel=1e-3)


def test_layer_learning_rates_resume_from_a_checkpoint(tmp_path):
    p = Poisson2D()
    s = p.settings(quick=True).replace(**dict(TINY, adam_steps=8, input_lr_scale=3.0,
                                              output_lr_scale=0.1))
    straight = Trainer(p, s, seed=2, progress=False).fit()
    ckpt = tmp_path / "run.pdparams"
    Trainer(p, s, seed=2, progress=False, checkpoint=ckpt, checkpoint_every=4,
            callback=lambda info: info["step"] == 4).fit()
    resumed = Trainer(p, s, seed=2, progress=False, checkpoint=ckpt, resume=True,
                      log=None).fit()
    for a, b in zip(_params(straight.net), _params(resumed.net)):
        assert (a == b).all()


@pytest.mark.parametrize("name", ["input_lr_scale", "output_lr_scale"])
def test_bad_layer_learning_rate_scale(name):
    p = Beam()
    with pytest.raises(ValueError, match=f"settings.{name} must be a positive number"):
        Trainer(p, p.settings(quick=True).replace(**{name: 0.0}), progress=False)
