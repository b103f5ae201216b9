"""Pieces shared by the gradient estimators: perturbations, antithetic unrolls, ES maths."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.outer_trainers.gradient_learner import GradientEstimator, GradientEstimatorOut
from learnopt.outer_trainers.lopt_truncated_step import (
    TruncatedUnrollOut,
    TruncatedUnrollState,
    VectorizedLOptTruncatedStep,
)

PyTree = Any

__all__ = [
    "sample_perturbations",
    "antithetic_unroll",
    "es_grad",
    "reduce_loss",
    "constant_horizon",
    "TruncatedAntitheticEstimator",
]


def sample_perturbations(theta: PyTree, key: jax.Array, std: float, num: int) -> PyTree:
    """``num`` Gaussian perturbations of ``theta`` with standard deviation ``std``."""
    leaves, treedef = jax.tree_util.tree_flatten(theta)
    keys = jax.random.split(key, len(leaves))
    eps = [
        (std * jax.random.normal(k, (num, *jnp.shape(x)), jnp.float32)).astype(x.dtype)
        for k, x in zip(keys, leaves, strict=True)
    ]
    return jax.tree_util.tree_unflatten(treedef, eps)


def _plus(theta: PyTree, eps: PyTree, sign: float) -> PyTree:
    return jax.tree_util.tree_map(lambda t, e: t[None] + sign * e, theta, eps)


def antithetic_unroll(
    truncated_step: VectorizedLOptTruncatedStep,
    theta: PyTree,
    eps: PyTree,
    pos_state: TruncatedUnrollState,
    neg_state: TruncatedUnrollState,
    key: jax.Array,
    data: PyTree,
    num_steps: int,
    stacked: bool = True,
) -> tuple[TruncatedUnrollState, TruncatedUnrollState, TruncatedUnrollOut, TruncatedUnrollOut]:
    """Unrolls ``theta + eps`` from ``pos_state`` and ``theta - eps`` from ``neg_state``.

    Both halves see the same batches and the same random keys (common random numbers),
    which is what makes the antithetic difference low-variance. ``stacked`` runs them as
    one population of ``2 * num_tasks`` members; otherwise as two unrolls (less memory).
    """
    theta_pos, theta_neg = _plus(theta, eps, 1.0), _plus(theta, eps, -1.0)
    if stacked:
        cat = lambda a, b: jax.tree_util.tree_map(lambda x, y: jnp.concatenate([x, y]), a, b)
        state, out = truncated_step.unroll(
            cat(theta_pos, theta_neg),
            cat(pos_state, neg_state),
            key,
            data,
            num_steps,
            theta_is_vector=True,
            num_copies=2,
        )
        n = truncated_step.num_tasks
        first = lambda t, ax: jax.tree_util.tree_map(
            lambda x: jax.lax.slice_in_dim(x, 0, n, axis=ax), t
        )
        last = lambda t, ax: jax.tree_util.tree_map(
            lambda x: jax.lax.slice_in_dim(x, n, 2 * n, axis=ax), t
        )
        pos_out = TruncatedUnrollOut(
            loss=first(out.loss, 1),
            iteration=first(out.iteration, 1),
            is_done=first(out.is_done, 0),
        )
        neg_out = TruncatedUnrollOut(
            loss=last(out.loss, 1), iteration=last(out.iteration, 1), is_done=last(out.is_done, 0)
        )
        return first(state, 0), last(state, 0), pos_out, neg_out
    pos_state, pos_out = truncated_step.unroll(
        theta_pos, pos_state, key, data, num_steps, theta_is_vector=True
    )
    neg_state, neg_out = truncated_step.unroll(
        theta_neg, neg_state, key, data, num_steps, theta_is_vector=True
    )
    return pos_state, neg_state, pos_out, neg_out


def reduce_loss(out: TruncatedUnrollOut, loss_type: str = "avg") -> jax.Array:
    """Per-member meta-loss of an unroll: mean over its steps (``avg``) or the last step."""
    if loss_type == "avg":
        return jnp.mean(out.loss, axis=0)
    if loss_type == "last":
        return out.loss[-1]
    raise ValueError(f"loss_type must be 'avg' or 'last' here, got {loss_type!r}")


def es_grad(
    eps: PyTree,
    pos_loss: jax.Array,
    neg_loss: jax.Array,
    std: float,
    clip_loss_diff: float | None = None,
) -> tuple[PyTree, jax.Array]:
    """Antithetic ES estimate ``mean_i eps_i (L+_i - L-_i) / (2 std^2)`` and the deltas.

    ``eps`` has a leading ``[num]`` axis (for PES: the accumulated perturbations).
    """
    delta = pos_loss - neg_loss
    if clip_loss_diff is not None:
        delta = jnp.clip(delta, -clip_loss_diff, clip_loss_diff)
    scale = delta / (2.0 * std**2)
    grad = jax.tree_util.tree_map(
        lambda e: jnp.tensordot(scale, e.astype(jnp.float32), axes=1).astype(e.dtype) / e.shape[0],
        eps,
    )
    return grad, delta


def constant_horizon(truncated_step: VectorizedLOptTruncatedStep, who: str) -> int:
    """The fixed inner-run length that full-unroll estimators differentiate through."""
    sched = truncated_step.trunc_sched
    length = getattr(sched, "total_length", None)
    if length is None:
        raise ValueError(
            f"{who} unrolls whole inner runs, so it needs a ConstantTruncationSchedule; "
            f"got {sched!r}"
        )
    return int(length)


def loss_metrics(prefix: str, pos_loss: jax.Array, neg_loss: jax.Array, delta: jax.Array) -> dict:
    return {
        f"{prefix}/mean_loss": jnp.mean((pos_loss + neg_loss) / 2),
        f"{prefix}/delta_loss_abs": jnp.mean(jnp.abs(delta)),
    }


class TruncatedAntitheticEstimator(GradientEstimator):
    """Shared plumbing of the antithetic ES estimators over truncations (TES, PES, NRES).

    Args:
      truncated_step: its ``num_tasks`` is the number of antithetic pairs.
      unroll_length: inner steps per estimate.
      std: perturbation standard deviation.
      stack_antithetic_samples: run the + and - halves as one population of
        ``2 * num_tasks`` (faster) or as two unrolls (half the peak memory).
      clip_loss_diff: clip ``L+ - L-`` to this magnitude (robustness to outliers).
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

    def get_datas(self) -> Any:
        return self.truncated_step.get_batch(self.unroll_length)

    def _unroll_pair(self, theta, eps, pos_state, neg_state, key, datas):
        """Antithetic unroll; returns (pos, neg, per-member pos loss, neg loss)."""
        pos, neg, pos_out, neg_out = antithetic_unroll(
            self.truncated_step,
            theta,
            eps,
            pos_state,
            neg_state,
            key,
            datas,
            self.unroll_length,
            stacked=self.stack_antithetic_samples,
        )
        return pos, neg, reduce_loss(pos_out), reduce_loss(neg_out)

    def _output(self, weights, pos_loss, neg_loss, done, new_state):
        """The estimate ``mean_i w_i (L+_i - L-_i) / (2 std^2)``, its output and metrics."""
        grad, delta = es_grad(weights, pos_loss, neg_loss, self.std, self.clip_loss_diff)
        metrics = {
            "delta_loss_abs": jnp.mean(jnp.abs(delta)),
            "num_done": jnp.sum(done).astype(jnp.float32),
        }
        mean_loss = jnp.mean((pos_loss + neg_loss) / 2)
        return GradientEstimatorOut(mean_loss=mean_loss, grad=grad, unroll_state=new_state), metrics
