"""Plots as PNG files, drawn on matplotlib's Agg canvas (no display, no pyplot state).

Every function here builds its own :class:`matplotlib.figure.Figure`, so plotting is
safe from threads, in tests and on machines without a display, and never touches
pyplot's global figure list. matplotlib is imported when a function runs, not when
this module is imported.

* :func:`new_figure` / :func:`save_figure`: the two halves every plot shares;
* :func:`plot_mean_band`: seed-mean curve with a min-max band over seeds;
* :func:`line_plot`: one or more curves into a PNG (linear or log y);
* :func:`eval_task_figure`: an evaluated task, candidate vs tuned baselines
  (train and valid loss), written by ``learnopt evaluate``;
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
    "eval_task_figure",
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
    """A :class:`~matplotlib.figure.Figure` attached to an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Any, path: str | os.PathLike) -> Path:
    """Lays out ``fig`` and writes it as PNG to ``path`` (parents created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def _use_log(values: np.ndarray) -> bool:
    """Log scale for non-negative values spanning more than a factor of 30 (zeros hidden)."""
    finite = values[np.isfinite(values)]
    positive = finite[finite > 0]
    if finite.size == 0 or np.any(finite < 0) or positive.size == 0:
        return False
    return bool(positive.max() > 30 * positive.min())


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
) -> Path:
    """Curves ``ys[label]`` against ``x`` into a PNG; ``logy=None`` picks a log scale for
    non-negative values that span more than a factor of 30."""
    fig = new_figure()
    ax = fig.add_subplot()
    x = np.asarray(x)
    all_values = np.concatenate([np.asarray(y, np.float64).ravel() for y in ys.values()])
    log = _use_log(all_values) if logy is None else logy
    for i, (label, y) in enumerate(ys.items()):
        y = np.asarray(y, np.float64)
        ok = np.isfinite(y) & ((y > 0) if log else True)
        ax.plot(x[ok], y[ok], lw=1.2, color=COLORS[i % len(COLORS)], label=label)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if len(ys) > 1:
        ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, path)


def _ylim(ax: Any, curves: list[np.ndarray], log: bool) -> None:
    """Limits from the best value seen to the curves' level after the first 10 %."""
    lows, highs = [], []
    for c in curves:
        finite = c[np.isfinite(c) & ((c > 0) if log else True)]
        if finite.size:
            lows.append(finite.min())
            start = c[..., max(1, c.shape[-1] // 10) :]
            start = start[np.isfinite(start)]
            if start.size:
                highs.append(np.max(start))
    if not lows or not highs:
        return
    lo, hi = min(lows), max(highs)
    if log and lo > 0 and hi > lo:
        ax.set_ylim(lo / 1.1, hi * 1.1)
    elif hi > lo:
        pad = 0.05 * (hi - lo)
        ax.set_ylim(lo - pad, hi + pad)


def eval_task_figure(result: Any, summary: Any, path: str | os.PathLike) -> Path:
    """Candidate vs tuned baselines on one task: train loss (smoothed) and valid loss.

    Each line is the mean over seeds, the band the range over seeds. Baselines are
    shown at their tuned learning rate.

    Args:
      result: a :class:`learnopt.eval.TaskResult`.
      summary: its :class:`learnopt.eval.TaskSummary`.
      path: where the PNG goes.
    """
    from learnopt import eval as lopt_eval

    smoothing, _ = lopt_eval.windows(result.num_steps)
    fig = new_figure(11.0, 4.2)
    ax_train, ax_valid = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    picks = [(summary.candidate, 0, f"{summary.candidate} (candidate)")]
    for name, b in summary.baselines.items():
        picks.append((name, b.index, f"{name} ({b.label}{', edge' if b.at_edge else ''})"))
    train_all, valid_all = [], []
    # Baselines first, the candidate last so that it is drawn on top.
    for i, (name, index, label) in reversed(list(enumerate(picks))):
        curves = result.curves[name]
        train = lopt_eval.smooth(curves.train_loss[index], smoothing)
        valid = np.asarray(curves.valid_loss[index], np.float64)
        color, lw = COLORS[i % len(COLORS)], (2.2 if i == 0 else 1.4)
        steps = np.arange(train.shape[-1])
        plot_mean_band(ax_train, steps, train, label=label, color=color, lw=lw)
        plot_mean_band(ax_valid, curves.valid_steps, valid, label=label, color=color, lw=lw)
        train_all.append(train)
        valid_all.append(valid)
    for ax, values, ylabel in (
        (ax_train, train_all, f"train loss (trailing mean of {smoothing})"),
        (ax_valid, valid_all, f"{result.valid_split} loss"),
    ):
        log = _use_log(np.concatenate([v.ravel() for v in values]))
        if log:
            ax.set_yscale("log")
        _ylim(ax, values, log)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax_train.get_legend_handles_labels()
    ax_train.legend(handles[::-1], labels[::-1], fontsize=8)  # the candidate first
    fig.suptitle(
        f"{result.task}: {summary.candidate} vs tuned baselines "
        f"({result.num_seeds} seeds, band = range over seeds)",
        fontsize=10,
    )
    return save_figure(fig, path)


def meta_train_plots(out_dir: str | os.PathLike, columns: Mapping[str, Any]) -> list[Path]:
    """``meta_loss.png`` and (if theta has a learning rate) ``learning_rate.png``.

    ``columns`` is a run's metrics.csv as arrays (:func:`learnopt.train.read_metrics`):
    ``step``, ``meta_loss``, optionally ``learning_rate`` and ``skipped``. The meta-loss is
    drawn on a log scale with a running mean over about 2% of the run; skipped
    (non-finite) steps are marked along the bottom edge.
    """
    out_dir = Path(out_dir)
    steps = np.asarray(columns["step"])
    written = []
    loss = np.asarray(columns["meta_loss"], np.float64)
    fig = new_figure()
    ax = fig.add_subplot()
    ok = np.isfinite(loss) & (loss > 0)
    ax.semilogy(steps[ok], loss[ok], lw=0.8, alpha=0.5, color=COLORS[1], label="meta-loss")
    window = max(1, len(loss) // 50)
    if window > 1 and ok.sum() > window:
        smooth = np.convolve(loss[ok], np.ones(window) / window, mode="valid")
        ax.semilogy(
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
    if window > 1 or skipped.any():
        ax.legend()
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
