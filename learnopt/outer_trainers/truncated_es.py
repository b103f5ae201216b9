"""Truncated evolution strategies: antithetic ES over short unrolls of ongoing runs.

Both halves of each antithetic pair start from the same inner state; the run then
continues from the positive half. Cheap and parallel, but biased like TBPTT: it only
sees theta's effect within the current truncation (Vicol et al., 2021, arXiv:2112.13835).
"""

from __future__ import annotations

from typing import Any

import jax

from learnopt.outer_trainers import common

__all__ = ["TruncatedES"]


class TruncatedES(common.TruncatedAntitheticEstimator):
    """Antithetic ES over ``unroll_length`` steps from a shared state (see module doc).

    Arguments as :class:`~learnopt.outer_trainers.common.TruncatedAntitheticEstimator`.
    """

    def init_worker_state(self, theta: Any, key: jax.Array) -> Any:
        return self.truncated_step.init_step_state(theta, key)

    def compute_gradient_estimate(self, theta, key, state, datas):
        ts = self.truncated_step
        k_eps, k_unroll, k_reset = jax.random.split(key, 3)
        eps = common.sample_perturbations(theta, k_eps, self.std, ts.num_tasks)
        pos, _, pos_loss, neg_loss = self._unroll_pair(theta, eps, state, state, k_unroll, datas)
        new_state, done = ts.reset_done(theta, pos, k_reset)
        return self._output(eps, pos_loss, neg_loss, done, new_state)
