"""Zero-initialized heads added to a Celo-Adam theta: learnopt's meta-trainable extensions
(and the checks of learnopt's Celo-Adam options, :func:`check_options`).

Each function returns a copy of a released (or already extended) Celo-Adam theta with
one more head at zero, so :class:`~learnopt.learned_optimizers.celo_adam.CeloAdam` with
the matching option takes the theta's steps until the head is meta-trained. They can
also be imported from :mod:`learnopt.learned_optimizers.celo_adam`.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.learned_optimizers import width_aware
from learnopt.learned_optimizers.blocks import loss_timescales

PyTree = Any

__all__ = [
    "check_options",
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


def check_options(args: dict[str, Any]) -> tuple[str, ...] | None:
    """Checks :class:`~learnopt.learned_optimizers.celo_adam.CeloAdam`'s arguments.

    Args:
      args: the constructor's arguments by name (its ``locals()``).

    Returns:
      ``weight_decay_roles`` as a tuple (None if not given).

    Raises:
      ValueError: as the constructor documents, naming the argument.
    """
    for arg in ("lstm_hidden_size", "default_num_steps"):
        if int(args[arg]) < 1:
            raise ValueError(f"CeloAdam: {arg} must be >= 1, got {args[arg]}")
    for arg in ("weight_decay", "step_adaptation", "step_adaptation_bound"):
        if not (float(args[arg]) >= 0.0 and math.isfinite(args[arg])):
            raise ValueError(f"CeloAdam: {arg} must be >= 0 and finite, got {args[arg]}")
    mult = args["kernel_step_mult"]
    if not (float(mult) > 0.0 and math.isfinite(mult)):
        raise ValueError(f"CeloAdam: kernel_step_mult must be > 0, got {mult}")
    smoothing = args["loss_smoothing"]
    if not 0.0 <= float(smoothing) < 1.0:
        raise ValueError(f"CeloAdam: loss_smoothing must be in [0, 1), got {smoothing}")
    roles = args["weight_decay_roles"]
    shaping = args["weight_decay_by_progress"] or args["weight_decay_head"] or roles is not None
    if shaping and float(args["weight_decay"]) == 0.0:
        raise ValueError(
            "CeloAdam: weight_decay_by_progress, weight_decay_head and "
            "weight_decay_roles shape a weight decay: give weight_decay > 0 as well"
        )
    if roles is not None:
        if isinstance(roles, str) or not roles:
            raise ValueError(
                "CeloAdam: weight_decay_roles must be a non-empty list of roles from "
                f"{width_aware.TENSOR_ROLES}, got {roles!r}"
            )
        unknown = [r for r in roles if r not in width_aware.TENSOR_ROLES]
        if unknown:
            raise ValueError(
                f"CeloAdam: weight_decay_roles {unknown} are not roles; roles are "
                f"{width_aware.TENSOR_ROLES}"
            )
        roles = tuple(roles)
    decays = {k: args[k] for k in ("initial_momentum_decays", "initial_rms_decays")}
    if not all(decays.values()):
        raise ValueError(
            "CeloAdam: initial_momentum_decays and initial_rms_decays need a value each"
        )
    for arg, values in decays.items():
        if not all(0.0 <= float(b) < 1.0 for b in values):
            # b = 1 makes the bias correction 1 - b^t zero: every step would be NaN.
            raise ValueError(f"CeloAdam: {arg} must each be in [0, 1), got {tuple(values)}")
    return roles
