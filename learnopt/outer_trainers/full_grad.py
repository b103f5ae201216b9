r"""Full backpropagation through whole inner training runs.

The exact meta-gradient of the mean (or last) meta-loss over a complete inner run,
computed by reverse-mode autodiff through the unrolled ``lax.scan`` (Maclaurin et al.,
2015, arXiv:1502.03492; the notes' walkthrough with a run of 4 steps). Memory grows
with the run length; pass ``remat=True`` to the truncated step to trade compute for it.

The estimate over ``N`` fresh runs of length ``T`` differentiates everything from the
initialization of the runs' optimizer states from theta on; ``J_i`` is run ``i``'s
meta-loss (``loss_type``), for ``"avg"`` the weighted mean of its steps' meta-losses
``v_t`` (weights ``w(t, T)``, 1 by default; :mod:`~learnopt.outer_trainers.meta_objective`):

.. math::

   \hat g_{\text{FullGrad}} = \nabla_\theta\, \frac{1}{N} \sum_{i=1}^{N} J_i(\theta),
   \qquad
   J_i^{\text{avg}} = \frac{1}{T} \sum_{t<T} w(t, T)\, v_{i,t}
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers import truncation_schedule as ts_mod
from learnopt.outer_trainers.gradient_estimator import (
    ESTIMATORS,
    GradientEstimator,
    GradientEstimatorOut,
    GradientEstimatorState,
)
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["FullGrad", "FullGradState", "UnrollState"]


@flax.struct.dataclass
class FullGradState(GradientEstimatorState):
    """FullGrad keeps no state between estimates (every estimate starts fresh runs)."""


#: The library's name of FullGrad's (empty) state.
UnrollState = FullGradState


@ESTIMATORS.register
class FullGrad(common.WholeRuns, GradientEstimator):
    """Backprop through whole fresh runs (all members share one sampled length).

    Args:
      truncated_step: the population of inner runs.
      truncation_schedule: the length of the runs (the library's argument; the
        truncated step must then have a ``NeverEndingTruncationSchedule``). Without it,
        the truncated step's schedule gives the length. See
        :class:`~learnopt.outer_trainers.common.FullHorizon` for variable lengths.
      loss_type: ``"avg"`` (mean meta-loss over the run), ``"last"`` (last step) or
        ``"last_recompute"`` (loss of the final params on ``recompute_samples`` fresh
        batches of the truncated step's ``outer_data_split``; learnopt's addition).
        ``"avg"`` weights the steps by the truncated step's ``meta_loss_weighting``
        (``"last"`` and ``"last_recompute"`` refuse one).
      recompute_samples: batches for ``"last_recompute"``.
      steps_per_jit: if given, lengths are rounded down to a multiple of it, as FullES.
    """

    LOSS_TYPES = ("avg", "last", "last_recompute")
    STATE = FullGradState

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        truncation_schedule: ts_mod.TruncationSchedule | None = None,
        loss_type: str = "avg",
        recompute_samples: int = 4,
        steps_per_jit: int | None = None,
    ):
        self.truncated_step = truncated_step
        self._whole_runs(truncation_schedule, steps_per_jit, loss_type, recompute_samples)

    def meta_loss(
        self, theta: Any, key: jax.Array, datas: Any, outer_state: Any = None
    ) -> tuple[jax.Array, Any]:
        """The meta-loss whose gradient this estimator returns (differentiable in theta).

        Args:
          theta: the meta-parameters.
          key: randomness of the runs (the same key gives the same runs).
          datas: from :meth:`get_datas`.
          outer_state: an ``OuterState`` (the outer iteration, for schedules of it).

        Returns:
          ``(loss, (final_state, unroll_out))``: the mean meta-loss over the population,
          the runs' final state and the unroll's output.
        """
        data, recompute = datas
        ts = self.truncated_step
        k_init, k_unroll, k_re = jax.random.split(key, 3)
        length = self._horizon.length(jax.random.fold_in(key, 3), outer_state)
        state = ts.init_population(
            theta,
            k_init,
            outer_state=outer_state,
            num_steps_override=self.horizon if length is None else length,
        )
        state, out = ts.unroll(theta, state, k_unroll, data, self.horizon, length=length)
        if self.loss_type == "last_recompute":
            per_task = ts.mean_meta_loss(theta, state, k_re, recompute)
        else:
            per_task = common.reduce_loss(out, self.loss_type, length)
        return jnp.mean(per_task), (state, out)

    def compute_gradient_estimate(self, theta, key, state, datas, outer_state=None):
        """The exact gradient of :meth:`meta_loss` by backprop through the runs (traced).

        Args and returns as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.compute_gradient_estimate`;
        ``state`` (empty) is returned as it is. Metrics: ``last_loss`` (the mean loss of
        the runs' last steps).
        """
        (loss, (final, out)), grad = jax.value_and_grad(self.meta_loss, has_aux=True)(
            theta, key, datas, outer_state
        )
        # Every run took final.inner_step steps from 0: its last loss is at that index - 1.
        last = jnp.take_along_axis(out.loss, final.inner_step[None] - 1, axis=0)
        metrics = {"last_loss": jnp.mean(last)}
        info = common.unroll_info(final, out)
        return (
            GradientEstimatorOut(mean_loss=loss, grad=grad, unroll_state=state, unroll_info=info),
            metrics,
        )
