"""Another float dtype: parameters and float data in ``dtype`` (bfloat16 by default).

:class:`ConvertFloatDType` for a task, :func:`ConvertFloatDTypeTaskFamily` for every
member of a family.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.augmentations.wrapping import WrappedTaskFamilyWithTaskWrapper, _TaskWrapper

__all__ = ["ConvertFloatDType", "ConvertFloatDTypeTaskFamily"]


class ConvertFloatDType(_TaskWrapper):
    """Parameters (from ``init``) and float32 data in ``dtype`` (bfloat16 by default).

    Args:
      task: the task to wrap.
      dtype: the dtype of the params and of the float32 leaves of every batch.
    """

    def __init__(self, task: tasks_base.Task, dtype: Any = jnp.bfloat16):
        super().__init__(task)
        self.dtype = jnp.dtype(dtype)

    def _cast(self, tree):
        return jax.tree_util.tree_map(
            lambda x: x.astype(self.dtype) if jnp.result_type(x) == jnp.float32 else x, tree
        )

    def init_with_state(self, key):
        """The wrapped task's initial params, every leaf cast to ``dtype``.

        Args:
          key: a PRNG key (passed to the wrapped task).

        Returns:
          ``(params, model_state)``; the model state is unchanged.
        """
        params, state = self.task.init_with_state(key)
        params = jax.tree_util.tree_map(lambda x: jnp.asarray(x, self.dtype), params)
        return params, state

    def loss_with_state_and_aux(self, params, state, key, data):
        """The wrapped task's loss on the batch with its float32 leaves cast to ``dtype``.

        Args:
          params: the params (used as given).
          state: the wrapped task's model state.
          key: the wrapped task's PRNG key.
          data: one batch.

        Returns:
          The wrapped task's ``(loss, new_state, aux)``.
        """
        return self.task.loss_with_state_and_aux(params, state, key, self._cast(data))


def ConvertFloatDTypeTaskFamily(task_family, dtype=jnp.bfloat16):  # noqa: N802
    """:class:`ConvertFloatDType` on every member of ``task_family``.

    Args:
      task_family: the family to wrap.
      dtype: the dtype of the members' params and float32 data.

    Returns:
      A :class:`WrappedTaskFamilyWithTaskWrapper` named ``ConvertFloatDType_<family name>``.
    """
    return WrappedTaskFamilyWithTaskWrapper(
        task_family,
        functools.partial(ConvertFloatDType, dtype=dtype),
        name=f"ConvertFloatDType_{task_family.name}",
    )
