"""What an evaluation produced: curves per task and sweep, and their summaries.

* :class:`Curves` (one sweep on one task) and :class:`TaskResult` (every sweep on one
  task) hold what the training engine recorded:

  * ``train_loss[h, s, t]``: the minibatch loss at step ``t`` (the loss whose gradient
    made update ``t + 1``, measured before it), every step;
  * ``valid_loss[h, s, e]``: the mean loss over ``valid_batches`` *fixed* batches of the
    ``valid_split`` split (default ``outer_valid``, the library's evaluation split;
    drawn once per task, shared by all runs), after ``valid_steps[e]`` updates: at step
    0, every ``eval_every`` steps and at the end.

* :func:`summarize_task` turns a task's curves into a :class:`TaskSummary`: seed-mean
  :class:`PointStats` of every sweep point, the **tuned baseline** of each baseline
  (:class:`TunedBaseline`: the learning rate with the lowest ``final_train``,
  ``select_by="final"``, the library's choice, or ``mean_train``, ``select_by="mean"``;
  ``at_edge`` says whether it is the smallest or largest of the grid, then the grid
  should be widened) and the candidate's :class:`Comparison` with each (normalized
  loss, speed-up, wins; :mod:`learnopt.evaluation.metrics` defines them).
* :class:`SuiteResult`: every task's result and summary; :meth:`SuiteResult.aggregate`
  counts the tasks won against each tuned baseline and against the best of them per
  task, with geometric means; :meth:`SuiteResult.markdown` is the summary as tables.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from learnopt.evaluation.metrics import finite_or_nan, geomean, rank_key, speedup, windows

__all__ = [
    "Curves",
    "TaskResult",
    "PointStats",
    "TunedBaseline",
    "Comparison",
    "TaskSummary",
    "SuiteResult",
    "summarize_task",
    "seed_finals",
    "summary_markdown",
]


@dataclasses.dataclass
class Curves:
    """The loss curves of one sweep on one task (numpy, float32).

    Attributes:
      name, labels, values: as in the :class:`~learnopt.evaluation.sweeps.Sweep`.
      train_loss: ``[points, seeds, num_steps]``, minibatch loss at each step.
      valid_steps: ``[evals]``, number of updates before each valid evaluation.
      valid_loss: ``[points, seeds, evals]``.
    """

    name: str
    labels: tuple[str, ...]
    values: Mapping[str, tuple[float, ...]]
    train_loss: np.ndarray
    valid_steps: np.ndarray
    valid_loss: np.ndarray

    @property
    def num_steps(self) -> int:
        """Training steps per run."""
        return int(self.train_loss.shape[-1])

    def point(self, index: int) -> Curves:
        """The curves of one sweep point (keeps a sweep axis of size 1).

        Args:
          index: the sweep point.

        Returns:
          A :class:`Curves` of one point.
        """
        sl = slice(index, index + 1)
        return Curves(
            name=self.name,
            labels=self.labels[sl],
            values={k: v[sl] for k, v in self.values.items()},
            train_loss=self.train_loss[sl],
            valid_steps=self.valid_steps,
            valid_loss=self.valid_loss[sl],
        )


@dataclasses.dataclass
class TaskResult:
    """The curves of every sweep on one task, and how they were obtained.

    Attributes:
      task: the task's name.
      curves: sweep name -> its :class:`Curves` (``result[name]`` reads one).
      num_steps: training steps per run.
      num_seeds: runs per sweep point.
      eval_every: steps between valid evaluations.
      valid_split: the split of the valid loss (e.g. ``"outer_valid"``).
      valid_batches: the fixed batches each valid loss averages.
      seconds: wall-clock time the task's runs took.
    """

    task: str
    curves: dict[str, Curves]
    num_steps: int
    num_seeds: int
    eval_every: int
    valid_split: str
    valid_batches: int
    seconds: float

    def __getitem__(self, name: str) -> Curves:
        return self.curves[name]


@dataclasses.dataclass
class PointStats:
    """Seed-mean statistics of one sweep point (NaN if any seed diverged).

    Attributes:
      label: the sweep point's label (e.g. ``"lr=0.001"``).
      final_train: mean train loss of the last ``window`` steps, mean over seeds.
      final_train_std: its standard deviation over seeds.
      mean_train: mean train loss over the whole run, mean over seeds.
      final_valid: the valid loss after the last step, mean over seeds.
      diverged: how many seeds became non-finite.
    """

    label: str
    final_train: float
    final_train_std: float
    mean_train: float
    final_valid: float
    diverged: int

    @staticmethod
    def of(curves: Curves, index: int, final_window: int) -> PointStats:
        """The statistics of sweep point ``index`` of ``curves``.

        Args:
          curves: one sweep's curves.
          index: the sweep point.
          final_window: the steps ``final_train`` averages (:func:`windows`).

        Returns:
          Its :class:`PointStats`.
        """
        train = np.asarray(curves.train_loss[index], np.float64)  # [seeds, steps]
        finals, valid = seed_finals(curves, index, final_window)
        finite = np.all(np.isfinite(train), axis=-1)
        return PointStats(
            label=curves.labels[index],
            final_train=finite_or_nan(np.mean(finals)),
            final_train_std=finite_or_nan(np.std(finals)),
            mean_train=finite_or_nan(np.mean(train)),
            final_valid=finite_or_nan(np.mean(valid)),
            diverged=int(np.sum(~finite)),
        )


def seed_finals(curves: Curves, index: int, final_window: int) -> tuple[np.ndarray, np.ndarray]:
    """Each seed's final train and final valid loss at sweep point ``index``.

    Args:
      curves: one sweep's curves.
      index: the sweep point.
      final_window: the steps a final train loss averages (:func:`windows`).

    Returns:
      ``(final_train, final_valid)``, float64 arrays of one value per seed: the mean
      train loss of the last ``final_window`` steps and the valid loss after the last
      step.
    """
    train = np.asarray(curves.train_loss[index], np.float64)  # [seeds, steps]
    valid = np.asarray(curves.valid_loss[index, :, -1], np.float64)
    return np.mean(train[:, -final_window:], axis=-1), valid


def _seeds_lower(candidate: np.ndarray, baseline: np.ndarray) -> int:
    """On how many seeds the candidate's loss is below the baseline's on the same seed."""
    return sum(
        rank_key(float(c)) < rank_key(float(b)) for c, b in zip(candidate, baseline, strict=True)
    )


@dataclasses.dataclass
class TunedBaseline:
    """A baseline at its best learning rate on one task.

    Attributes:
      name: the baseline sweep's name.
      index: the chosen sweep point.
      label: its label (e.g. ``"lr=0.001"``).
      stats: its :class:`PointStats`.
      at_edge: whether it is the first or last point of a grid of several (widen the
        grid).
      grid: the :class:`PointStats` of every point of the grid.
    """

    name: str
    index: int
    label: str
    stats: PointStats
    at_edge: bool
    grid: tuple[PointStats, ...]


@dataclasses.dataclass
class Comparison:
    """The candidate against one tuned baseline on one task.

    Ratios of losses near zero are fragile (a 1e-5 against a 1e-4 loss is a ratio of
    0.1 and says little); the log-loss differences and the speed-up are the figures to
    read there.

    Attributes:
      baseline: the baseline sweep's name.
      normalized_loss: ``final_train(candidate) / final_train(baseline)`` (< 1 is
        better; NaN when undefined).
      speedup: the step-count speed-up (:func:`~learnopt.evaluation.metrics.speedup`).
      reaches: whether the candidate reaches the baseline's final train loss.
      wins: whether the candidate's ``final_train`` is lower.
      wins_valid: whether the candidate's ``final_valid`` is lower.
      log_loss_diff: ``ln final_train(candidate) - ln final_train(baseline)`` (< 0 is
        better; NaN when undefined, e.g. a loss <= 0 or a diverged run).
      normalized_valid: ``final_valid(candidate) / final_valid(baseline)``.
      log_valid_diff: ``ln final_valid(candidate) - ln final_valid(baseline)``.
      seeds_won: on how many seeds the candidate's final train loss is below the tuned
        baseline's on the same seed. Seed ``s`` of every sweep starts from the same
        parameters and sees the same batches, so the seeds pair up: a task won (or lost)
        on every seed is a margin a new pair of seeds is unlikely to reverse, where the
        seed-mean ``wins`` can turn on one seed. A diverged seed counts as a loss.
      seeds_won_valid: the same for the final valid loss.
      seeds: the seeds compared (the evaluation's ``num_seeds``).
    """

    baseline: str
    normalized_loss: float
    speedup: float
    reaches: bool
    wins: bool
    wins_valid: bool
    log_loss_diff: float = math.nan
    normalized_valid: float = math.nan
    log_valid_diff: float = math.nan
    seeds_won: int = 0
    seeds_won_valid: int = 0
    seeds: int = 0


@dataclasses.dataclass
class TaskSummary:
    """Per-task figures: the candidate, each tuned baseline and the comparisons.

    Attributes:
      task: the task's name.
      candidate: the candidate sweep's name.
      candidate_stats: the candidate's :class:`PointStats`.
      baselines: baseline name -> its :class:`TunedBaseline`.
      comparisons: baseline name -> the candidate's :class:`Comparison` with it.
      best_baseline: the name of the tuned baseline with the lowest ``final_train``.
      select_by: how learning rates were tuned, ``"final"`` or ``"mean"``.
    """

    task: str
    candidate: str
    candidate_stats: PointStats
    baselines: dict[str, TunedBaseline]
    comparisons: dict[str, Comparison]
    best_baseline: str
    select_by: str

    @property
    def vs_best(self) -> Comparison:
        """The comparison with the strongest tuned baseline on this task."""
        return self.comparisons[self.best_baseline]


def summarize_task(
    result: TaskResult,
    candidate: str,
    baselines: Sequence[str] | None = None,
    select_by: str = "final",
) -> TaskSummary:
    """Tunes each baseline's learning rate and compares ``candidate`` with it.

    Args:
      result: from :func:`learnopt.evaluation.runner.evaluate_task`.
      candidate: the name of the evaluated sweep (its first point is used).
      baselines: names of the baseline sweeps (default: every other sweep).
      select_by: ``"final"`` (lowest ``final_train``, as the library) or ``"mean"``
        (lowest ``mean_train``), averaged over seeds.

    Returns:
      The :class:`TaskSummary`.
    """
    if select_by not in ("final", "mean"):
        raise ValueError(f"select_by must be 'final' or 'mean', got {select_by!r}")
    if candidate not in result.curves:
        raise KeyError(f"no sweep {candidate!r} in the result; have {sorted(result.curves)}")
    if baselines is None:
        baselines = [n for n in result.curves if n != candidate]
    if not baselines:
        raise ValueError("need at least one baseline sweep to compare with")
    _, final_window = windows(result.num_steps)
    cand_curves = result.curves[candidate]
    cand = PointStats.of(cand_curves, 0, final_window)
    cand_train, cand_valid = seed_finals(cand_curves, 0, final_window)
    cand_mean = np.mean(cand_curves.train_loss[0], axis=0)

    tuned: dict[str, TunedBaseline] = {}
    comparisons: dict[str, Comparison] = {}
    for name in baselines:
        curves = result.curves[name]
        grid = tuple(PointStats.of(curves, i, final_window) for i in range(len(curves.labels)))
        score = [rank_key(p.final_train if select_by == "final" else p.mean_train) for p in grid]
        best = int(np.argmin(score))
        # Only a learning-rate grid has edges to widen (OptList's entries are a list).
        edge = "learning_rate" in curves.values and len(grid) > 1 and best in (0, len(grid) - 1)
        tb = TunedBaseline(name, best, grid[best].label, grid[best], edge, grid)
        tuned[name] = tb
        base_mean = np.mean(curves.train_loss[best], axis=0)
        s, reaches = speedup(cand_mean, base_mean, final_window)
        fb, fc = tb.stats.final_train, cand.final_train
        vb, vc = tb.stats.final_valid, cand.final_valid
        base_train, base_valid = seed_finals(curves, best, final_window)
        comparisons[name] = Comparison(
            baseline=name,
            normalized_loss=_ratio(fc, fb),
            speedup=s,
            reaches=reaches,
            wins=rank_key(fc) < rank_key(fb),
            wins_valid=rank_key(vc) < rank_key(vb),
            log_loss_diff=_log_diff(fc, fb),
            normalized_valid=_ratio(vc, vb),
            log_valid_diff=_log_diff(vc, vb),
            seeds_won=_seeds_lower(cand_train, base_train),
            seeds_won_valid=_seeds_lower(cand_valid, base_valid),
            seeds=len(cand_train),
        )
    best_baseline = min(tuned, key=lambda n: rank_key(tuned[n].stats.final_train))
    return TaskSummary(
        task=result.task,
        candidate=candidate,
        candidate_stats=cand,
        baselines=tuned,
        comparisons=comparisons,
        best_baseline=best_baseline,
        select_by=select_by,
    )


def _ratio(candidate: float, baseline: float) -> float:
    """``candidate / baseline`` for a finite positive baseline and finite candidate, else NaN."""
    if math.isfinite(baseline) and baseline > 0 and math.isfinite(candidate):
        return candidate / baseline
    return math.nan


def _log_diff(candidate: float, baseline: float) -> float:
    """``ln candidate - ln baseline`` for finite positive losses, else NaN."""
    if all(math.isfinite(x) and x > 0 for x in (candidate, baseline)):
        return math.log(candidate) - math.log(baseline)
    return math.nan


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


@dataclasses.dataclass
class SuiteResult:
    """Every task's curves and summary, and the suite-level figures.

    Attributes:
      candidate: the candidate sweep's name.
      baselines: the baseline sweeps' names.
      tasks: one :class:`TaskResult` per task, in suite order.
      summaries: one :class:`TaskSummary` per task, in the same order.
      settings: what the figures need to be read (``num_steps``, ``num_seeds``,
        ``select_by``, ``eval_every``, ``valid_split``, ``valid_batches``, ``window``,
        ``learning_rates``).
    """

    candidate: str
    baselines: tuple[str, ...]
    tasks: list[TaskResult]
    summaries: list[TaskSummary]
    settings: dict[str, Any]

    def aggregate(self) -> dict[str, dict[str, float]]:
        """Per baseline (and ``"best"``): wins, geometric-mean normalized loss and speed-up.

        ``mean_log_loss_diff`` and ``mean_log_valid_diff`` average the per-task log-loss
        differences over the tasks where they are defined (a diverged run has none; the
        wins count it as a loss).

        Returns:
          ``{baseline or "best": {"tasks", "wins", "wins_valid", "reaches",
          "geomean_normalized_loss", "geomean_normalized_valid", "mean_log_loss_diff",
          "mean_log_valid_diff", "wins_every_seed", "losses_every_seed",
          "wins_valid_every_seed", "losses_valid_every_seed", "geomean_speedup",
          "median_speedup"}}``: the ``*_every_seed`` counts are the tasks won or lost on
          every seed (:attr:`Comparison.seeds_won`; 0 with one seed).
        """
        out: dict[str, dict[str, float]] = {}
        for name in (*self.baselines, "best"):
            comps = [s.vs_best if name == "best" else s.comparisons[name] for s in self.summaries]
            out[name] = {
                "tasks": len(comps),
                "wins": sum(c.wins for c in comps),
                "wins_valid": sum(c.wins_valid for c in comps),
                "reaches": sum(c.reaches for c in comps),
                "geomean_normalized_loss": geomean(c.normalized_loss for c in comps),
                "geomean_normalized_valid": geomean(c.normalized_valid for c in comps),
                "mean_log_loss_diff": _nanmean([c.log_loss_diff for c in comps]),
                "mean_log_valid_diff": _nanmean([c.log_valid_diff for c in comps]),
                "wins_every_seed": sum(c.seeds > 1 and c.seeds_won == c.seeds for c in comps),
                "losses_every_seed": sum(c.seeds > 1 and c.seeds_won == 0 for c in comps),
                "wins_valid_every_seed": sum(
                    c.seeds > 1 and c.seeds_won_valid == c.seeds for c in comps
                ),
                "losses_valid_every_seed": sum(
                    c.seeds > 1 and c.seeds_won_valid == 0 for c in comps
                ),
                "geomean_speedup": geomean(c.speedup for c in comps),
                "median_speedup": float(np.median([c.speedup for c in comps]))
                if comps
                else math.nan,
            }
        return out

    def markdown(self) -> str:
        """The summary tables (per task, then the suite) as markdown.

        Returns:
          :func:`summary_markdown` of this result.
        """
        return summary_markdown(self)


def _g(x: float, digits: int = 4) -> str:
    if isinstance(x, float) and math.isnan(x):
        return "diverged"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _signed(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:+.3f}"


def _baseline_label(name: str, result: SuiteResult) -> str:
    """How the suite table names a baseline: tuned over what, or untuned."""
    first = result.summaries[0].baselines[name] if result.summaries else None
    if first is not None and len(first.grid) == 1:
        return f"{name} (untuned, {first.label})"
    return f"tuned {name}"


def _every_seed_lines(result: SuiteResult) -> list[str]:
    """The suite's tasks won and lost on every seed (seeds paired), per baseline."""
    n = result.settings["num_seeds"]
    lines = [
        "",
        f"Paired by seed (each of the {n} seeds starts every optimizer from the same "
        "parameters and batches): tasks where the candidate is lower on every seed / higher "
        "on every seed; the rest could turn on the seeds drawn:",
        "",
        "| against | train: lower / higher on every seed | valid: lower / higher on every seed |",
        "| --- | ---: | ---: |",
    ]
    for name, a in result.aggregate().items():
        label = "best baseline per task" if name == "best" else _baseline_label(name, result)
        lines.append(
            f"| {label} | {a['wins_every_seed']} / {a['losses_every_seed']} | "
            f"{a['wins_valid_every_seed']} / {a['losses_valid_every_seed']} |"
        )
    return lines


def summary_markdown(result: SuiteResult) -> str:
    """Markdown tables: one row per task, then one row per baseline for the suite.

    Args:
      result: an evaluated suite.

    Returns:
      The text of ``summary.md``.
    """
    s0 = result.settings
    lines = [
        f"# {result.candidate} vs tuned baselines",
        "",
        f"{s0['num_steps']} steps, {s0['num_seeds']} seeds; baselines tuned per task by "
        f"{'final' if s0['select_by'] == 'final' else 'mean'} train loss over the grid; "
        f"final = mean train loss of the last {s0['window']} steps (also the speed-up's "
        "smoothing); valid = "
        f"{s0['valid_split']} ({s0['valid_batches']} fixed batches). `*`: best learning "
        "rate at the edge of the grid.",
        "",
        "| task | candidate final train | final valid | best baseline (lr) | its final train "
        "| its final valid | loss ratio | speed-up | win |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | :---: |",
    ]
    for s in result.summaries:
        b = s.baselines[s.best_baseline]
        c = s.vs_best
        edge = "*" if b.at_edge else ""
        lines.append(
            f"| {s.task} | {_g(s.candidate_stats.final_train)} | "
            f"{_g(s.candidate_stats.final_valid)} | {b.name} ({b.label}){edge} | "
            f"{_g(b.stats.final_train)} | {_g(b.stats.final_valid)} | "
            f"{_g(c.normalized_loss, 3)} | {_g(c.speedup, 3)}x | {'yes' if c.wins else 'no'} |"
        )
    lines += [
        "",
        "Against each baseline over the suite (train = final train loss, valid = final valid "
        "loss; log diff = mean over tasks of ln(candidate) - ln(baseline), < 0 is better):",
        "",
        "| against | wins (train) | wins (valid) | reaches its final loss | geo-mean loss ratio "
        "(train) | (valid) | mean log diff (train) | (valid) | geo-mean speed-up "
        "| median speed-up |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, a in result.aggregate().items():
        label = "best baseline per task" if name == "best" else _baseline_label(name, result)
        n = a["tasks"]
        lines.append(
            f"| {label} | {a['wins']}/{n} | {a['wins_valid']}/{n} | {a['reaches']}/{n} | "
            f"{_g(a['geomean_normalized_loss'], 3)} | {_g(a['geomean_normalized_valid'], 3)} | "
            f"{_signed(a['mean_log_loss_diff'])} | {_signed(a['mean_log_valid_diff'])} | "
            f"{_g(a['geomean_speedup'], 3)}x | {_g(a['median_speedup'], 3)}x |"
        )
    if s0["num_seeds"] > 1:
        lines += _every_seed_lines(result)
    names = list(result.baselines)
    lines += [
        "",
        "Log-loss difference per task, train / valid (ln candidate - ln baseline; < 0: the "
        "candidate is lower):",
        "",
        "| task | " + " | ".join(names) + " |",
        "| --- |" + " ---: |" * len(names),
    ]
    for s in result.summaries:
        comps = [s.comparisons[n] for n in names]
        cells = [f"{_signed(c.log_loss_diff)} / {_signed(c.log_valid_diff)}" for c in comps]
        lines.append(f"| {s.task} | " + " | ".join(cells) + " |")
    lines += ["", "Tuned learning rates (`*` at the grid's edge):", ""]
    for s in result.summaries:
        tuned = ", ".join(
            f"{n} {b.label.removeprefix('lr=')}{'*' if b.at_edge else ''}"
            for n, b in s.baselines.items()
        )
        lines.append(f"- {s.task}: {tuned}")
    return "\n".join(lines) + "\n"
