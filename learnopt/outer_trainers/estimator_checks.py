"""Checks of a gradient estimator's settings, made when it is built.

An estimator's ``trunc_length`` (and the library's ``unroll_length``, ``steps_per_jit``)
must agree with each other and fit the truncated step's truncation schedule, and a
weighted meta-loss needs a loss type that reads the weights; each check raises a
``ValueError`` naming the estimator and the setting.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "steps_per_estimate",
    "check_steps_per_jit",
    "check_fits_schedule",
    "check_weighted_loss_type",
]


def steps_per_estimate(
    who: str, trunc_length: int | None, unroll_length: int | None, default: int
) -> int:
    """``trunc_length``, also accepted as ``unroll_length`` (the library's name in TES/TBPTT).

    Args:
      who: the estimator's name, for messages.
      trunc_length: inner steps per estimate, or None.
      unroll_length: the same under the library's name, or None.
      default: the value when both are None.

    Returns:
      The number of inner steps per estimate (an int >= 1).
    """
    if trunc_length is not None and unroll_length is not None and trunc_length != unroll_length:
        raise ValueError(
            f"{who}: trunc_length={trunc_length} and unroll_length={unroll_length} name the "
            "same thing (inner steps per estimate); pass one"
        )
    value = trunc_length if trunc_length is not None else unroll_length
    value = default if value is None else value
    if int(value) != value or int(value) < 1:
        raise ValueError(
            f"{who}: trunc_length (inner steps per estimate) must be an integer >= 1, got {value}"
        )
    return int(value)


def check_steps_per_jit(who: str, steps_per_jit: int | None, trunc_length: int | None) -> None:
    """Validates the library's ``steps_per_jit`` (learnopt compiles a whole estimate anyway).

    Args:
      who: the estimator's name, for messages.
      steps_per_jit: None or an integer >= 1.
      trunc_length: if given, it must be a multiple of ``steps_per_jit``.

    Returns:
      None.
    """
    if steps_per_jit is None:
        return
    if int(steps_per_jit) != steps_per_jit or int(steps_per_jit) < 1:
        raise ValueError(
            f"{who}: steps_per_jit must be None or an integer >= 1, got {steps_per_jit}"
        )
    if trunc_length is not None and trunc_length % int(steps_per_jit):
        raise ValueError(
            f"{who}: trunc_length={trunc_length} must be a multiple of steps_per_jit="
            f"{steps_per_jit}"
        )


def check_fits_schedule(who: str, truncated_step: Any, trunc_length: int) -> None:
    """Raises ValueError if ``trunc_length`` is longer than every inner run can be.

    A truncated estimator unrolls ``trunc_length`` steps of runs whose lengths come from
    the truncated step's schedule; a run ends only at the end of a truncation, so a
    truncation longer than the schedule's longest run (its ``max_length``) would train
    every run past its length. Schedules without a static bound are not checked.

    Args:
      who: the estimator's name, for the message.
      truncated_step: the estimator's truncated step (its ``trunc_sched`` is checked).
      trunc_length: inner steps per estimate.

    Returns:
      None.
    """
    sched = getattr(truncated_step, "trunc_sched", None)
    try:
        longest = None if sched is None else sched.max_length
    except (AttributeError, NotImplementedError):
        longest = None
    if longest is not None and int(longest) < trunc_length:
        raise ValueError(
            f"{who}: trunc_length={trunc_length} (inner steps per estimate) is longer than "
            f"the inner runs of {sched!r} (at most {longest} steps); use trunc_length <= "
            f"{longest} or longer runs"
        )


def check_weighted_loss_type(who: str, truncated_step: Any, loss_type: str) -> None:
    """Raises ValueError if ``loss_type`` cannot take the truncated step's step weights.

    Args:
      who: the estimator's name, for the message.
      truncated_step: the estimator's truncated step (its ``meta_loss_weighting``).
      loss_type: the estimator's ``loss_type``.

    Returns:
      None.
    """
    weighting = getattr(truncated_step, "meta_loss_weighting", None)
    if weighting is not None and loss_type != "avg":
        raise ValueError(
            f"{who}: loss_type={loss_type!r} does not weight steps; the truncated step's "
            f"meta_loss_weighting={weighting!r} needs loss_type='avg' (the weighted mean over "
            "the run)"
        )
