"""The library's one-step interface and the meta-loss of a population's current params.

:class:`PopulationQueries` holds the methods of
:class:`~learnopt.outer_trainers.lopt_truncated_step.VectorizedLOptTruncatedStep` that
read a population rather than advance it by a truncation: the notes' library's
``unroll_step`` (one step, then restarts) and ``meta_loss_batch``, and
``mean_meta_loss`` (the meta-loss recomputed at the current params, for
``loss_type="last_recompute"``). They build on the step's ``unroll``, ``reset_done``,
``learned_opt``, ``task_family``, ``num_tasks`` and loss helpers.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.outer_trainers.unroll_state import (
    TruncatedUnrollOut,
    TruncatedUnrollState,
    population_size,
    tile_population,
)

PyTree = Any
MetaParams = Any

__all__ = ["PopulationQueries"]


class PopulationQueries:
    """Methods of the truncated step that query a population (see the module docstring).

    A mixin: :class:`~learnopt.outer_trainers.lopt_truncated_step.VectorizedLOptTruncatedStep`
    provides what they call.
    """

    def unroll_step(
        self,
        theta: MetaParams,
        unroll_state: TruncatedUnrollState,
        key: jax.Array,
        data: PyTree,
        outer_state: Any = None,
        theta_is_vector: bool = False,
        override_num_steps: int | None = None,
    ) -> tuple[TruncatedUnrollState, TruncatedUnrollOut]:
        """One inner step of every member, then finished runs restart (library interface).

        Args:
          theta: meta-parameters.
          unroll_state: the population's state.
          key: randomness of the step and of the restarts.
          data: one step of ``get_batch()`` (leaves
            ``[num_tasks, ...]``), or None.
          outer_state: passed to the truncation schedule (the restarted runs' lengths).
          theta_is_vector: ``theta`` has a leading population axis.
          override_num_steps: set every run's length to this first.

        Returns:
          ``(state, out)``; as in the library, ``out`` has no steps axis: ``loss``,
          ``iteration``, ``mask`` (and ``weight``, if any) are ``[P]`` for the one
          step taken (``unroll`` keeps its ``[num_steps, P]``).
        """
        k_step, k_reset = jax.random.split(key)
        if override_num_steps is not None:
            unroll_state = unroll_state.replace(
                truncation_length=jnp.full_like(unroll_state.truncation_length, override_num_steps)
            )
        data = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], data)
        copies = population_size(unroll_state) // self.num_tasks
        state, out = self.unroll(
            theta, unroll_state, k_step, data, 1, theta_is_vector, num_copies=copies
        )
        state, _ = self.reset_done(theta, state, k_reset, theta_is_vector, copies, outer_state)
        out = out.replace(
            loss=out.loss[0],
            iteration=out.iteration[0],
            weight=None if out.weight is None else out.weight[0],
        )
        return state, out

    def mean_meta_loss(
        self,
        theta: MetaParams,
        state: TruncatedUnrollState,
        key: jax.Array,
        data: PyTree,
        theta_is_vector: bool = False,
        num_copies: int = 1,
    ) -> jax.Array:
        """``[P]`` mean meta-loss of each member's current params over ``data``.

        Used to recompute a final loss (``loss_type="last_recompute"``). With a
        ``meta_loss_transform`` it is the mean of the transformed losses of the batches.

        Args:
          theta: meta-parameters.
          state: the population's state.
          key: randomness of the losses.
          data: ``[S, num_tasks, ...]`` (e.g. ``get_outer_batch(S)``) or None.
          theta_is_vector: ``theta`` has a leading population axis.
          num_copies: 2 for antithetic pairs stacked along the population axis.

        Returns:
          The ``[P]`` meta-losses (float32).
        """

        def one(theta, s, k, batches):
            opt = self.learned_opt.opt_fn(theta)
            task = self.task_family.task_fn(s.task_param)
            params, model_state = opt.get_params_state(s.inner_opt_state)
            n = 1 if batches is None else jax.tree_util.tree_leaves(batches)[0].shape[0]
            keys = jax.random.split(k, n)
            batch_axis = None if batches is None else 0

            def loss_on(k_i, b):
                loss, _, aux = self._loss_and_aux(task, params, model_state, k_i, b)
                return self._meta_value(task, loss, aux)

            return jnp.mean(jax.vmap(loss_on, in_axes=(0, batch_axis))(keys, batches))

        member_keys = tile_population(jax.random.split(key, self.num_tasks), num_copies)
        batches = None
        if data is not None:
            # [S, num_tasks, ...] -> [P, S, ...]
            batches = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), data)
            batches = tile_population(batches, num_copies)
        theta_axis = 0 if theta_is_vector else None
        return jax.vmap(one, in_axes=(theta_axis, 0, 0, 0 if data is not None else None))(
            theta, state, member_keys, batches
        )

    def meta_loss_batch(
        self,
        theta: MetaParams,
        unroll_state: TruncatedUnrollState,
        key: jax.Array,
        data: PyTree,
        outer_state: Any = None,
        theta_is_vector: bool = False,
    ) -> jax.Array:
        """``[P]`` meta-loss of each member on one batch (library interface).

        Args:
          theta: meta-parameters.
          unroll_state: the population's state.
          key: randomness of the losses.
          data: one batch ``[num_tasks, ...]`` (e.g. ``get_outer_batch()``) or
            None.
          outer_state: unused (the library's signature).
          theta_is_vector: ``theta`` has a leading population axis.

        Returns:
          The ``[P]`` meta-losses.
        """
        if data is not None:
            data = jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], data)
        copies = population_size(unroll_state) // self.num_tasks
        return self.mean_meta_loss(theta, unroll_state, key, data, theta_is_vector, copies)
