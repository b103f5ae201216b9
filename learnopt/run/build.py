"""Objects from names: the tasks, learned optimizer, estimators and learner of a run.

Vocabulary, as everywhere: ``trunc_length`` is the number of inner steps one estimate
unrolls (the truncated trainers); ``total_length`` is the length of an inner run (the
truncation schedule's ``total_length``). A full-run estimator unrolls a whole run, so only
``total_length`` applies. Defaults come from :mod:`learnopt.run.config`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import jax

from learnopt import distributed
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_learner, lopt_truncated_step, truncation_schedule
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS, GradientEstimator
from learnopt.registry import UnknownNameError, unknown_name_message
from learnopt.run import config as run_config
from learnopt.run import settings as run_settings
from learnopt.tasks import base as tasks_base
from learnopt.tasks import suites
from learnopt.tasks.datasets import base as datasets_base

__all__ = [
    "build_task",
    "build_lopt",
    "build_learner",
    "make_estimator",
    "expand_families",
    "resolve_mesh",
    "META_OBJECTIVE_SETTINGS",
]

#: The settings of a run that choose its meta-objective (arguments of the truncated step,
#: see :mod:`learnopt.outer_trainers.meta_objective`); None: the truncated step's default.
META_OBJECTIVE_SETTINGS = (
    "meta_loss_split",
    "meta_loss_weighting",
    "meta_loss_window",
    "meta_loss_power",
    "meta_loss_transform",
)


def build_task(task: Any, data_dir: str | os.PathLike | None = None) -> Any:
    """A registered task or task family by name, or ``task`` itself.

    Args:
      task: a registered task or task family name, a ``Task`` or a ``TaskFamily``.
      data_dir: the TFDS data dir of a task given by name (default
        ``$LEARNOPT_DATA_DIR``).

    Returns:
      The ``Task`` or ``TaskFamily``.
    """
    if not isinstance(task, str):
        if not isinstance(task, tasks_base.Task | tasks_base.TaskFamily):
            raise TypeError(
                f"task must be a registered task name, a Task or a TaskFamily, got "
                f"{type(task).__name__}"
            )
        return task
    with datasets_base.using_data_dir(data_dir):
        if task not in tasks_base.TASKS and task in tasks_base.TASK_FAMILIES:
            return tasks_base.TASK_FAMILIES.get(task)
        try:
            return tasks_base.get_task(task)
        except KeyError as e:  # the registry's message names the closest matches
            raise ValueError(f"task: {e}") from None


def build_lopt(lopt: Any, config: dict[str, Any] | None = None) -> Any:
    """A registered learned optimizer by name (built with ``config``), or ``lopt`` itself.

    Args:
      lopt: a registered learned optimizer name or a ``LearnedOptimizer``.
      config: constructor arguments of a learned optimizer given by name.

    Returns:
      The ``LearnedOptimizer``.
    """
    if isinstance(lopt, str):
        try:
            return lopt_base.get_learned_optimizer(lopt, **(config or {}))
        except KeyError as e:
            raise ValueError(f"lopt: {e}") from None
        except TypeError as e:  # an unknown constructor argument
            raise ValueError(f"lopt_config: {lopt}: {e}") from None
    if config:
        raise ValueError("lopt_config applies to a learned optimizer given by name, not an object")
    if not isinstance(lopt, lopt_base.LearnedOptimizer):
        raise TypeError(
            f"lopt must be a registered learned optimizer name or a LearnedOptimizer, got "
            f"{type(lopt).__name__}"
        )
    return lopt


def expand_families(names: Sequence[str]) -> list[str]:
    """Family (or task) names, with a registered mixture's name replaced by its buckets.

    ``["meta-train"]`` becomes the four ``MetaTrain_*`` buckets of
    :mod:`learnopt.tasks.suites`. Duplicates are an error (each name is one estimator).

    Args:
      names: registered task family or task names, or ``"meta-train"``.

    Returns:
      The family names, one gradient estimator each.
    """
    if isinstance(names, str) or not isinstance(names, Sequence) or not names:
        raise TypeError(f"families must be a non-empty list of names, got {names!r}")
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"families must be names (strings), got {name!r}")
        if name == "meta-train":
            out.extend(suites.META_TRAIN_BUCKETS)
        elif name in tasks_base.TASK_FAMILIES or name in tasks_base.TASKS:
            out.append(name)
        else:
            # The registry's message names the closest matches.
            try:
                tasks_base.TASK_FAMILIES.constructor(name)
            except KeyError as e:
                raise ValueError(f"families: {e}") from None
    dup = sorted({n for n in out if out.count(n) > 1})
    if dup:
        raise ValueError(f"families: each family is one estimator; {dup} given twice")
    return out


def make_estimator(
    name: str,
    task_family: Any,
    lopt: lopt_base.LearnedOptimizer,
    *,
    trunc_length: int | None = None,
    total_length: int | None = None,
    num_tasks: int | None = None,
    std: float = run_config.DEFAULT_STD,
    meta_loss_split: str | None = None,
    meta_loss_weighting: str | None = None,
    meta_loss_window: int | float | None = None,
    meta_loss_power: float | None = None,
    meta_loss_transform: str | None = None,
) -> GradientEstimator:
    """Builds the estimator of trainer ``name`` on a population of ``num_tasks`` inner runs.

    Args:
      name: a trainer name of :data:`learnopt.run.config.TRAINERS` (``"pes"``, ...).
      task_family: a task or task family.
      lopt: the learned optimizer.
      trunc_length: inner steps per estimate of the truncated estimators (``tbptt``,
        ``tes``, ``pes``, ``nres``; default 4); must be ``<= total_length``. Passing it to
        a full-run estimator is an error.
      total_length: length of every inner run (``ConstantTruncationSchedule``): the
        horizon of ``full_grad`` / ``full_es`` (default 4); the truncated estimators' runs
        start staggered in ``[0, total_length)`` and restart when they reach it (default
        200).
      num_tasks: inner runs (ES: antithetic pairs); default 1 for ``full_grad``, else 8.
      std: ES perturbation standard deviation.
      meta_loss_split: what a step's meta-loss is measured on: None, the training loss of
        the step (params before its update); ``"same_data"``, the updated params on the
        same batch; a split name (``"outer_valid"``, ...), the updated params on a batch
        of that split.
      meta_loss_weighting: the weight of a step's meta-loss by its position in its run:
        None or ``"uniform"`` (all alike), ``"last_window"`` (the last
        ``meta_loss_window`` steps) or ``"late"`` (growing as ``(t / T) **
        meta_loss_power``); weights have mean 1 over a run (see
        :mod:`learnopt.outer_trainers.meta_objective`).
      meta_loss_window: the ``"last_window"`` window: a number of steps (int) or a
        fraction of the run in ``(0, 1]`` (float).
      meta_loss_power: the ``"late"`` exponent ``p >= 0`` (None: 1, linear).
      meta_loss_transform: None (the normalized value as it is) or ``"log"`` (the log
        of the raw loss, floored at 1e-8, so that tasks of different loss scales weigh
        alike).

    Returns:
      The gradient estimator.
    """
    if name not in run_config.TRAINERS:
        raise UnknownNameError(
            unknown_name_message("trainer", name, run_config.TRAINERS, listing="trainers")
        )
    cls = ESTIMATORS.constructor(run_config.TRAINERS[name][0])
    if name in run_config.FULL_TRAINERS and trunc_length is not None:
        raise ValueError(
            f"{name} unrolls whole inner runs: set their length with total_length, not "
            f"trunc_length (got trunc_length={trunc_length})"
        )
    trunc_length, total_length, num_tasks = run_config.lengths(
        name, trunc_length, total_length, num_tasks
    )
    full = name in run_config.FULL_TRAINERS
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        task_family,
        lopt,
        truncation_schedule.ConstantTruncationSchedule(total_length),
        num_tasks,
        meta_loss_split=meta_loss_split,
        random_initial_iteration_offset=0 if full else total_length,
        meta_loss_weighting=meta_loss_weighting,
        meta_loss_window=meta_loss_window,
        meta_loss_power=1.0 if meta_loss_power is None else meta_loss_power,
        meta_loss_transform=meta_loss_transform,
    )
    if name == "full_grad":
        return cls(step)
    if name == "full_es":
        return cls(step, std=std)
    if name == "tbptt":
        return cls(step, trunc_length=trunc_length)
    return cls(step, trunc_length=trunc_length, std=std)


def resolve_mesh(mesh: Any) -> Any:
    """The devices a population is split over.

    Args:
      mesh: None (one device; in a multi-process run every device of every process),
        ``"all"`` (every device of every process) or a ``jax.sharding.Mesh``.

    Returns:
      A ``jax.sharding.Mesh`` or None.
    """
    if mesh is None:
        return distributed.population_mesh() if jax.process_count() > 1 else None
    if isinstance(mesh, str):
        if mesh != "all":
            raise ValueError(f"mesh must be None, 'all' or a jax.sharding.Mesh, got {mesh!r}")
        return distributed.population_mesh()
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"mesh must be None, 'all' or a jax.sharding.Mesh, got {mesh!r}")
    return mesh


def build_learner(
    *,
    task: Any = run_config.DEFAULT_TASK,
    lopt: Any = run_config.DEFAULT_LOPT,
    trainer: str = run_config.DEFAULT_TRAINER,
    trunc_length: int | None = None,
    total_length: int | None = None,
    num_tasks: int | None = None,
    std: float = run_config.DEFAULT_STD,
    meta_loss_split: str | None = None,
    meta_loss_weighting: str | None = None,
    meta_loss_window: int | float | None = None,
    meta_loss_power: float | None = None,
    meta_loss_transform: str | None = None,
    outer_lr: float = run_config.DEFAULT_OUTER_LR,
    max_grad_norm: float | None = None,
    steps: int | None = None,
    theta_opt: Any = None,
    data_dir: str | os.PathLike | None = None,
    mesh: Any = None,
) -> gradient_learner.SingleMachineGradientLearner:
    """The :class:`SingleMachineGradientLearner` that :func:`learnopt.train.meta_train`
    would build.

    Args:
      task: a task or task family (name or object), or a list of them (one estimator
        each, their estimates averaged).
      lopt: a learned optimizer (name or object).
      trainer: a trainer name of :data:`learnopt.run.config.TRAINERS`.
      trunc_length: inner steps per estimate of the truncated trainers (``tbptt``,
        ``tes``, ``pes``, ``nres``; default 4); must be ``<= total_length``; an error
        with a full-run trainer.
      total_length: length of every inner run: the horizon of ``full_grad`` /
        ``full_es`` (default 4); the truncated trainers' runs start staggered in
        ``[0, total_length)`` and restart when they reach it (default 200).
      num_tasks: inner runs per estimator (ES: antithetic pairs); default 1 for
        ``full_grad``, else 8.
      std: ES perturbation standard deviation.
      meta_loss_split: what a step's meta-loss is measured on: None, the training loss of
        the step (params before its update); ``"same_data"``, the updated params on the
        same batch; a split name (``"outer_valid"``, ...), the updated params on a batch
        of that split.
      meta_loss_weighting: the weight of a step's meta-loss by its position in its run:
        None or ``"uniform"`` (all alike), ``"last_window"`` (the last
        ``meta_loss_window`` steps) or ``"late"`` (growing as ``(t / T) **
        meta_loss_power``); weights have mean 1 over a run (see
        :mod:`learnopt.outer_trainers.meta_objective`).
      meta_loss_window: the ``"last_window"`` window: a number of steps (int) or a
        fraction of the run in ``(0, 1]`` (float).
      meta_loss_power: the ``"late"`` exponent ``p >= 0`` (None: 1, linear).
      meta_loss_transform: None (the normalized value as it is) or ``"log"`` (the log
        of the raw loss, floored at 1e-8, so that tasks of different loss scales weigh
        alike).
      outer_lr: the learning rate of the outer ``opt_base.Adam`` (unless ``theta_opt``).
      max_grad_norm: clip the meta-gradient to this global norm (None: no clipping).
      steps: the number of meta-steps (for outer learning-rate schedules).
      theta_opt: an outer optimizer instead of ``Adam(outer_lr)``.
      data_dir: the data dir of tasks given by name.
      mesh: where the population runs: None (one device; in a multi-process run every
        device of every process), ``"all"`` (every device of every process) or a
        ``jax.sharding.Mesh`` (see :func:`resolve_mesh`).

    Returns:
      The learner.
    """
    check = run_settings.check_setting
    trainer = check("trainer", trainer)
    trunc_length, total_length, num_tasks = run_config.lengths(
        trainer,
        check("trunc_length", trunc_length),
        check("total_length", total_length),
        check("num_tasks", num_tasks),
    )
    std = check("std", std)
    tasks = list(task) if isinstance(task, list | tuple) else [task]
    if not tasks:
        raise ValueError("task: an empty list of tasks")
    tasks, lopt = [build_task(t, data_dir) for t in tasks], build_lopt(lopt)
    estimators = [
        make_estimator(
            trainer,
            t,
            lopt,
            num_tasks=num_tasks,
            trunc_length=trunc_length,
            total_length=total_length,
            std=std,
            meta_loss_split=meta_loss_split,
            meta_loss_weighting=meta_loss_weighting,
            meta_loss_window=meta_loss_window,
            meta_loss_power=check("meta_loss_power", meta_loss_power),
            meta_loss_transform=meta_loss_transform,
        )
        for t in tasks
    ]
    mesh = resolve_mesh(mesh)
    for est in estimators if mesh is not None else ():
        if getattr(est, "stack_antithetic_samples", False):
            # Split over devices, a stacked +/- population is resharded at every step
            # (dozens of collectives); unstacked, each device keeps its pairs. Same maths.
            est.stack_antithetic_samples = False
    if theta_opt is None:
        theta_opt = opt_base.Adam(check("outer_lr", outer_lr))
    return gradient_learner.SingleMachineGradientLearner(
        lopt,
        estimators,
        theta_opt,
        num_steps=steps,
        max_grad_norm=check("max_grad_norm", max_grad_norm),
        mesh=mesh,
    )
