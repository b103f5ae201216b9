r"""Noise-reuse evolution strategies (NRES; Li, Wu, Sohl-Dickstein & Metz, 2023, arXiv:2304.12180).

Each antithetic pair samples one perturbation when its inner run starts and reuses it
for every truncation of that run; the estimate of a truncation is
``mean_i eps_i (L+_i - L-_i) / (2 std^2)``. Like PES it is unbiased for the whole run's
smoothed meta-loss, with lower variance than PES (no accumulated noise), and it is
the same as FullES when the truncation covers the whole run.

With ``N`` pairs, ``sigma = std``, ``K = trunc_length`` and ``L^+-`` the halves'
meta-losses of the current truncation (the halves keep separate states, as in PES):

.. math::

   s_i^{\pm} \leftarrow \mathrm{unroll}_K\big(\theta \pm \varepsilon_i,\, s_i^{\pm}\big),
   \qquad
   \hat g_{\text{NRES}} = \frac{1}{N} \sum_{i=1}^{N}
   \frac{L_i^{+} - L_i^{-}}{2\sigma^2}\, \varepsilon_i

A restarted run draws a fresh ``eps_i`` (it starts from ``theta`` itself).
"""

from __future__ import annotations

from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.outer_trainers import common
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS
from learnopt.outer_trainers.lopt_truncated_step import tree_where

__all__ = ["NoiseReuseES", "NRESState"]


@flax.struct.dataclass
class NRESState:
    """Both halves' states of every pair and the perturbation of each pair's run.

    Attributes:
      pos_state: the ``+`` halves' :class:`TruncatedUnrollState` (``[num_tasks]`` runs).
      neg_state: the ``-`` halves' state, same structure.
      perturbation: theta-shaped with a leading ``[num_tasks]`` axis: each pair's
        perturbation, drawn when its run starts and reused for the whole run.
    """

    pos_state: Any
    neg_state: Any
    perturbation: Any  # theta-shaped, leading [num_tasks]: this run's perturbation


@ESTIMATORS.register
class NoiseReuseES(common.TruncatedAntitheticEstimator):
    """NRES over ``trunc_length``-step truncations (see module doc).

    Arguments as :class:`~learnopt.outer_trainers.common.TruncatedAntitheticEstimator`
    (default 10 steps per estimate, as PES). learnopt's own; not in the notes' library.
    """

    def init_worker_state(self, theta: Any, key: jax.Array, outer_state: Any = None) -> NRESState:
        """Both halves start from the same staggered state; each pair draws its perturbation.

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.init_worker_state`.

        Returns:
          The :class:`NRESState`.
        """
        k_state, k_eps = jax.random.split(key)
        state = self.truncated_step.init_step_state(theta, outer_state, k_state)
        eps = self._perturbations(theta, k_eps)
        return NRESState(pos_state=state, neg_state=state, perturbation=eps)

    def compute_gradient_estimate(self, theta, key, state, datas, outer_state=None):
        """The NRES estimate of one truncation, with each run's own perturbation (traced).

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.compute_gradient_estimate`.
        Here ``state`` is the :class:`NRESState`.

        Returns:
          ``(GradientEstimatorOut, metrics)``: the mean meta-loss, ``grad`` shaped like
          ``theta``, the next state and the unroll's record; metrics:
          ``delta_loss_abs``, ``num_done``.
        """
        k_eps, *keys = jax.random.split(key, 3)
        eps = state.perturbation
        new_pos, new_neg, done, pos_loss, neg_loss, info = self._both_halves_then_restarts(
            theta, eps, state, keys, datas, outer_state
        )
        # A run that restarts draws its perturbation for the whole of its next run.
        fresh = self._perturbations(theta, k_eps)
        new_state = NRESState(
            pos_state=new_pos, neg_state=new_neg, perturbation=tree_where(done, fresh, eps)
        )
        metrics = {"num_done": jnp.sum(done).astype(jnp.float32)}
        return self._output(eps, pos_loss, neg_loss, new_state, metrics, info)
