r"""Antithetic evolution strategies over whole inner training runs.

``g = mean_i eps_i (L(theta + eps_i) - L(theta - eps_i)) / (2 std^2)`` with
``eps_i ~ N(0, std^2 I)`` (Salimans et al., 2017, arXiv:1703.03864): an unbiased
estimate of the gradient of the Gaussian-smoothed meta-loss that needs no backprop
through the unroll, so it is unaffected by chaotic or non-differentiable inner training
(Metz et al., 2019, arXiv:1810.10180).

With ``sigma = std``, ``N`` antithetic pairs and ``J`` the meta-loss of a whole run
(``loss_type``; ``"avg"`` is the weighted mean ``J_w`` of
:mod:`~learnopt.outer_trainers.meta_objective`):

.. math::

   \hat g_{\text{FullES}} = \frac{1}{N} \sum_{i=1}^{N}
   \frac{J(\theta + \varepsilon_i) - J(\theta - \varepsilon_i)}{2\sigma^2}\, \varepsilon_i,
   \qquad \varepsilon_i \sim \mathcal N(0, \sigma^2 I)

   \nabla_\theta\, \mathbb E_{\varepsilon}\big[J(\theta + \varepsilon)\big]
   = \frac{1}{2\sigma^2} \mathbb E_{\varepsilon}\big[\varepsilon\, \big(J(\theta + \varepsilon)
   - J(\theta - \varepsilon)\big)\big]
"""

from __future__ import annotations

import flax.struct
import jax

from learnopt.outer_trainers import common
from learnopt.outer_trainers import truncation_schedule as ts_mod
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS, GradientEstimatorState
from learnopt.outer_trainers.lopt_truncated_step import VectorizedLOptTruncatedStep

__all__ = ["FullES", "FullESState", "UnrollState"]


@flax.struct.dataclass
class FullESState(GradientEstimatorState):
    """FullES keeps no state between estimates (every estimate starts fresh runs)."""


#: The library's name of FullES's (empty) state.
UnrollState = FullESState


@ESTIMATORS.register
class FullES(common.WholeRuns, common.AntitheticEstimator):
    """Antithetic ES on complete fresh runs (all members share one sampled length).

    Args:
      truncated_step: its ``num_tasks`` is the number of antithetic pairs.
      truncation_schedule: the length of the runs (the library's argument; the
        truncated step must then have a ``NeverEndingTruncationSchedule``). Without it,
        the truncated step's schedule gives the length. See
        :class:`~learnopt.outer_trainers.common.FullHorizon` for variable lengths.
      std: perturbation standard deviation.
      steps_per_jit: if given, lengths are rounded down to a multiple of it (at least
        one), as the library does; the whole run is one program anyway.
      loss_type: the meta-loss of a run: ``"avg"`` (mean over its steps), ``"min"``,
        ``"last"`` (last step) or ``"last_recompute"`` (the final params' mean loss on
        ``recompute_samples`` fresh batches of the truncated step's ``outer_data_split``).
        ``"avg"`` weights the steps by the truncated step's ``meta_loss_weighting``
        (the other types refuse one): ``meta_loss_weighting="last_window"`` with
        ``meta_loss_window=0.1`` makes it the mean meta-loss of the last 10% of the run,
        an end-of-run objective over the whole horizon (one program of ``horizon``
        steps, any length).
      recompute_samples: batches for ``"last_recompute"``.
      clip_loss_diff: clip ``L+ - L-`` to this magnitude (robustness to outliers; None:
        no clipping).
      stack_antithetic_samples: run the + and - halves as one population of
        ``2 * num_tasks`` (faster; learnopt's default) or as two unrolls (half the peak
        memory; the library's default). Same results either way.
      sign_delta_loss_scalar: use ``sign(L+ - L-)`` times this instead of the
        difference (None: the difference).
    """

    LOSS_TYPES = ("avg", "min", "last", "last_recompute")
    STATE = FullESState

    def __init__(
        self,
        truncated_step: VectorizedLOptTruncatedStep,
        truncation_schedule: ts_mod.TruncationSchedule | None = None,
        std: float = 0.01,
        steps_per_jit: int | None = None,
        loss_type: str = "avg",
        recompute_samples: int = 50,
        clip_loss_diff: float | None = None,
        stack_antithetic_samples: bool = True,
        sign_delta_loss_scalar: float | None = None,
    ):
        super().__init__(
            truncated_step, std, stack_antithetic_samples, clip_loss_diff, sign_delta_loss_scalar
        )
        self._whole_runs(truncation_schedule, steps_per_jit, loss_type, recompute_samples)

    def compute_gradient_estimate(self, theta, key, state, datas, outer_state=None):
        """The antithetic ES estimate over whole fresh runs (traced).

        Args and returns as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.compute_gradient_estimate`;
        ``state`` (empty) is returned as it is. Metrics: ``delta_loss_abs``.
        """
        data, recompute = datas
        ts = self.truncated_step
        k_eps, k_init, k_unroll, k_re = jax.random.split(key, 4)
        length = self._horizon.length(jax.random.fold_in(key, 4), outer_state)
        eps = self._perturbations(theta, k_eps)
        theta_pos, theta_neg = common._plus(theta, eps, 1.0), common._plus(theta, eps, -1.0)
        # Each half starts from its own theta (the same tasks, params and lengths: one
        # key), so theta that acts only at init (an LSTM's initial state) is credited.
        starts = [
            ts.init_population(
                th,
                k_init,
                theta_is_vector=True,
                outer_state=outer_state,
                num_steps_override=self.horizon if length is None else length,
            )
            for th in (theta_pos, theta_neg)
        ]
        loss_type = "avg" if self.loss_type == "last_recompute" else self.loss_type
        pos, neg, pos_loss, neg_loss, pos_out = self._unroll_pair(
            theta, eps, *starts, k_unroll, data, self.horizon, length, loss_type
        )
        if self.loss_type == "last_recompute":
            pos_loss = ts.mean_meta_loss(theta_pos, pos, k_re, recompute, theta_is_vector=True)
            neg_loss = ts.mean_meta_loss(theta_neg, neg, k_re, recompute, theta_is_vector=True)
        return self._output(eps, pos_loss, neg_loss, state, info=common.unroll_info(pos, pos_out))
