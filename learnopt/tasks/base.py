"""Tasks and task families: the inner optimization problems that optimizers train.

A :class:`Task` bundles parameter initialization, a loss and the data it is trained on.
A :class:`TaskFamily` is a distribution over tasks: ``family.sample(key)`` draws a
(traceable) configuration and ``family.task_fn(cfg)`` builds the task for it, so a
population of different tasks can be ``vmap``-ed inside one jitted meta-step.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.registry import Registry, UnknownNameError

PyTree = Any
Params = Any
ModelState = Any
Batch = Any
TaskCfg = Any

__all__ = [
    "Task",
    "TaskFamily",
    "SingleTaskFamily",
    "single_task_to_family",
    "register_task",
    "get_task",
    "registered_tasks",
    "UnknownNameError",
    "TASKS",
    "TASK_FAMILIES",
]


class _Named:
    """What tasks and families share: ``datasets``, a ``name`` and a ``repr`` showing it."""

    datasets: Any = None
    _name: str | None = None  # a subclass named at construction stores the name here

    @property
    def name(self) -> str:
        """The name given at construction, else the class name (subclasses may override)."""
        return self._name or type(self).__name__

    def __repr__(self) -> str:
        return f"{self.name}()"


class Task(_Named):
    """An optimization problem: ``init(key) -> params`` and ``loss(params, key, batch)``.

    Subclasses implement ``init`` and ``loss`` (stateless models) or
    ``init_with_state`` and ``loss_with_state`` (models with e.g. batch-norm
    statistics); the other pair is derived. ``datasets`` is a
    :class:`learnopt.tasks.datasets.base.Datasets` or ``None`` for data-free tasks.
    """

    def init(self, key: jax.Array) -> Params:
        """Initial params (override this or :meth:`init_with_state`).

        Args:
          key: a PRNG key.

        Returns:
          The params, a pytree of float arrays.
        """
        if type(self).init_with_state is Task.init_with_state:
            raise NotImplementedError(f"{self.name} implements neither init nor init_with_state")
        return self.init_with_state(key)[0]

    def loss(self, params: Params, key: jax.Array, data: Batch) -> jax.Array:
        """The loss of ``params`` on one batch (override this or :meth:`loss_with_state`).

        Args:
          params: the params.
          key: a PRNG key (dropout, sampled losses), or None.
          data: one batch from ``datasets`` (None for data-free tasks).

        Returns:
          A scalar loss.
        """
        if type(self).loss_with_state is Task.loss_with_state:
            raise NotImplementedError(f"{self.name} implements neither loss nor loss_with_state")
        return self.loss_with_state(params, None, key, data)[0]

    def init_with_state(self, key: jax.Array) -> tuple[Params, ModelState]:
        """Initial params and model state (e.g. batch-norm statistics).

        Args:
          key: a PRNG key.

        Returns:
          ``(params, model_state)``; the model state is None unless overridden.
        """
        return self.init(key), None

    def loss_with_state(
        self, params: Params, state: ModelState, key: jax.Array, data: Batch
    ) -> tuple[jax.Array, ModelState]:
        """The loss and the next model state.

        Args:
          params: the params.
          state: the model state.
          key: a PRNG key, or None.
          data: one batch.

        Returns:
          ``(loss, new_state)``; the state is returned unchanged unless overridden.
        """
        return self.loss(params, key, data), state

    def loss_and_aux(
        self, params: Params, key: jax.Array, data: Batch
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        """``(loss, aux)``: the loss and a dict of extra scalars to log (empty by default).

        Args:
          params: the params.
          key: a PRNG key, or None.
          data: one batch.

        Returns:
          ``(loss, aux)``.
        """
        return self.loss(params, key, data), {}

    def loss_with_state_and_aux(
        self, params: Params, state: ModelState, key: jax.Array, data: Batch
    ) -> tuple[jax.Array, ModelState, dict[str, jax.Array]]:
        """The loss, the next model state and the extra scalars of :meth:`loss_and_aux`.

        Args:
          params: the params.
          state: the model state.
          key: a PRNG key, or None.
          data: one batch.

        Returns:
          ``(loss, new_state, aux)``.
        """
        if (
            type(self).loss_and_aux is not Task.loss_and_aux
            and type(self).loss_with_state is Task.loss_with_state
        ):
            loss, aux = self.loss_and_aux(params, key, data)
            return loss, state, aux
        loss, state = self.loss_with_state(params, state, key, data)
        return loss, state, {}

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """Maps a raw loss onto the scale used for meta-losses (identity by default).

        Args:
          loss: a loss of this task.

        Returns:
          The normalized loss.
        """
        return loss


class TaskFamily(_Named):
    """A distribution over tasks.

    ``sample(key)`` must be traceable (it is called inside ``jit`` and ``vmap``) and
    returns a pytree ``cfg``; ``task_fn(cfg)`` returns a :class:`Task` whose ``init``
    and ``loss`` may close over ``cfg``'s (traced) arrays. All tasks of a family share
    ``datasets`` so one batch of data can feed the whole population.
    """

    def sample(self, key: jax.Array) -> TaskCfg:
        """Draws one configuration (traceable: called inside ``jit`` and ``vmap``).

        Args:
          key: a PRNG key.

        Returns:
          The configuration, a pytree of arrays.
        """
        raise NotImplementedError

    def task_fn(self, cfg: TaskCfg) -> Task:
        """The task for a configuration drawn by :meth:`sample`.

        Args:
          cfg: the configuration (its arrays may be traced).

        Returns:
          The task.
        """
        raise NotImplementedError

    def eval_task_fn(self, cfg: TaskCfg) -> Task:
        """The task to evaluate for ``cfg`` (the training task by default).

        Args:
          cfg: a configuration drawn by :meth:`sample`.

        Returns:
          The task.
        """
        return self.task_fn(cfg)

    def sample_task(self, key: jax.Array) -> Task:
        """One task of the family: ``task_fn(sample(key))``.

        Args:
          key: a PRNG key.

        Returns:
          The task.
        """
        return self.task_fn(self.sample(key))


class SingleTaskFamily(TaskFamily):
    """The family that always returns one fixed task (see :func:`single_task_to_family`).

    Args:
      task: the task that every ``task_fn`` returns (its ``datasets`` are the family's).
    """

    def __init__(self, task: Task):
        self.task = task
        self.datasets = task.datasets

    @property
    def name(self) -> str:
        """The task's name."""
        return self.task.name

    def sample(self, key: jax.Array) -> jax.Array:
        """A dummy configuration.

        Args:
          key: unused.

        Returns:
          An int32 zero (strongly typed, so that states holding it never change type).
        """
        return jnp.zeros((), jnp.int32)

    def task_fn(self, cfg: TaskCfg) -> Task:
        """The task, whatever ``cfg``.

        Args:
          cfg: unused.

        Returns:
          The task this family wraps.
        """
        return self.task


def single_task_to_family(task: Task) -> TaskFamily:
    """Wraps a single task as a family (``sample`` returns a dummy, ``task_fn`` the task).

    Args:
      task: a task (a family is returned unchanged).

    Returns:
      A :class:`TaskFamily`.

    Raises:
      TypeError: ``task`` is neither a ``Task`` nor a ``TaskFamily``.
    """
    if isinstance(task, TaskFamily):
        return task
    if not isinstance(task, Task):
        raise TypeError(f"single_task_to_family expects a Task, got {type(task).__name__}")
    return SingleTaskFamily(task)


#: Every registered task: ``TASKS.get(name)`` builds one (zero-argument constructors).
#: Each task module registers its tasks; ``learnopt.tasks`` imports them all, so the
#: registry is full whichever module of the package was imported first.
TASKS: Registry[Task] = Registry("task", listing="tasks")


#: Every registered task family: ``TASK_FAMILIES.get(name)`` builds one (filled the
#: same way, by the modules of ``learnopt.tasks.parametric``, ``quadratics`` and ``suites``).
TASK_FAMILIES: Registry[TaskFamily] = Registry("task family", listing="families")


def register_task(fn_or_name: Any = None, *, name: str | None = None):
    """Registers a task constructor under its ``__name__`` (usable as a decorator).

    Args:
      fn_or_name: the constructor (``@register_task``), or its name
        (``@register_task("name")``).
      name: the name, as a keyword (default: the constructor's ``__name__``).

    Returns:
      The constructor (as a decorator: the decorator that registers it).
    """
    return TASKS.register(fn_or_name, name=name)


def registered_tasks() -> list[str]:
    """Names accepted by :func:`get_task`, sorted.

    Returns:
      The registered task names.
    """
    return TASKS.names()


def get_task(name: str) -> Task:
    """Builds a registered task by name, e.g. ``get_task("ImageMLP_Digits8_Relu32")``.

    Args:
      name: a registered task name (see :func:`registered_tasks`).

    Returns:
      The task.
    """
    return TASKS.get(name)
