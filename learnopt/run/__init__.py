"""The meta-training run, one concept per module.

* :mod:`~learnopt.run.config`: :class:`RunConfig` and :class:`LaunchConfig`, every setting
  with its default and help (pure Python; the command line's flags come from here);
* :mod:`~learnopt.run.trainers`: the trainers, one entry per gradient estimator;
* :mod:`~learnopt.run.recipes`: per-architecture defaults and named recipes;
* :mod:`~learnopt.run.settings`: a run's settings resolved against recipes and a resumed
  run, and checked;
* :mod:`~learnopt.run.build`: tasks, learned optimizers, estimators and the learner from
  names;
* :mod:`~learnopt.run.folder`: the output folder, its lock and the final theta's space;
* :mod:`~learnopt.run.metrics`: metrics.csv and the summary line;
* :mod:`~learnopt.run.health`: signals, divergence and stall checks;
* :mod:`~learnopt.run.processes`: what several processes agree on;
* :mod:`~learnopt.run.session`: one session of a run (start, loop, finish);
* :mod:`~learnopt.run.loop`: :func:`meta_train`, the entry point.

:mod:`learnopt.train` is the public face (``train.meta_train``). The names below are
re-exported lazily, so that ``import learnopt.run.config`` imports no JAX.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public names and the modules that define them (read lazily, PEP 562).
_EXPORTS = {
    "meta_train": "learnopt.run.loop",
    "Session": "learnopt.run.session",
    "RunConfig": "learnopt.run.config",
    "LaunchConfig": "learnopt.run.config",
    "build_learner": "learnopt.run.build",
    "build_task": "learnopt.run.build",
    "build_lopt": "learnopt.run.build",
    "make_estimator": "learnopt.run.build",
    "expand_families": "learnopt.run.build",
    "RunFolder": "learnopt.run.folder",
    "RunExistsError": "learnopt.run.folder",
    "RunLockedError": "learnopt.run.folder",
    "holds_run": "learnopt.run.folder",
    "read_metrics": "learnopt.run.metrics",
    "MetaTrainResult": "learnopt.run.results",
    "StepInfo": "learnopt.run.results",
    "MetaTrainWarning": "learnopt.run.results",
    "DataUnavailableError": "learnopt.run.results",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'learnopt.run' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
