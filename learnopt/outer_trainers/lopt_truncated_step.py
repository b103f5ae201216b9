"""A population of inner training runs driven by a learned optimizer.

:class:`VectorizedLOptTruncatedStep` holds ``num_tasks`` inner runs on a ``vmap``
axis. Each run has its own task sample, inner optimizer state, step counter and
truncation length. Gradient estimators unroll it for a few steps at a time
(:meth:`~VectorizedLOptTruncatedStep.unroll`, a ``lax.scan``, so compile time does not
grow with the unroll length) and then re-initialize the runs that reached their length
(:meth:`~VectorizedLOptTruncatedStep.reset_done`). The re-initialization runs under one
``lax.cond`` on "any run finished" *outside* the ``vmap``, so the population pays for
an init only in the unrolls where some run actually ends, not at every step.

Everything here is traceable and is meant to run inside one jitted outer step. Batches
are fetched on the host with :meth:`~VectorizedLOptTruncatedStep.get_batch` and passed
in, stacked ``[num_steps, num_tasks, batch, ...]``.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.learned_optimizers import base as lopt_base
from learnopt.outer_trainers import truncation_schedule as ts
from learnopt.tasks import base as tasks_base

PyTree = Any
MetaParams = Any

__all__ = [
    "TruncatedUnrollState",
    "TruncatedUnrollOut",
    "VectorizedLOptTruncatedStep",
    "tree_where",
    "tile_population",
]


@flax.struct.dataclass
class TruncatedUnrollState:
    """State of a population of inner runs; every leaf has a leading population axis."""

    inner_opt_state: PyTree
    inner_step: jax.Array  # int32 [P]: inner steps taken in the current run
    truncation_length: jax.Array  # int32 [P]: when the current run ends
    task_param: PyTree  # the task sample of each run


@flax.struct.dataclass
class TruncatedUnrollOut:
    """What an unroll of ``K`` steps reports."""

    loss: jax.Array  # float32 [K, P]: meta-loss of every step of every run
    iteration: jax.Array  # int32 [K, P]: the inner step each loss was taken at
    is_done: jax.Array  # bool [P]: the run reached its truncation length in this unroll


def tree_where(mask: jax.Array, on_true: PyTree, on_false: PyTree) -> PyTree:
    """Per-member select between two population trees (``mask`` has shape ``[P]``)."""

    def sel(a, b):
        m = jnp.reshape(mask, mask.shape + (1,) * (jnp.ndim(a) - mask.ndim))
        return jnp.where(m, a, b)

    return jax.tree_util.tree_map(sel, on_true, on_false)


def tile_population(tree: PyTree, copies: int, axis: int = 0) -> PyTree:
    """Repeats a population tree ``copies`` times along ``axis`` (antithetic pairs)."""
    if copies == 1:
        return tree
    return jax.tree_util.tree_map(lambda x: jnp.concatenate([x] * copies, axis=axis), tree)


class VectorizedLOptTruncatedStep:
    """Inner training of ``num_tasks`` task samples with ``learned_opt``, as a vmap axis.

    Args:
      task_family: a :class:`~learnopt.tasks.base.TaskFamily` (or a single ``Task``).
      learned_opt: the learned optimizer whose ``theta`` is meta-trained.
      trunc_sched: how long each inner run lasts.
      num_tasks: population size.
      random_initial_iteration_offset: the first runs start at a random inner step in
        ``[0, offset)`` so that they end at different times (staggered starts).
      meta_loss_split: ``None`` uses the training loss of each step as the meta-loss;
        a split name (``"outer_valid"``) evaluates the updated params on a batch of it.
      remat: rematerialize each inner step in the backward pass (memory for compute:
        for long unrolls differentiated with backprop).
    """

    def __init__(
        self,
        task_family: tasks_base.TaskFamily | tasks_base.Task,
        learned_opt: lopt_base.LearnedOptimizer,
        trunc_sched: ts.TruncationSchedule,
        num_tasks: int,
        random_initial_iteration_offset: int = 0,
        meta_loss_split: str | None = None,
        remat: bool = False,
    ):
        if isinstance(task_family, tasks_base.Task):
            task_family = tasks_base.single_task_to_family(task_family)
        if not isinstance(task_family, tasks_base.TaskFamily):
            raise TypeError(f"expected a TaskFamily or Task, got {type(task_family).__name__}")
        if int(num_tasks) < 1:
            raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
        if meta_loss_split not in (None, "train", "inner_valid", "outer_valid", "test"):
            raise ValueError(
                f"meta_loss_split must be None or a split name (train, inner_valid, "
                f"outer_valid, test), got {meta_loss_split!r}"
            )
        self.task_family = task_family
        self.learned_opt = learned_opt
        self.trunc_sched = trunc_sched
        self.num_tasks = int(num_tasks)
        self.random_initial_iteration_offset = int(random_initial_iteration_offset)
        self.meta_loss_split = meta_loss_split
        self.remat = remat

    def task_name(self) -> str:
        return self.task_family.name

    # ----------------------------------------------------------------- data (host side)
    def get_batch(self, num_steps: int) -> PyTree:
        """Stacked batches for ``num_steps`` steps of the population (numpy, on the host).

        Returns ``None`` for data-free families, else ``{"train": ..., "meta": ...}`` with
        leaves ``[num_steps, num_tasks, batch, ...]`` (``"meta"`` only with a meta split).
        """
        datasets = self.task_family.datasets
        if datasets is None:
            return None
        out = {"train": datasets.train.take(num_steps, self.num_tasks)}
        if self.meta_loss_split is not None:
            split = getattr(datasets, self.meta_loss_split)
            out["meta"] = split.take(num_steps, self.num_tasks)
        return out

    def get_outer_batch(self, num_batches: int) -> PyTree:
        """``num_batches`` batches per task from the meta split (for loss recomputation)."""
        datasets = self.task_family.datasets
        if datasets is None:
            return None
        split = getattr(datasets, self.meta_loss_split or "train")
        return split.take(num_batches, self.num_tasks)

    # -------------------------------------------------------------- init / reset (traced)
    def _init_one(self, theta: MetaParams, key: jax.Array) -> TruncatedUnrollState:
        k_task, k_params, k_len, k_opt = jax.random.split(key, 4)
        task_param = self.task_family.sample(k_task)
        task = self.task_family.task_fn(task_param)
        params, model_state = task.init_with_state(k_params)
        opt = self.learned_opt.opt_fn(theta, is_training=True)
        opt_state = opt.init(params, model_state=model_state, key=k_opt)
        return TruncatedUnrollState(
            inner_opt_state=opt_state,
            inner_step=jnp.zeros((), jnp.int32),
            truncation_length=self.trunc_sched.sample_length(k_len),
            task_param=task_param,
        )

    def init_population(
        self,
        theta: MetaParams,
        key: jax.Array,
        theta_is_vector: bool = False,
        num_copies: int = 1,
        stagger: bool = False,
    ) -> TruncatedUnrollState:
        """Fresh runs for ``num_copies * num_tasks`` members (copies share keys and tasks)."""
        k_init, k_offset = jax.random.split(key)
        keys = tile_population(jax.random.split(k_init, self.num_tasks), num_copies)
        in_axes = (0 if theta_is_vector else None, 0)
        state = jax.vmap(self._init_one, in_axes=in_axes)(theta, keys)
        if stagger and self.random_initial_iteration_offset > 0:
            offsets = jax.random.randint(
                k_offset, (self.num_tasks,), 0, self.random_initial_iteration_offset, jnp.int32
            )
            state = state.replace(inner_step=tile_population(offsets, num_copies))
        return state

    def init_step_state(
        self, theta: MetaParams, key: jax.Array, theta_is_vector: bool = False
    ) -> TruncatedUnrollState:
        """The first state of the population, with staggered starts."""
        return self.init_population(theta, key, theta_is_vector, stagger=True)

    def reset_done(
        self,
        theta: MetaParams,
        state: TruncatedUnrollState,
        key: jax.Array,
        theta_is_vector: bool = False,
        num_copies: int = 1,
    ) -> tuple[TruncatedUnrollState, jax.Array]:
        """Re-initializes the runs that reached their truncation length.

        Returns the new state and the ``[P]`` mask of runs that were reset. The
        initialization is skipped entirely (``lax.cond``) when no run is done.
        """
        done = state.inner_step >= state.truncation_length

        def reset(s):
            fresh = self.init_population(theta, key, theta_is_vector, num_copies)
            return tree_where(done, fresh, s)

        state = jax.lax.cond(jnp.any(done), reset, lambda s: s, state)
        return state, done

    # ------------------------------------------------------------------- unroll (traced)
    def _step_one(
        self,
        theta: MetaParams,
        state: TruncatedUnrollState,
        key: jax.Array,
        batch: PyTree,
        meta_batch: PyTree,
    ) -> tuple[TruncatedUnrollState, tuple[jax.Array, jax.Array]]:
        opt = self.learned_opt.opt_fn(theta, is_training=True)
        task = self.task_family.task_fn(state.task_param)
        params, model_state = opt.get_params_state(state.inner_opt_state)
        k_loss, k_opt, k_meta = jax.random.split(key, 3)
        (loss, model_state), grads = jax.value_and_grad(task.loss_with_state, has_aux=True)(
            params, model_state, k_loss, batch
        )
        opt_state = opt.update(
            state.inner_opt_state, grads, loss=loss, model_state=model_state, key=k_opt
        )
        if self.meta_loss_split is None:
            meta_loss = loss
        else:
            new_params, new_model_state = opt.get_params_state(opt_state)
            meta_loss, _ = task.loss_with_state(new_params, new_model_state, k_meta, meta_batch)
        meta_loss = jnp.asarray(task.normalizer(meta_loss), jnp.float32)
        new_state = state.replace(inner_opt_state=opt_state, inner_step=state.inner_step + 1)
        return new_state, (meta_loss, state.inner_step)

    def unroll(
        self,
        theta: MetaParams,
        state: TruncatedUnrollState,
        key: jax.Array,
        data: PyTree,
        num_steps: int,
        theta_is_vector: bool = False,
        num_copies: int = 1,
    ) -> tuple[TruncatedUnrollState, TruncatedUnrollOut]:
        """Runs ``num_steps`` inner steps of every member (a ``lax.scan``; no resets).

        Args:
          theta: meta-parameters, shared, or with a leading population axis if
            ``theta_is_vector``.
          state: population state with ``P = num_copies * num_tasks`` members.
          key: randomness for the inner losses and updates (shared between copies).
          data: from :meth:`get_batch` (``[num_steps, num_tasks, ...]``) or ``None``.
          num_steps: the unroll length (static).
          num_copies: 2 for antithetic pairs stacked along the population axis.
        """
        step_keys = jax.random.split(key, num_steps)
        train = None if data is None else tile_population(data["train"], num_copies, axis=1)
        meta = None if data is None else data.get("meta")
        meta = None if meta is None else tile_population(meta, num_copies, axis=1)
        theta_axis = 0 if theta_is_vector else None
        step_one = self._step_one
        if self.remat:
            step_one = jax.checkpoint(step_one)
        vstep = jax.vmap(step_one, in_axes=(theta_axis, 0, 0, 0, 0))

        def body(s, xs):
            k, batch, meta_batch = xs
            member_keys = tile_population(jax.random.split(k, self.num_tasks), num_copies)
            s, (loss, iteration) = vstep(theta, s, member_keys, batch, meta_batch)
            return s, (loss, iteration)

        state, (losses, iterations) = jax.lax.scan(body, state, (step_keys, train, meta))
        is_done = state.inner_step >= state.truncation_length
        return state, TruncatedUnrollOut(loss=losses, iteration=iterations, is_done=is_done)

    def meta_loss_batch(
        self,
        theta: MetaParams,
        state: TruncatedUnrollState,
        key: jax.Array,
        data: PyTree,
        theta_is_vector: bool = False,
        num_copies: int = 1,
    ) -> jax.Array:
        """Mean loss of each member's current params over ``data`` (``[S, num_tasks, ...]``).

        Used to recompute a final loss on fresh batches (``loss_type="last_recompute"``).
        """

        def one(theta, s, k, batches):
            opt = self.learned_opt.opt_fn(theta)
            task = self.task_family.task_fn(s.task_param)
            params, model_state = opt.get_params_state(s.inner_opt_state)
            n = 1 if batches is None else jax.tree_util.tree_leaves(batches)[0].shape[0]
            keys = jax.random.split(k, n)
            batch_axis = None if batches is None else 0

            def loss_on(k_i, b):
                loss, _ = task.loss_with_state(params, model_state, k_i, b)
                return jnp.asarray(task.normalizer(loss), jnp.float32)

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


def population_size(state: TruncatedUnrollState) -> int:
    return int(np.shape(state.inner_step)[0])
