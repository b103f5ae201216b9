"""Objects from names: the tasks, learned optimizer, estimators and learner of a run.

Vocabulary, as everywhere: ``trunc_length`` is the number of inner steps one estimate
unrolls (the truncated trainers); ``total_length`` is the length of an inner run (the
truncation schedule's ``total_length``). A full-run estimator unrolls a whole run, so only
``total_length`` applies. Defaults come from :mod:`learnopt.run.config`; each trainer's
estimator is built as its entry of :data:`learnopt.run.trainers.SPECS` says.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from typing import Any

import jax

from learnopt import distributed
from learnopt.learned_optimizers import base as lopt_base
from learnopt.optimizers import base as opt_base
from learnopt.outer_trainers import gradient_learner, lopt_truncated_step, truncation_schedule
from learnopt.outer_trainers.gradient_estimator import ESTIMATORS, GradientEstimator
from learnopt.run import config as run_config
from learnopt.run import settings as run_settings
from learnopt.run import trainers
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
    "initial_theta",
    "frozen_keys",
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


def initial_theta(lopt: Any, init_theta: str | os.PathLike | None) -> Any:
    """The theta file a run starts from, checked to fit its learned optimizer.

    Args:
      lopt: the run's ``LearnedOptimizer``.
      init_theta: a theta file or a shipped entry's name (see
        :func:`learnopt.pretrained.find`), or None.

    Returns:
      The file's ``Path``, or None.

    Raises:
      ValueError: no such file or entry, or a theta that does not fit ``lopt`` (the
        message names the file and the mismatching entries). A file meta-trained with
        another configuration of the same architecture gives a ``UserWarning``.
    """
    if init_theta is None:
        return None
    from learnopt import pretrained
    from learnopt.learned_optimizers import theta_files

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            path = pretrained.find(init_theta)
            theta_files.load(path, lopt=lopt)
        except (OSError, ValueError) as e:
            raise ValueError(f"init_theta: {e}") from None
    for w in caught:  # said only for a theta that fits: another configuration's values
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return path


def frozen_keys(lopt: Any, freeze: Sequence[str] | None) -> tuple[str, ...] | None:
    """The theta keys that ``freeze`` names: keys, or groups of ``lopt.freeze_groups()``.

    Args:
      lopt: the run's ``LearnedOptimizer``.
      freeze: theta keys (``"rnn_params"``, ``"ff_mod_stack/0"``) or group names
        (``"phase2"``), or None.

    Returns:
      The keys, for the learner's ``frozen_keys``; None when nothing is frozen.

    Raises:
      ValueError: a name that is neither a key of theta nor a group (the message lists
        both), or names that freeze all of theta (nothing would be meta-trained).
    """
    if not freeze:
        return None
    from learnopt.outer_trainers.outer_update import frozen_mask

    groups = lopt.freeze_groups() if isinstance(lopt, lopt_base.LearnedOptimizer) else {}
    keys = tuple(k for name in freeze for k in groups.get(name, (name,)))
    try:
        mask = frozen_mask(jax.eval_shape(lopt.init, jax.random.PRNGKey(0)), keys)
    except ValueError as e:
        named = f"; named groups of {lopt.name}: {', '.join(groups)}" if groups else ""
        raise ValueError(f"freeze: {str(e).removeprefix('frozen_keys: ')}{named}") from None
    if all(jax.tree_util.tree_leaves(mask)):
        raise ValueError(
            f"freeze: {list(freeze)} freezes all of theta: nothing would be meta-trained"
        )
    return keys


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

    The settings are the run's of the same names: :class:`~learnopt.run.config.RunConfig`
    says what each is and its default.

    Args:
      name: a trainer name of :data:`learnopt.run.trainers.SPECS` (``"pes"``, ...).
      task_family: a task or task family.
      lopt: the learned optimizer.
      trunc_length, total_length, num_tasks: inner steps per estimate of a truncated
        trainer (``<= total_length``; an error with a full-run one), the length of every
        inner run, and the inner runs (ES: antithetic pairs); None: their defaults.
      std: ES perturbation standard deviation.
      meta_loss_split, meta_loss_weighting, meta_loss_window, meta_loss_power: the
        meta-objective; None: the truncated step's defaults.
      meta_loss_transform: None, or ``"log"`` (the log of the raw loss).

    Returns:
      The gradient estimator.
    """
    trainers.SPECS[name]  # an unknown name: a KeyError that names the closest ones
    settings = _resolved(
        trainer=name,
        trunc_length=trunc_length,
        total_length=total_length,
        num_tasks=num_tasks,
        std=std,
        meta_loss_split=meta_loss_split,
        meta_loss_weighting=meta_loss_weighting,
        meta_loss_window=meta_loss_window,
        meta_loss_power=meta_loss_power,
        meta_loss_transform=meta_loss_transform,
    )
    return _estimator(settings, task_family, lopt)


def _resolved(
    trainer: str,
    trunc_length: int | None,
    total_length: int | None,
    num_tasks: int | None,
    **others: Any,
) -> run_config.RunConfig:
    """Settings given as keywords, with the trainer's lengths and population filled in."""
    trunc, total, num = run_config.lengths(trainer, trunc_length, total_length, num_tasks)
    return run_config.RunConfig(
        trainer=trainer, trunc_length=trunc, total_length=total, num_tasks=num, **others
    )


def _estimator(settings: run_config.RunConfig, task_family: Any, lopt: Any) -> GradientEstimator:
    """The estimator of ``settings.trainer`` on ``task_family``, from resolved settings."""
    spec = trainers.SPECS[settings.trainer]
    power = settings.meta_loss_power
    step = lopt_truncated_step.VectorizedLOptTruncatedStep(
        task_family,
        lopt,
        truncation_schedule.ConstantTruncationSchedule(settings.total_length),
        settings.num_tasks,
        meta_loss_split=settings.meta_loss_split,
        random_initial_iteration_offset=0 if spec.full else settings.total_length,
        meta_loss_weighting=settings.meta_loss_weighting,
        meta_loss_window=settings.meta_loss_window,
        meta_loss_power=1.0 if power is None else power,
        meta_loss_transform=settings.meta_loss_transform,
    )
    return spec.build(settings, step, ESTIMATORS.constructor(spec.estimator))


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
    family_balance: str | None = None,
    steps: int | None = None,
    init_theta: str | os.PathLike | None = None,
    freeze: Sequence[str] | None = None,
    theta_opt: Any = None,
    data_dir: str | os.PathLike | None = None,
    mesh: Any = None,
    settings: run_config.RunConfig | None = None,
) -> gradient_learner.SingleMachineGradientLearner:
    """The :class:`SingleMachineGradientLearner` that :func:`learnopt.train.meta_train`
    would build.

    Long (over 80 lines) for its docstring: the body is 41 lines; every setting of a
    run is an argument, documented here.

    Args:
      task: a task or task family (name or object), or a list of them (one estimator
        each, their estimates averaged).
      lopt: a learned optimizer (name or object).
      trainer: a trainer name of :data:`learnopt.run.trainers.SPECS`.
      trunc_length, total_length, num_tasks, std: the estimators' settings, which
        :func:`make_estimator` documents.
      meta_loss_split, meta_loss_weighting, meta_loss_window, meta_loss_power: the
        meta-objective, which :func:`make_estimator` documents.
      meta_loss_transform: None, or ``"log"`` (the log of the raw loss).
      outer_lr: the learning rate of the outer ``opt_base.Adam`` (unless ``theta_opt``).
      max_grad_norm: clip the meta-gradient to this global norm (None: no clipping).
      family_balance: ``"mean"`` (None: the default) or ``"norm"``: how the tasks'
        estimates are combined (``SingleMachineGradientLearner``'s ``balance``).
      steps: the number of meta-steps (for outer learning-rate schedules).
      init_theta: start from this theta file or shipped entry (:func:`initial_theta`)
        instead of ``lopt.init``.
      freeze: theta keys or named groups kept fixed (:func:`frozen_keys`).
      theta_opt: an outer optimizer instead of ``Adam(outer_lr)``.
      data_dir: the data dir of tasks given by name.
      mesh: where the population runs: None (one device; in a multi-process run every
        device of every process), ``"all"`` (every device of every process) or a
        ``jax.sharding.Mesh`` (see :func:`resolve_mesh`).
      settings: the run's resolved settings (a ``RunConfig`` with every setting filled
        in, as :func:`learnopt.train.meta_train` resolves them), read instead of the
        keywords from ``trainer`` to ``freeze`` and ``data_dir``.

    Returns:
      The learner.
    """
    if settings is None:
        check = run_settings.check_setting
        settings = _resolved(
            check("trainer", trainer),
            check("trunc_length", trunc_length),
            check("total_length", total_length),
            check("num_tasks", num_tasks),
            std=check("std", std),
            meta_loss_split=meta_loss_split,
            meta_loss_weighting=meta_loss_weighting,
            meta_loss_window=meta_loss_window,
            meta_loss_power=check("meta_loss_power", meta_loss_power),
            meta_loss_transform=meta_loss_transform,
            outer_lr=None if theta_opt is not None else check("outer_lr", outer_lr),
            max_grad_norm=check("max_grad_norm", max_grad_norm),
            family_balance=check("family_balance", family_balance),
            steps=steps,
            init_theta=check("init_theta", init_theta),
            freeze=check("freeze", freeze),
            data_dir=data_dir,
        )
    tasks = list(task) if isinstance(task, list | tuple) else [task]
    if not tasks:
        raise ValueError("task: an empty list of tasks")
    tasks, lopt = [build_task(t, settings.data_dir) for t in tasks], build_lopt(lopt)
    estimators = [_estimator(settings, t, lopt) for t in tasks]
    mesh = resolve_mesh(mesh)
    for est in estimators if mesh is not None else ():
        if getattr(est, "stack_antithetic_samples", False):
            # Split over devices, a stacked +/- population is resharded at every step
            # (dozens of collectives); unstacked, each device keeps its pairs. Same maths.
            est.stack_antithetic_samples = False
    return gradient_learner.SingleMachineGradientLearner(
        lopt,
        estimators,
        theta_opt if theta_opt is not None else opt_base.Adam(settings.outer_lr),
        num_steps=settings.steps,
        max_grad_norm=settings.max_grad_norm,
        balance=settings.family_balance or "mean",
        mesh=mesh,
        init_theta_from_path=initial_theta(lopt, settings.init_theta),
        frozen_keys=frozen_keys(lopt, settings.freeze),
    )
