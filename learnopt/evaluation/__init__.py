"""Evaluating optimizers and learned optimizers against tuned baselines on held-out tasks.

The question a learned optimizer must answer is whether it beats hand-designed
optimizers *whose learning rate was tuned for each task*, on tasks it never saw. This
package trains tasks with any optimizer or learned optimizer, over several seeds, and
compares the result with learning-rate sweeps of baselines::

    from learnopt import evaluation
    from learnopt.learned_optimizers import base as lopt_base

    lopt = lopt_base.LearnableAdam()
    candidate = evaluation.learned_sweep(lopt, theta)          # theta in memory or loaded
    result = evaluation.evaluate_suite("heldout", candidate, num_steps=1000, num_seeds=3)
    print(result.markdown())                                   # per task, then the suite

One concept per module:

* :mod:`~learnopt.evaluation.config`: every default, and the settings of ``learnopt
  evaluate`` and of the periodic evaluation (pure Python, no JAX);
* :mod:`~learnopt.evaluation.sweeps`: an optimizer and the points of a hyperparameter
  sweep (``lr_sweep``, ``learned_sweep``, ``optimizer_sweep``, the baselines);
* :mod:`~learnopt.evaluation.suites`: the tasks of a suite, by name;
* :mod:`~learnopt.evaluation.engine`: how a task is trained (``TrainingSettings``,
  ``TaskEvaluator``: every sweep's runs as one ``vmap``, chunks of ``lax.scan``, the same
  data for every optimizer);
* :mod:`~learnopt.evaluation.metrics`: the figures, in numpy (final losses, speed-up);
* :mod:`~learnopt.evaluation.results`: curves, tuned baselines, comparisons, summaries;
* :mod:`~learnopt.evaluation.runner`: ``evaluate_task`` and ``evaluate_suite``;
* :mod:`~learnopt.evaluation.cache`: baselines' curves kept on disk and reused;
* :mod:`~learnopt.evaluation.report` and :mod:`~learnopt.evaluation.figures`: the CSV,
  Markdown, ``.npz`` and PNG files;
* :mod:`~learnopt.evaluation.periodic`: the held-out evaluation during meta-training;
* :mod:`~learnopt.evaluation.command`: what ``learnopt evaluate`` does.

The names below are imported from their modules when first used, so that ``import
learnopt.evaluation.config`` (and the command line's ``--help``) stays free of JAX.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the module that defines it (imported on first use, PEP 562).
_EXPORTS = {
    # config
    "EvaluateConfig": "learnopt.evaluation.config",
    "PeriodicEvalConfig": "learnopt.evaluation.config",
    "DEFAULT_LEARNING_RATES": "learnopt.evaluation.config",
    "DEFAULT_BASELINES": "learnopt.evaluation.config",
    "DEFAULT_SUITE_PREFERENCE": "learnopt.evaluation.config",
    "EVAL_TASKS": "learnopt.evaluation.config",
    "EVAL_LEARNING_RATES": "learnopt.evaluation.config",
    "OPT_LIST_TRIALS": "learnopt.evaluation.config",
    "REFERENCE_SCHEDULE": "learnopt.evaluation.config",
    "REFERENCE_SCHEDULE_LR": "learnopt.evaluation.config",
    # sweeps
    "Sweep": "learnopt.evaluation.sweeps",
    "lr_sweep": "learnopt.evaluation.sweeps",
    "learned_sweep": "learnopt.evaluation.sweeps",
    "optimizer_sweep": "learnopt.evaluation.sweeps",
    "baseline_sweep": "learnopt.evaluation.sweeps",
    "baseline_sweeps": "learnopt.evaluation.sweeps",
    "opt_list_sweep": "learnopt.evaluation.sweeps",
    "reference_sweep": "learnopt.evaluation.sweeps",
    "default_baselines": "learnopt.evaluation.sweeps",
    "log_grid": "learnopt.evaluation.sweeps",
    # suites
    "LOCAL_SUITES": "learnopt.evaluation.suites",
    "get_suite": "learnopt.evaluation.suites",
    "suite_names": "learnopt.evaluation.suites",
    "default_suite": "learnopt.evaluation.suites",
    # metrics
    "windows": "learnopt.evaluation.metrics",
    "smooth": "learnopt.evaluation.metrics",
    "steps_to_reach": "learnopt.evaluation.metrics",
    "speedup": "learnopt.evaluation.metrics",
    "geomean": "learnopt.evaluation.metrics",
    # results
    "Curves": "learnopt.evaluation.results",
    "TaskResult": "learnopt.evaluation.results",
    "PointStats": "learnopt.evaluation.results",
    "TunedBaseline": "learnopt.evaluation.results",
    "Comparison": "learnopt.evaluation.results",
    "TaskSummary": "learnopt.evaluation.results",
    "SuiteResult": "learnopt.evaluation.results",
    "summarize_task": "learnopt.evaluation.results",
    "summary_markdown": "learnopt.evaluation.results",
    # engine and runner
    "TrainingSettings": "learnopt.evaluation.engine",
    "TaskEvaluator": "learnopt.evaluation.engine",
    "evaluate_task": "learnopt.evaluation.runner",
    "evaluate_suite": "learnopt.evaluation.runner",
    # cache, reports, figures
    "BaselineCache": "learnopt.evaluation.cache",
    "SUMMARY_COLUMNS": "learnopt.evaluation.report",
    "CURVE_COLUMNS": "learnopt.evaluation.report",
    "summary_rows": "learnopt.evaluation.report",
    "sweep_rows": "learnopt.evaluation.report",
    "curve_rows": "learnopt.evaluation.report",
    "write_results": "learnopt.evaluation.report",
    "eval_task_figure": "learnopt.evaluation.figures",
    # periodic evaluation, the command
    "PeriodicEval": "learnopt.evaluation.periodic",
    "PeriodicEvalWarning": "learnopt.evaluation.periodic",
    "read_eval_csv": "learnopt.evaluation.periodic",
    "EVAL_COLUMNS": "learnopt.evaluation.periodic",
    "BEST_THETA_FILE": "learnopt.evaluation.periodic",
    "eval_score": "learnopt.evaluation.periodic",
    "evaluate": "learnopt.evaluation.command",
    "load_learned_candidate": "learnopt.evaluation.candidates",
    "EvalError": "learnopt.evaluation.candidates",
    "EvaluationInterrupted": "learnopt.evaluation.command",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
