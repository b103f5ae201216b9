"""Gradient accumulation as an optimizer: average ``num_average`` gradients, then step.

``GradientAccumulator(opt, num_average)`` adds each update's gradient and loss to
running sums; every ``num_average``-th update it runs ``opt`` once on their means
and clears the sums, otherwise the params stay where they are. With ``num_average=1``
it is ``opt``. The choice is a ``lax.cond`` on the iteration, so it works inside
``jit`` and ``lax.scan`` with one compilation.

As in learned_optimization, ``opt`` sees ``num_steps // num_average`` as the run
length, and the wrapper's model state is the latest one passed to ``update`` while
``opt``'s is the one passed at its last step.
"""

from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.canonical import compute_dtype
from learnopt.optimizers.adam import Adam
from learnopt.optimizers.common import ModelState, PyTree, accumulator, next_model_state
from learnopt.optimizers.interface import OPTIMIZERS, Optimizer, require_optimizer
from learnopt.optimizers.library_compat import ModelStateAlias
from learnopt.tree_utils import tree_cast_like

__all__ = ["GradientAccumulator", "GradientAccumulatorState"]


@flax.struct.dataclass
class GradientAccumulatorState(ModelStateAlias):
    """State of :class:`GradientAccumulator`.

    Attributes:
      grad_accum: the sum of the gradients since ``opt``'s last step, shaped like the
        params, in their arithmetic dtype.
      loss_accum: the sum of the losses since then (a scalar).
      inner_opt_state: ``opt``'s state (it holds the params).
      iteration: the number of updates of the wrapper, int32.
      model_state: the latest model state passed to ``update``.
    """

    grad_accum: PyTree
    loss_accum: jax.Array
    inner_opt_state: PyTree
    iteration: jax.Array
    model_state: ModelState


class GradientAccumulator(Optimizer):
    """Runs ``opt`` on gradients averaged over ``num_average`` consecutive updates.

    Args:
      opt: the optimizer to run (an instance).
      num_average: how many gradients are averaged per step of ``opt``.
    """

    def __init__(self, opt: Optimizer, num_average: int = 1):
        require_optimizer(opt, "GradientAccumulator's opt")
        if not isinstance(num_average, int) or num_average < 1:
            raise ValueError(f"num_average must be a positive int, got {num_average!r}")
        self.opt = opt
        self.num_average = num_average

    def get_params(self, opt_state):
        """The params, held by ``opt``'s state.

        Args:
          opt_state: a :class:`GradientAccumulatorState`.

        Returns:
          ``opt.get_params(opt_state.inner_opt_state)``.
        """
        return self.opt.get_params(opt_state.inner_opt_state)

    def set_params(self, opt_state, params):
        """``opt_state`` with new params in ``opt``'s state (the sums are kept).

        Args:
          opt_state: a :class:`GradientAccumulatorState`.
          params: the new params, shaped like the current ones.

        Returns:
          A new :class:`GradientAccumulatorState`.
        """
        return opt_state.replace(
            inner_opt_state=self.opt.set_params(opt_state.inner_opt_state, params)
        )

    def get_state(self, opt_state):
        """The latest model state passed to ``update`` (or to ``init``).

        Args:
          opt_state: a :class:`GradientAccumulatorState`.

        Returns:
          ``opt_state.model_state``.
        """
        return opt_state.model_state

    def init(self, params, model_state=None, num_steps=None, key=None, **kwargs):
        """``opt``'s state for a run of ``num_steps // num_average`` steps, and zero sums.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.init`; here:

        - ``num_steps``: the planned number of updates of the wrapper (``opt`` is told
          ``num_steps // num_average``); None when unknown.
        """
        inner_steps = None if num_steps is None else num_steps // self.num_average
        inner = self.opt.init(params, model_state, num_steps=inner_steps, key=key, **kwargs)
        inner = self.opt._settle(inner)  # both branches of the update's cond must agree
        return GradientAccumulatorState(
            grad_accum=accumulator(params),
            loss_accum=jnp.zeros((), compute_dtype(params)),
            inner_opt_state=inner,
            iteration=jnp.zeros((), jnp.int32),
            model_state=model_state,
        )

    def update(self, opt_state, grads, loss=None, model_state=None, key=None, **kwargs):
        """Adds ``grads`` and ``loss`` to the sums; every ``num_average``-th call, steps ``opt``.

        On a stepping call ``opt`` gets the means ``sum(g) / num_average`` and
        ``sum(loss) / num_average`` and the sums are reset to zero; on the other calls
        the params do not move.

        Args and returns as in :meth:`~learnopt.optimizers.interface.Optimizer.update`; here:

        - ``loss``: the loss (a scalar), or None (``opt`` then gets None).
        """
        grad_accum = jax.tree_util.tree_map(
            lambda a, g: a + g.astype(a.dtype), opt_state.grad_accum, grads
        )
        loss_accum = opt_state.loss_accum
        if loss is not None:
            loss_accum = loss_accum + jnp.asarray(loss).astype(loss_accum.dtype)
        iteration = opt_state.iteration + 1
        n = self.num_average

        def apply(operand):
            inner, g_sum, l_sum = operand
            mean_grads = jax.tree_util.tree_map(lambda a: a / n, g_sum)
            mean_loss = None if loss is None else l_sum / n
            new_inner = self.opt.update(
                inner, mean_grads, mean_loss, model_state=model_state, key=key, **kwargs
            )
            return (
                tree_cast_like(new_inner, inner),
                jax.tree_util.tree_map(jnp.zeros_like, g_sum),
                jnp.zeros_like(l_sum),
            )

        def wait(operand):
            return operand

        operand = (opt_state.inner_opt_state, grad_accum, loss_accum)
        if n == 1:
            inner, grad_accum, loss_accum = apply(operand)
        else:
            inner, grad_accum, loss_accum = jax.lax.cond(iteration % n == 0, apply, wait, operand)
        return GradientAccumulatorState(
            grad_accum=grad_accum,
            loss_accum=loss_accum,
            inner_opt_state=inner,
            iteration=iteration,
            model_state=next_model_state(model_state, opt_state),
        )

    def __repr__(self) -> str:
        return f"GradientAccumulator({self.opt!r}, num_average={self.num_average})"


OPTIMIZERS.register(
    lambda num_average=2: GradientAccumulator(Adam(), num_average), name="GradientAccumulator"
)
