"""Plumbing shared by the parametric task families (not public API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed import _common
from learnopt.tasks.parametric import parametric_utils


def resolve_datasets(datasets: Any) -> datasets_base.Datasets:
    """A Datasets (factories are called: constructing a Datasets does not load data).

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets` or a zero-argument
        callable returning one.

    Returns:
      The Datasets.

    Raises:
      TypeError: ``datasets`` is neither.
    """
    if isinstance(datasets, datasets_base.Datasets):
        return datasets
    if callable(datasets):
        return datasets()
    raise TypeError(f"datasets must be a Datasets or a callable returning one, got {datasets!r}")


def image_info(datasets: datasets_base.Datasets) -> tuple[tuple[int, int, int], int, int]:
    """``(image shape, batch size, num_classes)`` from a Datasets' static facts.

    Args:
      datasets: image-classification datasets (``abstract_batch["image"]`` and
        ``extra_info["num_classes"]``).

    Returns:
      ``((H, W, C), batch_size, num_classes)``.
    """
    image = datasets.abstract_batch["image"]
    return (
        tuple(int(s) for s in image.shape[1:]),
        int(image.shape[0]),
        int(datasets.extra_info["num_classes"]),
    )


class SampledImageClassifier(_common.ImageClassifierTask):
    """A sampled classifier: the library's parametric normalizer."""

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """The library's normalizer of sampled classifiers.

        See :func:`~learnopt.tasks.parametric.parametric_utils.parametric_normalizer`.

        Args:
          loss: a loss of this task.

        Returns:
          The normalized loss.
        """
        return parametric_utils.parametric_normalizer(loss, self.num_classes)


class ImageFamily(tasks_base.TaskFamily):
    """A family of image classifiers with sampled activation and initializer.

    Subclasses define :meth:`make_module`.

    Args:
      datasets: a Datasets or a factory (called at once: no data is loaded).
      num_classes: output width (default: the dataset's).
      name: the family's name (default: the class name).
    """

    def __init__(self, datasets: Any, num_classes: int | None = None, name: str | None = None):
        self.datasets = resolve_datasets(datasets)
        self.image_shape, self.batch_size, data_classes = image_info(self.datasets)
        self.num_classes = int(num_classes if num_classes is not None else data_classes)
        self._name = name

    @property
    def name(self) -> str:
        return self._name or type(self).__name__

    def sample(self, key: jax.Array):
        """Draws, traced, an activation and a weight initializer with its scale.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` (named after the class) with ``initializer`` and ``activation``
          (see :class:`~learnopt.tasks.parametric.parametric_utils.SampleInitializer`
          and :class:`~learnopt.tasks.parametric.parametric_utils.SampleActivation`).
        """
        from learnopt.tasks.parametric import cfgobject

        act_key, init_key = jax.random.split(key)
        return cfgobject.CFGNamed(
            type(self).__name__,
            {
                "initializer": parametric_utils.SampleInitializer.sample(init_key),
                "activation": parametric_utils.SampleActivation.sample(act_key),
            },
        )

    def make_module(self, act: Callable, init: Callable) -> nn.Module:
        """The classifier with activation ``act`` and weight initializer ``init`` (subclasses).

        Args:
          act: the activation (a traced choice).
          init: a Flax initializer ``(key, shape, dtype) -> array`` (a traced choice).

        Returns:
          A ``flax.linen`` module mapping images ``[B, H, W, C]`` to logits.
        """
        raise NotImplementedError

    def task_fn(self, cfg: Any) -> tasks_base.Task:
        """The classifier for ``cfg`` on this family's datasets.

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).

        Returns:
          A ``SampledImageClassifier`` (a task) named ``<family name>_sample``.
        """
        values = cfg.values
        act = parametric_utils.SampleActivation.get_dynamic(values["activation"])
        init = parametric_utils.SampleInitializer.get_dynamic(values["initializer"])
        module = self.make_module(act, init)
        return SampledImageClassifier(
            lambda: module,
            self.datasets,
            image_shape=self.image_shape,
            num_classes=self.num_classes,
            batch_size=self.batch_size,
            name=f"{self.name}_sample",
        )

    def __repr__(self) -> str:
        return f"{self.name}()"


def lm_normalizer(loss: jax.Array, vocab_size: int) -> jax.Array:
    """The library's normalizer of sampled LMs, with the vocabulary as the classes.

    See :func:`~learnopt.tasks.parametric.parametric_utils.parametric_normalizer`.

    Args:
      loss: a loss of the LM.
      vocab_size: the model's vocabulary size (the number of classes).

    Returns:
      The normalized loss.
    """
    return parametric_utils.parametric_normalizer(loss, vocab_size)
