"""Meta-training: gradient estimators and the learner that applies their estimates.

A :class:`GradientEstimator` turns a truncated step into a meta-gradient estimate.
:class:`SingleMachineGradientLearner` averages the estimates of one or more
estimators, clips them, drops non-finite ones and applies the rest with an outer
optimizer on ``theta``. One call of :meth:`SingleMachineGradientLearner.update` is
**one XLA program** (every estimator's unrolls, the estimates and the outer update) that
compiles once; only the batches are fetched on the host and passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import optax

from learnopt.canonical import settle_dtypes
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep
from learnopt.tree_utils import tree_all_finite, tree_norm

PyTree = Any
MetaParams = Any

__all__ = [
    "GradientEstimator",
    "GradientEstimatorOut",
    "SingleMachineState",
    "SingleMachineGradientLearner",
]


@flax.struct.dataclass
class GradientEstimatorOut:
    mean_loss: jax.Array
    grad: PyTree
    unroll_state: PyTree


class GradientEstimator:
    """Base class of meta-gradient estimators.

    ``init_worker_state`` and ``compute_gradient_estimate`` are traceable and run inside
    the learner's jitted step; ``get_datas`` runs on the host and returns the batches
    one estimate needs (numpy, or ``None`` for data-free tasks).
    """

    truncated_step: VectorizedLOptTruncatedStep

    @property
    def task_family(self):
        return self.truncated_step.task_family

    @property
    def name(self) -> str:
        return type(self).__name__

    def init_worker_state(self, theta: MetaParams, key: jax.Array) -> PyTree:
        raise NotImplementedError

    def get_datas(self) -> PyTree:
        raise NotImplementedError

    def compute_gradient_estimate(
        self, theta: MetaParams, key: jax.Array, state: PyTree, datas: PyTree
    ) -> tuple[GradientEstimatorOut, dict[str, jax.Array]]:
        raise NotImplementedError


@flax.struct.dataclass
class SingleMachineState:
    theta_opt_state: PyTree
    gradient_estimator_states: tuple
    outer_iteration: jax.Array  # int32
    num_nonfinite: jax.Array  # int32: estimates skipped because they were not finite


def _as_optimizer(theta_opt: Any) -> opt_base.Optimizer:
    if isinstance(theta_opt, opt_base.Optimizer):
        return theta_opt
    if isinstance(theta_opt, optax.GradientTransformation):
        return opt_base.OptaxOptimizer(theta_opt)
    raise TypeError(
        "theta_opt must be a learnopt Optimizer (e.g. opt_base.Adam(1e-3)) or an optax "
        f"GradientTransformation, got {type(theta_opt).__name__}"
    )


class SingleMachineGradientLearner:
    """Meta-trains ``lopt`` with the averaged estimates of ``gradient_estimators``.

    Args:
      lopt: the learned optimizer.
      gradient_estimators: one or more estimators (e.g. one per task family).
      theta_opt: outer optimizer on ``theta`` (a learnopt Optimizer or optax transform).
      num_steps: number of outer steps (passed to ``theta_opt.init`` for schedules).
      max_grad_norm: clip the averaged meta-gradient to this global norm.
      mesh: a one-axis ``jax.sharding.Mesh``: every estimator's population of inner
        runs (and its batches) is split over the mesh's devices, theta and the outer
        state are replicated. ``num_tasks`` must be a multiple of the mesh size. The
        result is the same as on one device (up to float summation order).
    """

    def __init__(
        self,
        lopt: lopt_base.LearnedOptimizer,
        gradient_estimators: Sequence[GradientEstimator],
        theta_opt: Any,
        num_steps: int | None = None,
        max_grad_norm: float | None = None,
        mesh: jax.sharding.Mesh | None = None,
    ):
        if isinstance(gradient_estimators, GradientEstimator):
            gradient_estimators = [gradient_estimators]
        if not gradient_estimators:
            raise ValueError("SingleMachineGradientLearner needs at least one gradient estimator")
        self.lopt = lopt
        self.gradient_estimators = tuple(gradient_estimators)
        self.theta_opt = _as_optimizer(theta_opt)
        self.num_steps = num_steps
        self.max_grad_norm = max_grad_norm
        self.mesh = mesh
        if mesh is not None:
            _check_mesh(mesh, self.gradient_estimators)
        self._init_jit = jax.jit(self._init)
        self._update_jit = jax.jit(self._update)

    # ----------------------------------------------------------------------------- init
    def _init_estimators(self, theta: MetaParams, key: jax.Array) -> tuple:
        keys = jax.random.split(key, len(self.gradient_estimators))
        return tuple(
            est.init_worker_state(theta, k)
            for est, k in zip(self.gradient_estimators, keys, strict=True)
        )

    def _init(self, key: jax.Array) -> SingleMachineState:
        k_theta, k_est = jax.random.split(key)
        theta = self.lopt.init(k_theta)
        theta_opt_state = self.theta_opt.init(theta, num_steps=self.num_steps)
        return SingleMachineState(
            theta_opt_state=theta_opt_state,
            gradient_estimator_states=self._init_estimators(theta, k_est),
            outer_iteration=jnp.zeros((), jnp.int32),
            num_nonfinite=jnp.zeros((), jnp.int32),
        )

    def init(self, key: jax.Array) -> SingleMachineState:
        """The initial state: ``theta`` from ``lopt.init``, estimator states, counters.

        The state is settled to the dtypes that :meth:`update` produces, so the jitted
        update compiles exactly once.
        """
        state = self._init_jit(key)
        datas = self._abstract_datas()
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
        mesh = self.mesh
        axis = mesh.axis_names[0]
        replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

        def by_population(tree, est, dim):
            n = est.truncated_step.num_tasks
            spec = (None,) * dim + (axis,)
            split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
            return jax.tree_util.tree_map(
                lambda x: split if x.ndim > dim and x.shape[dim] == n else replicated, tree
            )

        est_shardings = tuple(
            by_population(st, est, 0)
            for st, est in zip(
                state.gradient_estimator_states, self.gradient_estimators, strict=True
            )
        )
        state_sharding = SingleMachineState(
            theta_opt_state=jax.tree_util.tree_map(lambda _: replicated, state.theta_opt_state),
            gradient_estimator_states=est_shardings,
            outer_iteration=replicated,
            num_nonfinite=replicated,
        )
        data_sharding = tuple(
            by_population(d, est, 1) for d, est in zip(datas, self.gradient_estimators, strict=True)
        )
        self._update_jit = jax.jit(
            self._update,
            in_shardings=(state_sharding, replicated, data_sharding),
            out_shardings=(state_sharding, replicated, replicated),
        )
        return jax.device_put(state, state_sharding)

    def _abstract_datas(self) -> tuple:
        datas = tuple(est.get_datas() for est in self.gradient_estimators)
        return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), datas)

    # --------------------------------------------------------------------------- update
    def get_theta(self, state: SingleMachineState) -> MetaParams:
        return self.theta_opt.get_params(state.theta_opt_state)

    def _update(
        self, state: SingleMachineState, key: jax.Array, datas: tuple
    ) -> tuple[SingleMachineState, jax.Array, dict[str, jax.Array]]:
        theta = self.get_theta(state)
        keys = jax.random.split(jax.random.fold_in(key, state.outer_iteration), 2)
        est_keys = jax.random.split(keys[0], len(self.gradient_estimators))
        metrics: dict[str, jax.Array] = {}
        grads, losses, new_est_states = [], [], []
        for i, (est, st, k, d) in enumerate(
            zip(
                self.gradient_estimators,
                state.gradient_estimator_states,
                est_keys,
                datas,
                strict=True,
            )
        ):
            out, est_metrics = est.compute_gradient_estimate(theta, k, st, d)
            grads.append(out.grad)
            losses.append(out.mean_loss)
            new_est_states.append(out.unroll_state)
            prefix = f"{i}_{est.name}" if len(self.gradient_estimators) > 1 else est.name
            metrics.update({f"{prefix}/{n}": v for n, v in est_metrics.items()})
            metrics[f"{prefix}/meta_loss"] = out.mean_loss
        n = len(grads)
        grad = jax.tree_util.tree_map(lambda *g: sum(g) / n, *grads)
        meta_loss = sum(losses) / n
        grad_norm = tree_norm(grad)
        if self.max_grad_norm is not None:
            scale = jnp.minimum(1.0, self.max_grad_norm / (grad_norm + 1e-12))
            grad = jax.tree_util.tree_map(lambda g: (g * scale).astype(g.dtype), grad)
        finite = tree_all_finite(grad) & jnp.isfinite(meta_loss)
        applied = self.theta_opt.update(state.theta_opt_state, grad, meta_loss)
        theta_opt_state = jax.tree_util.tree_map(
            lambda a, b: jnp.where(finite, a, b), applied, state.theta_opt_state
        )
        # A non-finite estimate usually means some inner run diverged: restart the
        # estimators' inner runs instead of carrying NaNs into the next step.
        est_states = jax.lax.cond(
            finite,
            lambda: tuple(new_est_states),
            lambda: self._init_estimators(theta, keys[1]),
        )
        num_nonfinite = state.num_nonfinite + (~finite).astype(jnp.int32)
        new_theta = self.theta_opt.get_params(theta_opt_state)
        metrics.update(
            meta_loss=meta_loss,
            grad_norm=grad_norm,
            finite=finite,
            num_nonfinite=num_nonfinite,
        )
        for name, value in _scalar_theta_metrics(new_theta).items():
            metrics[name] = value
        new_state = SingleMachineState(
            theta_opt_state=theta_opt_state,
            gradient_estimator_states=est_states,
            outer_iteration=state.outer_iteration + 1,
            num_nonfinite=num_nonfinite,
        )
        return new_state, meta_loss, metrics

    def get_datas(self) -> tuple:
        """Host-side batches for one outer step of every estimator."""
        return tuple(est.get_datas() for est in self.gradient_estimators)

    def update(
        self, state: SingleMachineState, key: jax.Array, with_metrics: bool = True
    ) -> tuple[SingleMachineState, jax.Array, dict[str, jax.Array]]:
        """One outer step: returns ``(state, meta_loss, metrics)``.

        Metrics are cheap scalars computed inside the same program on every step, so
        ``with_metrics`` (kept for compatibility) never triggers a recompilation.
        """
        del with_metrics
        return self._update_jit(state, key, self.get_datas())


def _check_mesh(mesh: jax.sharding.Mesh, estimators: tuple) -> None:
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must have one axis (the population), got {mesh.axis_names}")
    for est in estimators:
        n = est.truncated_step.num_tasks
        if n % mesh.size:
            raise ValueError(
                f"{est.name}: num_tasks={n} is not a multiple of the {mesh.size} devices "
                "of the mesh"
            )


def _scalar_theta_metrics(theta: PyTree) -> dict[str, jax.Array]:
    """Scalar leaves of theta as metrics; ``log_*`` leaves also exponentiated."""
    out = {}
    if not isinstance(theta, dict):
        return out
    for name, value in theta.items():
        if hasattr(value, "shape") and value.shape == ():
            out[f"theta/{name}"] = value
            if name == "log_lr":
                out["learning_rate"] = jnp.exp(value)
    return out
