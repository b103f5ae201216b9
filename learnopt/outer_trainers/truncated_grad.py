"""Truncated backpropagation through time (TBPTT) over a population of inner runs.

Each estimate backpropagates through the last ``unroll_length`` inner steps only; the
inner state carried between estimates is treated as a constant. Cheap and low-variance
but biased: it ignores the effect of theta on the state at the start of the unroll
(Werbos, 1990; Wu et al., 2018, arXiv:1803.02021 on short-horizon bias).

The meta-loss of a step is the loss *before* that step's update (as in
learned_optimization), so with ``unroll_length=1`` it does not depend on theta and the
estimate is zero: use ``unroll_length >= 2``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_learner import GradientEstimator, GradientEstimatorOut
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["TruncatedGrad"]


class TruncatedGrad(GradientEstimator):
    """TBPTT: the gradient of the mean meta-loss of one unroll of ``unroll_length`` steps."""

    def __init__(self, truncated_step: VectorizedLOptTruncatedStep, unroll_length: int = 20):
        if int(unroll_length) < 1:
            raise ValueError(f"unroll_length must be >= 1, got {unroll_length}")
        self.truncated_step = truncated_step
        self.unroll_length = int(unroll_length)

    def init_worker_state(self, theta: Any, key: jax.Array) -> Any:
        return self.truncated_step.init_step_state(theta, key)

    def get_datas(self) -> Any:
        return self.truncated_step.get_batch(self.unroll_length)

    def compute_gradient_estimate(self, theta, key, state, datas):
        ts = self.truncated_step
        k_unroll, k_reset = jax.random.split(key)
        state = jax.lax.stop_gradient(state)

        def loss_fn(theta):
            new_state, out = ts.unroll(theta, state, k_unroll, datas, self.unroll_length)
            return jnp.mean(common.reduce_loss(out)), (new_state, out)

        (loss, (new_state, out)), grad = jax.value_and_grad(loss_fn, has_aux=True)(theta)
        new_state, done = ts.reset_done(theta, new_state, k_reset)
        metrics = {"num_done": jnp.sum(done).astype(jnp.float32)}
        return GradientEstimatorOut(mean_loss=loss, grad=grad, unroll_state=new_state), metrics
