"""Fully connected image auto-encoders (Flax), and the fixed ``ImageMLPAE_*`` tasks.

The flattened image ``x`` (pixels in ``[0, 1]``) goes through an MLP with the hidden
widths of the task's name and an output as wide as the input (the activation between
layers, none after the last); the reconstruction is ``sigmoid`` of the output and the
loss is the mean squared error ``mean((x - sigmoid(mlp(x)))^2)`` over pixels and batch,
as in the notes' library. ``normalizer`` clips the loss to ``[0, 1]``.

Names: ``ImageMLPAE_<dataset>_<hidden widths>_bs<batch size>``. The CIFAR-10, MNIST and
Fashion-MNIST tasks are the library's and need their files; ``Mnist5k`` and ``Digits8``
run offline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from learnopt.tasks.fixed import _common

__all__ = ["ImageMLPAETask"]


class ImageMLPAETask(_common.FlaxModelTask):
    """An MLP auto-encoder of the images of a registered dataset.

    Args:
      dataset: dataset name (``"cifar10"``, ``"mnist"``, ``"digits8"``, ...).
      hidden_sizes: widths of the hidden layers (the output is the flattened image).
      activation: applied between layers (default ReLU).
      image_size: ``(H, W)`` the images are resized to (default: native).
      batch_size: examples per batch.
      param_dtype: float dtype of the parameters made by ``init`` (default float32).
      name: the task's name (default: the class name).
    """

    def __init__(
        self,
        dataset: str,
        hidden_sizes: Sequence[int],
        activation: Callable[[jax.Array], jax.Array] = jax.nn.relu,
        *,
        image_size: tuple[int, int] | None = None,
        batch_size: int = 128,
        param_dtype: Any = jnp.float32,
        name: str | None = None,
    ):
        make, image_shape, _ = _common.image_datasets_factory(dataset, image_size, batch_size)
        super().__init__(
            make,
            _common.image_abstract_batch(batch_size, image_shape),
            param_dtype=param_dtype,
            name=name,
        )
        self.hidden_sizes = tuple(int(h) for h in hidden_sizes)
        self.image_shape = image_shape
        self._module = _common.MLP((*self.hidden_sizes, math.prod(image_shape)), activation)

    def make_module(self) -> nn.Module:
        """The auto-encoder MLP (one module, built in the constructor).

        Returns:
          An :class:`~learnopt.tasks.fixed._common.MLP` of widths ``(*hidden, H * W * C)``.
        """
        return self._module

    def model_input(self, batch: Any) -> jax.Array:
        """The batch's images.

        Args:
          batch: ``{"image": [B, H, W, C], ...}``.

        Returns:
          ``batch["image"]``.
        """
        return batch["image"]

    def loss_from_output(self, output: jax.Array, batch: Any) -> jax.Array:
        """``mean((x - sigmoid(output))^2)`` over pixels and batch, ``x`` the flattened images.

        Args:
          output: the MLP's output ``[B, H * W * C]``.
          batch: the batch.

        Returns:
          A scalar, in at least float32.
        """
        x = jnp.reshape(batch["image"], (batch["image"].shape[0], -1))
        output = output.astype(jnp.promote_types(output.dtype, jnp.float32))
        return jnp.mean(jnp.square(x - jax.nn.sigmoid(output)))

    def normalizer(self, loss: jax.Array) -> jax.Array:
        """Clips the loss to ``[0, 1]``.

        Args:
          loss: a loss of this task.

        Returns:
          The clipped loss.
        """
        return jnp.clip(loss, 0.0, 1.0)


def _register(
    name: str, dataset: str, hidden: Sequence[int], batch_size: int, note: str = ""
) -> None:
    def make(param_dtype: Any = jnp.float32) -> ImageMLPAETask:
        return ImageMLPAETask(
            dataset, hidden, batch_size=batch_size, param_dtype=param_dtype, name=name
        )

    widths = "-".join(map(str, hidden))
    doc = f"MLP auto-encoder of {dataset} images, hidden {widths}, ReLU, batch {batch_size}{note}."
    _common.publish(globals(), name, make, _common.factory_doc(doc, "ImageMLPAETask"))


_register("ImageMLPAE_Cifar10_32x32x32_bs128", "cifar10", (32, 32, 32), 128)
_register("ImageMLPAE_Cifar10_256x256x256_bs128", "cifar10", (256, 256, 256), 128)
_register("ImageMLPAE_Cifar10_256x256x256_bs1024", "cifar10", (256, 256, 256), 1024)
_register("ImageMLPAE_Cifar10_128x32x128_bs256", "cifar10", (128, 32, 128), 256)
_register("ImageMLPAE_Mnist_128x32x128_bs128", "mnist", (128, 32, 128), 128)
_register("ImageMLPAE_FashionMnist_128x32x128_bs128", "fashion_mnist", (128, 32, 128), 128)
_register("ImageMLPAE_Mnist5k_128x32x128_bs128", "mnist5k", (128, 32, 128), 128, " (offline)")
_register("ImageMLPAE_Digits8_32x8x32_bs128", "digits8", (32, 8, 32), 128, " (offline)")
