"""Antithetic evolution strategies over whole inner training runs.

``g = mean_i eps_i (L(theta + eps_i) - L(theta - eps_i)) / (2 std^2)`` with
``eps_i ~ N(0, std^2 I)`` (Salimans et al., 2017, arXiv:1703.03864): an unbiased
estimate of the gradient of the Gaussian-smoothed meta-loss that needs no backprop
through the unroll, so it is unaffected by chaotic or non-differentiable inner training
(Metz et al., 2019, arXiv:1810.10180).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_learner import GradientEstimator, GradientEstimatorOut
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["FullES", "FullESState"]


@flax.struct.dataclass
class FullESState:
    pass


class FullES(GradientEstimator):
    """Antithetic ES on complete runs of ``T`` steps (``T`` from the constant schedule).

    Args:
      truncated_step: its ``num_tasks`` is the number of antithetic pairs.
      std: perturbation standard deviation.
      loss_type: ``"avg"``, ``"last"`` or ``"last_recompute"`` (see :class:`FullGrad`).
      recompute_samples: batches for ``"last_recompute"``.
      stack_antithetic_samples: run the + and - halves as one population (faster) or as
        two unrolls (half the peak memory).
      clip_loss_diff: clip ``L+ - L-`` to this magnitude (robustness to outliers).
    """

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        std: float = 0.01,
        loss_type: str = "avg",
        recompute_samples: int = 4,
        stack_antithetic_samples: bool = True,
        clip_loss_diff: float | None = None,
    ):
        if loss_type not in ("avg", "last", "last_recompute"):
            raise ValueError(f"loss_type must be avg, last or last_recompute, got {loss_type!r}")
        if std <= 0:
            raise ValueError(f"std must be > 0, got {std}")
        self.truncated_step = truncated_step
        self.std = float(std)
        self.loss_type = loss_type
        self.recompute_samples = recompute_samples
        self.stack_antithetic_samples = stack_antithetic_samples
        self.clip_loss_diff = clip_loss_diff
        self.horizon = common.constant_horizon(truncated_step, "FullES")

    def init_worker_state(self, theta: Any, key: jax.Array) -> FullESState:
        return FullESState()

    def get_datas(self) -> Any:
        data = self.truncated_step.get_batch(self.horizon)
        if self.loss_type == "last_recompute":
            return data, self.truncated_step.get_outer_batch(self.recompute_samples)
        return data, None

    def compute_gradient_estimate(self, theta, key, state, datas):
        data, recompute = datas
        ts = self.truncated_step
        k_eps, k_init, k_unroll, k_re = jax.random.split(key, 4)
        eps = common.sample_perturbations(theta, k_eps, self.std, ts.num_tasks)
        start = ts.init_population(theta, k_init)
        pos, neg, pos_out, neg_out = common.antithetic_unroll(
            ts,
            theta,
            eps,
            start,
            start,
            k_unroll,
            data,
            self.horizon,
            stacked=self.stack_antithetic_samples,
        )
        if self.loss_type == "last_recompute":
            theta_pos = jax.tree_util.tree_map(lambda t, e: t[None] + e, theta, eps)
            theta_neg = jax.tree_util.tree_map(lambda t, e: t[None] - e, theta, eps)
            pos_loss = ts.meta_loss_batch(theta_pos, pos, k_re, recompute, theta_is_vector=True)
            neg_loss = ts.meta_loss_batch(theta_neg, neg, k_re, recompute, theta_is_vector=True)
        else:
            pos_loss = common.reduce_loss(pos_out, self.loss_type)
            neg_loss = common.reduce_loss(neg_out, self.loss_type)
        grad, delta = common.es_grad(eps, pos_loss, neg_loss, self.std, self.clip_loss_diff)
        mean_loss = jnp.mean((pos_loss + neg_loss) / 2)
        metrics = {"delta_loss_abs": jnp.mean(jnp.abs(delta))}
        return GradientEstimatorOut(mean_loss=mean_loss, grad=grad, unroll_state=state), metrics
