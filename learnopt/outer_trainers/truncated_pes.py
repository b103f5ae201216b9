"""Persistent evolution strategies (PES; Vicol, Metz & Sohl-Dickstein, 2021, arXiv:2112.13835).

Antithetic pairs keep *separate* inner states across truncations and every pair keeps
the sum of all perturbations it has received since its run started. The estimate of a
truncation is ``mean_i xi_i (L+_i - L-_i) / (2 std^2)`` with ``xi_i`` that accumulated
perturbation, which makes the sum of estimates over a run an unbiased estimate of the
gradient of the whole run's (smoothed) meta-loss, unlike TBPTT and truncated ES.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_learner import GradientEstimator, GradientEstimatorOut
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep, tree_where

__all__ = ["TruncatedPES", "PESState"]


@flax.struct.dataclass
class PESState:
    pos_state: Any
    neg_state: Any
    accumulator: Any  # theta-shaped, leading [num_tasks]: perturbations summed over the run


class TruncatedPES(GradientEstimator):
    """PES over ``unroll_length``-step truncations (see module doc).

    Args:
      truncated_step: its ``num_tasks`` is the number of antithetic pairs.
      unroll_length: inner steps per estimate.
      std: perturbation standard deviation.
      stack_antithetic_samples: one population of ``2 * num_tasks`` or two unrolls.
      clip_loss_diff: clip ``L+ - L-`` to this magnitude.
    """

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

    def init_worker_state(self, theta: Any, key: jax.Array) -> PESState:
        state = self.truncated_step.init_step_state(theta, key)
        n = self.truncated_step.num_tasks
        accumulator = jax.tree_util.tree_map(lambda t: jnp.zeros((n, *t.shape), t.dtype), theta)
        return PESState(pos_state=state, neg_state=state, accumulator=accumulator)

    def get_datas(self) -> Any:
        return self.truncated_step.get_batch(self.unroll_length)

    def compute_gradient_estimate(self, theta, key, state, datas):
        ts = self.truncated_step
        k_eps, k_unroll, k_reset = jax.random.split(key, 3)
        eps = common.sample_perturbations(theta, k_eps, self.std, ts.num_tasks)
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
        accumulator = jax.tree_util.tree_map(jnp.add, state.accumulator, eps)
        pos_loss, neg_loss = common.reduce_loss(pos_out), common.reduce_loss(neg_out)
        grad, delta = common.es_grad(accumulator, pos_loss, neg_loss, self.std, self.clip_loss_diff)
        # Finished runs restart (both halves from the same fresh state) with a zero sum.
        pos, done = ts.reset_done(theta, pos, k_reset)
        neg, _ = ts.reset_done(theta, neg, k_reset)
        zeros = jax.tree_util.tree_map(jnp.zeros_like, accumulator)
        accumulator = tree_where(done, zeros, accumulator)
        new_state = PESState(pos_state=pos, neg_state=neg, accumulator=accumulator)
        metrics = {
            "delta_loss_abs": jnp.mean(jnp.abs(delta)),
            "num_done": jnp.sum(done).astype(jnp.float32),
        }
        mean_loss = jnp.mean((pos_loss + neg_loss) / 2)
        return GradientEstimatorOut(mean_loss=mean_loss, grad=grad, unroll_state=new_state), metrics
