"""Smoke tests for tasks, learned optimizers and gradient estimators (the library's helpers).

The notes' library's tests import ``tasks.test_utils.smoketest_task`` /
``smoketest_task_family``, ``learned_optimizers.test_utils.smoketest_learned_optimizer``
and ``outer_trainers.test_utils.trainer_smoketest``; learnopt re-exports the functions
below at those paths (:mod:`learnopt.tasks.test_utils`,
:mod:`learnopt.learned_optimizers.test_utils`, :mod:`learnopt.outer_trainers.test_utils`)
so that such tests port with the import prefix changed. Each one runs its object once
through the calls people make and raises if something is malformed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from learnopt.learned_optimizers import base as lopt_base
from learnopt.outer_trainers import gradient_learner
from learnopt.tasks import base as tasks_base
from learnopt.testing.optimizers import smoketest_optimizer

__all__ = [
    "smoketest_task",
    "smoketest_task_family",
    "smoketest_learned_optimizer",
    "trainer_smoketest",
]


def _first_batch(task: tasks_base.Task, abstract_data: bool) -> Any:
    datasets = task.datasets
    if datasets is None:
        return ()
    abstract = getattr(datasets, "abstract_batch", None)
    if abstract_data and abstract is not None:
        return jax.tree_util.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), abstract)
    return next(datasets.train)


def smoketest_task(task: tasks_base.Task, abstract_data: bool = True) -> None:
    """Initializes ``task`` and evaluates its loss, gradient, normalizer and aux loss.

    Args:
      task: the task to check.
      abstract_data: use zeros shaped like ``task.datasets.abstract_batch`` (no files
        are read) instead of the first training batch.

    Raises:
      AssertionError: the loss is not a finite scalar.
    """
    key = jax.random.PRNGKey(0)
    params, state = task.init_with_state(key)
    batch = _first_batch(task, abstract_data)
    loss, _ = task.loss_with_state(params, state, key, batch)
    if np.shape(loss) != () or not np.isfinite(np.asarray(loss, np.float32)):
        raise AssertionError(f"task {task.name}: loss {loss!r} is not a finite scalar")
    grads, _ = jax.grad(task.loss_with_state, has_aux=True)(params, state, key, batch)
    if jax.tree_util.tree_structure(grads) != jax.tree_util.tree_structure(params):
        raise AssertionError(f"task {task.name}: gradients do not have the params' structure")
    task.normalizer(jnp.asarray(1.0))
    task.loss_with_state_and_aux(params, state, key, batch)


def smoketest_task_family(task_family: tasks_base.TaskFamily) -> None:
    """Samples two tasks of ``task_family`` and smoke-tests each (:func:`smoketest_task`).

    Args:
      task_family: the family to check.

    Raises:
      AssertionError: a sampled task has datasets but the family has none.
    """
    key = jax.random.PRNGKey(0)
    for k in jax.random.split(key, 2):
        task = task_family.task_fn(task_family.sample(k))
        smoketest_task(task)
        if task.datasets is not None and task_family.datasets is None:
            raise AssertionError(f"family {task_family.name}: its tasks have data, it has none")


def smoketest_learned_optimizer(
    learned_optimizer: lopt_base.LearnedOptimizer, strict_types: bool = True
) -> None:
    """Smoke-tests the optimizer of ``learned_optimizer`` at its initial ``theta``.

    Args:
      learned_optimizer: the learned optimizer to check.
      strict_types: passed to :func:`~learnopt.testing.optimizers.smoketest_optimizer`.
    """
    theta = learned_optimizer.init(jax.random.PRNGKey(0))
    smoketest_optimizer(learned_optimizer.opt_fn(theta), strict_types=strict_types)


def trainer_smoketest(trainer: Any) -> None:
    """Computes one gradient estimate of ``trainer`` in the library's calling convention.

    Args:
      trainer: a gradient estimator with a ``truncated_step`` (e.g. ``TruncatedPES``).

    Raises:
      AssertionError: the estimate's meta-gradient is not finite.
    """
    key = jax.random.PRNGKey(0)
    theta = trainer.truncated_step.outer_init(key)
    weights = gradient_learner.WorkerWeights(
        theta, None, gradient_learner.OuterState(jnp.asarray(1, jnp.int32))
    )
    state = trainer.init_worker_state(weights, key=key)
    out, _ = trainer.compute_gradient_estimate(weights, key, state, with_summary=True)
    for leaf in jax.tree_util.tree_leaves(out.grad):
        if not np.all(np.isfinite(np.asarray(leaf, np.float32))):
            raise AssertionError(f"{type(trainer).__name__}: the meta-gradient is not finite")
