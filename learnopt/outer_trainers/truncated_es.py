r"""Truncated evolution strategies: antithetic ES over short unrolls of ongoing runs.

Both halves of each antithetic pair start from the same inner state; the run then
continues from the positive half. Cheap and parallel, but biased like TBPTT: it only
sees theta's effect within the current truncation (Vicol et al., 2021, arXiv:2112.13835).

Each truncation draws fresh ``eps_i ~ N(0, sigma^2 I)`` (``sigma = std``) for the ``N``
pairs; with ``L(theta; s_i)`` the meta-loss of the next ``K`` (``trunc_length``) steps from
pair ``i``'s state ``s_i`` and ``s_i^+`` the positive half's state after them:

.. math::

   \hat g_{\text{TES}} = \frac{1}{N} \sum_{i=1}^{N}
   \frac{L(\theta + \varepsilon_i; s_i) - L(\theta - \varepsilon_i; s_i)}{2\sigma^2}\,
   \varepsilon_i, \qquad s_i \leftarrow s_i^{+}
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["TruncatedES"]


@ESTIMATORS.register
class TruncatedES(common.TruncatedAntitheticEstimator):
    """Antithetic ES over ``trunc_length`` steps from a shared state (see module doc).

    Arguments as :class:`~learnopt.outer_trainers.common.TruncatedAntitheticEstimator`,
    in the library's order (it names ``trunc_length`` ``unroll_length``; both are
    accepted). Default 20 steps per estimate, as the library's.
    """

    default_trunc_length = 20

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        trunc_length: int | None = None,
        steps_per_jit: int | None = None,
        std: float = 0.01,
        stack_antithetic_samples: bool = True,
        sign_delta_loss_scalar: float | None = None,
        clip_loss_diff: float | None = None,
        *,
        unroll_length: int | None = None,
    ):
        super().__init__(  # the base's order
            truncated_step,
            trunc_length,
            std,
            steps_per_jit,
            stack_antithetic_samples,
            sign_delta_loss_scalar,
            clip_loss_diff,
            unroll_length=unroll_length,
        )

    def init_worker_state(self, theta: Any, key: jax.Array, outer_state: Any = None) -> Any:
        """The population's first state, with staggered starts.

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.init_worker_state`.

        Returns:
          The ``TruncatedUnrollState`` (shared by both halves of each pair).
        """
        return self.truncated_step.init_step_state(theta, outer_state, key)

    def compute_gradient_estimate(self, theta, key, state, datas, outer_state=None):
        """Antithetic ES over the next ``trunc_length`` steps from ``state`` (traced).

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.compute_gradient_estimate`.
        Here ``state`` is the population's state; the runs continue from the positive half.

        Returns:
          ``(GradientEstimatorOut, metrics)``: the mean meta-loss, ``grad`` shaped like
          ``theta``, the next state and the unroll's record; metrics:
          ``delta_loss_abs``, ``num_done``.
        """
        ts = self.truncated_step
        k_eps, k_unroll, k_reset = jax.random.split(key, 3)
        eps = self._perturbations(theta, k_eps)
        pos, _, pos_loss, neg_loss, pos_out = self._unroll_truncation(
            theta, eps, state, state, k_unroll, datas
        )
        new_state, done = ts.reset_done(theta, pos, k_reset, outer_state=outer_state)
        metrics = {"num_done": jnp.sum(done).astype(jnp.float32)}
        info = common.unroll_info(pos, pos_out)
        return self._output(eps, pos_loss, neg_loss, new_state, metrics, info)
