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

:mod:`learnopt.train` is the public face (``train.meta_train``). The public names of
the modules of ``MODULES`` are offered here too, imported when first used, so that
``import learnopt.run.config`` imports no JAX.
"""

from __future__ import annotations

from learnopt._lazy import lazy_face

#: The modules whose public names (their ``__all__``) this package offers, each imported
#: when one of its names is first used (PEP 562).
MODULES = (
    "learnopt.run.loop",
    "learnopt.run.session",
    "learnopt.run.config",
    "learnopt.run.build",
    "learnopt.run.folder",
    "learnopt.run.metrics",
    "learnopt.run.results",
)

__all__, __getattr__, __dir__ = lazy_face(__name__, MODULES)
