"""VeLO, ready to use: learned_optimization's ``research/general_lopt/prefab`` path.

VeLO (Metz et al., "VeLO: Training versatile learned optimizers by scaling up", 2022,
arXiv:2211.09760) is a ``HyperV2`` learned optimizer meta-trained by its authors; its
weights are published by learned_optimization and are not part of learnopt. With a local
copy of its checkpoint (the file ``params`` published at
``gs://gresearch/learned_optimization/pretrained_lopts/aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620/params``)::

    from learnopt.research.general_lopt import prefab

    tx = prefab.optax_lopt(num_steps=1000, checkpoint="velo/params")
    state = tx.init(params)
    updates, state = tx.update(grads, state, params, extra_args={"loss": loss})

or ``export LEARNOPT_VELO_CHECKPOINT=velo/params`` and the library's calls unchanged:
``prefab.optax_lopt(1000)``, ``prefab.LearnedOptimizer(1000)``. Without a checkpoint
they raise :class:`~learnopt.research.general_lopt.pretrained_optimizers.CheckpointNotFoundError`
saying where the file is published and how to give it; see
:mod:`~learnopt.research.general_lopt.pretrained_optimizers` for where it is looked for
and the configuration it is loaded into.

As in the library, :class:`LearnedOptimizer` wraps the pretrained optimizer so that it
stays within the run lengths it was meta-trained for: a run longer than
``max_training_steps`` averages the gradients of ``ceil(num_steps /
max_training_steps)`` consecutive steps per update
(:class:`~learnopt.optimizers.gradient_accumulator.GradientAccumulator`), and
``weight_decay`` adds ``weight_decay * p`` to each gradient and ``weight_decay *
sum(p^2)`` to the loss VeLO sees (an L2 penalty; small values such as 1e-6 steady long
runs). VeLO reads the training loss: pass it at every update.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import jax
import jax.numpy as jnp
import optax

from learnopt import _validate
from learnopt.optimizers import opt_to_optax
from learnopt.optimizers.gradient_accumulator import GradientAccumulator
from learnopt.optimizers.interface import Optimizer
from learnopt.optimizers.wrappers import OptimizerWrapper
from learnopt.research.general_lopt import pretrained_optimizers
from learnopt.research.general_lopt.pretrained_optimizers import (
    CheckpointFormatError,
    CheckpointNotFoundError,
)

__all__ = [
    "LearnedOptimizer",
    "optax_lopt",
    "CheckpointNotFoundError",
    "CheckpointFormatError",
]

# The library's default: VeLO.
_default_lopt_fn = pretrained_optimizers.aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620

PathLike = str | os.PathLike


class _L2Penalty(OptimizerWrapper):
    """``opt`` on the gradient and loss of ``loss + weight_decay * sum(p^2)``, as the
    library's ``WeightDecayWrapper`` computes them (the gradient term is ``weight_decay *
    p``, without the factor 2).

    Args:
      opt: the optimizer to run.
      weight_decay: the penalty's factor, >= 0.
    """

    def __init__(self, opt: Optimizer, weight_decay: float):
        self.opt = opt
        self.weight_decay = weight_decay

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """Adds the penalty to ``grads`` and ``loss``, then runs ``opt``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`; here:

        - ``loss``: the loss (None stays None).
        """
        wd = self.weight_decay
        params = self.opt.get_params(opt_state)
        if loss is not None:
            loss = jnp.asarray(loss)
            l2 = sum(jnp.sum(jnp.square(p.astype(loss.dtype))) for p in jax.tree.leaves(params))
            loss = loss + wd * l2
        grads = jax.tree.map(
            lambda g, p: (g + wd * p.astype(g.dtype)).astype(g.dtype), grads, params
        )
        return self.opt.update(opt_state, grads, loss, model_state=model_state, key=key, **kwargs)

    def __repr__(self) -> str:
        return f"WeightDecayWrapper({self.opt!r}, weight_decay={self.weight_decay})"


def _base_optimizer(base_lopt_fn: Callable[..., Optimizer], checkpoint: PathLike | None):
    if checkpoint is None:
        return base_lopt_fn()
    return base_lopt_fn(checkpoint=checkpoint)


class LearnedOptimizer(OptimizerWrapper):
    """A pretrained learned optimizer (VeLO by default) set up for a run of a given length.

    The library's class of the same name: ``opt`` is the pretrained optimizer, wrapped in
    a :class:`~learnopt.optimizers.gradient_accumulator.GradientAccumulator` when
    ``num_training_steps > max_training_steps`` and in the L2 penalty when
    ``weight_decay > 0`` (see the module docstring). ``update`` is ``opt``'s: pass the
    training loss, VeLO needs it.

    Args:
      num_training_steps: the planned number of updates (``init`` uses it).
      weight_decay: the L2 penalty's factor (0: none; e.g. 1e-6).
      max_training_steps: the longest run the optimizer takes unaccumulated.
      base_lopt_fn: builds the pretrained optimizer (default: VeLO,
        ``pretrained_optimizers.aug12_continue_on_bigger_2xbs_200kstep_bigproblem_v2_5620``);
        called as ``base_lopt_fn()``, or ``base_lopt_fn(checkpoint=checkpoint)`` when a
        checkpoint is given.
      checkpoint: learnopt: the path of the checkpoint file (or its folder); None reads
        ``$LEARNOPT_VELO_CHECKPOINT`` or ``$LEARNOPT_PRETRAINED_LOPTS``.

    Raises:
      CheckpointNotFoundError: no checkpoint (the message says which file and how to give
        it).
      CheckpointFormatError: the file is not the optimizer's checkpoint.
    """

    def __init__(
        self,
        num_training_steps: int,
        weight_decay: float = 0.0,
        max_training_steps: int = 150_000,
        base_lopt_fn: Callable[..., Optimizer] = _default_lopt_fn,
        *,
        checkpoint: PathLike | None = None,
    ):
        num_training_steps = _validate.positive_int("num_training_steps", num_training_steps)
        max_training_steps = _validate.positive_int("max_training_steps", max_training_steps)
        if not isinstance(weight_decay, int | float) or not weight_decay >= 0.0:
            raise ValueError(f"weight_decay must be a number >= 0, got {weight_decay!r}")
        opt = _base_optimizer(base_lopt_fn, checkpoint)
        if num_training_steps > max_training_steps:
            num_accumulate = math.ceil(num_training_steps / max_training_steps)
            opt = GradientAccumulator(opt, num_accumulate)
        if weight_decay > 0.0:
            opt = _L2Penalty(opt, float(weight_decay))
        self.opt = opt
        self.weight_decay = weight_decay
        self.max_training_steps = max_training_steps
        self.num_training_steps = num_training_steps

    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        """The wrapped optimizer's state for a run of ``num_training_steps``.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: None, or ``num_training_steps`` (anything else is an error, as in
          the library: the run length is fixed at construction).

        Raises:
          ValueError: ``num_steps`` differs from ``num_training_steps``.
        """
        if num_steps is not None and num_steps != self.num_training_steps:
            raise ValueError(
                f"num_steps={num_steps} must match the constructor's num_training_steps="
                f"{self.num_training_steps}"
            )
        return self.opt.init(
            params, model_state, num_steps=self.num_training_steps, key=key, **kwargs
        )

    @property
    def name(self) -> str:
        """``"LearnedOptimizer"``, as in the library."""
        return "LearnedOptimizer"

    def __repr__(self) -> str:
        return f"LearnedOptimizer({self.num_training_steps}, opt={self.opt!r})"


def optax_lopt(
    num_steps: int,
    weight_decay: float = 0.0,
    max_training_steps: int = 150_000,
    base_lopt_fn: Callable[..., Optimizer] = _default_lopt_fn,
    *,
    checkpoint: PathLike | None = None,
) -> optax.GradientTransformationExtraArgs:
    """VeLO (or ``base_lopt_fn``'s optimizer) as an optax transformation for ``num_steps``.

    ``update(grads, state, params, extra_args={"loss": loss})`` (or ``value=loss``)
    returns ``new_params - params``; apply it with ``optax.apply_updates``.

    Args:
      num_steps: the planned number of updates.
      weight_decay: the L2 penalty's factor (0: none).
      max_training_steps: the longest run the optimizer takes unaccumulated.
      base_lopt_fn: builds the pretrained optimizer (default: VeLO).
      checkpoint: learnopt: the path of the checkpoint file (or its folder); None reads
        ``$LEARNOPT_VELO_CHECKPOINT`` or ``$LEARNOPT_PRETRAINED_LOPTS``.

    Returns:
      An ``optax.GradientTransformationExtraArgs``.

    Raises:
      CheckpointNotFoundError: no checkpoint (the message says which file and how to give
        it).
      CheckpointFormatError: the file is not the optimizer's checkpoint.
    """
    opt = LearnedOptimizer(
        num_steps,
        weight_decay=weight_decay,
        max_training_steps=max_training_steps,
        base_lopt_fn=base_lopt_fn,
        checkpoint=checkpoint,
    )
    return opt_to_optax.opt_to_optax_opt(opt, num_steps=num_steps)
