"""The notes' library's path for VeLO's architecture (``research.general_lopt.hyper_v2``).

learned_optimization defines ``HyperV2`` in ``research/general_lopt/hyper_v2.py``;
learnopt implements it in :mod:`learnopt.learned_optimizers.hyper_v2` (same constructor,
maths and ``theta`` layout; Metz et al., 2022, arXiv:2211.09760) and re-exports it here,
so ``from learnopt.research.general_lopt import hyper_v2`` works as the library's import
does. ``State`` is the library's name of the optimizer state
(:class:`~learnopt.learned_optimizers.hyper_v2.HyperV2State`); ``factored_dims`` is the
library's helper for the Adafactor axes of a shape.
"""

from __future__ import annotations

from learnopt.learned_optimizers.blocks.accumulators import factored_dims
from learnopt.learned_optimizers.hyper_v2 import HyperV2, HyperV2State

State = HyperV2State

__all__ = ["HyperV2", "HyperV2State", "State", "factored_dims"]
