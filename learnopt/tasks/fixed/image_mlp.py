"""MLP image classifiers in plain JAX, and the fixed ``ImageMLP_*`` tasks.

Parameters are a nested dict with one ``{"w": [fan_in, fan_out], "b": [fan_out]}`` per
layer, ``linear_0`` ... ``linear_{L}`` (the last maps to the classes). ``w`` is drawn
from a normal truncated at two standard deviations with scale ``1 / sqrt(fan_in)``
(Haiku's ``hk.Linear`` default, which the notes' library used) and ``b`` is zero, both
in ``param_dtype`` (float32 by default).

The loss is the mean softmax cross-entropy of the flattened image. Matmuls run in each
layer's parameter dtype (so bfloat16 params give bfloat16 matmuls); the log-softmax and
the mean run in at least float32, so the returned loss is float32 for bfloat16,
float16 and float32 params and float64 for float64 params.

The registered tasks build their datasets lazily: constructing one is cheap and needs
no data; ``task.datasets`` is created on first access (raising
:class:`learnopt.tasks.datasets.base.DatasetNotFoundError` at once if the data is
missing) and the data itself is prepared/loaded at the first batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from learnopt.tasks import base as tasks_base
from learnopt.tasks.datasets import base as datasets_base

__all__ = [
    "ImageMLPTask",
    "ImageMLP_Digits8_Relu32",
    "ImageMLP_FashionMnist8_Relu32",
    "ImageMLP_FashionMnist_Relu32",
    "ImageMLP_Mnist_128x128x128_Relu",
    "ImageMLP_Cifar10_8_Relu32",
]

DatasetsOrFactory = datasets_base.Datasets | Callable[[], datasets_base.Datasets]


class ImageMLPTask(tasks_base.Task):
    """A multi-layer perceptron classifying images.

    Args:
      datasets: a :class:`~learnopt.tasks.datasets.base.Datasets`, or a zero-argument
        callable returning one (called on first access of ``task.datasets``).
      hidden_sizes: widths of the hidden layers.
      act_fn: activation between layers.
      num_classes: output width; default ``datasets.extra_info["num_classes"]``.
      image_shape: ``(H, W, C)`` of one image; default from ``datasets.abstract_batch``.
        Give it (and ``num_classes``) with a lazy ``datasets`` so that ``init`` and
        ``loss`` never touch the data.
      param_dtype: dtype of the parameters made by ``init``.
      name: the task's name (default: the class name).
    """

    def __init__(
        self,
        datasets: DatasetsOrFactory,
        hidden_sizes: Sequence[int],
        act_fn: Callable[[jax.Array], jax.Array] = jax.nn.relu,
        num_classes: int | None = None,
        *,
        image_shape: Sequence[int] | None = None,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        self._datasets = datasets if isinstance(datasets, datasets_base.Datasets) else None
        self._datasets_fn = None if self._datasets is not None else datasets
        if self._datasets is None and not callable(datasets):
            raise TypeError(f"datasets must be a Datasets or a callable, got {datasets!r}")
        if num_classes is None:
            num_classes = self.datasets.extra_info["num_classes"]
        if image_shape is None:
            image_shape = self.datasets.abstract_batch["image"].shape[1:]
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.act_fn = act_fn
        self.num_classes = int(num_classes)
        self.image_shape = tuple(int(s) for s in image_shape)
        self.param_dtype = jnp.dtype(param_dtype)
        self._name = name
        if not jnp.issubdtype(self.param_dtype, jnp.floating):
            raise ValueError(f"param_dtype must be a float dtype, got {self.param_dtype}")

    @property
    def datasets(self) -> datasets_base.Datasets:
        if self._datasets is None:
            self._datasets = self._datasets_fn()
        return self._datasets

    @property
    def name(self) -> str:
        return self._name or type(self).__name__

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """``(input, *hidden, classes)``."""
        return (math.prod(self.image_shape), *self.hidden_sizes, self.num_classes)

    def init(self, key: jax.Array) -> dict[str, dict[str, jax.Array]]:
        sizes = self.layer_sizes
        keys = jax.random.split(key, len(sizes) - 1)
        sample_dtype = jnp.promote_types(self.param_dtype, jnp.float32)
        params = {}
        for i, (k, fan_in, fan_out) in enumerate(zip(keys, sizes[:-1], sizes[1:], strict=True)):
            w = jax.random.truncated_normal(k, -2.0, 2.0, (fan_in, fan_out), sample_dtype)
            params[f"linear_{i}"] = {
                "w": (w / math.sqrt(fan_in)).astype(self.param_dtype),
                "b": jnp.zeros((fan_out,), self.param_dtype),
            }
        return params

    def _check_batch(self, batch: Any) -> tuple[jax.Array, jax.Array]:
        try:
            image, label = batch["image"], batch["label"]
        except (TypeError, KeyError, IndexError) as e:
            raise ValueError(
                f"{self.name}: batch must be a dict with 'image' and 'label', got "
                f"{type(batch).__name__}"
            ) from e
        image_shape = tuple(jnp.shape(image))
        if len(image_shape) < 4 or image_shape[-3:] != self.image_shape:
            raise ValueError(
                f"{self.name}: batch['image'] must have shape [batch, "
                f"{', '.join(map(str, self.image_shape))}] (images {self.image_shape}), got "
                f"{image_shape}"
            )
        if tuple(jnp.shape(label)) != image_shape[:-3]:
            raise ValueError(
                f"{self.name}: batch['label'] must have shape {image_shape[:-3]} to match "
                f"batch['image'] {image_shape}, got {tuple(jnp.shape(label))}"
            )
        return image, label

    def logits(self, params: Any, image: jax.Array) -> jax.Array:
        """Logits ``[..., num_classes]`` of images ``[..., H, W, C]``."""
        x = jnp.reshape(image, (*jnp.shape(image)[:-3], -1))
        num_layers = len(self.layer_sizes) - 1
        for i in range(num_layers):
            layer = params[f"linear_{i}"]
            w = layer["w"]
            x = jnp.matmul(x.astype(w.dtype), w) + layer["b"].astype(w.dtype)
            if i < num_layers - 1:
                x = self.act_fn(x)
        return x

    def loss(self, params: Any, key: jax.Array, batch: Any) -> jax.Array:
        del key  # deterministic model
        image, label = self._check_batch(batch)
        logits = self.logits(params, image)
        logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
        log_probs = jax.nn.log_softmax(logits, axis=-1)
        label = jnp.asarray(label).astype(jnp.int32)
        nll = -jnp.take_along_axis(log_probs, label[..., None], axis=-1)[..., 0]
        return jnp.mean(nll)

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """Clips the loss to ``[0, 1.5 * log(num_classes)]`` (1.5x the loss at chance)."""
        return jnp.clip(loss, 0.0, 1.5 * math.log(self.num_classes))

    def __repr__(self) -> str:
        return f"{self.name}()"


# ------------------------------------------------------------------ registered tasks


class _FixedImageMLP(ImageMLPTask):
    """A registered zero-argument ImageMLP task with lazily created datasets."""

    dataset: str
    image_size: tuple[int, int] | None
    hidden: tuple[int, ...]
    batch_size: int = 128

    def __init__(self):
        spec = datasets_base.dataset_spec(self.dataset)
        size = self.image_size or spec.image_shape[:2]
        dataset, batch_size = self.dataset, self.batch_size

        def make_datasets() -> datasets_base.Datasets:
            return datasets_base.image_classification_datasets(
                dataset, image_size=size, batch_size=batch_size
            )

        super().__init__(
            make_datasets,
            self.hidden,
            jax.nn.relu,
            spec.num_classes,
            image_shape=(*size, spec.image_shape[2]),
        )


@tasks_base.register_task
class ImageMLP_Digits8_Relu32(_FixedImageMLP):
    """scikit-learn's 8x8 digits (embedded, offline), MLP 64-32-10, ReLU, batch 128."""

    dataset, image_size, hidden = "digits8", (8, 8), (32,)


@tasks_base.register_task
class ImageMLP_FashionMnist8_Relu32(_FixedImageMLP):
    """Fashion-MNIST resized to 8x8, MLP 64-32-10, ReLU, batch 128."""

    dataset, image_size, hidden = "fashion_mnist", (8, 8), (32,)


@tasks_base.register_task
class ImageMLP_FashionMnist_Relu32(_FixedImageMLP):
    """Fashion-MNIST 28x28, MLP 784-32-10, ReLU, batch 128."""

    dataset, image_size, hidden = "fashion_mnist", None, (32,)


@tasks_base.register_task
class ImageMLP_Mnist_128x128x128_Relu(_FixedImageMLP):
    """MNIST 28x28, MLP 784-128-128-128-10, ReLU, batch 128."""

    dataset, image_size, hidden = "mnist", None, (128, 128, 128)


@tasks_base.register_task
class ImageMLP_Cifar10_8_Relu32(_FixedImageMLP):
    """CIFAR-10 resized to 8x8x3, MLP 192-32-10, ReLU, batch 128."""

    dataset, image_size, hidden = "cifar10", (8, 8), (32,)
