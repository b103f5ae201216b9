"""metrics.csv: one row per meta-step, written as the run goes, read back for plots.

Columns: ``step, meta_loss, learning_rate, grad_norm, num_nonfinite, finite, skipped,
update_norm``; with several task families (one estimator each), ``<i>_<estimator>/meta_loss``
and ``<i>_<estimator>/grad_norm`` for each, ``<i>`` its position in the run's families
(the family's own meta-loss and the norm of its own estimate, before they are combined);
then ``theta/<name>`` for every scalar of theta. Floats are written with ``repr``
(round-trips float32 exactly); empty cells are missing values.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from learnopt import checkpoints, plots

__all__ = [
    "MetricsFile",
    "read_metrics",
    "BASE_COLUMNS",
    "theta_columns",
    "family_columns",
    "families_plot",
    "summary",
    "cell",
    "scalar",
]

#: Columns of metrics.csv before the ``theta/<name>`` columns.
BASE_COLUMNS = (
    "step",
    "meta_loss",
    "learning_rate",
    "grad_norm",
    "num_nonfinite",
    "finite",
    "skipped",
    "update_norm",
)


class MetricsFile:
    """metrics.csv: rows appended every flush, fsynced before each checkpoint.

    Args:
      path: the CSV file.
      columns: the header's column names, in order.
    """

    def __init__(self, path: Path, columns: list[str]):
        self.path = path
        self.columns = columns
        self._file: io.TextIOWrapper | None = None
        self._writer: Any = None

    def open(self, keep_rows: int) -> list[list[str]]:
        """Starts the file: the header and the first ``keep_rows`` rows of the old one.

        Args:
          keep_rows: the rows a resumed run keeps (its checkpoint's step); 0: a new file.

        Returns:
          The kept rows, as lists of strings.
        """
        rows: list[list[str]] = []
        if keep_rows and self.path.exists():
            with open(self.path, newline="") as f:
                reader = csv.reader(f)
                header = next(reader, None)
                if header is None or not set(header) <= set(self.columns):
                    raise ValueError(
                        f"resume: {self.path} has columns {header}, this run writes {self.columns}"
                    )
                for row in reader:
                    if len(rows) == keep_rows:
                        break
                    if len(row) == len(header):
                        # a file written before some columns existed: those cells empty
                        cells = dict(zip(header, row, strict=True))
                        rows.append([cells.get(c, "") for c in self.columns])
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(self.columns)
        writer.writerows(rows)
        checkpoints.write_atomic(self.path, buf.getvalue().encode())
        self._file = open(self.path, "a", newline="")
        self._writer = csv.writer(self._file)
        return rows

    def write(self, rows: list[list[str]]) -> None:
        """Appends ``rows`` and flushes them to the operating system.

        Args:
          rows: one list of cells per meta-step, in ``columns`` order.
        """
        self._writer.writerows(rows)
        self._file.flush()

    def sync(self) -> None:
        """Makes the rows written so far durable (before a checkpoint names their step)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Closes the file (errors ignored: the rows are already flushed)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None


def read_metrics(path: str | os.PathLike) -> dict[str, Any]:
    """metrics.csv as arrays.

    Args:
      path: a run's metrics.csv.

    Returns:
      ``{column: float64 array}``; empty cells are NaN, partly written rows are skipped.
    """
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        data = [row for row in reader if len(row) == len(header)]
    cols: dict[str, Any] = {}
    for i, name in enumerate(header):
        cols[name] = np.asarray([float(r[i]) if r[i] != "" else np.nan for r in data])
    return cols


def cell(value: Any) -> str:
    """A CSV cell.

    Args:
      value: a number, a string or None.

    Returns:
      Floats with ``repr`` (round-trips float32 exactly), ``""`` for None.
    """
    if value is None:
        return ""
    return repr(value) if isinstance(value, float | int) else str(value)


def scalar(value: Any) -> float | int | None:
    """A metric fetched from the device as a Python number.

    Args:
      value: a numpy or JAX scalar, a Python number, or None.

    Returns:
      An ``int`` for booleans, else the number (None stays None).
    """
    if value is None:
        return None
    v = value.item() if hasattr(value, "item") else value
    return int(v) if isinstance(v, bool) else v


def family_columns(prefixes: list[str]) -> list[str]:
    """The per-family columns of a run with several estimators (none for one).

    Args:
      prefixes: each estimator's metric prefix
        (:func:`learnopt.outer_trainers.worker.metric_prefix`), in order.

    Returns:
      ``<prefix>/meta_loss`` and ``<prefix>/grad_norm`` for each, when there are several.
    """
    if len(prefixes) < 2:
        return []
    return [f"{p}/{name}" for p in prefixes for name in ("meta_loss", "grad_norm")]


def _running_mean(steps: np.ndarray, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """The finite points of ``y`` and their running mean over about 2% of them."""
    y = np.asarray(y, np.float64)
    ok = np.isfinite(y)
    x, y = steps[ok], y[ok]
    window = max(1, len(y) // 50)
    if window > 1:
        y = np.convolve(y, np.ones(window) / window, mode="valid")
        x = x[window - 1 :]
    return x, y


def families_plot(
    out_dir: str | os.PathLike,
    steps: np.ndarray,
    columns: Mapping[str, Any],
    prefixes: Sequence[str],
    labels: Mapping[str, str],
) -> Path:
    """``families.png``: each family's meta-loss and the norm of its own estimate.

    Running means over about 2% of the run, to see which family's estimate is largest
    (the one an unbalanced average follows). Kept out of :mod:`learnopt.plots`, whose
    source is part of the evaluation's baseline cache key.

    Args:
      out_dir: the run's folder.
      steps: the ``step`` column.
      columns: metrics.csv's columns as arrays, with ``<prefix>/grad_norm`` (and
        ``<prefix>/meta_loss``) for each prefix.
      prefixes: the families' column prefixes (:func:`family_columns`).
      labels: a legend name for each prefix (default: the prefix).

    Returns:
      The path of the PNG.
    """
    fig = plots.new_figure(11.0, 4.0)
    loss_ax, norm_ax = fig.subplots(1, 2)
    for i, p in enumerate(prefixes):
        color = plots.COLORS[i % len(plots.COLORS)]
        label = labels.get(p, p)
        if f"{p}/meta_loss" in columns:
            loss_ax.plot(*_running_mean(steps, columns[f"{p}/meta_loss"]), color=color, lw=1.2)
        x, y = _running_mean(steps, columns[f"{p}/grad_norm"])
        norm_ax.plot(x[y > 0], y[y > 0], color=color, lw=1.2, label=label)
    loss_ax.set_title("each family's meta-loss (running mean)")
    loss_ax.set_ylabel("meta-loss")
    norm_ax.set_title("norm of each family's estimate (running mean)")
    norm_ax.set_ylabel("estimate norm")
    norm_ax.set_yscale("log")
    for ax in (loss_ax, norm_ax):
        ax.set_xlabel("meta-step")
        ax.grid(True, which="both", alpha=0.3)
    plots.legend_outside(norm_ax, fontsize=8)
    return plots.save_figure(fig, Path(out_dir) / "families.png")


def theta_columns(theta: Any) -> list[str]:
    """The ``theta/<name>`` columns of a theta: one per scalar entry of a dict theta.

    Args:
      theta: the learned optimizer's theta.

    Returns:
      The column names, sorted (none for a theta that is not a dict).
    """
    if not isinstance(theta, dict):
        return []
    return sorted(f"theta/{k}" for k, v in theta.items() if getattr(v, "shape", None) == ())


def _window_mean(values: Any, window: int, last: bool) -> float:
    values = np.asarray(values, np.float64)
    part = values[-window:] if last else values[:window]
    part = part[np.isfinite(part)]
    return float(part.mean()) if part.size else float("nan")


def summary(name: str, cols: dict[str, Any], elapsed: float, out: Path | None) -> str:
    """The one-line summary a run prints at its end.

    Args:
      name: what was meta-trained (``"LearnableAdam on QuadraticTask (full_grad)"``).
      cols: the metrics columns (:func:`read_metrics`).
      elapsed: seconds of this session.
      out: the output folder, or None.

    Returns:
      ``"<name>: meta-loss a -> b (mean of the first/last N steps), ..."``.
    """
    meta_loss = cols.get("meta_loss", np.zeros(0))
    n = len(meta_loss)
    if not n:
        return f"{name}: no meta-step done"
    window = max(1, min(100, n // 10))
    first, last = _window_mean(meta_loss, window, False), _window_mean(meta_loss, window, True)
    text = (
        f"{name}: meta-loss {first:.4f} -> {last:.4f} (mean of the first/last {window} "
        f"step{'s' if window > 1 else ''})"
    )
    lr = cols.get("learning_rate")
    if lr is not None and np.all(np.isfinite(lr)):
        text += f", learning rate {lr[0]:.3g} -> {lr[-1]:.3g}"
    skipped = int(np.nansum(cols["skipped"])) if "skipped" in cols else 0
    text += f", {skipped} non-finite step{'s' if skipped != 1 else ''} skipped; {n} steps"
    text += f" ({elapsed:.1f} s this session)"
    if out is not None:
        text += f"; wrote {out}"
    return text
