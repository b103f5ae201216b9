"""The fused learner: a worker's computation and the central update in one XLA program.

:class:`SingleMachineGradientLearner` meta-trains a learned optimizer with the averaged
estimates of its gradient estimators. One call of its
:meth:`~SingleMachineGradientLearner.update` is **one XLA program** (every estimator's
unrolls, the estimates and the outer update of
:class:`~learnopt.outer_trainers.outer_update.GradientLearner`) that compiles once;
only the batches are fetched on the host and passed in. Its populations of inner runs can
be split over the devices of a mesh (:mod:`learnopt.outer_trainers.population_sharding`).
It also owns the position of its datasets (:meth:`~SingleMachineGradientLearner.get_data_state`),
which a checkpoint saves to resume the same batches.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import flax.struct
import jax

from learnopt import _validate, distributed
from learnopt.canonical import settle_dtypes
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import memory_check, outer_update, population_sharding
from learnopt.outer_trainers import worker as worker_lib
from learnopt.outer_trainers.gradient_estimator import GradientEstimator, is_host_style
from learnopt.outer_trainers.outer_update import GradientLearner, GradientLearnerState

PyTree = Any
MetaParams = Any

__all__ = ["SingleMachineState", "SingleMachineGradientLearner"]


@flax.struct.dataclass
class SingleMachineState:
    """The learner's state and every estimator's state.

    Attributes:
      gradient_learner_state: the :class:`GradientLearnerState` (outer optimizer on
        ``theta`` and the step counters).
      gradient_estimator_states: one state per gradient estimator, in the order the
        estimators were given.
    """

    gradient_learner_state: GradientLearnerState
    gradient_estimator_states: tuple

    @property
    def theta_opt_state(self) -> PyTree:
        """The outer optimizer's state."""
        return self.gradient_learner_state.theta_opt_state

    @property
    def outer_iteration(self) -> jax.Array:
        """Outer steps taken (int32)."""
        return self.gradient_learner_state.outer_iteration

    @property
    def num_nonfinite(self) -> jax.Array:
        """Outer steps skipped because they were not finite (int32)."""
        return self.gradient_learner_state.num_nonfinite


class SingleMachineGradientLearner:
    """Meta-trains ``learned_opt`` with the averaged estimates of ``gradient_estimators``.

    :meth:`update` is a worker's computation followed by
    :meth:`~learnopt.outer_trainers.library_convention.GradientLearner.update`,
    fused into one jitted program. Estimators written in the library's convention run on
    the host instead (see :mod:`learnopt.outer_trainers.library_convention`).

    Args:
      learned_opt: the learned optimizer.
      gradient_estimators: one or more estimators (e.g. one per task family).
      theta_opt: outer optimizer on ``theta`` (a learnopt Optimizer or optax transform).
      num_steps: number of outer steps (passed to ``theta_opt.init`` for schedules).
      max_grad_norm: clip the averaged meta-gradient to this global norm.
      mesh: a one-axis ``jax.sharding.Mesh``: every estimator's population of inner
        runs (and its batches) is split over the mesh's devices, theta and the outer
        state are replicated. ``num_tasks`` must be a multiple of the mesh size. The
        result is the same as on one device (up to float summation order). A mesh over
        the devices of several processes (``learnopt.distributed.population_mesh()``
        after ``learnopt.distributed.initialize``) makes one run of all of them: each
        process draws only its own rows of the batches and holds only its shards.
        Antithetic estimators are fastest sharded with ``stack_antithetic_samples=False``
        (each device keeps its own +/- pairs; stacked, the population is resharded at
        every step).
      init_theta_from_path: start from the ``theta`` in this file (a
        ``ParameterCheckpoint`` or a ``checkpoints.save_theta`` file, e.g. Celo's phase 1
        result for its phase 2) instead of ``learned_opt.init``.
      init_outer_state_from_path: start from the whole learner state in this file (an
        ``OptCheckpoint``): theta, the outer optimizer's state and the counters.
      frozen_keys: keys of ``theta`` to keep fixed (paths or path prefixes joined by
        ``"/"``; e.g. ``Celo.get_frozen_param_keys(2)`` for Celo's phase 2): their
        meta-gradients are zeroed and their values restored after each outer update,
        and the ES estimators (whose ``frozen_keys`` are unset) do not perturb them.
      reset_outer_iteration: with ``init_outer_state_from_path``, start the loaded
        state's iteration counters at 0 (theta and the outer moments are kept).
      balance: how the estimators' estimates are combined: ``"mean"`` (averaged as they
        come) or ``"norm"`` (each, its frozen leaves left out, scaled to unit norm
        first, so that every estimator, e.g. every task family, pulls alike); see
        :func:`~learnopt.outer_trainers.worker.worker_compute`.
    """

    def __init__(
        self,
        learned_opt: lopt_base.LearnedOptimizer,
        gradient_estimators: Sequence[GradientEstimator],
        theta_opt: Any,
        num_steps: int | None = None,
        max_grad_norm: float | None = None,
        mesh: jax.sharding.Mesh | None = None,
        init_theta_from_path: str | os.PathLike | None = None,
        init_outer_state_from_path: str | os.PathLike | None = None,
        frozen_keys: Sequence[str] | None = None,
        reset_outer_iteration: bool = False,
        balance: str = "mean",
    ):
        if isinstance(gradient_estimators, GradientEstimator):
            gradient_estimators = [gradient_estimators]
        if not gradient_estimators:
            raise ValueError("SingleMachineGradientLearner needs at least one gradient estimator")
        self.gradient_learner = GradientLearner(
            learned_opt,
            theta_opt,
            init_theta_from_path=init_theta_from_path,
            init_outer_state_from_path=init_outer_state_from_path,
            reset_outer_iteration=reset_outer_iteration,
            num_steps=num_steps,
            max_grad_norm=max_grad_norm,
            frozen_keys=frozen_keys,
        )
        self.balance = worker_lib.check_balance(balance)
        self.gradient_estimators = tuple(gradient_estimators)
        for est in self.gradient_estimators:
            # ES estimators leave frozen keys unperturbed: their noise would only add
            # variance to the estimates of the trainable ones.
            if frozen_keys and hasattr(est, "frozen_keys") and est.frozen_keys is None:
                est.frozen_keys = self.gradient_learner.frozen_keys
        self.mesh = mesh
        self._on_host = any(is_host_style(e) for e in self.gradient_estimators)
        self._multiprocess = False
        self._data_sharding = None
        if mesh is not None:
            if self._on_host:
                raise ValueError(
                    "mesh needs estimators in learnopt's traced convention; "
                    f"{[e.name for e in self.gradient_estimators if is_host_style(e)]} "
                    "run on the host"
                )
            population_sharding.check_mesh(mesh, self.gradient_estimators)
            self._multiprocess = distributed.spans_processes(mesh)
            if self._multiprocess:  # each process draws the batch rows of its own tasks
                for est in self.gradient_estimators:
                    ts = est.truncated_step
                    ts.local_rows = distributed.local_rows(mesh, ts.num_tasks)
        self._update_jit = jax.jit(self._update)

    @property
    def lopt(self) -> lopt_base.LearnedOptimizer:
        """The learned optimizer."""
        return self.gradient_learner.learned_optimizer

    @property
    def theta_opt(self) -> opt_base.Optimizer:
        """The outer optimizer on ``theta``."""
        return self.gradient_learner.theta_opt

    @property
    def num_steps(self) -> int | None:
        """The number of outer steps given to the outer optimizer (or None)."""
        return self.gradient_learner.num_steps

    @property
    def max_grad_norm(self) -> float | None:
        """The clipping norm of the averaged meta-gradient (or None)."""
        return self.gradient_learner.max_grad_norm

    # ----------------------------------------------------------------------------- init
    def init(self, key: jax.Array) -> SingleMachineState:
        """The initial state: the learner's (``theta``, outer optimizer) and the estimators'.

        The state is settled to the dtypes that :meth:`update` produces, so the jitted
        update compiles exactly once.

        Args:
          key: randomness of ``theta``'s initialization and of the estimators' states.

        Returns:
          The :class:`SingleMachineState` (placed on the mesh, if there is one).

        Raises:
          memory_check.BatchesDoNotFitError: one outer step's batches (a whole run's, for
            the full-run estimators) need more memory than is available; checked before
            they are fetched where the datasets can report their position, and before
            anything compiles (``LEARNOPT_SKIP_MEMORY_CHECK=1`` turns it off).
        """
        _validate.prng_key("key", key)
        k_learner, k_est = jax.random.split(key)
        learner_state = self.gradient_learner.init(k_learner)
        weights = self.gradient_learner.get_state_for_worker(learner_state)
        if self._on_host:
            keys = jax.random.split(k_est, len(self.gradient_estimators))
            est_states = tuple(
                e.init_worker_state(weights, k)
                for e, k in zip(self.gradient_estimators, keys, strict=True)
            )
            return SingleMachineState(learner_state, est_states)
        init = functools.partial(worker_lib.init_states, self.gradient_estimators)
        if self.mesh is None:
            est_states = jax.jit(init)(weights.theta, k_est, weights.outer_state)
        else:  # created sharded: no device ever holds a whole population
            replicated = population_sharding.replicated(self.mesh)
            learner_state, k_est = jax.device_put((learner_state, k_est), replicated)
            weights = self.gradient_learner.get_state_for_worker(learner_state)
            args = (weights.theta, k_est, weights.outer_state)
            shardings = population_sharding.estimator_shardings(
                self.mesh, jax.eval_shape(init, *args), self.gradient_estimators
            )
            est_states = jax.jit(init, out_shardings=shardings)(*args)
        state = SingleMachineState(learner_state, est_states)
        # Before a whole run's batches are fetched and anything compiles: a clear error,
        # not the out-of-memory killer later.
        check = not memory_check.skipped()
        devices = 1 if self.mesh is None else self.mesh.size
        ahead = memory_check.whole_run_bytes(self) if check else None
        if ahead is not None:
            memory_check.check_batches_fit(ahead, self.gradient_estimators, num_devices=devices)
        host_datas = self.get_datas()
        if check:
            sizes = [memory_check.nbytes(d) for d in host_datas]
            memory_check.check_batches_fit(sizes, self.gradient_estimators, num_devices=devices)
        datas = population_sharding.abstract_datas(
            host_datas, self.gradient_estimators, self._multiprocess
        )
        if self.mesh is not None:
            state = self._shard(state, datas)
        return settle_dtypes(
            lambda s, k, d: self._update(s, k, d)[0],
            state,
            key,
            datas,
            what="meta-training state",
        )

    def _shard(self, state: SingleMachineState, datas: tuple) -> SingleMachineState:
        """Places ``state`` on the mesh and compiles the update for those shardings."""
        replicated = population_sharding.replicated(self.mesh)
        state_sharding = SingleMachineState(
            gradient_learner_state=jax.tree_util.tree_map(
                lambda _: replicated, state.gradient_learner_state
            ),
            gradient_estimator_states=population_sharding.estimator_shardings(
                self.mesh, state.gradient_estimator_states, self.gradient_estimators
            ),
        )
        data_sharding = tuple(
            population_sharding.by_population(self.mesh, d, est, 1)
            for d, est in zip(datas, self.gradient_estimators, strict=True)
        )
        self._data_sharding = data_sharding
        self._update_jit = jax.jit(
            self._update,
            in_shardings=(state_sharding, replicated, data_sharding),
            out_shardings=(state_sharding, replicated, replicated),
        )
        return jax.device_put(state, state_sharding)

    # --------------------------------------------------------------------------- update
    def get_meta_params(self, state: SingleMachineState) -> MetaParams:
        """``theta``.

        Args:
          state: the learner's state.

        Returns:
          The meta-parameters.
        """
        return self.gradient_learner.get_meta_params(state.gradient_learner_state)

    get_lopt_params = get_meta_params
    get_theta = get_meta_params

    def _frozen(self, theta: MetaParams) -> PyTree | None:
        keys = self.gradient_learner.frozen_keys
        return None if keys is None else outer_update.frozen_mask(theta, keys)

    def _update(
        self, state: SingleMachineState, key: jax.Array, datas: tuple
    ) -> tuple[SingleMachineState, jax.Array, dict[str, jax.Array]]:
        k_worker, k_learner = jax.random.split(key)
        weights = self.gradient_learner.get_state_for_worker(state.gradient_learner_state)
        to_put, est_states, metrics = worker_lib.worker_compute(
            self.gradient_estimators,
            weights,
            state.gradient_estimator_states,
            k_worker,
            datas,
            self.balance,
            self._frozen(weights.theta),
        )
        learner_state, learner_metrics = self.gradient_learner._apply(
            state.gradient_learner_state, [to_put], k_learner
        )
        metrics.update(learner_metrics)
        return SingleMachineState(learner_state, est_states), to_put.mean_loss, metrics

    def get_datas(self) -> tuple:
        """The batches of one outer step, fetched on the host.

        Returns:
          One entry per estimator, as its ``get_datas()`` returns it.
        """
        return tuple(est.get_datas() for est in self.gradient_estimators)

    def update(
        self, state: SingleMachineState, key: jax.Array, with_metrics: bool = False
    ) -> tuple[SingleMachineState, jax.Array, dict[str, jax.Array]]:
        """One outer step: fetches the batches and runs the fused program once.

        Metrics are cheap scalars computed inside the same program on every step, so
        ``with_metrics`` (kept for compatibility) never triggers a recompilation.

        Args:
          state: from :meth:`init` or the previous update.
          key: randomness of this step.
          with_metrics: accepted for compatibility (library-convention estimators get it
            as ``with_summary``).

        Returns:
          ``(state, meta_loss, metrics)``.
        """
        _validate.prng_key("key", key)
        if not self._on_host:
            datas = self.get_datas()
            if self._multiprocess:
                datas = population_sharding.global_datas(
                    datas, self._data_sharding, self.gradient_estimators
                )
            return self._update_jit(state, key, datas)
        k_worker, k_learner = jax.random.split(key)
        weights = self.gradient_learner.get_state_for_worker(state.gradient_learner_state)
        to_put, est_states, metrics = worker_lib.host_worker_compute(
            self.gradient_estimators,
            weights,
            tuple(state.gradient_estimator_states),
            k_worker,
            None,
            with_metrics,
            self.balance,
            self._frozen(weights.theta),
        )
        metrics = worker_lib.library_metrics(metrics) if with_metrics else {}
        learner_state, learner_metrics = self.gradient_learner.update(
            state.gradient_learner_state, [to_put], key=k_learner
        )
        metrics = {**metrics, **learner_metrics}
        new_state = SingleMachineState(learner_state, tuple(est_states))
        return new_state, to_put.mean_loss, metrics

    # ----------------------------------------------------------------------- data state
    def datasets(self) -> list[Any]:
        """The datasets of the estimators' task families, each once.

        Estimators that share a ``Datasets`` object (by identity) share one entry.

        Returns:
          The ``Datasets`` objects, in the estimators' order.
        """
        out, seen = [], set()
        for est in self.gradient_estimators:
            family = getattr(est, "task_family", None)
            ds = getattr(family, "datasets", None)
            if ds is not None and id(ds) not in seen:
                seen.add(id(ds))
                out.append(ds)
        return out

    def get_data_state(self) -> tuple[list[dict[str, Any]], list[str]]:
        """The position of every split of every dataset, to continue the same batches.

        Returns:
          ``(states, not_resumable)``: one ``Datasets.get_state()`` per entry of
          :meth:`datasets` (``{split: state}``, None where a split's iterator cannot report
          its position), and a description of each such split
          (``"datasets[0].train (MyIterator)"``).
        """
        states, missing = [], []
        for i, ds in enumerate(self.datasets()):
            entry = ds.get_state()
            for split, st in entry.items():
                if st is None:
                    it = getattr(ds, split, None)
                    missing.append(f"datasets[{i}].{split} ({type(it).__name__})")
            states.append(entry)
        return states, missing

    def set_data_state(self, states: Sequence[dict[str, Any]]) -> None:
        """Moves every dataset to the positions :meth:`get_data_state` returned.

        Args:
          states: the ``states`` of :meth:`get_data_state` (splits with None are left as
            they are).

        Returns:
          None.

        Raises:
          ValueError: ``states`` has a different number of datasets than this learner.
        """
        datasets = self.datasets()
        if len(states) != len(datasets):
            raise ValueError(
                f"the checkpoint has data positions of {len(states)} datasets, this run has "
                f"{len(datasets)}"
            )
        for ds, entry in zip(datasets, states, strict=True):
            ds.set_state(entry)
