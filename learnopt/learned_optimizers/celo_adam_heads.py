"""Zero-initialized heads added to a Celo-Adam theta: learnopt's meta-trainable extensions.

Each function returns a copy of a released (or already extended) Celo-Adam theta with
one more head at zero, so :class:`~learnopt.learned_optimizers.celo_adam.CeloAdam` with
the matching option takes the theta's steps until the head is meta-trained. They can
also be imported from :mod:`learnopt.learned_optimizers.celo_adam`.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers.blocks import loss_timescales

PyTree = Any

__all__ = [
    "with_regime_head",
    "with_schedule_head",
    "with_weight_decay_head",
    "with_rms_decay_head",
]


def _celo_adam_rnn(theta: PyTree, caller: str, head: str, what: str) -> dict:
    rnn = dict(theta.get("rnn_params", {})) if isinstance(theta, dict) else None
    if rnn is None or "step_size" not in rnn:
        raise ValueError(f"{caller}: theta is not a Celo-Adam theta (no rnn_params/step_size)")
    if head in rnn:
        raise ValueError(f"{caller}: theta already has a {what}")
    return rnn


def with_regime_head(theta: PyTree) -> PyTree:
    """A Celo-Adam theta extended by a zero regime head (``CeloAdam(regime_head=True)``).

    The optimizer then takes the same steps as ``theta`` without the head until the
    head is meta-trained (``learnopt meta-train --init-theta`` a file saved from it).

    Args:
      theta: a ``CeloAdam()`` theta (e.g. ``pretrained.load("CeloAdam").theta``).

    Returns:
      A copy with ``theta["rnn_params"]["regime_step_size"]`` at zero.

    Raises:
      ValueError: ``theta`` already has a regime head, or is not a Celo-Adam theta.
    """
    rnn = _celo_adam_rnn(theta, "with_regime_head", "regime_step_size", "regime head")
    rnn["regime_step_size"] = jax.tree_util.tree_map(jnp.zeros_like, rnn["step_size"])
    return {**theta, "rnn_params": rnn}


def with_schedule_head(theta: PyTree) -> PyTree:
    """A Celo-Adam theta extended by a zero schedule head (``CeloAdam(schedule_head=True)``).

    Args:
      theta: a Celo-Adam theta (with or without a regime head).

    Returns:
      A copy with ``theta["rnn_params"]["schedule_step_size"]`` (``w [9, 1]``, ``b [1]``)
      at zero: the same steps as ``theta`` until the head is meta-trained.

    Raises:
      ValueError: ``theta`` already has a schedule head, or is not a Celo-Adam theta.
    """
    rnn = _celo_adam_rnn(theta, "with_schedule_head", "schedule_step_size", "schedule head")
    dtype = jnp.asarray(rnn["step_size"]["b"]).dtype
    num_tau = len(loss_timescales._FRACTION_TIMESCALES)
    rnn["schedule_step_size"] = {
        "w": jnp.zeros((num_tau, 1), dtype),
        "b": jnp.zeros((1,), dtype),
    }
    return {**theta, "rnn_params": rnn}


def with_weight_decay_head(theta: PyTree) -> PyTree:
    """A Celo-Adam theta extended by a zero weight-decay scale (``weight_decay_head=True``).

    Args:
      theta: a Celo-Adam theta (with or without the other heads).

    Returns:
      A copy with ``theta["rnn_params"]["weight_decay_scale"]["b"]`` (one value) at zero:
      the decay is ``CeloAdam(weight_decay=...)``'s until the scale is meta-trained.

    Raises:
      ValueError: ``theta`` already has the scale, or is not a Celo-Adam theta.
    """
    return _with_scalar(theta, "with_weight_decay_head", "weight_decay_scale", "weight-decay scale")


def with_rms_decay_head(theta: PyTree) -> PyTree:
    """A Celo-Adam theta extended by a zero second-moment decay scale (``rms_decay_head``).

    Args:
      theta: a Celo-Adam theta (with or without the other heads).

    Returns:
      A copy with ``theta["rnn_params"]["rms_decay_scale"]["b"]`` (one value) at zero:
      Adam's ``b2`` is the configured one until the scale is meta-trained.

    Raises:
      ValueError: ``theta`` already has the scale, or is not a Celo-Adam theta.
    """
    return _with_scalar(
        theta, "with_rms_decay_head", "rms_decay_scale", "second-moment decay scale"
    )


def _with_scalar(theta: PyTree, caller: str, head: str, what: str) -> PyTree:
    """``theta`` with ``rnn_params[head] = {"b": [0.0]}`` in the step readout's dtype."""
    rnn = _celo_adam_rnn(theta, caller, head, what)
    rnn[head] = {"b": jnp.zeros((1,), jnp.asarray(rnn["step_size"]["b"]).dtype)}
    return {**theta, "rnn_params": rnn}
