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

Every public name of these modules is offered here too (``evaluation.evaluate_suite``),
imported from its module when first used, so that ``import learnopt.evaluation.config``
(and the command line's ``--help``) stays free of JAX.
"""

from __future__ import annotations

from learnopt._lazy import lazy_face

#: The modules whose public names (their ``__all__``) this package offers, each imported
#: when one of its names is first used (PEP 562).
MODULES = (
    "learnopt.evaluation.config",
    "learnopt.evaluation.sweeps",
    "learnopt.evaluation.suites",
    "learnopt.evaluation.metrics",
    "learnopt.evaluation.results",
    "learnopt.evaluation.engine",
    "learnopt.evaluation.runner",
    "learnopt.evaluation.cache",
    "learnopt.evaluation.report",
    "learnopt.evaluation.figures",
    "learnopt.evaluation.periodic",
    "learnopt.evaluation.candidates",
    "learnopt.evaluation.command",
)

__all__, __getattr__, __dir__ = lazy_face(__name__, MODULES)
