"""Noise-reuse evolution strategies (NRES; Li, Wu, Sohl-Dickstein & Metz, 2023, arXiv:2304.12180).

Each antithetic pair samples one perturbation when its inner run starts and reuses it
for every truncation of that run; the estimate of a truncation is
``mean_i eps_i (L+_i - L-_i) / (2 std^2)``. Like PES it is unbiased for the whole run's
smoothed meta-loss, with lower variance than PES (no accumulated noise), and it is
the same as FullES when the truncation covers the whole run.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_learner import GradientEstimator, GradientEstimatorOut
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep, tree_where

__all__ = ["NoiseReuseES", "NRESState"]


@flax.struct.dataclass
class NRESState:
    pos_state: Any
    neg_state: Any
    perturbation: Any  # theta-shaped, leading [num_tasks]: this run's perturbation


class NoiseReuseES(GradientEstimator):
    """NRES over ``unroll_length``-step truncations (see module doc; same args as PES)."""

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

    def init_worker_state(self, theta: Any, key: jax.Array) -> NRESState:
        k_state, k_eps = jax.random.split(key)
        state = self.truncated_step.init_step_state(theta, k_state)
        eps = common.sample_perturbations(theta, k_eps, self.std, self.truncated_step.num_tasks)
        return NRESState(pos_state=state, neg_state=state, perturbation=eps)

    def get_datas(self) -> Any:
        return self.truncated_step.get_batch(self.unroll_length)

    def compute_gradient_estimate(self, theta, key, state, datas):
        ts = self.truncated_step
        k_eps, k_unroll, k_reset = jax.random.split(key, 3)
        eps = state.perturbation
        pos, neg, pos_out, neg_out = common.antithetic_unroll(
            ts,
            theta,
            eps,
            state.pos_state,
            state.neg_state,
            k_unroll,
            datas,
            self.unroll_length,
            stacked=self.stack_antithetic_samples,
        )
        pos_loss, neg_loss = common.reduce_loss(pos_out), common.reduce_loss(neg_out)
        grad, delta = common.es_grad(eps, pos_loss, neg_loss, self.std, self.clip_loss_diff)
        pos, done = ts.reset_done(theta, pos, k_reset)
        neg, _ = ts.reset_done(theta, neg, k_reset)
        fresh = common.sample_perturbations(theta, k_eps, self.std, ts.num_tasks)
        eps = tree_where(done, fresh, eps)
        new_state = NRESState(pos_state=pos, neg_state=neg, perturbation=eps)
        metrics = {
            "delta_loss_abs": jnp.mean(jnp.abs(delta)),
            "num_done": jnp.sum(done).astype(jnp.float32),
        }
        mean_loss = jnp.mean((pos_loss + neg_loss) / 2)
        return GradientEstimatorOut(mean_loss=mean_loss, grad=grad, unroll_state=new_state), metrics
