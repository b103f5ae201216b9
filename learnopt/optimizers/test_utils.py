"""The notes' library's path for its optimizer test helpers (``optimizers.test_utils``).

learned_optimization's tests import ``learned_optimization.optimizers.test_utils``;
ported tests import ``learnopt.optimizers.test_utils`` and get the same
``smoketest_optimizer``, implemented in :mod:`learnopt.testing.optimizers` (test
helpers live in :mod:`learnopt.testing`; this module is listed with it, in layer 7 of
``docs/design.md``).
"""

from __future__ import annotations

from learnopt.testing.optimizers import smoketest_optimizer

__all__ = ["smoketest_optimizer"]
