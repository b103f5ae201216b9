"""The notes' library's path for its task test helpers (``tasks.test_utils``).

learned_optimization's tests import ``learned_optimization.tasks.test_utils``; ported
tests import ``learnopt.tasks.test_utils`` and get ``smoketest_task`` and
``smoketest_task_family``, implemented in :mod:`learnopt.testing.library`.
"""

from __future__ import annotations

from learnopt.testing.library import smoketest_task, smoketest_task_family

__all__ = ["smoketest_task", "smoketest_task_family"]
