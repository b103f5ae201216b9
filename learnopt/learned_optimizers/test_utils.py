"""The notes' library's path for its learned-optimizer test helper (``test_utils``).

learned_optimization's tests import ``learned_optimization.learned_optimizers.test_utils``;
ported tests import ``learnopt.learned_optimizers.test_utils`` and get
``smoketest_learned_optimizer``, implemented in :mod:`learnopt.testing.library`.
"""

from __future__ import annotations

from learnopt.testing.library import smoketest_learned_optimizer

__all__ = ["smoketest_learned_optimizer"]
