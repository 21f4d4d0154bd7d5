"""PNG plots of a trained PINN: prediction, reference, absolute error and the loss curve.

Needs matplotlib (``pip install matplotlib`` or ``primflow[plot]``); :func:`have_matplotlib`
tells whether it is there, and :func:`save_plots` raises a clear ``ImportError`` when it is
not. Figures are drawn with matplotlib's object API on the Agg canvas, so the user's
pyplot backend is left alone.

Example:
    >>> from primflow.science import plotting
    >>> isinstance(plotting.have_matplotlib(), bool)
    True
"""

from __future__ import annotations

import os

import primflow as pf

__all__ = ["have_matplotlib", "plot_cost", "plot_field", "plot_loss", "plot_operator_samples",
           "plot_scatter", "save_plots"]

_MISSING = ("plots need matplotlib, which is not installed; install it with "
            "`pip install matplotlib` (or `pip install primflow[plot]`)")


def have_matplotlib():
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
        return True
    except Exception:  # noqa: BLE001
        return False


def _figure(size=(5.0, 4.0)):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    fig = Figure(figsize=size, dpi=110)
    FigureCanvasAgg(fig)
    return fig


def plot_field(path, X, values, counts, names, title, cmap="viridis"):
    """Saves a 2-D field on a grid (``X`` ``[n1*n2, 2]`` "ij" ordered) or a 1-D curve."""
    fig = _figure()
    ax = fig.add_subplot(1, 1, 1)
    V = pf.reshape(values, [-1])
    if len(counts) == 1:
        ax.plot(pf.reshape(X[:, 0], [-1]).numpy(), V.numpy(), lw=1.5)
        ax.set_xlabel(names[0][0])
        ax.set_ylabel(names[1])
        ax.grid(alpha=0.3)
    else:
        n1, n2 = counts
        A = pf.reshape(X[:, 0], [n1, n2]).numpy()
        B = pf.reshape(X[:, 1], [n1, n2]).numpy()
        mesh = ax.pcolormesh(A, B, pf.reshape(V, [n1, n2]).numpy(), shading="auto", cmap=cmap)
        fig.colorbar(mesh, ax=ax)
        ax.set_xlabel(names[0][0])
        ax.set_ylabel(names[0][1])
        ax.set_aspect("auto")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)


def plot_loss(path, history, title="training loss"):
    """Saves the loss curve (log scale) with the validation error on a second axis."""
    fig = _figure((6.0, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    if history["loss"]:
        steps = [s for s, _ in history["loss"]]
        values = [v for _, v in history["loss"]]
        ax.semilogy(steps, values, lw=1.0, label="loss")
    ax.set_xlabel("step (Adam steps, then L-BFGS iterations)")
    ax.set_ylabel("loss")
    start = history.get("phase_start", {}).get("lbfgs")
    if start is not None and 0 < start < len(history["loss"]):  # Adam | L-BFGS
        ax.axvline(history["loss"][start - 1][0] + 1, color="gray", ls="--", lw=0.8)
    if history["val"]:
        ax2 = ax.twinx()
        ax2.semilogy([s for s, _ in history["val"]], [v for _, v in history["val"]],
                     color="tab:red", marker=".", lw=1.0, label="relative L2 error")
        ax2.set_ylabel("relative L2 error", color="tab:red")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path)


def save_plots(problem, net, history, out_dir):
    """Writes ``prediction.png``, ``reference.png``, ``error.png`` and ``loss.png`` into
    ``out_dir`` (physical units) and returns their paths."""
    if not have_matplotlib():
        raise ImportError(_MISSING)
    X, U, counts = problem.validation_set()
    P = problem.predict(net, X)
    if counts is None:  # scattered validation points (high dimension): no field to draw
        paths = {"prediction": os.path.join(out_dir, "prediction.png"),
                 "loss": os.path.join(out_dir, "loss.png")}
        plot_scatter(paths["prediction"], U, P, f"{problem.name}: prediction vs exact at "
                                                f"{X.shape[0]} test points")
        plot_loss(paths["loss"], history, f"{problem.name}: training")
        return paths
    Xp, Up = problem.to_physical(X, U)
    _, Pp = problem.to_physical(X, P)
    names = problem.physical_names
    name = problem.output_name
    paths = {}
    for key, values, title, cmap in (
            ("prediction", Pp, f"PINN prediction of {name}", "viridis"),
            ("reference", Up, f"reference {name}", "viridis"),
            ("error", pf.abs(Pp - Up), "|prediction - reference|", "magma")):
        path = os.path.join(out_dir, f"{key}.png")
        plot_field(path, Xp, values, counts, names, f"{problem.name}: {title}", cmap)
        paths[key] = path
    paths["loss"] = os.path.join(out_dir, "loss.png")
    plot_loss(paths["loss"], history, f"{problem.name}: training")
    return paths


# ---- high-dimensional problems ----------------------------------------------------

def plot_scatter(path, reference, prediction, title):
    """Saves predicted against reference values (one dot per point) with the diagonal."""
    fig = _figure((4.6, 4.4))
    ax = fig.add_subplot(1, 1, 1)
    ref = pf.reshape(reference, [-1]).numpy()
    pred = pf.reshape(prediction, [-1]).numpy()
    ax.plot(ref, pred, ".", ms=2, alpha=0.5)
    lo, hi = float(min(ref.min(), pred.min())), float(max(ref.max(), pred.max()))
    ax.plot([lo, hi], [lo, hi], color="gray", lw=0.8)
    ax.set_xlabel("exact")
    ax.set_ylabel("prediction")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_cost(path, rows, samples):
    """Saves seconds per training step against the dimension (log-log) for the stochastic
    and the exact Laplacian; ``rows`` are dicts with ``dim``, ``stochastic``, ``collapsed``."""
    fig = _figure((5.4, 4.0))
    ax = fig.add_subplot(1, 1, 1)
    for key, marker, label in (("stochastic", "o-", f"stochastic Taylor ({samples} directions)"),
                               ("collapsed", "s-", "exact (collapsed Taylor)")):
        kept = [r for r in rows if r[key] is not None]  # None: skipped (too much memory)
        ax.loglog([r["dim"] for r in kept], [r[key] for r in kept], marker, label=label)
    ax.set_xlabel("dimension d")
    ax.set_ylabel("seconds per training step")
    ax.set_title("Laplacian in the PINN loss: cost per step", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_operator_samples(path, inputs, targets, predictions, title, count=3):
    """Saves test samples of an operator: 1-D - input, truth and prediction curves; 2-D -
    input, truth, prediction and error images (NumPy arrays ``[n, s]`` or ``[n, s, s]``)."""
    count = min(count, len(targets))
    if targets.ndim == 2:
        fig = _figure((10.0, 3.0))
        x = [i / targets.shape[1] for i in range(targets.shape[1])]
        for i in range(count):
            ax = fig.add_subplot(1, count, i + 1)
            ax.plot(x, inputs[i], color="gray", lw=0.8, label="u(x, 0)")
            ax.plot(x, targets[i], lw=1.5, label="u(x, 1)")
            ax.plot(x, predictions[i], "--", lw=1.5, label="FNO")
            ax.set_xlabel("x")
            ax.grid(alpha=0.3)
            if i == 0:
                ax.legend(fontsize=7)
    else:
        fig = _figure((10.0, 2.6 * count))
        for i in range(count):
            for j, (img, name) in enumerate(((inputs[i], "a"), (targets[i], "u"),
                                             (predictions[i], "FNO"),
                                             (abs(predictions[i] - targets[i]), "|error|"))):
                ax = fig.add_subplot(count, 4, 4 * i + j + 1)
                mesh = ax.imshow(img.T, origin="lower", extent=(0, 1, 0, 1))
                fig.colorbar(mesh, ax=ax, fraction=0.046)
                ax.set_title(name, fontsize=8)
                ax.set_xticks([])
                ax.set_yticks([])
    fig.suptitle(f"{title}: test samples", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    return path
