"""What every augmentation is built on: a forwarding task wrapper, a family wrapper.

``_TaskWrapper`` forwards every method of a task to the wrapped one (a subclass overrides
what it changes); :class:`WrappedTaskFamilyWithTaskWrapper` applies a ``task -> task``
wrapper to every member of a family; ``_log_uniform`` draws the sampled quantities of
the family wrappers (scales, noise) as float32 arrays, so they can be traced.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.parametric import cfgobject

__all__ = ["WrappedTaskFamilyWithTaskWrapper"]

PyTree = Any


def _log_uniform(key: jax.Array, shape: tuple[int, ...], lo: float, hi: float) -> jax.Array:
    """``exp(u)`` with ``u ~ U[log lo, log hi)``: float32 of ``shape``; needs ``0 < lo <= hi``."""
    if not 0 < lo <= hi:
        raise ValueError(f"need 0 < low <= high for a log-uniform range, got ({lo}, {hi})")
    return jnp.exp(jax.random.uniform(key, shape, jnp.float32, math.log(lo), math.log(hi)))


class _TaskWrapper(tasks_base.Task):
    """Forwards everything to ``task``; subclasses override what they change."""

    def __init__(self, task: tasks_base.Task):
        self.task = task

    @property
    def datasets(self):
        return self.task.datasets

    @property
    def name(self) -> str:
        return f"{type(self).__name__}_{self.task.name}"

    def init_with_state(self, key):
        return self.task.init_with_state(key)

    def init(self, key):
        return self.init_with_state(key)[0]

    def loss_with_state_and_aux(self, params, state, key, data):
        return self.task.loss_with_state_and_aux(params, state, key, data)

    def loss_with_state(self, params, state, key, data):
        loss, state, _ = self.loss_with_state_and_aux(params, state, key, data)
        return loss, state

    def loss(self, params, key, data):
        return self.loss_with_state(params, None, key, data)[0]

    def normalizer(self, loss):
        return self.task.normalizer(loss)


class _FamilyWrapper(tasks_base.TaskFamily):
    """A family built on ``task_family``: its datasets, under ``name``."""

    def __init__(self, task_family: tasks_base.TaskFamily, name: str):
        self.task_family = task_family
        self.datasets = task_family.datasets
        self._name = name


class _LogUniformFamily(_FamilyWrapper):
    """Members are ``wrap(task, value)``, ``value`` log-uniform in ``value_range`` (traced).

    Subclasses set ``_cfg_name`` (the configuration's name, and the prefix of the family's
    name), ``_field`` (the value's key in the configuration) and ``_wrap`` (a staticmethod).
    """

    _cfg_name: str
    _field: str
    _wrap: Callable[[tasks_base.Task, jax.Array], tasks_base.Task]

    def __init__(self, task_family: tasks_base.TaskFamily, value_range: tuple[float, float]):
        _log_uniform(jax.random.key(0), (), *value_range)  # validates the range
        super().__init__(task_family, f"{self._cfg_name}_{task_family.name}")
        self._value_range = value_range

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """Draws the wrapped family's configuration and the value, log-uniform in its range.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``sub_cfg`` and the value (a float32 scalar) under ``_field``.
        """
        k1, k2 = jax.random.split(key)
        return cfgobject.CFGNamed(
            self._cfg_name,
            {
                "sub_cfg": self.task_family.sample(k1),
                self._field: _log_uniform(k2, (), *self._value_range),
            },
        )

    def task_fn(self, cfg: cfgobject.CFGNamed) -> tasks_base.Task:
        """The wrapped family's task for ``cfg``, wrapped with the sampled value.

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task.
        """
        task = self.task_family.task_fn(cfg.values["sub_cfg"])
        return self._wrap(task, cfg.values[self._field])


class WrappedTaskFamilyWithTaskWrapper(_FamilyWrapper):
    """Applies ``task_wrapper`` to every task of ``task_family``.

    Args:
      task_family: the family to wrap.
      task_wrapper: ``task -> task``, applied to every member.
      name: the family's name (default ``"Wrapped_<family name>"``).
    """

    def __init__(
        self,
        task_family: tasks_base.TaskFamily,
        task_wrapper: Callable[[tasks_base.Task], tasks_base.Task],
        name: str | None = None,
    ):
        super().__init__(task_family, name or f"Wrapped_{task_family.name}")
        self.task_wrapper = task_wrapper

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """The wrapped family's configuration, named.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``inner_cfg``, the wrapped family's sample.
        """
        return cfgobject.CFGNamed(
            "WrappedTaskFamilyWithTaskWrapper", {"inner_cfg": self.task_family.sample(key)}
        )

    def task_fn(self, cfg: cfgobject.CFGNamed) -> tasks_base.Task:
        """``task_wrapper`` applied to the wrapped family's task for ``cfg``.

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task.
        """
        return self.task_wrapper(self.task_family.task_fn(cfg.values["inner_cfg"]))
