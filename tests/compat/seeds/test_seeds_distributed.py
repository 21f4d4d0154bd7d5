"""Seed 002's distributed examples under MPI (each run under a timeout): the MlpModel of
4.2 on two meshes through dist.to_static with a plain AdamW (dist_mlp_two_meshes.py),
its losses recomputed in NumPy; and the demo of 九、开始使用 started with the document's
own launch line, ``python -m paddle.distributed.launch --gpus "0,1" test_demo.py``."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np

import primflow as paddle
from seedrun import HERE

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "distributed"))
from mpi_helpers import ROOT, check, mpi_command, run_mpi  # noqa: E402


def numpy_mlp_losses(steps=2, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, decay=0.01):
    """The example's run in float64 NumPy: the same initial parameters (paddle.seed(2024),
    drawn in the same order), the same data (np.random.seed(2024)), MSE loss, AdamW with
    Paddle's decoupled weight decay."""
    paddle.seed(2024)
    layer = paddle.nn.Layer()
    w = [layer.create_parameter(shape=[1024, 4096]).numpy().astype(np.float64),
         layer.create_parameter(shape=[4096, 1024]).numpy().astype(np.float64)]
    np.random.seed(2024)
    inputs = np.random.uniform(size=[4, 2, 1024]).astype("float32").astype(np.float64)
    labels = np.random.uniform(size=[4, 2, 1024]).astype("float32").astype(np.float64)
    m = [np.zeros_like(p) for p in w]
    v = [np.zeros_like(p) for p in w]
    losses = []
    for t in range(1, steps + 1):
        x, label = inputs[2 * t - 2:2 * t], labels[2 * t - 2:2 * t]
        y = x @ w[0]
        z = y @ w[1]
        losses.append(((z - label) ** 2).mean())
        dz = 2 * (z - label) / z.size
        grads = [np.einsum("bsi,bsj->ij", x, dz @ w[1].T), np.einsum("bsi,bsj->ij", y, dz)]
        for i, g in enumerate(grads):
            w[i] = w[i] * (1 - lr * decay)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            w[i] = w[i] - lr * (m[i] / (1 - b1 ** t)) / (np.sqrt(v[i] / (1 - b2 ** t)) + eps)
    return losses


def test_mlp_model_on_two_meshes_with_a_plain_optimizer_matches_numpy():
    printed = check(run_mpi(2, str(HERE / "dist_mlp_two_meshes.py"), timeout=120))
    got = [float(v) for v in re.findall(r"step \d+ loss ([-+0-9.e]+)", printed)]
    want = numpy_mlp_losses()
    assert len(got) == 2, printed  # two batches, printed by the rank of the last stage
    np.testing.assert_allclose(got, want, rtol=2e-4)
    assert got[0] != got[1]  # the optimizer moved the parameters of both stages


def test_demo_runs_with_the_documents_launch_line():
    """``--gpus "0,1"``: one process per listed device (primflow computes on the CPU)."""
    mpi_command(2, ["x.py"])  # skips without MPI
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-u", "-m", "primflow.distributed.launch", "--gpus",
                          "0,1", str(HERE / "p3_demo.py")], env=env, capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stderr
    losses = [float(v) for v in re.findall(r"local=array\(([-+0-9.e]+)\)", run.stdout)]
    assert len(losses) == 20, run.stdout  # ten batches on each of the two processes
    np.testing.assert_allclose(losses, 4.0, rtol=0, atol=1e-5)
