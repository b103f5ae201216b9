"""Gradient estimators by name, as the command line and benchmarks select them."""

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

__all__ = ["ESTIMATORS", "FULL_RUN", "make_estimator"]

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
#: Estimators that unroll whole inner runs of length K from a fresh init.
FULL_RUN = ("full_grad", "full_es")


def make_estimator(
    name: str,
    task_family: Any,
    lopt: lopt_base.LearnedOptimizer,
    *,
    unroll: int = 4,
    num_tasks: int | None = None,
    trunc_length: int = 200,
    std: float = 0.01,
    meta_loss_split: str | None = None,
) -> GradientEstimator:
    """Builds estimator ``name`` on a population of ``num_tasks`` inner runs.

    Full-run estimators (``full_grad``, ``full_es``) unroll fresh runs of ``unroll``
    steps; the truncated ones unroll ``unroll`` steps of runs lasting ``trunc_length``
    steps that start staggered in ``[0, trunc_length)``. ``num_tasks`` defaults to 1 for
    ``full_grad`` and 8 (antithetic pairs or runs) for the others.
    """
    cls = ESTIMATORS.constructor(name)
    if num_tasks is None:
        num_tasks = 1 if name == "full_grad" else 8
    if name in FULL_RUN:
        sched = truncation_schedule.ConstantTruncationSchedule(unroll)
        offset = 0
    else:
        if trunc_length < unroll:
            raise ValueError(f"trunc_length ({trunc_length}) must be >= unroll ({unroll})")
        sched = truncation_schedule.ConstantTruncationSchedule(trunc_length)
        offset = trunc_length
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        task_family,
        lopt,
        sched,
        num_tasks,
        random_initial_iteration_offset=offset,
        meta_loss_split=meta_loss_split,
    )
    if name == "full_grad":
        return cls(step)
    if name == "full_es":
        return cls(step, std=std)
    if name == "tbptt":
        return cls(step, unroll_length=unroll)
    return cls(step, unroll_length=unroll, std=std)
