"""Evaluating an optimizer on tasks: one task's sweeps, or a candidate on a whole suite.

:func:`evaluate_task` trains sweeps on one task
(:class:`~learnopt.evaluation.engine.TaskEvaluator`) and returns their curves;
:func:`evaluate_suite` trains a candidate and the baselines on every task of a suite,
tunes the baselines and compares (the figures of :mod:`learnopt.evaluation.results`),
reusing cached baselines where it may (:mod:`learnopt.evaluation.cache`)::

    from learnopt import evaluation
    from learnopt.learned_optimizers import base as lopt_base

    lopt = lopt_base.LearnableAdam()
    candidate = evaluation.learned_sweep(lopt, theta)          # theta in memory or loaded
    result = evaluation.evaluate_suite("heldout", candidate, num_steps=1000, num_seeds=3)
    print(result.markdown())                                   # per task, then the suite
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

from learnopt.evaluation.cache import BaselineCache, task_key
from learnopt.evaluation.config import SELECT_BY
from learnopt.evaluation.engine import TaskEvaluator, TrainingSettings, training_settings
from learnopt.evaluation.metrics import windows
from learnopt.evaluation.results import (
    Curves,
    SuiteResult,
    TaskResult,
    TaskSummary,
    summarize_task,
)
from learnopt.evaluation.suites import get_suite, task_and_name
from learnopt.evaluation.sweeps import Sweep, baseline_sweeps
from learnopt.tasks import base as tasks_base

__all__ = ["evaluate_task", "evaluate_suite"]


def evaluate_task(
    task: str | tasks_base.Task,
    sweeps: Sequence[Sweep],
    *,
    settings: TrainingSettings | None = None,
    progress: Callable[[int], None] | None = None,
    **overrides: Any,
) -> TaskResult:
    """Trains every sweep on ``task`` (a name is built fresh: reproducible data).

    Args:
      task: a registered task name or a task.
      sweeps: the sweeps to train (names must be distinct).
      settings: how the runs train (:class:`~learnopt.evaluation.engine.TrainingSettings`).
      progress: called with the number of steps just finished (per chunk).
      **overrides: fields of ``TrainingSettings`` as keywords (``num_steps=``,
        ``num_seeds=``, ``eval_every=``, ...), alone or on top of ``settings``.

    Returns:
      A :class:`~learnopt.evaluation.results.TaskResult` with one ``Curves`` per sweep.
    """
    task, _ = task_and_name(task)
    evaluator = TaskEvaluator(task, sweeps, settings=settings, **overrides)
    return evaluator.run(progress)


def evaluate_suite(
    suite: str | Sequence[str | tasks_base.Task],
    candidate: Sweep,
    baselines: Sequence[Sweep] | None = None,
    *,
    settings: TrainingSettings | None = None,
    select_by: str = SELECT_BY,
    progress: bool | Callable[[int], None] = False,
    baseline_cache: str | os.PathLike | None = None,
    on_task: Callable[[SuiteResult], None] | None = None,
    check: Callable[[], None] | None = None,
    **overrides: Any,
) -> SuiteResult:
    """Evaluates ``candidate`` against tuned ``baselines`` on every task of a suite.

    Long (over 80 lines) for its docstring: the body is 40 lines; the 17 arguments
    are documented here, where users read them.

    Args:
      suite: a suite name (:func:`~learnopt.evaluation.suites.get_suite`) or a list of
        tasks / task names.
      candidate: the optimizer under evaluation (one sweep point).
      baselines: sweeps to tune (default: :func:`~learnopt.evaluation.sweeps.baseline_sweeps`).
      settings: how every run trains (:class:`~learnopt.evaluation.engine.TrainingSettings`).
      select_by: how a baseline's learning rate is picked, ``"final"`` or ``"mean"``.
      progress: ``True`` for a tqdm bar over all training runs with an ETA, or a
        callback, called with the number of steps just finished (per chunk and task).
      baseline_cache: a folder where the baselines' curves are kept and reused by
        later evaluations with the same settings (tasks given by name, sweeps from
        ``lr_sweep`` with a registered optimizer). The key includes every setting, the
        task's and optimizer's definitions and data, and a hash of learnopt's source, so
        changed code never reuses old curves (:mod:`learnopt.evaluation.cache`). The
        candidate always runs, and sees the same data as the cached baselines did. Best
        effort: an unusable folder or file is a warning, never an error.
      on_task: called after each task with the result so far (the tasks done, in suite
        order), e.g. to write it, so that an interrupted evaluation keeps what it did.
      check: called before each task and after each chunk of training; what it raises
        stops the evaluation there (``learnopt evaluate`` checks for a signal that an
        exception raised inside a destructor could have hidden).
      **overrides: fields of ``TrainingSettings`` as keywords (``num_steps=``,
        ``num_seeds=``, ``eval_every=``, ...), alone or on top of ``settings``.

    Returns:
      A :class:`~learnopt.evaluation.results.SuiteResult`; ``result.markdown()`` is the
      summary.
    """
    if select_by not in ("final", "mean"):
        raise ValueError(f"select_by must be 'final' or 'mean', got {select_by!r}")
    if not isinstance(candidate, Sweep):
        raise TypeError(f"candidate must be a Sweep, got {type(candidate).__name__}")
    if candidate.size != 1:
        raise ValueError(f"candidate must have one sweep point, got {candidate.size}")
    settings = training_settings(settings, **overrides)
    entries = get_suite(suite) if isinstance(suite, str) else list(suite)
    if not entries:
        raise ValueError("the suite has no tasks")
    baselines = baseline_sweeps() if baselines is None else list(baselines)
    names = [b.name for b in baselines]
    if candidate.name in names:
        candidate = dataclasses.replace(candidate, name=f"{candidate.name} (candidate)")
    cache = BaselineCache(baseline_cache) if baseline_cache is not None else None
    if cache is not None:
        cache.check_writable()  # an unusable folder: one warning now, no caching later
    bar = _RunsBar(entries, [candidate, *baselines], settings) if progress is True else None
    callback = bar.task_callback if bar is not None else progress if callable(progress) else None
    if check is not None:
        callback = _checked(callback, check)
    tasks, summaries = [], []
    try:
        for entry in entries:
            if check is not None:
                check()
            task, name = task_and_name(entry)
            # Only tasks given by name are rebuilt the same way: they alone are cached.
            task_cache = cache if isinstance(entry, str) else None
            if bar is not None:
                bar.set_postfix_str(name)
            result = _train_task(task, candidate, baselines, settings, task_cache, callback, bar)
            tasks.append(result)
            summaries.append(summarize_task(result, candidate.name, names, select_by))
            if on_task is not None:
                on_task(_suite_result(candidate, baselines, settings, select_by, tasks, summaries))
    finally:
        if bar is not None:
            bar.close()
    return _suite_result(candidate, baselines, settings, select_by, tasks, summaries)


def _checked(
    callback: Callable[[int], None] | None, check: Callable[[], None]
) -> Callable[[int], None]:
    """``callback`` (if any), then ``check``: the engine's per-chunk progress callback."""

    def after_chunk(steps: int) -> None:
        if callback is not None:
            callback(steps)
        check()

    return after_chunk


def _suite_result(
    candidate: Sweep,
    baselines: list[Sweep],
    settings: TrainingSettings,
    select_by: str,
    tasks: list[TaskResult],
    summaries: list[TaskSummary],
) -> SuiteResult:
    """The suite's result over the tasks done so far (all of them at the end)."""
    report = {
        "num_steps": settings.num_steps,
        "num_seeds": settings.num_seeds,
        "select_by": select_by,
        "eval_every": tasks[0].eval_every,
        "valid_split": tasks[0].valid_split,
        "valid_batches": tasks[0].valid_batches,
        "window": windows(settings.num_steps)[1],
        "learning_rates": {b.name: list(b.values.get("learning_rate", ())) for b in baselines},
    }
    names = tuple(b.name for b in baselines)
    return SuiteResult(candidate.name, names, list(tasks), list(summaries), report)


class _RunsBar:
    """A tqdm bar over the suite's training runs (sweep points x seeds x tasks), with an ETA.

    The engine reports finished steps per chunk; each counts as ``steps / num_steps`` of
    every run of the task being trained (the runs of a task train side by side), and the
    bar shows the whole runs done (``84/522 runs``). Runs read from the baseline cache
    cost nothing: they leave the total when their task starts.
    """

    def __init__(self, entries: Sequence[Any], sweeps: Sequence[Sweep], settings: TrainingSettings):
        from tqdm.auto import tqdm

        self.num_steps = settings.num_steps
        self.num_seeds = settings.num_seeds
        total = len(entries) * sum(s.size for s in sweeps) * settings.num_seeds
        self.runs = 0  # runs of the task being trained
        self.done = 0  # runs of the tasks started so far (all done once the next starts)
        self.progress = 0.0  # runs done, with the fractions of the task being trained
        self.bar = tqdm(
            total=total,
            desc="evaluate",
            unit="run",
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n}/{total} runs "
            "[{elapsed}<{remaining}{postfix}]",
        )

    def start_task(self, trained: Sequence[Sweep], cached: Sequence[Sweep]) -> None:
        """A task starts: ``trained`` sweeps will run, ``cached`` ones come from the cache."""
        self._settle()
        self.runs = sum(s.size for s in trained) * self.num_seeds
        self.done += self.runs
        self.bar.total -= sum(s.size for s in cached) * self.num_seeds
        self.bar.refresh()

    def _settle(self) -> None:
        """The count at its whole number of runs (the fractions of a task may not add up)."""
        self.progress = float(self.done)
        if self.bar.n != self.done:
            self.bar.n = self.done
            self.bar.refresh()

    def task_callback(self, steps: int) -> None:
        """``steps`` more steps of every run of the task are done."""
        self.progress += steps / self.num_steps * self.runs
        whole = min(int(self.progress + 1e-9), self.done)
        if whole > self.bar.n:
            self.bar.update(whole - self.bar.n)

    def set_postfix_str(self, text: str) -> None:
        """Shows ``text`` (the task's name) after the ETA."""
        self.bar.set_postfix_str(text)

    def close(self) -> None:
        """Closes the bar (complete if every task finished)."""
        if self.bar.n >= self.done - 1e-6 * max(1, self.done):
            self._settle()
        self.bar.close()


def _train_task(
    task: tasks_base.Task,
    candidate: Sweep,
    baselines: list[Sweep],
    settings: TrainingSettings,
    cache: BaselineCache | None,
    callback: Callable[[int], None] | None,
    bar: _RunsBar | None = None,
) -> TaskResult:
    """One task of a suite: the candidate and the baselines not found in ``cache``."""
    sweeps = [candidate, *baselines]
    cached: dict[str, Curves] = {}
    key = None
    if cache is not None:
        key = task_key(task)  # before training moves the task's data streams
        cached = cache.load(key, settings, baselines)
    rest = [s for s in sweeps if s.name not in cached]
    if bar is not None:
        bar.start_task(rest, [s for s in sweeps if s.name in cached])
    result = TaskEvaluator(task, rest, settings=settings).run(callback)
    if cache is not None and key is not None:
        # Best effort: a write that fails warns and never loses the task's result.
        cache.save(key, settings, [b for b in baselines if b.name not in cached], result)
    result.curves = {s.name: cached.get(s.name) or result.curves[s.name] for s in sweeps}
    return result
