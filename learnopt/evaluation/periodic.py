"""The periodic meta-validation: a ``meta_train`` callback, ``eval.csv`` and ``eval.png``.

``learnopt meta-train --eval-every N`` (and ``meta_train(callbacks=[PeriodicEval(N)])``)
trains a few tasks not meta-trained on with the current theta every N meta-steps and
compares the final training loss with Adam tuned over a small learning-rate grid
(computed once, on the same batches), writing ``eval.csv`` and ``eval.png`` into the
run's folder. By default the tasks are the ``meta-valid`` suite (disjoint from the
meta-training families and from ``heldout``), and the theta with the best score so far
is kept as ``theta_best.msgpack`` beside the run's last ``theta.msgpack``: select on
meta-valid, report on ``heldout`` once. The defaults are
:class:`learnopt.evaluation.config.PeriodicEvalConfig`'s.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from learnopt.evaluation.config import PeriodicEvalConfig

__all__ = [
    "PeriodicEval",
    "PeriodicEvalWarning",
    "read_eval_csv",
    "eval_score",
    "settings",
    "from_settings",
    "EVAL_COLUMNS",
    "BEST_THETA_FILE",
    "SETTINGS_FILE",
    "OUTPUT_FILES",
]

#: The theta with the best periodic-evaluation score, in the run's folder.
BEST_THETA_FILE = "theta_best.msgpack"
#: The evaluation's settings, in the run's folder: ``learnopt meta-train --resume DIR``
#: evaluates as the run did unless told otherwise.
SETTINGS_FILE = "eval_config.json"
#: Everything a periodic evaluation writes into the run's folder (``meta_train``'s
#: ``overwrite`` removes them with the run's own files).
OUTPUT_FILES = ("eval.csv", "eval.png", BEST_THETA_FILE, SETTINGS_FILE)

_DEFAULT = PeriodicEvalConfig()


class PeriodicEvalWarning(UserWarning):
    """Something of a periodic evaluation's files cannot be used (a resumed run's
    ``theta_best.msgpack`` that cannot be read)."""


#: Columns of ``eval.csv``.
EVAL_COLUMNS = (
    "step",
    "task",
    "final_train",
    "final_valid",
    "adam_final_train",
    "adam_lr",
    "normalized_loss",
    "seconds",
)


@dataclasses.dataclass
class _TaskEval:
    """One task's evaluator (compiled once; the data rewound before every run)."""

    name: str
    evaluator: Any
    data_state: Mapping[str, Any] | None
    adam: dict[str, float] | None = None


class PeriodicEval:
    """A :func:`learnopt.train.meta_train` callback: a small meta-validation every N steps.

    At every multiple of ``every`` meta-steps (``meta_train`` flushes its metrics there,
    as :meth:`due` asks, whatever ``log_every`` is; a caller that flushes less often
    gets the evaluation at its first flush at or after each multiple) the current theta
    trains each of ``tasks`` for ``steps`` inner steps over ``seeds``
    seeds (:class:`learnopt.evaluation.engine.TaskEvaluator`, the same batches every
    time). The figures: ``final_train`` (mean training loss over the last 10% of steps),
    ``final_valid``, and ``normalized_loss = final_train / final_train`` of Adam tuned
    over ``learning_rates`` (computed on the first call, on the same batches; < 1 means
    the learned optimizer wins). Rows go to ``<out_dir>/eval.csv`` (appended, so a
    resumed run continues it) and ``<out_dir>/eval.png`` plots the normalized losses
    against the meta-step; ``history`` keeps them in memory too. Each task's programs
    compile once per run (theta is an argument).

    Args:
      every: meta-steps between evaluations.
      tasks: registered task names (default
        :data:`~learnopt.evaluation.config.EVAL_TASKS`).
      steps: inner steps per run.
      seeds: runs per task.
      learning_rates: Adam's grid (empty: no baseline, ``normalized_loss`` empty).
      out_dir: where to write (default: the run's ``out_dir``; None writes nothing).
      at_start: also evaluate the initial theta: ``meta_train`` calls callbacks whose
        ``at_start`` is true once before the first meta-step of a new run (step 0, no
        rows), so that ``theta_best`` is chosen among the starting point too.
      progress: print one line per evaluation.
      keep_best: write the theta of the best :func:`eval_score` so far to
        ``<out_dir>/theta_best.msgpack`` (with metadata naming the step and score); a
        resumed run continues from the best score in its ``eval.csv`` once
        :meth:`restore` has checked that ``theta_best.msgpack`` can be read (if not, a
        :class:`PeriodicEvalWarning` names the file and the best is reset: the next
        evaluation's theta is written there).
      baseline_cache: where tuned Adam's curves are kept and reused by later runs with
        the same tasks, settings and learnopt source
        (:class:`~learnopt.evaluation.cache.BaselineCache`); ``"default"`` (the default)
        is ``learnopt evaluate``'s folder
        (:func:`~learnopt.evaluation.cache.default_cache_dir`), None keeps nothing.
      select_by: what the best theta minimizes, ``"train"`` (the default),
        ``"valid"`` or ``"train+valid"`` (see :func:`eval_score`).

    Attributes:
      best_score: the lowest :func:`eval_score` so far (``inf`` before any).
      best_step: the meta-step it was measured at (None before any).
    """

    def __init__(
        self,
        every: int,
        tasks: Sequence[str] = _DEFAULT.tasks,
        *,
        steps: int = _DEFAULT.steps,
        seeds: int = _DEFAULT.seeds,
        learning_rates: Sequence[float] = _DEFAULT.learning_rates,
        out_dir: str | Path | None = None,
        at_start: bool = False,
        progress: bool = True,
        keep_best: bool = True,
        baseline_cache: str | Path | None = "default",
        select_by: str = _DEFAULT.select_by,
    ):
        from learnopt import _validate
        from learnopt.evaluation.config import EVAL_SELECT_CHOICES

        if select_by not in EVAL_SELECT_CHOICES:
            raise ValueError(f"select_by must be one of {EVAL_SELECT_CHOICES}, got {select_by!r}")
        self.select_by = select_by
        self.every = _validate.positive_int("every", every)
        self.steps = _validate.positive_int("steps", steps)
        self.seeds = _validate.positive_int("seeds", seeds)
        if isinstance(tasks, str) or not tasks:
            raise ValueError(f"tasks must be a non-empty list of task names, got {tasks!r}")
        self.tasks = tuple(tasks)
        self.learning_rates = tuple(float(x) for x in learning_rates)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.at_start = at_start
        self.progress = progress
        self.keep_best = keep_best
        if baseline_cache == "default":
            from learnopt.evaluation.cache import default_cache_dir

            baseline_cache = default_cache_dir()
        self.baseline_cache = Path(baseline_cache) if baseline_cache is not None else None
        self.best_score = math.inf
        self.best_step: int | None = None
        self._restored = False
        self.history: list[dict[str, Any]] = []
        self._evals: list[_TaskEval] | None = None
        self._lopt: Any = None
        self._last: int | None = None

    # -- the callback
    def due(self, step: int) -> bool:
        """Whether an evaluation is due after meta-step ``step`` (``meta_train`` flushes
        its metrics then, so that the evaluation runs at that step).

        Args:
          step: the number of meta-steps done.

        Returns:
          True at every multiple of ``every``.
        """
        return step > 0 and step % self.every == 0

    def __call__(self, info: Any) -> None:
        """Evaluates when a multiple of ``every`` was passed since the last evaluation.

        Args:
          info: the ``meta_train`` callback's flush information (``step``, ``rows``,
            ``num_steps``, ``learner``, ``theta``, ``out_dir``).
        """
        due = info.step // self.every
        if self._last is None:
            self._last = (info.step - len(info.rows)) // self.every
            if self.at_start and info.step - len(info.rows) == 0:
                self._last = -1
        if due <= self._last and not (info.step == info.num_steps and self._last < due):
            return
        self._last = due
        self.evaluate(info.learner.lopt, info.theta, info.step, info.out_dir)

    def evaluate(self, lopt: Any, theta: Any, step: int, out_dir: Path | None = None) -> list:
        """Evaluates ``theta`` now.

        Args:
          lopt: the learned optimizer (its programs are built on the first call).
          theta: its current meta-parameters.
          step: the meta-step, recorded in the rows.
          out_dir: where to write if the evaluator has no ``out_dir`` of its own.

        Returns:
          One row per task, keyed by :data:`EVAL_COLUMNS` (also appended to ``history``).
        """
        import jax
        import numpy as np

        from learnopt.evaluation.metrics import windows
        from learnopt.evaluation.results import PointStats

        if self._evals is None or lopt is not self._lopt:
            self._setup(lopt, theta)
        stacked = jax.tree_util.tree_map(lambda x: np.asarray(x)[None], jax.device_get(theta))
        rows = []
        for i, te in enumerate(self._evals):
            if self.progress:
                print(
                    f"learnopt eval at step {step}: {te.name} ({i + 1} of {len(self._evals)})",
                    flush=True,
                )
            start = time.perf_counter()
            ev = te.evaluator
            ev.sweeps[0] = dataclasses.replace(ev.sweeps[0], hparams=stacked)
            result = self._run(te)
            window = windows(self.steps)[1]
            stats = PointStats.of(result.curves["candidate"], 0, window)
            adam = te.adam or {}
            base = adam.get("final_train", math.nan)
            ratio = stats.final_train / base if base > 0 and math.isfinite(base) else math.nan
            rows.append(
                {
                    "step": int(step),
                    "task": te.name,
                    "final_train": stats.final_train,
                    "final_valid": stats.final_valid,
                    "adam_final_train": base,
                    "adam_lr": adam.get("lr", math.nan),
                    "normalized_loss": ratio,
                    "seconds": round(time.perf_counter() - start, 2),
                }
            )
        self.history.extend(rows)
        out = self.out_dir or (Path(out_dir) if out_dir is not None else None)
        writes = out is not None and jax.process_index() == 0
        if writes and not self._restored:
            self.restore(out)
        self._restored = True
        score = eval_score(rows, self.select_by)
        improved = score < self.best_score
        if improved:
            self.best_score, self.best_step = score, int(step)
        if writes:
            self._write(out, rows)
            if improved and self.keep_best:
                self._save_best(out / BEST_THETA_FILE, lopt, theta, step, score)
        if self.progress:
            ratios = [r["normalized_loss"] for r in rows]
            wins = sum(1 for r in ratios if r < 1)
            text = ", ".join(f"{r['task'].split('_')[0]} {r['normalized_loss']:.3g}" for r in rows)
            best = (
                " (best so far)"
                if improved
                else f" (best {self.best_score:.3g} at step {self.best_step})"
            )
            print(
                f"learnopt eval at step {step}: loss / tuned Adam: {text}; wins {wins} of "
                f"{len(rows)}; score {score:.3g}{best}",
                flush=True,
            )
        return rows

    def restore(self, out_dir: str | Path) -> None:
        """Takes the best score of an earlier part of this run (a resumed run's folder).

        The best of ``<out_dir>/eval.csv`` is taken only if ``theta_best.msgpack`` (with
        ``keep_best``) can be read: a missing, corrupted or truncated file is a
        :class:`PeriodicEvalWarning` naming it, and the best is reset, so that no best is
        reported that cannot be read and the next evaluation writes the file again. Called
        by the first evaluation; ``learnopt meta-train --resume`` calls it at the start.

        Args:
          out_dir: the run's folder.
        """
        import warnings

        from learnopt import checkpoints

        out = Path(out_dir)
        self._restored = True
        path = out / "eval.csv"
        if not path.exists():
            return
        try:
            table = read_eval_csv(path)
        except (OSError, ValueError, KeyError, TypeError) as e:
            warnings.warn(
                f"{path} cannot be read ({_one_line(e)}): the earlier evaluations' best is "
                f"not known, and the next periodic evaluation writes {BEST_THETA_FILE} again",
                PeriodicEvalWarning,
                stacklevel=2,
            )
            return
        for step in sorted({r["step"] for r in table}):
            score = eval_score([r for r in table if r["step"] == step], self.select_by)
            if score < self.best_score:
                self.best_score, self.best_step = score, step
        if not self.keep_best or self.best_step is None:
            return
        best = out / BEST_THETA_FILE
        try:
            checkpoints.load_theta(best)
        except (OSError, ValueError) as e:
            warnings.warn(
                f"{best} cannot be read ({_one_line(e)}): the best of eval.csv (score "
                f"{self.best_score:.4g} at step {self.best_step}) is dropped and the best is "
                f"reset; the next periodic evaluation writes {BEST_THETA_FILE} again",
                PeriodicEvalWarning,
                stacklevel=2,
            )
            self.best_score, self.best_step = math.inf, None

    def _save_best(self, path: Path, lopt: Any, theta: Any, step: int, score: float) -> None:
        from learnopt import checkpoints
        from learnopt.learned_optimizers import theta_files

        info = {
            "selected_by": (
                f"periodic evaluation (learnopt.evaluation.periodic.eval_score, "
                f"select_by={self.select_by!r})"
            ),
            "step": int(step),
            "score": float(score),
            "tasks": list(self.tasks),
            "eval_steps": self.steps,
            "eval_seeds": self.seeds,
        }
        try:
            theta_files.save(path, lopt, theta, meta_training=info)
        except (TypeError, ValueError):  # a custom learned optimizer theta_files cannot describe
            checkpoints.save_theta(path, theta)

    # -- internals
    def _setup(self, lopt: Any, theta: Any) -> None:
        from learnopt.evaluation.cache import BaselineCache, task_key
        from learnopt.evaluation.engine import TaskEvaluator
        from learnopt.evaluation.metrics import windows
        from learnopt.evaluation.results import PointStats
        from learnopt.evaluation.sweeps import learned_sweep, lr_sweep
        from learnopt.tasks import base as tasks_base

        self._lopt = lopt
        candidate = learned_sweep(lopt, theta, name="candidate")
        self._evals = []
        cache = None
        if self.learning_rates and self.baseline_cache:
            cache = BaselineCache(self.baseline_cache)
            cache.check_writable()  # an unusable folder: one warning, tuned Adam not kept
        for i, name in enumerate(self.tasks):
            task = tasks_base.get_task(name)
            key = task_key(task) if cache is not None else None  # before anything trains
            te = _TaskEval(
                name,
                TaskEvaluator(task, [candidate], num_steps=self.steps, num_seeds=self.seeds),
                _data_position(task),
            )
            if self.learning_rates:  # the tuned baseline, once, on the same batches
                sweep = lr_sweep("Adam", self.learning_rates)
                adam = TaskEvaluator(task, [sweep], num_steps=self.steps, num_seeds=self.seeds)
                curves = None
                if cache is not None and key is not None:
                    curves = cache.load(key, adam.settings, [sweep]).get(sweep.name)
                if curves is None:
                    if self.progress:
                        print(
                            f"learnopt eval: tuning Adam over {len(self.learning_rates)} "
                            f"rates on {name} ({i + 1} of {len(self.tasks)}; kept in "
                            f"{self.baseline_cache or 'memory'})",
                            flush=True,
                        )
                    _rewind(task, te.data_state)
                    result = adam.run()
                    if cache is not None and key is not None:
                        cache.save(key, adam.settings, [sweep], result)  # warns if it fails
                    curves = result.curves[sweep.name]
                window = windows(self.steps)[1]
                grid = [PointStats.of(curves, i, window) for i in range(curves.train_loss.shape[0])]
                finals = [g.final_train if math.isfinite(g.final_train) else math.inf for g in grid]
                best = min(range(len(finals)), key=finals.__getitem__)
                te.adam = {"final_train": grid[best].final_train, "lr": self.learning_rates[best]}
            self._evals.append(te)

    def _run(self, te: _TaskEval) -> Any:
        _rewind(te.evaluator.task, te.data_state)
        return te.evaluator.run()

    def _write(self, out: Path, rows: list[dict[str, Any]]) -> None:
        from learnopt import plots
        from learnopt.evaluation.report import csv_cell

        (out / SETTINGS_FILE).write_text(json.dumps(settings(self), indent=2) + "\n")
        path = out / "eval.csv"
        new = not path.exists()
        with open(path, "a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(EVAL_COLUMNS)
            for r in rows:
                writer.writerow([csv_cell(r[c]) for c in EVAL_COLUMNS])
        table = read_eval_csv(path)
        if table:
            steps = sorted({r["step"] for r in table})
            ys = {}
            for task in dict.fromkeys(r["task"] for r in table):
                by_step = {r["step"]: r["normalized_loss"] for r in table if r["task"] == task}
                ys[task] = [by_step.get(s, math.nan) for s in steps]
            try:
                plots.line_plot(
                    out / "eval.png",
                    steps,
                    ys,
                    xlabel="meta-step",
                    ylabel="final train loss / tuned Adam's",
                    title=f"meta-validation ({self.steps} steps, {self.seeds} seed(s))",
                    reference=1.0,  # as good as tuned Adam
                )
            except (OSError, ValueError):
                pass


def settings(evaluator: PeriodicEval) -> dict[str, Any]:
    """What :func:`from_settings` needs to rebuild ``evaluator`` (JSON-able).

    Args:
      evaluator: a periodic evaluation.

    Returns:
      ``{"at_start", "every", "tasks", "steps", "seeds", "learning_rates", "keep_best",
      "select_by", "baseline_cache"}``.
    """
    return {
        "at_start": evaluator.at_start,
        "every": evaluator.every,
        "tasks": list(evaluator.tasks),
        "steps": evaluator.steps,
        "seeds": evaluator.seeds,
        "learning_rates": list(evaluator.learning_rates),
        "keep_best": evaluator.keep_best,
        "select_by": evaluator.select_by,
        "baseline_cache": None
        if evaluator.baseline_cache is None
        else str(evaluator.baseline_cache),
    }


def from_settings(values: Mapping[str, Any], *, progress: bool = True) -> PeriodicEval:
    """The periodic evaluation :func:`settings` describes (a resumed run's).

    Args:
      values: the contents of a run's ``eval_config.json``.
      progress: print one line per evaluation.

    Returns:
      A :class:`PeriodicEval` with those settings.
    """
    return PeriodicEval(
        values["every"],
        values["tasks"],
        steps=values["steps"],
        seeds=values["seeds"],
        learning_rates=values["learning_rates"],
        keep_best=values.get("keep_best", True),
        at_start=values.get("at_start", False),
        progress=progress,
        baseline_cache=values.get("baseline_cache", "default"),
        select_by=values.get("select_by", "train"),
    )


def eval_score(rows: Sequence[Mapping[str, Any]], select_by: str = "train") -> float:
    """One evaluation's score (lower is better): the geometric mean over its tasks.

    With ``select_by="train"``, of each task's ``normalized_loss`` (final train loss /
    tuned Adam's) when every row has one, else of the ``final_train`` losses (an
    evaluation without a baseline). With ``"valid"``, of the ``final_valid`` losses: the
    tasks' scales cancel when two evaluations of the same tasks are compared, as the
    ratio of two geometric means is the geometric mean of the ratios. With
    ``"train+valid"``, the geometric mean of the two (every task's two columns weigh
    alike, as the heldout bar counts wins on both). A task that
    diverged (or has no positive finite figure) makes the score ``inf``, so a theta that
    breaks one task is never the best.

    Args:
      rows: the rows of one evaluation (one per task, keyed by :data:`EVAL_COLUMNS`).
      select_by: ``"train"``, ``"valid"`` or ``"train+valid"``.

    Returns:
      The score; ``inf`` for no rows.
    """
    if not rows:
        return math.inf
    if select_by == "train+valid":
        return math.sqrt(eval_score(rows, "train") * eval_score(rows, "valid"))
    if select_by == "valid":
        values = [float(r.get("final_valid", math.nan)) for r in rows]
        if not all(math.isfinite(v) and v > 0 for v in values):
            return math.inf
        return float(math.exp(sum(math.log(v) for v in values) / len(values)))
    key = "normalized_loss"
    if not all(math.isfinite(float(r.get(key, math.nan))) for r in rows):
        if any(math.isfinite(float(r.get("adam_final_train", math.nan))) for r in rows):
            return math.inf  # a baseline exists, so the candidate diverged on a task
        key = "final_train"
    values = [float(r.get(key, math.nan)) for r in rows]
    if not all(math.isfinite(v) and v > 0 for v in values):
        return math.inf
    return float(math.exp(sum(math.log(v) for v in values) / len(values)))


def read_eval_csv(path: str | Path) -> list[dict[str, Any]]:
    """``eval.csv`` as a list of rows.

    Args:
      path: the file.

    Returns:
      One dict per row: numbers as floats (empty cells NaN), ``step`` as int, ``task``
      as text.
    """
    rows = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            parsed: dict[str, Any] = {}
            for k, v in row.items():
                if k == "task":
                    parsed[k] = v
                elif k == "step":
                    parsed[k] = int(v)
                else:
                    parsed[k] = float(v) if v != "" else math.nan
            rows.append(parsed)
    return rows


def _one_line(error: BaseException) -> str:
    """``error`` as one line: its first line, or its type when it has no text."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _data_position(task: Any) -> Mapping[str, Any] | None:
    """The position of every split of ``task``'s data, or None if a split cannot report it.

    With None nothing is rewound: each run continues the streams where they stand
    (rewinding only the splits that can would mix fresh and repeated batches).
    """
    get_state = getattr(getattr(task, "datasets", None), "get_state", None)
    if get_state is None:
        return None
    state = get_state()
    return None if any(v is None for v in state.values()) else state


def _rewind(task: Any, state: Mapping[str, Any] | None) -> None:
    """Moves ``task``'s data back to ``state`` (from :func:`_data_position`; None: not)."""
    if state is not None:
        task.datasets.set_state(state)
