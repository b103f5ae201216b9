"""Reduced batch size: the task on the first ``fraction`` of every batch.

The same data iterators, with smaller batches: :class:`ReducedBatchsizeTask` and
:class:`ReducedBatchsizeFamily` keep ``max(1, int(n * fraction))`` of each batch of
``n`` examples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from learnopt.tasks import base as tasks_base
from learnopt.tasks.augmentations.wrapping import _FamilyWrapper, _TaskWrapper
from learnopt.tasks.datasets import base as datasets_base

__all__ = ["ReducedBatchsizeFamily", "ReducedBatchsizeTask"]


class _MappedSplit:
    """A split whose batches (``next``) and stacks of batches (``take``) are transformed."""

    def __init__(self, split: Any, fn: Callable[[Any, int], Any]):
        self._split = split
        self._fn = fn  # fn(batch, number of leading stack axes)

    def __iter__(self):
        return self

    def __next__(self):
        return self._fn(next(self._split), 0)

    def take(self, *shape: int):
        return self._fn(self._split.take(*shape), len(shape))

    def get_state(self) -> Any:
        """The wrapped split's position (AttributeError if it cannot report one)."""
        return self._split.get_state()

    def set_state(self, state: Any) -> None:
        self._split.set_state(state)


def _reduced_datasets(datasets: Any, fraction: float) -> datasets_base.Datasets:
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction_of_batchsize must be in (0, 1], got {fraction}")

    def size(n: int) -> int:
        return max(1, int(n * fraction))

    def reduce(batch: Any, lead: int) -> Any:
        return jax.tree_util.tree_map(
            lambda x: x[(slice(None),) * lead + (slice(0, size(x.shape[lead])),)], batch
        )

    abstract = jax.tree_util.tree_map(
        lambda s: jax.ShapeDtypeStruct((size(s.shape[0]), *s.shape[1:]), s.dtype),
        datasets.abstract_batch,
    )
    splits = [_MappedSplit(getattr(datasets, s), reduce) for s in datasets_base.SPLITS]
    info = dict(datasets.extra_info)
    if "batch_size" in info:
        info["batch_size"] = size(info["batch_size"])
    return datasets_base.Datasets(*splits, extra_info=info, abstract_batch=abstract)


class ReducedBatchsizeTask(_TaskWrapper):
    """The task on the first ``fraction_of_batchsize`` of every batch (at least one).

    Args:
      task: the task to wrap (it needs ``datasets``).
      fraction_of_batchsize: the kept fraction of each batch, in ``(0, 1]``; a batch of
        ``n`` keeps ``max(1, int(n * fraction_of_batchsize))`` examples.
    """

    def __init__(self, task: tasks_base.Task, fraction_of_batchsize: float):
        super().__init__(task)
        self.fraction_of_batchsize = float(fraction_of_batchsize)
        self._datasets = _reduced_datasets(task.datasets, self.fraction_of_batchsize)

    @property
    def datasets(self):
        """The wrapped task's datasets with every batch cut to the reduced size."""
        return self._datasets


class ReducedBatchsizeFamily(_FamilyWrapper):
    """A family on the first ``fraction_of_batchsize`` of every batch.

    Args:
      task_family: the family to wrap (it needs ``datasets``).
      fraction_of_batchsize: the kept fraction of each batch, in ``(0, 1]`` (at least one
        example is kept).
    """

    def __init__(self, task_family: tasks_base.TaskFamily, fraction_of_batchsize: float):
        super().__init__(task_family, f"ReducedBatchsize_{task_family.name}")
        self.fraction_of_batchsize = float(fraction_of_batchsize)
        self.datasets = _reduced_datasets(task_family.datasets, self.fraction_of_batchsize)

    def sample(self, key):
        """The wrapped family's configuration.

        Args:
          key: a PRNG key.

        Returns:
          ``task_family.sample(key)``.
        """
        return self.task_family.sample(key)

    def task_fn(self, cfg):
        """The wrapped family's task, unchanged.

        The smaller batches come from this family's ``datasets``.

        Args:
          cfg: a configuration drawn by :meth:`sample`.

        Returns:
          ``task_family.task_fn(cfg)``.
        """
        return self.task_family.task_fn(cfg)
