"""Populations of inner runs split over the devices of a mesh.

A learner with a one-axis ``jax.sharding.Mesh`` splits every estimator's population of
inner runs (the leading ``[num_tasks]`` axis of its states, axis 1 of its batches
``[steps, num_tasks, ...]``) over the mesh's devices and replicates everything else
(``theta``, the outer optimizer's state). Over the devices of several processes, each
process draws only its own rows of the batches; :func:`global_datas` assembles them into
global arrays.
"""

from __future__ import annotations

from typing import Any

import jax

from learnopt.outer_trainers.gradient_estimator import GradientEstimator

PyTree = Any

__all__ = [
    "check_mesh",
    "replicated",
    "by_population",
    "estimator_shardings",
    "abstract_datas",
    "global_datas",
    "global_shape",
]


def check_mesh(mesh: jax.sharding.Mesh, estimators: tuple) -> None:
    """Raises ValueError unless ``mesh`` has one axis that divides every population.

    Args:
      mesh: the mesh to split the populations over.
      estimators: the gradient estimators (each with a ``truncated_step.num_tasks``).

    Returns:
      None.
    """
    if len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must have one axis (the population), got {mesh.axis_names}")
    for est in estimators:
        n = est.truncated_step.num_tasks
        if n % mesh.size:
            raise ValueError(
                f"{est.name}: num_tasks={n} is not a multiple of the {mesh.size} devices "
                "of the mesh"
            )


def replicated(mesh: jax.sharding.Mesh) -> jax.sharding.NamedSharding:
    """The sharding that puts a whole copy on every device of ``mesh``.

    Args:
      mesh: the mesh.

    Returns:
      A replicated ``NamedSharding``.
    """
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())


def by_population(
    mesh: jax.sharding.Mesh, tree: PyTree, est: GradientEstimator, dim: int
) -> PyTree:
    """Shardings of ``tree``: axis ``dim`` split where its size is the population.

    Args:
      mesh: the one-axis mesh.
      tree: arrays or shapes (anything with ``ndim`` and ``shape``).
      est: the estimator whose ``truncated_step.num_tasks`` is the population size.
      dim: the population axis (0 for states, 1 for batches).

    Returns:
      A tree of ``NamedSharding`` s like ``tree``: split over the mesh on axis ``dim``
      for leaves whose axis ``dim`` is the population, replicated elsewhere.
    """
    n = est.truncated_step.num_tasks
    spec = jax.sharding.PartitionSpec(*((None,) * dim + (mesh.axis_names[0],)))
    split = jax.sharding.NamedSharding(mesh, spec)
    whole = replicated(mesh)
    return jax.tree_util.tree_map(
        lambda x: split if x.ndim > dim and x.shape[dim] == n else whole, tree
    )


def estimator_shardings(mesh: jax.sharding.Mesh, est_states: tuple, estimators: tuple) -> tuple:
    """The shardings of the estimators' states (population axis 0 split).

    Args:
      mesh: the one-axis mesh.
      est_states: one state (or its shapes) per estimator.
      estimators: the gradient estimators.

    Returns:
      A tuple of sharding trees, one per estimator.
    """
    return tuple(
        by_population(mesh, st, est, 0) for st, est in zip(est_states, estimators, strict=True)
    )


def global_shape(x: Any, est: GradientEstimator) -> tuple[int, ...]:
    """The global shape of a leaf of this process's batch rows (``[steps, rows, ...]``).

    Args:
      x: a leaf of the batches this process drew.
      est: its estimator (whose ``truncated_step.local_rows`` this process drew).

    Returns:
      The shape of the whole population's leaf.
    """
    start, stop = est.truncated_step.local_rows
    shape = tuple(x.shape)
    if len(shape) > 1 and shape[1] == stop - start:
        return (shape[0], est.truncated_step.num_tasks, *shape[2:])
    return shape


def abstract_datas(datas: tuple, estimators: tuple, multiprocess: bool) -> tuple:
    """Shapes and dtypes of one step's batches (of the whole population).

    Args:
      datas: one step's batches, one entry per estimator.
      estimators: the gradient estimators.
      multiprocess: whether this process drew only its own rows (axis 1 of population
        leaves).

    Returns:
      ``datas`` as ``jax.ShapeDtypeStruct`` s of the global shapes.
    """
    if multiprocess:
        return tuple(
            jax.tree_util.tree_map(
                lambda x, est=est: jax.ShapeDtypeStruct(global_shape(x, est), x.dtype), d
            )
            for d, est in zip(datas, estimators, strict=True)
        )
    return jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), datas)


def global_datas(datas: tuple, data_sharding: tuple, estimators: tuple) -> tuple:
    """This process's batch rows as global arrays of the whole population's batches.

    Args:
      datas: the batches this process drew, one entry per estimator.
      data_sharding: their shardings (from :func:`by_population` with ``dim=1``).
      estimators: the gradient estimators.

    Returns:
      ``datas`` as global ``jax.Array`` s (replicated leaves as they are).
    """

    def put(x, sharding, est):
        if sharding.is_fully_replicated:
            return x  # the same on every process
        return jax.make_array_from_process_local_data(sharding, x, global_shape(x, est))

    return tuple(
        jax.tree_util.tree_map(lambda x, s, est=est: put(x, s, est), d, sh)
        for d, sh, est in zip(datas, data_sharding, estimators, strict=True)
    )
