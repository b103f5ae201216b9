"""The notes' library's path for its gradient-estimator test helper (``test_utils``).

learned_optimization's tests import ``learned_optimization.outer_trainers.test_utils``;
ported tests import ``learnopt.outer_trainers.test_utils`` and get
``trainer_smoketest``, implemented in :mod:`learnopt.testing.library`.
"""

from __future__ import annotations

from learnopt.testing.library import trainer_smoketest

__all__ = ["trainer_smoketest"]
