"""Loss scale (learnopt's): the loss times a constant; ``normalizer`` undoes it.

:class:`ScaleLoss` for a task; :class:`ScaleLossTaskFamily` samples the constant
log-uniformly per family member.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.augmentations.wrapping import _LogUniformFamily, _TaskWrapper

__all__ = ["ScaleLoss", "ScaleLossTaskFamily"]


class ScaleLoss(_TaskWrapper):
    """The loss times ``scale`` (gradients scale too); ``normalizer`` divides it back.

    Args:
      task: the task to wrap.
      scale: the factor (a number or a traced scalar).
    """

    def __init__(self, task: tasks_base.Task, scale: float | jax.Array):
        super().__init__(task)
        self.scale = scale

    def loss_with_state_and_aux(self, params, state, key, data):
        """The wrapped task's loss times ``scale`` (in the loss's dtype).

        Args:
          params: the params.
          state: the wrapped task's model state.
          key: the wrapped task's PRNG key.
          data: one batch.

        Returns:
          ``(scale * loss, new_state, aux)``.
        """
        loss, state, aux = self.task.loss_with_state_and_aux(params, state, key, data)
        return loss * jnp.asarray(self.scale, loss.dtype), state, aux

    def normalizer(self, loss):
        """The wrapped task's normalizer of ``loss / scale``.

        Args:
          loss: a loss of this (scaled) task.

        Returns:
          The normalized loss, on the wrapped task's scale.
        """
        return self.task.normalizer(loss / jnp.asarray(self.scale, jnp.result_type(loss)))


class ScaleLossTaskFamily(_LogUniformFamily):
    """Members' losses are scaled by a factor log-uniform in ``scale_range`` (traced).

    Members are :class:`ScaleLoss` tasks; configurations hold ``sub_cfg`` and ``scale``.

    Args:
      task_family: the family to wrap.
      scale_range: ``(low, high)`` with ``0 < low <= high``.
    """

    _cfg_name, _field, _wrap = "ScaleLoss", "scale", staticmethod(ScaleLoss)

    def __init__(self, task_family: tasks_base.TaskFamily, scale_range=(0.1, 10.0)):
        self.scale_range = tuple(float(x) for x in scale_range)
        super().__init__(task_family, self.scale_range)
