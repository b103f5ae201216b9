"""A worker's computation: every estimator's estimate for the current ``theta``, averaged.

A worker receives :class:`WorkerWeights` (``theta``, its model state and the outer state)
from the learner and sends back an :class:`AggregatedGradient`: the mean of its
estimators' gradients and meta-losses. If the mean is not finite (an inner run
diverged), the estimators' states restart from ``init_worker_state`` instead of carrying
NaNs into the next estimate.

:func:`worker_compute` is traced (it runs inside the learner's one jitted program);
:func:`host_worker_compute` is the same computation on the host, for estimators written
in the notes' library's convention, whose methods cannot be traced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from learnopt.outer_trainers.gradient_estimator import (
    GradientEstimator,
    OuterState,
    outer_kwargs,
)
from learnopt.tree_utils import tree_all_finite, tree_cast_like, tree_norm

PyTree = Any
MetaParams = Any

__all__ = [
    "WorkerWeights",
    "AggregatedGradient",
    "BALANCES",
    "check_balance",
    "metric_prefix",
    "init_states",
    "worker_compute",
    "host_worker_compute",
    "library_metrics",
]


@flax.struct.dataclass
class WorkerWeights:
    """What a worker needs from the learner: ``theta``, its model state, the outer state.

    Attributes:
      theta: the meta-parameters to estimate a gradient at.
      theta_model_state: the learned optimizer's model state (None for most).
      outer_state: the :class:`OuterState` (the outer iteration, for schedules of it).
    """

    theta: MetaParams
    theta_model_state: PyTree
    outer_state: OuterState


@flax.struct.dataclass
class AggregatedGradient:
    """A worker's averaged estimate, sent to the learner.

    Attributes:
      theta_grads: the meta-gradient averaged over the worker's estimators, shaped
        like ``theta``.
      theta_model_state: the model state of ``theta``, as the :class:`WorkerWeights`
        gave it.
      mean_loss: the meta-loss averaged over the estimators, a scalar.
    """

    theta_grads: MetaParams
    theta_model_state: PyTree
    mean_loss: jax.Array


def _estimate(est: GradientEstimator, theta, key, state, datas, outer_state):
    fn = est.compute_gradient_estimate
    return fn(theta, key, state, datas, **outer_kwargs(fn, outer_state))


def init_states(estimators: Sequence[GradientEstimator], theta, key, outer_state) -> tuple:
    """Every estimator's initial state (traced), each with its own split of ``key``.

    Args:
      estimators: the gradient estimators.
      theta: the meta-parameters.
      key: randomness, split once per estimator.
      outer_state: an :class:`OuterState`, passed to estimators that take it.

    Returns:
      A tuple of states, one per estimator.
    """
    keys = jax.random.split(key, len(estimators))
    out = []
    for est, k in zip(estimators, keys, strict=True):
        fn = est.init_worker_state
        out.append(fn(theta, k, **outer_kwargs(fn, outer_state)))
    return tuple(out)


def metric_prefix(estimators: Sequence[GradientEstimator], i: int) -> str:
    """The prefix of estimator ``i``'s metrics: its name, ``<i>_<name>`` among several.

    Args:
      estimators: the worker's estimators.
      i: the estimator's position.

    Returns:
      E.g. ``"TruncatedPES"`` alone, ``"1_TruncatedPES"`` as the second of two.
    """
    est = estimators[i]
    return f"{i}_{est.name}" if len(estimators) > 1 else est.name


#: How a worker combines its estimators' estimates: ``"mean"`` (their average, the
#: notes' library's worker) or ``"norm"`` (each scaled to unit global norm first).
BALANCES = ("mean", "norm")


def check_balance(balance: str) -> str:
    """``balance`` if it is one of :data:`BALANCES`.

    Args:
      balance: the name to check.

    Returns:
      ``balance``.

    Raises:
      ValueError: naming the accepted values.
    """
    if not isinstance(balance, str) or balance not in BALANCES:
        raise ValueError(f"balance must be one of {list(BALANCES)}, got {balance!r}")
    return balance


def _unit(tree: PyTree, frozen: PyTree | None) -> PyTree:
    """``tree`` (its ``frozen`` leaves zeroed) over its global norm; zero stays zero."""
    if frozen is not None:
        tree = jax.tree_util.tree_map(lambda g, f: jnp.zeros_like(g) if f else g, tree, frozen)
    scale = 1.0 / jnp.maximum(tree_norm(tree), 1e-30)
    return jax.tree_util.tree_map(lambda g: (g * scale).astype(g.dtype), tree)


def _combine(
    estimators, outs, est_metrics, balance: str = "mean", frozen: PyTree | None = None
) -> tuple[MetaParams, jax.Array, jax.Array, dict]:
    """Mean gradient and loss of several estimates, whether they are finite, and metrics."""
    n = len(outs)
    grads = [o.grad for o in outs]
    if balance == "norm":
        grads = [_unit(g, frozen) for g in grads]
    grad = jax.tree_util.tree_map(lambda *g: sum(g) / n, *grads)
    mean_loss = sum(jnp.asarray(o.mean_loss, jnp.float32) for o in outs) / n
    finite = tree_all_finite(grad) & jnp.isfinite(mean_loss)
    metrics = {}
    for i, (out, m) in enumerate(zip(outs, est_metrics, strict=True)):
        prefix = metric_prefix(estimators, i)
        for k, v in m.items():
            if "||" in k:
                agg, name = k.split("||", 1)
                metrics[f"{agg}||{prefix}/{name}"] = v
            else:
                metrics[f"{prefix}/{k}"] = v
        metrics[f"{prefix}/meta_loss"] = out.mean_loss
        if n > 1:  # which estimator's estimate is largest (the one "mean" follows)
            metrics[f"{prefix}/grad_norm"] = tree_norm(out.grad)
    return grad, mean_loss, finite, metrics


def worker_compute(
    estimators: tuple,
    weights: WorkerWeights,
    states: tuple,
    key: jax.Array,
    datas: tuple,
    balance: str = "mean",
    frozen: PyTree | None = None,
) -> tuple[AggregatedGradient, tuple, dict]:
    """Every estimator's estimate for ``weights``, averaged (traced).

    Args:
      estimators: the gradient estimators (learnopt's traced convention).
      weights: ``theta``, its model state and the outer state.
      states: the estimators' states.
      key: randomness of this computation (folded with the outer iteration).
      datas: one entry per estimator, as its ``get_datas()`` returned it.
      balance: ``"mean"`` (the estimates averaged as they come) or ``"norm"`` (each
        scaled to unit global norm before the average, so that an estimator whose
        meta-loss moves most with theta, e.g. the log of a training loss falling
        towards 0, does not set the direction alone). Equalizing the tasks' gradient
        magnitudes is the aim of GradNorm (Chen et al., 2018, arXiv 1711.02257), here
        without learned weights. Not in the notes' library.
      frozen: with ``"norm"``, a tree of bools shaped like ``theta`` (the learner's
        frozen leaves, :func:`~learnopt.outer_trainers.outer_update.frozen_mask`),
        left out of each estimate's norm.

    Returns:
      ``(to_put, states, metrics)``: the :class:`AggregatedGradient`, the estimators'
      next states (re-initialized when the average is not finite) and the metrics
      (``"<estimator>/<name>"``; ``"<i>_<estimator>/<name>"`` for several estimators).
    """
    theta, outer_state = weights.theta, weights.outer_state
    n = len(estimators)
    keys = jax.random.split(jax.random.fold_in(key, outer_state.outer_iteration), n + 1)
    outs, est_metrics = [], []
    for i, (est, st, d) in enumerate(zip(estimators, states, datas, strict=True)):
        out, m = _estimate(est, theta, keys[i], st, d, outer_state)
        outs.append(out)
        est_metrics.append(m)
    grad, mean_loss, finite, metrics = _combine(estimators, outs, est_metrics, balance, frozen)
    new_states = tuple(o.unroll_state for o in outs)
    new_states = jax.lax.cond(
        finite,
        lambda: new_states,
        lambda: tree_cast_like(init_states(estimators, theta, keys[n], outer_state), new_states),
    )
    to_put = AggregatedGradient(
        theta_grads=grad, theta_model_state=weights.theta_model_state, mean_loss=mean_loss
    )
    return to_put, new_states, metrics


def host_worker_compute(
    estimators: tuple,
    weights: WorkerWeights,
    states: Sequence[PyTree],
    key: jax.Array,
    datas: Sequence[PyTree] | None,
    with_metrics: bool,
    balance: str = "mean",
    frozen: PyTree | None = None,
) -> tuple[AggregatedGradient, list, dict]:
    """:func:`worker_compute` on the host, for lists with library-convention estimators.

    Each estimator is called as the library calls it:
    ``compute_gradient_estimate(weights, key, state, with_summary=..., datas_list=...)``
    and, when the average is not finite, ``init_worker_state(weights, key)``.

    Args:
      estimators: the gradient estimators.
      weights: ``theta``, its model state and the outer state.
      states: the estimators' states.
      key: randomness of this computation (folded with the outer iteration).
      datas: optional batches, one entry per estimator (passed as ``datas_list``).
      with_metrics: passed to the estimators as ``with_summary``.
      balance, frozen: how the estimates are combined, as in :func:`worker_compute`.

    Returns:
      ``(to_put, states, metrics)`` as :func:`worker_compute`, ``states`` a list.
    """
    n = len(estimators)
    keys = jax.random.split(jax.random.fold_in(key, weights.outer_state.outer_iteration), n + 1)
    outs, est_metrics = [], []
    for i, (est, st) in enumerate(zip(estimators, states, strict=True)):
        kwargs = {"with_summary": with_metrics}
        if datas is not None:
            kwargs["datas_list"] = datas[i]
        out, m = est.compute_gradient_estimate(weights, keys[i], st, **kwargs)
        outs.append(out)
        est_metrics.append(m)
    grad, mean_loss, finite, metrics = _combine(estimators, outs, est_metrics, balance, frozen)
    new_states = [o.unroll_state for o in outs]
    if not bool(finite):
        k_init = jax.random.split(keys[n], n)
        new_states = [
            e.init_worker_state(weights, k) for e, k in zip(estimators, k_init, strict=True)
        ]
    to_put = AggregatedGradient(
        theta_grads=grad, theta_model_state=weights.theta_model_state, mean_loss=mean_loss
    )
    return to_put, new_states, metrics


def library_metrics(metrics: dict) -> dict:
    """learnopt metric names as the library's ``aggregation||name`` keys.

    Args:
      metrics: ``{name: value}``; names that already have an aggregation are kept.

    Returns:
      ``{"mean||name": value, ...}``.
    """
    return {k if "||" in k else f"mean||{k}": v for k, v in metrics.items()}
