"""The files an evaluation writes: CSV tables, every curve, the summary and the plots.

:func:`write_results` writes an evaluated suite into a folder: ``summary.csv`` (one row
per task and optimizer, :func:`summary_rows`), ``sweep.csv`` (every learning rate of
every baseline, :func:`sweep_rows`), ``curves.csv`` (the candidate and each tuned
baseline per seed, long format, :func:`curve_rows`), ``summary.md``
(:meth:`~learnopt.evaluation.results.SuiteResult.markdown`), ``curves.npz`` (every curve
of every sweep point) and ``curves_<task>.png`` (:mod:`learnopt.evaluation.figures`).
:class:`TensorBoardReport` writes the same curves and figures as TensorBoard events
(``learnopt evaluate --tensorboard DIR``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from learnopt.evaluation.results import Curves, SuiteResult

__all__ = [
    "SUMMARY_COLUMNS",
    "CURVE_COLUMNS",
    "summary_rows",
    "sweep_rows",
    "curve_rows",
    "write_results",
    "plot_name",
    "file_safe",
    "csv_cell",
    "TensorBoardReport",
]

SUMMARY_COLUMNS = (
    "task",
    "optimizer",
    "role",
    "setting",
    "learning_rate",
    "final_train",
    "final_train_std",
    "mean_train",
    "final_valid",
    "diverged_seeds",
    "at_edge",
    "normalized_loss",
    "speedup",
    "reaches_final",
    "wins",
    "wins_valid",
    "log_loss_diff",
    "normalized_valid",
    "log_valid_diff",
    "seeds_won",
    "seeds_won_valid",
)

CURVE_COLUMNS = ("task", "optimizer", "setting", "seed", "split", "step", "loss")


def _lr_of(curves: Curves, index: int) -> float | str:
    lrs = curves.values.get("learning_rate")
    return lrs[index] if lrs else ""


#: The summary columns read as they are from an optimizer's statistics and from its
#: comparison with the candidate.
_STATS_COLUMNS = ("final_train", "final_train_std", "mean_train", "final_valid")
_COMPARISON_COLUMNS = (
    "normalized_loss",
    "speedup",
    "log_loss_diff",
    "normalized_valid",
    "log_valid_diff",
)


def _row(task, optimizer, role, setting, lr, stats, at_edge, comp) -> dict[str, Any]:
    """One row of :func:`summary_rows`: an optimizer's figures and its comparison."""
    row = dict(task=task, optimizer=optimizer, role=role, setting=setting, learning_rate=lr)
    row.update(diverged_seeds=stats.diverged, at_edge=at_edge, reaches_final=int(comp.reaches))
    row.update(wins=int(comp.wins), wins_valid=int(comp.wins_valid))
    row.update(seeds_won=comp.seeds_won, seeds_won_valid=comp.seeds_won_valid)
    row.update({column: getattr(stats, column) for column in _STATS_COLUMNS})
    row.update({column: getattr(comp, column) for column in _COMPARISON_COLUMNS})
    return {column: row[column] for column in SUMMARY_COLUMNS}


def summary_rows(result: SuiteResult) -> list[dict[str, Any]]:
    """One row per task and optimizer: the candidate, then every tuned baseline.

    Rows of baselines hold their comparison with the candidate (``normalized_loss``
    etc. are the candidate's figures against that baseline).

    Args:
      result: an evaluated suite.

    Returns:
      One dict per row, keyed by :data:`SUMMARY_COLUMNS`.
    """
    rows = []
    for task_result, s in zip(result.tasks, result.summaries, strict=True):
        c = s.candidate_stats
        rows.append(_row(s.task, s.candidate, "candidate", c.label, "", c, "", s.vs_best))
        for name, b in s.baselines.items():
            role = "best baseline" if name == s.best_baseline else "baseline"
            lr = _lr_of(task_result.curves[name], b.index)
            rows.append(
                _row(s.task, name, role, b.label, lr, b.stats, int(b.at_edge), s.comparisons[name])
            )
    return rows


def sweep_rows(result: SuiteResult) -> list[dict[str, Any]]:
    """One row per task, baseline and learning rate (the whole sweep).

    Args:
      result: an evaluated suite.

    Returns:
      One dict per row (``selected`` marks the tuned learning rate).
    """
    rows = []
    for task_result, s in zip(result.tasks, result.summaries, strict=True):
        for name, b in s.baselines.items():
            curves = task_result.curves[name]
            for i, p in enumerate(b.grid):
                rows.append(
                    dict(
                        task=s.task,
                        optimizer=name,
                        setting=p.label,
                        learning_rate=_lr_of(curves, i),
                        final_train=p.final_train,
                        final_train_std=p.final_train_std,
                        mean_train=p.mean_train,
                        final_valid=p.final_valid,
                        diverged_seeds=p.diverged,
                        selected=int(i == b.index),
                    )
                )
    return rows


def curve_rows(result: SuiteResult) -> Iterable[tuple]:
    """Long-format curves of the candidate and each tuned baseline, per seed.

    ``split`` is ``train`` (minibatch loss before update ``step + 1``) or the valid
    split's name (loss after ``step`` updates).

    Args:
      result: an evaluated suite.

    Yields:
      Tuples of :data:`CURVE_COLUMNS`.
    """
    for task_result, s in zip(result.tasks, result.summaries, strict=True):
        picks = [(s.candidate, 0)] + [(n, b.index) for n, b in s.baselines.items()]
        for name, index in picks:
            curves = task_result.curves[name]
            label = curves.labels[index]
            train = curves.train_loss[index]
            valid = curves.valid_loss[index]
            for seed in range(train.shape[0]):
                for step, loss in enumerate(train[seed].tolist()):
                    yield (s.task, name, label, seed, "train", step, loss)
                for step, loss in zip(
                    curves.valid_steps.tolist(), valid[seed].tolist(), strict=True
                ):
                    yield (s.task, name, label, seed, task_result.valid_split, step, loss)


def csv_cell(value: Any) -> str:
    """A value as a CSV cell: floats exactly (``repr``), NaN as an empty cell.

    Args:
      value: a number or text.

    Returns:
      The cell's text.
    """
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(value)
    return str(value)


def write_results(
    result: SuiteResult,
    out_dir: Any,
    *,
    plots: bool | Sequence[str] = True,
    note: str = "",
) -> dict[str, Any]:
    """Writes ``summary.csv``, ``sweep.csv``, ``curves.csv``, ``summary.md``,
    ``curves.npz`` (every curve of every sweep point) and ``curves_<task>.png``.

    Args:
      result: an evaluated suite (or the tasks of one done so far).
      out_dir: the folder (created if needed); files of the same names are replaced.
      plots: whether to draw ``curves_<task>.png``, or the names of the tasks to draw.
      note: a line written above the tables of ``summary.md`` (none if empty).

    Returns:
      ``{file name: path}``; ``"plots"``: the list of PNG paths.
    """
    import csv

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Any] = {}

    def write_csv(name: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
        path = out / name
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            for row in rows:
                writer.writerow([csv_cell(v) for v in row])
        written[name] = path

    write_csv(
        "summary.csv",
        SUMMARY_COLUMNS,
        ([r[c] for c in SUMMARY_COLUMNS] for r in summary_rows(result)),
    )
    sweep_cols = tuple(sweep_rows(result)[0]) if result.summaries else ()
    write_csv("sweep.csv", sweep_cols, ([r[c] for c in sweep_cols] for r in sweep_rows(result)))
    write_csv("curves.csv", CURVE_COLUMNS, curve_rows(result))
    md = out / "summary.md"
    md.write_text(f"{note}\n\n{result.markdown()}" if note else result.markdown())
    written["summary.md"] = md

    arrays = {}
    for task_result in result.tasks:
        for name, c in task_result.curves.items():
            prefix = f"{task_result.task}/{name}"
            arrays[f"{prefix}/train_loss"] = c.train_loss
            arrays[f"{prefix}/valid_loss"] = c.valid_loss
            arrays[f"{prefix}/valid_steps"] = c.valid_steps
            arrays[f"{prefix}/labels"] = np.asarray(c.labels)
    npz = out / "curves.npz"
    np.savez_compressed(npz, **arrays)
    written["curves.npz"] = npz

    if plots:
        from learnopt.evaluation import figures  # matplotlib only when plots are drawn

        drawn = None if plots is True else set(plots)
        written["plots"] = [
            figures.eval_task_figure(t, s, out / plot_name(t.task))
            for t, s in zip(result.tasks, result.summaries, strict=True)
            if drawn is None or t.task in drawn
        ]
    return written


class TensorBoardReport:
    """An evaluation as TensorBoard events: one run (subfolder) per optimizer.

    For each task added, the candidate and each tuned baseline (at its tuned setting) get
    the seed-mean curves ``train_loss/<task>`` (per step) and ``<split>_loss/<task>``
    (at the valid evaluations); the candidate's run also gets the task's figures against
    the best baseline (``summary/<figure>/<task>``, at step ``num_steps``) and the suite's
    so far (``suite/<figure>``, at step = tasks done). Non-finite values are left out.

    Args:
      logdir: the folder; each optimizer writes into ``logdir/<optimizer>``.
    """

    FIGURES = ("normalized_loss", "speedup", "log_loss_diff", "normalized_valid")
    SUITE_FIGURES = ("wins", "geomean_normalized_loss", "geomean_speedup", "mean_log_loss_diff")

    def __init__(self, logdir: str | Path):
        from learnopt import tensorboard

        self.logdir = Path(logdir)
        self._tb = tensorboard
        self._writers: dict[str, Any] = {}
        tensorboard.require()  # fails before any training when the extra is missing

    def _writer(self, name: str) -> Any:
        if name not in self._writers:
            self._writers[name] = self._tb.summary_writer(self.logdir / file_safe(name))
        return self._writers[name]

    def add_task(self, result: SuiteResult) -> None:
        """Writes the last task of ``result`` (the suite so far) and the suite's figures.

        Args:
          result: the evaluated tasks so far; the last one is written.
        """
        t, s = result.tasks[-1], result.summaries[-1]
        picks = [(s.candidate, 0)] + [(n, b.index) for n, b in s.baselines.items()]
        for name, index in picks:
            w = self._writer(name)
            c = t.curves[name]
            with np.errstate(all="ignore"):
                train = _finite_mean(c.train_loss[index])
                valid = _finite_mean(c.valid_loss[index])
            for step, value in enumerate(train.tolist()):
                if math.isfinite(value):
                    w.add_scalar(f"train_loss/{t.task}", value, step)
            for step, value in zip(c.valid_steps.tolist(), valid.tolist(), strict=True):
                if math.isfinite(value):
                    w.add_scalar(f"{t.valid_split}_loss/{t.task}", value, step)
        w = self._writer(s.candidate)
        for figure in self.FIGURES:
            value = float(getattr(s.vs_best, figure))
            if math.isfinite(value):
                w.add_scalar(f"summary/{figure}/{t.task}", value, t.num_steps)
        best = result.aggregate()["best"]
        for figure in self.SUITE_FIGURES:
            value = float(best[figure])
            if math.isfinite(value):
                w.add_scalar(f"suite/{figure}", value, len(result.tasks))
        for writer in self._writers.values():
            writer.flush()

    def close(self) -> None:
        """Closes every event file."""
        for writer in self._writers.values():
            writer.close()
        self._writers.clear()


def _finite_mean(runs: np.ndarray) -> np.ndarray:
    """The mean over seeds (axis 0) of the finite values; NaN where there is none."""
    runs = np.asarray(runs, np.float64)
    finite = np.isfinite(runs)
    count = finite.sum(axis=0)
    total = np.where(finite, runs, 0.0).sum(axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def plot_name(task: str) -> str:
    """The file name of a task's figure, ``curves_<task>.png``.

    Args:
      task: the task's name.

    Returns:
      The file name, with :func:`file_safe` characters.
    """
    return f"curves_{file_safe(task)}.png"


def file_safe(name: str) -> str:
    """``name`` with every character but letters, digits and ``-_.`` replaced by ``_``.

    Args:
      name: a task or sweep name.

    Returns:
      A name safe in file names.
    """
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
