"""Truncated evolution strategies: antithetic ES over short unrolls of ongoing runs.

Both halves of each antithetic pair start from the same inner state; the run then
continues from the positive half. Cheap and parallel, but biased like TBPTT: it only
sees theta's effect within the current truncation (Vicol et al., 2021, arXiv:2112.13835).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_learner import GradientEstimator, GradientEstimatorOut
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["TruncatedES"]


class TruncatedES(GradientEstimator):
    """Antithetic ES over ``unroll_length`` steps from a shared state (see module doc)."""

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        unroll_length: int = 20,
        std: float = 0.01,
        stack_antithetic_samples: bool = True,
        clip_loss_diff: float | None = None,
    ):
        if int(unroll_length) < 1:
            raise ValueError(f"unroll_length must be >= 1, got {unroll_length}")
        if std <= 0:
            raise ValueError(f"std must be > 0, got {std}")
        self.truncated_step = truncated_step
        self.unroll_length = int(unroll_length)
        self.std = float(std)
        self.stack_antithetic_samples = stack_antithetic_samples
        self.clip_loss_diff = clip_loss_diff

    def init_worker_state(self, theta: Any, key: jax.Array) -> Any:
        return self.truncated_step.init_step_state(theta, key)

    def get_datas(self) -> Any:
        return self.truncated_step.get_batch(self.unroll_length)

    def compute_gradient_estimate(self, theta, key, state, datas):
        ts = self.truncated_step
        k_eps, k_unroll, k_reset = jax.random.split(key, 3)
        eps = common.sample_perturbations(theta, k_eps, self.std, ts.num_tasks)
        pos, _, pos_out, neg_out = common.antithetic_unroll(
            ts,
            theta,
            eps,
            state,
            state,
            k_unroll,
            datas,
            self.unroll_length,
            stacked=self.stack_antithetic_samples,
        )
        pos_loss, neg_loss = common.reduce_loss(pos_out), common.reduce_loss(neg_out)
        grad, delta = common.es_grad(eps, pos_loss, neg_loss, self.std, self.clip_loss_diff)
        new_state, done = ts.reset_done(theta, pos, k_reset)
        metrics = {
            "delta_loss_abs": jnp.mean(jnp.abs(delta)),
            "num_done": jnp.sum(done).astype(jnp.float32),
        }
        mean_loss = jnp.mean((pos_loss + neg_loss) / 2)
        return GradientEstimatorOut(mean_loss=mean_loss, grad=grad, unroll_state=new_state), metrics
