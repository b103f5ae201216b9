"""A population of inner training runs driven by a learned optimizer.

:class:`VectorizedLOptTruncatedStep` holds ``num_tasks`` inner runs on a ``vmap``
axis. Each run has its own task sample, inner optimizer state, step counter and
length (from the truncation schedule). Gradient estimators unroll it ``trunc_length``
steps at a time (:meth:`~VectorizedLOptTruncatedStep.unroll`, a ``lax.scan``, so compile
time does not grow with the unroll length) and then re-initialize the runs that reached
their length (:meth:`~VectorizedLOptTruncatedStep.reset_done`). The re-initialization runs
under one ``lax.cond`` on "any run finished" *outside* the ``vmap``, so the population
pays for an init only in the unrolls where some run actually ends, not at every step.

Everything here is traceable and is meant to run inside one jitted outer step. Batches
are fetched on the host with :meth:`~VectorizedLOptTruncatedStep.get_batch` and passed
in, stacked ``[num_steps, num_tasks, batch, ...]``.

The notes' library resets a finished run inside the step after it finishes
(``unroll_step``, a per-member ``lax.cond`` that ``vmap`` turns into computing both
branches at every step); learnopt resets at the end of the truncation. Its one-step
``unroll_step`` and ``meta_loss_batch`` are provided for code written against it.

The population's state and its helpers live in :mod:`~learnopt.outer_trainers.unroll_state`
and are re-exported here, the notes' library's path for them.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt import _validate
from learnopt.learned_optimizers import base as lopt_base
from learnopt.outer_trainers import meta_objective
from learnopt.outer_trainers import truncation_schedule as ts
from learnopt.outer_trainers.population_queries import PopulationQueries
from learnopt.outer_trainers.unroll_state import (
    TruncatedUnrollOut,
    TruncatedUnrollState,
    population_size,
    tile_population,
    tree_where,
)
from learnopt.tasks import base as tasks_base

PyTree = Any
MetaParams = Any

__all__ = [
    "TruncatedUnrollState",
    "TruncatedUnrollOut",
    "VectorizedLOptTruncatedStep",
    "SimpleVecLOptTruncatedStep",
    "META_LOSS_SPLITS",
    "tree_where",
    "tile_population",
    "population_size",
]

#: Values of ``meta_loss_split``: None (the training loss of each step, before its
#: update), ``"same_data"`` (the updated params on the same batch), a dataset split
#: (the updated params on a batch of that split) or ``"train+outer_valid"`` (the mean of
#: the meta-values on a fresh training batch and on an outer-valid batch: with the log
#: transform, the log of the geometric mean of the two losses).
META_LOSS_SPLITS = (
    None,
    "same_data",
    "train",
    "inner_valid",
    "outer_valid",
    "test",
    "train+outer_valid",
)
_DATA_SPLITS = ("train", "inner_valid", "outer_valid", "test")


class VectorizedLOptTruncatedStep(PopulationQueries):
    """Inner training of ``num_tasks`` task samples with ``learned_opt``, as a vmap axis.

    Args:
      task_family: a :class:`~learnopt.tasks.base.TaskFamily` (or a single ``Task``).
      learned_opt: the learned optimizer whose ``theta`` is meta-trained.
      trunc_sched: the length of each inner run (a
        :class:`~learnopt.outer_trainers.truncation_schedule.TruncationSchedule`).
      num_tasks: population size.
      meta_loss_split: what the meta-loss of a step is: None, the training loss of the
        step (of the params *before* its update); ``"same_data"``, the loss of the
        updated params on the same batch; a split name (``"outer_valid"``, ...), the
        loss of the updated params on a batch of that split; ``"train+outer_valid"``,
        the mean of the meta-values (after ``meta_loss_transform``) of the updated
        params on a fresh training batch and on an outer-valid batch, so that neither
        fitting nor generalization alone is rewarded.
      random_initial_iteration_offset: the first runs start at a random inner step in
        ``[0, offset)`` so that they end at different times (staggered starts; set it
        to the run length).
      outer_data_split: the split :meth:`get_outer_batch` draws from (the batches of
        ``loss_type="last_recompute"``).
      meta_loss_with_aux_key: use this entry of the task's
        ``loss_with_state_and_aux`` aux dict (e.g. an accuracy) as the meta-loss
        instead of the loss (not passed through the task's ``normalizer``).
      task_name: a name for metrics (default: the task family's name).
      remat: rematerialize each inner step in the backward pass (memory for compute:
        for long unrolls differentiated with backprop). learnopt's addition.
      meta_loss_weighting: how a step's meta-loss is weighted by its position in its
        inner run: None or ``"uniform"`` (every step alike, the default),
        ``"last_window"`` (only the last ``meta_loss_window`` steps of each run: an
        end-of-run objective) or ``"late"`` (weights growing as ``(t / T) **
        meta_loss_power``). The weights have mean 1 over a run and enter every
        estimator's ``"avg"`` meta-loss as ``(1/K) sum_k w_k L_k``; the exact formulas
        and what they make the truncated estimators follow are in
        :mod:`learnopt.outer_trainers.meta_objective`. learnopt's addition.
      meta_loss_window: the ``"last_window"`` window: a number of steps (an int) or a
        fraction of the run in ``(0, 1]`` (a float; 0.1 is the last 10%).
      meta_loss_power: the ``"late"`` exponent ``p >= 0`` (default 1: linear).
      meta_loss_transform: None (the meta-loss value as it is) or ``"log"``:
        ``log(max(l, 1e-8))`` of each step's raw loss ``l`` (not its normalizer's
        value), so that tasks of different loss scales weigh alike (see
        :mod:`~learnopt.outer_trainers.meta_objective`).
        learnopt's addition.
    """

    def __init__(
        self,
        task_family: tasks_base.TaskFamily | tasks_base.Task,
        learned_opt: lopt_base.LearnedOptimizer,
        trunc_sched: ts.TruncationSchedule,
        num_tasks: int,
        meta_loss_split: str | None = None,
        random_initial_iteration_offset: int = 0,
        outer_data_split: str = "train",
        meta_loss_with_aux_key: str | None = None,
        task_name: str | None = None,
        remat: bool = False,
        meta_loss_weighting: str | None = None,
        meta_loss_window: int | float | None = None,
        meta_loss_power: float = 1.0,
        meta_loss_transform: str | None = None,
    ):
        if isinstance(task_family, tasks_base.Task):
            task_family = tasks_base.single_task_to_family(task_family)
        if not isinstance(task_family, tasks_base.TaskFamily):
            raise TypeError(
                f"task_family must be a TaskFamily or Task, got {type(task_family).__name__}"
            )
        if not hasattr(trunc_sched, "sample_length"):
            raise TypeError(
                "trunc_sched must be a learnopt TruncationSchedule (e.g. "
                f"ConstantTruncationSchedule(100)), got {type(trunc_sched).__name__}"
            )
        _validate.positive_int("num_tasks", num_tasks)
        offset = random_initial_iteration_offset
        _validate.non_negative_int("random_initial_iteration_offset", offset)
        if meta_loss_split not in META_LOSS_SPLITS:
            raise ValueError(
                f"meta_loss_split must be one of {META_LOSS_SPLITS}, got {meta_loss_split!r}"
            )
        if outer_data_split not in _DATA_SPLITS:
            raise ValueError(
                f"outer_data_split must be one of {_DATA_SPLITS}, got {outer_data_split!r}"
            )
        self.task_family = task_family
        self.learned_opt = learned_opt
        self.trunc_sched = trunc_sched
        self.num_tasks = int(num_tasks)
        self.meta_loss_split = meta_loss_split
        self.random_initial_iteration_offset = int(random_initial_iteration_offset)
        self.outer_data_split = outer_data_split
        self.meta_loss_with_aux_key = meta_loss_with_aux_key
        self._task_name = task_name
        self.remat = remat
        (
            self.meta_loss_weighting,
            self.meta_loss_window,
            self.meta_loss_power,
        ) = meta_objective.check_weighting(meta_loss_weighting, meta_loss_window, meta_loss_power)
        self.meta_loss_transform = meta_objective.check_transform(meta_loss_transform)

    def task_name(self) -> str:
        """The task's name for metrics.

        Returns:
          ``task_name`` if given, else the task family's name.
        """
        return self._task_name if self._task_name is not None else self.task_family.name

    def cfg_name(self) -> str:
        """The learned optimizer's name for metrics.

        Returns:
          Its ``name``, else its class name.
        """
        return getattr(self.learned_opt, "name", type(self.learned_opt).__name__)

    def outer_init(self, key: jax.Array) -> MetaParams:
        """A fresh ``theta`` (``learned_opt.init``).

        Args:
          key: randomness of the initialization.

        Returns:
          The meta-parameters.
        """
        return self.learned_opt.init(key)

    # ----------------------------------------------------------------- data (host side)
    #: ``(start, stop)``: the population rows whose batches this process draws, or None
    #: for all of them. Set by a learner whose mesh spans several processes: each process
    #: then draws only the rows of its own tasks (``[steps, stop - start, ...]``), and its
    #: data iterators advance as if it had drawn the whole population's batches.
    local_rows: tuple[int, int] | None = None

    def _take(self, split: str, steps: int | None) -> PyTree:
        source = getattr(self.task_family.datasets, split)
        shape = (self.num_tasks,) if steps is None else (int(steps), self.num_tasks)
        if self.local_rows is None:
            return source.take(*shape)
        from learnopt.tasks.datasets import base as datasets_base

        start, stop = self.local_rows
        return datasets_base.take_slice(source, shape, len(shape) - 1, start, stop)

    def get_batch(self, steps: int | None = None) -> PyTree:
        """Batches for ``steps`` inner steps of the population (numpy, on the host).

        Args:
          steps: the number of inner steps, or None for one step without a steps axis.

        Returns:
          ``None`` for data-free families, else ``{"train": ...}`` with leaves
          ``[steps, num_tasks, batch, ...]`` (``[num_tasks, batch, ...]`` when ``steps``
          is None), plus ``"meta"`` when ``meta_loss_split`` names splits: a dict of
          one such batch per split (``{"outer_valid": ...}``).
        """
        if self.task_family.datasets is None:
            return None
        out = {"train": self._take("train", steps)}
        if self.meta_loss_split not in (None, "same_data"):
            splits = self.meta_loss_split.split("+")
            out["meta"] = {split: self._take(split, steps) for split in splits}
        return out

    def get_outer_batch(self, steps: int | None = None) -> PyTree:
        """``steps`` batches per task of ``outer_data_split``.

        Args:
          steps: the number of batches, or None for one without a steps axis.

        Returns:
          Leaves ``[steps, num_tasks, ...]``, or None for data-free families.
        """
        if self.task_family.datasets is None:
            return None
        return self._take(self.outer_data_split, steps)

    # -------------------------------------------------------------- init / reset (traced)
    def _init_one(
        self, theta: MetaParams, key: jax.Array, outer_state: Any, num_steps_override: Any
    ) -> TruncatedUnrollState:
        k_task, k_params, k_len, k_opt = jax.random.split(key, 4)
        task_param = self.task_family.sample(k_task)
        task = self.task_family.task_fn(task_param)
        params, model_state = task.init_with_state(k_params)
        if num_steps_override is None:
            length = self.trunc_sched.sample_length(k_len, outer_state)
        else:
            length = jnp.asarray(num_steps_override, jnp.int32)
        opt = self.learned_opt.opt_fn(theta, is_training=True)
        opt_state = opt.init(params, model_state=model_state, num_steps=length, key=k_opt)
        return TruncatedUnrollState(
            inner_opt_state=opt_state,
            inner_step=jnp.zeros((), jnp.int32),
            truncation_length=length,
            task_param=task_param,
        )

    def init_population(
        self,
        theta: MetaParams,
        key: jax.Array,
        theta_is_vector: bool = False,
        num_copies: int = 1,
        stagger: bool = False,
        outer_state: Any = None,
        num_steps_override: int | None = None,
    ) -> TruncatedUnrollState:
        """Fresh runs for ``num_copies * num_tasks`` members (copies share keys and tasks).

        Args:
          theta: meta-parameters, shared, or ``[P, ...]`` if ``theta_is_vector``.
          key: randomness of the task samples, initial params and lengths.
          theta_is_vector: ``theta`` has a leading population axis.
          num_copies: 2 for antithetic pairs stacked along the population axis.
          stagger: start the runs at random inner steps in
            ``[0, random_initial_iteration_offset)``.
          outer_state: passed to the truncation schedule.
          num_steps_override: every run's length instead of a sampled one.

        Returns:
          The :class:`TruncatedUnrollState` of ``num_copies * num_tasks`` members.
        """
        k_init, k_offset = jax.random.split(key)
        keys = tile_population(jax.random.split(k_init, self.num_tasks), num_copies)
        in_axes = (0 if theta_is_vector else None, 0, None, None)
        state = jax.vmap(self._init_one, in_axes=in_axes)(
            theta, keys, outer_state, num_steps_override
        )
        if stagger and self.random_initial_iteration_offset > 0:
            offsets = jax.random.randint(
                k_offset, (self.num_tasks,), 0, self.random_initial_iteration_offset, jnp.int32
            )
            state = state.replace(inner_step=tile_population(offsets, num_copies))
        return state

    def init_step_state(
        self,
        theta: MetaParams,
        outer_state: Any,
        key: jax.Array,
        theta_is_vector: bool = False,
        num_steps_override: int | None = None,
    ) -> TruncatedUnrollState:
        """The first state of the population, with staggered starts (library signature).

        Args:
          theta: meta-parameters.
          outer_state: passed to the truncation schedule.
          key: randomness of the task samples, initial params, lengths and starts.
          theta_is_vector: ``theta`` has a leading population axis.
          num_steps_override: every run's length instead of a sampled one.

        Returns:
          The :class:`TruncatedUnrollState`.
        """
        return self.init_population(
            theta,
            key,
            theta_is_vector,
            stagger=True,
            outer_state=outer_state,
            num_steps_override=num_steps_override,
        )

    def reset_done(
        self,
        theta: MetaParams,
        state: TruncatedUnrollState,
        key: jax.Array,
        theta_is_vector: bool = False,
        num_copies: int = 1,
        outer_state: Any = None,
    ) -> tuple[TruncatedUnrollState, jax.Array]:
        """Re-initializes the runs that reached their truncation length.

        The initialization is skipped entirely (``lax.cond``) when no run is done.

        Args:
          theta: meta-parameters of the new runs.
          state: the population's state.
          key: randomness of the new runs.
          theta_is_vector: ``theta`` has a leading population axis.
          num_copies: 2 for antithetic pairs stacked along the population axis.
          outer_state: passed to the truncation schedule (the new runs' lengths).

        Returns:
          ``(state, done)``: the new state and the ``[P]`` mask of runs that were reset.
        """
        done = state.is_done

        def reset(s):
            fresh = self.init_population(
                theta, key, theta_is_vector, num_copies, outer_state=outer_state
            )
            return tree_where(done, fresh, s)

        state = jax.lax.cond(jnp.any(done), reset, lambda s: s, state)
        return state, done

    # ------------------------------------------------------------------- unroll (traced)
    def _meta_value(self, task: tasks_base.Task, loss: jax.Array, aux: Any) -> jax.Array:
        key = self.meta_loss_with_aux_key
        if key is None and self.meta_loss_transform == "log":
            # The log is scale-free already; a normalizer that shifts the loss (the
            # library's parametric ones subtract log(C / 5)) would make it negative.
            value = meta_objective.finite_loss(loss)
        elif key is None:
            value = jnp.asarray(task.normalizer(loss), jnp.float32)
        elif key not in aux:
            raise ValueError(
                f"meta_loss_with_aux_key={key!r} is not in the aux of task family "
                f"{self.task_family.name}; its keys are {sorted(aux)}"
            )
        else:
            value = jnp.asarray(aux[key], jnp.float32)
        return meta_objective.transform(self.meta_loss_transform, value)

    def step_weights(self, iteration: jax.Array, state: TruncatedUnrollState) -> jax.Array | None:
        """The weights of the meta-losses taken at ``iteration`` (``meta_loss_weighting``).

        Args:
          iteration: int32 ``[K, P]``: the inner step of each loss.
          state: the population's state (its ``truncation_length`` is each run's ``T``).

        Returns:
          float32 ``[K, P]`` weights (mean 1 over a run), or None for uniform weights.
        """
        if self.meta_loss_weighting is None:
            return None
        return meta_objective.step_weight(
            self.meta_loss_weighting,
            iteration,
            state.truncation_length[None],
            self.meta_loss_window,
            self.meta_loss_power,
        )

    def _loss_and_aux(self, task, params, model_state, key, batch):
        """``(loss, model_state, aux)``; aux is computed only when the meta-loss needs it."""
        if self.meta_loss_with_aux_key is None:
            loss, model_state = task.loss_with_state(params, model_state, key, batch)
            _validate.scalar_loss(f"the loss of task {task.name}", loss)
            return loss, model_state, None
        loss, model_state, aux = task.loss_with_state_and_aux(params, model_state, key, batch)
        _validate.scalar_loss(f"the loss of task {task.name}", loss)
        return loss, model_state, aux

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

        def train_loss(p, s):
            loss, s, aux = self._loss_and_aux(task, p, s, k_loss, batch)
            return loss, (s, aux)

        (loss, (model_state, aux)), grads = jax.value_and_grad(train_loss, has_aux=True)(
            params, model_state
        )
        opt_state = opt.update(
            state.inner_opt_state, grads, loss=loss, model_state=model_state, key=k_opt
        )
        if self.meta_loss_split is None:
            meta_loss = self._meta_value(task, loss, aux)
        else:
            if self.meta_loss_split == "same_data":
                eval_batches = {"": batch}
            elif meta_batch is None:  # a task without data: its loss reads none
                eval_batches = {"": None}
            else:
                eval_batches = meta_batch
            new_params, new_model_state = opt.get_params_state(opt_state)
            # One key per evaluated split (a single split keeps k_meta itself).
            keys = (
                jax.random.split(k_meta, len(eval_batches)) if len(eval_batches) > 1 else [k_meta]
            )
            values = []
            for k_eval, eval_batch in zip(keys, eval_batches.values(), strict=True):
                m_loss, _, m_aux = self._loss_and_aux(
                    task, new_params, new_model_state, k_eval, eval_batch
                )
                values.append(self._meta_value(task, m_loss, m_aux))
            meta_loss = sum(values) / len(values)
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
        length: jax.Array | None = None,
    ) -> tuple[TruncatedUnrollState, TruncatedUnrollOut]:
        """Runs ``num_steps`` inner steps of every member (a ``lax.scan``; no resets).

        Args:
          theta: meta-parameters, shared, or with a leading population axis if
            ``theta_is_vector``.
          state: population state with ``P = num_copies * num_tasks`` members.
          key: randomness for the inner losses and updates (shared between copies).
          data: from :meth:`get_batch` (``[num_steps, num_tasks, ...]``) or ``None``.
          num_steps: the unroll length (static).
          theta_is_vector: whether ``theta`` has a leading population axis (one theta
            per member, e.g. ES perturbations); False: one ``theta`` for all.
          num_copies: 2 for antithetic pairs stacked along the population axis.
          length: optional int32 scalar shared by all members: steps ``i >= length`` are
            skipped (state unchanged, loss 0) with a ``lax.cond`` outside the ``vmap``,
            so a variable horizon costs its own length in one compiled program.

        Returns:
          ``(state, out)``: the population's state after the steps and the
          :class:`TruncatedUnrollOut` (losses, inner steps and, with a
          ``meta_loss_weighting``, the losses' weights ``[num_steps, P]``; skipped steps
          weigh 0).
        """
        step_keys = jax.random.split(key, num_steps)
        # The copies share batches: each step's are tiled inside the scan, so a whole
        # unroll's batches are held once (tiled up front, a 1000-step FullES estimate on
        # 20x20 images held 2.5 GB more; benchmarks/bench_whole_run_memory.py).
        train = None if data is None else data["train"]
        meta = None if data is None else data.get("meta")
        theta_axis = 0 if theta_is_vector else None
        step_one = self._step_one
        if self.remat:
            step_one = jax.checkpoint(step_one)
        vstep = jax.vmap(step_one, in_axes=(theta_axis, 0, 0, 0, 0))

        def step(s, k, batch, meta_batch):
            member_keys = tile_population(jax.random.split(k, self.num_tasks), num_copies)
            batch = tile_population(batch, num_copies)
            meta_batch = tile_population(meta_batch, num_copies)
            return vstep(theta, s, member_keys, batch, meta_batch)

        def body(s, xs):
            i, k, batch, meta_batch = xs
            if length is None:
                return step(s, k, batch, meta_batch)

            def skip(s):
                zeros = jnp.zeros(jnp.shape(s.inner_step), jnp.float32)
                return s, (zeros, s.inner_step)

            return jax.lax.cond(i < length, lambda s: step(s, k, batch, meta_batch), skip, s)

        steps = jnp.arange(num_steps, dtype=jnp.int32)
        state, (losses, iterations) = jax.lax.scan(body, state, (steps, step_keys, train, meta))
        # A run's length does not change within an unroll (runs restart after it).
        weight = self.step_weights(iterations, state)
        if weight is not None and length is not None:
            weight = jnp.where((steps < length)[:, None], weight, 0.0)
        out = TruncatedUnrollOut(
            loss=losses, iteration=iterations, is_done=state.is_done, weight=weight
        )
        return state, out


class SimpleVecLOptTruncatedStep(VectorizedLOptTruncatedStep):
    """``num_tasks`` runs of one ``task``, each ``unroll_length`` steps long (library name).

    The notes' library's simplified truncated step: a single task (no task family), a
    fixed run length (no truncation schedule), the meta-loss the training loss of each
    step and the outer batches from the training split. In learnopt it *is*
    :class:`VectorizedLOptTruncatedStep` with
    ``single_task_to_family(task)``, ``ConstantTruncationSchedule(unroll_length)`` and
    every other argument at its default, so it works with every estimator and learner.

    One difference from the library: a run that reaches ``unroll_length`` restarts right
    after its last step (:meth:`~VectorizedLOptTruncatedStep.reset_done`); the library
    spends one more ``unroll_step`` on the restart, reporting loss 0 with ``mask`` False.

    Args:
      task: the task every member trains.
      lopt: the learned optimizer whose ``theta`` is meta-trained.
      num_tasks: population size.
      unroll_length: the length of every inner run (>= 1; the library's default 5).
    """

    def __init__(
        self,
        task: tasks_base.Task,
        lopt: lopt_base.LearnedOptimizer,
        num_tasks: int,
        unroll_length: int = 5,
    ):
        if not isinstance(task, tasks_base.Task):
            raise TypeError(f"task must be a learnopt Task, got {type(task).__name__}")
        _validate.positive_int("unroll_length", unroll_length)
        super().__init__(
            tasks_base.single_task_to_family(task),
            lopt,
            ts.ConstantTruncationSchedule(unroll_length),
            num_tasks,
        )
        self.task = task
        self.lopt = lopt
        self.unroll_length = int(unroll_length)
