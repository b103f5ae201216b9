"""Plots as PNG files, drawn on matplotlib's Agg canvas (no display, no pyplot state).

Every function here builds its own :class:`matplotlib.figure.Figure`, so plotting is
safe from threads, in tests and on machines without a display, and never touches
pyplot's global figure list. matplotlib is imported when a function runs, not when
this module is imported.

* :func:`new_figure` / :func:`save_figure`: the two halves every plot shares;
* :func:`plot_mean_band`: seed-mean curve with a min-max band over seeds;
* :func:`line_plot`: one or more curves into a PNG (linear or log y);
* :func:`use_log_scale`: whether values call for a log axis (a span of more than 10x);
* :func:`legend_outside`: a legend beside the axes, off the curves;
* :func:`meta_train_plots`: a meta-training run's meta-loss (with a running mean and the
  skipped steps marked) and learned learning rate, written by ``learnopt meta-train``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "new_figure",
    "save_figure",
    "plot_mean_band",
    "line_plot",
    "use_log_scale",
    "legend_outside",
    "LOG_SCALE_RATIO",
    "meta_train_plots",
    "COLORS",
]

#: Line colors in order: the candidate first, then the baselines (tab10).
COLORS = (
    "#d62728",
    "#1f77b4",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def new_figure(width: float = 6.4, height: float = 4.0, dpi: int = 100) -> Any:
    """A :class:`~matplotlib.figure.Figure` attached to an Agg canvas.

    Args:
      width: inches.
      height: inches.
      dpi: dots per inch.

    Returns:
      The figure (not registered with pyplot).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Any, path: str | os.PathLike) -> Path:
    """Lays out ``fig`` and writes it as PNG to ``path`` (parents created).

    Args:
      fig: a figure from :func:`new_figure`.
      path: the PNG file.

    Returns:
      ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


#: A log axis only for values spanning more than this factor (:func:`use_log_scale`):
#: over a narrower range a log axis has one or no labelled decade and reads badly
#: (ticks such as ``2x10^0``).
LOG_SCALE_RATIO = 10.0


def use_log_scale(values: np.ndarray, ratio: float = LOG_SCALE_RATIO) -> bool:
    """Log scale for non-negative values spanning more than a factor of ``ratio``.

    Zeros and non-finite values are ignored; any negative value means a linear axis.

    Args:
      values: the values to be plotted.
      ratio: the smallest ``max / min`` of the positive values that calls for a log axis.

    Returns:
      Whether a log y axis suits them.
    """
    values = np.asarray(values, np.float64)
    finite = values[np.isfinite(values)]
    positive = finite[finite > 0]
    if finite.size == 0 or np.any(finite < 0) or positive.size == 0:
        return False
    return bool(positive.max() > ratio * positive.min())


def legend_outside(ax: Any, **kwargs: Any) -> Any:
    """A legend to the right of ``ax``, off the data (:func:`save_figure` makes room).

    Args:
      ax: the matplotlib axes.
      **kwargs: more ``ax.legend`` arguments (``handles=``, ``labels=``, ``fontsize=``).

    Returns:
      The legend.
    """
    kwargs.setdefault("fontsize", 8)
    return ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kwargs)


def plot_mean_band(
    ax: Any,
    steps: Sequence[float],
    runs: Any,
    *,
    label: str,
    color: str,
    band: bool = True,
    lw: float = 1.6,
) -> None:
    """Plots the mean over runs (``runs[seed, step]``) and a min-max band over runs.

    Non-finite points (diverged runs) are left out of the mean of each step.

    Args:
      ax: the matplotlib axes.
      steps: the x values.
      runs: ``[seeds, steps]`` (or ``[steps]``) values.
      label: the legend label.
      color: the line and band color.
      band: whether to draw the min-max band (with more than one run).
      lw: the line width.
    """
    runs = np.asarray(runs, np.float64)
    if runs.ndim == 1:
        runs = runs[None]
    steps = np.asarray(steps)
    finite = np.isfinite(runs)
    count = finite.sum(axis=0)
    safe = np.where(finite, runs, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, safe.sum(axis=0) / np.maximum(count, 1), np.nan)
    ax.plot(steps, mean, color=color, lw=lw, label=label)
    if band and runs.shape[0] > 1:
        lo = np.where(finite, runs, np.inf).min(axis=0)
        hi = np.where(finite, runs, -np.inf).max(axis=0)
        ok = count > 0
        ax.fill_between(steps[ok], lo[ok], hi[ok], color=color, alpha=0.15, lw=0)


def line_plot(
    path: str | os.PathLike,
    x: Sequence[float],
    ys: Mapping[str, Sequence[float]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
    logy: bool | None = None,
    reference: float | None = None,
) -> Path:
    """Curves ``ys[label]`` against ``x`` into a PNG, the legend beside the axes.

    Args:
      path: the PNG file.
      x: the x values.
      ys: the curves by label (non-finite points are skipped).
      xlabel: the x axis label.
      ylabel: the y axis label.
      title: the title (default: ``"<ylabel> by <xlabel>"``: every figure has one).
      logy: a log y axis; ``None`` picks one for non-negative values that span more
        than a factor of :data:`LOG_SCALE_RATIO` (:func:`use_log_scale`).
      reference: a value marked by a dashed horizontal line (e.g. 1 on a plot of
        ratios), or ``None``.

    Returns:
      The path of the PNG.
    """
    fig = new_figure(8.0 if len(ys) > 1 else 6.4, 4.0)
    ax = fig.add_subplot()
    x = np.asarray(x)
    all_values = np.concatenate([np.asarray(y, np.float64).ravel() for y in ys.values()])
    log = use_log_scale(all_values) if logy is None else logy
    for i, (label, y) in enumerate(ys.items()):
        y = np.asarray(y, np.float64)
        ok = np.isfinite(y) & ((y > 0) if log else True)
        ax.plot(x[ok], y[ok], lw=1.2, color=COLORS[i % len(COLORS)], label=label)
    if reference is not None:
        ax.axhline(reference, color="k", ls="--", lw=0.9, zorder=1.5)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title or f"{ylabel} by {xlabel}")
    if len(ys) > 1:
        legend_outside(ax)
    ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)


def meta_train_plots(out_dir: str | os.PathLike, columns: Mapping[str, Any]) -> list[Path]:
    """``meta_loss.png`` and (if theta has a learning rate) ``learning_rate.png``.

    ``columns`` is a run's metrics.csv as arrays (:func:`learnopt.train.read_metrics`):
    ``step``, ``meta_loss``, optionally ``learning_rate`` and ``skipped``. The meta-loss is
    drawn with a running mean over about 2% of the run; skipped
    (non-finite) steps are marked along the bottom edge.

    Args:
      out_dir: the run's folder.
      columns: metrics.csv's columns as arrays.

    Returns:
      The paths written.
    """
    out_dir = Path(out_dir)
    steps = np.asarray(columns["step"])
    written = []
    loss = np.asarray(columns["meta_loss"], np.float64)
    fig = new_figure()
    ax = fig.add_subplot()
    log = use_log_scale(loss)
    ok = np.isfinite(loss) & ((loss > 0) if log else True)
    ax.plot(steps[ok], loss[ok], lw=0.8, alpha=0.5, color=COLORS[1], label="meta-loss")
    window = max(1, len(loss) // 50)
    if window > 1 and ok.sum() > window:
        smooth = np.convolve(loss[ok], np.ones(window) / window, mode="valid")
        ax.plot(
            steps[ok][window - 1 :],
            smooth,
            lw=1.5,
            color=COLORS[0],
            label=f"running mean ({window} steps)",
        )
    skipped = np.asarray(columns.get("skipped", np.zeros(len(steps))), np.float64) > 0
    if skipped.any():
        ax.plot(
            steps[skipped],
            np.full(skipped.sum(), 0.02),
            "|",
            color="k",
            transform=ax.get_xaxis_transform(),
            label=f"skipped ({int(skipped.sum())})",
        )
    if log:
        ax.set_yscale("log")
    if window > 1 or skipped.any():
        ax.legend(loc="best", fontsize=8, framealpha=0.9)
    ax.set_xlabel("meta-step")
    ax.set_ylabel("meta-loss")
    ax.set_title("meta-loss")
    ax.grid(True, which="both", alpha=0.3)
    written.append(save_figure(fig, out_dir / "meta_loss.png"))
    lr = columns.get("learning_rate")
    if lr is not None and np.isfinite(np.asarray(lr, np.float64)).any():
        lr = np.asarray(lr, np.float64)
        written.append(
            line_plot(
                out_dir / "learning_rate.png",
                steps,
                {"learning rate": lr},
                xlabel="meta-step",
                ylabel="learning rate",
                title="learned learning rate",
                logy=bool(np.all(lr[np.isfinite(lr)] > 0)),
            )
        )
    return written
