"""The state of a population of inner runs, and the helpers that select and tile it.

:class:`TruncatedUnrollState` (one leading population axis ``[P]`` on every leaf) and
:class:`TruncatedUnrollOut` (what an unroll reports) are what
:class:`~learnopt.outer_trainers.lopt_truncated_step.VectorizedLOptTruncatedStep` and the
gradient estimators pass around; the notes' library's paths for them are
``lopt_truncated_step``'s, which re-exports them.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.outer_trainers import truncation_schedule as ts

PyTree = Any

__all__ = [
    "TruncatedUnrollState",
    "TruncatedUnrollOut",
    "tree_where",
    "tile_population",
    "population_size",
]


@flax.struct.dataclass
class TruncatedUnrollState:
    """State of a population of inner runs; every leaf has a leading population axis.

    Attributes:
      inner_opt_state: the inner optimizers' states (params, model state, accumulators),
        leading axis ``[P]``.
      inner_step: int32 ``[P]``, inner steps taken in each member's current run.
      truncation_length: int32 ``[P]``, the step at which each member's run ends (from the
        truncation schedule).
      task_param: each member's task sample (the task family's ``cfg``), leading ``[P]``.
    """

    inner_opt_state: PyTree
    inner_step: jax.Array
    truncation_length: jax.Array
    task_param: PyTree

    @property
    def is_done(self) -> jax.Array:
        """bool [P]: the run has reached its length (it restarts at the next reset)."""
        return self.inner_step >= self.truncation_length

    @property
    def truncation_state(self) -> ts.ConstantTruncationState:
        """The library's name for the per-run schedule state."""
        return ts.ConstantTruncationState(length=self.truncation_length)


@flax.struct.dataclass
class TruncatedUnrollOut:
    """What an unroll of ``K`` steps reports (``unroll_step``: no ``K`` axis, leaves ``[P]``).

    Attributes:
      loss: float32 ``[K, P]``, the meta-loss of every step of every member.
      iteration: int32 ``[K, P]``, the inner step each loss was taken at.
      is_done: bool ``[P]``, whether the member's run reached its truncation length in
        this unroll.
      weight: float32 ``[K, P]``, each loss's weight in the meta-loss
        (``meta_loss_weighting``; mean 1 over a run), or None: every step weighs 1.
    """

    loss: jax.Array
    iteration: jax.Array
    is_done: jax.Array
    weight: jax.Array | None = None

    @property
    def mask(self) -> jax.Array:
        """bool [K, P]: which losses count (all of them: learnopt never resets mid-unroll)."""
        return jnp.ones(jnp.shape(self.loss), bool)


def tree_where(mask: jax.Array, on_true: PyTree, on_false: PyTree) -> PyTree:
    """Per-member select between two population trees.

    Args:
      mask: bool ``[P]``.
      on_true: a tree whose leaves have a leading ``[P]`` axis, taken where ``mask``.
      on_false: a tree of the same structure, taken elsewhere.

    Returns:
      The selected tree.
    """

    def sel(a, b):
        m = jnp.reshape(mask, mask.shape + (1,) * (jnp.ndim(a) - mask.ndim))
        return jnp.where(m, a, b)

    return jax.tree_util.tree_map(sel, on_true, on_false)


def tile_population(tree: PyTree, copies: int, axis: int = 0) -> PyTree:
    """Repeats a population tree ``copies`` times along ``axis`` (antithetic pairs).

    Args:
      tree: a population tree.
      copies: how many copies (1: ``tree`` itself).
      axis: the population axis.

    Returns:
      The tree with ``copies * P`` members along ``axis``.
    """
    if copies == 1:
        return tree
    return jax.tree_util.tree_map(lambda x: jnp.concatenate([x] * copies, axis=axis), tree)


def population_size(state: TruncatedUnrollState) -> int:
    """The number of members of a population state.

    Args:
      state: a :class:`TruncatedUnrollState`.

    Returns:
      ``P``, the length of its population axis.
    """
    return int(np.shape(state.inner_step)[0])
