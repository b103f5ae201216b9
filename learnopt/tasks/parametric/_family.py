"""Plumbing shared by the parametric task families (not public API)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base
from learnopt.tasks.fixed import _common, _language
from learnopt.tasks.parametric import cfgobject, parametric_utils


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

    def sample(self, key: jax.Array):
        """Draws, traced, an activation and a weight initializer with its scale.

        Args:
          key: a PRNG key.

        Returns:
          A ``CFGNamed`` (named after the class) with ``initializer`` and ``activation``
          (see :class:`~learnopt.tasks.parametric.parametric_utils.SampleInitializer`
          and :class:`~learnopt.tasks.parametric.parametric_utils.SampleActivation`).
        """
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

        Args and returns as in :meth:`~learnopt.tasks.base.TaskFamily.task_fn`; the task is a
        ``SampledImageClassifier`` named ``<family name>_sample``.
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


def host_sampler(fn: Callable[[jax.Array], Any]) -> Callable[[jax.Array], Any]:
    """Registers a host-side sampler of family configurations as configurable.

    Its docstring (one line: which family) gets the ``Args:`` and ``Returns:`` all these
    samplers share.

    Args:
      fn: ``key -> CFGObject``, drawing a family configuration from a concrete key.

    Returns:
      ``fn``, registered with :func:`~learnopt.tasks.parametric.cfgobject.configurable`.
    """
    fn.__doc__ = (
        f"{fn.__doc__}\n\n"
        "Args:\n"
        "  key: a concrete PRNG key.\n\n"
        "Returns:\n"
        "  A :class:`~learnopt.tasks.parametric.cfgobject.CFGObject` of the family\n"
        "  (``object_from_config`` builds it).\n"
    )
    return cfgobject.configurable(fn)


def image_config(
    family: str,
    values: dict[str, Any],
    *,
    image_key: jax.Array,
    batch_key: jax.Array,
    dataset_key: jax.Array,
    num_classes: bool = True,
) -> cfgobject.CFGObject:
    """A sampled image family's configuration: ``values`` plus the sampled data.

    Draws, as the library did, the image size (4-32, square), the batch size (4-512) and
    one of the offline image datasets.

    Args:
      family: the configurable family's name.
      values: the model's configuration (before ``num_classes`` and ``datasets``).
      image_key, batch_key, dataset_key: concrete PRNG keys of each draw.
      num_classes: whether the family takes ``num_classes`` (the dataset's).

    Returns:
      The ``CFGObject`` of ``family``.
    """
    lf = cfgobject.LogFeature
    image_size = parametric_utils.log_int(image_key, 4, 32)
    batch_size = parametric_utils.log_int(batch_key, 4, 512)
    dataset = parametric_utils.SampleImageDataset.sample(dataset_key)
    if num_classes:
        values = {**values, "num_classes": parametric_utils.SampleImageDataset.num_classes(dataset)}
    data = {"image_size": lf((image_size, image_size)), "batch_size": lf(batch_size)}
    return cfgobject.CFGObject(family, {**values, "datasets": cfgobject.CFGObject(dataset, data)})


def mlp_config(key: jax.Array, family: str, widths: str, num_classes: bool) -> cfgobject.CFGObject:
    """A sampled MLP family's configuration: 0-4 hidden layers of one width in 8-128.

    Args:
      key: a concrete PRNG key.
      family: the configurable family's name.
      widths: the name of its hidden-widths argument.
      num_classes: whether the family takes ``num_classes`` (see :func:`image_config`).

    Returns:
      The ``CFGObject`` of ``family``.
    """
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    hidden_size = parametric_utils.log_int(k1, 8, 128)
    num_layers = parametric_utils.choice(k2, [0, 1, 2, 3, 4])
    return image_config(
        family,
        {widths: cfgobject.LogFeature(num_layers * [hidden_size])},
        image_key=k3,
        batch_key=k4,
        dataset_key=k5,
        num_classes=num_classes,
    )


def lm_config(
    family: str,
    values: dict[str, Any],
    batch_key: jax.Array,
    sequence_key: jax.Array,
    vocab_key: jax.Array,
) -> cfgobject.CFGObject:
    """A sampled LM family's configuration: ``values`` plus the sampled data.

    Draws, as the library did, the batch size and sequence length (4-512) and the
    vocabulary (100-10000, folded onto the data's) of the offline byte corpus.

    Args:
      family: the configurable family's name.
      values: the model's configuration (after ``vocab_size``, before ``datasets``).
      batch_key, sequence_key, vocab_key: concrete PRNG keys of each draw.

    Returns:
      The ``CFGObject`` of ``family``.
    """
    lf = cfgobject.LogFeature
    batch_size = parametric_utils.log_int(batch_key, 4, 512)
    sequence_length = parametric_utils.log_int(sequence_key, 4, 512)
    vocab_size = parametric_utils.log_int(vocab_key, 100, 10000)
    data = {"sequence_length": lf(sequence_length), "batch_size": lf(batch_size)}
    return cfgobject.CFGObject(
        family,
        {
            "vocab_size": lf(vocab_size),
            **values,
            "datasets": cfgobject.CFGObject("pystdlib_bytes_datasets", data),
        },
    )


class SampledLM(_language.LanguageModelTask):
    """A sampled language model: ``module`` under the library's parametric normalizer.

    Args:
      module: the ``flax.linen`` LM (token ids to logits).
      datasets: language datasets or a factory.
      **kwargs: as :class:`~learnopt.tasks.fixed._language.LanguageModelTask`'s.
    """

    def __init__(self, module: nn.Module, datasets: Any, **kwargs: Any):
        super().__init__(datasets, **kwargs)
        self._module = module

    def make_module(self) -> nn.Module:
        """The module given at construction."""
        return self._module

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """As :meth:`SampledImageClassifier.normalizer`, with the vocabulary as the classes."""
        return parametric_utils.parametric_normalizer(loss, self.vocab_size)


def lm_shape(datasets: Any) -> dict[str, int]:
    """The batch shape and vocabulary of language datasets.

    Args:
      datasets: language datasets (``abstract_batch["obs"]`` and
        ``extra_info["vocab_size"]``).

    Returns:
      ``{"batch_size", "sequence_length", "data_vocab_size"}`` as ints.
    """
    obs = datasets.abstract_batch["obs"]
    return {
        "batch_size": int(obs.shape[0]),
        "sequence_length": int(obs.shape[1]),
        "data_vocab_size": int(datasets.extra_info["vocab_size"]),
    }


class LMFamily(tasks_base.TaskFamily):
    """A family of language models of one shape; subclasses define :meth:`make_module`.

    Args:
      datasets: a language Datasets or a factory (called at once: no data is loaded).
      vocab_size: the model's vocabulary (None: the data's); larger ids are folded.
      name: the family's name (default: the class name).
    """

    def __init__(self, datasets: Any, vocab_size: int | None, name: str | None):
        self.datasets = resolve_datasets(datasets)
        self.vocab_size = vocab_size
        self._name = name

    def make_module(self, cfg: Any, vocab_size: int) -> nn.Module:
        """The LM for ``cfg`` (subclasses define it).

        Args:
          cfg: a configuration drawn by :meth:`sample` (its arrays may be traced).
          vocab_size: the model's vocabulary.

        Returns:
          A ``flax.linen`` module mapping token ids ``[B, T]`` to logits.
        """
        raise NotImplementedError

    def task_fn(self, cfg: Any) -> tasks_base.Task:
        """The LM of :meth:`make_module` for ``cfg`` on this family's datasets.

        Args and returns as in :meth:`~learnopt.tasks.base.TaskFamily.task_fn`; the task is a
        ``SampledLM`` named ``<family name>_sample``.
        """
        shape = lm_shape(self.datasets)
        vocab = int(self.vocab_size or shape["data_vocab_size"])
        module = self.make_module(cfg, vocab)
        return SampledLM(
            module, self.datasets, vocab_size=vocab, name=f"{self.name}_sample", **shape
        )
