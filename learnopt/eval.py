"""The old name of :mod:`learnopt.evaluation`, kept for existing callers.

``from learnopt import eval as lopt_eval`` keeps working, with a ``DeprecationWarning``
naming the replacement: every public name this module had is re-exported from the
package that now holds it (the same objects). New code writes ``from learnopt import
evaluation`` (the name ``eval`` shadows Python's builtin).
"""

from __future__ import annotations

import warnings

from learnopt.evaluation.config import DEFAULT_BASELINES, DEFAULT_LEARNING_RATES
from learnopt.evaluation.engine import TaskEvaluator
from learnopt.evaluation.metrics import smooth, speedup, steps_to_reach, windows
from learnopt.evaluation.report import (
    CURVE_COLUMNS,
    SUMMARY_COLUMNS,
    curve_rows,
    summary_rows,
    sweep_rows,
    write_results,
)
from learnopt.evaluation.results import (
    Comparison,
    Curves,
    PointStats,
    SuiteResult,
    TaskResult,
    TaskSummary,
    TunedBaseline,
    summarize_task,
    summary_markdown,
)
from learnopt.evaluation.runner import evaluate_suite, evaluate_task
from learnopt.evaluation.suites import LOCAL_SUITES, get_suite, suite_names
from learnopt.evaluation.sweeps import (
    Sweep,
    baseline_sweeps,
    default_baselines,
    learned_sweep,
    log_grid,
    lr_sweep,
    optimizer_sweep,
)

__all__ = [
    "DEFAULT_LEARNING_RATES",
    "DEFAULT_BASELINES",
    "LOCAL_SUITES",
    "Sweep",
    "Curves",
    "TaskResult",
    "TaskSummary",
    "SuiteResult",
    "lr_sweep",
    "learned_sweep",
    "optimizer_sweep",
    "baseline_sweeps",
    "default_baselines",
    "log_grid",
    "get_suite",
    "suite_names",
    "TaskEvaluator",
    "evaluate_task",
    "evaluate_suite",
    "summarize_task",
    "smooth",
    "steps_to_reach",
    "speedup",
    "windows",
    # Public before without being listed here; listed now so they count as re-exports.
    "PointStats",
    "TunedBaseline",
    "Comparison",
    "summary_markdown",
    "summary_rows",
    "sweep_rows",
    "curve_rows",
    "write_results",
    "SUMMARY_COLUMNS",
    "CURVE_COLUMNS",
]

warnings.warn(
    "learnopt.eval is the old name of learnopt.evaluation (the same objects); import "
    "learnopt.evaluation instead",
    DeprecationWarning,
    stacklevel=2,
)
