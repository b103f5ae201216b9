"""The notes' library's ``research/`` import paths that learnopt provides.

learned_optimization keeps some learned optimizers under ``research/``; code and tests
written for it import them from there. learnopt implements them in its own packages and
re-exports them here, so such imports port with only the prefix changed:

* ``research.general_lopt.hyper_v2``: :mod:`learnopt.learned_optimizers.hyper_v2`;
* ``research.general_lopt.prefab`` and ``pretrained_optimizers``: VeLO (and the library's
  other published HyperV2 thetas) loaded from a checkpoint file the user gives.
"""
