"""OptList: NAdamW with hyperparameters from a learned, ordered list (Metz et al., 2020).

Metz, Maheswaranathan, Sun, Freeman, Poole, Sohl-Dickstein, 2020, "Using a thousand
optimization tasks to learn hyperparameter search strategies" (arXiv:2002.11887),
searched for an *ordered list* of :class:`~learnopt.optimizers.nadamw.NAdamW`
hyperparameter settings (with a cosine learning-rate schedule relative to the run
length) such that trying the first ``k`` entries works well across 1000+ tasks, for
every ``k``. To tune with a budget of ``k`` trials, run ``OptList(0)``, ...,
``OptList(k - 1)`` and keep the best; most of the gain comes from the first ten.

The list ships with learnopt as ``data/opt_list.json``, the published data file of
learned_optimization (Apache-2.0; origin and licence in ``data/README.md``).

``idx`` may be a traced integer, so several entries run side by side under
``jax.vmap`` in one program. ``init`` needs ``num_steps`` (the schedule is relative
to it).
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import jax.numpy as jnp
import numpy as np

from learnopt.optimizers.interface import OPTIMIZERS, Optimizer
from learnopt.optimizers.learning_rate_schedules import CosineLearningRateSchedule
from learnopt.optimizers.nadamw import NAdamW, NAdamWState

__all__ = ["OptList", "num_configs", "config"]

_FIELDS = (
    "learning_rate",
    "beta1",
    "beta2",
    "epsilon",
    "use_nesterov",
    "adamw_weight_decay",
    "l2_weight_decay",
    "warmup_fraction",
    "min_learning_rate_mult",
    "constant_fraction",
)


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, np.ndarray]:
    """The list as one numpy column per field (float64; ``use_nesterov`` bool)."""
    text = resources.files("learnopt.optimizers").joinpath("data/opt_list.json").read_text()
    entries = json.loads(text)
    cols = {}
    for name in _FIELDS:
        values = [entry[name] for entry in entries]
        dtype = bool if name == "use_nesterov" else np.float64
        cols[name] = np.asarray(values, dtype)
    return cols


def num_configs() -> int:
    """The number of entries in the list.

    Returns:
      The length of ``data/opt_list.json``.
    """
    return len(_table()["learning_rate"])


def config(idx: Any) -> dict[str, Any]:
    """Entry ``idx`` as NAdamW's keyword arguments (the schedule built from its fields).

    A Python ``idx`` gives Python numbers; a traced one gives arrays.

    Args:
      idx: the entry's index in ``[0, num_configs())``: a Python/numpy int, or an
        integer array (traced or not; not range-checked).

    Returns:
      ``{"learning_rate": CosineLearningRateSchedule(...), "beta1", "beta2",
      "epsilon", "use_nesterov", "adamw_weight_decay", "l2_weight_decay"}``.

    Raises:
      IndexError: a Python ``idx`` is out of range.
    """
    table = _table()
    if isinstance(idx, int | np.integer):
        if not 0 <= idx < num_configs():
            raise IndexError(f"OptList index {idx} is out of range [0, {num_configs()})")
        values = {k: v[idx].item() for k, v in table.items()}
    else:
        values = {k: jnp.asarray(v)[idx] for k, v in table.items()}
    schedule = CosineLearningRateSchedule(
        learning_rate=values.pop("learning_rate"),
        min_learning_rate_mult=values.pop("min_learning_rate_mult"),
        constant_fraction=values.pop("constant_fraction"),
        warmup_fraction=values.pop("warmup_fraction"),
    )
    return {"learning_rate": schedule, **values}


class OptList(Optimizer):
    """NAdamW with the ``idx``-th hyperparameters of Metz et al.'s list (see the module docstring).

    Args:
      idx: index into the list (0 is the best single setting); an int, or a traced
        integer scalar.
    """

    def __init__(self, idx: Any):
        if hasattr(idx, "dtype") and not jnp.issubdtype(idx.dtype, jnp.integer):
            raise TypeError(f"OptList idx must be an integer, got dtype {idx.dtype}")
        self.idx = idx

    def _nadamw(self) -> NAdamW:
        # Built on each call, so a traced idx never outlives its trace.
        return NAdamW(**config(self.idx))

    def init(self, params, model_state=None, num_steps=None, key=None) -> NAdamWState:
        """NAdamW's state for a run of ``num_steps`` steps.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: the planned number of updates (required: the cosine schedule is
          relative to it).

        Raises:
          ValueError: ``num_steps`` is None.
        """
        if num_steps is None:
            raise ValueError("OptList needs the run length: init(params, num_steps=N)")
        return self._nadamw().init(params, model_state, num_steps=num_steps)

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """One NAdamW step with entry ``idx``'s hyperparameters.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`.
        """
        return self._nadamw().update(opt_state, grads, loss, model_state=model_state, **kwargs)

    @property
    def name(self) -> str:
        return f"OptList{self.idx}" if isinstance(self.idx, int) else "OptListDynamicIdx"

    def __repr__(self) -> str:
        return f"OptList({self.idx!r})"


OPTIMIZERS.register(lambda idx=0: OptList(idx), name="OptList")
