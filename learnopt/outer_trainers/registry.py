"""Gradient estimators by name, as the command line and benchmarks select them.

Vocabulary: ``trunc_length`` is the number of inner steps one estimate unrolls (the
truncated estimators); ``total_length`` is the length of an inner run (the truncation
schedule's ``total_length``). For the full-run estimators an estimate unrolls a whole
run, so only ``total_length`` applies.
"""

from __future__ import annotations

from typing import Any

from learnopt.learned_optimizers import base as lopt_base
from learnopt.outer_trainers import (
    full_es,
    full_grad,
    lopt_truncated_step,
    noise_reuse_es,
    truncated_es,
    truncated_grad,
    truncated_pes,
    truncation_schedule,
)
from learnopt.outer_trainers.gradient_learner import GradientEstimator
from learnopt.registry import Registry

__all__ = [
    "ESTIMATORS",
    "FULL_RUN",
    "DEFAULT_TRUNC_LENGTH",
    "DEFAULT_TOTAL_LENGTH",
    "make_estimator",
]

#: The names the command line's ``--trainer`` takes.
ESTIMATORS: Registry[GradientEstimator] = Registry("estimator")
for _name, _cls in (
    ("full_grad", full_grad.FullGrad),
    ("tbptt", truncated_grad.TruncatedGrad),
    ("full_es", full_es.FullES),
    ("tes", truncated_es.TruncatedES),
    ("pes", truncated_pes.TruncatedPES),
    ("nres", noise_reuse_es.NoiseReuseES),
):
    ESTIMATORS.register(_cls, name=_name)
#: Estimators that unroll whole fresh inner runs per estimate.
FULL_RUN = ("full_grad", "full_es")
#: ``make_estimator``'s defaults: 4 inner steps per estimate for the truncated
#: estimators; inner runs of 4 steps for the full-run ones (the notes' walkthrough) and
#: of 200 steps for the truncated ones.
DEFAULT_TRUNC_LENGTH = 4
DEFAULT_TOTAL_LENGTH = {"full": 4, "truncated": 200}


def make_estimator(
    name: str,
    task_family: Any,
    lopt: lopt_base.LearnedOptimizer,
    *,
    trunc_length: int | None = None,
    total_length: int | None = None,
    num_tasks: int | None = None,
    std: float = 0.01,
    meta_loss_split: str | None = None,
) -> GradientEstimator:
    """Builds estimator ``name`` on a population of ``num_tasks`` inner runs.

    Args:
      name: a registered estimator (``ESTIMATORS``).
      task_family: a task or task family.
      lopt: the learned optimizer.
      trunc_length: inner steps per estimate of the truncated estimators (``tbptt``,
        ``tes``, ``pes``, ``nres``; default 4); must be ``<= total_length``. The full-run
        estimators unroll whole runs: passing it to them is an error.
      total_length: length of every inner run (``ConstantTruncationSchedule``): the
        horizon of ``full_grad`` / ``full_es`` (default 4); for the truncated estimators
        the runs start staggered in ``[0, total_length)`` and restart when they reach it
        (default 200).
      num_tasks: inner runs (ES: antithetic pairs); default 1 for ``full_grad``, else 8.
      std: ES perturbation standard deviation.
      meta_loss_split: see ``VectorizedLOptTruncatedStep``.
    """
    cls = ESTIMATORS.constructor(name)
    if num_tasks is None:
        num_tasks = 1 if name == "full_grad" else 8
    full = name in FULL_RUN
    if full and trunc_length is not None:
        raise ValueError(
            f"{name} unrolls whole inner runs: set their length with total_length, not "
            f"trunc_length (got trunc_length={trunc_length})"
        )
    if total_length is None:
        total_length = DEFAULT_TOTAL_LENGTH["full" if full else "truncated"]
    if trunc_length is None:
        trunc_length = DEFAULT_TRUNC_LENGTH
    if not full and trunc_length > total_length:
        raise ValueError(
            f"trunc_length ({trunc_length}, steps per estimate) must be <= total_length "
            f"({total_length}, the length of an inner run)"
        )
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        task_family,
        lopt,
        truncation_schedule.ConstantTruncationSchedule(total_length),
        num_tasks,
        meta_loss_split=meta_loss_split,
        random_initial_iteration_offset=0 if full else total_length,
    )
    if name == "full_grad":
        return cls(step)
    if name == "full_es":
        return cls(step, std=std)
    if name == "tbptt":
        return cls(step, trunc_length=trunc_length)
    return cls(step, trunc_length=trunc_length, std=std)
