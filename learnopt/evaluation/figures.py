"""The figure of an evaluated task: the candidate against the tuned baselines.

``learnopt evaluate`` writes one per task (``curves_<task>.png``, through
:func:`learnopt.evaluation.report.write_results`). Drawn with the generic pieces of
:mod:`learnopt.plots` on an Agg canvas; matplotlib is imported when a figure is drawn.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from learnopt import plots
from learnopt.evaluation.metrics import smooth, windows
from learnopt.evaluation.results import TaskResult, TaskSummary

__all__ = ["eval_task_figure"]


def eval_task_figure(result: TaskResult, summary: TaskSummary, path: str | os.PathLike) -> Path:
    """Candidate vs tuned baselines on one task: train loss (smoothed) and valid loss.

    Each line is the mean over seeds, the band the range over seeds. Baselines are
    shown at their tuned learning rate. Each panel has a title and a log axis only for
    losses spanning more than :data:`learnopt.plots.LOG_SCALE_RATIO`; the legend sits
    beside the panels.

    Args:
      result: a :class:`~learnopt.evaluation.results.TaskResult`.
      summary: its :class:`~learnopt.evaluation.results.TaskSummary`.
      path: where the PNG goes.

    Returns:
      The path of the PNG.
    """
    smoothing, _ = windows(result.num_steps)
    fig = plots.new_figure(13.5, 4.2)
    ax_train, ax_valid = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    picks = [(summary.candidate, 0, f"{summary.candidate} (candidate)")]
    for name, b in summary.baselines.items():
        picks.append((name, b.index, f"{name} ({b.label}{', edge' if b.at_edge else ''})"))
    train_all, valid_all = [], []
    # Baselines first, the candidate last so that it is drawn on top.
    for i, (name, index, label) in reversed(list(enumerate(picks))):
        curves = result.curves[name]
        train = smooth(curves.train_loss[index], smoothing)
        valid = np.asarray(curves.valid_loss[index], np.float64)
        color, lw = plots.COLORS[i % len(plots.COLORS)], (2.2 if i == 0 else 1.4)
        steps = np.arange(train.shape[-1])
        plots.plot_mean_band(ax_train, steps, train, label=label, color=color, lw=lw)
        plots.plot_mean_band(ax_valid, curves.valid_steps, valid, label=label, color=color, lw=lw)
        train_all.append(train)
        valid_all.append(valid)
    for ax, values, ylabel, title in (
        (ax_train, train_all, f"train loss (trailing mean of {smoothing})", "train loss"),
        (ax_valid, valid_all, f"{result.valid_split} loss", f"{result.valid_split} loss"),
    ):
        ax.set_title(title, fontsize=10)
        log = plots.use_log_scale(np.concatenate([v.ravel() for v in values]))
        if log:
            ax.set_yscale("log")
        _ylim(ax, values, log)
        ax.set_xlabel("step")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = ax_train.get_legend_handles_labels()
    # Beside the valid-loss axes, off the curves; the candidate first.
    plots.legend_outside(ax_valid, handles=handles[::-1], labels=labels[::-1])
    fig.suptitle(
        f"{result.task}: {summary.candidate} vs tuned baselines "
        f"({result.num_seeds} seeds, band = range over seeds)",
        fontsize=10,
    )
    return plots.save_figure(fig, path)


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
