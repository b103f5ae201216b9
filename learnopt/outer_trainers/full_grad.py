"""Full backpropagation through whole inner training runs.

The exact meta-gradient of the mean (or last) meta-loss over a complete inner run of
``T`` steps, computed by reverse-mode autodiff through the unrolled ``lax.scan``
(Maclaurin et al., 2015, arXiv:1502.03492; the notes' walkthrough with ``T = 4``).
Memory grows with ``T``; pass ``remat=True`` to the truncated step to trade compute for it.
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_learner import GradientEstimator, GradientEstimatorOut
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["FullGrad", "FullGradState"]


@flax.struct.dataclass
class FullGradState:
    pass


class FullGrad(GradientEstimator):
    """Backprop through ``T`` inner steps from a fresh init (``T`` from the schedule).

    Args:
      truncated_step: population of inner runs; needs a ``ConstantTruncationSchedule``.
      loss_type: ``"avg"`` (mean meta-loss over the run), ``"last"`` (last step) or
        ``"last_recompute"`` (loss of the final params on ``recompute_samples`` fresh
        batches of the meta split).
      recompute_samples: batches for ``"last_recompute"``.
    """

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        loss_type: str = "avg",
        recompute_samples: int = 4,
    ):
        if loss_type not in ("avg", "last", "last_recompute"):
            raise ValueError(f"loss_type must be avg, last or last_recompute, got {loss_type!r}")
        self.truncated_step = truncated_step
        self.loss_type = loss_type
        self.recompute_samples = recompute_samples
        self.horizon = common.constant_horizon(truncated_step, "FullGrad")

    def init_worker_state(self, theta: Any, key: jax.Array) -> FullGradState:
        return FullGradState()

    def get_datas(self) -> Any:
        data = self.truncated_step.get_batch(self.horizon)
        if self.loss_type == "last_recompute":
            return data, self.truncated_step.get_outer_batch(self.recompute_samples)
        return data, None

    def meta_loss(self, theta: Any, key: jax.Array, datas: Any) -> tuple[jax.Array, Any]:
        """The meta-loss whose gradient this estimator returns (differentiable in theta)."""
        data, recompute = datas
        ts = self.truncated_step
        k_init, k_unroll, k_re = jax.random.split(key, 3)
        state = ts.init_population(theta, k_init)
        state, out = ts.unroll(theta, state, k_unroll, data, self.horizon)
        if self.loss_type == "last_recompute":
            per_task = ts.meta_loss_batch(theta, state, k_re, recompute)
        else:
            per_task = common.reduce_loss(out, self.loss_type)
        return jnp.mean(per_task), out

    def compute_gradient_estimate(self, theta, key, state, datas):
        (loss, out), grad = jax.value_and_grad(self.meta_loss, has_aux=True)(theta, key, datas)
        metrics = {"last_loss": jnp.mean(out.loss[-1])}
        return GradientEstimatorOut(mean_loss=loss, grad=grad, unroll_state=state), metrics
