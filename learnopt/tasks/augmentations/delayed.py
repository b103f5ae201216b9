"""Stale gradients: the gradient at the params of some steps ago (asynchronous training).

:class:`AsyncDelayedGradients` simulates asynchronous workers whose gradients arrive
late: the task's loss, and so its gradient, is evaluated at the params of an earlier
call, kept in a ring buffer of the last ``delay_steps`` params in the model state. The
gradient with respect to the current params is the wrapped task's gradient at the
stale params, ``g_t = grad L(theta_{t - s})``, with staleness ``s = max(1,
delay_steps - 1)`` calls, as in the notes' library (its buffer is read one slot past
the oldest entry). :func:`AsyncDelayedGradientsTaskFamily` wraps every member of a
family.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt import _validate
from learnopt.tasks import base as tasks_base
from learnopt.tasks.augmentations.wrapping import WrappedTaskFamilyWithTaskWrapper, _TaskWrapper

__all__ = ["AsyncDelayedGradients", "AsyncDelayedGradientsTaskFamily", "DelayedParamsState"]

PyTree = Any


@flax.struct.dataclass
class DelayedParamsState:
    """Model state of :class:`AsyncDelayedGradients`.

    Attributes:
      past_params: the last ``delay_steps`` params, leaves ``[delay_steps, ...]`` (a ring:
        slot ``count % delay_steps`` is written next).
      count: int32, how many params were written.
      model_state: the wrapped task's model state.
    """

    past_params: PyTree
    count: jax.Array
    model_state: PyTree


class AsyncDelayedGradients(_TaskWrapper):
    """The wrapped task's loss and gradient at the params of ``max(1, delay_steps - 1)``
    calls ago (the library's name and arguments).

    The past params live in the model state (:class:`DelayedParamsState`), so use
    ``init_with_state`` / ``loss_with_state``; ``loss(params, key, data)`` has no state
    and raises. The buffer starts with ``delay_steps`` copies of the initial params.

    Args:
      task: the task to wrap.
      delay_steps: the ring buffer's length (>= 1).
    """

    def __init__(self, task: tasks_base.Task, delay_steps: int = 2):
        super().__init__(task)
        self.delay_steps = _validate.positive_int("delay_steps", delay_steps)

    def init_with_state(self, key: jax.Array) -> tuple[PyTree, DelayedParamsState]:
        """The wrapped task's params, and a buffer holding ``delay_steps`` copies of them.

        Args:
          key: a PRNG key.

        Returns:
          ``(params, DelayedParamsState)``.
        """
        params, state = self.task.init_with_state(key)
        past = jax.tree.map(lambda p: jnp.stack([p] * self.delay_steps), params)
        return params, DelayedParamsState(past, jnp.asarray(0, jnp.int32), state)

    def loss_with_state_and_aux(self, params, state, key, data):
        """The loss at the stale params; its gradient reaches ``params``; ``params`` is stored.

        Args:
          params: the current params.
          state: a :class:`DelayedParamsState`.
          key: the wrapped task's PRNG key.
          data: one batch.

        Returns:
          ``(loss, next DelayedParamsState, aux)``.
        """
        if not isinstance(state, DelayedParamsState):
            raise TypeError(
                f"{self.name}: state must be the DelayedParamsState of init_with_state, got "
                f"{type(state).__name__}"
            )
        d = self.delay_steps
        read = (state.count + (1 - d) % d) % d
        stale = jax.tree.map(lambda b: jax.lax.stop_gradient(b[read]), state.past_params)
        # The value at the stale params, the gradient (identity) to the current ones.
        at = jax.tree.map(lambda s, p: s + (p - jax.lax.stop_gradient(p)), stale, params)
        loss, model_state, aux = self.task.loss_with_state_and_aux(at, state.model_state, key, data)
        write = state.count % d
        past = jax.tree.map(
            lambda b, p: b.at[write].set(jax.lax.stop_gradient(p).astype(b.dtype)),
            state.past_params,
            params,
        )
        return loss, DelayedParamsState(past, state.count + 1, model_state), aux

    def loss(self, params, key, data):
        """Not available: the past params are model state.

        Args:
          params: unused.
          key: unused.
          data: unused.

        Raises:
          ValueError: always; use ``loss_with_state``.
        """
        raise ValueError(
            f"{self.name} keeps the past params in its model state: use "
            "init_with_state and loss_with_state"
        )


def AsyncDelayedGradientsTaskFamily(  # noqa: N802  (the library's name)
    task_family: tasks_base.TaskFamily, delay_steps: int = 1
) -> WrappedTaskFamilyWithTaskWrapper:
    """Every member of ``task_family`` wrapped in :class:`AsyncDelayedGradients`.

    Args:
      task_family: the family to wrap.
      delay_steps: the buffer length of every member (>= 1; the library's default 1).

    Returns:
      The family, named ``AsyncDelayedGradients_<family name>``.
    """
    _validate.positive_int("delay_steps", delay_steps)
    return WrappedTaskFamilyWithTaskWrapper(
        task_family,
        functools.partial(AsyncDelayedGradients, delay_steps=delay_steps),
        name=f"AsyncDelayedGradients_{task_family.name}",
    )
