r"""Persistent evolution strategies (PES; Vicol, Metz & Sohl-Dickstein, 2021, arXiv:2112.13835).

Antithetic pairs keep *separate* inner states across truncations and every pair keeps
the sum of all perturbations it has received since its run started. The estimate of a
truncation is ``mean_i xi_i (L+_i - L-_i) / (2 std^2)`` with ``xi_i`` that accumulated
perturbation, which makes the sum of estimates over a run an unbiased estimate of the
gradient of the whole run's (smoothed) meta-loss, unlike TBPTT and truncated ES.

At the ``j``-th truncation of a run, pair ``i`` (of ``N``) draws
``eps_i^(j) ~ N(0, sigma^2 I)`` (``sigma = std``), both halves unroll ``K``
(``trunc_length``) steps from their own states, and ``L^+-`` are their meta-losses:

.. math::

   s_i^{\pm} \leftarrow \mathrm{unroll}_K\big(\theta \pm \varepsilon_i^{(j)},\, s_i^{\pm}\big),
   \qquad \xi_i^{(j)} = \sum_{j' \le j} \varepsilon_i^{(j')}

   \hat g_{\text{PES}} = \frac{1}{N} \sum_{i=1}^{N}
   \frac{L_i^{+,(j)} - L_i^{-,(j)}}{2\sigma^2}\, \xi_i^{(j)}

When a run ends, both halves restart from the same fresh state, built with ``theta``
itself, and ``xi_i`` is reset to 0. theta read only when a run starts (an LSTM's initial
state) therefore gets no estimate from PES (freeze it, or use FullES, whose halves start
from their own perturbed theta). Crediting the restart's perturbation, as the notes'
library does, was tried: HyperV2's meta-loss then rose in
``tests/test_lopt_conformance.py``'s short PES run, where it otherwise falls.
"""

from __future__ import annotations

import copy
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
import numpy as np

from learnopt.outer_trainers import common, population_sharding
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS
from learnopt.outer_trainers.lopt_truncated_step import tree_where

__all__ = ["TruncatedPES", "TruncatedPESPMAP", "PESState", "PESWorkerState"]


@flax.struct.dataclass
class PESState:
    """Both halves' states of every pair and the perturbations each pair has received.

    Attributes:
      pos_state: the ``+`` halves' :class:`TruncatedUnrollState` (``[num_tasks]`` runs).
      neg_state: the ``-`` halves' state, same structure.
      accumulator: theta-shaped with a leading ``[num_tasks]`` axis: the perturbations
        each pair has received since its run started (zeroed when the run restarts).
    """

    pos_state: Any
    neg_state: Any
    accumulator: Any  # theta-shaped, leading [num_tasks]: perturbations summed over the run


#: The library's name of the PES state.
PESWorkerState = PESState


@ESTIMATORS.register
class TruncatedPES(common.TruncatedAntitheticEstimator):
    """PES over ``trunc_length``-step truncations (see module doc).

    Arguments as :class:`~learnopt.outer_trainers.common.TruncatedAntitheticEstimator`
    (the library's order; default 10 steps per estimate, as the library's).
    """

    def init_worker_state(self, theta: Any, key: jax.Array, outer_state: Any = None) -> PESState:
        """Both halves start from the same staggered state, with a zero accumulator.

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.init_worker_state`.

        Returns:
          The :class:`PESState`.
        """
        state = self.truncated_step.init_step_state(theta, outer_state, key)
        n = self.truncated_step.num_tasks
        accumulator = jax.tree_util.tree_map(lambda t: jnp.zeros((n, *t.shape), t.dtype), theta)
        return PESState(pos_state=state, neg_state=state, accumulator=accumulator)

    def compute_gradient_estimate(self, theta, key, state, datas, outer_state=None):
        """The PES estimate of one truncation, with the accumulated perturbations (traced).

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.compute_gradient_estimate`.
        Here ``state`` is the :class:`PESState`.

        Returns:
          ``(GradientEstimatorOut, metrics)``: the mean meta-loss, ``grad`` shaped like
          ``theta``, the next state and the unroll's record; metrics:
          ``delta_loss_abs``, ``num_done``.
        """
        k_eps, *keys = jax.random.split(key, 3)
        eps = self._perturbations(theta, k_eps)
        # Finished runs restart (both halves from the same fresh state) with a zero sum.
        new_pos, new_neg, done, pos_loss, neg_loss, info = self._both_halves_then_restarts(
            theta, eps, state, keys, datas, outer_state
        )
        accumulator = jax.tree_util.tree_map(jnp.add, state.accumulator, eps)
        zeros = jax.tree_util.tree_map(jnp.zeros_like, accumulator)
        new_state = PESState(
            pos_state=new_pos,
            neg_state=new_neg,
            accumulator=tree_where(done, zeros, accumulator),
        )
        metrics = {"num_done": jnp.sum(done).astype(jnp.float32)}
        return self._output(accumulator, pos_loss, neg_loss, new_state, metrics, info)


class TruncatedPESPMAP(TruncatedPES):
    """PES on every local device: the library's pmap estimator, on a sharded population.

    Each of the ``num_devices`` local devices runs ``truncated_step.num_tasks`` antithetic
    pairs, as the library's ``TruncatedPESPMAP`` (its ``jax.pmap``): the population is
    ``num_devices * num_tasks`` pairs, split over the devices by its leading axis
    (:mod:`~learnopt.outer_trainers.population_sharding`), and the estimate is their
    mean. XLA partitions the unroll by its inputs' sharding; the maths is
    :class:`TruncatedPES`'s.

    Args:
      truncated_step: the population of one device; its ``num_tasks`` pairs per device.
      *args: :class:`TruncatedPES`'s other arguments, in its order.
      num_devices: the number of local devices, which must be ``len(jax.local_devices())``.
      replicate_data_across_devices: give every device the same batches (one device's
        draw, repeated) instead of its own.
      **kwargs: :class:`TruncatedPES`'s keyword arguments.

    Raises:
      ValueError: ``num_devices`` is not the number of local devices.
    """

    def __init__(
        self,
        truncated_step: Any,
        *args: Any,
        num_devices: int = 8,
        replicate_data_across_devices: bool = False,
        **kwargs: Any,
    ):
        devices = jax.local_devices()
        if len(devices) != num_devices:
            raise ValueError(
                f"TruncatedPESPMAP: num_devices={num_devices}, but there are {len(devices)} "
                f"local devices ({devices})"
            )
        population = copy.copy(truncated_step)
        population.num_tasks = truncated_step.num_tasks * num_devices
        super().__init__(population, *args, **kwargs)
        self.per_device_step = truncated_step
        self.num_devices = num_devices
        self.replicate_data_across_devices = bool(replicate_data_across_devices)
        self.mesh = jax.sharding.Mesh(devices, ("tasks",))

    def init_worker_state(self, theta: Any, key: jax.Array, outer_state: Any = None) -> PESState:
        """:class:`TruncatedPES`'s state, its population split over the devices.

        Arguments as in
        :meth:`~learnopt.outer_trainers.gradient_estimator.GradientEstimator.init_worker_state`.

        Returns:
          The :class:`PESState`.
        """
        state = super().init_worker_state(theta, key, outer_state)
        shardings = population_sharding.by_population(self.mesh, state, self, 0)
        return jax.device_put(state, shardings)

    def get_datas(self) -> Any:
        """The batches of one truncation for every device's pairs.

        Returns:
          ``[trunc_length, num_devices * num_tasks, ...]`` batches (with
          ``replicate_data_across_devices``, one device's draw repeated), or None.
        """
        if not self.replicate_data_across_devices:
            return super().get_datas()
        datas = self.per_device_step.get_batch(self.trunc_length)
        return jax.tree_util.tree_map(
            lambda x: np.concatenate([x] * self.num_devices, axis=1), datas
        )
