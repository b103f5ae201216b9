"""Reparameterized weights: train ``w / s`` instead of ``w`` (the loss sees ``(w / s) * s``).

The same function, with gradients scaled by ``s``. :class:`ReparamWeightsFamily` draws
``s`` log-uniformly per sample: one for all weights (``global``), one per tensor
(``tensor``) or one per parameter (``parameter``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.augmentations.wrapping import (
    PyTree,
    _FamilyWrapper,
    _log_uniform,
    _TaskWrapper,
)
from learnopt.tasks.parametric import cfgobject

__all__ = ["ReparamWeights", "ReparamWeightsFamily"]


class ReparamWeights(_TaskWrapper):
    """Parameters ``w / param_scale``; the wrapped loss sees ``w * param_scale``.

    Args:
      task: the task to wrap.
      param_scale: a number (all parameters) or a pytree matching the parameters (per
        tensor, or per parameter with arrays of the parameters' shapes).
    """

    def __init__(self, task: tasks_base.Task, param_scale: Any):
        super().__init__(task)
        self.param_scale = param_scale

    def _scales(self, params: PyTree) -> PyTree:
        leaves = jax.tree_util.tree_leaves(self.param_scale)
        if (
            len(leaves) == 1
            and jnp.ndim(leaves[0]) == 0
            and not isinstance(self.param_scale, dict | list | tuple)
        ):
            return jax.tree_util.tree_map(lambda _: self.param_scale, params)
        if jax.tree_util.tree_structure(params) != jax.tree_util.tree_structure(self.param_scale):
            raise ValueError(
                "param_scale must be a number or match the parameters' structure: "
                f"{jax.tree_util.tree_structure(self.param_scale)} vs "
                f"{jax.tree_util.tree_structure(params)}"
            )
        return self.param_scale

    def init_with_state(self, key):
        """The wrapped task's initial params divided by their scales: ``w / param_scale``.

        Args:
          key: a PRNG key (passed to the wrapped task).

        Returns:
          ``(params / param_scale, model_state)``, each leaf in its own dtype.
        """
        params, state = self.task.init_with_state(key)
        scaled = jax.tree_util.tree_map(
            lambda p, s: (p / s).astype(p.dtype), params, self._scales(params)
        )
        return scaled, state

    def loss_with_state_and_aux(self, params, state, key, data):
        """The wrapped task's loss at ``params * param_scale``.

        Args:
          params: the reparameterized params (``w / param_scale``).
          state: the wrapped task's model state.
          key: the wrapped task's PRNG key.
          data: one batch.

        Returns:
          The wrapped task's ``(loss, new_state, aux)``.
        """
        scaled = jax.tree_util.tree_map(
            lambda p, s: (p * s).astype(p.dtype), params, self._scales(params)
        )
        return self.task.loss_with_state_and_aux(scaled, state, key, data)


class ReparamWeightsFamily(_FamilyWrapper):
    """A family whose members are reparameterized by sampled scales (see :class:`ReparamWeights`).

    Args:
      task_family: the family to wrap.
      level: ``"global"`` (one scale), ``"tensor"`` (one per tensor) or ``"parameter"``
        (one per parameter; the sample stores a key per tensor, not the scales).
      param_scale_range: scales are log-uniform in this range.
    """

    def __init__(
        self,
        task_family: tasks_base.TaskFamily,
        level: str,
        param_scale_range: tuple[float, float] = (0.01, 100.0),
    ):
        if level not in ("global", "tensor", "parameter"):
            raise ValueError(f"level must be 'global', 'tensor' or 'parameter', got {level!r}")
        self.level = level
        self.param_scale_range = tuple(float(x) for x in param_scale_range)
        _log_uniform(jax.random.key(0), (), *self.param_scale_range)  # validates the range
        super().__init__(task_family, f"ReparamWeights{level}_{task_family.name}")

    def _abstract_params(self) -> PyTree:
        def init(key):
            k1, k2 = jax.random.split(key)
            return self.task_family.task_fn(self.task_family.sample(k1)).init_with_state(k2)[0]

        return jax.eval_shape(init, jax.random.key(0))

    def sample(self, key: jax.Array) -> cfgobject.CFGNamed:
        """Draws the wrapped family's configuration and the scales, log-uniform in the range.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` with ``sub_cfg`` and ``param_scale`` (a float32 scalar for
          ``"global"``, one per tensor for ``"tensor"``) or, for ``"parameter"``,
          ``param_scale_keys`` (one PRNG key per tensor; ``task_fn`` draws the scales).
        """
        k_sub, k_scale = jax.random.split(key)
        sub = self.task_family.sample(k_sub)
        if self.level == "global":
            values = {
                "sub_cfg": sub,
                "param_scale": _log_uniform(k_scale, (), *self.param_scale_range),
            }
        else:
            leaves, tree = jax.tree_util.tree_flatten(self._abstract_params())
            keys = jax.tree_util.tree_unflatten(tree, list(jax.random.split(k_scale, len(leaves))))
            if self.level == "tensor":
                scales = jax.tree_util.tree_map(
                    lambda k: _log_uniform(k, (), *self.param_scale_range), keys
                )
                values = {"sub_cfg": sub, "param_scale": scales}
            else:
                values = {"sub_cfg": sub, "param_scale_keys": keys}
        return cfgobject.CFGNamed("ReparamWeightsFamily", values)

    def task_fn(self, cfg: cfgobject.CFGNamed) -> tasks_base.Task:
        """The wrapped family's task for ``cfg`` as a :class:`ReparamWeights` (sampled scales).

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          The task.
        """
        values = cfg.values
        if self.level == "parameter":
            scale = jax.tree_util.tree_map(
                lambda p, k: _log_uniform(k, p.shape, *self.param_scale_range),
                self._abstract_params(),
                values["param_scale_keys"],
            )
        else:
            scale = values["param_scale"]
        return ReparamWeights(self.task_family.task_fn(values["sub_cfg"]), scale)
