r"""Truncated backpropagation through time (TBPTT) over a population of inner runs.

Each estimate backpropagates through the next ``trunc_length`` inner steps only; the
inner state carried between estimates is treated as a constant. Cheap and low-variance
but biased: it ignores the effect of theta on the state at the start of the unroll
(Werbos, 1990; Wu et al., 2018, arXiv:1803.02021 on short-horizon bias).

The meta-loss of a step is the loss *before* that step's update (as in
learned_optimization), so with ``trunc_length=1`` it does not depend on theta and the
estimate is zero: use ``trunc_length >= 2`` (or a ``meta_loss_split``).

With ``N`` runs, ``K = trunc_length``, ``v_t`` the meta-loss of step ``t`` of a run of
length ``T``, ``w(t, T)`` its weight (:mod:`~learnopt.outer_trainers.meta_objective`; 1 by
default) and ``sg`` stop-gradient, the estimate of a truncation starting at step ``t_0``
from state ``s_i`` is

.. math::

   \hat g_{\text{TBPTT}} = \nabla_\theta\, \frac{1}{N} \sum_{i=1}^{N}
   L\big(\theta; \operatorname{sg}(s_i)\big),
   \qquad
   L(\theta; s) = \frac{1}{K} \sum_{k=0}^{K-1} w(t_0 + k, T)\, v_{t_0 + k}
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common, estimator_checks
from learnopt.outer_trainers.gradient_estimator import (
    ESTIMATORS,
    GradientEstimator,
    GradientEstimatorOut,
)
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["TruncatedGrad"]


@ESTIMATORS.register
class TruncatedGrad(GradientEstimator):
    """TBPTT: the gradient of the mean meta-loss of the next ``trunc_length`` steps.

    The mean is weighted by the truncated step's ``meta_loss_weighting`` when it has one
    (:mod:`~learnopt.outer_trainers.meta_objective`).

    Args:
      truncated_step: the population of inner runs.
      trunc_length: inner steps per estimate (default 20, as the library's
        ``unroll_length``, which is accepted as the same).
      steps_per_jit: the library's chunking; accepted and validated (``trunc_length``
        must be a multiple of it), the whole truncation is one program.
      unroll_length: the library's name for ``trunc_length`` (keyword only; both given
        must agree).
    """

    default_trunc_length = 20

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        trunc_length: int | None = None,
        steps_per_jit: int | None = None,
        *,
        unroll_length: int | None = None,
    ):
        self.truncated_step = truncated_step
        self.trunc_length = estimator_checks.steps_per_estimate(
            "TruncatedGrad", trunc_length, unroll_length, self.default_trunc_length
        )
        estimator_checks.check_steps_per_jit("TruncatedGrad", steps_per_jit, self.trunc_length)
        estimator_checks.check_fits_schedule("TruncatedGrad", truncated_step, self.trunc_length)
        self.steps_per_jit = steps_per_jit

    @property
    def unroll_length(self) -> int:
        """The same as ``trunc_length`` (the library's name)."""
        return self.trunc_length

    def init_worker_state(self, theta: Any, key: jax.Array, outer_state: Any = None) -> Any:
        """The population's first state, with staggered starts.

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.init_worker_state`.

        Returns:
          The ``TruncatedUnrollState``.
        """
        return self.truncated_step.init_step_state(theta, outer_state, key)

    def get_datas(self) -> Any:
        """The batches of one truncation (host side).

        Returns:
          ``truncated_step.get_batch(trunc_length)``.
        """
        return self.truncated_step.get_batch(self.trunc_length)

    def compute_gradient_estimate(self, theta, key, state, datas, outer_state=None):
        """The gradient of the next ``trunc_length`` steps' mean meta-loss (traced).

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.compute_gradient_estimate`.
        Here ``state`` is the population's state (treated as a constant).

        Returns:
          ``(GradientEstimatorOut, metrics)``: the mean meta-loss, ``grad`` shaped like
          ``theta``, the next state and the unroll's record; metrics:
          ``num_done`` (runs that ended and restarted).
        """
        ts = self.truncated_step
        k_unroll, k_reset = jax.random.split(key)
        state = jax.lax.stop_gradient(state)

        def loss_fn(theta):
            new_state, out = ts.unroll(theta, state, k_unroll, datas, self.trunc_length)
            return jnp.mean(common.reduce_loss(out)), (new_state, out)

        (loss, (new_state, out)), grad = jax.value_and_grad(loss_fn, has_aux=True)(theta)
        info = common.unroll_info(new_state, out)
        new_state, done = ts.reset_done(theta, new_state, k_reset, outer_state=outer_state)
        metrics = {"num_done": jnp.sum(done).astype(jnp.float32)}
        out = GradientEstimatorOut(
            mean_loss=loss, grad=grad, unroll_state=new_state, unroll_info=info
        )
        return out, metrics
